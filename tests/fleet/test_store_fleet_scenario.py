"""The store-mode fleet scenario on real processes: five ``soklet serve --keyring-from-store`` members on one real
PostgreSQL store, ten clients running the two-round ``catalog.continue`` flow without pause, each retry on another
member than its first round, every other client answering late (after the store's generation changed, or after a
pause). Under that load:

* ``soklet keys rotate --store`` rotates the fleet (stage, every member applied it, activate, applied, the wait of
  the 5 s state lifetime, remove, applied);
* one member is killed (``SIGKILL``) during it and restarted at the same address: while down it serves nothing,
  and it comes back holding the current generation before it answers anything;
* the keyring is re-wrapped under a new KEK: no fingerprint changes, every member stays ready and follows it, and
  members restarted onto the new KEK serve beside the others.

A 503 from a member that is not ready, or a member that is not there, sends the request to the next member (as a
load balancer would) and is no failure; a continuation that another member refuses is. The test asserts none
failed, and that some retries came after a key change."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from soklet_core.keys import KeyWrapper, ProtectionKey
from soklet_core.store import FleetKeyring, open_store
from tests.cli.support_store_keyring import FleetStore, wait_for
from tests.fleet.support_store_fleet import GenerationWatch, Load, Slot

pytestmark = pytest.mark.slow

NAMES = ("web-1", "web-2", "web-3", "web-4", "web-5")
CLIENTS = 10
#: A bound for the whole rotation (its wait is the 5 s lifetime; each step converges in about a second).
ROTATION_SECONDS = 180
#: How many members are restarted onto the new KEK after the rewrap (the rest keep the former one in memory).
RESTARTED_ONTO_NEW_KEK = 2


@pytest.fixture
def slots() -> Iterator[list[Slot]]:
    """The five members' places; every member still running afterwards is killed."""
    made = [Slot(name) for name in NAMES]
    yield made
    for slot in made:
        if slot.member is not None:
            slot.member.kill()


def _start_all(slots: list[Slot], folder: Path, fleet: FleetStore) -> None:
    # In parallel: five Python starts one after the other are slow on a busy two-core machine.
    errors: list[BaseException] = []

    def start(slot: Slot) -> None:
        try:
            slot.start(folder, fleet)
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=start, args=(slot,)) for slot in slots]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _snapshots(slots: list[Slot]) -> list[dict[str, Any]]:
    return [slot.member.snapshot() for slot in slots if slot.member is not None]


def _all_hold(slots: list[Slot], generation: int, fingerprint: str | None = None) -> bool:
    snapshots = _snapshots(slots)
    return len(snapshots) == len(slots) and all(
        snapshot["generation"] == generation and fingerprint in (None, snapshot["fingerprint"]["value"])
        for snapshot in snapshots
    )


def _all_ready(slots: list[Slot]) -> bool:
    return all(slot.member is not None and slot.member.ready().status_code == 200 for slot in slots)


def _rewrap(url: str, old: KeyWrapper, new: KeyWrapper) -> int:
    async def session() -> int:
        store = open_store(url)
        await store.open()
        try:
            return (await FleetKeyring(store, old).rewrap(new)).generation
        finally:
            await store.close()

    return asyncio.run(session())


def _refused(url: str) -> bool:
    try:
        httpx.get(url, timeout=10)
    except httpx.ConnectError:
        return True
    return False


def test_rotation_restart_and_rewrap_under_load_break_no_continuation(
    tmp_path: Path, postgres_url: str, slots: list[Slot]
) -> None:
    fleet = FleetStore(tmp_path, postgres_url)
    fleet.initialize(ProtectionKey.generate("k1"))
    _start_all(slots, tmp_path, fleet)
    watch = GenerationWatch(postgres_url)
    load = Load(slots, watch, CLIENTS)
    rotation: subprocess.Popen[str] | None = None
    progress: list[str] = []
    try:
        wait_for(lambda: load.each_completed(2), 120)

        # 1. A store rotation (soklet keys rotate --store); one member killed during it, then restarted.
        command = [sys.executable, "-m", "soklet_cli", "keys", "rotate", "--store", postgres_url, "--kek-file"]
        command += [str(fleet.kek_file), "--generate", "--id", "k2", "--yes", "--json"]
        rotation = subprocess.Popen(
            command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
        )
        assert rotation.stderr is not None
        for line in rotation.stderr:
            progress.append(line)
            if line.startswith("step staged:"):  # the new key is staged: the rotation waits for every member
                break
        victim = slots[-1]
        assert victim.member is not None
        victim.member.process.kill()
        victim.member.process.wait(30)
        victim.member.kill()
        # Down: nothing answers at its address, neither MCP nor the admin probes.
        assert _refused(victim.url)
        assert _refused(f"http://127.0.0.1:{victim.admin_port}/v1/ready")
        newest = watch.generation
        restarted = victim.start(tmp_path, fleet)
        # Its first word is already the store's newest generation (the stage at least): it loaded it before it
        # listened, so it never served the generation it held when it was killed.
        assert restarted.facts["fleet_generation"] >= max(newest, 2)
        assert restarted.snapshot()["generation"] >= max(newest, 2)
        out, err = rotation.communicate(timeout=ROTATION_SECONDS)
        progress.append(err)
        assert rotation.returncode == 0, "".join(progress) + out
        assert json.loads(out)["status"] == "rotated"
        removed = watch.generation
        wait_for(lambda: _all_hold(slots, removed))
        snapshots = _snapshots(slots)
        assert {snapshot["active"] for snapshot in snapshots} == {"k2"}
        assert all(snapshot["verification"] == [] for snapshot in snapshots)
        fingerprint = snapshots[0]["fingerprint"]["value"]
        assert {snapshot["fingerprint"]["value"] for snapshot in snapshots} == {fingerprint}
        rotated = load.tally.completed

        # 2. A KEK rewrap under load: the same keys, the same fingerprint; every member follows it and stays ready.
        (tmp_path / "next").mkdir(mode=0o700)
        renewed = FleetStore(tmp_path / "next", postgres_url)
        generation = _rewrap(postgres_url, fleet.kek, renewed.kek)
        assert generation == removed + 1
        wait_for(lambda: _all_hold(slots, generation, fingerprint) and _all_ready(slots))
        # Then members restarted onto the new KEK, one at a time, under load, serve beside those on the former one.
        for slot in slots[:RESTARTED_ONTO_NEW_KEK]:
            assert slot.member is not None
            slot.member.stop()
            member = slot.start(tmp_path, renewed)
            assert member.facts["fleet_generation"] == generation
            assert member.snapshot()["fingerprint"]["value"] == fingerprint
        wait_for(lambda: load.tally.completed >= rotated + 2 * CLIENTS, 120)
    finally:
        if rotation is not None and rotation.poll() is None:
            rotation.kill()
            rotation.wait()
        load.stop()
        watch.close()
    tally = load.tally
    print(
        f"store fleet scenario: {tally.completed} flows completed, {len(tally.failures)} failed, "
        f"{tally.straddled} retried after a key change, {tally.rerouted} requests rerouted "
        f"({tally.not_ready} answered 503), {tally.unserved} unserved"
    )
    assert tally.failures == []
    assert tally.unserved == 0
    # Late answers did cross key changes (the stage, the activation, the removal, the rewrap).
    assert tally.straddled > 0
    for slot in slots:
        assert slot.member is not None
        log = slot.member.stop()
        assert "Traceback" not in log
