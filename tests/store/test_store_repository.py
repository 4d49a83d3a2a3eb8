"""The one repository suite: every test runs against SQLite and against PostgreSQL (the ``store_url`` fixture).

Each test gets a fresh store: a new SQLite file, or a new database on the run's throwaway PostgreSQL cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import replace
from datetime import timedelta

import pytest

from soklet_core.store import (
    MAX_HANDLE_STATE_BYTES,
    MAX_LIST_LIMIT,
    MAX_TASK_DOCUMENT_BYTES,
    DurableStore,
    HandleBinding,
    StoreError,
    StoreErrorReason,
    TaskStatus,
    open_store,
)
from tests.store.support import BINDING, NOW, handle, run, task

# -- tasks ------------------------------------------------------------------------------------------------------


def test_insert_then_get_gives_the_same_record(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        record = task()
        await store.insert_task(record)
        assert await store.get_task("task-1") == record
        assert await store.get_task("task-2") is None
        untimed = task("task-2", ttl=None)
        await store.insert_task(untimed)
        assert await store.get_task("task-2") == untimed

    run(store_url, steps)


def test_a_duplicate_task_id_is_a_conflict(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_task(task())
        with pytest.raises(StoreError) as caught:
            await store.insert_task(task(document='{"other":true}'))
        assert caught.value.reason is StoreErrorReason.CONFLICT
        assert (await store.get_task("task-1")) == task()

    run(store_url, steps)


def test_replace_is_a_compare_and_swap_on_the_version(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_task(task())
        later = NOW + timedelta(seconds=3)
        changed = replace(
            task(), status=TaskStatus.INPUT_REQUIRED, status_message="waiting", updated_at=later, document='{"r":2}'
        )
        stored = await store.replace_task(changed, expected_version=0)
        assert stored is not None
        assert stored.version == 1
        assert await store.get_task("task-1") == stored
        # A writer that read version 0 loses, and changes nothing.
        stale = replace(task(), status=TaskStatus.CANCELLED)
        assert await store.replace_task(stale, expected_version=0) is None
        assert await store.get_task("task-1") == stored
        final = await store.replace_task(replace(stored, status=TaskStatus.COMPLETED), expected_version=1)
        assert final is not None
        assert final.version == 2
        assert (await store.get_task("task-1")) == final
        # A row that is gone: nothing to swap.
        assert await store.replace_task(task("missing"), expected_version=0) is None

    run(store_url, steps)


def test_concurrent_replaces_of_one_version_let_exactly_one_win(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_task(task())
        attempts = [
            store.replace_task(replace(task(), status_message=f"writer {index}"), expected_version=0)
            for index in range(16)
        ]
        outcomes = await asyncio.gather(*attempts)
        winners = [outcome for outcome in outcomes if outcome is not None]
        assert len(winners) == 1
        assert await store.get_task("task-1") == winners[0]

    run(store_url, steps)


def test_list_orders_pages_and_filters(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        # Two tasks share a creation time: the id breaks the tie.
        await store.insert_task(task("b", created=NOW))
        await store.insert_task(task("a", created=NOW))
        await store.insert_task(task("c", created=NOW - timedelta(seconds=1), status=TaskStatus.COMPLETED))
        await store.insert_task(task("d", created=NOW + timedelta(seconds=1)))
        everything = await store.list_tasks()
        assert [record.task_id for record in everything] == ["c", "a", "b", "d"]
        first = await store.list_tasks(limit=1)
        assert [record.task_id for record in first] == ["c"]
        second = await store.list_tasks(limit=2, after="c")
        assert [record.task_id for record in second] == ["a", "b"]
        assert [record.task_id for record in await store.list_tasks(after="d")] == []
        assert await store.list_tasks(limit=0) == []
        working = await store.list_tasks(status=TaskStatus.WORKING)
        assert [record.task_id for record in working] == ["a", "b", "d"]
        assert [record.task_id for record in await store.list_tasks(status=TaskStatus.FAILED)] == []

    run(store_url, steps)


@pytest.mark.slow
def test_list_limit_bounds(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        for index in range(MAX_LIST_LIMIT + 1):
            await store.insert_task(task(f"t-{index:05d}", created=NOW + timedelta(milliseconds=index)))
        page = await store.list_tasks(limit=MAX_LIST_LIMIT)
        assert len(page) == MAX_LIST_LIMIT
        assert page[-1].task_id == f"t-{MAX_LIST_LIMIT - 1:05d}"
        rest = await store.list_tasks(limit=MAX_LIST_LIMIT, after=page[-1].task_id)
        assert [record.task_id for record in rest] == [f"t-{MAX_LIST_LIMIT:05d}"]
        for bad in (MAX_LIST_LIMIT + 1, -1):
            with pytest.raises(StoreError) as caught:
                await store.list_tasks(limit=bad)
            assert caught.value.reason is StoreErrorReason.INVALID_ARGUMENT

    run(store_url, steps)


def test_count_tasks_names_every_status(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        assert await store.count_tasks() == dict.fromkeys(TaskStatus, 0)
        await store.insert_task(task("a"))
        await store.insert_task(task("b"))
        await store.insert_task(task("c", status=TaskStatus.FAILED))
        counts = await store.count_tasks()
        assert counts == {**dict.fromkeys(TaskStatus, 0), TaskStatus.WORKING: 2, TaskStatus.FAILED: 1}

    run(store_url, steps)


def test_delete_expired_tasks_keeps_live_and_untimed_ones(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_task(task("short", ttl=timedelta(seconds=1)))
        await store.insert_task(task("long", ttl=timedelta(hours=1)))
        await store.insert_task(task("forever", ttl=None))
        assert await store.delete_expired_tasks(NOW) == 0
        # Expiry is inclusive: a task is gone at its expires_at.
        assert await store.delete_expired_tasks(NOW + timedelta(seconds=1)) == 1
        assert await store.get_task("short") is None
        assert await store.delete_expired_tasks(NOW + timedelta(days=1)) == 1
        assert [record.task_id for record in await store.list_tasks()] == ["forever"]

    run(store_url, steps)


def test_a_document_of_exactly_the_limit_is_kept_and_one_byte_more_is_refused(store_url: str) -> None:
    # The limit counts UTF-8 bytes: "é" is two.
    body = "é" * ((MAX_TASK_DOCUMENT_BYTES - 2) // 2)
    document = f'"{body}"'
    assert len(document.encode()) == MAX_TASK_DOCUMENT_BYTES

    async def steps(store: DurableStore) -> None:
        await store.insert_task(task(document=document))
        stored = await store.get_task("task-1")
        assert stored is not None
        assert stored.document == document

    run(store_url, steps)
    with pytest.raises(StoreError) as caught:
        task(document=f'"{body}x"')
    assert caught.value.reason is StoreErrorReason.TOO_LARGE
    state = "x" * MAX_HANDLE_STATE_BYTES
    assert handle(state=state).state == state
    with pytest.raises(StoreError) as caught:
        handle(state=state + "x")
    assert caught.value.reason is StoreErrorReason.TOO_LARGE


# -- handles ----------------------------------------------------------------------------------------------------


def test_insert_peek_and_consume_with_replacement(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_handle(handle())
        assert await store.peek_handle("h-1", BINDING, NOW) == handle()
        # Peeking never consumes.
        assert await store.peek_handle("h-1", BINDING, NOW) == handle()
        assert await store.count_live_handles(NOW) == 1
        rotated = handle("h-2", state='{"step":2}')
        assert await store.consume_and_replace("h-1", BINDING, NOW, rotated) is True
        assert await store.peek_handle("h-1", BINDING, NOW) is None
        assert await store.peek_handle("h-2", BINDING, NOW) == rotated
        # Replayed: the old handle is gone and consumes nothing, and the fresh one stays live.
        assert await store.consume_and_replace("h-1", BINDING, NOW, handle("h-3")) is False
        assert await store.peek_handle("h-3", BINDING, NOW) is None
        # Finished: consumed without a replacement.
        assert await store.consume_and_replace("h-2", BINDING, NOW, None) is True
        assert await store.count_live_handles(NOW) == 0

    run(store_url, steps)


def test_a_duplicate_handle_is_a_conflict(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_handle(handle())
        with pytest.raises(StoreError) as caught:
            await store.insert_handle(handle(state='{"other":1}'))
        assert caught.value.reason is StoreErrorReason.CONFLICT

    run(store_url, steps)


WRONG_BINDINGS = {
    "tenant": replace(BINDING, tenant="other-tenant"),
    "principal": replace(BINDING, principal="mallory"),
    "anonymous": replace(BINDING, principal=None),
    "partition": replace(BINDING, partition="p-mallory"),
    "operation": replace(BINDING, operation="workflow.other"),
}


@pytest.mark.parametrize("wrong", WRONG_BINDINGS.values(), ids=WRONG_BINDINGS.keys())
def test_a_wrong_binding_consumes_nothing(store_url: str, wrong: HandleBinding) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_handle(handle())
        assert await store.peek_handle("h-1", wrong, NOW) is None
        assert await store.consume_and_replace("h-1", wrong, NOW, handle("h-2", binding=wrong)) is False
        assert await store.peek_handle("h-2", wrong, NOW) is None
        # The rightful owner's entry is still live and still consumable.
        assert await store.peek_handle("h-1", BINDING, NOW) == handle()
        assert await store.consume_and_replace("h-1", BINDING, NOW, None) is True

    run(store_url, steps)


def test_an_anonymous_binding_matches_only_anonymous(store_url: str) -> None:
    anonymous = replace(BINDING, principal=None)

    async def steps(store: DurableStore) -> None:
        await store.insert_handle(handle(binding=anonymous))
        assert await store.peek_handle("h-1", BINDING, NOW) is None
        assert await store.consume_and_replace("h-1", BINDING, NOW, None) is False
        assert await store.consume_and_replace("h-1", anonymous, NOW, None) is True

    run(store_url, steps)


def test_expired_and_unknown_handles_consume_nothing(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_handle(handle(lifetime=timedelta(seconds=10)))
        expiry = NOW + timedelta(seconds=10)
        # Live until its expires_at, not at it.
        assert await store.peek_handle("h-1", BINDING, expiry - timedelta(milliseconds=1)) is not None
        assert await store.peek_handle("h-1", BINDING, expiry) is None
        assert await store.consume_and_replace("h-1", BINDING, expiry, handle("h-2")) is False
        assert await store.peek_handle("h-2", BINDING, NOW) is None
        assert await store.consume_and_replace("unknown", BINDING, NOW, handle("h-3")) is False
        assert await store.count_live_handles(NOW) == 1
        assert await store.count_live_handles(expiry) == 0
        assert await store.purge_expired_handles(NOW) == 0
        assert await store.purge_expired_handles(expiry) == 1
        assert await store.peek_handle("h-1", BINDING, NOW) is None

    run(store_url, steps)


def test_32_concurrent_consumes_of_one_handle_let_exactly_one_win(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_handle(handle())
        attempts = [
            store.consume_and_replace("h-1", BINDING, NOW, handle(f"next-{index}", state=f'{{"winner":{index}}}'))
            for index in range(32)
        ]
        outcomes = await asyncio.gather(*attempts)
        assert outcomes.count(True) == 1
        winner = outcomes.index(True)
        assert await store.count_live_handles(NOW) == 1
        assert await store.peek_handle(f"next-{winner}", BINDING, NOW) is not None

    run(store_url, steps)


def test_a_replacement_that_conflicts_consumes_nothing(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_handle(handle())
        await store.insert_handle(handle("h-2"))
        # One transaction: the failed insert of the replacement takes the consumption back with it.
        with pytest.raises(StoreError) as caught:
            await store.consume_and_replace("h-1", BINDING, NOW, handle("h-2", state='{"step":2}'))
        assert caught.value.reason is StoreErrorReason.CONFLICT
        assert await store.peek_handle("h-1", BINDING, NOW) == handle()
        assert await store.peek_handle("h-2", BINDING, NOW) == handle("h-2")

    run(store_url, steps)


def test_concurrent_writes_each_get_their_own_outcome(store_url: str) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_handle(handle("taken"))
        await store.insert_handle(handle("live"))
        await store.insert_handle(handle("kept"))
        writes: list[Awaitable[object]] = [store.insert_handle(handle(f"new-{index}")) for index in range(24)]
        writes.append(store.insert_handle(handle("taken", state='{"again":1}')))  # a conflict among successes
        writes.append(store.consume_and_replace("live", BINDING, NOW, handle("rotated")))
        writes.append(store.consume_and_replace("unknown", BINDING, NOW, handle("never")))
        writes.append(store.insert_task(task()))
        # Its replacement conflicts: the consumption it made first is taken back, the others' writes are not.
        writes.append(store.consume_and_replace("kept", BINDING, NOW, handle("taken", state='{"again":2}')))
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        assert outcomes[:24] == [None] * 24
        assert outcomes[25:28] == [True, False, None]
        for failed in (outcomes[24], outcomes[28]):
            assert isinstance(failed, StoreError)
            assert failed.reason is StoreErrorReason.CONFLICT
        # Every success is stored; the failed and refused writes left nothing behind.
        assert await store.count_live_handles(NOW) == 24 + 3
        assert await store.peek_handle("kept", BINDING, NOW) == handle("kept")
        assert await store.peek_handle("taken", BINDING, NOW) == handle("taken")
        assert await store.peek_handle("live", BINDING, NOW) is None
        assert await store.peek_handle("never", BINDING, NOW) is None
        assert await store.get_task("task-1") == task()

    run(store_url, steps)


# -- durability and schema --------------------------------------------------------------------------------------


def test_a_new_store_on_the_same_url_sees_everything(store_url: str) -> None:
    async def write(store: DurableStore) -> None:
        await store.insert_task(task())
        await store.insert_handle(handle())

    run(store_url, write)

    async def read(store: DurableStore) -> None:
        assert await store.get_task("task-1") == task()
        assert await store.peek_handle("h-1", BINDING, NOW) == handle()
        assert await store.count_tasks() == {**dict.fromkeys(TaskStatus, 0), TaskStatus.WORKING: 1}

    run(store_url, read)


def test_two_stores_creating_the_schema_at_once_both_open(store_url: str) -> None:
    async def main() -> None:
        stores = [open_store(store_url) for _ in range(4)]
        await asyncio.gather(*(store.open() for store in stores))
        try:
            await stores[0].insert_task(task())
            assert await stores[1].get_task("task-1") == task()
        finally:
            await asyncio.gather(*(store.close() for store in stores))

    asyncio.run(main())


def test_open_is_idempotent_and_a_closed_store_refuses(store_url: str) -> None:
    async def main() -> None:
        store = open_store(store_url)
        with pytest.raises(StoreError) as caught:
            await store.get_task("task-1")
        assert caught.value.reason is StoreErrorReason.UNAVAILABLE
        await store.open()
        await store.open()
        await store.close()
        with pytest.raises(StoreError) as caught:
            await store.get_task("task-1")
        assert caught.value.reason is StoreErrorReason.UNAVAILABLE

    asyncio.run(main())
