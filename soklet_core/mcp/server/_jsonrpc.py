"""The JSON-RPC wire vocabulary of the MCP endpoint: error codes, :class:`McpError`, and response encoding.

The engine (protocol logic) and every transport (its framing) answer through this module, so a code, its
HTTP status and its wire shape each live here once.

========  ==========  ===========================================================================================
Code      HTTP        Meaning
========  ==========  ===========================================================================================
-32700    400         :data:`PARSE_ERROR`: the body is not JSON.
-32600    400         :data:`INVALID_REQUEST`: not a JSON-RPC request (also the transport's 4xx refusals; 401).
-32601    404         :data:`METHOD_NOT_FOUND`: unknown or removed method.
-32602    400         :data:`INVALID_PARAMS`: bad params, unknown operation, refused request state.
-32603    200         :data:`INTERNAL_ERROR`: handler or sealing failure, output over the ceiling (503: busy).
-32020    400         :data:`HEADER_MISMATCH`: a required header is missing or disagrees with the body.
-32021    400         :data:`MISSING_CAPABILITY`: an undeclared client capability (``data.requiredCapabilities``).
-32022    400         :data:`UNSUPPORTED_VERSION`: ``data.supported`` and ``data.requested``.
========  ==========  ===========================================================================================

A durable store's failure becomes a wire error here too (:func:`store_refusal`): unavailable → 503 / -32603 with
``Retry-After``; anything else → 200 / -32603. A missing client capability is built by
:func:`missing_capabilities` (the request's own checks and a task's failure both name it the same way).

A request-state refusal of the protection layer becomes a wire error here (:func:`state_refusal`), by direction
only, so clients cannot tell reasons apart: opening → 400 / -32602 / ``"Invalid or expired request state"``;
sealing → 200 / -32603 / ``"Internal error"``. The reason goes only to the log (``state-<reason>``,
``seal-<reason>``).

Every fixed wire refusal has its builder here, called by every transport and the engine: :func:`parse_refusal`,
:func:`envelope_refusal` and the envelope check itself (:func:`check_envelope`), :func:`method_refusal`,
:func:`params_not_object`, :func:`input_responses_malformed`, :func:`unauthorized`, :func:`busy_refusal` (503 with
``Retry-After``), :func:`task_not_found`, :func:`store_refusal`, :func:`state_refusal` and
:func:`missing_capabilities`. Each call makes a new error: a raised exception keeps the frames of its last raise (and
so that request's body) alive through its traceback, and one shared instance would do so for any request.

Responses are written as bytes from pre-encoded fixed fragments around the id and the result or error: the
envelope is never built as a value model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from soklet_core.errors import SokletError
from soklet_core.json import JsonNull, JsonNumber, JsonObject, JsonString, JsonValue, encode_wire, parse
from soklet_core.mcp.model.context import RequestId
from soklet_core.protection import RequestStateProtectionException
from soklet_core.store import StoreError, StoreErrorReason
from soklet_core.tracing import TraceIds

__all__ = [
    "BUSY_RETRY_AFTER_SECONDS",
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INTERNAL_ERROR_MESSAGE",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "INVALID_STATE_MESSAGE",
    "METHOD_NOT_FOUND",
    "MISSING_CAPABILITY",
    "MISSING_CAPABILITY_MESSAGE",
    "PARSE_ERROR",
    "RESPONSE_TOO_LARGE_MESSAGE",
    "TASK_NOT_FOUND_MESSAGE",
    "UNSUPPORTED_VERSION",
    "DispatchResult",
    "Envelope",
    "McpError",
    "busy_refusal",
    "capability_names",
    "check_envelope",
    "encode_error",
    "encode_id",
    "encode_result",
    "envelope_refusal",
    "error_response",
    "input_responses_malformed",
    "method_refusal",
    "missing_capabilities",
    "params_not_object",
    "parse_refusal",
    "state_refusal",
    "store_refusal",
    "task_not_found",
    "unauthorized",
]

#: The body is not JSON (HTTP 400).
PARSE_ERROR: Final = -32700
#: Not a JSON-RPC request object (also the code of 400/401/403/404/405/408/413/431 transport refusals).
INVALID_REQUEST: Final = -32600
#: Unknown or removed method (HTTP 404).
METHOD_NOT_FOUND: Final = -32601
#: Bad params, unknown operation, malformed input responses, refused request state (HTTP 400).
INVALID_PARAMS: Final = -32602
#: Handler failure, sealing failure, output over the ceiling (HTTP 200).
INTERNAL_ERROR: Final = -32603
#: A required header is missing or disagrees with the body (HTTP 400).
HEADER_MISMATCH: Final = -32020
#: A client capability the request needs was not declared (HTTP 400, ``data.requiredCapabilities``).
MISSING_CAPABILITY: Final = -32021
#: The protocol version is not supported (HTTP 400, ``data.supported`` and ``data.requested``).
UNSUPPORTED_VERSION: Final = -32022

#: What a client is told when the state it sent does not open, whatever the reason.
INVALID_STATE_MESSAGE: Final = "Invalid or expired request state"
#: What a client is told when the server failed (handler, sealing): nothing more.
INTERNAL_ERROR_MESSAGE: Final = "Internal error"
#: What a client is told when an answer (a reply, a task's result) is over its size ceiling.
RESPONSE_TOO_LARGE_MESSAGE: Final = "Response too large"
#: What a client is told when it did not declare a capability the request needs: the start of the message, which
#: goes on with the capability names (``Missing required client capability: elicitation.url``); ``data`` holds them.
MISSING_CAPABILITY_MESSAGE: Final = "Missing required client capability"
#: What a client is told for an unknown, expired or another caller's task id (and any id on a server without a
#: store): one message, so a client cannot tell them apart.
TASK_NOT_FOUND_MESSAGE: Final = "Failed to retrieve task: Task not found"
#: The ``Retry-After`` of a refusal for a moment's load (every large-body worker busy, the store out of reach).
BUSY_RETRY_AFTER_SECONDS: Final = 1
_BUSY_HEADERS: Final = (("retry-after", str(BUSY_RETRY_AFTER_SECONDS)),)
_JSONRPC_VERSION: Final = JsonString.from_value("2.0")

# The HTTP status of each code when the raiser does not say; a code not listed (an application's own) is 200,
# as a handler's error is an answer, not a refused request.
_STATUS_OF_CODE: Final = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    METHOD_NOT_FOUND: 404,
    INVALID_PARAMS: 400,
    INTERNAL_ERROR: 200,
    HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
}
_REASON_OF_CODE: Final = {
    PARSE_ERROR: "parse-error",
    INVALID_REQUEST: "invalid-request",
    METHOD_NOT_FOUND: "method-not-found",
    INVALID_PARAMS: "invalid-params",
    INTERNAL_ERROR: "internal-error",
    HEADER_MISMATCH: "header-mismatch",
    MISSING_CAPABILITY: "missing-capability",
    UNSUPPORTED_VERSION: "unsupported-version",
}
_REASON_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_MAX_REASON_CHARS: Final = 64

_logger = logging.getLogger("soklet.mcp")

_HEAD: Final = b'{"jsonrpc":"2.0","id":'
_RESULT: Final = b',"result":'
_ERROR_CODE: Final = b',"error":{"code":'
_MESSAGE: Final = b',"message":'
_DATA: Final = b',"data":'
_NULL_ID: Final = b"null"


class McpError(SokletError):
    """One JSON-RPC error answer: ``code``, ``message`` and optional ``data``, plus how it is sent.

    ``http_status`` defaults by code (see the module table; other codes 200); ``log_reason`` is the bounded
    token of the access log (lower-case letters, digits and ``-``; defaults by code); ``headers`` are extra
    response headers (lower-case names). The message and data go to the client as given: never put a secret or
    raw client input in them. Raised inside the engine (and by an interceptor or handler that wants a
    specific error), it is answered as is; ``str()`` is the log reason.

    ``reason`` is the log reason too, not a member of a closed enum: an application may answer with codes and
    reasons of its own.
    """

    __slots__ = ("code", "data", "headers", "http_status", "log_reason", "message")

    def __init__(
        self,
        code: int,
        message: str,
        data: JsonValue | None = None,
        *,
        http_status: int | None = None,
        log_reason: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        if isinstance(code, bool) or not isinstance(code, int):
            raise TypeError("code must be an int")
        if not isinstance(message, str):
            raise TypeError("message must be a str")
        if data is not None and not isinstance(data, JsonValue):
            raise TypeError("data must be a JsonValue")
        status = _STATUS_OF_CODE.get(code, 200) if http_status is None else http_status
        if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
            raise ValueError("http_status must be between 200 and 599")
        reason = _REASON_OF_CODE.get(code, "error") if log_reason is None else log_reason
        if (
            not isinstance(reason, str)
            or not 0 < len(reason) <= _MAX_REASON_CHARS
            or not _REASON_CHARS.issuperset(reason)
        ):
            raise ValueError("log_reason must be 1-64 lower-case letters, digits and '-'")
        if not isinstance(headers, tuple) or not all(
            isinstance(item, tuple) and len(item) == 2 and all(isinstance(part, str) for part in item)
            for item in headers
        ):
            raise TypeError("headers must be a tuple of (name, value) str pairs")
        super().__init__(reason, reason)
        self.code = code
        self.message = message
        self.data = data
        self.http_status = status
        self.log_reason = reason
        self.headers = headers

    def encode(self, request_id: JsonValue | None) -> bytes:
        """This error as a JSON-RPC response to ``request_id`` (``None``: the id is unknown, written null)."""
        return encode_error(request_id, self.code, self.message, self.data)

    def __repr__(self) -> str:
        return f"McpError(code={self.code}, reason={self.log_reason!r})"


def encode_id(request_id: JsonValue | None) -> bytes:
    """The JSON text of a request id (``null`` for ``None``)."""
    if request_id is None:
        return _NULL_ID
    if type(request_id) is JsonNumber:
        return str(request_id.value).encode("ascii")
    return encode_wire(request_id)


def encode_result(request_id: JsonValue, result: bytes) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"result":…}`` around an already encoded result."""
    return b"".join((_HEAD, encode_id(request_id), _RESULT, result, b"}"))


def encode_error(request_id: JsonValue | None, code: int, message: str, data: JsonValue | None = None) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…[,"data":…]}}`` (id null when unknown)."""
    parts = [_HEAD, encode_id(request_id), _ERROR_CODE, str(code).encode("ascii"), _MESSAGE]
    # A message with a lone surrogate is refused (JsonError), as JsonString.from_value refuses it.
    parts.append(encode_wire(message))
    if data is not None:
        parts += (_DATA, encode_wire(data))
    parts.append(b"}}")
    return b"".join(parts)


def error_response(request_id: JsonValue | None, code: int, message: str, data: JsonValue | None = None) -> JsonObject:
    """A JSON-RPC error response as a value (``id`` null when the request id is unknown)."""
    error = JsonObject.builder().put("code", code).put("message", message)
    if data is not None:
        error.put("data", data)
    envelope = JsonObject.builder().put("jsonrpc", "2.0")
    envelope.put("id", JsonNull.instance() if request_id is None else request_id)
    return envelope.put("error", error.build()).build()


def state_refusal(error: RequestStateProtectionException) -> McpError:
    """The wire error of a state that did not open (400, -32602) or could not be sealed (200, -32603).

    Only the direction reaches the client; the reason is the log reason (``state-…`` or ``seal-…``).
    """
    reason = error.reason
    if reason.is_sealing:
        return McpError(INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE, http_status=200, log_reason=f"seal-{reason.value}")
    return McpError(INVALID_PARAMS, INVALID_STATE_MESSAGE, http_status=400, log_reason=f"state-{reason.value}")


def capability_names(required: JsonValue | None, prefix: str = "") -> list[str]:
    """The dotted names of a capabilities object's leaves: ``{"elicitation":{"url":{}},"sampling":{}}`` →
    ``["elicitation.url", "sampling"]`` (``[]`` for anything but an object). The names come from registrations
    (what a request needs), never from client input, so a message may name them."""
    if not isinstance(required, JsonObject):
        return []
    names: list[str] = []
    for name, value in required.items():
        path = f"{prefix}{name}"
        inner = capability_names(value, path + ".") if isinstance(value, JsonObject) and len(value) else []
        names.extend(inner or [path])
    return names


def missing_capabilities(missing: JsonObject) -> McpError:
    """-32021 (400) ``Missing required client capability: <names>`` with ``data.requiredCapabilities`` =
    ``missing`` (the capabilities object the client lacks, e.g.
    ``{"extensions": {"io.modelcontextprotocol/tasks": {}}}``; the message names its leaves, see
    :func:`capability_names`)."""
    data = JsonObject.builder().put("requiredCapabilities", missing).build()
    names = capability_names(missing)
    message = f"{MISSING_CAPABILITY_MESSAGE}: {', '.join(names)}" if names else MISSING_CAPABILITY_MESSAGE
    return McpError(MISSING_CAPABILITY, message, data)


def store_refusal(error: StoreError) -> McpError:
    """The wire error of a durable store that failed a call: 503 / -32603 ``Service Unavailable`` with
    ``Retry-After`` when it could not be reached in time (``store-unavailable``), else 200 / -32603 ``Internal
    error`` (``store-<reason>``). The store's own message (never client-safe by design) goes to the log only."""
    if error.reason is StoreErrorReason.UNAVAILABLE:
        return McpError(
            INTERNAL_ERROR,
            "Service Unavailable",
            http_status=503,
            log_reason="store-unavailable",
            headers=_BUSY_HEADERS,
        )
    return McpError(INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE, http_status=200, log_reason=f"store-{error.reason.value}")


def busy_refusal(
    message: str = "Service Unavailable", *, retry_after: int = BUSY_RETRY_AFTER_SECONDS, reason: str = "busy"
) -> McpError:
    """503 / -32603 with ``Retry-After``: the server's state, not the request's fault (every large-body worker
    stayed busy, too many requests in flight, too many sessions). ``message`` is a fixed phrase; ``reason`` the log
    reason when the log names which bound was met (``sessions-full``, ``in-flight-full``)."""
    return McpError(
        INTERNAL_ERROR, message, http_status=503, log_reason=reason, headers=(("retry-after", str(retry_after)),)
    )


def parse_refusal() -> McpError:
    """-32700 (400): the body is not strict JSON."""
    return McpError(PARSE_ERROR, "Parse error")


def envelope_refusal() -> McpError:
    """-32600 (400): not a JSON-RPC 2.0 request or notification."""
    return McpError(INVALID_REQUEST, "Invalid Request", log_reason="envelope")


def method_refusal() -> McpError:
    """-32601 (404): an unknown or removed method."""
    return McpError(METHOD_NOT_FOUND, "Method not found")


def params_not_object() -> McpError:
    """-32602 (400): ``params`` is present and not an object."""
    return McpError(INVALID_PARAMS, "Invalid params: params must be an object", log_reason="params-not-object")


def input_responses_malformed(*, not_object: bool = False) -> McpError:
    """-32602 (400): ``inputResponses`` is not an object (``not_object``), or an answer in it is outside the
    protocol union of the request it answers."""
    message = (
        "Invalid params: inputResponses must be an object"
        if not_object
        else "Invalid params: an input response is malformed"
    )
    return McpError(INVALID_PARAMS, message, log_reason="input-responses")


def unauthorized(
    reason: str,
    *,
    status: int = 401,
    error: str | None = None,
    scopes: tuple[str, ...] = (),
    resource_metadata: str | None = None,
) -> McpError:
    """An admission refusal as the wire answers it: 401 ``Unauthorized`` or 403 ``Forbidden`` (-32600) with a
    ``WWW-Authenticate: Bearer`` challenge (RFC 6750 §3; the RFC 9728 ``resource_metadata`` URL, the ``error`` code,
    the ``scope`` needed), or 503 with ``Retry-After`` when the token could not be checked. ``reason`` is the
    policy's bounded reason (the log says ``admission-<reason>``); nothing else about why a token failed is sent.
    The challenge's values are configured or fixed, never the client's (scopes and URLs are checked where they are
    configured so that they quote as they are)."""
    log_reason = f"admission-{reason}"
    if status == 503:
        return busy_refusal(reason=log_reason)
    params = []
    if resource_metadata is not None:
        params.append(f'resource_metadata="{resource_metadata}"')
    if error is not None:
        params.append(f'error="{error}"')
    if scopes:
        params.append(f'scope="{" ".join(scopes)}"')
    challenge = "Bearer " + ", ".join(params) if params else "Bearer"
    return McpError(
        INVALID_REQUEST,
        "Forbidden" if status == 403 else "Unauthorized",
        http_status=status,
        log_reason=log_reason,
        headers=(("www-authenticate", challenge),),
    )


def task_not_found() -> McpError:
    """-32602 (400) :data:`TASK_NOT_FOUND_MESSAGE`."""
    return McpError(INVALID_PARAMS, TASK_NOT_FOUND_MESSAGE, log_reason="task-not-found")


@dataclass(frozen=True, slots=True)
class Envelope:
    """A JSON-RPC request's envelope: the message, its id, and its method (``None``: not a string, which is refused
    with the id once it is known)."""

    message: JsonObject
    request_id: RequestId
    method: str | None


def check_envelope(message: JsonValue) -> Envelope | None:
    """The JSON-RPC 2.0 envelope of a parsed message, the one check every transport makes: the request's
    :class:`Envelope`, ``None`` for a notification (no ``id``, a string method); raises :func:`envelope_refusal`
    for anything else (not an object, no ``"jsonrpc": "2.0"``, an id that is neither a string nor a number)."""
    if not isinstance(message, JsonObject) or message.get("jsonrpc") != _JSONRPC_VERSION:
        raise envelope_refusal()
    method = message.get("method")
    if "id" not in message:
        if isinstance(method, JsonString):
            return None
        raise envelope_refusal()
    request_id = message["id"]
    if not isinstance(request_id, JsonString | JsonNumber):
        raise envelope_refusal()
    return Envelope(message, request_id, method.value if isinstance(method, JsonString) else None)


@dataclass(frozen=True, slots=True)
class DispatchResult:
    """A transport's answer to one request, and what the access log may say about it.

    ``body`` is the encoded JSON-RPC response (``None`` for an accepted notification, 202); ``request_id`` its
    id when known. ``method`` and ``operation`` are only ever known method names and registered operation names
    (never raw client text); ``reason`` is a bounded refusal reason for the log.
    """

    status: int
    body: bytes | None
    method: str | None = None
    operation: str | None = None
    reason: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    code: int | None = None
    request_id: RequestId | None = None
    #: The ids of the request's server span, when it was traced (the access log line names them).
    trace: TraceIds | None = None

    @property
    def message(self) -> JsonObject | None:
        """The response as a value (parsed from :attr:`body`; for tests and tools, not the hot path)."""
        if self.body is None:
            return None
        message = parse(self.body)
        assert isinstance(message, JsonObject)
        return message

    def within(self, ceiling: int) -> DispatchResult:
        """This answer, or, when its body is over ``ceiling`` bytes (the output ceiling), the 200 / -32603
        ``Response too large`` that replaces it, logged once: the one place every transport makes that swap."""
        if self.body is None or len(self.body) <= ceiling:
            return self
        _logger.error("response over the %d-byte output ceiling replaced by an error", ceiling)
        return DispatchResult(
            200,
            encode_error(self.request_id, INTERNAL_ERROR, RESPONSE_TOO_LARGE_MESSAGE),
            method=self.method,
            operation=self.operation,
            reason="output-ceiling",
            code=INTERNAL_ERROR,
            request_id=self.request_id,
            trace=self.trace,
        )

    def traced(self, ids: TraceIds) -> DispatchResult:
        """This answer with the ids of the request's server span (for the access log)."""
        return DispatchResult(
            self.status,
            self.body,
            self.method,
            self.operation,
            self.reason,
            self.headers,
            self.code,
            self.request_id,
            ids,
        )

    @classmethod
    def refused(
        cls,
        error: McpError,
        request_id: RequestId | None = None,
        *,
        method: str | None = None,
        operation: str | None = None,
    ) -> DispatchResult:
        """The answer of a refused request."""
        return cls(
            error.http_status,
            error.encode(request_id),
            method=method,
            operation=operation,
            reason=error.log_reason,
            headers=error.headers,
            code=error.code,
            request_id=request_id,
        )
