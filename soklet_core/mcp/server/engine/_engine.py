"""The transport-neutral engine: :meth:`Engine.call` runs one :class:`~.Call` and answers an :class:`~.Outcome`.

No HTTP header and no encoded request crosses it: each transport checks its own wire (the envelope, the version,
``_meta``, its headers, admission), builds a :class:`~.Call` and encodes the :class:`~.Outcome` in its own framing.
A library caller does the same without any transport.

The engine's validation steps, in order (the numbering of the whole request, shared with the 2026-07-28 HTTP side
:mod:`soklet_core.mcp.server.http._dispatch` and ``docs/server.md``); the first failure answers :class:`~.Refused`
with its closed :class:`~.RefusalKind`:

12. Method known (:data:`~._methods.METHODS`; METHOD_NOT_FOUND, -32601).
14. The method's routing member a string and ``_meta.logLevel`` a known level (INVALID_PARAMS, -32602).
16. Operation lookup (:class:`~._methods.Resolver`; UNKNOWN_OPERATION, -32602, ``data.uri`` for an unknown
    resource). A ``tasks/*`` call must declare the tasks extension (MISSING_CAPABILITY, -32021); its task is looked
    up when it runs (TASK_NOT_FOUND, -32602, for an unknown, expired or another caller's id, and for every id on a
    server without a store; a task manager's other refusals are mapped by :func:`task_refusal`).
16b. The operation's ``required_scopes`` granted by the admission (INSUFFICIENT_SCOPE: 403 ``insufficient_scope``
    with ``scope=`` in the challenge; never checked for an unscoped admission, such as the anonymous caller's).
17. REQUIRED capabilities of the operation, all missing at once (MISSING_CAPABILITY), before params or state.
18. Params: arguments (INVALID_PARAMS), ``inputResponses`` (INPUT_RESPONSES), ``requestState`` of the operation's
    declared mode (STATE_REFUSED).
19. Opening a FRAMEWORK_PROTECTED state bound to this call (:class:`~._state.StateWrapper`; STATE_REFUSED).
20. The handler (HANDLER_FAILED, -32603; its own :class:`~soklet_core.mcp.server.McpError`: APPLICATION, as is
    a :class:`~soklet_core.mcp.server.HandleRejected` it lets through, mapped by :func:`handle_refusal`). A
    ``StartTask`` answer of a task tool creates the task when the call declared the tasks extension
    (:class:`~.TaskCreated`), else runs the tool's step within the call. A store out of reach: STORE_UNAVAILABLE.
21. The emission declared by the operation (INTERNAL, -32603).
22. CONDITIONAL capabilities of the emitted requests, all missing at once (MISSING_CAPABILITY).
23. Sealing the emitted framework state (INTERNAL, -32603, no state emitted) → :class:`~.InputRequired`.

Where handlers run: ``async def`` handlers on the event loop; ``def`` handlers in a worker thread unless their
registration says ``blocking=False`` (or the engine turned the thread off for all).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final, TypeAlias, TypeVar, cast

from soklet_core import tracing
from soklet_core.json import JsonArray, JsonError, JsonNumber, JsonObject, JsonString, JsonValue, parse
from soklet_core.mcp.model import methods
from soklet_core.mcp.model.context import RequestContext
from soklet_core.mcp.model.errors import McpModelError
from soklet_core.mcp.model.input_required_result import (
    InputRequiredResult,
    RequestStateMode,
    check_application_request_state,
)
from soklet_core.mcp.model.input_responses import InputResponses
from soklet_core.mcp.model.registry import Registry, ToolRegistration
from soklet_core.mcp.model.results import CacheHint, ReadResourceResult
from soklet_core.mcp.model.tasks import TASKS_CAPABILITIES, StartTask, TaskSupport
from soklet_core.mcp.server._jsonrpc import (
    INTERNAL_ERROR,
    INTERNAL_ERROR_MESSAGE,
    INVALID_PARAMS,
    INVALID_STATE_MESSAGE,
    McpError,
    input_responses_malformed,
    missing_capabilities,
    parse_refusal,
    store_refusal,
    task_not_found,
    unauthorized,
)
from soklet_core.mcp.server.admission import (
    Admission,
    AdmissionPolicy,
    AdmissionRefused,
    AdmissionRefusedReason,
    AdmissionRequest,
    AnonymousAdmission,
)
from soklet_core.mcp.server.durable._handles import HANDLE_REJECTED_REASON, HandleRejected
from soklet_core.mcp.server.durable._tasks import STEP_UNFINISHED_MESSAGE, TaskError, TaskErrorReason
from soklet_core.mcp.server.engine._call import (
    Call,
    Complete,
    EncodedResult,
    InputRequired,
    Outcome,
    ProgressChannel,
    RefusalKind,
    Refused,
    ResultValue,
    TaskCreated,
)
from soklet_core.mcp.server.engine._invocation import Invocation
from soklet_core.mcp.server.engine._methods import (
    Refusal,
    Resolver,
    Target,
    build_lists,
    conditional_capabilities,
    discover_capabilities,
    invalid_params,
    routing_value,
)
from soklet_core.mcp.server.engine._state import LARGE_BODY_WAIT_SECONDS, StateWrapper, Workers, internal
from soklet_core.mcp.server.options import ProtocolOptions
from soklet_core.mcp.server.resource_metadata import ProtectedResource
from soklet_core.protection import BoundRequest, OpenedRequestState, RequestStateSealer
from soklet_core.protocol import CLIENT_INFO_META_KEY, LOG_LEVEL_META_KEY, TASKS_EXTENSION
from soklet_core.store import StoreError, StoreErrorReason

if TYPE_CHECKING:
    from soklet_core.mcp.server.durable._tasks import TaskManager
    from soklet_core.mcp.server.ops._metrics import ServerMetrics

__all__ = [
    "Engine",
    "Interceptor",
    "LifecycleCallback",
    "check_log_level",
    "handle_refusal",
    "task_refusal",
]

_logger = logging.getLogger("soklet.mcp")
_T = TypeVar("_T")

_LOG_LEVELS: Final = frozenset({"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})
_DEFAULT_PROTOCOL: Final = ProtocolOptions()
# The answer of tasks/update and tasks/cancel: an empty ack.
_COMPLETE_ACK: Final = EncodedResult(b'{"resultType":"complete"}')

#: Wraps the handler call: ``interceptor(context, call_handler)`` must await ``call_handler()`` (or not) and
#: return the result. It receives the same admitted context the handler gets.
Interceptor: TypeAlias = Callable[[RequestContext, Callable[[], Awaitable[object]]], Awaitable[object]]
#: Called with ``(event, context)``: ``"admitted"`` before the handler, ``"finished"`` after it (sync, fast).
LifecycleCallback: TypeAlias = Callable[[str, RequestContext], None]


def check_log_level(meta: JsonObject) -> None:
    """``_meta.logLevel``, when present, is one of the protocol's levels (else -32602 ``unknown logLevel``)."""
    level = meta.get(LOG_LEVEL_META_KEY)
    if level is not None and not (isinstance(level, JsonString) and level.value in _LOG_LEVELS):
        raise invalid_params("Invalid params: unknown logLevel", "log-level")


class _UncachedResource:
    """A resource read on a retry: answered with the "do not cache" hint (its content depends on the answers)."""

    __slots__ = ("result",)

    def __init__(self, result: ReadResourceResult) -> None:
        self.result = result

    def to_wire(self) -> JsonObject:
        return self.result.to_wire(cache_hint=CacheHint.uncached())


class Engine:
    """The protocol logic of one server, shared by every transport. Stateless per call and safe to share between
    concurrent calls; build it through :class:`soklet_core.mcp.McpServer` (or directly, for a library caller)."""

    def __init__(
        self,
        *,
        registry: Registry,
        protocol: ProtocolOptions = _DEFAULT_PROTOCOL,
        sealer: RequestStateSealer | None = None,
        admission: AdmissionPolicy | None = None,
        interceptor: Interceptor | None = None,
        lifecycle: Iterable[LifecycleCallback] = (),
        metrics: ServerMetrics | None = None,
        tasks: TaskManager | None = None,
        large_body_wait_seconds: float = LARGE_BODY_WAIT_SECONDS,
        protected_resource: ProtectedResource | None = None,
    ) -> None:
        if not isinstance(protocol, ProtocolOptions):
            raise TypeError("protocol takes a ProtocolOptions")
        supported_versions = protocol.supported_versions
        instructions = protocol.instructions
        self._registry = registry
        self._tasks = tasks
        if tasks is None and any(item.task_support is not TaskSupport.NONE for item in registry.tools):
            raise ValueError("tools with task support need a durable store (McpServer(store=...))")
        self._metrics = metrics
        self._admission: AdmissionPolicy = admission if admission is not None else AnonymousAdmission()
        self._policy_name = type(self._admission).__name__
        if protected_resource is not None and not isinstance(protected_resource, ProtectedResource):
            raise TypeError("protected_resource takes a ProtectedResource")
        self._protected_resource = protected_resource
        # Named in every challenge, so that a refused client finds the authorization server (RFC 9728 §5.1).
        self._resource_metadata = None if protected_resource is None else protected_resource.metadata_url
        self._versions = tuple(supported_versions)
        if not self._versions:
            raise ValueError("at least one protocol version must be supported")
        self._instructions = instructions
        self._interceptor = interceptor
        self._lifecycle = tuple(lifecycle)
        self._server_info = JsonObject.from_mapping({"name": protocol.server_name, "version": protocol.server_version})
        # Only framework-protected operations bind a state to the params digest.
        self._protects = any(
            item.request_state_mode is RequestStateMode.FRAMEWORK_PROTECTED
            for group in (registry.tools, registry.prompts, registry.resources, registry.resource_templates)
            for item in group
        )
        if sealer is None and self._protects:
            raise ValueError("FRAMEWORK_PROTECTED operations need a protection config")
        self._capabilities = registry.server_capabilities()
        lists = build_lists(
            registry,
            versions=JsonArray.of(*self._versions),
            capabilities=discover_capabilities(self._capabilities, tasks=tasks is not None),
            instructions=instructions,
            hint=protocol.list_cache_hint,
        )
        self._resolver = Resolver(registry, lists, in_thread=protocol.sync_handlers_in_thread)
        self._workers = Workers(large_body_wait_seconds)
        self._state = StateWrapper(sealer, metrics, self._workers)

    # ------------------------------------------------------------------------------------------------ facts

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
        """The protocol versions this engine accepts, preferred first."""
        return self._versions

    @property
    def server_info(self) -> JsonObject:
        """``{"name": ..., "version": ...}``: what the server calls itself."""
        return self._server_info

    @property
    def instructions(self) -> str | None:
        """The server's instructions for clients (``None``: none)."""
        return self._instructions

    @property
    def server_capabilities(self) -> JsonObject:
        """What the registry holds, as server capabilities (:meth:`Registry.server_capabilities`); ``server/discover``
        adds the tasks extension when the server offers tasks."""
        return self._capabilities

    @property
    def protects_state(self) -> bool:
        """Whether some operation's state is FRAMEWORK_PROTECTED (only then is a params digest ever taken)."""
        return self._protects

    @property
    def params_digests_taken(self) -> int:
        """How many params digests this engine has taken: at most one per call, only for a call that opens or
        seals a framework-protected state (a transport that digests a large body early counts it with
        :meth:`count_digest`)."""
        return self._state.digests_taken

    def count_digest(self) -> None:
        """One digest taken by a transport for the engine (a large body digested in the worker that parses it)."""
        self._state.digests_taken += 1

    # ------------------------------------------------------------------------------------------------ for transports

    @property
    def protected_resource(self) -> ProtectedResource | None:
        """The RFC 9728 metadata of this endpoint (``None``: the server names no authorization server)."""
        return self._protected_resource

    async def admit(self, path: str, headers: Mapping[str, str]) -> Admission:
        """The admission policy's verdict on a request's credentials (awaited when the policy answers with an
        awaitable), or the :class:`McpError` every transport answers: 401/403 with a ``WWW-Authenticate: Bearer``
        challenge, 503 when the policy could not check the token
        (:func:`~soklet_core.mcp.server._jsonrpc.unauthorized`). The refusal is counted by its reason."""
        if tracing.tracer() is not None:
            return await self._admit_traced(path, headers)
        try:
            verdict = self._admission.admit(AdmissionRequest(path, headers))
            if isinstance(verdict, Admission):  # a synchronous policy: the common case, no await
                return verdict
            admitted = await verdict
        except AdmissionRefused as refused:
            raise self._refusal(refused) from None
        if not isinstance(admitted, Admission):
            raise TypeError("an admission policy answers an Admission")
        return admitted

    async def _admit_traced(self, path: str, headers: Mapping[str, str]) -> Admission:
        # The same verdict inside a span naming the policy and, when refused, the closed reason (never a token,
        # a claim or the subject).
        with tracing.span("soklet.admission", {"soklet.admission.policy": self._policy_name}) as span:
            try:
                verdict = self._admission.admit(AdmissionRequest(path, headers))
                admitted = verdict if isinstance(verdict, Admission) else await verdict
            except AdmissionRefused as refused:
                tracing.fail(span, refused.reason.value)
                raise self._refusal(refused) from None
            if not isinstance(admitted, Admission):
                raise TypeError("an admission policy answers an Admission")
            if span is not None:
                span.set_attribute(tracing.OUTCOME, "admitted")
            return admitted

    def _refusal(self, refused: AdmissionRefused) -> McpError:
        if self._metrics is not None:
            self._metrics.admission_refused(refused.reason.value)
        return unauthorized(
            refused.reason.value,
            status=refused.http_status,
            error=refused.bearer_error,
            scopes=refused.scopes,
            resource_metadata=self._resource_metadata,
        )

    async def run_sized(self, size: int, work: Callable[[], _T]) -> _T:
        """Run ``work``, whose cost grows with ``size`` bytes: at once up to the inline body size, else in one of
        the engine's bounded workers. Raises :class:`McpError` (503, ``Retry-After``) when every worker stayed
        busy."""
        return await self._workers.run_sized(size, work)

    async def parse_body(self, body: bytes) -> JsonValue:
        """``body`` parsed by the engine's rules (:meth:`run_sized`). Raises :class:`McpError`: -32700 (400) for
        anything but strict JSON, 503 when every worker stayed busy."""
        try:
            return await self.run_sized(len(body), lambda: parse(body))
        except JsonError:
            raise parse_refusal() from None

    def resolve(self, method: str, params: JsonObject) -> Target | None:
        """Which registration a call of ``method`` with ``params`` runs (validation step 16): its
        :class:`~._methods.Target` (``target.operation`` is the registration), ``None`` for a method that runs
        none (a list, ``server/discover``, a completion nobody registered, ``tasks/*``). Raises :class:`McpError`
        as :meth:`call` would refuse."""
        try:
            routing_value(method, params)
            resolved = self._resolver.resolve(method, params)
        except Refusal as refusal:
            raise refusal.error from None
        return resolved if isinstance(resolved, Target) else None

    # ------------------------------------------------------------------------------------------------ the call

    async def call(self, call: Call, progress: ProgressChannel | None = None) -> Outcome:
        """Run one call (validation steps 12, 14, 16-23). Never raises for client input; ``asyncio.CancelledError``
        propagates."""
        operation: str | None = None
        try:
            try:
                routing_value(call.method, call.params)  # step 14
                check_log_level(call.meta)
            except McpError as error:
                raise Refusal(RefusalKind.INVALID_PARAMS, error) from None
            resolved = self._resolver.resolve(call.method, call.params)  # steps 12, 16
            if resolved is None:
                return await self._task_call(call)
            if type(resolved) is EncodedResult:
                return Complete(resolved)
            assert isinstance(resolved, Target)
            operation = resolved.name
            return await self._run(call, resolved, progress)
        except Refusal as refusal:
            return Refused(refusal.kind, refusal.error, operation)
        except StoreError as error:
            _logger.warning("durable store failed: %s", error.reason.value)
            kind = (
                RefusalKind.STORE_UNAVAILABLE if error.reason is StoreErrorReason.UNAVAILABLE else RefusalKind.INTERNAL
            )
            return Refused(kind, store_refusal(error), operation)

    async def _run(self, call: Call, target: Target, channel: ProgressChannel | None) -> Outcome:
        """Steps 17-23: the target's handler inside the request-state wrapper."""
        operation = target.operation
        params = call.params
        # Step 16b: the operation's scopes, after admission and before anything about the client's capabilities.
        if operation is not None and operation.required_scopes and not call.admission.grants(operation.required_scopes):
            needed = tuple(operation.required_scopes)
            refused = AdmissionRefused(AdmissionRefusedReason.INSUFFICIENT_SCOPE, scopes=needed)
            raise Refusal(RefusalKind.INSUFFICIENT_SCOPE, self._refusal(refused))
        if operation is not None and operation.required_capabilities:
            missing = call.capabilities.missing(operation.required_capabilities)
            if missing is not None:
                raise Refusal(RefusalKind.MISSING_CAPABILITY, missing_capabilities(missing.to_wire()))
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
                    raise _state_not_accepted("state-unexpected")
                if mode is RequestStateMode.APPLICATION_PROTECTED:
                    try:
                        application_state = check_application_request_state(token.value)
                    except McpModelError:
                        raise _state_not_accepted("state-invalid") from None
                else:
                    bound = await self._state.bind(call)
                    opened = self._state.open(token.value, bound)
                    framework_state = opened.state
            # Streaming only matters with a progress token; the capability walk is skipped otherwise.
            if (
                channel is not None
                and "progressToken" in call.meta
                and call.capabilities.missing(conditional_capabilities(operation)) is None
            ):
                channel.allow_streaming()
        token_value = call.meta.get("progressToken")
        invocation = Invocation(token_value if isinstance(token_value, JsonString | JsonNumber) else None, channel)
        client_info = call.meta.get(CLIENT_INFO_META_KEY)
        context = RequestContext(
            identity=call.admission.identity,
            partition=call.admission.partition,
            client_capabilities=call.capabilities,
            protocol_version=call.protocol_version,
            request_id=call.request_id,
            method=call.method,
            operation_name=target.name,
            input_responses=responses,
            request_state_mode=mode,
            framework_request_state=framework_state,
            application_request_state=application_state,
            meta=call.meta,
            client_info=client_info if isinstance(client_info, JsonObject) else None,
            invocation=invocation,
        )
        if tracing.tracer() is None:
            result = await self._invoke(target, context, arguments, invocation)
        else:
            with tracing.span("soklet.handler", {tracing.OPERATION: target.name}) as span:
                try:
                    result = await self._invoke(target, context, arguments, invocation)
                except Refusal as refusal:
                    tracing.fail(span, refusal.kind.value, "failed")
                    raise
                if span is not None:
                    span.set_attribute(tracing.OUTCOME, _returned(result))
        if isinstance(result, StartTask) and isinstance(operation, ToolRegistration):
            assert isinstance(arguments, JsonObject)
            return await self._start_task(call, operation, arguments, result, invocation)
        if isinstance(result, InputRequiredResult) and operation is not None:
            sealed = await self._state.emit(call, operation, result, bound, opened)
            return InputRequired(result, sealed, target.name)
        if not isinstance(result, target.expected):
            raise internal("handler-result-type")
        if isinstance(result, ReadResourceResult) and (responses or "requestState" in params):
            return Complete(_UncachedResource(result), target.name)
        return Complete(cast(ResultValue, result), target.name)

    async def _start_task(
        self, call: Call, tool: ToolRegistration, arguments: JsonObject, start: StartTask, invocation: Invocation
    ) -> Outcome:
        """A task tool's ``StartTask``: the stored task for a call that declared the tasks extension, else the
        tool's step run within the call (a ``REQUIRED`` tool never gets here without the extension: step 17)."""
        tasks = self._tasks
        if tool.task_support is TaskSupport.NONE or tasks is None:
            _logger.error("a handler answered StartTask for a tool without task support")
            raise internal("task-unsupported")
        try:
            if call.capabilities.has_extension(TASKS_EXTENSION):
                created = await tasks.create(
                    tool=tool,
                    admission=call.admission,
                    arguments=arguments,
                    capabilities=call.capabilities,
                    start=start,
                )
                return TaskCreated(EncodedResult(created), tool.name)
            result = await tasks.run_inline(
                tool=tool,
                admission=call.admission,
                arguments=arguments,
                capabilities=call.capabilities,
                start=start,
                cancelled=lambda: invocation.cancelled,
            )
        except TaskError as error:
            raise task_refusal(error) from None
        return Complete(result, tool.name)

    async def _task_call(self, call: Call) -> Outcome:
        """``tasks/get``, ``tasks/update`` or ``tasks/cancel``: the extension declared on this call (step 16), then
        the task manager's answer, named by the task's tool (step 16)."""
        missing = call.capabilities.missing(TASKS_CAPABILITIES)
        if missing is not None:
            raise Refusal(RefusalKind.MISSING_CAPABILITY, missing_capabilities(missing.to_wire()))
        tasks = self._tasks
        if tasks is None:
            raise Refusal(RefusalKind.TASK_NOT_FOUND, task_not_found())  # a server without a store has no tasks
        task_id = call.params["taskId"]
        assert isinstance(task_id, JsonString)  # the routing member: step 14 checked it
        admission = call.admission
        try:
            if call.method == methods.TASKS_GET:
                body, tool = await tasks.get(task_id.value, admission)
                return Complete(EncodedResult(body), tool)
            if call.method == methods.TASKS_UPDATE:
                # Only the answers to outstanding keys are read (and checked against the request each key asked);
                # the rest are ignored unread, as the extension asks.
                responses = call.params.get("inputResponses", JsonObject.empty_instance())
                if not isinstance(responses, JsonObject):
                    raise Refusal(RefusalKind.INPUT_RESPONSES, input_responses_malformed(not_object=True))
                tool = await tasks.update(task_id.value, admission, responses)
            else:
                tool = await tasks.cancel(task_id.value, admission)
        except TaskError as error:
            raise task_refusal(error) from None
        return Complete(_COMPLETE_ACK, tool)

    async def _invoke(
        self, target: Target, context: RequestContext, arguments: object, invocation: Invocation
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
            # Without an interceptor the handler is called from here: one frame fewer on every call.
            if target.on_loop:
                result = handler(context, arguments)
                return await result if inspect.isawaitable(result) else result
            return await _call_in_thread(lambda: handler(context, arguments))
        except asyncio.CancelledError:
            raise
        except McpError as error:  # the application's own answer
            raise Refusal(RefusalKind.APPLICATION, error) from None
        except HandleRejected as error:
            raise handle_refusal(error) from None
        except StoreError:
            # A durable handle's store failing under the handler is the store's answer (503 with Retry-After when
            # unavailable), as for tasks, not a handler failure.
            raise
        except Exception as error:  # the client gets one fixed message; the operator the exception type
            _logger.error("handler failed: %s", type(error).__name__)
            raise Refusal(RefusalKind.HANDLER_FAILED, internal("handler-failed").error) from None
        finally:
            invocation.close()
            for callback in self._lifecycle:
                callback("finished", context)


_TASK_MESSAGES: Final = {
    TaskErrorReason.EXPIRED: "Failed to retrieve task: Task has expired",
    TaskErrorReason.STORED_QUOTA: "Too many stored tasks",
    TaskErrorReason.LIVE_LIMIT: "Too many tasks",
    TaskErrorReason.STEP_UNFINISHED: STEP_UNFINISHED_MESSAGE,
}
_TASK_LOG_REASONS: Final = {
    TaskErrorReason.TOO_LARGE: "task-too-large",
    TaskErrorReason.STORED_QUOTA: "task-quota",
    TaskErrorReason.LIVE_LIMIT: "task-limit",
    TaskErrorReason.STEP_UNFINISHED: "task-step-timeout",
    TaskErrorReason.STEP_FAILED: "handler-failed",
    TaskErrorReason.INPUT_INLINE: "task-input-inline",
    TaskErrorReason.CONTENTION: "task-contention",
    TaskErrorReason.DOCUMENT: "task-document",
}


def task_refusal(error: TaskError) -> Refusal:
    """The one wire mapping of a task manager's refusal: not found (-32602, one message for every caller), expired
    (-32602, the owner only), a malformed answer (-32602), the tool's own protocol error (its code, 200), and the
    server's failures (-32603, 200, a fixed message)."""
    reason = error.reason
    if reason is TaskErrorReason.NOT_FOUND:
        return Refusal(RefusalKind.TASK_NOT_FOUND, task_not_found())
    if reason is TaskErrorReason.EXPIRED:
        expired = McpError(INVALID_PARAMS, _TASK_MESSAGES[reason], log_reason="task-expired")
        return Refusal(RefusalKind.TASK_REFUSED, expired)
    if reason is TaskErrorReason.INPUT_RESPONSES:
        return Refusal(RefusalKind.INPUT_RESPONSES, input_responses_malformed())
    failure = error.failure
    if reason is TaskErrorReason.TOOL_FAILED and failure is not None:
        failed = McpError(failure.code, failure.message, failure.data, http_status=200, log_reason="task-failed")
        return Refusal(RefusalKind.APPLICATION, failed)
    message = _TASK_MESSAGES.get(reason, INTERNAL_ERROR_MESSAGE)
    return Refusal(
        RefusalKind.TASK_REFUSED,
        McpError(INTERNAL_ERROR, message, log_reason=_TASK_LOG_REASONS.get(reason, "task-failed")),
    )


def handle_refusal(error: HandleRejected) -> Refusal:
    """The one wire mapping of a refused durable handle, whatever the case: HTTP 400, -32602, the request-state
    refusal sentence, log reason :data:`~soklet_core.mcp.server.durable.HANDLE_REJECTED_REASON`. It is the
    application's state its own repository refused, so it is the handler's answer (APPLICATION): the 2025 era
    relays it as it is."""
    del error  # one answer for every case: the error says nothing more, on purpose
    rejected = McpError(INVALID_PARAMS, INVALID_STATE_MESSAGE, http_status=400, log_reason=HANDLE_REJECTED_REASON)
    return Refusal(RefusalKind.APPLICATION, rejected)


def _state_not_accepted(reason: str) -> Refusal:
    return Refusal(
        RefusalKind.STATE_REFUSED, invalid_params("Invalid params: requestState is not accepted here", reason)
    )


def _input_responses(params: JsonObject) -> InputResponses:
    if "inputResponses" not in params:
        return InputResponses.empty()
    value = params["inputResponses"]
    if not isinstance(value, JsonObject):
        raise Refusal(RefusalKind.INPUT_RESPONSES, input_responses_malformed(not_object=True))
    try:
        return InputResponses.from_wire(value)
    except McpModelError:
        raise Refusal(RefusalKind.INPUT_RESPONSES, input_responses_malformed()) from None


def _returned(result: object) -> str:
    # What a handler answered, in one word for its span.
    if isinstance(result, InputRequiredResult):
        return "input_required"
    if isinstance(result, StartTask):
        return "start_task"
    return "complete"


async def _call_in_thread(invoke: Callable[[], object]) -> object:
    # Sync handlers run in a worker thread so a slow one cannot stall the event loop. A sync callable that
    # returns an awaitable (a lambda around an async function) has that awaitable awaited here, on the loop.
    result = await asyncio.to_thread(invoke)
    if inspect.isawaitable(result):
        return await result
    return result
