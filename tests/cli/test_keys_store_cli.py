"""``soklet keys generate|list|stage|activate|remove|export|rotate --store URL``: the keys commands on the fleet
keyring in a real store (SQLite, and PostgreSQL on the run's throwaway cluster), through the real command in
subprocesses. Every output is scanned for every key's material (the ``soklet`` runner does)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from soklet_core.fleet.store_rotation import StoreRotationStep
from soklet_core.keys import LocalKek, decode_base64url
from soklet_core.store import FleetKeyring, Heartbeat, LoadedFleetKeyring, open_store
from tests.cli.support_store_keyring import wait_for
from tests.cli.test_keys_rotate_store import record_step
from tests.conftest import Soklet


def _kek(soklet: Soklet, name: str = "kek") -> LocalKek:
    result = soklet.run("kek", "generate", "--output", name)
    assert result.returncode == 0, result.stderr
    material = decode_base64url((soklet.cwd / name).read_text().strip())
    soklet.remember(material)
    return LocalKek(material)


def _load(url: str, kek: LocalKek) -> LoadedFleetKeyring | None:
    async def read() -> LoadedFleetKeyring | None:
        store = open_store(url)
        await store.open()
        try:
            return await FleetKeyring(store, kek).load()
        finally:
            await store.close()

    return asyncio.run(read())


def _remember_keys(soklet: Soklet, url: str, kek: LocalKek) -> LoadedFleetKeyring:
    loaded = _load(url, kek)
    assert loaded is not None
    for key_id in loaded.keyring.key_ids:
        key = loaded.keyring.key(key_id)
        assert key is not None
        soklet.remember(key)
    return loaded


def _ok(result: object) -> dict[str, object]:
    assert getattr(result, "returncode", None) == 0, getattr(result, "stderr", "")
    document: dict[str, object] = json.loads(getattr(result, "stdout", ""))
    return document


def _one_line(result: object, code: int) -> str:
    assert getattr(result, "returncode", None) == code, getattr(result, "stderr", "")
    stderr: str = getattr(result, "stderr", "")
    assert stderr.startswith("soklet: "), stderr
    assert stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr
    return stderr


@pytest.mark.slow
def test_every_keys_command_works_on_the_store_and_never_prints_material(soklet: Soklet, store_url: str) -> None:
    kek = _kek(soklet)
    store = ("--store", store_url, "--kek-file", "kek")
    created = _ok(soklet.run("keys", "generate", *store, "--id", "k1", "--json"))
    assert (created["id"], created["role"], created["generation"], created["kek_id"]) == ("k1", "active", 1, kek.kek_id)
    # A second generate is refused, pointing to a rotation; nothing is written.
    again = _one_line(soklet.run("keys", "generate", *store), 1)
    assert "keys rotate --store" in again
    staged = _ok(soklet.run("keys", "stage", *store, "--generate", "--id", "k2", "--json"))
    assert (staged["role"], staged["changed"], staged["generation"]) == ("verification", True, 2)
    listed = _ok(soklet.run("keys", "list", *store, "--json"))
    assert listed["generation"] == 2
    assert listed["active"] == "k1"
    keys = listed["keys"]
    assert isinstance(keys, list)
    assert [(key["id"], key["role"], key["kek_id"], key["retired"]) for key in keys] == [
        ("k1", "active", kek.kek_id, None),
        ("k2", "verification", kek.kek_id, None),
    ]
    loaded = _remember_keys(soklet, store_url, kek)
    assert listed["fingerprint"] == loaded.keyring.fingerprint().to_json()
    table = soklet.run("keys", "list", *store)
    assert table.returncode == 0
    assert "generation 2" in table.stdout
    assert kek.kek_id in table.stdout
    activated = _ok(soklet.run("keys", "activate", *store, "k2", "--json"))
    assert (activated["active"], activated["former_active"], activated["generation"]) == ("k2", "k1", 3)
    # k1 stopped sealing just now: removing it is refused (nothing written) until --force.
    early = _one_line(soklet.run("keys", "remove", *store, "k1"), 1)
    assert "stopped sealing less than the state lifetime (15m) ago" in early
    assert _ok(soklet.run("keys", "list", *store, "--json"))["generation"] == 3
    removed = _ok(soklet.run("keys", "remove", *store, "k1", "--force", "--json"))
    assert (removed["removed"], removed["generation"]) == ("k1", 4)
    _one_line(soklet.run("keys", "remove", *store, "k2", "--force"), 1)  # the active key
    # Material only on explicit request: keys export.
    exported = soklet.run("keys", "export", *store, "k2")
    assert exported.returncode == 0, exported.stderr
    key = loaded.keyring.key("k2")
    assert key is not None
    assert decode_base64url(exported.stdout.strip()) == key.material
    written = soklet.run("keys", "export", *store, "k2", "--output", "k2.key", "--json")
    assert _ok(written)["check_value"] == key.check_value_text
    assert (soklet.cwd / "k2.key").stat().st_mode & 0o777 == 0o600


@pytest.mark.slow
def test_store_mode_usage_errors_and_a_wrong_kek_are_refused_in_one_line(soklet: Soklet, store_url: str) -> None:
    _kek(soklet)
    _kek(soklet, "other-kek")
    store = ("--store", store_url, "--kek-file", "kek")
    _ok(soklet.run("keys", "generate", *store, "--json"))
    assert "--kek-file" in _one_line(soklet.run("keys", "list", "--store", store_url), 2)
    assert "--keyring" in _one_line(soklet.run("keys", "list", *store, "--keyring", "ring.toml"), 2)
    assert "--fleet" in _one_line(soklet.run("keys", "rotate", *store, "--fleet", "fleet.toml", "--yes"), 2)
    assert "--state-lifetime" in _one_line(soklet.run("keys", "rotate", *store, "--state-lifetime", "5m", "--yes"), 2)
    assert "--store" in _one_line(soklet.run("keys", "rotate", "--if-older-than", "30d"), 2)
    _one_line(soklet.run("keys", "rotate", *store, "--resume", "--abort", "--yes"), 2)
    _one_line(soklet.run("keys", "rotate", *store, "--generate"), 2)  # no --yes and no terminal
    assert soklet.run("keys", "rotate", *store, "--if-older-than", "367d", "--yes").returncode == 2
    # A wrong KEK: one line, exit 1, nothing written (the generation stays).
    before = _ok(soklet.run("keys", "list", *store, "--json"))["generation"]
    for command in (("keys", "stage", "--generate"), ("keys", "list"), ("keys", "rotate", "--generate", "--yes")):
        refusal = _one_line(soklet.run(*command, "--store", store_url, "--kek-file", "other-kek"), 1)
        assert "wrong-kek" in refusal
    assert _ok(soklet.run("keys", "list", *store, "--json"))["generation"] == before
    # Nor did the refused rotation leave a record behind that would block the next one.
    nothing = soklet.run("keys", "rotate", *store, "--resume", "--yes", "--json")
    assert (nothing.returncode, json.loads(nothing.stdout)["kind"]) == (1, "record")
    assert (soklet.cwd / "ring.toml").exists() is False


@pytest.mark.slow
def test_a_store_without_a_keyring_points_to_keys_generate(soklet: Soklet, store_url: str) -> None:
    _kek(soklet)
    store = ("--store", store_url, "--kek-file", "kek")
    if store_url.startswith("sqlite"):
        # A mistyped SQLite path is not created by a command that reads.
        assert "no such database file" in _one_line(soklet.run("keys", "list", *store), 3)
        Path(store_url.removeprefix("sqlite://")).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        asyncio.run(_touch(store_url))
    refusal = _one_line(soklet.run("keys", "list", *store), 1)
    assert "keys generate --store" in refusal


async def _touch(url: str) -> None:
    store = open_store(url)
    await store.open()
    await store.close()


@pytest.mark.slow
def test_if_older_than_does_nothing_on_a_young_key_and_dry_run_refuses_a_taken_id(
    soklet: Soklet, store_url: str
) -> None:
    _kek(soklet)
    store = ("--store", store_url, "--kek-file", "kek")
    _ok(soklet.run("keys", "generate", *store, "--id", "k1", "--json"))
    young = soklet.run("keys", "rotate", *store, "--generate", "--if-older-than", "30d", "--yes")
    assert young.returncode == 0, young.stderr
    assert "nothing to do: active key k1 is" in young.stdout
    assert "younger than 30d" in young.stdout
    skipped = _ok(soklet.run("keys", "rotate", *store, "--if-older-than", "1d12h", "--yes", "--json"))
    assert (skipped["status"], skipped["active"]) == ("skipped", "k1")
    assert _ok(soklet.run("keys", "list", *store, "--json"))["generation"] == 1
    # A dry run shows the plan (no member yet: the default lifetime) and refuses an id already taken.
    plan = _ok(soklet.run("keys", "rotate", *store, "--dry-run", "--id", "k9", "--json"))
    assert (plan["status"], plan["former_key"], plan["new_key"], plan["members"]) == ("plan", "k1", "k9", [])
    assert plan["wait_ms"] == 15 * 60 * 1000
    taken = soklet.run("keys", "rotate", *store, "--dry-run", "--id", "k1", "--json")
    assert taken.returncode == 1
    assert json.loads(taken.stdout)["kind"] == "refused"
    assert "choose another --id" in taken.stderr
    # Nothing to resume or abort.
    nothing = soklet.run("keys", "rotate", *store, "--resume", "--yes", "--json")
    assert (nothing.returncode, json.loads(nothing.stdout)["kind"]) == (1, "record")
    assert _ok(soklet.run("keys", "list", *store, "--json"))["generation"] == 1


@pytest.mark.slow
def test_if_older_than_finishes_an_unfinished_rotation_whatever_the_key_age(
    soklet: Soklet, sqlite_store_url: str
) -> None:
    _kek(soklet)
    store = ("--store", sqlite_store_url, "--kek-file", "kek")
    created = _ok(soklet.run("keys", "generate", *store, "--id", "k1", "--json"))
    # One member (its heartbeat written here) that applied every generation and keeps state 20 s: the rotation's
    # wait is long enough to stop the rotation in it.
    now = datetime.now(UTC)
    member = Heartbeat(
        instance="web-1",
        process_id="4242",
        generation=1000,
        fingerprint=created["fingerprint"]["value"],  # type: ignore[index]
        clock=now,
        admin_url=None,
        seen_at=now,
        max_state_lifetime_ms=20_000,
    )
    asyncio.run(_beat(sqlite_store_url, member))
    rotating = subprocess.Popen(
        [sys.executable, "-m", "soklet_cli", "keys", "rotate", *store, "--id", "k2", "--generate", "--yes"],
        cwd=soklet.cwd,
        env=soklet.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: record_step(sqlite_store_url) is StoreRotationStep.ACTIVE, 120)
    finally:
        rotating.kill()
        rotating.wait()
    # The active key (k2) is seconds old, yet the scheduled run finishes the rotation it finds.
    finished = _ok(soklet.run("keys", "rotate", *store, "--generate", "--if-older-than", "30d", "--yes", "--json"))
    assert (finished["status"], finished["new_key"], finished["former_key"]) == ("rotated", "k2", "k1")
    assert record_step(sqlite_store_url) is None
    listed = _ok(soklet.run("keys", "list", *store, "--json"))
    assert [key["id"] for key in listed["keys"]] == ["k2"]  # type: ignore[attr-defined]
    # And the next scheduled run does nothing.
    assert _ok(soklet.run("keys", "rotate", *store, "--if-older-than", "30d", "--yes", "--json"))["status"] == "skipped"


async def _beat(url: str, heartbeat: Heartbeat) -> None:
    store = open_store(url)
    await store.open()
    try:
        await store.beat(heartbeat)
    finally:
        await store.close()
