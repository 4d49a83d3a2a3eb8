"""The fleet keyring's repository on both backends (the ``store_url`` fixture: SQLite, then PostgreSQL): the
generation's compare-and-swap, followers woken by NOTIFY or by polling, heartbeats, the rotation record and lock,
and every limit at its edge."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from soklet_core.keys import PROTECTION_PROFILE, LocalKek, ProtectionKey
from soklet_core.store import (
    MAX_ADMIN_URL_CHARS,
    MAX_FLEET_KEYS,
    MAX_HEARTBEATS,
    MAX_KEY_CHARS,
    MAX_KEYRING_WAIT_SECONDS,
    MAX_ROTATION_DOCUMENT_BYTES,
    Heartbeat,
    RotationRecord,
    StoredKey,
    StoredKeyring,
    StoredKeyRole,
    StoreError,
    StoreErrorReason,
    StoreUrl,
)
from soklet_core.store.postgres import LISTENER_NAME, PostgresStore
from soklet_core.store.sqlite import SqliteStore
from soklet_core.store.statements import SQLITE, Statements
from tests.store.support import Store, run

NOW = datetime(2026, 8, 1, 12, 0, 0, 123000, tzinfo=UTC)
KEK = LocalKek(bytes(range(32)))
ROOT = Path(__file__).resolve().parents[2]


async def opened(url: str, **options: bool) -> Store:
    """Another store object on ``url`` (another process's view of the same store), opened."""
    parsed = StoreUrl.parse(url)
    store: Store = PostgresStore(parsed, **options) if parsed.backend == "postgresql" else SqliteStore(parsed)
    await store.open()
    return store


def stored_key(key_id: str, role: StoredKeyRole = StoredKeyRole.VERIFICATION) -> StoredKey:
    key = ProtectionKey.generate(key_id)
    return StoredKey(
        wrapped=KEK.wrap(key, PROTECTION_PROFILE),
        role=role,
        created_at=NOW,
        retired_at=None,
        check_value=key.check_value_text,
    )


def keyring(*verification: str, active: str = "k-active") -> StoredKeyring:
    keys = (stored_key(active, StoredKeyRole.ACTIVE), *(stored_key(key_id) for key_id in verification))
    return StoredKeyring(generation=0, profile=PROTECTION_PROFILE, keys=keys, changed_at=NOW)


def beat(instance: str, generation: int = 1, **changes: object) -> Heartbeat:
    made = Heartbeat(
        instance=instance,
        process_id="pid-1",
        generation=generation,
        fingerprint=None,
        clock=NOW,
        admin_url=None,
        seen_at=NOW,
    )
    return replace(made, **changes)  # type: ignore[arg-type]


def rotation(document: str = '{"step":"staged"}', owner: str = "alice") -> RotationRecord:
    return RotationRecord(owner=owner, started_at=NOW, document=document, version=0)


# -- the keyring and its generation -------------------------------------------------------------------------------


def test_a_keyring_round_trips_and_each_write_raises_the_generation_by_one(store_url: str) -> None:
    async def steps(store: Store) -> None:
        assert await store.read_keyring() is None
        assert await store.keyring_generation() == 0
        first = await store.write_keyring(keyring("k-2", "k-3"), expected_generation=0)
        assert first is not None
        assert first.generation == 1
        assert await store.read_keyring() == first
        assert await store.keyring_generation() == 1
        # Every key row is replaced: the keys of the new generation, and only those.
        second = await store.write_keyring(keyring("k-4", active="k-5"), expected_generation=1)
        assert second is not None
        assert second.generation == 2
        read = await store.read_keyring()
        assert read == second
        assert [key.key_id for key in read.keys] == ["k-4", "k-5"]
        assert read.active.key_id == "k-5"

    run(store_url, steps)


def test_a_write_at_a_stale_generation_writes_nothing(store_url: str) -> None:
    async def steps(store: Store) -> None:
        assert await store.write_keyring(keyring(), expected_generation=1) is None  # none written yet
        assert await store.read_keyring() is None
        first = await store.write_keyring(keyring("k-2"), expected_generation=0)
        assert await store.write_keyring(keyring("k-9"), expected_generation=0) is None
        assert await store.write_keyring(keyring("k-9"), expected_generation=2) is None
        assert await store.read_keyring() == first

    run(store_url, steps)


def test_of_concurrent_writers_on_two_stores_exactly_one_wins(store_url: str) -> None:
    async def steps(store: Store) -> None:
        other = await opened(store_url)
        try:
            await store.write_keyring(keyring(), expected_generation=0)
            attempts = [
                (store if index % 2 else other).write_keyring(keyring(f"k-{index}"), expected_generation=1)
                for index in range(8)
            ]
            results = await asyncio.gather(*attempts)
            winners = [result for result in results if result is not None]
            assert len(winners) == 1
            assert await other.read_keyring() == winners[0]
            assert await store.keyring_generation() == 2
        finally:
            await other.close()

    run(store_url, steps)


def test_the_keyring_holds_max_fleet_keys_and_refuses_one_more(store_url: str) -> None:
    full = keyring(*(f"k-{index:02}" for index in range(MAX_FLEET_KEYS - 1)))
    assert len(full.keys) == MAX_FLEET_KEYS
    with pytest.raises(StoreError) as refused:
        StoredKeyring(
            generation=0,
            profile=PROTECTION_PROFILE,
            keys=(*full.keys, stored_key("k-one-more")),
            changed_at=NOW,
        )
    assert refused.value.reason is StoreErrorReason.INVALID_ARGUMENT

    async def steps(store: Store) -> None:
        written = await store.write_keyring(full, expected_generation=0)
        assert written is not None
        assert await store.read_keyring() == written

    run(store_url, steps)


def test_a_stored_keyring_has_exactly_one_active_key() -> None:
    with pytest.raises(StoreError, match="exactly one active"):
        StoredKeyring(generation=0, profile=PROTECTION_PROFILE, keys=(stored_key("a"),), changed_at=NOW)
    with pytest.raises(StoreError, match="1 to"):
        StoredKeyring(generation=0, profile=PROTECTION_PROFILE, keys=(), changed_at=NOW)
    with pytest.raises(StoreError, match="retired"):
        replace(stored_key("a", StoredKeyRole.ACTIVE), retired_at=NOW)


# -- followers -------------------------------------------------------------------------------------------------


async def until(condition: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    """Wait (generously: a busy machine) until ``condition`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        assert loop.time() < deadline, f"never: {what}"
        await asyncio.sleep(0.05)


def test_a_notification_wakes_a_follower_on_another_store(postgres_url: str) -> None:
    async def steps(store: Store) -> None:
        follower = await opened(postgres_url)
        assert isinstance(follower, PostgresStore)
        try:
            await store.write_keyring(keyring(), expected_generation=0)
            # Shorter than the listener's own re-read (KEYRING_LISTEN_RECHECK_SECONDS): only NOTIFY wakes it in time.
            waiting = asyncio.create_task(follower.wait_for_keyring_change(1, 20.0))
            await until(lambda: follower.listening, "the follower listens")
            await store.write_keyring(keyring("k-2"), expected_generation=1)
            assert await waiting == 2
        finally:
            await follower.close()

    run(postgres_url, steps)


@pytest.mark.slow
def test_without_a_listener_a_follower_polls(store_url: str) -> None:
    async def steps(store: Store) -> None:
        follower = await opened(store_url, listen=False) if store.backend == "postgresql" else await opened(store_url)
        try:
            assert await follower.wait_for_keyring_change(0, 0) == 0  # no wait: the generation now
            waiting = asyncio.create_task(follower.wait_for_keyring_change(0, 30.0))
            await asyncio.sleep(0)
            await store.write_keyring(keyring(), expected_generation=0)
            assert await waiting == 1
            assert not isinstance(follower, PostgresStore) or not follower.listening
        finally:
            await follower.close()

    run(store_url, steps)


def test_a_lost_listening_connection_is_reopened_and_no_change_is_missed(postgres_url: str) -> None:
    async def steps(store: Store) -> None:
        follower = await opened(postgres_url)
        assert isinstance(follower, PostgresStore)
        try:
            waiting = asyncio.create_task(follower.wait_for_keyring_change(0, 60.0))
            await until(lambda: follower.listening, "the follower listens")
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                    (LISTENER_NAME,),
                )
            await until(lambda: not follower.listening, "the follower hears of the loss")
            await store.write_keyring(keyring(), expected_generation=0)  # while it may be down: polled
            assert await waiting == 1
            await until(lambda: follower.listening, "the follower listens again")
        finally:
            await follower.close()

    run(postgres_url, steps)


@pytest.mark.slow
def test_a_wait_is_bounded(store_url: str) -> None:
    async def steps(store: Store) -> None:
        for after, timeout in ((-1, 1.0), (0, -0.5), (0, MAX_KEYRING_WAIT_SECONDS + 1), (0, float("nan"))):
            with pytest.raises(StoreError) as refused:
                await store.wait_for_keyring_change(after, timeout)
            assert refused.value.reason is StoreErrorReason.INVALID_ARGUMENT
        assert await store.wait_for_keyring_change(0, 0.2) == 0  # nothing changed: the same generation

    run(store_url, steps)


# -- heartbeats ------------------------------------------------------------------------------------------------


def test_heartbeats_are_one_row_per_instance_ordered_by_name_and_stamped_by_the_store(store_url: str) -> None:
    async def steps(store: Store) -> None:
        before = datetime.now(UTC) - timedelta(seconds=1)
        for name in ("b", "c", "a"):
            recorded = await store.beat(beat(name))
            assert recorded.seen_at >= before  # the store's clock, not the NOW the beat carried
        again = await store.beat(beat("a", 7, fingerprint="v2:abc", admin_url="http://127.0.0.1:9/", process_id="p2"))
        beats = await store.heartbeats()
        assert [entry.instance for entry in beats] == ["a", "b", "c"]
        assert beats[0] == again
        assert (beats[0].generation, beats[0].fingerprint, beats[0].process_id) == (7, "v2:abc", "p2")
        assert beats[0].seen_at >= beats[1].seen_at
        assert await store.forget_instance("b") is True
        assert await store.forget_instance("b") is False
        assert [entry.instance for entry in await store.heartbeats()] == ["a", "c"]

    run(store_url, steps)


@pytest.mark.slow
def test_the_store_keeps_max_heartbeats_instances_and_refuses_one_more(store_url: str) -> None:
    async def steps(store: Store) -> None:
        names = [f"i-{index:04}" for index in range(MAX_HEARTBEATS)]
        for start in range(0, len(names), 64):
            await asyncio.gather(*(store.beat(beat(name)) for name in names[start : start + 64]))
        with pytest.raises(StoreError) as refused:
            await store.beat(beat("one-more"))
        assert refused.value.reason is StoreErrorReason.QUOTA
        await store.beat(beat(names[0], 2))  # a known instance still beats
        assert len(await store.heartbeats()) == MAX_HEARTBEATS
        await store.forget_instance(names[1])
        await store.beat(beat("one-more"))

    run(store_url, steps)


def test_heartbeat_fields_are_bounded_at_construction() -> None:
    beat("i" * MAX_KEY_CHARS, admin_url="h" * MAX_ADMIN_URL_CHARS)
    for changes in (
        {"instance": "i" * (MAX_KEY_CHARS + 1)},
        {"instance": ""},
        {"instance": "bad\nname"},
        {"admin_url": "h" * (MAX_ADMIN_URL_CHARS + 1)},
        {"generation": -1},
        {"max_state_lifetime_ms": -1},
        {"clock": datetime(2026, 8, 1)},  # naive
    ):
        with pytest.raises(StoreError) as refused:
            replace(beat("i"), **changes)  # type: ignore[arg-type]
        assert refused.value.reason is StoreErrorReason.INVALID_ARGUMENT, changes


# -- the rotation record ---------------------------------------------------------------------------------------


def test_the_rotation_record_is_a_compare_and_swap(store_url: str) -> None:
    async def steps(store: Store) -> None:
        assert await store.read_rotation() is None
        first = await store.write_rotation(rotation(), expected_version=0)
        assert first is not None
        assert first.version == 1
        assert await store.write_rotation(rotation(owner="bob"), expected_version=0) is None
        second = await store.write_rotation(rotation('{"step":"activated"}'), expected_version=1)
        assert second is not None
        assert second.version == 2
        assert await store.write_rotation(rotation('{"step":"lost"}'), expected_version=1) is None
        assert await store.read_rotation() == second
        assert await store.delete_rotation(expected_version=1) is False
        assert await store.delete_rotation(expected_version=2) is True
        assert await store.read_rotation() is None

    run(store_url, steps)


def test_a_rotation_record_holds_max_rotation_document_bytes_and_refuses_one_more(store_url: str) -> None:
    edge = '"' + "é" * ((MAX_ROTATION_DOCUMENT_BYTES - 2) // 2) + '"'
    assert len(edge.encode()) == MAX_ROTATION_DOCUMENT_BYTES
    with pytest.raises(StoreError) as refused:
        rotation(edge[:-1] + 'x"')
    assert refused.value.reason is StoreErrorReason.TOO_LARGE
    with pytest.raises(StoreError):
        rotation(owner="o" * (MAX_KEY_CHARS + 1))

    async def steps(store: Store) -> None:
        written = await store.write_rotation(rotation(edge, owner="o" * MAX_KEY_CHARS), expected_version=0)
        assert await store.read_rotation() == written

    run(store_url, steps)


# -- the rotation lock -----------------------------------------------------------------------------------------


def test_a_second_holder_of_the_rotation_lock_is_refused_naming_the_first(store_url: str) -> None:
    async def steps(store: Store) -> None:
        other = await opened(store_url)
        try:
            async with store.rotation_lock("alice@host-1"):
                for contender in (other, store):
                    with pytest.raises(StoreError) as refused:
                        async with contender.rotation_lock("bob@host-2"):
                            pytest.fail("two holders")
                    assert refused.value.reason is StoreErrorReason.LOCKED
                    assert "'alice@host-1' since 20" in str(refused.value)
            async with other.rotation_lock("bob@host-2"):
                with pytest.raises(StoreError, match="'bob@host-2' since"):
                    async with store.rotation_lock("alice@host-1"):
                        pytest.fail("two holders")
        finally:
            await other.close()

    run(store_url, steps)


def test_a_lock_owner_is_printable_and_bounded(store_url: str) -> None:
    async def steps(store: Store) -> None:
        async with store.rotation_lock("o" * MAX_KEY_CHARS):
            pass
        for owner in ("o" * (MAX_KEY_CHARS + 1), "", "line\nbreak"):
            with pytest.raises(StoreError) as refused:
                async with store.rotation_lock(owner):
                    pytest.fail("taken")
            assert refused.value.reason is StoreErrorReason.INVALID_ARGUMENT

    run(store_url, steps)


def test_the_sqlite_rotation_lock_is_a_private_file_beside_the_database(sqlite_store_url: str) -> None:
    async def steps(store: Store) -> None:
        async with store.rotation_lock("alice"):
            lock = Path(f"{StoreUrl.parse(sqlite_store_url).sqlite_path}.rotation-lock")
            assert stat.S_IMODE(lock.stat().st_mode) == 0o600

    run(sqlite_store_url, steps)


_HOLDER = """
import asyncio, sys
from soklet_core.store import open_store

async def main() -> None:
    store = open_store(sys.argv[1])
    await store.open()
    async with store.rotation_lock("holder-process"):
        print("held", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


@pytest.mark.slow
def test_the_rotation_lock_of_a_killed_process_is_free(store_url: str) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, store_url], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"

        async def steps(store: Store) -> None:
            with pytest.raises(StoreError, match="'holder-process' since") as refused:
                async with store.rotation_lock("second"):
                    pytest.fail("two holders")
            assert refused.value.reason is StoreErrorReason.LOCKED
            os.kill(holder.pid, signal.SIGKILL)
            await asyncio.to_thread(holder.wait, 60)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while True:  # PostgreSQL ends the killed session once it sees the socket closed
                try:
                    async with store.rotation_lock("second"):
                        return
                except StoreError as error:
                    if error.reason is not StoreErrorReason.LOCKED or loop.time() > deadline:
                        raise
                await asyncio.sleep(0.1)

        run(store_url, steps)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(60)


# -- schema ----------------------------------------------------------------------------------------------------


def test_a_store_of_the_first_schema_opens_and_gains_the_keyring_tables(tmp_path: Path) -> None:
    path = tmp_path / "store" / "soklet.db"
    path.parent.mkdir(mode=0o700)
    path.touch(mode=0o600)
    with sqlite3.connect(path) as connection:
        for statement in Statements(SQLITE).tables[:3]:  # soklet_schema, soklet_tasks, soklet_handles
            connection.execute(statement)
        connection.execute("INSERT INTO soklet_schema (version) VALUES (1)")
    connection.close()

    async def steps(store: Store) -> None:
        written = await store.write_keyring(keyring(), expected_generation=0)
        assert await store.read_keyring() == written

    run(f"sqlite://{path}", steps)


def test_a_postgresql_store_of_the_first_schema_opens_and_gains_the_keyring_tables(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        for statement in Statements(SQLITE).tables[:3]:
            connection.execute(statement)  # type: ignore[arg-type]
        connection.execute("INSERT INTO soklet_schema (version) VALUES (1)")

    async def steps(store: Store) -> None:
        written = await store.write_keyring(keyring(), expected_generation=0)
        assert await store.read_keyring() == written

    run(postgres_url, steps)
