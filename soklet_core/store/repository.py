"""``DurableStore``: the one repository interface for tasks and durable handles that every backend implements."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from .records import HandleBinding, HandleRecord, TaskQuota, TaskRecord, TaskStatus
from .url import StoreUrl

__all__ = ["DurableStore"]


class DurableStore(Protocol):
    """Tasks and durable application handles kept where several processes (and restarts) see them.

    Every method is async, runs off the event loop and is bounded by ``STORE_TIMEOUT_SECONDS``; every failure is a
    ``StoreError``. A write has committed durably before its call returns.
    """

    url: StoreUrl

    @property
    def backend(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        ...

    async def open(self) -> None:
        """Connect (or start the pool) and create the schema if absent; idempotent and safe to run concurrently."""
        ...

    async def check(self) -> None:
        """Raise ``StoreError(UNAVAILABLE)`` unless the store answers now (what a readiness probe asks): a trivial
        query and, for SQLite, the file still being the one opened. Bounded like every call."""
        ...

    async def close(self) -> None:
        """Release every connection and worker; the store may not be used afterwards."""
        ...

    async def insert_task(self, record: TaskRecord, *, quota: TaskQuota | None = None) -> None:
        """Store a new task (committed before returning); ``StoreError(CONFLICT)`` when its id exists. With
        ``quota``, in the same transaction: ``StoreError(QUOTA)`` when the record's partition would hold more than
        it allows (tasks not expired at the record's ``created_at``)."""
        ...

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task ``task_id``, or ``None``."""
        ...

    async def replace_task(self, record: TaskRecord, *, expected_version: int) -> TaskRecord | None:
        """Compare-and-swap: write every mutable column of ``record`` iff the stored version is
        ``expected_version``; the stored record (version ``expected_version + 1``), or ``None`` when the version
        moved on or the row is gone."""
        ...

    async def list_tasks(
        self, *, status: TaskStatus | None = None, limit: int = 100, after: str | None = None
    ) -> list[TaskRecord]:
        """Up to ``limit`` (at most ``MAX_LIST_LIMIT``) tasks ordered by (created_at, task_id), optionally of one
        status, starting after the task ``after`` (a page's last id; a page after a task that is gone is empty)."""
        ...

    async def count_tasks(self) -> dict[TaskStatus, int]:
        """The number of tasks in every status (0 for a status without any)."""
        ...

    async def delete_expired_tasks(self, now: datetime) -> int:
        """Delete the tasks whose ``expires_at`` is at or before ``now``; how many went."""
        ...

    async def insert_handle(self, record: HandleRecord) -> None:
        """Store a new handle (committed before returning); ``StoreError(CONFLICT)`` when it exists."""
        ...

    async def peek_handle(self, handle: str, binding: HandleBinding, now: datetime) -> HandleRecord | None:
        """The live entry iff its binding is exactly ``binding`` and it expires after ``now``; never consumes."""
        ...

    async def consume_and_replace(
        self, handle: str, binding: HandleBinding, now: datetime, replacement: HandleRecord | None
    ) -> bool:
        """In one transaction: delete the entry iff the handle and the exact binding match and it is live at
        ``now``, then insert ``replacement`` if given. True iff this call consumed the entry; otherwise nothing
        changed."""
        ...

    async def count_live_handles(self, now: datetime) -> int:
        """The number of handles that expire after ``now``."""
        ...

    async def purge_expired_handles(self, now: datetime) -> int:
        """Delete the handles that expired at or before ``now``; how many went."""
        ...
