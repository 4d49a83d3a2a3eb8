"""The 2025-era MCP protocol (2025-11-25, 2025-06-18, 2025-03-26) served beside 2026-07-28 on the same dispatcher.

A 2025-era client opens a session with ``initialize``, names it on later requests, and answers the server's own
JSON-RPC requests (``elicitation/create``, ``sampling/createMessage``, ``roots/list``) while one of its requests
runs. :class:`LegacyProtocol` turns each such request into 2026-07-28 requests and runs them through the one
:class:`~.dispatcher.Dispatcher` pipeline, so every rule of that pipeline (admission, capabilities, sealed state
opened and checked on every round, round limit, expiry) holds for both eras:

1. :func:`is_legacy_message` decides the era of a message (the one home of that rule).
2. ``initialize`` negotiates a 2025 version, translates the declared capabilities to the modern shape
   (:func:`legacy_capabilities`) and creates a :class:`~.sessions.LegacySession`.
3. A session request is rewritten by :func:`modern_request` (``_meta`` with the session's version-independent
   capabilities and the routing headers) and dispatched. When the handler returns ``input_required``, each keyed
   request is sent to the client through the :class:`ClientChannel`, the answers of the round are awaited under
   one deadline, and the same operation is dispatched again with ``inputResponses``, the sealed ``requestState``
   untouched and a fresh request id, until the result is complete or an error ends it.
4. Complete results lose the modern-only members (``resultType``, ``ttlMs``, ``cacheScope``). A failure the
   2025 client could not have caused by its own input (a capability it did not declare, the round limit, a
   round's timeout, its refusal of our request) becomes a ``CallToolResult`` with ``isError`` and a sentence for
   ``tools/call``, and a JSON-RPC error with the same sentence for other methods. Every other error is the
   dispatcher's own answer (code, message, data), sent to the client's id; inside a session it travels with HTTP
   200 (401, 403 and 503 excepted), since a 2025-era client reads a 4xx as a broken transport and 404 as a lost
   session.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import secrets
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from soklet_core.json import (
    JsonArray,
    JsonBoolean,
    JsonNull,
    JsonNumber,
    JsonObject,
    JsonString,
    JsonValue,
    encode_wire,
    parse,
)
from soklet_core.mcp.model import methods
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.context import RequestId
from soklet_core.mcp.model.errors import McpModelError
from soklet_core.mcp.model.input_required_result import RequestStateMode
from soklet_core.mcp.model.registry import Registry
from soklet_core.mcp.server._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    UNSUPPORTED_VERSION,
    McpError,
    capability_names,
    encode_result,
)
from soklet_core.mcp.server._options import (
    DEFAULT_INPUT_TIMEOUT_SECONDS,
    MAX_INPUT_TIMEOUT_SECONDS,
    MIN_INPUT_TIMEOUT_SECONDS,
    ProtocolEras,
)
from soklet_core.mcp.server.engine._dispatcher import (
    Dispatcher,
    DispatchResult,
    HttpRequest,
    encode_header,
)
from soklet_core.mcp.server.legacy._sessions import (
    LegacySession,
    SessionLimitReason,
    SessionsFull,
    SessionTable,
)
from soklet_core.protocol import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    DEFAULT_ENDPOINT_PATH,
    DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS,
    PROTOCOL_VERSION_META_KEY,
)

__all__ = [
    "DEFAULT_INPUT_TIMEOUT_SECONDS",
    "LEGACY_PROTOCOL_VERSIONS",
    "MAX_INITIALIZE_BYTES",
    "MAX_INPUT_TIMEOUT_SECONDS",
    "MIN_INPUT_TIMEOUT_SECONDS",
    "REQUEST_CANCELLED",
    "SESSION_HEADER",
    "SESSION_NOT_FOUND",
    "SESSION_NOT_FOUND_MESSAGE",
    "ClientChannel",
    "LegacyProtocol",
    "LegacyRequest",
    "ProtocolEras",
    "era_from_headers",
    "is_legacy_message",
    "legacy_capabilities",
    "modern_request",
]

#: The 2025-era protocol versions served, preferred first (an unknown requested version gets the first).
LEGACY_PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
#: The HTTP header that names a 2025-era session (lower-case, as the transport hands headers over).
SESSION_HEADER: Final = "mcp-session-id"
#: The largest ``initialize`` body, and the most its capabilities and client info may take together: both are
#: carried in every later request of the session (a real client's initialize is under 2 KiB).
MAX_INITIALIZE_BYTES: Final = 64 * 1024
#: JSON-RPC code of an unknown, expired or foreign session (HTTP 404), as 2025-era servers answer it.
SESSION_NOT_FOUND: Final = -32001
#: Its message.
SESSION_NOT_FOUND_MESSAGE: Final = "Session not found"
#: JSON-RPC code of a request the client cancelled itself (``notifications/cancelled``).
REQUEST_CANCELLED: Final = -32800

# Versions before 2025-11-25 know only form elicitation, written without a "mode" member.
_MODELESS_ELICITATION: Final = frozenset({"2025-06-18", "2025-03-26"})
# Modern-only result members a 2025 client does not know.
_MODERN_ONLY_RESULT_MEMBERS: Final = frozenset({"resultType", "ttlMs", "cacheScope"})
# Statuses a session request keeps from the dispatcher; every other JSON-RPC error of a request inside a session
# is sent with 200, as 2025-era clients read a 4xx as a broken transport (404: the session is gone).
_KEPT_STATUSES: Final = frozenset({200, 401, 403, 503})
# The 2025 methods answered by running a modern request through the dispatcher.
_TRANSLATED: Final = frozenset(
    {
        methods.TOOLS_LIST,
        methods.PROMPTS_LIST,
        methods.RESOURCES_LIST,
        methods.RESOURCES_TEMPLATES_LIST,
        methods.TOOLS_CALL,
        methods.PROMPTS_GET,
        methods.RESOURCES_READ,
        methods.COMPLETION_COMPLETE,
    }
)
_INITIALIZE: Final = "initialize"
_PING: Final = "ping"
_INITIALIZED: Final = "notifications/initialized"
_CANCELLED: Final = "notifications/cancelled"
# The methods the access log may name (never raw client text).
_KNOWN: Final = _TRANSLATED | {_INITIALIZE, _PING, _INITIALIZED, _CANCELLED}
_JSONRPC: Final = JsonString.from_value("2.0")
_FORM: Final = JsonString.from_value("form")
_URL: Final = JsonString.from_value("url")
_NO_INFO: Final = JsonObject.empty_instance()
_INPUT_REQUIRED: Final = JsonString.from_value("input_required")
# How often a round's wait looks whether the client has gone (the transport also cancels the task).
_GONE_CHECK_SECONDS: Final = 1.0


class ClientChannel(Protocol):
    """How the engine reaches the client while one request runs (HTTP: the POST's SSE stream; stdio: stdout)."""

    @property
    def cancelled(self) -> bool:
        """Whether the client has gone."""
        ...

    def send(self, frame: JsonObject) -> None:
        """Queue one JSON-RPC message (a server request or notification) to the client; never blocks."""
        ...


@dataclass(frozen=True, slots=True)
class LegacyRequest:
    """One 2025-era message: the endpoint path, the real headers (lower-case names; ``{}`` on stdio), the parsed
    message, the session it belongs to when the transport knows it (stdio), the body size, and the client's
    address as the transport saw it (``None`` on stdio: the session table counts anonymous sessions per peer)."""

    path: str
    headers: Mapping[str, str]
    message: JsonValue
    session: LegacySession | None = None
    body_bytes: int = 0
    peer: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise ValueError("path must be a path starting with '/'")
        if not isinstance(self.headers, Mapping):
            raise TypeError("headers must be a mapping of lower-case names")
        if not isinstance(self.message, JsonValue):
            raise TypeError("message must be a JsonValue")
        if self.session is not None and not isinstance(self.session, LegacySession):
            raise TypeError("session must be a LegacySession or None")
        if isinstance(self.body_bytes, bool) or not isinstance(self.body_bytes, int) or self.body_bytes < 0:
            raise ValueError("body_bytes must be a non-negative int")
        if self.peer is not None and not isinstance(self.peer, str):
            raise TypeError("peer must be a str or None")


# ------------------------------------------------------------------------------------------------ era detection


def era_from_headers(headers: Mapping[str, str], *, modern_versions: Collection[str]) -> ProtocolEras | None:
    """The era the headers alone decide: LEGACY with a session header, MODERN with an ``MCP-Protocol-Version``
    header naming a modern version and no session header, ``None`` when the body must be read."""
    if SESSION_HEADER in headers:
        return ProtocolEras.LEGACY
    version = headers.get("mcp-protocol-version")
    if version is not None and version.strip() in modern_versions:
        return ProtocolEras.MODERN
    return None


def _meta_version(message: JsonObject) -> JsonValue | None:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, JsonObject) else None
    return meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, JsonObject) else None


def is_legacy_message(
    headers: Mapping[str, str],
    message: JsonValue,
    *,
    modern_versions: Iterable[str],
    legacy_connection: bool = False,
) -> bool:
    """Whether a message belongs to the 2025 era (everything else takes the 2026-07-28 path unchanged).

    Legacy when it carries an ``Mcp-Session-Id`` header; or it is an ``initialize`` without a ``_meta``
    protocol version and without an ``MCP-Protocol-Version`` header naming a modern version; or, on a connection
    that has initialized a 2025-era session (``legacy_connection``, stdio), it has no ``_meta`` protocol version
    (a client's JSON-RPC response included).
    """
    modern = tuple(modern_versions)
    decided = era_from_headers(headers, modern_versions=modern)
    if decided is not None:
        return decided is ProtocolEras.LEGACY
    if not isinstance(message, JsonObject):
        return False
    if _meta_version(message) is not None:
        return False
    if legacy_connection:
        return True
    method = message.get("method")
    return isinstance(method, JsonString) and method.value == _INITIALIZE


# ------------------------------------------------------------------------------------------------ translation


def legacy_capabilities(value: JsonValue | None) -> ClientCapabilities:
    """A 2025 ``initialize``'s ``capabilities`` in the modern shape: the members map directly (``elicitation:{}``
    already means form); a member (or a nested mode) :class:`ClientCapabilities` refuses is dropped. Absent means
    none; raises :class:`McpError` (-32602) when it is not an object."""
    if value is None:
        return ClientCapabilities.empty()
    if not isinstance(value, JsonObject):
        raise McpError(INVALID_PARAMS, "Invalid params: capabilities must be an object", log_reason="capabilities")
    kept: dict[str, JsonValue] = {}
    for name, member in value.items():
        if _capability_ok(name, member):
            kept[name] = member
        elif isinstance(member, JsonObject):
            inner = {
                key: item for key, item in member.items() if _capability_ok(name, JsonObject.from_mapping({key: item}))
            }
            if _capability_ok(name, JsonObject.from_mapping(inner)):
                kept[name] = JsonObject.from_mapping(inner)
    return ClientCapabilities.from_json(JsonObject.from_mapping(kept)) if kept else ClientCapabilities.empty()


def _capability_ok(name: str, member: JsonValue) -> bool:
    try:
        ClientCapabilities.from_json(JsonObject.from_mapping({name: member}))
    except McpModelError:
        return False
    return True


def _header_value(value: JsonValue | None) -> str | None:
    # The inverse of the dispatcher's Mcp-Param-* comparison: strings (sentinel-encoded when needed), booleans
    # and numbers; anything else has no header form and is left for the dispatcher to refuse.
    if isinstance(value, JsonString):
        return encode_header(value.value)
    if isinstance(value, JsonBoolean):
        return "true" if value.value else "false"
    if isinstance(value, JsonNumber):
        return str(value.value)
    return None


def modern_request(
    message: JsonObject,
    *,
    version: str | None = None,
    capabilities: ClientCapabilities | None = None,
    client_info: JsonObject | None = None,
    headers: Mapping[str, str] | None = None,
    registry: Registry | None = None,
    request_id: RequestId | None = None,
) -> tuple[dict[str, str], bytes]:
    """A JSON-RPC request as the 2026-07-28 dispatcher expects it: (lower-case headers, body bytes).

    ``params._meta`` keeps the message's own members (``progressToken``...) and gets ``version``,
    ``capabilities`` and ``client_info`` when given (each left as the message has it otherwise); ``request_id``
    replaces the id. The headers are ``headers`` (the real ones: ``Authorization`` is kept) plus the synthesized
    ``MCP-Protocol-Version`` (the ``_meta`` version), ``Mcp-Method``, ``Mcp-Name`` and, for a tool of
    ``registry`` with header parameters, its ``Mcp-Param-*`` headers; any client-sent value of those is replaced.
    """
    params_value = message.get("params")
    params: dict[str, JsonValue] = dict(params_value.items()) if isinstance(params_value, JsonObject) else {}
    meta_value = params.get("_meta")
    meta: dict[str, JsonValue] = dict(meta_value.items()) if isinstance(meta_value, JsonObject) else {}
    if version is not None:
        meta[PROTOCOL_VERSION_META_KEY] = JsonString.from_value(version)
    if capabilities is not None:
        meta[CLIENT_CAPABILITIES_META_KEY] = capabilities.to_wire()
    if client_info is not None:
        meta[CLIENT_INFO_META_KEY] = client_info
    params["_meta"] = JsonObject.from_mapping(meta)
    body: dict[str, JsonValue] = dict(message.items())
    body["params"] = JsonObject.from_mapping(params)
    if request_id is not None:
        body["id"] = request_id
    synthesized = {
        name: value
        for name, value in (headers or {}).items()
        if name not in ("mcp-protocol-version", "mcp-method", "mcp-name") and not name.startswith("mcp-param-")
    }
    effective_version = meta.get(PROTOCOL_VERSION_META_KEY)
    if isinstance(effective_version, JsonString):
        synthesized["mcp-protocol-version"] = effective_version.value
    method = message.get("method")
    if isinstance(method, JsonString):
        synthesized["mcp-method"] = method.value
        routing = {methods.TOOLS_CALL: "name", methods.PROMPTS_GET: "name", methods.RESOURCES_READ: "uri"}
        member = routing.get(method.value)
        name = params.get(member) if member is not None else None
        if isinstance(name, JsonString):
            synthesized["mcp-name"] = encode_header(name.value)
            tool = registry.find_tool(name.value) if registry is not None and member == "name" else None
            if tool is not None and method.value == methods.TOOLS_CALL and tool.header_parameters:
                arguments = params.get("arguments")
                if isinstance(arguments, JsonObject):
                    for header, property_name in tool.header_parameters.items():
                        value = _header_value(arguments.get(property_name))
                        if value is not None:
                            synthesized["mcp-param-" + header.lower()] = value
    return synthesized, encode_wire(JsonObject.from_mapping(body))


def _modern_answer(result: JsonObject) -> JsonObject:
    # Some 2025 clients write an absent optional member as null ("content": null on decline); the modern union
    # has no null members, so they are dropped rather than refused.
    if not any(isinstance(value, JsonNull) for value in result.values()):
        return result
    return JsonObject.from_mapping({k: v for k, v in result.items() if not isinstance(v, JsonNull)})


def _strip_modern(result: JsonObject) -> JsonObject:
    return JsonObject.from_mapping({k: v for k, v in result.items() if k not in _MODERN_ONLY_RESULT_MEMBERS})


def _encode_complete(request_id: RequestId, answer: JsonObject) -> bytes:
    """The 2025 client's response: the complete result without the modern-only members."""
    return encode_result(request_id, encode_wire(_strip_modern(answer)))


def _missing_sentence(required: JsonValue | None, method: str) -> str:
    subject = "This tool" if method == methods.TOOLS_CALL else "This request"
    names = capability_names(required)
    if not names:
        return f"{subject} needs a client capability this client did not declare in initialize."
    if len(names) == 1:
        return f"{subject} needs the client capability {names[0]}, which this client did not declare in initialize."
    listed = ", ".join(names[:-1]) + " and " + names[-1]
    return f"{subject} needs the client capabilities {listed}, which this client did not declare in initialize."


def _failure(sentence: str, reason: str, code: int = INTERNAL_ERROR, data: JsonValue | None = None) -> McpError:
    """A 2025-session failure told in a sentence: ``isError`` for ``tools/call``, a JSON-RPC error otherwise
    (:meth:`LegacyProtocol._failed` decides). The sentence names no client input."""
    return McpError(code, sentence, data, http_status=200, log_reason=reason)


class _Progress:
    """The dispatcher's progress channel over a :class:`ClientChannel`."""

    __slots__ = ("_channel", "_streaming")

    def __init__(self, channel: ClientChannel) -> None:
        self._channel = channel
        self._streaming = False

    @property
    def cancelled(self) -> bool:
        return self._channel.cancelled

    def allow_streaming(self) -> None:
        self._streaming = True

    def progress(self, frame: JsonObject) -> None:
        if self._streaming:
            self._channel.send(frame)


def _refused(error: McpError, request_id: RequestId | None, method: str | None = None) -> DispatchResult:
    return DispatchResult.refused(error, request_id, method=method)


def _session_not_found() -> McpError:
    return McpError(SESSION_NOT_FOUND, SESSION_NOT_FOUND_MESSAGE, http_status=404, log_reason="session-not-found")


def _too_large() -> McpError:
    return McpError(INVALID_PARAMS, "Invalid params: initialize is too large", log_reason="initialize-too-large")


def _invalid_request(message: str = "Invalid Request", reason: str = "envelope") -> McpError:
    return McpError(INVALID_REQUEST, message, log_reason=reason)


class LegacyProtocol:
    """The 2025-era engine of one server over its :class:`~.dispatcher.Dispatcher`.

    ``eras`` says which eras the server speaks (a 2025 ``initialize`` to a modern-only server is refused here
    with -32022); ``sessions`` is the session table (default: a new :class:`~.sessions.SessionTable`);
    ``input_timeout_seconds`` (1..3600, default 300) is how long one input round waits for all the client's
    answers; ``endpoint_path`` is the path requests are bound to when the transport has none (stdio).
    """

    DEFAULT_INPUT_TIMEOUT_SECONDS: Final = DEFAULT_INPUT_TIMEOUT_SECONDS

    __slots__ = ("_dispatcher", "_endpoint_path", "_eras", "_ids", "_modern_version", "_sessions", "_timeout")

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        eras: ProtocolEras = ProtocolEras.BOTH,
        sessions: SessionTable | None = None,
        input_timeout_seconds: float = DEFAULT_INPUT_TIMEOUT_SECONDS,
        endpoint_path: str = DEFAULT_ENDPOINT_PATH,
    ) -> None:
        if not isinstance(dispatcher, Dispatcher):
            raise TypeError("dispatcher must be a Dispatcher")
        if not isinstance(eras, ProtocolEras):
            raise TypeError("eras must be a ProtocolEras")
        if sessions is not None and not isinstance(sessions, SessionTable):
            raise TypeError("sessions must be a SessionTable")
        if isinstance(input_timeout_seconds, bool) or not isinstance(input_timeout_seconds, int | float):
            raise TypeError("input_timeout_seconds must be a number")
        if not MIN_INPUT_TIMEOUT_SECONDS <= input_timeout_seconds <= MAX_INPUT_TIMEOUT_SECONDS:
            raise ValueError("input_timeout_seconds must be between 1 and 3600")
        if not isinstance(endpoint_path, str) or not endpoint_path.startswith("/"):
            raise ValueError("endpoint_path must be a path starting with '/'")
        self._dispatcher = dispatcher
        self._eras = eras
        self._sessions = sessions if sessions is not None else SessionTable()
        self._timeout = float(input_timeout_seconds)
        self._endpoint_path = endpoint_path
        self._modern_version = dispatcher.supported_versions[0]
        # Fresh JSON-RPC ids of the modern requests (a retry must not reuse the id that emitted its state).
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"LegacyProtocol(eras={self._eras.value}, sessions={len(self._sessions)}, timeout={self._timeout:g})"

    @property
    def eras(self) -> ProtocolEras:
        """The eras served."""
        return self._eras

    @property
    def sessions(self) -> SessionTable:
        """The live sessions (the transport ends one on ``DELETE``)."""
        return self._sessions

    @property
    def dispatcher(self) -> Dispatcher:
        """The 2026-07-28 pipeline every request runs through."""
        return self._dispatcher

    @property
    def input_timeout_seconds(self) -> float:
        """How long one input round waits for the client's answers."""
        return self._timeout

    @property
    def endpoint_path(self) -> str:
        """The path requests are bound to on a transport without paths."""
        return self._endpoint_path

    def is_legacy(self, headers: Mapping[str, str], message: JsonValue, *, legacy_connection: bool = False) -> bool:
        """:func:`is_legacy_message` with this server's modern versions."""
        return is_legacy_message(
            headers, message, modern_versions=self._dispatcher.supported_versions, legacy_connection=legacy_connection
        )

    def refuse_modern(self, message: JsonValue) -> DispatchResult:
        """The answer of a 2026-07-28 request to a server that speaks only the 2025 era (-32022, 400)."""
        request_id: RequestId | None = None
        requested: JsonValue = JsonNull.instance()
        method: str | None = None
        if isinstance(message, JsonObject):
            found = message.get("id")
            request_id = found if isinstance(found, JsonString | JsonNumber) else None
            version = _meta_version(message)
            requested = version if isinstance(version, JsonString) else requested
            name = message.get("method")
            method = name.value if isinstance(name, JsonString) and name.value in _KNOWN else None
        data = (
            JsonObject.builder()
            .put("supported", JsonArray.of(*LEGACY_PROTOCOL_VERSIONS))
            .put("requested", requested)
            .build()
        )
        error = McpError(
            UNSUPPORTED_VERSION,
            "This server speaks the 2025-era MCP protocol only ("
            + ", ".join(LEGACY_PROTOCOL_VERSIONS)
            + "); start the server with --protocol both to serve 2026-07-28 clients",
            data,
            log_reason="modern-client",
        )
        return _refused(error, request_id, method)

    def _refuse_legacy(self, message: JsonObject, request_id: RequestId | None, method: str | None) -> DispatchResult:
        params = message.get("params")
        requested = params.get("protocolVersion") if isinstance(params, JsonObject) else None
        known = (
            requested.value
            if isinstance(requested, JsonString) and requested.value in LEGACY_PROTOCOL_VERSIONS
            else None
        )
        modern = self._dispatcher.supported_versions
        data = (
            JsonObject.builder()
            .put("supported", JsonArray.of(*modern))
            .put("requested", requested if isinstance(requested, JsonString) else JsonNull.instance())
            .build()
        )
        what = "initialize" if method == _INITIALIZE else "request"
        sent = f"a 2025-era {what} ({known})" if known is not None else f"a 2025-era {what}"
        error = McpError(
            UNSUPPORTED_VERSION,
            f"This server speaks MCP {', '.join(modern)} only; the client sent {sent}. Use a client that speaks "
            f"{modern[0]}, or start the server with --protocol both",
            data,
            log_reason="legacy-client",
        )
        return _refused(error, request_id, method)

    def close(self) -> None:
        """End every session (server shutdown)."""
        self._sessions.close()

    # ------------------------------------------------------------------------------------------------ entry

    async def handle(self, request: LegacyRequest, channel: ClientChannel | None) -> DispatchResult:
        """Answer one 2025-era message. Never raises for client input; ``asyncio.CancelledError`` propagates
        (the client has gone: the running handler and the round's pending requests are cancelled)."""
        message = request.message
        if not isinstance(message, JsonObject) or message.get("jsonrpc") != _JSONRPC:
            return _refused(_invalid_request(), None)
        method_value = message.get("method")
        if method_value is None and "id" in message and ("result" in message or "error" in message):
            return self._response(request, message)
        raw_id = message.get("id")
        request_id = raw_id if isinstance(raw_id, JsonString | JsonNumber) else None
        if not isinstance(method_value, JsonString) or ("id" in message and request_id is None):
            return _refused(_invalid_request(), request_id)
        method = method_value.value
        logged = method if method in _KNOWN else None
        if method == _INITIALIZE:
            if request_id is None:
                return _refused(_invalid_request(), None, logged)
            return self._initialize(request, message, request_id)
        if not self._eras.legacy:
            return self._refuse_legacy(message, request_id, logged)
        try:
            session = self._session(request)
        except McpError as error:
            return _refused(error, request_id, logged)
        if request_id is None:
            return self._notification(session, method, message)
        if method == _PING:
            return DispatchResult(200, encode_result(request_id, b"{}"), method=logged, request_id=request_id)
        if method not in _TRANSLATED:
            unknown = McpError(METHOD_NOT_FOUND, "Method not found", http_status=200, log_reason="method-not-found")
            return _refused(unknown, request_id, logged)
        return await self._tracked(request, session, message, method, request_id, channel)

    def _session(self, request: LegacyRequest) -> LegacySession:
        # Admission first: a caller the policy refuses learns nothing about sessions (401 whatever the id).
        admission = self._dispatcher.admit(request.path, request.headers)
        session = request.session
        if session is None:
            session_id = request.headers.get(SESSION_HEADER)
            if session_id is None:
                # A session request without a session: the 2025 transport's "Bad Request: no valid session".
                raise _invalid_request("Bad Request: no valid session; send initialize first", "no-session")
            session = self._sessions.get(session_id.strip())
        if (
            session is None
            or session.closed
            or not secrets.compare_digest(admission.partition.encode(), session.partition.encode())
        ):
            raise _session_not_found()  # unknown, ended, or another partition's: never say which
        session.touch()
        return session

    def end_session(self, request: LegacyRequest) -> DispatchResult:
        """``DELETE`` of a session (``Mcp-Session-Id`` in ``request.headers``): admitted like every request of the
        session (401 when the policy refuses, 404 for an unknown session or another partition's), then ended, its
        running requests cancelled (200, no body)."""
        try:
            session = self._session(request)
        except McpError as error:
            return _refused(error, None)
        self._sessions.remove(session.id)
        return DispatchResult(200, None, reason="session-ended")

    def _response(self, request: LegacyRequest, message: JsonObject) -> DispatchResult:
        try:
            session = self._session(request)
        except McpError as error:
            return _refused(error, None)
        delivered = session.deliver(message)
        return DispatchResult(202, None, reason="response" if delivered else "response-unmatched")

    def _notification(self, session: LegacySession, method: str, message: JsonObject) -> DispatchResult:
        if method == _INITIALIZED:
            session.initialized = True
        elif method == _CANCELLED:
            params = message.get("params")
            session.cancel(params.get("requestId") if isinstance(params, JsonObject) else None)
        return DispatchResult(202, None, method=method if method in _KNOWN else None, reason="notification")

    def _initialize(self, request: LegacyRequest, message: JsonObject, request_id: RequestId) -> DispatchResult:
        if not self._eras.legacy:
            return self._refuse_legacy(message, request_id, _INITIALIZE)
        if request.session is not None or SESSION_HEADER in request.headers:
            error = _invalid_request("Invalid Request: this session is already initialized", "reinitialize")
            return _refused(error, request_id, _INITIALIZE)
        params = message.get("params")
        try:
            if params is not None and not isinstance(params, JsonObject):
                raise McpError(INVALID_PARAMS, "Invalid params: params must be an object", log_reason="params")
            params = params if isinstance(params, JsonObject) else JsonObject.empty_instance()
            requested = params.get("protocolVersion")
            version = (
                requested.value
                if isinstance(requested, JsonString) and requested.value in LEGACY_PROTOCOL_VERSIONS
                else LEGACY_PROTOCOL_VERSIONS[0]
            )
            if request.body_bytes > MAX_INITIALIZE_BYTES:
                raise _too_large()
            capabilities = legacy_capabilities(params.get("capabilities"))
            info = params.get("clientInfo")
            info = info if isinstance(info, JsonObject) else None
            # Both travel in every later request's _meta: their size is bounded once here (a transport that did
            # not say the body size is covered too).
            if len(encode_wire(capabilities.to_wire())) + len(encode_wire(info or _NO_INFO)) > MAX_INITIALIZE_BYTES:
                raise _too_large()
            admission = self._dispatcher.admit(request.path, request.headers)
            try:
                session = self._sessions.create(
                    protocol_version=version,
                    client_capabilities=capabilities,
                    client_info=info,
                    partition=admission.partition,
                    peer=request.peer,
                )
            except SessionsFull:
                raise McpError(
                    INTERNAL_ERROR,
                    "Service Unavailable: too many sessions",
                    http_status=503,
                    log_reason="sessions-full",
                    headers=(("retry-after", "5"),),
                ) from None
        except McpError as error:
            return _refused(error, request_id, _INITIALIZE)
        result = (
            JsonObject.builder()
            .put("protocolVersion", version)
            .put("capabilities", self._dispatcher.server_capabilities)
            .put("serverInfo", self._dispatcher.server_info)
        )
        if self._dispatcher.instructions is not None:
            result.put("instructions", self._dispatcher.instructions)
        return DispatchResult(
            200,
            encode_result(request_id, encode_wire(result.build())),
            method=_INITIALIZE,
            headers=((SESSION_HEADER, session.id),),
            request_id=request_id,
        )

    # ------------------------------------------------------------------------------------------------ operations

    async def _tracked(
        self,
        request: LegacyRequest,
        session: LegacySession,
        message: JsonObject,
        method: str,
        request_id: RequestId,
        channel: ClientChannel | None,
    ) -> DispatchResult:
        task: asyncio.Task[DispatchResult] = asyncio.ensure_future(
            self._operation(request, session, message, method, request_id, channel)
        )
        try:
            session.track(request_id, task)
        except SessionsFull:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            busy = McpError(
                INTERNAL_ERROR,
                "Service Unavailable",
                http_status=503,
                log_reason=SessionLimitReason.IN_FLIGHT.value,
                headers=(("retry-after", "1"),),
            )
            return _refused(busy, request_id, method)
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if (current is not None and current.cancelling()) or (channel is not None and channel.cancelled):
                task.cancel()
                raise  # the client has gone (or the server stops)
            # notifications/cancelled: the client asked; it ignores whatever answer follows.
            cancelled = McpError(REQUEST_CANCELLED, "Request cancelled", http_status=200, log_reason="cancelled")
            return _refused(cancelled, request_id, method)
        finally:
            session.untrack(request_id)

    def _round_cap(self, method: str, params: JsonObject) -> int | None:
        """The engine's own round cap: ``None`` for framework-protected operations (the sealer counts their
        rounds), the default rounds limit for the others (nothing else would end their loop)."""
        registry = self._dispatcher.registry
        name = params.get("uri" if method == methods.RESOURCES_READ else "name")
        mode: RequestStateMode | None = None
        if isinstance(name, JsonString):
            if method == methods.TOOLS_CALL:
                found_tool = registry.find_tool(name.value)
                mode = found_tool.request_state_mode if found_tool is not None else None
            elif method == methods.PROMPTS_GET:
                prompt = registry.find_prompt(name.value)
                mode = prompt.request_state_mode if prompt is not None else None
            elif method == methods.RESOURCES_READ:
                resource = registry.find_resource(name.value)
                if resource is not None:
                    mode = resource.request_state_mode
                else:
                    matched = registry.match_resource_template(name.value)
                    mode = matched[0].request_state_mode if matched is not None else None
        return None if mode is RequestStateMode.FRAMEWORK_PROTECTED else DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS

    async def _operation(
        self,
        request: LegacyRequest,
        session: LegacySession,
        message: JsonObject,
        method: str,
        request_id: RequestId,
        channel: ClientChannel | None,
    ) -> DispatchResult:
        params_value = message.get("params")
        if params_value is not None and not isinstance(params_value, JsonObject):
            error = McpError(
                INVALID_PARAMS,
                "Invalid params: params must be an object",
                http_status=200,
                log_reason="params-not-object",
            )
            return _refused(error, request_id, method)
        params = params_value if isinstance(params_value, JsonObject) else JsonObject.empty_instance()
        cap = self._round_cap(method, params)
        progress = _Progress(channel) if channel is not None else None
        current = message
        rounds = 0
        operation: str | None = None
        try:
            while True:
                if channel is not None and channel.cancelled:
                    raise asyncio.CancelledError
                headers, body = modern_request(
                    current,
                    version=self._modern_version,
                    capabilities=session.client_capabilities,
                    client_info=session.client_info,
                    headers=request.headers,
                    registry=self._dispatcher.registry,
                    request_id=JsonString.from_value(f"legacy-{next(self._ids)}"),
                )
                result = await self._dispatcher.dispatch(HttpRequest(request.path, headers, body), progress)
                operation = result.operation or operation
                # The dispatcher's own answer (a large resource, a long tool output) is read and re-encoded where
                # the dispatcher parses large bodies: never in proportion to its size on the event loop.
                reply_bytes = result.body or b""
                reply = await self._dispatcher.run_sized(len(reply_bytes), functools.partial(parse, reply_bytes))
                if not isinstance(reply, JsonObject):
                    raise _failure("The server could not answer this request.", "no-answer")
                if "error" in reply:
                    return self._error(result, reply, request_id, method, rounds)
                answer = reply.get("result")
                if not isinstance(answer, JsonObject):
                    raise _failure("The server could not answer this request.", "no-answer")
                if answer.get("resultType") != _INPUT_REQUIRED:
                    body_bytes = await self._dispatcher.run_sized(
                        len(reply_bytes), functools.partial(_encode_complete, request_id, answer)
                    )
                    return DispatchResult(200, body_bytes, method=method, operation=operation, request_id=request_id)
                rounds += 1
                if cap is not None and rounds > cap:
                    raise _failure(
                        "This tool needed more rounds of input than the server allows; start again.", "round-limit"
                    )
                responses = await self._ask(session, answer.get("inputRequests"), channel)
                retry: dict[str, JsonValue] = dict(params.items())
                retry["inputResponses"] = responses
                state = answer.get("requestState")
                if isinstance(state, JsonString):
                    retry["requestState"] = state
                else:
                    retry.pop("requestState", None)
                built = dict(message.items())
                built["params"] = JsonObject.from_mapping(retry)
                current = JsonObject.from_mapping(built)
        except McpError as failure:
            return self._failed(failure, request_id, method, operation)

    async def _ask(
        self, session: LegacySession, requests: JsonValue | None, channel: ClientChannel | None
    ) -> JsonObject:
        """Send one round's requests to the client and collect its answers as ``inputResponses``."""
        if not isinstance(requests, JsonObject) or not len(requests):
            raise _failure("The server could not answer this request.", "input-requests")
        if channel is None:
            raise _failure("This connection cannot carry the server's requests to the client.", "input-no-channel")
        waiting: dict[str, tuple[RequestId, asyncio.Future[JsonObject], str]] = {}
        try:
            for key, item in requests.items():
                if not isinstance(item, JsonObject) or not isinstance(item.get("method"), JsonString):
                    raise _failure("The server could not answer this request.", "input-requests")
                method_value = item["method"]
                assert isinstance(method_value, JsonString)
                try:
                    server_id, future = session.expect(method_value.value)
                except SessionsFull:
                    raise _failure(
                        "The server has too many requests waiting for this client; try again later.", "input-busy"
                    ) from None
                waiting[key] = (server_id, future, method_value.value)
                frame = JsonObject.builder().put("jsonrpc", "2.0").put("id", server_id).put("method", method_value)
                params = item.get("params")
                if isinstance(params, JsonObject):
                    frame.put("params", self._client_params(session, method_value.value, params))
                channel.send(frame.build())
            await self._wait([future for _, future, _ in waiting.values()], channel)
            responses = JsonObject.builder()
            for key, (_, future, asked) in waiting.items():
                answer = future.result()
                named = asked if asked in methods.INPUT_REQUEST_METHODS else "a request"
                if "error" in answer:
                    raise _failure(f"The client refused the server's request ({named}).", "input-refused")
                result = answer.get("result")
                if not isinstance(result, JsonObject):
                    raise _failure(f"The client's answer to {named} was not understood.", "input-malformed")
                responses.put(key, _modern_answer(result))
            return responses.build()
        finally:
            for server_id, _, _ in waiting.values():
                session.forget(server_id)

    def _client_params(self, session: LegacySession, method: str, params: JsonObject) -> JsonObject:
        if method != methods.ELICITATION_CREATE:
            return params
        # A form elicitation to a client before 2025-11-25 is written without "mode" (that version's shape).
        if session.protocol_version in _MODELESS_ELICITATION and params.get("mode") == _FORM:
            return JsonObject.from_mapping({k: v for k, v in params.items() if k != "mode"})
        # 2025-11-25 requires an elicitationId on a URL elicitation (for its completion notice); 2026-07-28 has none.
        if params.get("mode") == _URL and "elicitationId" not in params:
            return JsonObject.from_mapping({**dict(params.items()), "elicitationId": secrets.token_urlsafe(16)})
        return params

    async def _wait(self, futures: list[asyncio.Future[JsonObject]], channel: ClientChannel) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        pending: set[asyncio.Future[JsonObject]] = set(futures)
        while pending:
            if channel.cancelled:
                raise asyncio.CancelledError
            remaining = deadline - loop.time()
            if remaining <= 0:
                seconds = f"{self._timeout:g}"
                raise _failure(
                    f"The client did not answer the server's request within {seconds} seconds.", "input-timeout"
                )
            _, pending = await asyncio.wait(pending, timeout=min(remaining, _GONE_CHECK_SECONDS))
        for future in futures:
            if future.cancelled():
                raise asyncio.CancelledError  # the session was closed under us

    def _error(
        self, result: DispatchResult, reply: JsonObject, request_id: RequestId, method: str, rounds: int
    ) -> DispatchResult:
        error = reply.get("error")
        code_value = error.get("code") if isinstance(error, JsonObject) else None
        code = int(code_value.value) if isinstance(code_value, JsonNumber) else INTERNAL_ERROR
        reason = result.reason or ""
        data = error.get("data") if isinstance(error, JsonObject) else None
        if code == MISSING_CAPABILITY:
            required = data.get("requiredCapabilities") if isinstance(data, JsonObject) else None
            failure = _failure(_missing_sentence(required, method), "missing-capability", MISSING_CAPABILITY, data)
            return self._failed(failure, request_id, method, result.operation)
        if reason in ("seal-last-round", "state-round"):
            failure = _failure("This tool needed more rounds of input than the server allows; start again.", reason)
            return self._failed(failure, request_id, method, result.operation)
        if rounds and reason.startswith("state-"):
            failure = _failure("This tool's saved progress expired or was refused; start again.", reason)
            return self._failed(failure, request_id, method, result.operation)
        if rounds and reason == "input-responses":
            failure = _failure("The client's answer to the server's request was not in the expected shape.", reason)
            return self._failed(failure, request_id, method, result.operation)
        # Anything else is the dispatcher's own answer, exactly as on the 2026-07-28 path, to the client's id.
        message = error.get("message") if isinstance(error, JsonObject) else None
        text = message.value if isinstance(message, JsonString) else "Internal error"
        passed = McpError(
            code,
            text,
            data,
            http_status=result.status if result.status in _KEPT_STATUSES else 200,
            log_reason=result.reason or None,
            headers=result.headers,
        )
        return DispatchResult.refused(passed, request_id, method=method, operation=result.operation)

    def _failed(self, failure: McpError, request_id: RequestId, method: str, operation: str | None) -> DispatchResult:
        if method == methods.TOOLS_CALL:
            content = JsonObject.builder().put("type", "text").put("text", failure.message).build()
            result = JsonObject.builder().put("content", JsonArray.of(content)).put("isError", True).build()
            return DispatchResult(
                200,
                encode_result(request_id, encode_wire(result)),
                method=method,
                operation=operation,
                reason=failure.log_reason,
                request_id=request_id,
            )
        return DispatchResult.refused(failure, request_id, method=method, operation=operation)
