"""Records written straight into a real store for the operator-command tests (``soklet tasks``, ``soklet handles``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from soklet_core.store import DurableStore, HandleBinding, HandleRecord, TaskRecord, TaskStatus, open_store

_T = TypeVar("_T")

#: A password that must never appear in any output.
PASSWORD = "sekretPW-4f1d9c"
BINDING = HandleBinding(tenant="default", principal="alice", partition="p-alice", operation="workflow.step")


def on_store(url: str, work: Callable[[DurableStore], Awaitable[_T]]) -> _T:
    """Open the store at ``url``, run ``work``, close it."""

    async def session() -> _T:
        store = open_store(url)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(session())


def task(task_id: str, status: TaskStatus, *, offset_s: int = 0, tool: str = "deploy.approve") -> TaskRecord:
    """A task record created ``offset_s`` seconds after a fixed moment, its document a placeholder."""
    created = datetime(2026, 8, 1, 12, 0, tzinfo=UTC) + timedelta(seconds=offset_s)
    return TaskRecord(
        task_id=task_id,
        partition="p-alice",
        subject="alice",
        tool=tool,
        status=status,
        status_message=f"{status.value} now",
        created_at=created,
        updated_at=created,
        expires_at=None,
        document='{"secret":"user-data-7c1e"}',
    )


def seed_tasks(url: str, records: list[TaskRecord]) -> None:
    """Insert ``records``."""

    async def work(store: DurableStore) -> None:
        for record in records:
            await store.insert_task(record)

    on_store(url, work)


def seed_handles(url: str, *, live: int, expired: int) -> None:
    """Insert ``live`` handles expiring in an hour and ``expired`` ones that expired a minute ago."""
    now = datetime.now(UTC)

    async def work(store: DurableStore) -> None:
        for index in range(live + expired):
            expires = now + (timedelta(hours=1) if index < live else -timedelta(minutes=1))
            record = HandleRecord(
                handle=f"handle-{index:04d}-handle-handle",
                binding=BINDING,
                state='{"step":1}',
                created_at=now - timedelta(hours=2),
                expires_at=expires,
            )
            await store.insert_handle(record)

    on_store(url, work)
