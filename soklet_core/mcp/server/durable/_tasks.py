"""``TaskManager``: the tasks extension's server half, over a :class:`~soklet_core.store.DurableStore`.

A task is one store record (status, times, owner) plus a JSON *document* this module alone reads and writes: the
creating call's arguments and capabilities, the step's state and round, the outstanding input requests and the
answers so far, the result or error, and the *lease* of the process running the step. Every change is a
compare-and-swap on the record's version (:meth:`DurableStore.replace_task`), retried a bounded number of times, so
several processes sharing one store serve one task interchangeably:

* ``tools/call`` of a task tool whose handler answers ``StartTask``: the record is inserted (status ``working``,
  leased to this process) and committed before the ``CreateTaskResult`` is answered; the step then runs here.
* A running step holds a lease (``lease`` in the document, :data:`LEASE_SECONDS`), renewed every
  :data:`LEASE_RENEW_SECONDS` while it runs. The renewer also notices a cancel or a lost lease and cancels the
  local step. Any process that reads a ``working`` task whose lease ran out runs the step again (at least once per
  round; after :data:`MAX_STEP_ATTEMPTS` attempts the task fails). A process that closes gives its leases back,
  so a restarted one picks the task up at once.
* ``tasks/update`` stores the answers to outstanding keys; the request that answers the last one makes the task
  ``working`` again, leased to its own process, which runs the next round.
* ``tasks/cancel`` makes a non-terminal task ``cancelled`` at once; a step finishing later cannot overwrite it
  (its write is a compare-and-swap on a version that moved on).
* A served manager (:meth:`TaskManager.start`, called at the server's start; :meth:`TaskManager.close` stops it)
  looks every :data:`ORPHAN_SWEEP_SECONDS` through at most :data:`ORPHAN_SWEEP_BATCH` ``working`` tasks and runs
  the steps whose lease ran out (their process died), so an orphan runs again without waiting for a poll; and it
  deletes the expired tasks every :data:`PURGE_INTERVAL_SECONDS`, so finished tasks go at their ``ttlMs``.
* A partition holds at most :data:`MAX_STORED_TASKS_PER_PARTITION` tasks and
  :data:`MAX_STORED_TASK_BYTES_PER_PARTITION` bytes of task documents in the store (expired ones not counted); a
  creation past either is refused (-32603 ``Too many stored tasks``), so one client cannot fill the store for others.

Unknown, expired and other callers' tasks (partition and subject must both match) all get the same ``-32602``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import logging
import os
import secrets
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Final

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.json import (
    JsonError,
    JsonObject,
    JsonString,
    JsonValue,
)
from soklet_core.json.limits import INLINE_BODY_BYTES
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.client_results import matches_input_response
from soklet_core.mcp.model.context import Identity
from soklet_core.mcp.model.errors import McpModelError
from soklet_core.mcp.model.input_responses import InputResponses
from soklet_core.mcp.model.registry import Registry, ToolRegistration
from soklet_core.mcp.model.results import CallToolResult
from soklet_core.mcp.model.tasks import StartTask, TaskContext, TaskFailed, TaskInputRequired, TaskStep
from soklet_core.mcp.server.admission import Admission
from soklet_core.mcp.server._jsonrpc import (
    RESPONSE_TOO_LARGE_MESSAGE,
    missing_capabilities,
)
from soklet_core.mcp.server.options import (
    DEFAULT_POLL_INTERVAL_MS,
    DEFAULT_TASK_TTL_MS,
    MAX_STORED_TASK_BYTES_PER_PARTITION,
    MAX_STORED_TASKS_PER_PARTITION,
    TaskOptions,
)
from soklet_core.mcp.server.durable._handles import DEFAULT_PURGE_EVERY
from soklet_core.mcp.server.durable._task_documents import (
    INTERNAL_FAILURE,
    STEP_UNFINISHED_ERROR,
    STEP_UNFINISHED_MESSAGE,
    TOO_LARGE_FAILURE,
    UNRECOGNISED_HOLDER,
    TaskDocument,
    TaskRun,
    detailed_task,
    encode_task,
    error_object,
    task_run,
)
from soklet_core.protection.diagnosis import iso_time
from soklet_core.store import (
    MAX_KEY_CHARS,
    DurableStore,
    StoreError,
    StoreErrorReason,
    TaskRecord,
    TaskStatus,
)
from soklet_core.store.records import to_millis

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
    "task_run",
]

_logger = logging.getLogger("soklet.mcp.tasks")

_DEFAULT_OPTIONS: Final = TaskOptions()

#: Non-terminal tasks one caller (partition and subject) may have created through one process.
MAX_LIVE_TASKS_PER_CALLER: Final = 256
#: Non-terminal tasks one process tracks for all callers together (the bound of the per-caller accounting).
MAX_LIVE_TASKS: Final = 65_536
#: The longest one step run may take before the task fails.
DEFAULT_STEP_TIMEOUT_SECONDS: Final = 600.0
#: How long a running step's lease lasts without renewal; another process re-runs the step after it.
LEASE_SECONDS: Final = 10.0
#: How often the process running a step renews its lease (and looks for a cancel made elsewhere).
LEASE_RENEW_SECONDS: Final = 3.0
#: Step runs one round may start (re-runs after a lost lease included) before the task fails.
MAX_STEP_ATTEMPTS: Final = 3
#: How often a served manager looks for orphaned steps (``working`` tasks whose lease ran out) and runs them.
ORPHAN_SWEEP_SECONDS: Final = 5.0
#: The most ``working`` tasks one sweep reads; the next sweep goes on from where it stopped.
ORPHAN_SWEEP_BATCH: Final = 64
#: How often a served manager deletes the store's expired tasks on its own.
PURGE_INTERVAL_SECONDS: Final = 60.0

# Compare-and-swap attempts of one change before it gives up (each lost race means another writer got through).
_CAS_TRIES: Final = 8
# The most characters of the host name a lease holder's name keeps.
_HOST_CHARS: Final = 64


def _holder_name() -> str:
    """A lease holder's name: host, process id and a random suffix (several managers may share a process), so an
    operator reading ``soklet tasks show`` knows where the step runs."""
    host = "".join(char for char in socket.gethostname()[:_HOST_CHARS] if char.isalnum() or char in "-.") or "host"
    return f"{host}/{os.getpid()}/{secrets.token_hex(4)}"


def _now() -> datetime:
    return datetime.now(UTC)


def _short(task_id: str) -> str:
    # Task ids are bearer secrets: the log names a task by a short digest only.
    return hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:12]


class TaskErrorReason(ErrorReason):
    """Why the task manager refused an operation (the engine maps each to its wire answer in one place)."""

    NOT_FOUND = "not-found", "no such task for this caller (unknown, purged, or another caller's)"
    EXPIRED = "expired", "the caller's task has outlived its ttlMs"
    INPUT_RESPONSES = "input-responses", "an answer is outside the protocol union of the request it answers"
    TOO_LARGE = "too-large", "the task's document is over the size one task may hold"
    STORED_QUOTA = "stored-quota", "the partition keeps as many tasks or task bytes as it may"
    LIVE_LIMIT = "live-limit", "the caller has as many unfinished tasks in this process as it may"
    STEP_UNFINISHED = "step-unfinished", "the task's step did not finish in time"
    STEP_FAILED = "step-failed", "the task's step raised an exception"
    TOOL_FAILED = "tool-failed", "the tool failed the task with a protocol error of its own"
    INPUT_INLINE = "input-inline", "a step run within the request asked for input"
    CONTENTION = "contention", "other writers kept changing the task"
    DOCUMENT = "document", "the stored task document cannot be read"


class TaskError(SokletError):
    """A task operation refused: ``reason`` says why; ``failure`` is the tool's own protocol error
    (:attr:`TaskErrorReason.TOOL_FAILED`). The wire answer of each is the engine's to give."""

    def __init__(self, reason: TaskErrorReason, failure: TaskFailed | None = None) -> None:
        super().__init__(reason)
        self.reason: TaskErrorReason = reason
        self.failure = failure


@dataclass(slots=True)
class _Running:
    """A task whose steps this process drives: its asyncio task, whether the task was cancelled, and whether
    another round was asked for while it ran (a ``tasks/update`` that answered the last key)."""

    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    again: bool = False


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
        self._sweep_after: str | None = None
        self._store = store
        self._registry = registry
        self._ttl_ms = options.ttl_ms
        self._poll_ms = options.poll_interval_ms
        self._step_timeout = float(step_timeout_seconds)
        self._lease = float(lease_seconds)
        self._renew = min(LEASE_RENEW_SECONDS, self._lease / 3)
        self._instance = _holder_name()
        self._running: dict[str, _Running] = {}
        self._live: dict[tuple[str, str | None], set[str]] = {}
        self._open_lock: asyncio.Lock | None = None
        self._opened = False
        self._closed = False
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
        self._closed = True
        try:
            maintenance, self._maintenance = self._maintenance, None
            if maintenance is not None:
                maintenance.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await maintenance
            await self._stop_steps()
        finally:
            self._closed = False

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
        takes the lease first (:meth:`_acquire`), so of several instances sweeping at once one runs it."""
        await self.open()
        page = await self._store.list_tasks(
            status=TaskStatus.WORKING, limit=ORPHAN_SWEEP_BATCH, after=self._sweep_after
        )
        self._sweep_after = page[-1].task_id if len(page) == ORPHAN_SWEEP_BATCH else None
        now = to_millis(_now())
        started = 0
        for record in page:
            if record.task_id in self._running or _expired(record, _now()):
                continue
            tool = self._registry.find_tool(record.tool)
            if tool is None or tool.task_step is None:
                continue  # another instance may serve it: never failed for want of a tool here
            try:
                document = await self._document(record)
            except TaskError:
                continue
            if document.lease is None or document.lease < now:
                _logger.info("task %s: its lease ran out; running its step", _short(record.task_id))
                self._start(record.task_id)
                started += 1
        return started

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
        :class:`StoreError`."""
        await self.open()
        caller = (admission.partition, admission.identity.subject)
        await self._admit_caller(caller)
        self._created += 1
        if self._created % self._purge_every == 0:  # before the insert: a failing purge stores nothing
            await self.purge_expired()
        now = _now()
        task_id = secrets.token_urlsafe(32)
        document = TaskDocument(
            arguments=arguments,
            capabilities=capabilities.to_wire(),
            ttl_ms=self._ttl_ms,
            poll_interval_ms=self._poll_ms,
            state=start.state,
            lease=to_millis(now) + int(self._lease * 1000),
            owner=self._instance,
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
                document=await self._text(document),
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
        _logger.info("task %s created for %s", _short(task_id), tool.name)
        self._start(task_id)
        return encode_task(record, document, detailed=False)

    async def _admit_caller(self, caller: tuple[str, str | None]) -> None:
        tracked = self._live.get(caller)
        if tracked is not None and len(tracked) >= MAX_LIVE_TASKS_PER_CALLER:
            # Recount from the store: tasks that ended (here or elsewhere) leave the count.
            for task_id in list(tracked):
                record = await self._store.get_task(task_id)
                if record is None or record.status.terminal or _expired(record, _now()):
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
        -32603. Nothing is stored."""
        step = tool.task_step
        assert step is not None
        context = TaskContext(
            task_id=secrets.token_urlsafe(32),
            tool=tool.name,
            identity=admission.identity,
            partition=admission.partition,
            arguments=arguments,
            state=start.state,
            client_capabilities=capabilities,
            cancel_check=cancelled if cancelled is not None else (lambda: False),
        )
        try:
            async with asyncio.timeout(self._step_timeout):
                outcome = await _call_step(step, context)
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
        if _expired(record, _now()):
            self._forget(record)
            # Only the owner learns that it expired; everyone else sees the one not-found answer.
            raise TaskError(TaskErrorReason.EXPIRED)
        return record

    async def get(self, task_id: str, admission: Admission) -> tuple[bytes, str]:
        """``tasks/get``: the encoded DetailedTask (``resultType: "complete"``, without ``_meta``) and the task's tool
        name (what the access log names the request by). A ``working`` task whose lease ran out has its step started
        here. Raises :class:`TaskError` (``NOT_FOUND``, ``EXPIRED``, ``DOCUMENT``)."""
        record = await self._owned(task_id, admission)
        document = await self._document(record)
        lease_over = document.lease is None or document.lease < to_millis(_now())
        if record.status is TaskStatus.WORKING and task_id not in self._running and lease_over:
            self._start(task_id)
        if record.status.terminal:
            self._forget(record)
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
        key outside the protocol union of the request that key asked, ``CONTENTION``)."""
        given = responses.as_map() if isinstance(responses, InputResponses) else responses
        for _ in range(_CAS_TRIES):
            record = await self._owned(task_id, admission)
            if record.status is not TaskStatus.INPUT_REQUIRED:
                return record.tool
            document = await self._document(record)
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
                document = replace(
                    document,
                    pending=None,
                    answers=None,
                    responses=answered,
                    round=document.round + 1,
                    lease=to_millis(now) + int(self._lease * 1000),
                    owner=self._instance,
                    attempts=0,
                )
                changed = replace(
                    record, status=TaskStatus.WORKING, updated_at=now, document=await self._text(document)
                )
            else:
                document = replace(document, answers=answered)
                changed = replace(record, document=await self._text(document))
            stored = await self._store.replace_task(changed, expected_version=record.version)
            if stored is None:
                continue  # another writer got there first: read again
            if stored.status is TaskStatus.WORKING:
                self._start(task_id)
            return record.tool
        raise TaskError(TaskErrorReason.CONTENTION)

    # ------------------------------------------------------------------------------------------------ cancel

    async def cancel(self, task_id: str, admission: Admission) -> str:
        """``tasks/cancel``: a non-terminal task becomes ``cancelled`` at once and its step here is cancelled;
        a terminal one is left as it is (the same ack). The task's tool name; raises :class:`TaskError`."""
        for _ in range(_CAS_TRIES):
            record = await self._owned(task_id, admission)
            if record.status.terminal:
                return record.tool
            document = replace(await self._document(record), lease=None, owner=None, pending=None, answers=None)
            now = _now()
            changed = replace(
                record,
                status=TaskStatus.CANCELLED,
                status_message="The task was cancelled.",
                updated_at=now,
                document=await self._text(document),
            )
            stored = await self._store.replace_task(changed, expected_version=record.version)
            if stored is None:
                continue
            self._forget(stored)
            entry = self._running.get(task_id)
            if entry is not None:
                entry.cancelled = True
                if entry.task is not None:
                    entry.task.cancel()
            _logger.info("task %s cancelled", _short(task_id))
            return record.tool
        raise TaskError(TaskErrorReason.CONTENTION)

    # ------------------------------------------------------------------------------------------------ steps

    def _start(self, task_id: str) -> None:
        if self._closed:
            return
        entry = self._running.get(task_id)
        if entry is not None:
            entry.again = True  # the driver looks again before it stops (no await between its look and its exit)
            return
        entry = _Running()
        self._running[task_id] = entry
        entry.task = asyncio.get_running_loop().create_task(self._drive(task_id, entry), name="soklet-task-step")

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
            _logger.warning("task %s: store failed (%s); the step will be re-run", _short(task_id), error.reason.value)
        except Exception as error:
            _logger.error("task %s: step driver failed: %s", _short(task_id), type(error).__name__)
        finally:
            if self._running.get(task_id) is entry:
                del self._running[task_id]

    async def _acquire(self, task_id: str) -> tuple[TaskRecord, TaskDocument] | None:
        """Take the lease of a ``working`` task (free, expired or already ours); ``None`` when it is not ours to
        run. Counts the attempt; past :data:`MAX_STEP_ATTEMPTS` the task fails instead."""
        for _ in range(_CAS_TRIES):
            record = await self._store.get_task(task_id)
            if record is None or record.status is not TaskStatus.WORKING:
                return None
            document = await self._document(record)
            now = to_millis(_now())
            if document.lease is not None and document.lease >= now and document.owner != self._instance:
                return None
            attempts = document.attempts + 1
            if attempts > MAX_STEP_ATTEMPTS:
                _logger.error("task %s: the step did not finish in %d attempts", _short(task_id), MAX_STEP_ATTEMPTS)
                await self._finish(record, document, TaskStatus.FAILED, error=STEP_UNFINISHED_ERROR)
                return None
            document = replace(document, lease=now + int(self._lease * 1000), owner=self._instance, attempts=attempts)
            stored = await self._store.replace_task(
                replace(record, document=await self._text(document)), expected_version=record.version
            )
            if stored is not None:
                return stored, document
        return None

    async def _drive_round(self, task_id: str, entry: _Running) -> None:
        acquired = await self._acquire(task_id)
        if acquired is None:
            return
        record, document = acquired
        tool = self._registry.find_tool(record.tool)
        if tool is None or tool.task_step is None:
            _logger.error("task %s: its tool is not served here", _short(task_id))
            await self._finish(record, document, TaskStatus.FAILED, error=INTERNAL_FAILURE)
            return
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
        step = asyncio.get_running_loop().create_task(_call_step(tool.task_step, context))
        renewer = asyncio.get_running_loop().create_task(self._renew_lease(task_id, step, entry))
        try:
            try:
                async with asyncio.timeout(self._step_timeout):
                    outcome: object = await asyncio.shield(step)
            except TimeoutError:
                step.cancel()
                _logger.error("task %s: the step ran over %.0f s", _short(task_id), self._step_timeout)
                outcome = TimeoutError()
            except asyncio.CancelledError:
                step.cancel()
                raise
            except Exception as error:  # the client gets one fixed error; the operator the exception type
                _logger.error("task %s: step failed: %s", _short(task_id), type(error).__name__)
                outcome = error
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await renewer
        await self._settle(task_id, tool, outcome)

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
                document = await self._document(record)
                if document.owner != self._instance:
                    step.cancel()  # another process took the step over: its run is the one that counts
                    return
                document = replace(document, lease=to_millis(_now()) + int(self._lease * 1000))
                await self._store.replace_task(
                    replace(record, document=await self._text(document)), expected_version=record.version
                )
            except StoreError as error:
                _logger.warning("task %s: lease not renewed (%s)", _short(task_id), error.reason.value)

    async def _settle(self, task_id: str, tool: ToolRegistration, outcome: object) -> None:
        """Write the step's outcome, unless the task moved on meanwhile (cancelled, or taken over)."""
        for _ in range(_CAS_TRIES):
            record = await self._store.get_task(task_id)
            if record is None or record.status is not TaskStatus.WORKING:
                return  # cancelled (or purged) meanwhile: the outcome is dropped
            document = await self._document(record)
            if document.owner != self._instance:
                return
            written = await self._write_outcome(record, document, tool, outcome)
            if written:
                return

    async def _write_outcome(
        self, record: TaskRecord, document: TaskDocument, tool: ToolRegistration, outcome: object
    ) -> bool:
        if isinstance(outcome, CallToolResult):
            result = outcome.to_wire()
            return await self._finish(record, document, TaskStatus.COMPLETED, result=result)
        if isinstance(outcome, TaskFailed):
            error = error_object(outcome.code, outcome.message, outcome.data)
            return await self._finish(record, document, TaskStatus.FAILED, error=error, message=outcome.message)
        if isinstance(outcome, TaskInputRequired):
            return await self._ask(record, document, tool, outcome)
        if isinstance(outcome, TimeoutError):
            return await self._finish(record, document, TaskStatus.FAILED, error=STEP_UNFINISHED_ERROR)
        if not isinstance(outcome, Exception):
            _logger.error("task %s: the step answered a %s", _short(record.task_id), type(outcome).__name__)
        return await self._finish(record, document, TaskStatus.FAILED, error=INTERNAL_FAILURE)

    async def _ask(
        self, record: TaskRecord, document: TaskDocument, tool: ToolRegistration, outcome: TaskInputRequired
    ) -> bool:
        """Wait ``input_required`` for the step's requests, after the checks an MRTR emission gets."""
        if any(key in document.issued for key in outcome.input_requests):
            _logger.error("task %s: the step re-used an input request key", _short(record.task_id))
            return await self._finish(record, document, TaskStatus.FAILED, error=INTERNAL_FAILURE)
        try:
            tool.check_emission(outcome.as_input_required_result())
        except McpModelError as refused:
            _logger.error("task step emitted an undeclared input request: %s", refused.reason.value)
            return await self._finish(record, document, TaskStatus.FAILED, error=INTERNAL_FAILURE)
        missing = ClientCapabilities.from_json(document.capabilities).missing(outcome.required_capabilities)
        if missing is not None:
            refusal = missing_capabilities(missing.to_wire())
            error = error_object(refusal.code, refusal.message, refusal.data)
            return await self._finish(record, document, TaskStatus.FAILED, error=error, message=refusal.message)
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
            record, changed_document, TaskStatus.INPUT_REQUIRED, outcome.status_message or record.status_message
        )

    async def _finish(
        self,
        record: TaskRecord,
        document: TaskDocument,
        status: TaskStatus,
        *,
        result: JsonObject | None = None,
        error: JsonObject | None = None,
        message: str | None = None,
    ) -> bool:
        changed = replace(document, result=result, error=error, lease=None, owner=None, pending=None, answers=None)
        if message is None and error is not None:
            # A failed task SHOULD say why in statusMessage: its error's (client-safe) message.
            text = error.get("message")
            message = text.value if isinstance(text, JsonString) else None
        try:
            return await self._write(record, changed, status, message)
        except StoreError as failure:
            if failure.reason is not StoreErrorReason.TOO_LARGE or status is not TaskStatus.COMPLETED:
                raise
            _logger.error("task %s: result over the task document limit", _short(record.task_id))
            changed = replace(changed, result=None, error=TOO_LARGE_FAILURE)
            return await self._write(record, changed, TaskStatus.FAILED, RESPONSE_TOO_LARGE_MESSAGE)

    async def _write(self, record: TaskRecord, document: TaskDocument, status: TaskStatus, message: str | None) -> bool:
        changed = replace(
            record, status=status, status_message=message, updated_at=_now(), document=await self._text(document)
        )
        stored = await self._store.replace_task(changed, expected_version=record.version)
        if stored is not None and stored.status.terminal:
            self._forget(stored)
        return stored is not None

    async def _release(self, task_id: str) -> None:
        """Give back this process's lease of a ``working`` task (at close), so it is re-run without waiting."""
        for _ in range(_CAS_TRIES):
            record = await self._store.get_task(task_id)
            if record is None or record.status is not TaskStatus.WORKING:
                return
            document = await self._document(record)
            if document.owner != self._instance:
                return
            document = replace(document, lease=None, owner=None, attempts=max(0, document.attempts - 1))
            stored = await self._store.replace_task(
                replace(record, document=await self._text(document)), expected_version=record.version
            )
            if stored is not None:
                return

    # ------------------------------------------------------------------------------------------------ documents

    async def _document(self, record: TaskRecord) -> TaskDocument:
        text = record.document
        try:
            if len(text) <= INLINE_BODY_BYTES:
                return TaskDocument.from_text(text)
            return await asyncio.to_thread(TaskDocument.from_text, text)
        except (JsonError, ValueError):
            _logger.error("task %s: its document does not read", _short(record.task_id))
            raise TaskError(TaskErrorReason.DOCUMENT) from None

    async def _text(self, document: TaskDocument) -> str:
        # The members that grow with input (arguments, state, answers, result) are only known in size once
        # written: every document is encoded in a worker thread, so none is written out on the event loop.
        return await asyncio.to_thread(document.to_text)


def _expired(record: TaskRecord, now: datetime) -> bool:
    return record.expires_at is not None and now >= record.expires_at


async def _call_step(step: TaskStep, context: TaskContext) -> object:
    """Run a step: an ``async`` one on the event loop, a ``def`` one in a worker thread (steps are long)."""
    if inspect.iscoroutinefunction(step):
        return await step(context)
    result = await asyncio.to_thread(step, context)
    if inspect.isawaitable(result):
        return await result
    return result
