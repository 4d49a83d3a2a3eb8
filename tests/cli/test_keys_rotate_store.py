"""``soklet keys rotate --store URL``: a fleet rotation through a real PostgreSQL store with real ``soklet serve
--keyring-from-store`` members on loopback, run by the real command in a subprocess.

Clients complete two-round flows across members (some answering late) while the store rotates: no continuation
breaks. Two rotations started together: exactly one runs, the other is refused at once naming the holder; the
runner, killed with SIGKILL during its wait, is finished by ``--resume`` from another working folder. Short state
lifetimes keep the waits to seconds."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from soklet_core.fleet.store_rotation import StoreRotation, StoreRotationStep
from soklet_core.store import open_store
from tests.cli.support_store_keyring import FleetStore, Member, wait_for
from tests.fleet.support_served import multi_round
from tests.fleet.support_store_fleet import GenerationWatch, Load, Slot

pytestmark = pytest.mark.slow


def soklet(folder: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``soklet ARGS`` in ``folder``, to its end."""
    return subprocess.run(
        [sys.executable, "-m", "soklet_cli", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def start_soklet(folder: Path, *args: str) -> subprocess.Popen[str]:
    """``soklet ARGS`` in ``folder``, started."""
    return subprocess.Popen(
        [sys.executable, "-m", "soklet_cli", *args],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def generate(folder: Path, fleet: FleetStore) -> dict[str, Any]:
    """``keys generate --store``: the fleet keyring's first key."""
    result = soklet(folder, "keys", "generate", "--store", fleet.url, "--kek-file", str(fleet.kek_file), "--json")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def record_step(url: str) -> StoreRotationStep | None:
    """The step the store's rotation record reached, ``None`` without a record."""

    async def read() -> StoreRotationStep | None:
        store = open_store(url)
        await store.open()
        try:
            stored = await store.read_rotation()
            return None if stored is None else StoreRotation.from_json(stored.document).step
        finally:
            await store.close()

    return asyncio.run(read())


def test_a_store_rotation_breaks_no_continuation_across_three_members(
    tmp_path: Path, postgres_url: str, members: list[Member]
) -> None:
    fleet = FleetStore(tmp_path, postgres_url)
    first = generate(tmp_path, fleet)
    slots = [Slot(name) for name in ("web-1", "web-2", "web-3")]
    for slot in slots:
        members.append(slot.start(tmp_path, fleet))
    watch = GenerationWatch(postgres_url)
    load = Load(slots, watch, clients=4)
    try:
        wait_for(lambda: load.each_completed(1), 120)
        store = ("--store", postgres_url, "--kek-file", str(fleet.kek_file))
        dry = soklet(tmp_path, "keys", "rotate", *store, "--dry-run", "--id", "k2", "--json")
        assert dry.returncode == 0, dry.stderr
        plan = json.loads(dry.stdout)
        assert sorted(member["instance"] for member in plan["members"] if member["live"]) == [
            "web-1",
            "web-2",
            "web-3",
        ]
        assert 5000 <= plan["wait_ms"] < 60000  # the members' 5 s lifetime plus the skew between them
        rotation = soklet(tmp_path, "keys", "rotate", *store, "--generate", "--id", "k2", "--yes", "--json")
        assert rotation.returncode == 0, rotation.stderr
        outcome = json.loads(rotation.stdout)
        assert (outcome["status"], outcome["new_key"], outcome["former_key"]) == ("rotated", "k2", first["id"])
        assert outcome["excluded"] == []
        assert outcome["generation"] == 4  # stage, activate, remove: one generation each
        # Progress went to stderr, one line per step; stdout holds the one JSON document.
        assert "step wait: key k2" in rotation.stderr
        assert "every live member (3) applied generation 4" in rotation.stderr
        completed = load.tally.completed
        wait_for(lambda: load.tally.completed >= completed + 4, 120)
    finally:
        load.stop()
        watch.close()
    assert load.tally.failures == []
    assert load.tally.unserved == 0
    for member in members:
        snapshot = member.snapshot()
        assert (snapshot["generation"], snapshot["active"]) == (4, "k2")
        assert snapshot["fingerprint"]["value"] == outcome["fingerprint"]["value"]
    assert record_step(postgres_url) is None


def test_one_rotation_at_a_time_and_a_killed_rotation_is_resumed_from_another_folder(
    tmp_path: Path, postgres_url: str, members: list[Member]
) -> None:
    fleet = FleetStore(tmp_path, postgres_url)
    first = generate(tmp_path, fleet)
    # A 20 s state lifetime: the rotation's wait is long enough to be caught in it.
    for name in ("web-1", "web-2"):
        members.append(Member(tmp_path, fleet, name, "--state-lifetime", "20s"))
    store = ("--store", postgres_url, "--kek-file", str(fleet.kek_file))
    runs = [start_soklet(tmp_path, "keys", "rotate", *store, "--generate", "--yes", "--json") for _ in range(2)]
    try:
        # Exactly one runs; the other is refused at once naming the holder (its pid) and since when.
        deadline = time.monotonic() + 120
        while all(run.poll() is None for run in runs):
            assert time.monotonic() < deadline, "neither rotation ended"
            time.sleep(0.1)
        loser = next(run for run in runs if run.poll() is not None)
        winner = next(run for run in runs if run is not loser)
        out, err = loser.communicate(timeout=30)
        assert loser.returncode == 1, err
        assert json.loads(out)["kind"] == "locked"
        assert err.startswith("soklet: locked: another rotation runs: the rotation lock is held by")
        assert f"pid {winner.pid}" in err
        assert "since" in err
        # The winner reaches its wait (the activation applied everywhere): SIGKILL it there.
        wait_for(lambda: record_step(postgres_url) is StoreRotationStep.ACTIVE, 120)
        assert winner.poll() is None
        os.kill(winner.pid, signal.SIGKILL)
        winner.communicate(timeout=30)
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.communicate()
    assert record_step(postgres_url) is StoreRotationStep.ACTIVE
    # Another operator, in another folder, finishes it: the record and the lock live in the store.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resumed = soklet(elsewhere, "keys", "rotate", *store, "--resume", "--yes", "--json")
    assert resumed.returncode == 0, resumed.stderr
    outcome = json.loads(resumed.stdout)
    assert outcome["status"] == "rotated"
    assert outcome["former_key"] == first["id"]
    assert outcome["active"] == outcome["new_key"]
    assert "resuming the rotation" in resumed.stderr
    assert record_step(postgres_url) is None
    listed = soklet(elsewhere, "keys", "list", *store, "--json")
    assert [key["id"] for key in json.loads(listed.stdout)["keys"]] == [outcome["new_key"]]
    with httpx.Client(timeout=30) as client:
        wait_for(lambda: all(member.snapshot()["generation"] == outcome["generation"] for member in members), 60)
        assert multi_round(client, members[0].facts["url"], members[1].facts["url"], 1) is None
    assert list(elsewhere.iterdir()) == []  # nothing left in the folder: no record file, no lock file
