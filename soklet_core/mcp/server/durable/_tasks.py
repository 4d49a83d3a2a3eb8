"""``TaskManager``: the tasks extension's server half, over a :class:`~soklet_core.store.DurableStore`.

A task is one store record (status, times, owner) plus a JSON *document* only this room reads and writes: the
creating call's arguments and capabilities, the step's state and round, the outstanding input requests and the
answers so far, the result or error, and the *lease* of the process running the step. Every change is a
compare-and-swap on the record's version (:meth:`DurableStore.replace_task`), retried a bounded number of times, so
several processes sharing one store serve one task interchangeably:

* ``tools/call`` of a task tool whose handler answers ``StartTask``: the record is inserted (status ``working``,
  leased to this process) and committed before the ``CreateTaskResult`` is answered; the step then runs here.
* Steps run in the manager's :class:`~._task_steps.StepDriver`: a running step holds a lease, renewed while it
  runs; any process that reads a ``working`` task whose lease ran out runs the step again (bounded attempts per
  round); a process that closes gives its leases back, so a restarted one picks the task up at once.
* ``tasks/update`` stores the answers to outstanding keys; the request that answers the last one makes the task
  ``working`` again, leased to its own process, which runs the next round.
* ``tasks/cancel`` makes a non-terminal task ``cancelled`` at once; a step finishing later cannot overwrite it
  (its write is a compare-and-swap on a version that moved on).
* A served manager (:meth:`TaskManager.start`, called at the server's start; :meth:`TaskManager.close` stops it)
  has its driver look every :data:`ORPHAN_SWEEP_SECONDS` through at most :data:`ORPHAN_SWEEP_BATCH` ``working``
  tasks and run the steps whose lease ran out (their process died), so an orphan runs again without waiting for a
  poll; and it deletes the expired tasks every :data:`PURGE_INTERVAL_SECONDS`, so finished tasks go at their
  ``ttlMs``.
* A partition holds at most :data:`MAX_STORED_TASKS_PER_PARTITION` tasks and
  :data:`MAX_STORED_TASK_BYTES_PER_PARTITION` bytes of task documents in the store (expired ones not counted); a
  creation past either is refused (-32603 ``Too many stored tasks``), so one client cannot fill the store for others.

Unknown, expired and other callers' tasks (partition and subject must both match) all get the same ``-32602``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Final

from soklet_core.json import JsonObject, JsonString, JsonValue
from soklet_core.json.limits import INLINE_BODY_BYTES
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.client_results import matches_input_response
from soklet_core.mcp.model.input_responses import InputResponses
from soklet_core.mcp.model.registry import Registry, ToolRegistration
from soklet_core.mcp.model.results import CallToolResult
from soklet_core.mcp.model.tasks import StartTask, TaskContext, TaskFailed
from soklet_core.mcp.server.admission import Admission
from soklet_core.mcp.server.durable._handles import DEFAULT_PURGE_EVERY
from soklet_core.mcp.server.durable._task_documents import (
    STEP_UNFINISHED_MESSAGE,
    UNRECOGNISED_HOLDER,
    TaskDocument,
    TaskRun,
    detailed_task,
    document_text,
    encode_task,
    log_name,
    read_document,
    task_expired,
    task_run,
)
from soklet_core.mcp.server.durable._task_errors import TaskError, TaskErrorReason
from soklet_core.mcp.server.durable._task_spans import task_span
from soklet_core.mcp.server.durable._task_steps import (
    CAS_TRIES,
    DEFAULT_STEP_TIMEOUT_SECONDS,
    LEASE_RENEW_SECONDS,
    LEASE_SECONDS,
    MAX_STEP_ATTEMPTS,
    ORPHAN_SWEEP_BATCH,
    StepDriver,
    call_step,
)
from soklet_core.mcp.server.options import (
    DEFAULT_POLL_INTERVAL_MS,
    DEFAULT_TASK_TTL_MS,
    MAX_STORED_TASK_BYTES_PER_PARTITION,
    MAX_STORED_TASKS_PER_PARTITION,
    TaskOptions,
)
from soklet_core.protection.diagnosis import iso_time
from soklet_core.store import MAX_KEY_CHARS, DurableStore, StoreError, StoreErrorReason, TaskRecord, TaskStatus

__all__ = [
    "DEFAULT_POLL_INTERVAL_MS",
    "DEFAULT_STEP_TIMEOUT_SECONDS",
    "DEFAULT_TASK_TTL_MS",
    "LEASE_RENEW_SECONDS",
    "LEASE_SECONDS",
    "MAX_LIVE_TASKS",
    "MAX_LIVE_TASKS_PER_CALLER",
    "MAX_STEP_ATTEMPTS",
    "MAX_STORED_TASKS_PER_PARTITION",
    "MAX_STORED_TASK_BYTES_PER_PARTITION",
    "ORPHAN_SWEEP_BATCH",
    "ORPHAN_SWEEP_SECONDS",
    "PURGE_INTERVAL_SECONDS",
    "STEP_UNFINISHED_MESSAGE",
    "UNRECOGNISED_HOLDER",
    "TaskError",
    "TaskErrorReason",
    "TaskManager",
    "TaskRun",
    "detailed_task",
    "iso_time",
    "new_task_id",
    "task_run",
]

_logger = logging.getLogger("soklet.mcp.tasks")

_DEFAULT_OPTIONS: Final = TaskOptions()

#: Non-terminal tasks one caller (partition and subject) may have created through one process.
MAX_LIVE_TASKS_PER_CALLER: Final = 256
#: Non-terminal tasks one process tracks for all callers together (the bound of the per-caller accounting).
MAX_LIVE_TASKS: Final = 65_536
#: How often a served manager looks for orphaned steps (``working`` tasks whose lease ran out) and runs them.
ORPHAN_SWEEP_SECONDS: Final = 5.0
#: How often a served manager deletes the store's expired tasks on its own.
PURGE_INTERVAL_SECONDS: Final = 60.0


def new_task_id() -> str:
    """A fresh task id: 32 bytes of the OS CSPRNG as base64url, never beginning with ``-``.

    Task ids are typed on command lines (``soklet tasks show ID``), where one beginning with ``-`` reads as an
    option: such a draw (1 in 64) is drawn again, which leaves 255.9 bits of the 256."""
    while True:
        task_id = secrets.token_urlsafe(32)
        if not task_id.startswith("-"):
            return task_id


def _now() -> datetime:
    return datetime.now(UTC)


class TaskManager:
    """Durable tasks over ``store`` for the task tools of ``registry``.

    ``options`` (:class:`~soklet_core.mcp.server.TaskOptions`): its ``ttl_ms`` (default one hour; ``None``:
    unlimited) and ``poll_interval_ms`` (default 500) are what every new task says, its ``max_per_partition`` and
    ``max_bytes_per_partition`` bound what one partition keeps in the store; ``step_timeout_seconds`` bounds one
    step run (default 10 minutes); ``lease_seconds`` is how long a dead process's step waits before another
    process re-runs it (default 10 s); ``purge_every`` is how many tasks it creates between two deletions of the
    store's expired tasks (:meth:`purge_expired`);
    ``sweep_seconds`` and ``purge_seconds`` are the intervals of the background work :meth:`start` runs. The store
    is opened on first use; :meth:`close` stops the background work and the local steps and gives their leases
    back (it does not close the store: its owner does).
    """

    def __init__(
        self,
        store: DurableStore,
        *,
        registry: Registry,
        options: TaskOptions = _DEFAULT_OPTIONS,
        step_timeout_seconds: float = DEFAULT_STEP_TIMEOUT_SECONDS,
        lease_seconds: float = LEASE_SECONDS,
        purge_every: int = DEFAULT_PURGE_EVERY,
        sweep_seconds: float = ORPHAN_SWEEP_SECONDS,
        purge_seconds: float = PURGE_INTERVAL_SECONDS,
    ) -> None:
        if not isinstance(registry, Registry):
            raise TypeError("registry must be a Registry")
        if not isinstance(options, TaskOptions):
            raise TypeError("options must be a TaskOptions")
        intervals = (
            ("step_timeout_seconds", step_timeout_seconds),
            ("lease_seconds", lease_seconds),
            ("sweep_seconds", sweep_seconds),
            ("purge_seconds", purge_seconds),
        )
        for name, seconds in intervals:
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= 86_400:
                raise ValueError(f"{name} must be between 0 and 86400 seconds")
        if isinstance(purge_every, bool) or not isinstance(purge_every, int) or purge_every < 1:
            raise ValueError("purge_every must be an integer of at least 1")
        self._purge_every = purge_every
        self._quota = options.quota()
        self._sweep_seconds = float(sweep_seconds)
        self._purge_seconds = float(purge_seconds)
        self._maintenance: asyncio.Task[None] | None = None
        self._store = store
        self._registry = registry
        self._ttl_ms = options.ttl_ms
        self._poll_ms = options.poll_interval_ms
        self._live: dict[tuple[str, str | None], set[str]] = {}
        self._steps = StepDriver(
            store,
            registry,
            step_timeout_seconds=step_timeout_seconds,
            lease_seconds=lease_seconds,
            forget=self._forget,
        )
        self._open_lock: asyncio.Lock | None = None
        self._opened = False
        self._created = 0

    @property
    def store(self) -> DurableStore:
        """The store the tasks live in."""
        return self._store

    @property
    def ttl_ms(self) -> int | None:
        """The ``ttlMs`` of new tasks (``None``: unlimited)."""
        return self._ttl_ms

    @property
    def poll_interval_ms(self) -> int:
        """The ``pollIntervalMs`` of new tasks."""
        return self._poll_ms

    async def open(self) -> None:
        """Open the store (once; concurrent callers wait for the same opening)."""
        if self._opened:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if not self._opened:
                await self._store.open()
                self._opened = True

    def start(self) -> None:
        """Start the background work on the running event loop (idempotent): every ``sweep_seconds``, run the
        orphaned steps (:data:`ORPHAN_SWEEP_BATCH` ``working`` tasks read per sweep); every ``purge_seconds``,
        delete the expired tasks. The server's start calls it; :meth:`close` stops it. A manager that is never
        started (an operator command's) never runs a step on its own."""
        if self._maintenance is not None and not self._maintenance.done():
            return
        self._maintenance = asyncio.get_running_loop().create_task(self._maintain(), name="soklet-task-maintenance")

    async def close(self) -> None:
        """Stop the background work and every step running here and give its lease back, so another process (or
        this one restarted) runs it again at once. Idempotent; the server's shutdown calls it (the store stays
        open: its owner closes it). Served again, the manager starts steps again."""
        async with self._steps.closing():
            maintenance, self._maintenance = self._maintenance, None
            if maintenance is not None:
                maintenance.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await maintenance

    async def _maintain(self) -> None:
        """The background work: sweep for orphans each interval, purge the expired tasks every purge interval.
        A failing store is logged and tried again at the next interval."""
        loop = asyncio.get_running_loop()
        # The first purge one interval after the start: a task that expired as a client looked at it is told
        # "expired" to its owner a while before it is gone.
        next_purge = loop.time() + self._purge_seconds
        while True:
            try:
                await self.open()
                await self.sweep_orphans()
                if loop.time() >= next_purge:
                    next_purge = loop.time() + self._purge_seconds
                    purged = await self.purge_expired()
                    if purged:
                        _logger.info("purged %d expired task%s", purged, "" if purged == 1 else "s")
            except asyncio.CancelledError:
                raise
            except StoreError as error:
                _logger.warning("task maintenance: store failed (%s); trying again", error.reason.value)
            except Exception as error:  # never let the background work die of one bad record
                _logger.error("task maintenance failed: %s", type(error).__name__)
            await asyncio.sleep(self._sweep_seconds)

    async def sweep_orphans(self) -> int:
        """Read the next :data:`ORPHAN_SWEEP_BATCH` ``working`` tasks (from where the last sweep stopped) and start
        the step of each whose lease ran out and whose tool is served here; how many were started. A started step
        takes the lease first, so of several instances sweeping at once one runs it."""
        await self.open()
        return await self._steps.sweep_orphans()

    async def purge_expired(self) -> int:
        """Delete the store's expired tasks (past their ``ttlMs``; they already answer not-found); how many went.

        The manager does it on its own before every ``purge_every``-th task it creates (default
        :data:`~._handles.DEFAULT_PURGE_EVERY`, as a handle repository does for handles), so the table holds at most
        the live tasks plus those that expired since; ``soklet tasks purge-expired`` does it on demand.
        """
        await self.open()
        return await self._store.delete_expired_tasks(_now())

    async def figures(self) -> dict[str, int]:
        """Tasks in the store by status (``working``, ``input_required``, ...), for metrics."""
        await self.open()
        counts = await self._store.count_tasks()
        return {status.value: counts.get(status, 0) for status in TaskStatus}

    # ------------------------------------------------------------------------------------------------ creation

    async def create(
        self,
        *,
        tool: ToolRegistration,
        admission: Admission,
        arguments: JsonObject,
        capabilities: ClientCapabilities,
        start: StartTask,
    ) -> bytes:
        """Store a new ``working`` task for ``tool`` and start its step here; the encoded ``CreateTaskResult``
        (without ``_meta``), answered only once the record is committed. Raises :class:`TaskError` (``Too
        many tasks`` past :data:`MAX_LIVE_TASKS_PER_CALLER`, ``Too many stored tasks`` past the partition's quota) or
        :class:`StoreError`. One span, ``soklet.task.create``; the step's span is its child."""
        with task_span("create", tool.name) as traced:
            created = await self._create(tool, admission, arguments, capabilities, start)
            if traced is not None:
                traced.done("created")
            return created

    async def _create(
        self,
        tool: ToolRegistration,
        admission: Admission,
        arguments: JsonObject,
        capabilities: ClientCapabilities,
        start: StartTask,
    ) -> bytes:
        await self.open()
        caller = (admission.partition, admission.identity.subject)
        await self._admit_caller(caller)
        self._created += 1
        if self._created % self._purge_every == 0:  # before the insert: a failing purge stores nothing
            await self.purge_expired()
        now = _now()
        task_id = new_task_id()
        document = self._steps.leased(
            TaskDocument(
                arguments=arguments,
                capabilities=capabilities.to_wire(),
                ttl_ms=self._ttl_ms,
                poll_interval_ms=self._poll_ms,
                state=start.state,
            ),
            now,
        )
        try:
            record = TaskRecord(
                task_id=task_id,
                partition=admission.partition,
                subject=admission.identity.subject,
                tool=tool.name,
                status=TaskStatus.WORKING,
                status_message=start.status_message,
                created_at=now,
                updated_at=now,
                expires_at=None if self._ttl_ms is None else now + timedelta(milliseconds=self._ttl_ms),
                document=await document_text(document),
            )
        except StoreError as error:
            if error.reason is StoreErrorReason.TOO_LARGE:
                raise TaskError(TaskErrorReason.TOO_LARGE) from None
            raise
        try:
            await self._store.insert_task(record, quota=self._quota)
        except StoreError as error:
            if error.reason is StoreErrorReason.QUOTA:
                _logger.warning("task refused: the partition holds as many tasks or bytes as it may keep")
                raise TaskError(TaskErrorReason.STORED_QUOTA) from None
            raise
        self._live.setdefault(caller, set()).add(task_id)
        _logger.info("task %s created for %s", log_name(task_id), tool.name)
        self._steps.start(task_id)
        return encode_task(record, document, detailed=False)

    async def _admit_caller(self, caller: tuple[str, str | None]) -> None:
        tracked = self._live.get(caller)
        if tracked is not None and len(tracked) >= MAX_LIVE_TASKS_PER_CALLER:
            # Recount from the store: tasks that ended (here or elsewhere) leave the count.
            for task_id in list(tracked):
                record = await self._store.get_task(task_id)
                if record is None or record.status.terminal or task_expired(record, _now()):
                    tracked.discard(task_id)
        total = sum(len(ids) for ids in self._live.values())
        if (tracked is not None and len(tracked) >= MAX_LIVE_TASKS_PER_CALLER) or total >= MAX_LIVE_TASKS:
            raise TaskError(TaskErrorReason.LIVE_LIMIT)

    def _forget(self, record: TaskRecord) -> None:
        caller = (record.partition, record.subject)
        tracked = self._live.get(caller)
        if tracked is not None:
            tracked.discard(record.task_id)
            if not tracked:
                del self._live[caller]

    # ------------------------------------------------------------------------------------------------ inline

    async def run_inline(
        self,
        *,
        tool: ToolRegistration,
        admission: Admission,
        arguments: JsonObject,
        capabilities: ClientCapabilities,
        start: StartTask,
        cancelled: Callable[[], bool] | None = None,
    ) -> CallToolResult:
        """Run an OPTIONAL tool's step within the request (the client did not declare the extension): its
        ``CallToolResult``; ``TaskFailed`` becomes that JSON-RPC error, ``TaskInputRequired`` or an exception
        -32603. Nothing is stored. One span, ``soklet.task.run_inline``."""
        with task_span("run_inline", tool.name) as traced:
            result = await self._run_inline(tool, admission, arguments, capabilities, start, cancelled)
            if traced is not None:
                traced.done(TaskStatus.COMPLETED.value)
            return result

    async def _run_inline(
        self,
        tool: ToolRegistration,
        admission: Admission,
        arguments: JsonObject,
        capabilities: ClientCapabilities,
        start: StartTask,
        cancelled: Callable[[], bool] | None,
    ) -> CallToolResult:
        step = tool.task_step
        assert step is not None
        context = TaskContext(
            task_id=new_task_id(),
            tool=tool.name,
            identity=admission.identity,
            partition=admission.partition,
            arguments=arguments,
            state=start.state,
            client_capabilities=capabilities,
            cancel_check=cancelled if cancelled is not None else (lambda: False),
        )
        try:
            async with asyncio.timeout(self._steps.step_timeout):
                outcome = await call_step(step, context)
        except TimeoutError:
            raise TaskError(TaskErrorReason.STEP_UNFINISHED) from None
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the client gets one fixed message; the operator the exception type
            _logger.error("task step failed: %s", type(error).__name__)
            raise TaskError(TaskErrorReason.STEP_FAILED) from None
        if isinstance(outcome, CallToolResult):
            return outcome
        if isinstance(outcome, TaskFailed):
            raise TaskError(TaskErrorReason.TOOL_FAILED, outcome)
        _logger.error("a task step asked for input in a request without the tasks extension")
        raise TaskError(TaskErrorReason.INPUT_INLINE)

    # ------------------------------------------------------------------------------------------------ reads

    async def _owned(self, task_id: str, admission: Admission) -> TaskRecord:
        """The caller's live task ``task_id``, or the one not-found error."""
        if not 0 < len(task_id) <= MAX_KEY_CHARS:
            raise TaskError(TaskErrorReason.NOT_FOUND)  # longer than any id a store holds: never looked up
        await self.open()
        record = await self._store.get_task(task_id)
        if record is None or record.partition != admission.partition or record.subject != admission.identity.subject:
            raise TaskError(TaskErrorReason.NOT_FOUND)
        if task_expired(record, _now()):
            self._forget(record)
            # Only the owner learns that it expired; everyone else sees the one not-found answer.
            raise TaskError(TaskErrorReason.EXPIRED)
        return record

    async def get(self, task_id: str, admission: Admission) -> tuple[bytes, str]:
        """``tasks/get``: the encoded DetailedTask (``resultType: "complete"``, without ``_meta``) and the task's tool
        name (what the access log names the request by). A ``working`` task whose lease ran out has its step started
        here. Raises :class:`TaskError` (``NOT_FOUND``, ``EXPIRED``, ``DOCUMENT``). One span, ``soklet.task.get``,
        its outcome the task's status."""
        with task_span("get") as traced:
            record = await self._owned(task_id, admission)
            document = await read_document(record)
            self._steps.revive(record, document)  # its process died: run its step here
            if record.status.terminal:
                self._forget(record)
            if traced is not None:
                traced.done(record.status.value, record.tool)
            if len(record.document) <= INLINE_BODY_BYTES:
                return encode_task(record, document, detailed=True), record.tool
            # A large result is written out in a worker thread, as it was read.
            return await asyncio.to_thread(encode_task, record, document, detailed=True), record.tool

    # ------------------------------------------------------------------------------------------------ update

    async def update(
        self, task_id: str, admission: Admission, responses: InputResponses | Mapping[str, JsonValue]
    ) -> str:
        """``tasks/update``: store the answers to outstanding keys; responses under other keys (never issued,
        answered or superseded) are ignored unread. When every outstanding key is answered the task is ``working``
        again and its next round runs here. Idempotent; a terminal task is left as it is. The task's tool name;
        raises :class:`TaskError` (``NOT_FOUND``, ``EXPIRED``, ``INPUT_RESPONSES`` for an answer to an outstanding
        key outside the protocol union of the request that key asked, ``CONTENTION``). One span,
        ``soklet.task.update``."""
        with task_span("update") as traced:
            tool = await self._update(task_id, admission, responses)
            if traced is not None:
                traced.done("updated", tool)
            return tool

    async def _update(
        self, task_id: str, admission: Admission, responses: InputResponses | Mapping[str, JsonValue]
    ) -> str:
        given = responses.as_map() if isinstance(responses, InputResponses) else responses
        for _ in range(CAS_TRIES):
            record = await self._owned(task_id, admission)
            if record.status is not TaskStatus.INPUT_REQUIRED:
                return record.tool
            document = await read_document(record)
            pending = document.pending or JsonObject.empty_instance()
            answers = dict((document.answers or JsonObject.empty_instance()).items())
            fresh = False
            for key, value in given.items():
                request = pending.get(key)
                if not isinstance(request, JsonObject) or key in answers:
                    continue  # never issued, already answered or superseded: ignored
                method = request.get("method")
                if not isinstance(method, JsonString) or not matches_input_response(value, method.value):
                    raise TaskError(TaskErrorReason.INPUT_RESPONSES)
                answers[key] = value
                fresh = True
            if not fresh:
                return record.tool
            answered = JsonObject.from_mapping(answers)
            now = _now()
            if all(key in answers for key in pending):
                document = self._steps.leased(
                    replace(
                        document, pending=None, answers=None, responses=answered, round=document.round + 1, attempts=0
                    ),
                    now,
                )
                changed = replace(
                    record, status=TaskStatus.WORKING, updated_at=now, document=await document_text(document)
                )
            else:
                document = replace(document, answers=answered)
                changed = replace(record, document=await document_text(document))
            stored = await self._store.replace_task(changed, expected_version=record.version)
            if stored is None:
                continue  # another writer got there first: read again
            if stored.status is TaskStatus.WORKING:
                self._steps.start(task_id)
            return record.tool
        raise TaskError(TaskErrorReason.CONTENTION)

    # ------------------------------------------------------------------------------------------------ cancel

    async def cancel(self, task_id: str, admission: Admission) -> str:
        """``tasks/cancel``: a non-terminal task becomes ``cancelled`` at once and its step here is cancelled;
        a terminal one is left as it is (the same ack). The task's tool name; raises :class:`TaskError`. One span,
        ``soklet.task.cancel``."""
        with task_span("cancel") as traced:
            tool = await self._cancel(task_id, admission)
            if traced is not None:
                traced.done(TaskStatus.CANCELLED.value, tool)
            return tool

    async def _cancel(self, task_id: str, admission: Admission) -> str:
        for _ in range(CAS_TRIES):
            record = await self._owned(task_id, admission)
            if record.status.terminal:
                return record.tool
            document = replace(await read_document(record), lease=None, owner=None, pending=None, answers=None)
            now = _now()
            changed = replace(
                record,
                status=TaskStatus.CANCELLED,
                status_message="The task was cancelled.",
                updated_at=now,
                document=await document_text(document),
            )
            stored = await self._store.replace_task(changed, expected_version=record.version)
            if stored is None:
                continue
            self._forget(stored)
            self._steps.cancel(task_id)
            _logger.info("task %s cancelled", log_name(task_id))
            return record.tool
        raise TaskError(TaskErrorReason.CONTENTION)
