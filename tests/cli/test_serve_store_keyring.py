"""``soklet serve --keyring-from-store``: real members on loopback sharing one real store (SQLite, and PostgreSQL
on the run's throwaway cluster) take the fleet keyring from it. A change made through the store reaches every
member; heartbeats name each member's generation, fingerprint, clock and admin URL; a member that has seen a newer
generation than it can apply answers MCP requests 503 until it applied it; a restarted member loads the current
generation before it serves; the admin API changes the fleet keyring through the store; a wrong KEK and a store
without a keyring end the start in one line; a stopped PostgreSQL keeps a member ready and serving."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from soklet_core.keys import KeyWrapper, LocalKek, ProtectionKey, ProtectionKeyring, encode_base64url
from soklet_core.store import FleetKeyring, LoadedFleetKeyring, open_store
from tests.cli.support_store_keyring import FleetStore, Member, serve_fails, wait_for
from tests.fleet.support_served import multi_round
from tests.server.support import FORM_CAPS

pytestmark = pytest.mark.slow


def _start(members: list[Member], folder: Path, fleet: FleetStore, name: str, *extra: str) -> Member:
    member = Member(folder, fleet, name, *extra)
    members.append(member)
    return member


def _fingerprint(*keys: ProtectionKey) -> str:
    return ProtectionKeyring(keys[0], list(keys[1:])).fingerprint().value


def _holds(member: Member, generation: int, fingerprint: str) -> bool:
    snapshot = member.snapshot()
    return snapshot["generation"] == generation and snapshot["fingerprint"]["value"] == fingerprint


def test_a_change_through_the_store_reaches_every_member_and_their_heartbeats_say_so(
    tmp_path: Path, store_url: str, members: list[Member]
) -> None:
    fleet = FleetStore(tmp_path, store_url)
    first, second = ProtectionKey.generate("k1"), ProtectionKey.generate("k2")
    fleet.initialize(first)
    fleet_members = [_start(members, tmp_path, fleet, name) for name in ("web-1", "web-2", "web-3")]
    for member in fleet_members:
        assert member.facts["keyring_from_store"] is True
        assert member.facts["fleet_generation"] == 1
        assert member.facts["keyring_file"] is None
        assert member.ready().json() == {"status": "ready"}
    with httpx.Client(timeout=30) as client:
        # A flow started on one member completes on another: one keyring.
        assert multi_round(client, fleet_members[0].facts["url"], fleet_members[1].facts["url"], 1) is None
        fleet.stage(second)
        staged = _fingerprint(first, second)
        wait_for(lambda: all(_holds(member, 2, staged) for member in fleet_members))
        fleet.activate("k2")
        expected = _fingerprint(second, first)
        wait_for(lambda: all(_holds(member, 3, expected) for member in fleet_members))
        for member in fleet_members:
            assert member.snapshot()["active"] == "k2"
            assert member.metric("soklet_fleet_generation") == "3.0"
        assert multi_round(client, fleet_members[2].facts["url"], fleet_members[0].facts["url"], 3) is None

    def beats_current() -> bool:
        beats = fleet.heartbeats()
        return all(
            name in beats and beats[name].generation == 3 and beats[name].fingerprint == expected
            for name in ("web-1", "web-2", "web-3")
        )

    wait_for(beats_current)
    beats = fleet.heartbeats()
    for member in fleet_members:
        beat = beats[member.name]
        assert beat.process_id == member.snapshot()["process_id"]
        assert beat.admin_url == member.admin_url
        assert beat.max_state_lifetime_ms == 15 * 60 * 1000
        assert abs(beat.clock - datetime.now(UTC)) < timedelta(minutes=5)
        assert beat.clock.tzinfo is not None
    for member in fleet_members:
        log = member.stop()
        assert "actor=store action=follow" in log
        assert encode_base64url(second.material) not in log


def test_a_member_that_cannot_apply_a_newer_generation_is_not_ready_until_it_can(
    tmp_path: Path, store_url: str, members: list[Member]
) -> None:
    fleet = FleetStore(tmp_path, store_url)
    first = ProtectionKey.generate("k1")
    fleet.initialize(first)
    member = _start(members, tmp_path, fleet, "web-1")
    assert member.ready().status_code == 200
    # The keyring is re-wrapped under a KEK this member does not hold (generation 2: the same keys, which it
    # follows without unwrapping), then a key is staged under that KEK (generation 3): it cannot unwrap it.
    other, _material = LocalKek.generate()
    _rewrap(store_url, fleet.kek, other)
    wait_for(lambda: member.snapshot()["generation"] == 2)
    assert member.ready().status_code == 200
    _change(store_url, other, lambda fleet_keyring: fleet_keyring.stage(ProtectionKey.generate("k2")))
    wait_for(lambda: member.ready().status_code == 503)
    refusal = member.ready()
    assert refusal.json() == {"status": "not-ready", "reason": "generation-behind"}
    assert refusal.headers["retry-after"] == "1"
    refused = member.client.call("catalog.continue", {}, capabilities=FORM_CAPS)
    assert (refused.status, refused.headers["retry-after"], refused.error["code"]) == (503, "1", -32603)
    assert member.snapshot()["generation"] == 2  # what it holds is still generation 2
    assert member.metric("soklet_fleet_generation") == "3.0"
    # Wrapped back under the fleet's KEK (generation 4): the member applies it, k2 included, and serves again.
    _rewrap(store_url, other, fleet.kek)
    wait_for(lambda: member.ready().status_code == 200)
    snapshot = member.snapshot()
    assert (snapshot["generation"], snapshot["verification"]) == (4, ["k2"])
    served = member.client.call("catalog.continue", {}, capabilities=FORM_CAPS)
    assert served.result["resultType"] == "input_required"
    log = member.stop()
    assert "not ready (generation-behind)" in log
    assert "cannot be applied: wrong-kek" in log


def _change(
    store_url: str, kek: KeyWrapper, change: Callable[[FleetKeyring], Awaitable[LoadedFleetKeyring]]
) -> LoadedFleetKeyring:
    """One change of the fleet keyring made with ``kek``, on a store opened for it."""

    async def session() -> LoadedFleetKeyring:
        store = open_store(store_url)
        await store.open()
        try:
            return await change(FleetKeyring(store, kek))
        finally:
            await store.close()

    return asyncio.run(session())


def _rewrap(store_url: str, old: KeyWrapper, new: KeyWrapper) -> None:
    _change(store_url, old, lambda fleet_keyring: fleet_keyring.rewrap(new))


def test_a_restarted_member_loads_the_current_generation_before_it_serves(
    tmp_path: Path, sqlite_store_url: str, members: list[Member]
) -> None:
    fleet = FleetStore(tmp_path, sqlite_store_url)
    first, second = ProtectionKey.generate("k1"), ProtectionKey.generate("k2")
    fleet.initialize(first)
    member = _start(members, tmp_path, fleet, "web-1")
    member.stop()
    # While it was down the fleet rotated.
    fleet.stage(second)
    fleet.activate("k2")
    again = _start(members, tmp_path, fleet, "web-1")
    # The first answer it gives is already the current generation: it never served the old one.
    assert again.facts["fleet_generation"] == 3
    assert again.facts["active_key_id"] == "k2"
    assert again.ready().json() == {"status": "ready"}
    assert _holds(again, 3, _fingerprint(second, first))
    # SIGHUP asks for a load now (nothing new here): the member goes on serving.
    again.process.send_signal(signal.SIGHUP)
    assert again.ready().json() == {"status": "ready"}
    assert again.process.poll() is None
    again.stop()


def test_the_admin_api_changes_the_fleet_keyring_through_the_store(
    tmp_path: Path, sqlite_store_url: str, members: list[Member]
) -> None:
    fleet = FleetStore(tmp_path, sqlite_store_url)
    first, second = ProtectionKey.generate("k1"), ProtectionKey.generate("k2")
    fleet.initialize(first)
    one = _start(members, tmp_path, fleet, "web-1")
    two = _start(members, tmp_path, fleet, "web-2")
    staged = one.admin("/v1/keyring/stage", {"id": "k2", "material": encode_base64url(second.material)})
    assert staged.status_code == 200, staged.text
    assert staged.json()["generation"] == 2
    loaded = fleet.load()
    assert loaded is not None
    assert (loaded.generation, set(loaded.keyring.key_ids)) == (2, {"k1", "k2"})
    wait_for(lambda: _holds(two, 2, _fingerprint(first, second)))
    assert two.admin("/v1/keyring/activate", {"id": "k2"}).status_code == 200
    wait_for(lambda: _holds(one, 3, _fingerprint(second, first)))
    # The same id with other bytes is refused by the store's keyring rules; nothing is written.
    other = encode_base64url(ProtectionKey.generate("k2").material)
    conflict = one.admin("/v1/keyring/stage", {"id": "k2", "material": other})
    assert (conflict.status_code, conflict.json()) == (409, {"error": "conflicting-material"})
    # Removing the former key before the state lifetime passed is refused too.
    early = one.admin("/v1/keyring/remove", {"id": "k1"})
    assert (early.status_code, early.json()) == (409, {"error": "retired-too-recently"})
    loaded = fleet.load()
    assert loaded is not None
    assert loaded.generation == 3
    assert "actor=ops action=stage key=k2 generation=2" in one.stop()
    assert "actor=ops action=activate key=k2 generation=3" in two.stop()


def test_a_wrong_kek_or_a_store_without_a_keyring_ends_the_start_in_one_line(
    tmp_path: Path, sqlite_store_url: str
) -> None:
    fleet = FleetStore(tmp_path, sqlite_store_url)
    fleet.create()
    empty = serve_fails("--store", sqlite_store_url, "--keyring-from-store", "--kek-file", str(fleet.kek_file))
    assert empty.returncode == 1, empty.stderr
    assert empty.stderr.count("\n") == 1
    assert "holds no fleet keyring" in empty.stderr
    assert "soklet keys generate --store URL --kek-file FILE" in empty.stderr
    fleet.initialize(ProtectionKey.generate("k1"))
    wrong = tmp_path / "wrong"
    wrong.mkdir(mode=0o700)
    other = FleetStore(wrong, sqlite_store_url)  # a KEK file of its own, another KEK
    refused = serve_fails("--store", sqlite_store_url, "--keyring-from-store", "--kek-file", str(other.kek_file))
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.count("\n") == 1
    assert "wrong-kek" in refused.stderr
    assert "Traceback" not in refused.stderr
    loaded = fleet.load()
    assert loaded is not None
    assert loaded.generation == 1  # nothing written
    assert fleet.heartbeats() == {}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (("--keyring-from-store", "--kek-file", "KEK"), "needs --store"),
        (("--keyring-from-store", "--store", "STORE"), "key-encryption key"),
        (("--keyring-from-store", "--store", "STORE", "--kek-file", "KEK", "--dev-key"), "excludes --keyring"),
        (("--keyring-from-store", "--store", "STORE", "--kek-file", "KEK", "--stdio"), "--stdio"),
        (("--store", "STORE", "--kek-file", "KEK"), "or --keyring-from-store"),
    ],
)
def test_store_mode_usage_errors(
    tmp_path: Path, sqlite_store_url: str, arguments: tuple[str, ...], problem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = FleetStore(tmp_path, sqlite_store_url)
    monkeypatch.delenv("SOKLET_STORE", raising=False)
    replaced = [
        {"KEK": str(fleet.kek_file), "STORE": sqlite_store_url}.get(argument, argument) for argument in arguments
    ]
    completed = serve_fails(*replaced)
    assert completed.returncode == 2, completed.stderr
    assert problem in completed.stderr


def test_a_stopped_postgresql_keeps_a_member_ready_and_serving(tmp_path: Path, members: list[Member]) -> None:
    from tools.postgres import PostgresCluster

    with PostgresCluster() as cluster:
        fleet = FleetStore(tmp_path, cluster.url)
        fleet.initialize(ProtectionKey.generate("k1"))
        member = _start(members, tmp_path, fleet, "web-1")
        other = _start(members, tmp_path, fleet, "web-2")
        assert member.metric("soklet_store_up") == "1.0"
        cluster.stop()
        wait_for(lambda: member.metric("soklet_store_up") == "0.0")
        wait_for(lambda: "the store refused or did not answer" in member.log())
        assert member.ready().json() == {"status": "ready"}
        assert httpx.get(member.admin_url + "/v1/health", timeout=20).json() == {"status": "ok"}
        with httpx.Client(timeout=30) as client:
            # The keyring held keeps serving, across members too.
            assert multi_round(client, member.facts["url"], other.facts["url"], 1) is None
        assert member.snapshot()["generation"] == 1
        # A change asked of a member while the store is down is refused as the store's state; nothing changed.
        key = ProtectionKey.generate("k2")
        refused = member.admin("/v1/keyring/stage", {"id": "k2", "material": encode_base64url(key.material)})
        assert (refused.status_code, refused.json()) == (503, {"error": "unavailable"})
        assert member.snapshot()["verification"] == []
        member.stop()
        other.stop()
