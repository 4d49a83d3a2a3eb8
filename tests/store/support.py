"""Records for the store tests: one task, one binding, one handle, all at a fixed clock; and a store opened for a
test's steps."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from soklet_core.store import HandleBinding, HandleRecord, TaskRecord, TaskStatus, open_store
from soklet_core.store.postgres import PostgresStore
from soklet_core.store.sqlite import SqliteStore

#: Either backend: a DurableStore and a KeyringRepository both.
Store = SqliteStore | PostgresStore
_T = TypeVar("_T")

#: The tests' clock: every record is made at this moment (milliseconds only, as a store keeps it).
NOW = datetime(2026, 8, 1, 12, 0, 0, 123000, tzinfo=UTC)
BINDING = HandleBinding(tenant="default", principal="alice", partition="p-alice", operation="workflow.step")


def task(
    task_id: str = "task-1",
    *,
    status: TaskStatus = TaskStatus.WORKING,
    created: datetime = NOW,
    ttl: timedelta | None = timedelta(hours=1),
    document: str = '{"round":1}',
) -> TaskRecord:
    """A task record made at ``created``, expiring ``ttl`` later."""
    return TaskRecord(
        task_id=task_id,
        partition="p-alice",
        subject="alice",
        tool="slow.report",
        status=status,
        status_message=None,
        created_at=created,
        updated_at=created,
        expires_at=None if ttl is None else created + ttl,
        document=document,
    )


def handle(
    value: str = "h-1",
    *,
    binding: HandleBinding = BINDING,
    lifetime: timedelta = timedelta(minutes=15),
    state: str = '{"step":1}',
) -> HandleRecord:
    """A handle record made at :data:`NOW`, live for ``lifetime``."""
    return HandleRecord(handle=value, binding=binding, state=state, created_at=NOW, expires_at=NOW + lifetime)


def run(url: str, steps: Callable[[Store], Awaitable[_T]]) -> _T:
    """Open a store on ``url``, run ``steps`` on it, close it."""

    async def main() -> _T:
        store = open_store(url)
        await store.open()
        try:
            return await steps(store)
        finally:
            await store.close()

    return asyncio.run(main())
