"""What only the SQLite store does: its file and folder modes, and one file shared by threads and processes."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import stat
import threading
from pathlib import Path

from soklet_core.store import SqliteStore, StoreError, StoreErrorReason, StoreUrl, open_store, sqlite_url
from soklet_core.store.sqlite import SQLITE_MAX_BATCH, SQLITE_MAX_QUEUED_WRITES
from tests.store.support import BINDING, NOW, handle, task


def _run_store(url: StoreUrl, steps: object) -> object:
    async def run() -> object:
        store = open_store(url)
        await store.open()
        try:
            return await steps(store)  # type: ignore[operator]
        finally:
            await store.close()

    return asyncio.run(run())


def test_the_file_is_owner_only_in_an_owner_only_folder(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "data" / "soklet.db")

    async def steps(store: SqliteStore) -> None:
        await store.insert_task(task())
        # The write-ahead log and its index take the database file's mode.
        for name in ("soklet.db-wal", "soklet.db-shm"):
            assert stat.S_IMODE((tmp_path / "data" / name).stat().st_mode) == 0o600, name

    _run_store(url, steps)
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "data" / "soklet.db").stat().st_mode) == 0o600
    assert isinstance(open_store(url), SqliteStore)


def _consume_in_thread(url: StoreUrl, barrier: threading.Barrier, results: list[bool]) -> None:
    async def run() -> None:
        store = open_store(url)
        await store.open()
        try:
            barrier.wait()
            results.append(await store.consume_and_replace("h-1", BINDING, NOW, None))
        finally:
            await store.close()

    asyncio.run(run())


def test_32_threads_with_their_own_stores_consume_one_handle_once(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "soklet.db")

    async def steps(store: SqliteStore) -> None:
        await store.insert_handle(handle())

    _run_store(url, steps)
    barrier = threading.Barrier(32)
    results: list[bool] = []
    threads = [threading.Thread(target=_consume_in_thread, args=(url, barrier, results)) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 31 + [True]


def _consume_in_process(
    text: str, start: multiprocessing.synchronize.Event, answers: multiprocessing.Queue[bool]
) -> None:
    url = StoreUrl.parse(text)

    async def run() -> None:
        store = open_store(url)
        await store.open()
        try:
            start.wait()
            outcomes = await asyncio.gather(*(store.consume_and_replace("h-1", BINDING, NOW, None) for _ in range(16)))
            for outcome in outcomes:
                answers.put(outcome)
        finally:
            await store.close()

    asyncio.run(run())


def test_two_processes_sharing_the_file_consume_one_handle_once(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "soklet.db")

    async def steps(store: SqliteStore) -> None:
        await store.insert_handle(handle())

    _run_store(url, steps)
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    answers: multiprocessing.Queue[bool] = context.Queue()
    processes = [context.Process(target=_consume_in_process, args=(url.text, start, answers)) for _ in range(2)]
    for process in processes:
        process.start()
    start.set()
    outcomes = [answers.get(timeout=60) for _ in range(32)]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert sorted(outcomes) == [False] * 31 + [True]


def test_writes_beyond_the_queue_bound_are_refused_and_the_rest_commit(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "soklet.db")
    total = SQLITE_MAX_QUEUED_WRITES + SQLITE_MAX_BATCH + 16

    async def steps(store: SqliteStore) -> None:
        # Another connection holds the write lock: the writer waits for it with one batch taken, the queue fills.
        holder = sqlite3.connect(url.sqlite_path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            writes = [asyncio.ensure_future(store.insert_handle(handle(f"h-{index}"))) for index in range(total)]
            await asyncio.sleep(0)  # every write is queued or refused by now
            holder.execute("ROLLBACK")
            outcomes = await asyncio.gather(*writes, return_exceptions=True)
        finally:
            holder.close()
        refused = [outcome for outcome in outcomes if isinstance(outcome, StoreError)]
        assert len(refused) >= total - SQLITE_MAX_QUEUED_WRITES - SQLITE_MAX_BATCH
        assert {error.reason for error in refused} == {StoreErrorReason.UNAVAILABLE}
        assert all(outcome is None for outcome in outcomes if not isinstance(outcome, StoreError))
        assert await store.count_live_handles(NOW) == total - len(refused)

    _run_store(url, steps)


def test_a_closed_store_finishes_its_queued_writes(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "soklet.db")

    async def main() -> None:
        store = open_store(url)
        await store.open()
        writes = [asyncio.ensure_future(store.insert_handle(handle(f"h-{index}"))) for index in range(50)]
        await asyncio.sleep(0)  # queued
        await store.close()
        assert await asyncio.gather(*writes) == [None] * 50

    asyncio.run(main())

    async def count(store: SqliteStore) -> int:
        return await store.count_live_handles(NOW)

    assert _run_store(url, count) == 50


def _posix_locks_on(path: Path) -> int:
    """How many POSIX locks (any process) the kernel lists on ``path``'s inode (``/proc/locks``)."""
    inode = path.stat().st_ino
    return sum(
        1
        for line in Path("/proc/locks").read_text().splitlines()
        if "POSIX" in line and line.split()[5].rsplit(":", 1)[-1] == str(inode)
    )


def test_opening_a_second_store_on_the_file_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    # Closing any descriptor of a file drops every POSIX lock the process holds on it: a second store that opened
    # and closed the file to check it released the first one's SQLite locks, and concurrent writers corrupted it.
    url = sqlite_url(tmp_path / "store.db")

    async def scenario() -> tuple[int, int]:
        first = SqliteStore(url)
        await first.open()
        try:
            await first.insert_task(task("t-1"))
            before = _posix_locks_on(tmp_path / "store.db")
            second = SqliteStore(url)
            await second.open()
            try:
                after = _posix_locks_on(tmp_path / "store.db")
            finally:
                await second.close()
            return before, after
        finally:
            await first.close()

    before, after = asyncio.run(scenario())
    assert before >= 1
    assert after >= before
