"""What the stores keep: task records and durable application handles, their limits, and the one time conversion.

Every time is a timezone-aware UTC ``datetime`` truncated to milliseconds; both backends store it as integer
milliseconds since the epoch (:func:`to_millis` and :func:`from_millis` are the only conversions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Final

from .errors import StoreError, StoreErrorReason

__all__ = [
    "MAX_HANDLE_STATE_BYTES",
    "MAX_KEY_CHARS",
    "MAX_LIST_LIMIT",
    "MAX_QUOTA_VALUE",
    "MAX_STATUS_MESSAGE_CHARS",
    "MAX_TASK_DOCUMENT_BYTES",
    "STORE_TIMEOUT_SECONDS",
    "HandleBinding",
    "HandleRecord",
    "TaskQuota",
    "TaskRecord",
    "TaskStatus",
    "check_json_text",
    "from_millis",
    "stored_int",
    "to_millis",
    "utc_moment",
]

#: The largest task document (UTF-8 bytes of its JSON text) a store keeps.
MAX_TASK_DOCUMENT_BYTES: Final = 1024 * 1024
#: The largest handle state (UTF-8 bytes of its JSON text) a store keeps.
MAX_HANDLE_STATE_BYTES: Final = 64 * 1024
#: The most records one ``list_tasks`` call returns.
MAX_LIST_LIMIT: Final = 1000
#: The largest count or byte total a :class:`TaskQuota` may name (so a sum of two stays a 64-bit integer).
MAX_QUOTA_VALUE: Final = 2**62
#: The bound of every store call: connecting, waiting for a lock, one statement.
STORE_TIMEOUT_SECONDS: Final = 5.0
#: The longest id, handle, tool name, subject, tenant, partition or operation a record holds.
MAX_KEY_CHARS: Final = 256
#: The longest task status message a record holds.
MAX_STATUS_MESSAGE_CHARS: Final = 4096

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND: Final = timedelta(milliseconds=1)


def _invalid(name: str) -> StoreError:
    return StoreError(StoreErrorReason.INVALID_ARGUMENT, name)


def to_millis(moment: datetime) -> int:
    """``moment`` (timezone-aware) as integer milliseconds since the epoch, the form both backends store."""
    # utcoffset() is None for a naive datetime (no tzinfo) and for a tzinfo that gives no offset.
    if not isinstance(moment, datetime) or moment.utcoffset() is None:
        raise _invalid("a time must be a timezone-aware datetime")
    return (moment - _EPOCH) // _MILLISECOND


def from_millis(millis: int) -> datetime:
    """The UTC ``datetime`` of integer milliseconds since the epoch."""
    return _EPOCH + timedelta(milliseconds=millis)


def utc_moment(value: datetime, name: str) -> datetime:
    """``value`` in UTC, truncated to milliseconds (what a round trip through a store gives back); refused
    (``StoreError(INVALID_ARGUMENT)`` naming ``name``) unless it is a timezone-aware datetime."""
    if type(value) is datetime and value.tzinfo is UTC and not value.microsecond % 1000:
        return value  # already in that form (the common case: a time a store or a repository truncated)
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise _invalid(f"{name} must be a timezone-aware datetime")
    return from_millis(to_millis(value))


def _key(value: object, name: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_CHARS:
        raise _invalid(f"{name} must be 1 to {MAX_KEY_CHARS} characters")


def check_json_text(value: object, name: str, limit: int) -> None:
    """Refuse ``value`` unless it is non-empty text of at most ``limit`` UTF-8 bytes (``TOO_LARGE`` past it)."""
    if not isinstance(value, str) or not value:
        raise _invalid(f"{name} must be non-empty JSON text")
    # A character is 1 to 4 UTF-8 bytes: encode only when the length alone cannot decide.
    if len(value) > limit or (len(value) * 4 > limit and len(value.encode("utf-8", "surrogatepass")) > limit):
        raise StoreError(StoreErrorReason.TOO_LARGE, f"{name} is over {limit} bytes")


class TaskStatus(StrEnum):
    """A task's status, as the tasks extension names it."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """Whether the task is finished (completed, failed or cancelled) and never changes status again."""
        return self in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task as a store keeps it. ``document`` is JSON text the task manager owns (opaque to the store);
    ``version`` is the compare-and-swap counter the store bumps on every replace. The task id stays out of the
    repr: a client may hold it as a bearer handle, and a repr can reach a log."""

    task_id: str = field(repr=False)
    partition: str
    subject: str | None
    tool: str
    status: TaskStatus
    status_message: str | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    document: str = field(repr=False)
    version: int = 0

    def __post_init__(self) -> None:
        _key(self.task_id, "task_id")
        _key(self.partition, "partition")
        _key(self.subject, "subject", optional=True)
        _key(self.tool, "tool")
        if not isinstance(self.status, TaskStatus):
            raise _invalid("status must be a TaskStatus")
        if self.status_message is not None and (
            not isinstance(self.status_message, str) or len(self.status_message) > MAX_STATUS_MESSAGE_CHARS
        ):
            raise _invalid(f"status_message must be at most {MAX_STATUS_MESSAGE_CHARS} characters")
        object.__setattr__(self, "created_at", utc_moment(self.created_at, "created_at"))
        object.__setattr__(self, "updated_at", utc_moment(self.updated_at, "updated_at"))
        if self.expires_at is not None:
            object.__setattr__(self, "expires_at", utc_moment(self.expires_at, "expires_at"))
        check_json_text(self.document, "document", MAX_TASK_DOCUMENT_BYTES)
        if isinstance(self.version, bool) or not isinstance(self.version, int) or not 0 <= self.version < 2**62:
            raise _invalid("version must be a non-negative integer")


@dataclass(frozen=True, slots=True)
class TaskQuota:
    """What one partition may hold in a store: at most ``max_tasks`` tasks that have not expired, and at most
    ``max_bytes`` bytes of their documents (the new task's included). An insert past either is refused with
    ``StoreError(QUOTA)``, so one partition cannot fill a store that others share."""

    max_tasks: int
    max_bytes: int

    def __post_init__(self) -> None:
        for name, value in (("max_tasks", self.max_tasks), ("max_bytes", self.max_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_QUOTA_VALUE:
                raise _invalid(f"{name} must be a positive integer")

    def admits(self, count: int, size: int, document: str) -> bool:
        """Whether a partition holding ``count`` tasks of ``size`` document bytes may store ``document`` too."""
        return count + 1 <= self.max_tasks and size + len(document.encode("utf-8", "surrogatepass")) <= self.max_bytes


@dataclass(frozen=True, slots=True)
class HandleBinding:
    """Whose a durable handle is: tenant, principal (``None`` for an anonymous caller), authorization partition and
    operation. A handle is live only for the exact same binding."""

    tenant: str
    principal: str | None
    partition: str
    operation: str

    def __post_init__(self) -> None:
        _key(self.tenant, "tenant")
        _key(self.principal, "principal", optional=True)
        _key(self.partition, "partition")
        _key(self.operation, "operation")


@dataclass(frozen=True, slots=True)
class HandleRecord:
    """One durable application handle: the opaque handle (secret: never shown), its binding, its JSON state and
    its expiry."""

    handle: str = field(repr=False)
    binding: HandleBinding
    state: str = field(repr=False)
    created_at: datetime
    expires_at: datetime

    def __post_init__(self) -> None:
        _key(self.handle, "handle")
        if not isinstance(self.binding, HandleBinding):
            raise _invalid("binding must be a HandleBinding")
        check_json_text(self.state, "state", MAX_HANDLE_STATE_BYTES)
        object.__setattr__(self, "created_at", utc_moment(self.created_at, "created_at"))
        object.__setattr__(self, "expires_at", utc_moment(self.expires_at, "expires_at"))


#: The schema version both backends write into ``soklet_schema``; a store refuses a newer one.
SCHEMA_VERSION: Final = 1
#: The task table's columns, in the order :func:`task_values` and :func:`task_from_row` use.
TASK_COLUMNS: Final = (
    "task_id",
    "partition",
    "subject",
    "tool",
    "status",
    "status_message",
    "created_at",
    "updated_at",
    "expires_at",
    "document",
    "version",
)
#: The handle table's columns, in the order :func:`handle_values` and :func:`handle_from_row` use.
HANDLE_COLUMNS: Final = (
    "handle",
    "tenant",
    "principal",
    "partition",
    "operation",
    "state",
    "created_at",
    "expires_at",
)

TaskRow = tuple[str, str, str | None, str, str, str | None, int, int, int | None, str, int]
HandleRow = tuple[str, str, str | None, str, str, str, int, int]


def task_values(record: TaskRecord) -> TaskRow:
    """``record`` as one row of :data:`TASK_COLUMNS`."""
    return (
        record.task_id,
        record.partition,
        record.subject,
        record.tool,
        record.status.value,
        record.status_message,
        to_millis(record.created_at),
        to_millis(record.updated_at),
        None if record.expires_at is None else to_millis(record.expires_at),
        record.document,
        record.version,
    )


def task_from_row(row: tuple[object, ...]) -> TaskRecord:
    """The record of one row of :data:`TASK_COLUMNS` read back from a store."""
    task_id, partition, subject, tool, status, message, created, updated, expires, document, version = row
    return TaskRecord(
        task_id=str(task_id),
        partition=str(partition),
        subject=None if subject is None else str(subject),
        tool=str(tool),
        status=TaskStatus(str(status)),
        status_message=None if message is None else str(message),
        created_at=from_millis(stored_int(created)),
        updated_at=from_millis(stored_int(updated)),
        expires_at=None if expires is None else from_millis(stored_int(expires)),
        document=str(document),
        version=stored_int(version),
    )


def handle_values(record: HandleRecord) -> HandleRow:
    """``record`` as one row of :data:`HANDLE_COLUMNS`."""
    binding = record.binding
    return (
        record.handle,
        binding.tenant,
        binding.principal,
        binding.partition,
        binding.operation,
        record.state,
        to_millis(record.created_at),
        to_millis(record.expires_at),
    )


def handle_from_row(row: tuple[object, ...]) -> HandleRecord:
    """The record of one row of :data:`HANDLE_COLUMNS` read back from a store."""
    handle, tenant, principal, partition, operation, state, created, expires = row
    return HandleRecord(
        handle=str(handle),
        binding=HandleBinding(
            tenant=str(tenant),
            principal=None if principal is None else str(principal),
            partition=str(partition),
            operation=str(operation),
        ),
        state=str(state),
        created_at=from_millis(stored_int(created)),
        expires_at=from_millis(stored_int(expires)),
    )


def stored_int(value: object) -> int:
    """``value`` read back from a store as an integer; ``StoreError(SCHEMA)`` for anything else."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise StoreError(StoreErrorReason.SCHEMA, "a stored number is not an integer")
    return value


def check_limit(limit: int) -> None:
    """Refuse a ``list_tasks`` limit outside 0 to :data:`MAX_LIST_LIMIT`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIST_LIMIT:
        raise _invalid(f"limit must be 0 to {MAX_LIST_LIMIT}")
