"""What a served task manager does on its own, and what one partition may keep: an orphaned step (its process was
killed) runs again after its lease although nobody polls it, expired tasks are purged without waiting for a
creation, and one partition at its stored-task or stored-byte bound leaves other partitions creating tasks.
Real stores (SQLite and PostgreSQL), real servers, a real killed process."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from soklet_core.json import JsonObject
from soklet_core.mcp import (
    BearerTokenAdmission,
    ClientCapabilities,
    Identity,
    McpServer,
    Registry,
    ServerOptions,
    StartTask,
)
from soklet_core.mcp.server.admission import Admission, BearerTokenEntry
from soklet_core.mcp.server.durable._tasks import (
    MAX_STORED_TASK_BYTES_PER_PARTITION,
    MAX_STORED_TASKS_PER_PARTITION,
    ORPHAN_SWEEP_BATCH,
    ORPHAN_SWEEP_SECONDS,
    PURGE_INTERVAL_SECONDS,
    TaskError,
    TaskErrorReason,
    TaskManager,
)
from soklet_core.mcp.server.options import TaskOptions
from soklet_core.store import StoreError, StoreErrorReason, TaskQuota, TaskRecord, TaskStatus, open_store
from tests.server.support import Client, running
from tests.server.test_tasks import _CHILD, REGISTRY, TASKS, echo, serving, slow
from tests.store.support import task

_T = TypeVar("_T")

#: A generous bound for what the background work must reach (a lease of 10 s, a sweep every 5 s, a busy machine).
SETTLE_SECONDS = 60.0


def _on_store(url: str, work: Callable[[object], Awaitable[_T]]) -> _T:
    async def session() -> _T:
        store = open_store(url)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(session())


def _stored(url: str, task_id: str) -> TaskRecord | None:
    async def read(store: object) -> TaskRecord | None:
        return await store.get_task(task_id)  # type: ignore[attr-defined, no-any-return]

    return _on_store(url, read)


@pytest.mark.slow
def test_an_orphaned_step_runs_again_after_its_lease_without_a_poll(sqlite_store_url: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, sqlite_store_url, str(port)],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "SOKLET_TEST_STALL": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = Client(f"http://127.0.0.1:{port}", token="alice-token")
        deadline = time.monotonic() + 30
        while True:
            try:
                created = client.call("crashable", {}, capabilities=TASKS)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the child server did not start"
                time.sleep(0.1)
        task_id = created.result["taskId"]
    finally:
        child.kill()  # no shutdown: the lease is not given back
        child.wait(10)
    stalled = _stored(sqlite_store_url, task_id)
    assert stalled is not None
    assert stalled.status is TaskStatus.WORKING
    # Another server on the same store; nobody sends it a request about the task.
    with serving(sqlite_store_url):
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            record = _stored(sqlite_store_url, task_id)
            assert record is not None
            if record.status is not TaskStatus.WORKING:
                break
            assert time.monotonic() < deadline, "the orphaned step was not run again without a poll"
            time.sleep(0.2)
    assert record.status is TaskStatus.COMPLETED
    assert "finished elsewhere" in record.document


def _manager(store: object, **options: object) -> TaskManager:
    return TaskManager(store, registry=Registry(echo, slow), **options)  # type: ignore[arg-type]


async def _create(manager: TaskManager, partition: str, text: str = "") -> bytes:
    return await manager.create(
        tool=slow,
        admission=Admission(Identity("someone"), partition),
        arguments=JsonObject.from_mapping({"text": text}) if text else JsonObject.empty_instance(),
        capabilities=ClientCapabilities.from_mapping(TASKS),
        start=StartTask(),
    )


def test_expired_tasks_are_purged_without_a_creation(store_url: str) -> None:
    async def scenario(store: object) -> tuple[int, int]:
        manager = _manager(store, options=TaskOptions(ttl_ms=1), sweep_seconds=0.1, purge_seconds=0.1)
        await _create(manager, "p-1")
        await _create(manager, "p-1")
        listed = await store.list_tasks()  # type: ignore[attr-defined]
        manager.start()
        try:
            deadline = time.monotonic() + SETTLE_SECONDS
            while await store.list_tasks():  # type: ignore[attr-defined]
                assert time.monotonic() < deadline, "the expired tasks were not purged"
                await asyncio.sleep(0.05)
        finally:
            await manager.close()
        return len(listed), len(await store.list_tasks())  # type: ignore[attr-defined]

    assert _on_store(store_url, scenario) == (2, 0)


def test_one_partition_at_its_bound_leaves_others_creating(store_url: str) -> None:
    async def scenario(store: object) -> None:
        manager = _manager(store, options=TaskOptions(max_per_partition=2))
        try:
            await _create(manager, "p-busy")
            await _create(manager, "p-busy")
            with pytest.raises(TaskError) as refused:
                await _create(manager, "p-busy")
            assert refused.value.reason is TaskErrorReason.STORED_QUOTA  # answered -32603 "Too many stored tasks"
            # Another partition is not affected.
            assert b'"status":"working"' in await _create(manager, "p-quiet")
            assert b'"status":"working"' in await _create(manager, "p-quiet")
        finally:
            await manager.close()
        bytes_bound = _manager(store, options=TaskOptions(max_bytes_per_partition=64 * 1024))
        try:
            with pytest.raises(TaskError) as large:
                await _create(bytes_bound, "p-large", "x" * 70_000)  # one large task is over the bytes bound
            assert large.value.reason is TaskErrorReason.STORED_QUOTA
            assert b'"status":"working"' in await _create(bytes_bound, "p-small", "x" * 1000)
        finally:
            await bytes_bound.close()

    _on_store(store_url, scenario)


def test_the_store_quota_is_exact_at_its_edges(store_url: str) -> None:
    first, second = task("q-1", document='{"n":1}'), task("q-2", document='{"n":22}')
    size = len(first.document) + len(second.document)

    async def scenario(store: object) -> None:
        insert = store.insert_task  # type: ignore[attr-defined]
        by_count = TaskQuota(max_tasks=2, max_bytes=size)
        await insert(first, quota=by_count)
        await insert(second, quota=by_count)  # exactly at both bounds: stored
        for extra in (task("q-3", document="1"), task("q-4", document="1")):
            with pytest.raises(StoreError) as caught:
                await insert(extra, quota=TaskQuota(max_tasks=3, max_bytes=size))  # one byte over
            assert caught.value.reason is StoreErrorReason.QUOTA
        with pytest.raises(StoreError) as caught:
            await insert(task("q-5", document="1"), quota=TaskQuota(max_tasks=2, max_bytes=size + 1))  # one task over
        assert caught.value.reason is StoreErrorReason.QUOTA
        await insert(task("q-6", document="1"), quota=TaskQuota(max_tasks=3, max_bytes=size + 1))  # both at the edge
        # Expired tasks do not count: they already answer not-found and the next purge deletes them.
        later = task("q-7", document="1", created=first.created_at + (first.expires_at - first.created_at) * 2)
        await insert(later, quota=TaskQuota(max_tasks=1, max_bytes=1))

    _on_store(store_url, scenario)


def test_a_served_partition_at_its_bound_is_refused_and_another_is_not(sqlite_store_url: str) -> None:
    tokens = {
        "alice-token": BearerTokenEntry("alice", "p-alice"),
        "carol-token": BearerTokenEntry("carol", "p-carol"),
    }
    store = open_store(sqlite_store_url)
    options = ServerOptions(tasks=TaskOptions(max_per_partition=2))
    server = McpServer(REGISTRY, store=store, admission=BearerTokenAdmission(tokens), options=options)
    try:
        with running(server) as base:
            alice, carol = Client(base, token="alice-token"), Client(base, token="carol-token")
            assert alice.call("slow", {}, capabilities=TASKS).result["status"] == "working"
            assert alice.call("slow", {}, capabilities=TASKS).result["status"] == "working"
            refused = alice.call("slow", {}, capabilities=TASKS)
            assert refused.status == 200
            assert refused.error == {"code": -32603, "message": "Too many stored tasks"}
            assert carol.call("slow", {}, capabilities=TASKS).result["status"] == "working"
    finally:
        asyncio.run(store.close())


def test_one_sweep_reads_at_most_its_batch_and_the_next_goes_on(sqlite_store_url: str) -> None:
    async def scenario(store: object) -> list[int]:
        first = _manager(store)
        for _ in range(ORPHAN_SWEEP_BATCH + 1):
            await _create(first, "p-1")
        await first.close()  # its leases are given back: every task is an orphan now
        second = _manager(store)
        try:
            return [await second.sweep_orphans(), await second.sweep_orphans(), await second.sweep_orphans()]
        finally:
            await second.close()

    # The batch at its edge: 64 in the first sweep, the 65th in the next, then the first page again (all running).
    assert _on_store(sqlite_store_url, scenario) == [ORPHAN_SWEEP_BATCH, 1, 0]


def test_the_durable_guide_states_the_task_bounds() -> None:
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "durable.md").read_text().split())
    assert f"at most {MAX_STORED_TASKS_PER_PARTITION:,} tasks (`MAX_STORED_TASKS_PER_PARTITION`)" in text
    assert f"{MAX_STORED_TASK_BYTES_PER_PARTITION // 2**20} MiB of task documents" in text
    assert f"every {ORPHAN_SWEEP_SECONDS:g} s (`ORPHAN_SWEEP_SECONDS`) through the next {ORPHAN_SWEEP_BATCH}" in text
    assert f"purges every {PURGE_INTERVAL_SECONDS:g} s, `PURGE_INTERVAL_SECONDS`" in text
