"""The request-state wrapper of the engine, and the bounded workers that run work growing with a body.

:class:`StateWrapper` opens a call's state before its handler (validation step 19) and checks and seals what the
handler emitted after it (steps 21-23), with one :class:`~soklet_core.protection.BoundRequest` for both: the call's
params digest is taken at most once, through :attr:`Call.digest <.Call.digest>`, only when a framework-protected
state is opened or sealed, and in one of the :class:`Workers` when the digest's work is over
:data:`~soklet_core.json.limits.INLINE_BODY_BYTES`. The opened state never leaves the engine.

:class:`Workers`: at most :data:`MAX_CONCURRENT_LARGE_BODIES` jobs whose cost grows with a body (parsing, digesting,
encoding a large reply) run at a time, each in a worker thread; the others wait up to
:data:`LARGE_BODY_WAIT_SECONDS`, then are refused 503 (:func:`~soklet_core.mcp.server._jsonrpc.busy_refusal`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, TypeVar

from opentelemetry.trace import Span

from soklet_core import tracing
from soklet_core.json import JsonError
from soklet_core.json.limits import INLINE_BODY_BYTES
from soklet_core.mcp.model.errors import McpModelError
from soklet_core.mcp.model.input_required_result import InputRequiredResult
from soklet_core.mcp.server._jsonrpc import (
    INTERNAL_ERROR,
    INTERNAL_ERROR_MESSAGE,
    McpError,
    busy_refusal,
    missing_capabilities,
    state_refusal,
)
from soklet_core.mcp.server.engine._call import Call, RefusalKind
from soklet_core.mcp.server.engine._methods import Operation, Refusal, invalid_params
from soklet_core.protection import (
    BoundRequest,
    EnvelopeHeader,
    OpenedRequestState,
    ProtectionUsageError,
    RequestStateBinding,
    RequestStateProtectionException,
    RequestStateProtectionReason,
    RequestStateSealer,
)

if TYPE_CHECKING:
    from soklet_core.mcp.server.ops._metrics import ServerMetrics

__all__ = [
    "LARGE_BODY_WAIT_SECONDS",
    "MAX_CONCURRENT_LARGE_BODIES",
    "StateWrapper",
    "Workers",
    "internal",
]

_logger = logging.getLogger("soklet.mcp")
# The protection refusals that mean "no more rounds" (a state past the round limit; a retry on the last allowed
# round that emitted a state): RefusalKind.ROUND_LIMIT in either direction, so that a transport can say so.
_ROUND_LIMIT_REASONS: Final = frozenset({RequestStateProtectionReason.ROUND, RequestStateProtectionReason.LAST_ROUND})


def _state_kind(error: RequestStateProtectionException, otherwise: RefusalKind) -> RefusalKind:
    return RefusalKind.ROUND_LIMIT if error.reason in _ROUND_LIMIT_REASONS else otherwise


#: Bodies over :data:`INLINE_BODY_BYTES` parsed (and digested) at the same time, one worker thread each. Each costs
#: up to about 25 times its size while its value model is built (docs/benchmarks.md), so two 16 MiB bodies stay
#: under a gigabyte; two keep both cores of a small machine busy without starving the event loop.
MAX_CONCURRENT_LARGE_BODIES: Final = 2
#: How long a large body waits for a worker before it is refused (503, JSON-RPC -32603, ``Retry-After``).
LARGE_BODY_WAIT_SECONDS: Final = 30.0
_T = TypeVar("_T")


def internal(reason: str) -> Refusal:
    """The server failed (-32603, 200, one fixed message); ``reason`` goes to the log only."""
    return Refusal(RefusalKind.INTERNAL, McpError(INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE, log_reason=reason))


class _Busy(Exception):
    """Every large-body worker stayed busy for :data:`LARGE_BODY_WAIT_SECONDS`."""


def _release(slots: asyncio.Semaphore, done: asyncio.Future[Any]) -> None:
    slots.release()
    if not done.cancelled():
        done.exception()  # retrieved here: the request that wanted it may have been cancelled meanwhile


class Workers:
    """The bounded worker threads of one engine (created on first use, one semaphore per event loop)."""

    __slots__ = ("_lock", "_pool", "_slots", "_wait")

    def __init__(self, wait_seconds: float = LARGE_BODY_WAIT_SECONDS) -> None:
        self._wait = wait_seconds
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    async def run_sized(self, size: int, work: Callable[[], _T]) -> _T:
        """Run ``work``, whose cost grows with ``size`` bytes: at once up to :data:`INLINE_BODY_BYTES`, else in a
        worker. Raises :class:`~soklet_core.mcp.server.McpError` (503, ``Retry-After``) when every worker stayed
        busy."""
        if size <= INLINE_BODY_BYTES:
            return work()
        try:
            return await self.off_loop(work)
        except _Busy:
            raise busy_refusal() from None

    def _pool_of(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(MAX_CONCURRENT_LARGE_BODIES, thread_name_prefix="soklet-body")
            return self._pool

    def _slots_of(self) -> asyncio.Semaphore:
        # One semaphore per event loop: an engine may outlive the loop it first served (tests, restarts).
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(MAX_CONCURRENT_LARGE_BODIES))
        return self._slots[1]

    async def off_loop(self, work: Callable[[], _T]) -> _T:
        """Run ``work`` in a worker thread, holding one slot until the thread is done, even when the request is
        cancelled meanwhile (a thread cannot be stopped halfway). Raises :class:`_Busy`."""
        slots = self._slots_of()
        try:
            async with asyncio.timeout(self._wait):
                await slots.acquire()
        except TimeoutError:
            raise _Busy from None
        try:
            future = asyncio.get_running_loop().run_in_executor(self._pool_of(), work)
        except BaseException:
            slots.release()
            raise
        future.add_done_callback(lambda done: _release(slots, done))
        return await asyncio.shield(future)


# Refusals decided before the key authenticated the token: its key id is still the client's text.
_BEFORE_AUTHENTICATION: Final = frozenset(
    {
        RequestStateProtectionReason.ENCODED_TOO_LARGE,
        RequestStateProtectionReason.BASE64URL,
        RequestStateProtectionReason.VERSION,
        RequestStateProtectionReason.UNKNOWN_KEY,
        RequestStateProtectionReason.AUTHENTICATION,
    }
)


def _set_key_id(span: Span, token: str) -> None:
    # Read from the envelope's header only for a span (a custom protector's token has none to read).
    try:
        span.set_attribute(tracing.KEY_ID, EnvelopeHeader.read(token).key_id)
    except RequestStateProtectionException:
        return


def _cannot_bind() -> Refusal:
    return Refusal(RefusalKind.INVALID_PARAMS, invalid_params("Invalid params: request cannot be bound", "binding"))


class StateWrapper:
    """Opening before the handler, checking and sealing after it (steps 19, 21-23)."""

    __slots__ = ("_metrics", "_sealer", "_workers", "digests_taken")

    def __init__(self, sealer: RequestStateSealer | None, metrics: ServerMetrics | None, workers: Workers) -> None:
        self._sealer = sealer
        self._metrics = metrics
        self._workers = workers
        #: Params digests taken through calls' digest sources (at most one per call).
        self.digests_taken = 0

    async def bind(self, call: Call) -> BoundRequest:
        """The call as a state is bound to it: its method, path, version, the admitted partition, the digest."""
        source = call.digest
        try:
            if source.size <= INLINE_BODY_BYTES:
                digest = source.take()
            else:
                try:
                    digest = await self._workers.off_loop(source.take)
                except _Busy:
                    raise Refusal(RefusalKind.BUSY, busy_refusal()) from None
        except JsonError:
            raise _cannot_bind() from None
        finally:
            self.digests_taken += 1
        try:
            binding = RequestStateBinding.of(
                method=call.method,
                path=call.endpoint_path,
                protocol_version=call.protocol_version,
                partition=call.admission.partition,
                params_digest=digest,
            )
            return BoundRequest(binding, call.request_id)
        except (ProtectionUsageError, ValueError):
            raise _cannot_bind() from None

    def open(self, token: str, bound: BoundRequest) -> OpenedRequestState:
        """Step 19: the state ``token`` opened for ``bound`` (one fixed refusal whatever the reason)."""
        if tracing.tracer() is not None:
            return self._open_traced(token, bound)
        assert self._sealer is not None
        try:
            opened = self._sealer.open(token, bound)
        except RequestStateProtectionException as error:
            if self._metrics is not None:
                self._metrics.open("refused", error.reason.value, token=token)
            raise Refusal(_state_kind(error, RefusalKind.STATE_REFUSED), state_refusal(error)) from None
        if self._metrics is not None:
            self._metrics.open("opened")
        return opened

    def _open_traced(self, token: str, bound: BoundRequest) -> OpenedRequestState:
        # The same opening inside a span: the outcome, the closed reason, the key id once the key has authenticated
        # the token (before that, the id in a token is the client's text), the round. Never the token.
        assert self._sealer is not None
        request = tracing.current_span()
        with tracing.span("soklet.state.open") as span:
            try:
                opened = self._sealer.open(token, bound)
            except RequestStateProtectionException as error:
                if self._metrics is not None:
                    self._metrics.open("refused", error.reason.value, token=token)
                tracing.fail(span, error.reason.value)
                if span is not None and error.reason not in _BEFORE_AUTHENTICATION:
                    _set_key_id(span, token)
                raise Refusal(_state_kind(error, RefusalKind.STATE_REFUSED), state_refusal(error)) from None
            if self._metrics is not None:
                self._metrics.open("opened")
            if span is not None:
                span.set_attribute(tracing.OUTCOME, "opened")
                _set_key_id(span, token)
                span.set_attribute(tracing.ROUND, opened.round)
            if request is not None:
                request.set_attribute(tracing.ROUND, opened.round)
            return opened

    async def emit(
        self,
        call: Call,
        operation: Operation,
        result: InputRequiredResult,
        bound: BoundRequest | None,
        opened: OpenedRequestState | None,
    ) -> str | None:
        """Steps 21-23: the emission checked against the declarations, its CONDITIONAL capabilities, and the
        framework state sealed (``None``: none emitted), continuing the state opened for this call."""
        try:
            operation.check_emission(result)
        except McpModelError as error:
            _logger.error("handler emitted an undeclared input request or state: %s", error.reason.value)
            raise internal("undeclared-emission") from None
        missing = call.capabilities.missing(result.required_capabilities)
        if missing is not None:
            raise Refusal(RefusalKind.MISSING_CAPABILITY, missing_capabilities(missing.to_wire()))
        sealed: str | None = None
        if result.framework_request_state is not None:
            assert self._sealer is not None
            if bound is None:
                bound = await self.bind(call)
            with tracing.span("soklet.state.seal") as span:
                try:
                    sealed = self._sealer.seal(result.framework_request_state, bound, continuing=opened)
                except RequestStateProtectionException as error:
                    _logger.warning("request state not sealed: %s", error.reason.value)
                    if self._metrics is not None:
                        self._metrics.seal("refused", error.reason.value)
                    tracing.fail(span, error.reason.value)
                    raise Refusal(_state_kind(error, RefusalKind.INTERNAL), state_refusal(error)) from None
                if self._metrics is not None:
                    self._metrics.seal("sealed")
                if span is not None:
                    span.set_attributes(
                        {tracing.OUTCOME: "sealed", tracing.ROUND: 1 if opened is None else opened.round + 1}
                    )
                    _set_key_id(span, sealed)
        if self._metrics is not None:
            self._metrics.input_required(call.method)
        return sealed
