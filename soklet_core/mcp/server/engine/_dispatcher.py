"""The MCP 2026-07-28 protocol logic of one POST, as a pipeline: validate, resolve, run with state, encode.

No ASGI here: :class:`Dispatcher` takes an :class:`HttpRequest` (path, lower-case headers, body bytes) and
returns a :class:`DispatchResult` (HTTP status, encoded JSON-RPC response, log fields). The transport adds the
HTTP framing, SSE progress, body and output limits and cancellation.

One request, in order (:meth:`Dispatcher.dispatch`):

1. :meth:`Dispatcher.validate` runs the checks below; each returns a value and the first failure raises
   :class:`~.jsonrpc.McpError`. They end in one frozen :class:`ValidatedRequest` (method, id, version, meta,
   params, capabilities, admission, the resolved :class:`Target`, the path and a lazy params digest).
2. The method's entry in the one method table (:data:`_METHODS`) says how: a list answer pre-encoded at start,
   or a handler to run.
3. :meth:`Dispatcher._with_state` wraps the handler call: the state is opened before it and the emitted state
   sealed after it, with the same bound request and the same digest (taken at most once, only when a
   framework-protected state is opened or sealed); the opened state never leaves the wrapper.
4. The result is encoded from pre-encoded fragments (:mod:`.jsonrpc`) into :attr:`DispatchResult.body`.

Validation order (conformance §1.3, then soklet's own steps); the first failure answers:

1. JSON body (-32700, 400), JSON-RPC envelope (-32600, 400); a notification (no ``id``) is accepted (202).
2. ``MCP-Protocol-Version`` header present (-32020, 400).
3. ``params._meta`` with ``protocolVersion`` and ``clientCapabilities`` (-32602, 400).
4. Header equals ``_meta`` version (-32020, 400).
5. Version supported (-32022, 400, ``data.supported`` / ``data.requested``).
6. Method known; removed and unknown methods (-32601, 404).
7. ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` headers (-32020, 400).
8. Admission (401).
9. Operation lookup (-32602, 400; ``data.uri`` for an unknown resource). A ``tasks/*`` request must declare the tasks
   extension here (-32021, 400, ``data.requiredCapabilities.extensions``); its task is looked up when it runs
   (-32602 ``Failed to retrieve task: Task not found`` for an unknown, expired or another caller's id, and for
   every id on a server without a store).
10. REQUIRED capabilities of the operation, all missing at once (-32021, 400), before params or state are read.
11. Params: arguments, ``inputResponses`` (an object of objects, each in the protocol union), ``requestState``
    of the operation's declared mode (-32602, 400).
12. Opening a FRAMEWORK_PROTECTED state with the binding of this request (-32602, 400, one fixed message).
13. The handler (its failure: -32603, 200). A ``StartTask`` answer of a task tool creates the task when the
    request declared the tasks extension (the ``CreateTaskResult`` once the task is stored), else runs the
    tool's step within the request (:class:`~.tasks.TaskManager`). A store that cannot be reached: 503, -32603.
14. CONDITIONAL capabilities of the emitted requests, all missing at once (-32021, 400).
15. Sealing the emitted framework state (-32603, 200, no state emitted).

Request bodies: work that grows with the body stays off the event loop. A body up to :data:`INLINE_BODY_BYTES` is
parsed on the loop; a larger one is parsed in a worker thread, at most :data:`MAX_CONCURRENT_LARGE_BODIES` at a
time (the others wait up to :data:`LARGE_BODY_WAIT_SECONDS`, then get 503), so other clients keep being answered
and memory stays bounded by that many bodies' working sets. The body is parsed once. The params digest a
framework-protected state is bound to is taken from the body bytes (:func:`soklet_core.json.params_digest`), never
from the value model, at most once per request; for a large body it is taken in the same worker job, *before* the
value model is built, so the two never coexist in memory.

Where handlers run: ``async def`` handlers on the event loop; ``def`` handlers in a worker thread unless their
registration says ``blocking=False`` (or the server turned the thread off for all).
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
    encode_wire,
    params_digest,
    parse,
)
from soklet_core.json.limits import INLINE_BODY_BYTES
from soklet_core.mcp.model import methods
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.client_requests import InputRequirement
from soklet_core.mcp.model.context import RequestContext, RequestId
from soklet_core.mcp.model.errors import McpModelError
from soklet_core.mcp.model.input_required_result import (
    InputRequiredResult,
    RequestStateMode,
    check_application_request_state,
)
from soklet_core.mcp.model.input_responses import InputResponses
from soklet_core.mcp.model.registry import (
    CompletionArguments,
    CompletionRegistration,
    PromptRegistration,
    Registry,
    ResourceArguments,
    ResourceRegistration,
    ResourceTemplateRegistration,
    ToolRegistration,
)
from soklet_core.mcp.model.results import (
    CacheHint,
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    ReadResourceResult,
)
from soklet_core.mcp.model.tasks import TASKS_CAPABILITIES, StartTask, TaskSupport
from soklet_core.mcp.server._admission import (
    Admission,
    AdmissionPolicy,
    AdmissionRefused,
    AdmissionRequest,
    AnonymousAdmission,
)
from soklet_core.mcp.server._jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INTERNAL_ERROR_MESSAGE,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    PARSE_ERROR,
    RESPONSE_TOO_LARGE_MESSAGE,
    UNSUPPORTED_VERSION,
    McpError,
    encode_error,
    encode_result,
    error_response,
    missing_capabilities,
    state_refusal,
    store_refusal,
)
from soklet_core.mcp.server._options import DEFAULT_LIST_CACHE_HINT, DEFAULT_LIST_CACHE_TTL_MS, DEFAULT_SERVER_NAME
from soklet_core.mcp.server.durable._tasks import task_not_found
from soklet_core.protection import (
    BoundRequest,
    OpenedRequestState,
    ProtectionUsageError,
    RequestStateProtectionException,
    RequestStateSealer,
    bind_request,
)
from soklet_core.protocol import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    SUPPORTED_PROTOCOL_VERSIONS,
    TASKS_EXTENSION,
)
from soklet_core.store import StoreError

if TYPE_CHECKING:
    from soklet_core.mcp.server.durable._tasks import TaskManager
    from soklet_core.mcp.server.ops._metrics import ServerMetrics

__all__ = [
    "DEFAULT_LIST_CACHE_HINT",
    "DEFAULT_LIST_CACHE_TTL_MS",
    "DEFAULT_SERVER_NAME",
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
    "McpError",
    "ProgressChannel",
    "Target",
    "ValidatedRequest",
    "encode_header",
    "error_response",
]

_logger = logging.getLogger("soklet.mcp")

_LOG_LEVELS: Final = frozenset({"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})

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
_JSONRPC: Final = JsonString.from_value("2.0")
_REF_PROMPT: Final = JsonString.from_value("ref/prompt")
# The answer of tasks/update and tasks/cancel: an empty ack (the server's _meta is appended like everywhere).
_COMPLETE_ACK: Final = b'{"resultType":"complete"}'

_Operation: TypeAlias = ToolRegistration | PromptRegistration | ResourceRegistration | ResourceTemplateRegistration
_Result: TypeAlias = InputRequiredResult | CallToolResult | GetPromptResult | ReadResourceResult | CompleteResult

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


@dataclass(frozen=True, slots=True)
class Target:
    """What a request runs: a registration's handler, the name the log gives it, and where it runs.

    ``operation`` is the tool, prompt, resource or template (``None`` for a completion, which takes no input
    responses and no state); ``arguments`` turns the request's params into the handler's second argument (step
    11, raising :class:`~.jsonrpc.McpError`); ``on_loop`` says the handler runs on the event loop (``async``
    handlers, and ``def`` handlers registered with ``blocking=False``) rather than in a worker thread.

    Built by the dispatcher only, from values it has already checked (so no ``__post_init__`` checks per
    request); public so that tests and other transports can read it.
    """

    name: str
    operation: _Operation | None
    handler: Callable[[RequestContext, Any], object]
    arguments: Callable[[JsonObject], object]
    on_loop: bool
    expected: type


class _Digest:
    """The params digest of one request: taken at most once, from the body bytes, when a state needs it."""

    __slots__ = ("body", "value")

    def __init__(self, body: bytes, value: ParamsDigest | JsonError | None = None) -> None:
        self.body = body
        self.value = value

    def __repr__(self) -> str:
        return f"_Digest(taken={self.value is not None})"


@dataclass(frozen=True, slots=True)
class ValidatedRequest:
    """One request that passed validation steps 1-9: everything the rest of the pipeline reads, fixed.

    ``answer`` is the pre-encoded result of a list method or of a completion nobody registered (nothing runs);
    otherwise ``target`` is what runs. The params digest is not a field: it is taken lazily, at most once, by
    the state wrapper (:attr:`Dispatcher.params_digests_taken` counts them). Built by :meth:`Dispatcher.validate`
    only, from the values its steps returned; read it, never build it.
    """

    method: str
    request_id: RequestId
    version: str
    meta: JsonObject
    params: JsonObject
    capabilities: ClientCapabilities
    admission: Admission
    path: str
    message: JsonObject
    target: Target | None
    answer: bytes | None
    digest: _Digest


def _header_mismatch(detail: str) -> McpError:
    return McpError(HEADER_MISMATCH, f"Header mismatch: {detail}", log_reason="header-mismatch")


def _invalid_params(message: str, reason: str, data: JsonValue | None = None) -> McpError:
    return McpError(INVALID_PARAMS, message, data, log_reason=reason)


def _missing_capabilities(missing: ClientCapabilities) -> McpError:
    return missing_capabilities(missing.to_wire())


def _internal(reason: str) -> McpError:
    return McpError(INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE, log_reason=reason)


def _busy_refusal() -> McpError:
    # The server's state, not the request's fault: -32603, as the transport's 503s.
    return McpError(
        INTERNAL_ERROR, "Service Unavailable", http_status=503, log_reason="busy", headers=(("retry-after", "1"),)
    )


# The fixed refusals are made anew for each request: a raised exception keeps the frames of its last raise (and
# so that request's body) alive through its traceback, and one shared instance would do so for any request.
def _parse_refusal() -> McpError:
    return McpError(PARSE_ERROR, "Parse error")


def _envelope_refusal() -> McpError:
    return McpError(INVALID_REQUEST, "Invalid Request", log_reason="envelope")


def _method_refusal() -> McpError:
    return McpError(METHOD_NOT_FOUND, "Method not found")


def _meta_missing() -> McpError:
    return McpError(
        INVALID_PARAMS,
        f"Invalid params: _meta must carry {PROTOCOL_VERSION_META_KEY} and {CLIENT_CAPABILITIES_META_KEY}",
        log_reason="meta-missing",
    )


@dataclass(frozen=True, slots=True)
class _Method:
    """One entry of the method table: the params member ``Mcp-Name`` echoes, and how the target is resolved
    (``None``: a tasks-extension request, run by the task manager)."""

    routing_member: str | None
    resolve: Callable[[Dispatcher, JsonObject, ToolRegistration | None], Target | bytes] | None


def _decode_header(value: str) -> str:
    value = value.strip()
    match = _BASE64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match.group(1), validate=False).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _header_mismatch("a base64 header value does not decode") from None


def encode_header(text: str) -> str:
    """``text`` as an ``Mcp-Name`` or ``Mcp-Param-*`` header value: as is when it is printable ASCII without
    surrounding spaces (and not itself sentinel-shaped), else the ``=?base64?...?=`` sentinel the server decodes."""
    if text.isascii() and text.isprintable() and text == text.strip() and _BASE64_SENTINEL.fullmatch(text) is None:
        return text
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


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
        server_name: str = DEFAULT_SERVER_NAME,
        server_version: str = __version__,
        instructions: str | None = None,
        list_cache_hint: CacheHint = DEFAULT_LIST_CACHE_HINT,
        interceptor: Interceptor | None = None,
        lifecycle: Iterable[LifecycleCallback] = (),
        sync_handlers_in_thread: bool = True,
        large_body_wait_seconds: float = LARGE_BODY_WAIT_SECONDS,
        metrics: ServerMetrics | None = None,
        tasks: TaskManager | None = None,
    ) -> None:
        self._registry = registry
        self._tasks = tasks
        if tasks is None and any(item.task_support is not TaskSupport.NONE for item in registry.tools):
            raise ValueError("tools with task support need a durable store (McpServer(store=...))")
        self._metrics = metrics
        self._large_body_wait = large_body_wait_seconds
        self._in_thread = sync_handlers_in_thread
        self._sealer = sealer
        self._admission: AdmissionPolicy = admission if admission is not None else AnonymousAdmission()
        self._versions = tuple(supported_versions)
        if not self._versions:
            raise ValueError("at least one protocol version must be supported")
        self._supported_data = JsonArray.of(*self._versions)
        self._instructions = instructions
        self._cache_hint = list_cache_hint
        self._interceptor = interceptor
        self._lifecycle = tuple(lifecycle)
        self._server_info = JsonObject.from_mapping({"name": server_name, "version": server_version})
        self._server_meta = JsonObject.builder().put(SERVER_INFO_META_KEY, self._server_info).build()
        # Every result ends with the same _meta member: encoded once, spliced in before the closing brace.
        self._meta_tail = b',"_meta":' + encode_wire(self._server_meta) + b"}"
        # Only framework-protected operations bind a state to the params digest.
        self._digests = any(
            item.request_state_mode is RequestStateMode.FRAMEWORK_PROTECTED for item in self._operations()
        )
        if sealer is None and self._digests:
            raise ValueError("FRAMEWORK_PROTECTED operations need a protection config")
        self._capabilities = registry.server_capabilities()
        self._lists = self._build_lists()
        self._digests_taken = 0
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

    @property
    def task_manager(self) -> TaskManager | None:
        """The task manager of the tasks extension (``None``: the server offers no tasks)."""
        return self._tasks

    @property
    def supported_versions(self) -> tuple[str, ...]:
        """The protocol versions this dispatcher accepts, preferred first."""
        return self._versions

    @property
    def server_info(self) -> JsonObject:
        """``{"name": ..., "version": ...}``: what the server calls itself."""
        return self._server_info

    @property
    def instructions(self) -> str | None:
        """The server's instructions for clients (``None``: none)."""
        return self._instructions

    def admit(self, path: str, headers: Mapping[str, str]) -> Admission:
        """Validation step 8 alone: the admission policy's verdict on these headers, or the same 401
        :class:`~.jsonrpc.McpError` :meth:`dispatch` answers (for transports that admit before dispatching)."""
        try:
            return self._admission.admit(AdmissionRequest(path, headers))
        except AdmissionRefused as refused:
            raise McpError(
                INVALID_REQUEST,
                "Unauthorized",
                http_status=401,
                log_reason=f"admission-{refused.reason.value}",
                headers=(("www-authenticate", "Bearer"),),
            ) from None

    @property
    def params_digests_taken(self) -> int:
        """How many params digests this dispatcher has taken: at most one per request, and only for a request
        that opens or seals a framework-protected state (or a large body, digested before it is parsed)."""
        return self._digests_taken

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
            .build()
        )

    def _build_lists(self) -> Mapping[str, bytes]:
        # Registrations are immutable, so each list result is encoded once and reused for every request.
        discover = (
            JsonObject.builder()
            .put("resultType", "complete")
            .put("supportedVersions", self._supported_data)
            .put("capabilities", self._discover_capabilities())
        )
        if self._instructions is not None:
            discover.put("instructions", self._instructions)
        discover.put("ttlMs", self._cache_hint.ttl_ms).put("cacheScope", self._cache_hint.scope.value)
        registry = self._registry
        results = {
            methods.SERVER_DISCOVER: discover.build(),
            methods.TOOLS_LIST: self._list_result("tools", (t.to_wire() for t in registry.tools)),
            methods.PROMPTS_LIST: self._list_result("prompts", (p.to_wire() for p in registry.prompts)),
            methods.RESOURCES_LIST: self._list_result("resources", (r.to_wire() for r in registry.resources)),
            methods.RESOURCES_TEMPLATES_LIST: self._list_result(
                "resourceTemplates", (t.to_wire() for t in registry.resource_templates)
            ),
        }
        return {method: self._encode(encode_wire(result)) for method, result in results.items()}

    @property
    def server_capabilities(self) -> JsonObject:
        """What the registry holds, as server capabilities (:meth:`Registry.server_capabilities`); ``server/discover``
        adds the tasks extension when the server offers tasks."""
        return self._capabilities

    def _discover_capabilities(self) -> JsonObject:
        if self._tasks is None:
            return self._capabilities
        extensions = JsonObject.builder().put(TASKS_EXTENSION, JsonObject.empty_instance()).build()
        return JsonObject.builder().put_all(self._capabilities).put("extensions", extensions).build()

    def _encode(self, result: bytes) -> bytes:
        """An encoded result object (never empty: it has ``resultType``) with the server's ``_meta`` appended."""
        return result[:-1] + self._meta_tail

    # ------------------------------------------------------------------------------------------------ entry

    async def dispatch(self, request: HttpRequest, channel: ProgressChannel | None = None) -> DispatchResult:
        """Answer one POST body. Never raises for client input; ``asyncio.CancelledError`` propagates."""
        try:
            message, digest = await self._parse(request)
            envelope = _envelope(message)
        except McpError as error:
            return DispatchResult.refused(error)
        if envelope is None:
            return DispatchResult(202, None, reason="notification")
        message, request_id, method = envelope
        if method is None:
            return DispatchResult.refused(_envelope_refusal(), request_id)
        entry = _METHODS.get(method)
        logged_method = method if entry is not None else None
        operation: str | None = None
        try:
            validated = self._validate(request, message, request_id, method, entry, digest)
            if validated.answer is not None:
                return self._answer(validated, validated.answer)
            if validated.target is None:
                body, operation = await self._task_request(validated)
                return DispatchResult(200, encode_result(request_id, body), method, operation, request_id=request_id)
            operation = validated.target.name
            return self._answer(validated, await self._with_state(validated, validated.target, channel))
        except McpError as error:
            return DispatchResult.refused(error, request_id, method=logged_method, operation=operation)
        except StoreError as error:
            _logger.warning("durable store failed: %s", error.reason.value)
            return DispatchResult.refused(store_refusal(error), request_id, method=logged_method, operation=operation)

    async def validate(self, request: HttpRequest) -> ValidatedRequest | None:
        """Validation steps 1-9 alone: the record the rest of the pipeline reads, or ``None`` for a
        notification. Raises :class:`~.jsonrpc.McpError` with the first failure (for tests and other transports:
        :meth:`dispatch` runs the same steps)."""
        message, digest = await self._parse(request)
        envelope = _envelope(message)
        if envelope is None:
            return None
        message, request_id, method = envelope
        if method is None:
            raise _envelope_refusal()
        return self._validate(request, message, request_id, method, _METHODS.get(method), digest)

    def _answer(self, validated: ValidatedRequest, result: bytes) -> DispatchResult:
        operation = validated.target.name if validated.target is not None else None
        body = encode_result(validated.request_id, result)
        return DispatchResult(200, body, method=validated.method, operation=operation, request_id=validated.request_id)

    # ------------------------------------------------------------------------------------------------ step 1

    async def _parse(self, request: HttpRequest) -> tuple[JsonValue, _Digest]:
        body = request.body
        try:
            if len(body) <= INLINE_BODY_BYTES:
                return parse(body), _Digest(body)
            message, taken = await self._off_loop(lambda: _read_large_body(body, digest=self._digests))
        except JsonError:
            raise _parse_refusal() from None
        except _Busy:
            raise _busy_refusal() from None
        if taken is not None:
            self._digests_taken += 1
        return message, _Digest(body, taken)

    async def parse_body(self, body: bytes) -> JsonValue:
        """``body`` parsed by this dispatcher's rules: on the event loop up to :data:`INLINE_BODY_BYTES`, else in
        one of its bounded workers (:meth:`run_sized`). Raises :class:`~.jsonrpc.McpError`: -32700 (400) for
        anything but strict JSON, -32603 (503, ``Retry-After``) when every worker stayed busy. For transports and
        engines that must read a message before they know where it goes; :meth:`dispatch` parses its own."""
        try:
            return await self.run_sized(len(body), lambda: parse(body))
        except JsonError:
            raise _parse_refusal() from None

    async def run_sized(self, size: int, work: Callable[[], _T]) -> _T:
        """Run ``work``, whose cost grows with ``size`` bytes: at once when ``size`` is at most
        :data:`INLINE_BODY_BYTES`, else in one of the :data:`MAX_CONCURRENT_LARGE_BODIES` worker threads (the same
        slots large bodies are parsed in). Raises :class:`~.jsonrpc.McpError` (503) when every worker stayed busy
        for :data:`LARGE_BODY_WAIT_SECONDS`."""
        if size <= INLINE_BODY_BYTES:
            return work()
        try:
            return await self._off_loop(work)
        except _Busy:
            raise _busy_refusal() from None

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

    # ------------------------------------------------------------------------------------------------ steps 2-9

    def _validate(
        self,
        request: HttpRequest,
        message: JsonObject,
        request_id: RequestId,
        method: str,
        entry: _Method | None,
        digest: _Digest,
    ) -> ValidatedRequest:
        headers = request.headers
        params, meta, version, capabilities = self._version_and_meta(headers, message)  # steps 2-5
        if entry is None:
            raise _method_refusal()  # step 6
        tool = self._routing_headers(headers, method, entry, params, meta)  # step 7
        admission = self.admit(request.path, headers)  # step 8
        target: Target | None = None
        answer: bytes | None = None
        if entry.resolve is None:  # step 9 of a tasks-extension request: the extension, declared on this request
            missing = capabilities.missing(TASKS_CAPABILITIES)
            if missing is not None:
                raise _missing_capabilities(missing)
        else:
            resolved = entry.resolve(self, params, tool)  # step 9
            target, answer = (resolved, None) if isinstance(resolved, Target) else (None, resolved)
        return ValidatedRequest(
            method=method,
            request_id=request_id,
            version=version,
            meta=meta,
            params=params,
            capabilities=capabilities,
            admission=admission,
            path=request.path,
            message=message,
            target=target,
            answer=answer,
            digest=digest,
        )

    def _version_and_meta(
        self, headers: Mapping[str, str], message: JsonObject
    ) -> tuple[JsonObject, JsonObject, str, ClientCapabilities]:
        version_header = headers.get("mcp-protocol-version")
        if version_header is None:
            raise _header_mismatch("missing MCP-Protocol-Version header")
        params = message.get("params")
        if params is not None and not isinstance(params, JsonObject):
            raise _invalid_params("Invalid params: params must be an object", "params-not-object")
        meta = params.get("_meta") if params is not None else None
        if (
            not isinstance(meta, JsonObject)
            or PROTOCOL_VERSION_META_KEY not in meta
            or CLIENT_CAPABILITIES_META_KEY not in meta
        ):
            raise _meta_missing()
        assert params is not None
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
            data = JsonObject.builder().put("supported", self._supported_data).put("requested", version).build()
            raise McpError(UNSUPPORTED_VERSION, "Unsupported protocol version", data)
        return params, meta, version.value, capabilities

    def _routing_headers(
        self, headers: Mapping[str, str], method: str, entry: _Method, params: JsonObject, meta: JsonObject
    ) -> ToolRegistration | None:
        method_header = headers.get("mcp-method")
        if method_header is None or method_header.strip() != method:
            raise _header_mismatch("Mcp-Method header does not match the body method")
        log_level = meta.get(LOG_LEVEL_META_KEY)
        if log_level is not None and not (isinstance(log_level, JsonString) and log_level.value in _LOG_LEVELS):
            raise _invalid_params("Invalid params: unknown logLevel", "log-level")
        member = entry.routing_member
        if member is None:
            return None
        value = params.get(member)
        if not isinstance(value, JsonString):
            raise _invalid_params(f"Invalid params: params.{member} must be a string", f"{member.lower()}-missing")
        header = headers.get("mcp-name")
        if header is None:
            raise _header_mismatch("missing Mcp-Name header")
        if _decode_header(header) != value.value:
            raise _header_mismatch(f"Mcp-Name header does not match params.{member}")
        if method != methods.TOOLS_CALL:
            return None
        tool = self._registry.find_tool(value.value)
        if tool is None or not tool.header_parameters:
            return tool
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, JsonObject) else JsonObject.empty_instance()
        for name, property_name in tool.header_parameters.items():
            sent = headers.get("mcp-param-" + name.lower())
            body_value = arguments.get(property_name)
            present = body_value is not None and not isinstance(body_value, JsonNull)
            if sent is None:
                if present:
                    raise _header_mismatch(f"missing Mcp-Param-{name} header")
                continue
            if not present or body_value is None or not _header_matches(_decode_header(sent), body_value):
                raise _header_mismatch(f"Mcp-Param-{name} header does not match the argument")
        return tool

    # ------------------------------------------------------------------------------------------------ step 9

    def _target(
        self,
        name: str,
        registration: _Operation | CompletionRegistration,
        arguments: Callable[[JsonObject], object],
        expected: type,
    ) -> Target:
        handler = registration.handler
        on_loop = inspect.iscoroutinefunction(handler) or not registration.blocking or not self._in_thread
        operation = None if isinstance(registration, CompletionRegistration) else registration
        return Target(name, operation, handler, arguments, on_loop, expected)

    def _tool(self, params: JsonObject, tool: ToolRegistration | None) -> Target | bytes:
        if tool is None:
            raise _invalid_params("Unknown tool", "unknown-tool")
        return self._target(tool.name, tool, _tool_arguments, CallToolResult)

    def _prompt(self, params: JsonObject, tool: ToolRegistration | None) -> Target | bytes:
        name = params["name"]
        assert isinstance(name, JsonString)
        prompt = self._registry.find_prompt(name.value)
        if prompt is None:
            raise _invalid_params("Unknown prompt", "unknown-prompt")

        def arguments(params: JsonObject) -> object:
            try:
                return prompt.check_arguments(params.get("arguments"))
            except McpModelError:
                raise _invalid_params("Invalid params: prompt arguments", "prompt-arguments") from None

        return self._target(prompt.name, prompt, arguments, GetPromptResult)

    def _resource(self, params: JsonObject, tool: ToolRegistration | None) -> Target | bytes:
        uri = params["uri"]
        assert isinstance(uri, JsonString)
        found = self._registry.find_resource(uri.value)
        if found is not None:
            fixed = ResourceArguments(uri.value)
            return self._target(found.uri, found, lambda _params: fixed, ReadResourceResult)
        matched = self._registry.match_resource_template(uri.value)
        if matched is None:
            raise _invalid_params("Resource not found", "unknown-resource", JsonObject.from_mapping({"uri": uri}))
        template, matched_arguments = matched
        return self._target(template.template.text, template, lambda _params: matched_arguments, ReadResourceResult)

    def _completion(self, params: JsonObject, tool: ToolRegistration | None) -> Target | bytes:
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, JsonObject) or not isinstance(argument, JsonObject):
            raise _invalid_params("Invalid params: ref and argument must be objects", "completion-params")
        ref_type, argument_name, value = ref.get("type"), argument.get("name"), argument.get("value")
        ref_name = ref.get("name") if ref_type == _REF_PROMPT else ref.get("uri")
        if not (
            isinstance(ref_type, JsonString)
            and isinstance(ref_name, JsonString)
            and isinstance(argument_name, JsonString)
            and isinstance(value, JsonString)
        ):
            raise _invalid_params("Invalid params: completion reference", "completion-params")
        registration = self._registry.find_completion(ref_type.value, ref_name.value, argument_name.value)
        if registration is None:
            return self._encode(encode_wire(CompleteResult.empty().to_wire()))
        known: dict[str, str] = {}
        context_value = params.get("context")
        if isinstance(context_value, JsonObject) and isinstance(context_value.get("arguments"), JsonObject):
            nested = context_value["arguments"]
            assert isinstance(nested, JsonObject)
            known = {k: v.value for k, v in nested.items() if isinstance(v, JsonString)}
        fixed = CompletionArguments(argument_name.value, value.value, known)
        return self._target(registration.ref_name, registration, lambda _params: fixed, CompleteResult)

    # ------------------------------------------------------------------------------------------------ steps 10-15

    async def _with_state(self, request: ValidatedRequest, target: Target, channel: ProgressChannel | None) -> bytes:
        """Run the target's handler inside the request-state wrapper; the encoded result.

        Before the handler: REQUIRED capabilities (10), arguments and input responses (11), opening the state
        (12). After it: CONDITIONAL capabilities of the emitted requests (14) and sealing the emitted state (15)
        with the same bound request, continuing the state opened here (it never leaves this frame).
        """
        operation = target.operation
        params = request.params
        if operation is not None and operation.required_capabilities:
            missing = request.capabilities.missing(operation.required_capabilities)
            if missing is not None:
                raise _missing_capabilities(missing)
        arguments = target.arguments(params)
        responses = InputResponses.empty()
        framework_state: JsonValue | None = None
        application_state: str | None = None
        opened: OpenedRequestState | None = None
        bound: BoundRequest | None = None
        mode = RequestStateMode.NONE
        if operation is not None:
            mode = operation.request_state_mode
            responses = _input_responses(params)
            if "requestState" in params:
                token = params["requestState"]
                if not isinstance(token, JsonString) or mode is RequestStateMode.NONE:
                    raise _invalid_params("Invalid params: requestState is not accepted here", "state-unexpected")
                if mode is RequestStateMode.APPLICATION_PROTECTED:
                    try:
                        application_state = check_application_request_state(token.value)
                    except McpModelError:
                        raise _invalid_params(
                            "Invalid params: requestState is not accepted here", "state-invalid"
                        ) from None
                else:
                    bound = await self._bind(request)
                    opened = self._open(token.value, bound)
                    framework_state = opened.state
            # Streaming only matters with a progress token; the capability walk is skipped otherwise.
            if (
                channel is not None
                and "progressToken" in request.meta
                and request.capabilities.missing(_conditional_capabilities(operation)) is None
            ):
                channel.allow_streaming()
        token_value = request.meta.get("progressToken")
        invocation = _Invocation(token_value if isinstance(token_value, JsonString | JsonNumber) else None, channel)
        client_info = request.meta.get(CLIENT_INFO_META_KEY)
        context = RequestContext(
            identity=request.admission.identity,
            partition=request.admission.partition,
            client_capabilities=request.capabilities,
            protocol_version=request.version,
            request_id=request.request_id,
            method=request.method,
            operation_name=target.name,
            input_responses=responses,
            request_state_mode=mode,
            framework_request_state=framework_state,
            application_request_state=application_state,
            meta=request.meta,
            client_info=client_info if isinstance(client_info, JsonObject) else None,
            invocation=invocation,
        )
        result = await self._invoke(target, context, arguments, invocation)
        if isinstance(result, StartTask) and isinstance(operation, ToolRegistration):
            assert isinstance(arguments, JsonObject)
            return self._encode(await self._start_task(request, operation, arguments, result, invocation))
        if isinstance(result, InputRequiredResult) and operation is not None:
            sealed = await self._emit(request, operation, result, bound, opened)
            return self._encode(result.encode(sealed))
        if not isinstance(result, target.expected):
            raise _internal("handler-result-type")
        if isinstance(result, ReadResourceResult):
            retry = bool(responses) or "requestState" in params
            return self._encode(encode_wire(result.to_wire(cache_hint=CacheHint.uncached() if retry else None)))
        if isinstance(result, CallToolResult):
            return self._encode(result.encode())
        assert isinstance(result, GetPromptResult | CompleteResult)
        return self._encode(encode_wire(result.to_wire()))

    async def _start_task(
        self,
        request: ValidatedRequest,
        tool: ToolRegistration,
        arguments: JsonObject,
        start: StartTask,
        invocation: _Invocation,
    ) -> bytes:
        """A task tool's ``StartTask``: the stored task's ``CreateTaskResult`` for a request that declared the
        tasks extension, else the tool's step run within the request (a ``REQUIRED`` tool never gets here
        without the extension: step 10 refused it)."""
        if tool.task_support is TaskSupport.NONE or self._tasks is None:
            _logger.error("a handler answered StartTask for a tool without task support")
            raise _internal("task-unsupported")
        if request.capabilities.has_extension(TASKS_EXTENSION):
            return await self._tasks.create(
                tool=tool,
                admission=request.admission,
                arguments=arguments,
                capabilities=request.capabilities,
                start=start,
            )
        result = await self._tasks.run_inline(
            tool=tool,
            admission=request.admission,
            arguments=arguments,
            capabilities=request.capabilities,
            start=start,
            cancelled=lambda: invocation.cancelled,
        )
        return result.encode()

    async def _task_request(self, request: ValidatedRequest) -> tuple[bytes, str]:
        """``tasks/get``, ``tasks/update`` or ``tasks/cancel`` (the extension was checked in step 9): the encoded
        result and the task's tool name (what the access log names the request by)."""
        tasks = self._tasks
        if tasks is None:
            raise task_not_found()  # a server without a store has no tasks
        task_id = request.params["taskId"]
        assert isinstance(task_id, JsonString)  # the routing member: step 7 checked it
        admission = request.admission
        if request.method == methods.TASKS_GET:
            body, tool = await tasks.get_with_tool(task_id.value, admission)
            return self._encode(body), tool
        if request.method == methods.TASKS_UPDATE:
            # Only the answers to outstanding keys are read (and checked against the request each key asked);
            # the rest are ignored unread, as the extension asks.
            responses = request.params.get("inputResponses", JsonObject.empty_instance())
            if not isinstance(responses, JsonObject):
                raise _invalid_params("Invalid params: inputResponses must be an object", "input-responses")
            tool = await tasks.update_with_tool(task_id.value, admission, responses)
        else:
            tool = await tasks.cancel_with_tool(task_id.value, admission)
        return self._encode(_COMPLETE_ACK), tool

    async def _emit(
        self,
        request: ValidatedRequest,
        operation: _Operation,
        result: InputRequiredResult,
        bound: BoundRequest | None,
        opened: OpenedRequestState | None,
    ) -> str | None:
        try:
            operation.check_emission(result)
        except McpModelError as error:
            _logger.error("handler emitted an undeclared input request or state: %s", error.reason.value)
            raise _internal("undeclared-emission") from None
        missing = request.capabilities.missing(result.required_capabilities)
        if missing is not None:
            raise _missing_capabilities(missing)
        sealed: str | None = None
        if result.framework_request_state is not None:
            assert self._sealer is not None
            if bound is None:
                bound = await self._bind(request)
            try:
                sealed = self._sealer.seal(result.framework_request_state, bound, continuing=opened)
            except RequestStateProtectionException as error:
                _logger.warning("request state not sealed: %s", error.reason.value)
                if self._metrics is not None:
                    self._metrics.seal("refused", error.reason.value)
                raise state_refusal(error) from None
            if self._metrics is not None:
                self._metrics.seal("sealed")
        if self._metrics is not None:
            self._metrics.input_required(request.method)
        return sealed

    def _open(self, token: str, bound: BoundRequest) -> OpenedRequestState:
        assert self._sealer is not None
        try:
            opened = self._sealer.open(token, bound)
        except RequestStateProtectionException as error:
            if self._metrics is not None:
                self._metrics.open("refused", error.reason.value, token=token)
            raise state_refusal(error) from None
        if self._metrics is not None:
            self._metrics.open("opened")
        return opened

    async def _bind(self, request: ValidatedRequest) -> BoundRequest:
        """The request as a state is bound to it: the validated version, the admitted partition, the digest."""
        holder = request.digest
        digest = holder.value
        if digest is None:
            body = holder.body
            if len(body) <= INLINE_BODY_BYTES:
                digest = _digest_or_error(body)
            else:
                try:
                    digest = await self._off_loop(lambda: _digest_or_error(body))
                except _Busy:
                    raise _busy_refusal() from None
            holder.value = digest
            self._digests_taken += 1
        if isinstance(digest, JsonError):
            raise _invalid_params("Invalid params: request cannot be bound", "binding")
        try:
            return bind_request(
                request.message,
                path=request.path,
                partition=request.admission.partition,
                protocol_version=request.version,
                params_digest=digest,
            )
        except ProtectionUsageError:
            raise _invalid_params("Invalid params: request cannot be bound", "binding") from None

    async def _invoke(
        self, target: Target, context: RequestContext, arguments: object, invocation: _Invocation
    ) -> object:
        handler = target.handler

        async def call_handler() -> object:
            if target.on_loop:
                result = handler(context, arguments)
                return await result if inspect.isawaitable(result) else result
            return await _call_in_thread(lambda: handler(context, arguments))

        for callback in self._lifecycle:
            callback("admitted", context)
        try:
            if self._interceptor is not None:
                return await self._interceptor(context, call_handler)
            return await call_handler()
        except (McpError, asyncio.CancelledError):
            raise
        except StoreError:
            # A durable handle's store failing under the handler is the store's answer (store_refusal in
            # dispatch: 503 with Retry-After when unavailable), as for tasks, not a handler failure.
            raise
        except Exception as error:  # the client gets one fixed message; the operator the exception type
            _logger.error("handler failed: %s", type(error).__name__)
            raise _internal("handler-failed") from None
        finally:
            invocation.close()
            for callback in self._lifecycle:
                callback("finished", context)


def _lists(method: str) -> Callable[[Dispatcher, JsonObject, ToolRegistration | None], bytes]:
    return lambda dispatcher, _params, _tool: dispatcher._lists[method]


#: The one method table: every known method, the ``Mcp-Name`` member it routes by, and how it is answered.
_METHODS: Final[Mapping[str, _Method]] = {
    methods.SERVER_DISCOVER: _Method(None, _lists(methods.SERVER_DISCOVER)),
    methods.TOOLS_LIST: _Method(None, _lists(methods.TOOLS_LIST)),
    methods.PROMPTS_LIST: _Method(None, _lists(methods.PROMPTS_LIST)),
    methods.RESOURCES_LIST: _Method(None, _lists(methods.RESOURCES_LIST)),
    methods.RESOURCES_TEMPLATES_LIST: _Method(None, _lists(methods.RESOURCES_TEMPLATES_LIST)),
    methods.TOOLS_CALL: _Method("name", Dispatcher._tool),
    methods.PROMPTS_GET: _Method("name", Dispatcher._prompt),
    methods.RESOURCES_READ: _Method("uri", Dispatcher._resource),
    methods.COMPLETION_COMPLETE: _Method(None, Dispatcher._completion),
    methods.TASKS_GET: _Method("taskId", None),
    methods.TASKS_UPDATE: _Method("taskId", None),
    methods.TASKS_CANCEL: _Method("taskId", None),
}
#: The method names the table knows (the only ones the access log and the metrics name).
_KNOWN_METHODS: Final = frozenset(_METHODS)


def _envelope(message: JsonValue) -> tuple[JsonObject, RequestId, str | None] | None:
    """Step 1's envelope: (id, method) of a request (method ``None``: not a string, refused with the id),
    ``None`` for a notification; raises ``McpError`` for anything else."""
    if not isinstance(message, JsonObject) or message.get("jsonrpc") != _JSONRPC:
        raise _envelope_refusal()
    method = message.get("method")
    if "id" not in message:
        if isinstance(method, JsonString):
            return None
        raise _envelope_refusal()
    request_id = message["id"]
    if not isinstance(request_id, JsonString | JsonNumber):
        raise _envelope_refusal()
    # A request whose id is known but whose method is not a string is refused with that id.
    return message, request_id, method.value if isinstance(method, JsonString) else None


def _tool_arguments(params: JsonObject) -> object:
    arguments = params.get("arguments")
    if arguments is None:
        return JsonObject.empty_instance()
    if not isinstance(arguments, JsonObject):
        raise _invalid_params("Invalid params: arguments must be an object", "arguments")
    return arguments


def _input_responses(params: JsonObject) -> InputResponses:
    if "inputResponses" not in params:
        return InputResponses.empty()
    value = params["inputResponses"]
    if not isinstance(value, JsonObject):
        raise _invalid_params("Invalid params: inputResponses must be an object", "input-responses")
    try:
        return InputResponses.from_wire(value)
    except McpModelError:
        raise _invalid_params("Invalid params: an input response is malformed", "input-responses") from None


class _Busy(Exception):
    """Every large-body worker stayed busy for :data:`LARGE_BODY_WAIT_SECONDS`."""


def _release(slots: asyncio.Semaphore, done: asyncio.Future[Any]) -> None:
    slots.release()
    if not done.cancelled():
        done.exception()  # retrieved here: the request that wanted it may have been cancelled meanwhile


def _digest_or_error(body: bytes) -> ParamsDigest | JsonError:
    try:
        # From the bytes even though the body is parsed already: up to 64 KiB msgspec digests them faster than the
        # value model can be walked (1 KiB request: 19 us against 26 us). Cooperative for large bodies: they are
        # digested in a worker thread, beside the event loop.
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
