"""The 2025-era MCP protocol (2025-11-25, 2025-06-18, 2025-03-26) served beside 2026-07-28 on the same engine.

A 2025-era client opens a session with ``initialize``, names it on later requests, and answers the server's own
JSON-RPC requests (``elicitation/create``, ``sampling/createMessage``, ``roots/list``) while one of its requests
runs. :class:`LegacyProtocol` runs each such request as :class:`~soklet_core.mcp.server.engine.Call` values on the
one :class:`~soklet_core.mcp.server.engine.Engine`, so every rule of the engine (capabilities, sealed state opened
and checked on every round, round limit, expiry) holds for both eras:

1. :func:`is_legacy_message` decides the era of a message (the one home of that rule).
2. ``initialize`` negotiates a 2025 version, translates the declared capabilities to the modern shape
   (:func:`legacy_capabilities`), admits the caller and creates a :class:`.LegacySession`.
3. A session request (parsed once, by the transport) is admitted, checked against its session, and becomes a
   ``Call``: the message's method and params, a fresh request id, the engine's modern version, a ``_meta`` with the
   session's capabilities and client info, the admission, and a params digest taken from the canonical params at
   most once for all its rounds. When the engine answers ``InputRequired``, each keyed request is sent to the
   client through the :class:`ClientChannel`, the answers of the round are awaited under one deadline, and the next
   ``Call`` carries them as ``inputResponses`` with the sealed ``requestState`` untouched, until the outcome is
   complete or refused. No HTTP header is built and no answer is parsed back.
4. A complete result is written for the 2025 wire directly from its value, without the modern-only members
   (``resultType``, ``ttlMs``, ``cacheScope``). A refusal the 2025 client could not have caused by its own input
   (a capability it did not declare, the round limit, a state that expired between rounds, a round's timeout, its
   refusal of our request) becomes a ``CallToolResult`` with ``isError`` and a sentence for ``tools/call``, and a
   JSON-RPC error with the same sentence for other methods: decided by the :class:`~.engine.RefusalKind`, never by
   a log reason. Every other refusal is the engine's own answer (code, message, data), sent to the client's id;
   inside a session it travels with HTTP 200 (401, 403 and 503 excepted), since a 2025-era client reads a 4xx as
   a broken transport and 404 as a lost session.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Mapping
from typing import Final

from soklet_core import tracing
from soklet_core.json import (
    JsonArray,
    JsonNull,
    JsonNumber,
    JsonObject,
    JsonString,
    JsonValue,
    WirePlain,
    encode_wire,
)
from soklet_core.mcp.model import methods
from soklet_core.mcp.model.context import RequestId
from soklet_core.mcp.model.input_required_result import InputRequiredResult, RequestStateMode
from soklet_core.mcp.model.results import CallToolResult
from soklet_core.mcp.server._jsonrpc import (
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    DispatchResult,
    McpError,
    busy_refusal,
    encode_result,
    params_not_object,
)
from soklet_core.mcp.server._request_span import LEGACY_ERA, RequestSpan, meta_of
from soklet_core.mcp.server.admission import Admission
from soklet_core.mcp.server.engine._call import (
    Call,
    CanonicalParams,
    EncodedResult,
    InputRequired,
    RefusalKind,
    Refused,
    ResultValue,
)
from soklet_core.mcp.server.engine._engine import Engine
from soklet_core.mcp.server.legacy._answers import (
    REQUEST_CANCELLED,
    SESSION_NOT_FOUND,
    SESSION_NOT_FOUND_MESSAGE,
    in_session,
    initialize_too_large,
    invalid_request,
    missing_sentence,
    session_failure,
    session_not_found,
)
from soklet_core.mcp.server.legacy._era import (
    INITIALIZE as _INITIALIZE,
)
from soklet_core.mcp.server.legacy._era import (
    LEGACY_PROTOCOL_VERSIONS,
    SESSION_HEADER,
    era_from_headers,
    is_legacy_message,
    legacy_capabilities,
    refuse_legacy,
    refuse_modern,
)
from soklet_core.mcp.server.legacy._requests import ChannelProgress, ClientChannel, LegacyRequest
from soklet_core.mcp.server.legacy._sessions import (
    LegacySession,
    SessionLimitReason,
    SessionsFull,
    SessionTable,
)
from soklet_core.mcp.server.options import (
    DEFAULT_INPUT_TIMEOUT_SECONDS,
    MAX_INPUT_TIMEOUT_SECONDS,
    MIN_INPUT_TIMEOUT_SECONDS,
    ProtocolEras,
    SessionOptions,
)
from soklet_core.protocol import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    DEFAULT_ENDPOINT_PATH,
    DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
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
]

#: The largest ``initialize`` body, and the most its capabilities and client info may take together: both are
#: carried in every later request of the session (a real client's initialize is under 2 KiB).
MAX_INITIALIZE_BYTES: Final = 64 * 1024
# Versions before 2025-11-25 know only form elicitation, written without a "mode" member.
_MODELESS_ELICITATION: Final = frozenset({"2025-06-18", "2025-03-26"})
# Modern-only result members a 2025 client does not know.
_MODERN_ONLY_RESULT_MEMBERS: Final = frozenset({"resultType", "ttlMs", "cacheScope"})
# The 2025 methods answered by calls to the engine.
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
# Seconds a client is told to wait when every session it may take away is running a request.
_SESSIONS_RETRY_AFTER_SECONDS: Final = 5
# The list methods: the engine answers them from results encoded once at start.
_LIST_METHODS: Final = frozenset(
    {methods.TOOLS_LIST, methods.PROMPTS_LIST, methods.RESOURCES_LIST, methods.RESOURCES_TEMPLATES_LIST}
)
_DEFAULT_SESSIONS: Final = SessionOptions()
# How a tool result's own encoding starts (CallToolResult.encode writes resultType first).
_COMPLETE_HEAD: Final = b'{"resultType":"complete",'
_PING: Final = "ping"
_INITIALIZED: Final = "notifications/initialized"
_CANCELLED: Final = "notifications/cancelled"
# The methods the access log may name (never raw client text).
_KNOWN: Final = _TRANSLATED | {_INITIALIZE, _PING, _INITIALIZED, _CANCELLED}
_JSONRPC: Final = JsonString.from_value("2.0")
_FORM: Final = JsonString.from_value("form")
_URL: Final = JsonString.from_value("url")
_NO_INFO: Final = JsonObject.empty_instance()
# How often a round's wait looks whether the client has gone (the transport also cancels the task).
_GONE_CHECK_SECONDS: Final = 1.0


def _modern_answer(result: JsonObject) -> JsonObject:
    # Some 2025 clients write an absent optional member as null ("content": null on decline); the modern union
    # has no null members, so they are dropped rather than refused.
    if not any(isinstance(value, JsonNull) for value in result.values()):
        return result
    return JsonObject.from_mapping({k: v for k, v in result.items() if not isinstance(v, JsonNull)})


def _refused(error: McpError, request_id: RequestId | None, method: str | None = None) -> DispatchResult:
    return DispatchResult.refused(error, request_id, method=method)


def _same_caller(admission: Admission, session: LegacySession) -> bool:
    """Whether ``admission`` is the caller that opened ``session``: the same partition and the same subject (a
    session id another tenant, or another user of the same tenant, learned is not theirs). Both compared in constant
    time, and both always compared, so timing does not say which differed."""
    same_partition = secrets.compare_digest(admission.partition.encode(), session.partition.encode())
    subject, owner = admission.identity.subject, session.subject
    same_subject = secrets.compare_digest((subject or "").encode(), (owner or "").encode()) and (
        (subject is None) == (owner is None)
    )
    return same_partition and same_subject


class LegacyProtocol:
    """The 2025-era session engine of one server over its :class:`~soklet_core.mcp.server.engine.Engine`.

    ``eras`` says which eras the server speaks (``ProtocolOptions.eras``: a 2025 ``initialize`` to a modern-only
    server is refused here with -32022); ``sessions`` are the session options (the table's bounds and how long one
    input round waits for all the client's answers); ``endpoint_path`` is the path requests are bound to when the
    transport has none (stdio).
    """

    DEFAULT_INPUT_TIMEOUT_SECONDS: Final = DEFAULT_INPUT_TIMEOUT_SECONDS

    __slots__ = (
        "_endpoint_path",
        "_engine",
        "_eras",
        "_ids",
        "_lists",
        "_meta_tail",
        "_modern_version",
        "_modern_version_value",
        "_server_meta",
        "_sessions",
        "_timeout",
    )

    def __init__(
        self,
        engine: Engine,
        *,
        eras: ProtocolEras = ProtocolEras.BOTH,
        sessions: SessionOptions = _DEFAULT_SESSIONS,
        endpoint_path: str = DEFAULT_ENDPOINT_PATH,
    ) -> None:
        if not isinstance(engine, Engine):
            raise TypeError("engine must be an Engine")
        if not isinstance(eras, ProtocolEras):
            raise TypeError("eras must be a ProtocolEras")
        if not isinstance(sessions, SessionOptions):
            raise TypeError("sessions must be SessionOptions")
        if not isinstance(endpoint_path, str) or not endpoint_path.startswith("/"):
            raise ValueError("endpoint_path must be a path starting with '/'")
        self._engine = engine
        self._eras = eras
        self._sessions = SessionTable(options=sessions)
        self._timeout = float(sessions.input_timeout_seconds)
        self._endpoint_path = endpoint_path
        self._modern_version = engine.supported_versions[0]
        self._modern_version_value = JsonString.from_value(self._modern_version)
        # A 2025 result carries the server's _meta as a 2026-07-28 result does.
        self._server_meta = JsonObject.builder().put(SERVER_INFO_META_KEY, engine.server_info).build()
        self._meta_tail = b',"_meta":' + encode_wire(self._server_meta) + b"}"
        # The engine's pre-encoded answers (the lists) rewritten for the 2025 wire once each, by method.
        self._lists: dict[str, tuple[EncodedResult, bytes]] = {}
        # Fresh JSON-RPC ids of the calls (a retry must not reuse the id that emitted its state).
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
    def engine(self) -> Engine:
        """The engine every call of a session runs on."""
        return self._engine

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
            headers, message, modern_versions=self._engine.supported_versions, legacy_connection=legacy_connection
        )

    def refuse_modern(self, message: JsonValue) -> DispatchResult:
        """The answer of a 2026-07-28 request to a server that speaks only the 2025 era (-32022, 400)."""
        return refuse_modern(message, _KNOWN)

    def close(self) -> None:
        """End every session (server shutdown)."""
        self._sessions.close()

    # ------------------------------------------------------------------------------------------------ entry

    async def handle(self, request: LegacyRequest, channel: ClientChannel | None) -> DispatchResult:
        """Answer one 2025-era message. Never raises for client input; ``asyncio.CancelledError`` propagates
        (the client has gone: the running handler and the round's pending requests are cancelled)."""
        message = request.message
        if not isinstance(message, JsonObject) or message.get("jsonrpc") != _JSONRPC:
            return _refused(invalid_request(), None)
        method_value = message.get("method")
        if method_value is None and "id" in message and ("result" in message or "error" in message):
            return await self._response(request, message)
        raw_id = message.get("id")
        request_id = raw_id if isinstance(raw_id, JsonString | JsonNumber) else None
        if not isinstance(method_value, JsonString) or ("id" in message and request_id is None):
            return _refused(invalid_request(), request_id)
        method = method_value.value
        if request_id is not None and tracing.tracer() is not None:
            return await self._handle_traced(request, message, method, request_id, channel)
        return await self._handle_method(request, message, method, request_id, channel)

    async def _handle_traced(
        self,
        request: LegacyRequest,
        message: JsonObject,
        method: str,
        request_id: RequestId,
        channel: ClientChannel | None,
    ) -> DispatchResult:
        # One server span per request of the session; the engine's rounds are its children.
        span = RequestSpan.start(
            method=method if method in _KNOWN else None,
            meta=meta_of(message),
            headers=request.headers,
            transport="pipe" if request.peer is None else "tcp",
            era=LEGACY_ERA,
        )
        if span is None:
            return await self._handle_method(request, message, method, request_id, channel)
        try:
            with span.scope():
                return span.finish(await self._handle_method(request, message, method, request_id, channel))
        except BaseException as error:
            span.abandon(type(error).__name__)
            raise

    async def _handle_method(
        self,
        request: LegacyRequest,
        message: JsonObject,
        method: str,
        request_id: RequestId | None,
        channel: ClientChannel | None,
    ) -> DispatchResult:
        logged = method if method in _KNOWN else None
        if method == _INITIALIZE:
            if request_id is None:
                return _refused(invalid_request(), None, logged)
            return await self._initialize(request, message, request_id)
        if not self._eras.legacy:
            return refuse_legacy(message, request_id, logged, self._engine.supported_versions)
        try:
            session, admission = await self._session(request)
        except McpError as error:
            return _refused(error, request_id, logged)
        if request_id is None:
            return self._notification(session, method, message)
        if method == _PING:
            return DispatchResult(200, encode_result(request_id, b"{}"), method=logged, request_id=request_id)
        if method not in _TRANSLATED:
            unknown = McpError(METHOD_NOT_FOUND, "Method not found", http_status=200, log_reason="method-not-found")
            return _refused(unknown, request_id, logged)
        return await self._tracked(request, session, admission, message, method, request_id, channel)

    async def _session(self, request: LegacyRequest) -> tuple[LegacySession, Admission]:
        # Admission first: a caller the policy refuses learns nothing about sessions (401 whatever the id).
        admission = await self._engine.admit(request.path, request.headers)
        session = request.session
        if session is None:
            session_id = request.headers.get(SESSION_HEADER)
            if session_id is None:
                # A session request without a session: the 2025 transport's "Bad Request: no valid session".
                raise invalid_request("Bad Request: no valid session; send initialize first", "no-session")
            session = self._sessions.get(session_id.strip())
        if session is None or session.closed or not _same_caller(admission, session):
            raise session_not_found()  # unknown, ended, or another caller's: never say which
        session.touch()
        return session, admission

    async def end_session(self, request: LegacyRequest) -> DispatchResult:
        """``DELETE`` of a session (``Mcp-Session-Id`` in ``request.headers``): admitted like every request of the
        session (401 when the policy refuses, 404 for an unknown session or another partition's), then ended, its
        running requests cancelled (200, no body)."""
        try:
            session, _ = await self._session(request)
        except McpError as error:
            return _refused(error, None)
        self._sessions.remove(session.id)
        return DispatchResult(200, None, reason="session-ended")

    async def _response(self, request: LegacyRequest, message: JsonObject) -> DispatchResult:
        try:
            session, _ = await self._session(request)
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

    async def _initialize(self, request: LegacyRequest, message: JsonObject, request_id: RequestId) -> DispatchResult:
        if not self._eras.legacy:
            return refuse_legacy(message, request_id, _INITIALIZE, self._engine.supported_versions)
        if request.session is not None or SESSION_HEADER in request.headers:
            error = invalid_request("Invalid Request: this session is already initialized", "reinitialize")
            return _refused(error, request_id, _INITIALIZE)
        params = message.get("params")
        try:
            if params is not None and not isinstance(params, JsonObject):
                raise params_not_object()
            params = params if isinstance(params, JsonObject) else JsonObject.empty_instance()
            requested = params.get("protocolVersion")
            version = (
                requested.value
                if isinstance(requested, JsonString) and requested.value in LEGACY_PROTOCOL_VERSIONS
                else LEGACY_PROTOCOL_VERSIONS[0]
            )
            if request.body_bytes > MAX_INITIALIZE_BYTES:
                raise initialize_too_large()
            capabilities = legacy_capabilities(params.get("capabilities"))
            info = params.get("clientInfo")
            info = info if isinstance(info, JsonObject) else None
            # Both travel in every later request's _meta: their size is bounded once here (a transport that did
            # not say the body size is covered too).
            if len(encode_wire(capabilities.to_wire())) + len(encode_wire(info or _NO_INFO)) > MAX_INITIALIZE_BYTES:
                raise initialize_too_large()
            admission = await self._engine.admit(request.path, request.headers)
            try:
                session = self._sessions.create(
                    protocol_version=version,
                    client_capabilities=capabilities,
                    client_info=info,
                    partition=admission.partition,
                    subject=admission.identity.subject,
                    peer=request.peer,
                )
            except SessionsFull:
                raise busy_refusal(
                    "Service Unavailable: too many sessions",
                    retry_after=_SESSIONS_RETRY_AFTER_SECONDS,
                    reason=SessionLimitReason.SESSIONS.value,
                ) from None
        except McpError as error:
            return _refused(error, request_id, _INITIALIZE)
        result = (
            JsonObject.builder()
            .put("protocolVersion", version)
            .put("capabilities", self._engine.server_capabilities)
            .put("serverInfo", self._engine.server_info)
        )
        if self._engine.instructions is not None:
            result.put("instructions", self._engine.instructions)
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
        admission: Admission,
        message: JsonObject,
        method: str,
        request_id: RequestId,
        channel: ClientChannel | None,
    ) -> DispatchResult:
        task: asyncio.Task[DispatchResult] = asyncio.ensure_future(
            self._operation(request, session, admission, message, method, request_id, channel)
        )
        try:
            session.track(request_id, task)
        except SessionsFull:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return _refused(busy_refusal(reason=SessionLimitReason.IN_FLIGHT.value), request_id, method)
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
        """The session engine's own round cap: ``None`` for framework-protected operations (the sealer counts their
        rounds), the default rounds limit for the others (nothing else would end their loop). The engine says
        which registration the call resolves to."""
        try:
            target = self._engine.resolve(method, params)
        except McpError:
            return DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS  # the call itself is refused, before any round
        operation = target.operation if target is not None else None
        protected = operation is not None and operation.request_state_mode is RequestStateMode.FRAMEWORK_PROTECTED
        return None if protected else DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS

    def _complete(self, method: str, result: ResultValue) -> bytes:
        """A complete result as the 2025 wire writes it: without the modern-only members, with the server's
        ``_meta`` as the 2026-07-28 wire has it. A tool's result is written by its own encoder, as on the 2026-07-28
        path; a list the engine holds encoded is rewritten once."""
        if type(result) is CallToolResult:
            encoded = result.encode()
            # The encoder writes resultType first and no other modern-only member: the rest is the 2025 result.
            if encoded.startswith(_COMPLETE_HEAD):
                return b"{" + encoded[len(_COMPLETE_HEAD) : -1] + self._meta_tail
        if isinstance(result, EncodedResult):
            cached = self._lists.get(method)
            if cached is not None and cached[0] is result:
                return cached[1]
            body = self._legacy_result(result.to_wire())
            if method in _LIST_METHODS:
                self._lists[method] = (result, body)  # bounded: one per list method
            return body
        return self._legacy_result(result.to_wire())

    def _legacy_result(self, wire: JsonObject) -> bytes:
        members: dict[str, WirePlain] = {
            name: value for name, value in wire.items() if name not in _MODERN_ONLY_RESULT_MEMBERS
        }
        members.setdefault("_meta", self._server_meta)
        return encode_wire(members)

    def _call_meta(self, session: LegacySession, params: JsonObject) -> JsonObject:
        """The ``_meta`` of the session's calls: the message's own members (``progressToken``...) with the modern
        version and what ``initialize`` declared, as a 2026-07-28 client would send them. Without members of its
        own, the session's (built once)."""
        own = params.get("_meta")
        if not isinstance(own, JsonObject) and session.call_meta is not None:
            return session.call_meta
        meta: dict[str, JsonValue] = dict(own.items()) if isinstance(own, JsonObject) else {}
        meta[PROTOCOL_VERSION_META_KEY] = self._modern_version_value
        meta[CLIENT_CAPABILITIES_META_KEY] = session.client_capabilities.to_wire()
        if session.client_info is not None:
            meta[CLIENT_INFO_META_KEY] = session.client_info
        built = JsonObject.from_mapping(meta)
        if not isinstance(own, JsonObject):
            session.call_meta = built
        return built

    async def _operation(
        self,
        request: LegacyRequest,
        session: LegacySession,
        admission: Admission,
        message: JsonObject,
        method: str,
        request_id: RequestId,
        channel: ClientChannel | None,
    ) -> DispatchResult:
        params_value = message.get("params")
        if params_value is not None and not isinstance(params_value, JsonObject):
            return _refused(in_session(params_not_object()), request_id, method)
        sent = params_value if isinstance(params_value, JsonObject) else JsonObject.empty_instance()
        meta = self._call_meta(session, sent)
        members: dict[str, JsonValue] = dict(sent.items())
        members["_meta"] = meta
        params = JsonObject.from_mapping(members)
        # One digest source for every round: rounds differ only in members the digest leaves out.
        digest = CanonicalParams(params, request.body_bytes)
        cap: int | None = None
        progress = ChannelProgress(channel) if channel is not None else None
        current = params
        rounds = 0
        operation: str | None = None
        try:
            while True:
                if channel is not None and channel.cancelled:
                    raise asyncio.CancelledError
                call = Call(
                    method=method,
                    # A fresh id each round: a retry must not reuse the id that emitted its state.
                    request_id=JsonString.from_value(f"legacy-{next(self._ids)}"),
                    protocol_version=self._modern_version,
                    params=current,
                    meta=meta,
                    capabilities=session.client_capabilities,
                    admission=admission,
                    endpoint_path=request.path,
                    digest=digest,
                )
                outcome = await self._engine.call(call, progress)
                if isinstance(outcome, Refused):
                    return self._refusal(outcome, request_id, method, rounds, operation)
                operation = outcome.operation or operation
                if not isinstance(outcome, InputRequired):
                    # Complete, or a task tool's CreateTaskResult: the value as a 2025 result.
                    answer = encode_result(request_id, self._complete(method, outcome.result))
                    return DispatchResult(200, answer, method=method, operation=operation, request_id=request_id)
                rounds += 1
                if rounds == 1:
                    cap = self._round_cap(method, params)
                if cap is not None and rounds > cap:
                    raise session_failure(
                        "This tool needed more rounds of input than the server allows; start again.", "round-limit"
                    )
                responses = await self._ask(session, outcome.result, channel)
                retry: dict[str, JsonValue] = dict(members)
                retry["inputResponses"] = responses
                state = outcome.sealed_state
                if state is None:
                    state = outcome.result.application_request_state
                if state is not None:
                    retry["requestState"] = JsonString.from_value(state)
                else:
                    retry.pop("requestState", None)
                current = JsonObject.from_mapping(retry)
        except McpError as failure:
            return self._failed(failure, request_id, method, operation)

    async def _ask(
        self, session: LegacySession, needed: InputRequiredResult, channel: ClientChannel | None
    ) -> JsonObject:
        """Send one round's requests to the client and collect its answers as ``inputResponses``."""
        requests = needed.input_requests
        if not requests:
            raise session_failure("The server could not answer this request.", "input-requests")
        if channel is None:
            raise session_failure(
                "This connection cannot carry the server's requests to the client.", "input-no-channel"
            )
        waiting: dict[str, tuple[RequestId, asyncio.Future[JsonObject], str]] = {}
        try:
            for key, item in requests.items():
                method = item.json_rpc_method
                try:
                    server_id, future = session.expect(method)
                except SessionsFull:
                    raise session_failure(
                        "The server has too many requests waiting for this client; try again later.", "input-busy"
                    ) from None
                waiting[key] = (server_id, future, method)
                frame = JsonObject.builder().put("jsonrpc", "2.0").put("id", server_id).put("method", method)
                if item.params is not None:
                    frame.put("params", self._client_params(session, method, item.params))
                channel.send(frame.build())
            await self._wait([future for _, future, _ in waiting.values()], channel)
            responses = JsonObject.builder()
            for key, (_, future, asked) in waiting.items():
                answer = future.result()
                named = asked if asked in methods.INPUT_REQUEST_METHODS else "a request"
                if "error" in answer:
                    raise session_failure(f"The client refused the server's request ({named}).", "input-refused")
                result = answer.get("result")
                if not isinstance(result, JsonObject):
                    raise session_failure(f"The client's answer to {named} was not understood.", "input-malformed")
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
                raise session_failure(
                    f"The client did not answer the server's request within {seconds} seconds.", "input-timeout"
                )
            _, pending = await asyncio.wait(pending, timeout=min(remaining, _GONE_CHECK_SECONDS))
        for future in futures:
            if future.cancelled():
                raise asyncio.CancelledError  # the session was closed under us

    def _refusal(
        self, refused: Refused, request_id: RequestId, method: str, rounds: int, operation: str | None
    ) -> DispatchResult:
        """What a refused round tells the 2025 client, decided by the refusal's kind."""
        error = refused.error
        operation = refused.operation or operation
        kind = refused.kind
        if kind is RefusalKind.MISSING_CAPABILITY:
            data = error.data
            required = data.get("requiredCapabilities") if isinstance(data, JsonObject) else None
            failure = session_failure(
                missing_sentence(required, method), "missing-capability", MISSING_CAPABILITY, data
            )
            return self._failed(failure, request_id, method, operation)
        if kind is RefusalKind.ROUND_LIMIT:
            sentence = "This tool needed more rounds of input than the server allows; start again."
            return self._failed(session_failure(sentence, error.log_reason), request_id, method, operation)
        if rounds and kind is RefusalKind.STATE_REFUSED:
            sentence = "This tool's saved progress expired or was refused; start again."
            return self._failed(session_failure(sentence, error.log_reason), request_id, method, operation)
        if rounds and kind is RefusalKind.INPUT_RESPONSES:
            sentence = "The client's answer to the server's request was not in the expected shape."
            return self._failed(session_failure(sentence, error.log_reason), request_id, method, operation)
        # Anything else is the engine's own answer, exactly as on the 2026-07-28 path, to the client's id.
        return DispatchResult.refused(in_session(error), request_id, method=method, operation=operation)

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
