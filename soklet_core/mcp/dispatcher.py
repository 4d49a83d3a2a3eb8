"""The MCP 2026-07-28 protocol logic of one POST: validation, admission, capabilities, state, handler, sealing.

No ASGI here: :class:`Dispatcher` takes an :class:`HttpRequest` (path, lower-case headers, body bytes) and
returns a :class:`DispatchResult` (HTTP status, JSON-RPC message, log fields). The transport adds the HTTP
framing, SSE progress, body and output limits and cancellation.

Validation order (conformance §1.3, then soklet's own steps); the first failure answers:

1. JSON body (-32700, 400), JSON-RPC envelope (-32600, 400); a notification (no ``id``) is accepted (202).
2. ``MCP-Protocol-Version`` header present (-32020, 400).
3. ``params._meta`` with ``protocolVersion`` and ``clientCapabilities`` (-32602, 400).
4. Header equals ``_meta`` version (-32020, 400).
5. Version supported (-32022, 400, ``data.supported`` / ``data.requested``).
6. Method known; removed and unknown methods (-32601, 404).
7. ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` headers (-32020, 400).
8. Admission (401).
9. Operation lookup (-32602, 400; ``data.uri`` for an unknown resource).
10. REQUIRED capabilities of the operation, all missing at once (-32021, 400), before params or state are read.
11. Params: arguments, ``inputResponses`` (an object of objects, each in the protocol union), ``requestState``
    of the operation's declared mode (-32602, 400).
12. Opening a FRAMEWORK_PROTECTED state with the binding of this request (-32602, 400, one fixed message).
13. The handler (its failure: -32603, 200).
14. CONDITIONAL capabilities of the emitted requests, all missing at once (-32021, 400).
15. Sealing the emitted framework state (-32603, 200, no state emitted).

Request bodies: work that grows with the body stays off the event loop. A body up to :data:`INLINE_BODY_BYTES` is
parsed on the loop; a larger one is parsed in a worker thread, at most :data:`MAX_CONCURRENT_LARGE_BODIES` at a
time (the others wait up to :data:`LARGE_BODY_WAIT_SECONDS`, then get 503), so other clients keep being answered
and memory stays bounded by that many bodies' working sets. The params digest a framework-protected state is bound
to is taken from the body bytes (:func:`soklet_core.json.params_digest`), never from the value model; for a large
body it is taken in the same worker job, *before* the value model is built, so the two never coexist in memory.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import inspect
import logging
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias, TypeVar

from soklet_core import __version__
from soklet_core.json import (
    JsonArray,
    JsonBoolean,
    JsonError,
    JsonErrorReason,
    JsonNull,
    JsonNumber,
    JsonObject,
    JsonString,
    JsonValue,
    ParamsDigest,
    params_digest,
    parse,
)
from soklet_core.protection import (
    BoundRequest,
    OpenedRequestState,
    ProtectionUsageError,
    RequestStateBinding,
    RequestStateProtectionException,
    RequestStateSealer,
)

from . import methods
from .admission import Admission, AdmissionPolicy, AdmissionRefused, AdmissionRequest, AnonymousAdmission
from .capabilities import CLIENT_CAPABILITIES_META_KEY, ClientCapabilities
from .context import RequestContext, RequestId
from .errors import McpModelError
from .input_requests import InputRequirement
from .input_required import InputRequiredResult, RequestStateMode, check_application_request_state
from .input_response_union import matches_input_response
from .input_responses import InputResponses
from .registry import (
    CompletionArguments,
    PromptRegistration,
    Registry,
    ResourceArguments,
    ResourceRegistration,
    ResourceTemplateRegistration,
    ToolRegistration,
)
from .results import CacheHint, CacheScope, CallToolResult, CompleteResult, GetPromptResult, ReadResourceResult

if TYPE_CHECKING:
    from .metrics import ServerMetrics

__all__ = [
    "DEFAULT_LIST_CACHE_HINT",
    "HEADER_MISMATCH",
    "INLINE_BODY_BYTES",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LARGE_BODY_WAIT_SECONDS",
    "MAX_CONCURRENT_LARGE_BODIES",
    "METHOD_NOT_FOUND",
    "MISSING_CAPABILITY",
    "PARSE_ERROR",
    "PROTOCOL_VERSION_META_KEY",
    "SERVER_INFO_META_KEY",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "UNSUPPORTED_VERSION",
    "DispatchResult",
    "Dispatcher",
    "HttpRequest",
    "Interceptor",
    "LifecycleCallback",
    "ProgressChannel",
    "error_response",
]

_logger = logging.getLogger("soklet.mcp")

#: The protocol versions this server speaks.
SUPPORTED_PROTOCOL_VERSIONS: Final = ("2026-07-28",)
#: ``params._meta`` key of the request's protocol version.
PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"
#: Result ``_meta`` key naming the server.
SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"
_LOG_LEVEL_META_KEY: Final = "io.modelcontextprotocol/logLevel"
_LOG_LEVELS: Final = frozenset({"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})
#: Cache hint of ``server/discover`` and the list results (their content is the same for every caller).
DEFAULT_LIST_CACHE_HINT: Final = CacheHint(300_000, CacheScope.PUBLIC)

_KNOWN_METHODS: Final = frozenset(
    {
        methods.SERVER_DISCOVER,
        methods.TOOLS_LIST,
        methods.TOOLS_CALL,
        methods.PROMPTS_LIST,
        methods.PROMPTS_GET,
        methods.RESOURCES_LIST,
        methods.RESOURCES_READ,
        methods.RESOURCES_TEMPLATES_LIST,
        methods.COMPLETION_COMPLETE,
    }
)
#: Bodies up to this many bytes are parsed on the event loop: the densest JSON of this size (a run of numbers) costs
#: about 15 ms, less than handing it to a thread and back would save. Larger bodies go to a worker thread.
INLINE_BODY_BYTES: Final = 64 * 1024
#: Bodies over :data:`INLINE_BODY_BYTES` parsed (and digested) at the same time, one worker thread each. Each costs
#: up to about 25 times its size while its value model is built (docs/benchmarks.md), so two 16 MiB bodies stay
#: under a gigabyte; two keep both cores of a small machine busy without starving the event loop.
MAX_CONCURRENT_LARGE_BODIES: Final = 2
#: How long a large body waits for a worker before it is refused (503, JSON-RPC -32603, ``Retry-After``).
LARGE_BODY_WAIT_SECONDS: Final = 30.0
# What a digest taken from the bytes may refuse that parsing the same bytes accepts: every other refusal of the
# digest is one that parse() makes too (the digest checks the parts it leaves out), so it answers for both.
_DIGEST_ONLY_REFUSALS: Final = frozenset({JsonErrorReason.PARAMS_NOT_STRUCTURED, JsonErrorReason.CANONICAL_TOO_LARGE})
_T = TypeVar("_T")
_BASE64_SENTINEL: Final = re.compile(r"=\?base64\?([A-Za-z0-9+/=_-]*)\?=")

#: JSON-RPC error codes the server answers with (standard, then MCP's own -32020..-32022).
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

_Operation: TypeAlias = ToolRegistration | PromptRegistration | ResourceRegistration | ResourceTemplateRegistration

#: Wraps the handler call: ``interceptor(context, call_handler)`` must await ``call_handler()`` (or not) and
#: return the result. It receives the same admitted context the handler gets.
Interceptor: TypeAlias = Callable[[RequestContext, Callable[[], Awaitable[object]]], Awaitable[object]]
#: Called with ``(event, context)``: ``"admitted"`` before the handler, ``"finished"`` after it (sync, fast).
LifecycleCallback: TypeAlias = Callable[[str, RequestContext], None]


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One POST as the dispatcher sees it: the endpoint path, headers with lower-case names, and the body."""

    path: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class DispatchResult:
    """The answer to one POST, and what the access log may say about it.

    ``message`` is ``None`` for an accepted notification (202). ``method`` and ``operation`` are only ever
    known method names and registered operation names (never raw client text); ``reason`` is a bounded refusal
    reason for the log.
    """

    status: int
    message: JsonObject | None
    method: str | None = None
    operation: str | None = None
    reason: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    code: int | None = None


class ProgressChannel(Protocol):
    """Where the transport receives a running handler's progress frames (called on the event-loop thread).

    ``allow_streaming()`` is called before the handler runs when no unmet CONDITIONAL capability can still turn
    the answer into an error; until then frames must be held back, not streamed. ``cancelled`` turns true when
    the client disconnects.
    """

    @property
    def cancelled(self) -> bool:
        """Whether the client has gone."""
        ...

    def allow_streaming(self) -> None:
        """The response may now be committed as SSE when a frame arrives."""
        ...

    def progress(self, frame: JsonObject) -> None:
        """One ``notifications/progress`` message."""
        ...


class _Invocation:
    """The :class:`~soklet_core.mcp.InvocationFeatures` of one request, feeding a :class:`ProgressChannel`."""

    __slots__ = ("_channel", "_closed", "_last", "_loop", "_token")

    def __init__(self, token: RequestId | None, channel: ProgressChannel | None) -> None:
        self._token = token
        self._channel = channel
        self._loop = asyncio.get_running_loop()
        self._last: Decimal | None = None
        self._closed = False

    @property
    def progress_token(self) -> RequestId | None:
        return self._token

    @property
    def cancelled(self) -> bool:
        return self._channel is not None and self._channel.cancelled

    def close(self) -> None:
        # Progress must stop once the result exists; frames a handler thread sends later are dropped.
        self._closed = True

    def report_progress(
        self, progress: Decimal | int, *, total: Decimal | int | None = None, message: str | None = None
    ) -> None:
        if self._token is None or self._channel is None or self._closed:
            return
        value = _exact(progress)
        if self._last is not None and value <= self._last:
            return  # progress must increase: a repeated or lower value is dropped, not sent
        self._last = value
        params = JsonObject.builder().put("progressToken", self._token).put("progress", value)
        if total is not None:
            params.put("total", _exact(total))
        if message is not None:
            params.put("message", message)
        frame = (
            JsonObject.builder()
            .put("jsonrpc", "2.0")
            .put("method", "notifications/progress")
            .put("params", params.build())
            .build()
        )
        try:
            self._loop.call_soon_threadsafe(self._deliver, frame)
        except RuntimeError:  # the loop has closed (shutdown): there is nobody to tell
            self._closed = True

    def _deliver(self, frame: JsonObject) -> None:
        if not self._closed and self._channel is not None:
            self._channel.progress(frame)


def _exact(number: Decimal | float) -> Decimal:
    # A float is taken by its shortest repr (0.1 -> 0.1), not its binary expansion.
    return Decimal(repr(number)) if isinstance(number, float) else Decimal(number)


class _Refusal(Exception):
    """An early answer: status, code, message, optional data and the log reason."""

    def __init__(
        self, status: int, code: int, message: str, reason: str, data: JsonValue | None = None, **extra: Any
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.code = code
        self.message = message
        self.reason = reason
        self.data = data
        self.headers: tuple[tuple[str, str], ...] = extra.get("headers", ())


def _error_message(request_id: JsonValue, code: int, message: str, data: JsonValue | None = None) -> JsonObject:
    error = JsonObject.builder().put("code", code).put("message", message)
    if data is not None:
        error.put("data", data)
    return JsonObject.builder().put("jsonrpc", "2.0").put("id", request_id).put("error", error.build()).build()


def error_response(request_id: JsonValue | None, code: int, message: str, data: JsonValue | None = None) -> JsonObject:
    """A JSON-RPC error response (``id`` null when the request id is unknown)."""
    return _error_message(JsonNull.instance() if request_id is None else request_id, code, message, data)


def _result_message(request_id: JsonValue, result: JsonObject) -> JsonObject:
    return JsonObject.builder().put("jsonrpc", "2.0").put("id", request_id).put("result", result).build()


def _header_mismatch(detail: str) -> _Refusal:
    return _Refusal(400, HEADER_MISMATCH, f"Header mismatch: {detail}", "header-mismatch")


def _invalid_params(message: str, reason: str, data: JsonValue | None = None) -> _Refusal:
    return _Refusal(400, INVALID_PARAMS, message, reason, data)


def _decode_header(value: str) -> str:
    value = value.strip()
    match = _BASE64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match.group(1), validate=False).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _header_mismatch("a base64 header value does not decode") from None


def _header_matches(header: str, body: JsonValue) -> bool:
    if isinstance(body, JsonString):
        return header == body.value
    if isinstance(body, JsonBoolean):
        return header == ("true" if body.value else "false")
    if isinstance(body, JsonNumber):
        try:
            return Decimal(header) == body.value
        except (InvalidOperation, ValueError):
            return False
    return False


def _conditional_capabilities(operation: _Operation) -> tuple[ClientCapabilities, ...]:
    return tuple(
        item.capabilities
        for item in operation.input_request_declarations
        if item.requirement is InputRequirement.CONDITIONAL
    )


class Dispatcher:
    """Protocol logic for one server. Stateless per request and safe to share between concurrent requests.

    Build it through :class:`soklet_core.mcp.McpServer`; it is public so that other transports (stdio, tests)
    can drive the same logic.
    """

    def __init__(
        self,
        *,
        registry: Registry,
        sealer: RequestStateSealer | None = None,
        admission: AdmissionPolicy | None = None,
        supported_versions: Iterable[str] = SUPPORTED_PROTOCOL_VERSIONS,
        server_name: str = "soklet",
        server_version: str = __version__,
        instructions: str | None = None,
        list_cache_hint: CacheHint = DEFAULT_LIST_CACHE_HINT,
        interceptor: Interceptor | None = None,
        lifecycle: Iterable[LifecycleCallback] = (),
        sync_handlers_in_thread: bool = True,
        large_body_wait_seconds: float = LARGE_BODY_WAIT_SECONDS,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self._registry = registry
        self._metrics = metrics
        self._large_body_wait = large_body_wait_seconds
        self._in_thread = sync_handlers_in_thread
        self._sealer = sealer
        self._admission: AdmissionPolicy = admission if admission is not None else AnonymousAdmission()
        self._versions = tuple(supported_versions)
        if not self._versions:
            raise ValueError("at least one protocol version must be supported")
        self._instructions = instructions
        self._cache_hint = list_cache_hint
        self._interceptor = interceptor
        self._lifecycle = tuple(lifecycle)
        self._server_meta = JsonObject.from_mapping(
            {SERVER_INFO_META_KEY: {"name": server_name, "version": server_version}}
        )
        # Only framework-protected operations bind a state to the params digest.
        self._digests = any(
            item.request_state_mode is RequestStateMode.FRAMEWORK_PROTECTED for item in self._operations()
        )
        if sealer is None and self._digests:
            raise ValueError("FRAMEWORK_PROTECTED operations need a protection config")
        self._lists = self._build_lists()
        self._workers_lock = threading.Lock()
        self._workers: ThreadPoolExecutor | None = None
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    @property
    def metrics(self) -> ServerMetrics | None:
        """Where seals, opens and ``input_required`` results are counted (``None``: not counted)."""
        return self._metrics

    @property
    def registry(self) -> Registry:
        """The registrations served."""
        return self._registry

    def _operations(self) -> Iterable[_Operation]:
        yield from self._registry.tools
        yield from self._registry.prompts
        yield from self._registry.resources
        yield from self._registry.resource_templates

    def _list_result(self, member: str, items: Iterable[JsonValue]) -> JsonObject:
        return (
            JsonObject.builder()
            .put("resultType", "complete")
            .put(member, JsonArray.of(*items))
            .put("ttlMs", self._cache_hint.ttl_ms)
            .put("cacheScope", self._cache_hint.scope.value)
            .put("_meta", self._server_meta)
            .build()
        )

    def _build_lists(self) -> Mapping[str, JsonObject]:
        # Registrations are immutable, so each list result is built once and reused for every request.
        capabilities = JsonObject.from_mapping({"tools": {}, "prompts": {}, "resources": {}, "completions": {}})
        discover = (
            JsonObject.builder()
            .put("resultType", "complete")
            .put("supportedVersions", JsonArray.of(*self._versions))
            .put("capabilities", capabilities)
        )
        if self._instructions is not None:
            discover.put("instructions", self._instructions)
        discover.put("ttlMs", self._cache_hint.ttl_ms).put("cacheScope", self._cache_hint.scope.value)
        discover.put("_meta", self._server_meta)
        registry = self._registry
        return {
            methods.SERVER_DISCOVER: discover.build(),
            methods.TOOLS_LIST: self._list_result("tools", (t.to_wire() for t in registry.tools)),
            methods.PROMPTS_LIST: self._list_result("prompts", (p.to_wire() for p in registry.prompts)),
            methods.RESOURCES_LIST: self._list_result("resources", (r.to_wire() for r in registry.resources)),
            methods.RESOURCES_TEMPLATES_LIST: self._list_result(
                "resourceTemplates", (t.to_wire() for t in registry.resource_templates)
            ),
        }

    # ------------------------------------------------------------------------------------------------ entry

    async def dispatch(self, request: HttpRequest, channel: ProgressChannel | None = None) -> DispatchResult:
        """Answer one POST body. Never raises for client input; ``asyncio.CancelledError`` propagates."""
        digest: ParamsDigest | JsonError | None = None
        try:
            if len(request.body) <= INLINE_BODY_BYTES:
                message = parse(request.body)
            else:
                message, digest = await self._off_loop(lambda: _read_large_body(request.body, digest=self._digests))
        except JsonError:
            return DispatchResult(400, error_response(None, PARSE_ERROR, "Parse error"), reason="parse-error")
        except _Busy:
            busy = _busy_refusal()
            answer = error_response(None, busy.code, busy.message)
            return DispatchResult(busy.status, answer, reason=busy.reason, headers=busy.headers, code=busy.code)
        if not isinstance(message, JsonObject) or message.get("jsonrpc") != _JSONRPC:
            return DispatchResult(400, error_response(None, INVALID_REQUEST, "Invalid Request"), reason="envelope")
        method_value = message.get("method")
        if "id" not in message:
            if isinstance(method_value, JsonString):
                return DispatchResult(202, None, reason="notification")
            return DispatchResult(400, error_response(None, INVALID_REQUEST, "Invalid Request"), reason="envelope")
        request_id = message["id"]
        if not isinstance(request_id, JsonString | JsonNumber) or not isinstance(method_value, JsonString):
            known_id = request_id if isinstance(request_id, JsonString | JsonNumber) else None
            return DispatchResult(400, error_response(known_id, INVALID_REQUEST, "Invalid Request"), reason="envelope")
        method = method_value.value
        logged_method = method if method in _KNOWN_METHODS else None
        state = _Call(request, message, request_id, method)
        state.digest = digest
        try:
            return await self._dispatch(state, channel)
        except _Refusal as refusal:
            return DispatchResult(
                refusal.status,
                error_response(request_id, refusal.code, refusal.message, refusal.data),
                method=logged_method,
                operation=state.operation_name,
                reason=refusal.reason,
                headers=refusal.headers,
                code=refusal.code,
            )

    def _worker_pool(self) -> ThreadPoolExecutor:
        with self._workers_lock:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(MAX_CONCURRENT_LARGE_BODIES, thread_name_prefix="soklet-body")
            return self._workers

    def _worker_slots(self) -> asyncio.Semaphore:
        # One semaphore per event loop: a dispatcher may outlive the loop it first served (tests, restarts).
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(MAX_CONCURRENT_LARGE_BODIES))
        return self._slots[1]

    async def _off_loop(self, work: Callable[[], _T]) -> _T:
        """Run ``work`` (which grows with a body) in a worker thread, holding one of the bounded slots until the
        thread is done, even when the request is cancelled meanwhile (a thread cannot be stopped halfway)."""
        slots = self._worker_slots()
        try:
            async with asyncio.timeout(self._large_body_wait):
                await slots.acquire()
        except TimeoutError:
            raise _Busy from None
        try:
            future = asyncio.get_running_loop().run_in_executor(self._worker_pool(), work)
        except BaseException:
            slots.release()
            raise
        future.add_done_callback(lambda done: _release(slots, done))
        return await asyncio.shield(future)

    async def _dispatch(self, call: _Call, channel: ProgressChannel | None) -> DispatchResult:
        headers = call.request.headers
        version_header = headers.get("mcp-protocol-version")
        if version_header is None:
            raise _header_mismatch("missing MCP-Protocol-Version header")
        params = call.message.get("params")
        if params is not None and not isinstance(params, JsonObject):
            raise _invalid_params("Invalid params: params must be an object", "params-not-object")
        meta = params.get("_meta") if params is not None else None
        if (
            not isinstance(meta, JsonObject)
            or PROTOCOL_VERSION_META_KEY not in meta
            or CLIENT_CAPABILITIES_META_KEY not in meta
        ):
            raise _invalid_params(
                "Invalid params: _meta must carry io.modelcontextprotocol/protocolVersion and "
                "io.modelcontextprotocol/clientCapabilities",
                "meta-missing",
            )
        version = meta[PROTOCOL_VERSION_META_KEY]
        if not isinstance(version, JsonString):
            raise _invalid_params("Invalid params: protocolVersion must be a string", "meta-invalid")
        try:
            capabilities = ClientCapabilities.from_json(meta[CLIENT_CAPABILITIES_META_KEY])
        except McpModelError:
            raise _invalid_params("Invalid params: clientCapabilities must be an object", "meta-invalid") from None
        if version_header.strip() != version.value:
            raise _header_mismatch("MCP-Protocol-Version header does not match _meta protocolVersion")
        if version.value not in self._versions:
            data = JsonObject.builder().put("supported", JsonArray.of(*self._versions)).put("requested", version)
            raise _Refusal(
                400, UNSUPPORTED_VERSION, "Unsupported protocol version", "unsupported-version", data.build()
            )
        if call.method not in _KNOWN_METHODS:
            raise _Refusal(404, METHOD_NOT_FOUND, "Method not found", "method-not-found")
        method_header = headers.get("mcp-method")
        if method_header is None or method_header.strip() != call.method:
            raise _header_mismatch("Mcp-Method header does not match the body method")
        log_level = meta.get(_LOG_LEVEL_META_KEY)
        if log_level is not None and not (isinstance(log_level, JsonString) and log_level.value in _LOG_LEVELS):
            raise _invalid_params("Invalid params: unknown logLevel", "log-level")
        body = params if params is not None else JsonObject.empty_instance()
        tool = self._check_routing_headers(call, body)
        try:
            admission = self._admission.admit(AdmissionRequest(call.request.path, headers))
        except AdmissionRefused as refused:
            raise _Refusal(
                401,
                INVALID_REQUEST,
                "Unauthorized",
                f"admission-{refused.reason.value}",
                headers=(("www-authenticate", "Bearer"),),
            ) from None
        call.admission = admission
        call.capabilities = capabilities
        call.version = version.value
        call.meta = meta
        call.params = body
        call.channel = channel
        listed = self._lists.get(call.method)
        if listed is not None:
            return call.complete(listed)
        if call.method == methods.TOOLS_CALL:
            return await self._tools_call(call, tool)
        if call.method == methods.PROMPTS_GET:
            return await self._prompts_get(call)
        if call.method == methods.RESOURCES_READ:
            return await self._resources_read(call)
        return await self._complete(call)

    def _check_routing_headers(self, call: _Call, params: JsonObject) -> ToolRegistration | None:
        member = {methods.TOOLS_CALL: "name", methods.PROMPTS_GET: "name", methods.RESOURCES_READ: "uri"}.get(
            call.method
        )
        if member is None:
            return None
        value = params.get(member)
        if not isinstance(value, JsonString):
            raise _invalid_params(f"Invalid params: params.{member} must be a string", f"{member}-missing")
        header = call.request.headers.get("mcp-name")
        if header is None:
            raise _header_mismatch("missing Mcp-Name header")
        if _decode_header(header) != value.value:
            raise _header_mismatch(f"Mcp-Name header does not match params.{member}")
        if call.method != methods.TOOLS_CALL:
            return None
        tool = self._registry.find_tool(value.value)
        if tool is None or not tool.header_parameters:
            return tool
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, JsonObject) else JsonObject.empty_instance()
        for name, property_name in tool.header_parameters.items():
            sent = call.request.headers.get("mcp-param-" + name.lower())
            body_value = arguments.get(property_name)
            present = body_value is not None and not isinstance(body_value, JsonNull)
            if sent is None:
                if present:
                    raise _header_mismatch(f"missing Mcp-Param-{name} header")
                continue
            if not present or body_value is None or not _header_matches(_decode_header(sent), body_value):
                raise _header_mismatch(f"Mcp-Param-{name} header does not match the argument")
        return tool

    # ------------------------------------------------------------------------------------------------ operations

    def _check_required(self, call: _Call, operation: _Operation) -> None:
        required = operation.required_capabilities
        if not required:
            return
        missing = call.capabilities.missing(required)
        if missing is not None:
            raise _missing_capabilities(missing)

    async def _tools_call(self, call: _Call, tool: ToolRegistration | None) -> DispatchResult:
        if tool is None:
            raise _invalid_params("Unknown tool", "unknown-tool")
        call.operation_name = tool.name
        self._check_required(call, tool)
        arguments = call.params.get("arguments")
        if arguments is None:
            arguments = JsonObject.empty_instance()
        if not isinstance(arguments, JsonObject):
            raise _invalid_params("Invalid params: arguments must be an object", "arguments")
        result = await self._run(call, tool, lambda context: tool.handler(context, arguments))
        if isinstance(result, CallToolResult):
            return call.complete(result.to_wire(meta=self._server_meta))
        return await self._input_required(call, tool, result)

    async def _prompts_get(self, call: _Call) -> DispatchResult:
        name = call.params["name"]
        assert isinstance(name, JsonString)
        prompt = self._registry.find_prompt(name.value)
        if prompt is None:
            raise _invalid_params("Unknown prompt", "unknown-prompt")
        call.operation_name = prompt.name
        self._check_required(call, prompt)
        try:
            arguments = prompt.check_arguments(call.params.get("arguments"))
        except McpModelError:
            raise _invalid_params("Invalid params: prompt arguments", "prompt-arguments") from None
        result = await self._run(call, prompt, lambda context: prompt.handler(context, arguments))
        if isinstance(result, GetPromptResult):
            return call.complete(result.to_wire(meta=self._server_meta))
        return await self._input_required(call, prompt, result)

    async def _resources_read(self, call: _Call) -> DispatchResult:
        uri = call.params["uri"]
        assert isinstance(uri, JsonString)
        operation: _Operation
        found = self._registry.find_resource(uri.value)
        if found is not None:
            operation, arguments = found, ResourceArguments(uri.value)
            call.operation_name = found.uri
        else:
            matched = self._registry.match_resource_template(uri.value)
            if matched is None:
                raise _invalid_params("Resource not found", "unknown-resource", JsonObject.from_mapping({"uri": uri}))
            operation, arguments = matched
            call.operation_name = matched[0].uri_template.text
        self._check_required(call, operation)
        handler = operation.handler
        result = await self._run(call, operation, lambda context: handler(context, arguments))
        if isinstance(result, ReadResourceResult):
            hint = CacheHint.uncached() if call.retry else None
            return call.complete(result.to_wire(cache_hint=hint, meta=self._server_meta))
        return await self._input_required(call, operation, result)

    async def _complete(self, call: _Call) -> DispatchResult:
        ref, argument = call.params.get("ref"), call.params.get("argument")
        if not isinstance(ref, JsonObject) or not isinstance(argument, JsonObject):
            raise _invalid_params("Invalid params: ref and argument must be objects", "completion-params")
        ref_type, argument_name, value = ref.get("type"), argument.get("name"), argument.get("value")
        ref_name = ref.get("name") if ref_type == JsonString.from_value("ref/prompt") else ref.get("uri")
        if not all(isinstance(item, JsonString) for item in (ref_type, ref_name, argument_name, value)):
            raise _invalid_params("Invalid params: completion reference", "completion-params")
        assert isinstance(ref_type, JsonString)
        assert isinstance(ref_name, JsonString)
        assert isinstance(argument_name, JsonString)
        assert isinstance(value, JsonString)
        known: dict[str, str] = {}
        context_value = call.params.get("context")
        if isinstance(context_value, JsonObject) and isinstance(context_value.get("arguments"), JsonObject):
            nested = context_value["arguments"]
            assert isinstance(nested, JsonObject)
            known = {k: v.value for k, v in nested.items() if isinstance(v, JsonString)}
        registration = self._registry.find_completion(ref_type.value, ref_name.value, argument_name.value)
        if registration is None:
            return call.complete(CompleteResult.empty().to_wire(meta=self._server_meta))
        call.operation_name = registration.ref_name
        arguments = CompletionArguments(argument_name.value, value.value, known)
        context = call.context(RequestStateMode.NONE, InputResponses.empty(), None, None)
        result = await self._invoke(
            call,
            context,
            lambda: registration.handler(context, arguments),
            is_async=inspect.iscoroutinefunction(registration.handler),
        )
        if not isinstance(result, CompleteResult):
            raise _internal("handler-result-type")
        return call.complete(result.to_wire(meta=self._server_meta))

    # ------------------------------------------------------------------------------------------------ retry state

    def _input_responses(self, call: _Call) -> InputResponses:
        if "inputResponses" not in call.params:
            return InputResponses.empty()
        value = call.params["inputResponses"]
        if not isinstance(value, JsonObject):
            raise _invalid_params("Invalid params: inputResponses must be an object", "input-responses")
        for response in value.values():
            if not isinstance(response, JsonObject) or not matches_input_response(response):
                raise _invalid_params("Invalid params: an input response is malformed", "input-responses")
        try:
            return InputResponses.from_responses(value)
        except McpModelError:
            raise _invalid_params("Invalid params: an input response is malformed", "input-responses") from None

    async def _bound_request(self, call: _Call) -> BoundRequest:
        if call.bound is None:
            digest = call.digest
            if digest is None:
                body = call.request.body
                if len(body) <= INLINE_BODY_BYTES:
                    digest = _digest_or_error(body)
                else:
                    try:
                        digest = await self._off_loop(lambda: _digest_or_error(body))
                    except _Busy:
                        raise _busy_refusal() from None
                call.digest = digest
            if isinstance(digest, JsonError):
                raise _invalid_params("Invalid params: request cannot be bound", "binding")
            try:
                binding = RequestStateBinding.of(
                    method=call.method,
                    path=call.request.path,
                    protocol_version=call.version,
                    partition=call.admission.partition,
                    params_digest=digest,
                )
            except ProtectionUsageError:
                raise _invalid_params("Invalid params: request cannot be bound", "binding") from None
            call.bound = BoundRequest(binding, call.request_id)
        return call.bound

    async def _open_state(
        self, call: _Call, operation: _Operation
    ) -> tuple[JsonValue | None, str | None, OpenedRequestState | None]:
        if "requestState" not in call.params:
            return None, None, None
        token = call.params["requestState"]
        mode = operation.request_state_mode
        if not isinstance(token, JsonString) or mode is RequestStateMode.NONE:
            raise _invalid_params("Invalid params: requestState is not accepted here", "state-unexpected")
        if mode is RequestStateMode.APPLICATION_PROTECTED:
            try:
                return None, check_application_request_state(token.value), None
            except McpModelError:
                raise _invalid_params("Invalid params: requestState is not accepted here", "state-invalid") from None
        assert self._sealer is not None
        try:
            opened = self._sealer.open(token.value, await self._bound_request(call))
        except RequestStateProtectionException as error:
            if self._metrics is not None:
                self._metrics.open("refused", error.reason.value)
            raise _Refusal(
                error.http_status, error.json_rpc_code, error.client_message, f"state-{error.reason.value}"
            ) from None
        if self._metrics is not None:
            self._metrics.open("opened")
        return opened.state, None, opened

    # ------------------------------------------------------------------------------------------------ execution

    async def _run(
        self, call: _Call, operation: _Operation, invoke: Callable[[RequestContext], object]
    ) -> InputRequiredResult | CallToolResult | GetPromptResult | ReadResourceResult:
        responses = self._input_responses(call)
        framework_state, application_state, opened = await self._open_state(call, operation)
        call.opened = opened
        call.retry = bool(responses) or "requestState" in call.params
        # Streaming only matters with a progress token; the capability walk is skipped otherwise.
        if (
            call.channel is not None
            and "progressToken" in call.meta
            and call.capabilities.missing(_conditional_capabilities(operation)) is None
        ):
            call.channel.allow_streaming()
        context = call.context(operation.request_state_mode, responses, framework_state, application_state)
        is_async = inspect.iscoroutinefunction(operation.handler)
        result = await self._invoke(call, context, lambda: invoke(context), is_async=is_async)
        expected: type[object] = {
            methods.TOOLS_CALL: CallToolResult,
            methods.PROMPTS_GET: GetPromptResult,
            methods.RESOURCES_READ: ReadResourceResult,
        }[call.method]
        if not isinstance(result, expected | InputRequiredResult):
            raise _internal("handler-result-type")
        assert isinstance(result, InputRequiredResult | CallToolResult | GetPromptResult | ReadResourceResult)
        return result

    async def _invoke(
        self, call: _Call, context: RequestContext, invoke: Callable[[], object], *, is_async: bool
    ) -> object:
        async def call_handler() -> object:
            if is_async:
                result = invoke()
                return await result if inspect.isawaitable(result) else result
            if not self._in_thread:
                result = invoke()  # opted in: the app's sync handlers never block
                return await result if inspect.isawaitable(result) else result
            return await _call_in_thread(invoke)

        for callback in self._lifecycle:
            callback("admitted", context)
        try:
            if self._interceptor is not None:
                return await self._interceptor(context, call_handler)
            return await call_handler()
        except (_Refusal, asyncio.CancelledError):
            raise
        except Exception as error:  # the client gets one fixed message; the operator the exception type
            _logger.error("handler failed: %s", type(error).__name__)
            raise _internal("handler-failed") from None
        finally:
            call.invocation_close()
            for callback in self._lifecycle:
                callback("finished", context)

    async def _input_required(
        self, call: _Call, operation: _Operation, result: InputRequiredResult | object
    ) -> DispatchResult:
        assert isinstance(result, InputRequiredResult)
        try:
            operation.check_emission(result)
        except McpModelError as error:
            _logger.error("handler emitted an undeclared input request or state: %s", error.reason.value)
            raise _internal("undeclared-emission") from None
        missing = call.capabilities.missing(result.required_capabilities)
        if missing is not None:
            raise _missing_capabilities(missing)
        sealed: str | None = None
        if result.framework_request_state is not None:
            assert self._sealer is not None
            bound = await self._bound_request(call)
            try:
                sealed = self._sealer.seal(result.framework_request_state, bound, continuing=call.opened)
            except RequestStateProtectionException as error:
                _logger.warning("request state not sealed: %s", error.reason.value)
                if self._metrics is not None:
                    self._metrics.seal("refused", error.reason.value)
                raise _Refusal(
                    error.http_status, error.json_rpc_code, error.client_message, f"seal-{error.reason.value}"
                ) from None
            if self._metrics is not None:
                self._metrics.seal("sealed")
        if self._metrics is not None:
            self._metrics.input_required(call.method)
        return call.complete(result.to_wire(sealed, meta=self._server_meta))


_JSONRPC: Final = JsonString.from_value("2.0")


def _missing_capabilities(missing: ClientCapabilities) -> _Refusal:
    data = JsonObject.builder().put("requiredCapabilities", missing.to_wire()).build()
    return _Refusal(400, MISSING_CAPABILITY, "Missing required client capability", "missing-capability", data)


def _internal(reason: str) -> _Refusal:
    return _Refusal(200, INTERNAL_ERROR, "Internal error", reason)


def _busy_refusal() -> _Refusal:
    # The server's state, not the request's fault: -32603, as the transport's 503s.
    return _Refusal(503, INTERNAL_ERROR, "Service Unavailable", "busy", headers=(("retry-after", "1"),))


class _Busy(Exception):
    """Every large-body worker stayed busy for :data:`LARGE_BODY_WAIT_SECONDS`."""


def _release(slots: asyncio.Semaphore, done: asyncio.Future[Any]) -> None:
    slots.release()
    if not done.cancelled():
        done.exception()  # retrieved here: the request that wanted it may have been cancelled meanwhile


def _digest_or_error(body: bytes) -> ParamsDigest | JsonError:
    try:
        # Cooperative for large bodies: they are digested in a worker thread, beside the event loop.
        return params_digest(body, whole_request=True, cooperative=len(body) > INLINE_BODY_BYTES)
    except JsonError as error:
        return error


def _read_large_body(body: bytes, *, digest: bool) -> tuple[JsonValue, ParamsDigest | JsonError | None]:
    """Parse a large body in a worker thread; with ``digest``, take its params digest from the bytes first.

    The digest goes first so that its working data is freed before the value model is built: peak memory is the
    larger of the two, not their sum. A digest refusal that parsing shares is the parse error, found once.
    """
    taken: ParamsDigest | JsonError | None = None
    if digest:
        taken = _digest_or_error(body)
        if isinstance(taken, JsonError) and taken.reason not in _DIGEST_ONLY_REFUSALS:
            raise taken
    return parse(body), taken


async def _call_in_thread(invoke: Callable[[], object]) -> object:
    # Sync handlers run in a worker thread so a slow one cannot stall the event loop. A sync callable that
    # returns an awaitable (a lambda around an async function) has that awaitable awaited here, on the loop.
    result = await asyncio.to_thread(invoke)
    if inspect.isawaitable(result):
        return await result
    return result


class _Call:
    """The per-request working state of the dispatcher."""

    __slots__ = (
        "admission",
        "bound",
        "capabilities",
        "channel",
        "digest",
        "invocation",
        "message",
        "meta",
        "method",
        "opened",
        "operation_name",
        "params",
        "request",
        "request_id",
        "retry",
        "version",
    )

    def __init__(self, request: HttpRequest, message: JsonObject, request_id: RequestId, method: str) -> None:
        self.request = request
        self.message = message
        self.request_id = request_id
        self.method = method
        self.operation_name: str | None = None
        self.admission: Admission
        self.capabilities: ClientCapabilities
        self.version = ""
        self.meta: JsonObject = JsonObject.empty_instance()
        self.params: JsonObject = JsonObject.empty_instance()
        self.channel: ProgressChannel | None = None
        self.bound: BoundRequest | None = None
        self.digest: ParamsDigest | JsonError | None = None
        self.opened: OpenedRequestState | None = None
        self.retry = False
        self.invocation: _Invocation | None = None

    def complete(self, result: JsonObject) -> DispatchResult:
        return DispatchResult(
            200,
            _result_message(self.request_id, result),
            method=self.method,
            operation=self.operation_name,
        )

    def invocation_close(self) -> None:
        if self.invocation is not None:
            self.invocation.close()

    def context(
        self,
        mode: RequestStateMode,
        responses: InputResponses,
        framework_state: JsonValue | None,
        application_state: str | None,
    ) -> RequestContext:
        token = self.meta.get("progressToken")
        progress_token = token if isinstance(token, JsonString | JsonNumber) else None
        self.invocation = _Invocation(progress_token, self.channel)
        client_info = self.meta.get("io.modelcontextprotocol/clientInfo")
        return RequestContext(
            identity=self.admission.identity,
            partition=self.admission.partition,
            client_capabilities=self.capabilities,
            protocol_version=self.version,
            request_id=self.request_id,
            method=self.method,
            operation_name=self.operation_name or self.method,
            input_responses=responses,
            request_state_mode=mode,
            framework_request_state=framework_state,
            application_request_state=application_state,
            meta=self.meta,
            client_info=client_info if isinstance(client_info, JsonObject) else None,
            invocation=self.invocation,
        )
