"""The repository interfaces every backend implements: ``DurableStore`` (tasks and durable handles) and
``KeyringRepository`` (a fleet's keyring, heartbeats and rotation record)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol

from .keyring_records import Heartbeat, RotationRecord, StoredKeyring
from .records import HandleBinding, HandleRecord, TaskQuota, TaskRecord, TaskStatus
from .url import StoreUrl

__all__ = ["DurableStore", "KeyringRepository"]


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


class KeyringRepository(Protocol):
    """A fleet's keyring, its instances' heartbeats and the rotation record, kept in a store (both backends).

    Same rules as :class:`DurableStore`: async, off the event loop, bounded, every failure a ``StoreError``, a
    write committed durably before its call returns. The store never sees key material in the clear: keys arrive
    and leave wrapped (:class:`~soklet_core.keys.WrappedKey`).
    """

    async def read_keyring(self) -> StoredKeyring | None:
        """The fleet keyring as of its latest committed generation, or ``None`` when none was ever written."""
        ...

    async def keyring_generation(self) -> int:
        """The latest committed generation (0 when no keyring was written): the cheap read of a poll."""
        ...

    async def write_keyring(self, keyring: StoredKeyring, *, expected_generation: int) -> StoredKeyring | None:
        """Compare-and-swap, one transaction: iff the committed generation is ``expected_generation`` (0: none
        yet), replace every key row with ``keyring.keys`` and set the generation to ``expected_generation + 1``;
        then wake the followers (PostgreSQL ``NOTIFY``). The stored keyring, or ``None`` when the generation
        moved on (nothing written)."""
        ...

    async def wait_for_keyring_change(self, after_generation: int, timeout_seconds: float) -> int:
        """Wait at most ``timeout_seconds`` (0 to ``MAX_KEYRING_WAIT_SECONDS``) for a generation newer than
        ``after_generation`` (PostgreSQL ``LISTEN``, else a poll every ``KEYRING_POLL_SECONDS``); the latest
        generation when it returns, which may still be ``after_generation``."""
        ...

    async def beat(self, heartbeat: Heartbeat) -> Heartbeat:
        """Record ``heartbeat`` (one row per instance name, replaced), its ``seen_at`` set to the store's clock
        (PostgreSQL's; SQLite's is the process clock); ``StoreError(QUOTA)`` for a new instance when the store keeps
        ``MAX_HEARTBEATS`` already."""
        ...

    async def heartbeats(self) -> list[Heartbeat]:
        """Every instance's last heartbeat (at most ``MAX_HEARTBEATS``), ordered by instance name."""
        ...

    async def forget_instance(self, instance: str) -> bool:
        """Delete an instance's heartbeat row (an instance retired for good); True iff there was one."""
        ...

    async def read_rotation(self) -> RotationRecord | None:
        """The rotation record, or ``None``."""
        ...

    async def write_rotation(self, record: RotationRecord, *, expected_version: int) -> RotationRecord | None:
        """Compare-and-swap on the record's version (0: none yet); the stored record (version
        ``expected_version + 1``) or ``None`` when another writer moved it on."""
        ...

    async def delete_rotation(self, *, expected_version: int) -> bool:
        """Delete the rotation record iff its version is ``expected_version``; True iff it went."""
        ...

    def rotation_lock(self, owner: str) -> AbstractAsyncContextManager[None]:
        """Hold the fleet's one rotation lock for the ``async with`` block (PostgreSQL: a session advisory lock on
        a dedicated connection, released if the holder dies; SQLite: an exclusive lock the OS releases likewise).
        A held lock is refused at once with ``StoreError(LOCKED)`` whose detail names the holder's ``owner`` and
        since when. ``owner`` is 1 to ``MAX_KEY_CHARS`` printable characters (it is printed in that refusal)."""
        ...
