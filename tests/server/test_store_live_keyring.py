"""``StoreKeyring`` over a real SQLite store, its follower running on an event loop of its own (as the serving loop
of ``soklet serve``): a generation that drops a key still held by a seal in flight holds the instance back until
the seal ends, never swapping the key away under it; admin changes go through the store and report the fleet
generation; the times come from the store."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from soklet_core.keys import KeyInUse, KeyringManager, LocalKek, ProtectionKey, ProtectionKeyring
from soklet_core.mcp.server.ops._readiness import NotReady, Readiness
from soklet_core.mcp.server.ops._store_keyring import StoreKeyring
from soklet_core.store import FleetKeyring, SqliteStore, StoreUrl, sqlite_url

_T = TypeVar("_T")


@dataclass
class Running:
    loop: asyncio.AbstractEventLoop
    fleet: FleetKeyring
    keyring: StoreKeyring
    readiness: Readiness
    manager: KeyringManager

    def on_loop(self, work: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(60)

    def change(self, change: Callable[[FleetKeyring], Awaitable[Any]]) -> None:
        async def run() -> None:
            await change(self.fleet)

        self.on_loop(run())


def _wait(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    store = SqliteStore(StoreUrl.parse(sqlite_url(tmp_path / "store" / "soklet.db").text))
    kek, _material = LocalKek.generate()
    fleet = FleetKeyring(store, kek)

    async def start() -> Running:
        await store.open()
        loaded = await fleet.initialize(ProtectionKeyring(ProtectionKey.generate("k1")))
        manager = KeyringManager(loaded.keyring)
        readiness = Readiness(NotReady.KEYRING_NOT_LOADED)
        keyring = StoreKeyring(
            manager,
            fleet,
            loaded,
            readiness=readiness,
            instance="web-1",
            process_id="p" * 22,
            max_state_lifetime=timedelta(minutes=15),
        )
        return Running(loop, fleet, keyring, readiness, manager)

    state = asyncio.run_coroutine_threadsafe(start(), loop).result(60)
    following = asyncio.run_coroutine_threadsafe(state.keyring.run(), loop)
    _wait(lambda: state.keyring.running)
    try:
        yield state
    finally:
        following.cancel()
        asyncio.run_coroutine_threadsafe(store.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_loaded_before_serving_is_ready_and_reports_the_fleet_generation(running: Running) -> None:
    assert running.readiness.ready
    snapshot = running.keyring.snapshot()
    assert (snapshot.generation, snapshot.active_key_id) == (1, "k1")
    assert running.keyring.created("k1") is not None
    assert running.keyring.retired("k1") is None


@pytest.mark.slow
def test_a_generation_that_drops_a_key_held_by_a_seal_waits_for_the_seal(running: Running) -> None:
    second = ProtectionKey.generate("k2")
    reservation = running.manager.reserve_active_key()
    with reservation:  # a seal with k1 is in flight
        running.change(lambda fleet: fleet.rotate(second))
        running.change(lambda fleet: fleet.remove("k1", max_state_lifetime=timedelta(0), force=True))
        # Generation 3 drops k1: the member has seen it, cannot apply it yet, and is held back.
        _wait(lambda: running.keyring.seen_generation == 3)
        _wait(lambda: running.readiness.reason is NotReady.GENERATION_BEHIND)
        assert running.manager.current().active_key.id == "k1"
        assert running.keyring.generation == 1
    # The seal ended: the next try applies generation 3 and the member is ready again.
    _wait(lambda: running.readiness.ready)
    assert running.keyring.generation == 3
    assert running.manager.current().key_ids == ("k2",)


def test_admin_changes_go_through_the_store_and_are_live_at_once(running: Running) -> None:
    second = ProtectionKey.generate("k2")
    staged = running.keyring.stage(second, actor="ops")
    assert (staged.generation, staged.verification_key_ids) == (2, ("k2",))
    activated = running.keyring.activate("k2", actor="ops")
    assert (activated.generation, activated.active_key_id) == (3, "k2")
    assert running.keyring.retired("k1") is not None
    stored = running.on_loop(running.fleet.load())
    assert stored is not None
    assert (stored.generation, stored.keyring.active_key.id) == (3, "k2")
    # A key held by a seal here is not removed from the fleet keyring: refused before the store is asked.
    with running.manager.reserve_active_key(), pytest.raises(KeyInUse):
        running.keyring.remove("k2", actor="ops")
    assert running.readiness.ready
