"""The step driver: how the steps of stored tasks run in this process (:class:`StepDriver`).

A running step holds a *lease* in its task's document (:data:`LEASE_SECONDS`), renewed every
:data:`LEASE_RENEW_SECONDS` while it runs; the renewer also notices a cancel or a lost lease and cancels the local
step. Any process that finds a ``working`` task whose lease ran out runs the step again (at least once per round;
after :data:`MAX_STEP_ATTEMPTS` attempts the task fails): a ``tasks/get`` that reads it, or the orphan sweep
(:meth:`StepDriver.sweep_orphans`, :data:`ORPHAN_SWEEP_BATCH` ``working`` tasks a sweep). A step's outcome is written
by compare-and-swap on the record's version (at most :data:`CAS_TRIES` tries), so a step finishing after a cancel or
a takeover writes nothing. A driver that closes gives its leases back, so a restarted process picks its tasks up at
once.

The :class:`~._tasks.TaskManager` owns one driver: it creates, answers and cancels tasks; the driver runs them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final

from soklet_core.json import JsonObject, JsonString
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.context import Identity
from soklet_core.mcp.model.errors import McpModelError
from soklet_core.mcp.model.input_responses import InputResponses
from soklet_core.mcp.model.registry import Registry, ToolRegistration
from soklet_core.mcp.model.results import CallToolResult
from soklet_core.mcp.model.tasks import TaskContext, TaskFailed, TaskInputRequired, TaskStep
from soklet_core.mcp.server._jsonrpc import RESPONSE_TOO_LARGE_MESSAGE, missing_capabilities
from soklet_core.mcp.server.durable._task_documents import (
    INTERNAL_FAILURE,
    STEP_UNFINISHED_ERROR,
    TOO_LARGE_FAILURE,
    TaskDocument,
    document_text,
    error_object,
    log_name,
    read_document,
    task_expired,
)
from soklet_core.mcp.server.durable._task_errors import TaskError, TaskErrorReason
from soklet_core.mcp.server.durable._task_spans import StepVerdict, step_span
from soklet_core.store import DurableStore, StoreError, StoreErrorReason, TaskRecord, TaskStatus
from soklet_core.store.records import to_millis

__all__ = [
    "CAS_TRIES",
    "DEFAULT_STEP_TIMEOUT_SECONDS",
    "LEASE_RENEW_SECONDS",
    "LEASE_SECONDS",
    "MAX_STEP_ATTEMPTS",
    "ORPHAN_SWEEP_BATCH",
    "StepDriver",
    "call_step",
]

_logger = logging.getLogger("soklet.mcp.tasks")

#: The longest one step run may take before the task fails.
DEFAULT_STEP_TIMEOUT_SECONDS: Final = 600.0
#: How long a running step's lease lasts without renewal; another process re-runs the step after it.
LEASE_SECONDS: Final = 10.0
#: How often the process running a step renews its lease (and looks for a cancel made elsewhere).
LEASE_RENEW_SECONDS: Final = 3.0
#: Step runs one round may start (re-runs after a lost lease included) before the task fails.
MAX_STEP_ATTEMPTS: Final = 3
#: The most ``working`` tasks one orphan sweep reads; the next sweep goes on from where it stopped.
ORPHAN_SWEEP_BATCH: Final = 64
#: Compare-and-swap attempts of one change before it gives up (each lost race means another writer got through).
CAS_TRIES: Final = 8
# The most characters of the host name a lease holder's name keeps.
_HOST_CHARS: Final = 64
# A failed step's span reasons that are task refusal reasons too (the others: _task_spans.STEP_FAILURES).
_UNFINISHED: Final = TaskErrorReason.STEP_UNFINISHED.value
_STEP_FAILED: Final = TaskErrorReason.STEP_FAILED.value
_TOOL_FAILED: Final = TaskErrorReason.TOOL_FAILED.value


def _holder_name() -> str:
    """A lease holder's name: host, process id and a random suffix (several managers may share a process), so an
    operator reading ``soklet tasks show`` knows where the step runs."""
    host = "".join(char for char in socket.gethostname()[:_HOST_CHARS] if char.isalnum() or char in "-.") or "host"
    return f"{host}/{os.getpid()}/{secrets.token_hex(4)}"


def _now() -> datetime:
    return datetime.now(UTC)


async def call_step(step: TaskStep, context: TaskContext) -> object:
    """Run a step: an ``async`` one on the event loop, a ``def`` one in a worker thread (steps are long)."""
    if inspect.iscoroutinefunction(step):
        return await step(context)
    result = await asyncio.to_thread(step, context)
    if inspect.isawaitable(result):
        return await result
    return result


@dataclass(slots=True)
class _Running:
    """A task whose steps this process drives: its asyncio task, whether the task was cancelled, whether another
    process took its lease over, and whether another round was asked for while it ran (a ``tasks/update`` that
    answered the last key)."""

    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    lost: bool = False
    again: bool = False


class StepDriver:
    """Runs the steps of ``store``'s tasks for the task tools of ``registry`` in this process.

    ``step_timeout_seconds`` bounds one step run; ``lease_seconds`` is how long a step's lease lasts unless renewed
    (renewed every :data:`LEASE_RENEW_SECONDS`, or a third of it when shorter); ``forget`` is told of every task
    a step's outcome ended (the manager's per-caller accounting).
    """

    __slots__ = (
        "_closed",
        "_forget",
        "_instance",
        "_lease",
        "_registry",
        "_renew",
        "_running",
        "_step_timeout",
        "_store",
        "_sweep_after",
    )

    def __init__(
        self,
        store: DurableStore,
        registry: Registry,
        *,
        step_timeout_seconds: float,
        lease_seconds: float,
        forget: Callable[[TaskRecord], None],
    ) -> None:
        self._store = store
        self._registry = registry
        self._step_timeout = float(step_timeout_seconds)
        self._lease = float(lease_seconds)
        self._renew = min(LEASE_RENEW_SECONDS, self._lease / 3)
        self._forget = forget
        self._instance = _holder_name()
        self._running: dict[str, _Running] = {}
        self._sweep_after: str | None = None
        self._closed = False

    @property
    def step_timeout(self) -> float:
        """The longest one step run may take, in seconds."""
        return self._step_timeout

    def leased(self, document: TaskDocument, now: datetime) -> TaskDocument:
        """``document`` leased to this process from ``now`` (a task created or made ``working`` again here)."""
        return replace(document, lease=to_millis(now) + int(self._lease * 1000), owner=self._instance)

    def revive(self, record: TaskRecord, document: TaskDocument, *, background: bool = False) -> bool:
        """Start ``record``'s step here if it is ``working``, not run here, and its lease ran out (its process
        died); whether it was started. The step takes the lease first (:meth:`_acquire`), so of several processes
        reviving it at once one runs it. ``background``: see :meth:`start`."""
        if record.status is not TaskStatus.WORKING or record.task_id in self._running:
            return False
        if document.lease is not None and document.lease >= to_millis(_now()):
            return False
        self.start(record.task_id, background=background)
        return True

    async def sweep_orphans(self) -> int:
        """Read the next :data:`ORPHAN_SWEEP_BATCH` ``working`` tasks (from where the last sweep stopped) and start
        the step of each whose lease ran out and whose tool is served here; how many were started."""
        page = await self._store.list_tasks(
            status=TaskStatus.WORKING, limit=ORPHAN_SWEEP_BATCH, after=self._sweep_after
        )
        self._sweep_after = page[-1].task_id if len(page) == ORPHAN_SWEEP_BATCH else None
        started = 0
        for record in page:
            if record.task_id in self._running or task_expired(record, _now()):
                continue
            tool = self._registry.find_tool(record.tool)
            if tool is None or tool.task_step is None:
                continue  # another instance may serve it: never failed for want of a tool here
            try:
                document = await read_document(record)
            except TaskError:
                continue
            if self.revive(record, document, background=True):
                _logger.info("task %s: its lease ran out; running its step", log_name(record.task_id))
                started += 1
        return started

    def start(self, task_id: str, *, background: bool = False) -> None:
        """Run ``task_id``'s step here (another round of it, if it is already running here). A ``background`` step
        (no request started it) runs in a fresh context: its spans are a trace of their own."""
        if self._closed:
            return
        entry = self._running.get(task_id)
        if entry is not None:
            entry.again = True  # the driver looks again before it stops (no await between its look and its exit)
            return
        entry = _Running()
        self._running[task_id] = entry
        entry.task = asyncio.get_running_loop().create_task(
            self._drive(task_id, entry),
            name="soklet-task-step",
            context=contextvars.Context() if background else None,
        )

    def cancel(self, task_id: str) -> None:
        """Cancel ``task_id``'s step running here, if any (the task was cancelled)."""
        entry = self._running.get(task_id)
        if entry is not None:
            entry.cancelled = True
            if entry.task is not None:
                entry.task.cancel()

    @contextlib.asynccontextmanager
    async def closing(self) -> AsyncIterator[None]:
        """No step starts within the block; at its end every step running here is stopped and its lease given
        back, so another process (or this one restarted) runs it again at once. Started again afterwards."""
        self._closed = True
        try:
            yield
            await self._stop_steps()
        finally:
            self._closed = False

    async def _stop_steps(self) -> None:
        running = list(self._running.items())
        for _task_id, entry in running:
            if entry.task is not None:
                entry.task.cancel()
        for _task_id, entry in running:
            if entry.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await entry.task
        for task_id, _entry in running:
            with contextlib.suppress(StoreError):
                await self._release(task_id)

    # ------------------------------------------------------------------------------------------------ one task

    async def _drive(self, task_id: str, entry: _Running) -> None:
        """Run rounds of the task's step here while another round is asked for."""
        try:
            while True:
                entry.again = False
                await self._drive_round(task_id, entry)
                if not entry.again:
                    return
        except asyncio.CancelledError:
            raise
        except StoreError as error:
            # The lease runs out and another process (or a later tasks/get here) runs the step again.
            _logger.warning(
                "task %s: store failed (%s); the step will be re-run", log_name(task_id), error.reason.value
            )
        except Exception as error:
            _logger.error("task %s: step driver failed: %s", log_name(task_id), type(error).__name__)
        finally:
            if self._running.get(task_id) is entry:
                del self._running[task_id]

    async def _acquire(self, task_id: str, verdict: StepVerdict) -> tuple[TaskRecord, TaskDocument] | None:
        """Take the lease of a ``working`` task (free, expired or already ours); ``None`` when it is not ours to
        run. Counts the attempt; past :data:`MAX_STEP_ATTEMPTS` the task fails instead."""
        for _ in range(CAS_TRIES):
            record = await self._store.get_task(task_id)
            if record is None or record.status is not TaskStatus.WORKING:
                return None
            document = await read_document(record)
            now = to_millis(_now())
            if document.lease is not None and document.lease >= now and document.owner != self._instance:
                return None
            attempts = document.attempts + 1
            if attempts > MAX_STEP_ATTEMPTS:
                _logger.error("task %s: the step did not finish in %d attempts", log_name(task_id), MAX_STEP_ATTEMPTS)
                await self._finish(record, document, verdict, _UNFINISHED, error=STEP_UNFINISHED_ERROR)
                return None
            document = replace(document, lease=now + int(self._lease * 1000), owner=self._instance, attempts=attempts)
            stored = await self._store.replace_task(
                replace(record, document=await document_text(document)), expected_version=record.version
            )
            if stored is not None:
                verdict.attempt = attempts
                return stored, document
        return None

    async def _drive_round(self, task_id: str, entry: _Running) -> None:
        """One round of the step, as one span (:func:`~._task_spans.step_span`)."""
        verdict = StepVerdict()
        with step_span(verdict):
            try:
                await self._run_round(task_id, entry, verdict)
            except asyncio.CancelledError:
                verdict.outcome = "cancelled" if entry.cancelled else "lease-lost" if entry.lost else "stopped"
                raise

    async def _run_round(self, task_id: str, entry: _Running, verdict: StepVerdict) -> None:
        acquired = await self._acquire(task_id, verdict)
        if acquired is None:
            return
        record, document = acquired
        tool = self._registry.find_tool(record.tool)
        if tool is None or tool.task_step is None:
            _logger.error("task %s: its tool is not served here", log_name(task_id))
            await self._finish(record, document, verdict, "tool-not-served", error=INTERNAL_FAILURE)
            return
        verdict.tool = tool.name
        context = TaskContext(
            task_id=task_id,
            tool=record.tool,
            identity=Identity(record.subject),
            partition=record.partition,
            arguments=document.arguments,
            state=document.state,
            input_responses=InputResponses(document.responses or JsonObject.empty_instance()),
            round=document.round,
            client_capabilities=ClientCapabilities.from_json(document.capabilities),
            cancel_check=lambda: entry.cancelled,
        )
        step = asyncio.get_running_loop().create_task(call_step(tool.task_step, context))
        renewer = asyncio.get_running_loop().create_task(self._renew_lease(task_id, step, entry))
        try:
            try:
                async with asyncio.timeout(self._step_timeout):
                    outcome: object = await asyncio.shield(step)
            except TimeoutError:
                step.cancel()
                _logger.error("task %s: the step ran over %.0f s", log_name(task_id), self._step_timeout)
                outcome = TimeoutError()
            except asyncio.CancelledError:
                step.cancel()
                raise
            except Exception as error:  # the client gets one fixed error; the operator the exception type
                _logger.error("task %s: step failed: %s", log_name(task_id), type(error).__name__)
                outcome = error
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await renewer
        await self._settle(task_id, tool, outcome, verdict)

    async def _renew_lease(self, task_id: str, step: asyncio.Task[object], entry: _Running) -> None:
        """Keep the lease while the step runs; cancel the step when the task was cancelled or the lease lost."""
        while True:
            await asyncio.sleep(self._renew)
            try:
                record = await self._store.get_task(task_id)
                if record is None or record.status is not TaskStatus.WORKING:
                    entry.cancelled = True
                    step.cancel()
                    return
                document = await read_document(record)
                if document.owner != self._instance:
                    entry.lost = True
                    step.cancel()  # another process took the step over: its run is the one that counts
                    return
                document = replace(document, lease=to_millis(_now()) + int(self._lease * 1000))
                await self._store.replace_task(
                    replace(record, document=await document_text(document)), expected_version=record.version
                )
            except StoreError as error:
                _logger.warning("task %s: lease not renewed (%s)", log_name(task_id), error.reason.value)

    async def _settle(self, task_id: str, tool: ToolRegistration, outcome: object, verdict: StepVerdict) -> None:
        """Write the step's outcome, unless the task moved on meanwhile (cancelled, or taken over)."""
        for _ in range(CAS_TRIES):
            record = await self._store.get_task(task_id)
            if record is None or record.status is not TaskStatus.WORKING:
                verdict.outcome = "cancelled"
                return  # cancelled (or purged) meanwhile: the outcome is dropped
            document = await read_document(record)
            if document.owner != self._instance:
                verdict.outcome = "lease-lost"
                return
            written = await self._write_outcome(record, document, tool, outcome, verdict)
            if written:
                return

    async def _write_outcome(
        self, record: TaskRecord, document: TaskDocument, tool: ToolRegistration, outcome: object, verdict: StepVerdict
    ) -> bool:
        if isinstance(outcome, CallToolResult):
            result = outcome.to_wire()
            return await self._finish(record, document, verdict, None, result=result)
        if isinstance(outcome, TaskFailed):
            error = error_object(outcome.code, outcome.message, outcome.data)
            return await self._finish(record, document, verdict, _TOOL_FAILED, error=error, message=outcome.message)
        if isinstance(outcome, TaskInputRequired):
            return await self._ask(record, document, tool, outcome, verdict)
        if isinstance(outcome, TimeoutError):
            return await self._finish(record, document, verdict, _UNFINISHED, error=STEP_UNFINISHED_ERROR)
        if not isinstance(outcome, Exception):
            _logger.error("task %s: the step answered a %s", log_name(record.task_id), type(outcome).__name__)
            return await self._finish(record, document, verdict, "bad-answer", error=INTERNAL_FAILURE)
        return await self._finish(record, document, verdict, _STEP_FAILED, error=INTERNAL_FAILURE)

    async def _ask(
        self,
        record: TaskRecord,
        document: TaskDocument,
        tool: ToolRegistration,
        outcome: TaskInputRequired,
        verdict: StepVerdict,
    ) -> bool:
        """Wait ``input_required`` for the step's requests, after the checks an MRTR emission gets."""
        if any(key in document.issued for key in outcome.input_requests):
            _logger.error("task %s: the step re-used an input request key", log_name(record.task_id))
            return await self._finish(record, document, verdict, "reused-key", error=INTERNAL_FAILURE)
        try:
            tool.check_emission(outcome.as_input_required_result())
        except McpModelError as refused:
            _logger.error("task step emitted an undeclared input request: %s", refused.reason.value)
            return await self._finish(record, document, verdict, "undeclared-emission", error=INTERNAL_FAILURE)
        missing = ClientCapabilities.from_json(document.capabilities).missing(outcome.required_capabilities)
        if missing is not None:
            refusal = missing_capabilities(missing.to_wire())
            error = error_object(refusal.code, refusal.message, refusal.data)
            return await self._finish(
                record, document, verdict, "missing-capability", error=error, message=refusal.message
            )
        pending = JsonObject.from_mapping({key: request.to_wire() for key, request in outcome.input_requests.items()})
        changed_document = replace(
            document,
            state=outcome.state,
            pending=pending,
            answers=None,
            responses=None,
            issued=(*document.issued, *outcome.input_requests),
            lease=None,
            owner=None,
        )
        return await self._write(
            record,
            changed_document,
            TaskStatus.INPUT_REQUIRED,
            outcome.status_message or record.status_message,
            verdict,
        )

    async def _finish(
        self,
        record: TaskRecord,
        document: TaskDocument,
        verdict: StepVerdict,
        failure: str | None,
        *,
        result: JsonObject | None = None,
        error: JsonObject | None = None,
        message: str | None = None,
    ) -> bool:
        """End the task: ``completed`` with ``result``, or (``failure``: its closed reason, for the span)
        ``failed`` with ``error``."""
        status = TaskStatus.COMPLETED if failure is None else TaskStatus.FAILED
        verdict.reason = failure
        changed = replace(document, result=result, error=error, lease=None, owner=None, pending=None, answers=None)
        if message is None and error is not None:
            # A failed task SHOULD say why in statusMessage: its error's (client-safe) message.
            text = error.get("message")
            message = text.value if isinstance(text, JsonString) else None
        try:
            return await self._write(record, changed, status, message, verdict)
        except StoreError as refused:
            if refused.reason is not StoreErrorReason.TOO_LARGE or status is not TaskStatus.COMPLETED:
                raise
            _logger.error("task %s: result over the task document limit", log_name(record.task_id))
            changed = replace(changed, result=None, error=TOO_LARGE_FAILURE)
            verdict.reason = TaskErrorReason.TOO_LARGE.value
            return await self._write(record, changed, TaskStatus.FAILED, RESPONSE_TOO_LARGE_MESSAGE, verdict)

    async def _write(
        self, record: TaskRecord, document: TaskDocument, status: TaskStatus, message: str | None, verdict: StepVerdict
    ) -> bool:
        changed = replace(
            record, status=status, status_message=message, updated_at=_now(), document=await document_text(document)
        )
        stored = await self._store.replace_task(changed, expected_version=record.version)
        if stored is not None:
            verdict.written(stored.status)
            if stored.status.terminal:
                self._forget(stored)
        return stored is not None

    async def _release(self, task_id: str) -> None:
        """Give back this process's lease of a ``working`` task (at close), so it is re-run without waiting."""
        for _ in range(CAS_TRIES):
            record = await self._store.get_task(task_id)
            if record is None or record.status is not TaskStatus.WORKING:
                return
            document = await read_document(record)
            if document.owner != self._instance:
                return
            document = replace(document, lease=None, owner=None, attempts=max(0, document.attempts - 1))
            stored = await self._store.replace_task(
                replace(record, document=await document_text(document)), expected_version=record.version
            )
            if stored is not None:
                return
