"""``soklet fleet check --store URL``: a store-mode fleet judged from the store (SQLite, and PostgreSQL) with real
``soklet serve --keyring-from-store`` members, through the real command: converged only when every live member
applied the store's current generation (the target) with one fingerprint; members behind are named (equal to each
other is not enough) and ``--wait`` waits until they applied the target; a member that stopped beating is gone, not
counted; a member's clock beyond ``--max-skew`` fails with kind clock-skew."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from soklet_core.keys import KeyWrapper, LocalKek, ProtectionKey
from soklet_core.store import FleetKeyring, Heartbeat, open_store
from tests.cli.support_store_keyring import FleetStore, Member, wait_for
from tests.cli.test_keys_rotate_store import soklet, start_soklet

pytestmark = pytest.mark.slow


def _check(folder: Path, url: str, *extra: str) -> tuple[int, dict[str, object], str]:
    result = soklet(folder, "fleet", "check", "--store", url, "--json", *extra)
    document: dict[str, object] = json.loads(result.stdout)
    return result.returncode, document, result.stderr


def _change(url: str, kek: KeyWrapper, change: Callable[[FleetKeyring], Awaitable[object]]) -> None:
    """One change of the store's fleet keyring under ``kek``."""

    async def run() -> None:
        store = open_store(url)
        await store.open()
        try:
            await change(FleetKeyring(store, kek))
        finally:
            await store.close()

    asyncio.run(run())


def _beat(url: str, heartbeat: Heartbeat) -> None:
    async def write() -> None:
        store = open_store(url)
        await store.open()
        try:
            await store.beat(heartbeat)
        finally:
            await store.close()

    asyncio.run(write())


def test_converged_only_at_the_store_generation_and_wait_proves_the_target(
    tmp_path: Path, store_url: str, members: list[Member]
) -> None:
    fleet = FleetStore(tmp_path, store_url)
    fleet.initialize(ProtectionKey.generate("k1"))
    for name in ("web-1", "web-2"):
        members.append(Member(tmp_path, fleet, name))
    wait_for(lambda: _check(tmp_path, store_url)[0] == 0, 60)
    code, report, _err = _check(tmp_path, store_url)
    assert (code, report["status"], report["generation"]) == (0, "converged", 1)
    assert report["fingerprint"] == members[0].snapshot()["fingerprint"]["value"]
    assert sorted(member["instance"] for member in report["members"]) == ["web-1", "web-2"]  # type: ignore[attr-defined]
    # The store moves on under a KEK the members do not hold: they keep beating, equal to each other, behind the
    # store's generation (equal now is not converged).
    other, _material = LocalKek.generate()
    _change(store_url, fleet.kek, lambda keyring: keyring.rewrap(other))
    _change(store_url, other, lambda keyring: keyring.stage(ProtectionKey.generate("k2")))
    code, report, err = _check(tmp_path, store_url)
    assert (code, report["status"], report["generation"]) == (1, "behind", 3)
    assert report["behind"] == ["web-1", "web-2"]
    assert "fingerprint" not in report
    assert err.startswith("soklet: behind: web-1, web-2 not at the store's generation 3")
    # --wait waits for the target: it ends converged once the members applied the store's newest generation.
    waiting = start_soklet(tmp_path, "fleet", "check", "--store", store_url, "--wait", "2m", "--json")
    assert waiting.stderr is not None
    progress = waiting.stderr.readline()  # its first check found them behind: it waits
    assert progress.startswith("soklet: check 1: behind: web-1, web-2"), progress
    _change(store_url, other, lambda keyring: keyring.rewrap(fleet.kek))
    out, rest = waiting.communicate(timeout=180)
    assert waiting.returncode == 0, rest
    final = json.loads(out)
    assert (final["status"], final["generation"]) == ("converged", 4)
    assert final["checks"] > 1
    assert final["fingerprint"] == members[1].snapshot()["fingerprint"]["value"]
    # The human table names each member, its generation and its clock offset.
    table = soklet(tmp_path, "fleet", "check", "--store", store_url)
    assert table.returncode == 0, table.stderr
    assert "web-1" in table.stdout
    assert "converged: 2 live member(s) at generation 4" in table.stdout


def test_a_skewed_clock_fails_and_a_silent_member_is_gone(tmp_path: Path, sqlite_store_url: str) -> None:
    fleet = FleetStore(tmp_path, sqlite_store_url)
    loaded = fleet.initialize(ProtectionKey.generate("k1"))
    fingerprint = loaded.keyring.fingerprint().value
    now = datetime.now(UTC)

    def beat(name: str, clock_offset: timedelta) -> Heartbeat:
        return Heartbeat(
            instance=name,
            process_id="test-process",
            generation=1,
            fingerprint=fingerprint,
            clock=now + clock_offset,
            admin_url=None,
            seen_at=now,
            max_state_lifetime_ms=5000,
        )

    _beat(sqlite_store_url, beat("web-1", timedelta(0)))
    _beat(sqlite_store_url, beat("web-2", timedelta(seconds=8)))
    code, report, err = _check(tmp_path, sqlite_store_url)
    assert (code, report["status"]) == (1, "clock-skew")
    assert 7000 <= report["largest_skew_ms"] <= 9000  # type: ignore[operator]
    assert "clock-skew" in err
    code, report, _err = _check(tmp_path, sqlite_store_url, "--max-skew", "10s")
    assert (code, report["status"]) == (0, "converged")
    # Usage: --store reads members from the store, never from admin URLs.
    assert soklet(tmp_path, "fleet", "check", "--store", sqlite_store_url, "http://127.0.0.1:1").returncode == 2
    # Once no member beat for 15 s they are gone: reported, not counted, and nothing converged.
    wait_for(lambda: _check(tmp_path, sqlite_store_url)[1]["status"] == "no-member", 60)
    code, report, _err = _check(tmp_path, sqlite_store_url)
    assert code == 1
    assert [member["live"] for member in report["members"]] == [False, False]  # type: ignore[attr-defined]
