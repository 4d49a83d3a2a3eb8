"""``soklet kek rewrap``: every key of a store's fleet keyring (SQLite, PostgreSQL) or of an encrypted keyring file
wrapped again under a new KEK through the real command: no data key, check value or fingerprint changes; a wrong
current KEK is refused in one line with nothing written; and, while real ``soklet serve --keyring-from-store``
members serve flows across each other, a rewrap changes no member's fingerprint and breaks no continuation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soklet_core.files import WrappedMaterial, read_keyring_file
from soklet_core.keys import LocalKek, decode_base64url
from tests.cli.support_store_keyring import FleetStore, Member, wait_for
from tests.cli.test_keys_rotate_store import generate
from tests.cli.test_keys_rotate_store import soklet as run
from tests.conftest import Soklet
from tests.fleet.support_store_fleet import GenerationWatch, Load, Slot


def _kek(soklet: Soklet, name: str) -> LocalKek:
    result = soklet.run("kek", "generate", "--output", name)
    assert result.returncode == 0, result.stderr
    material = decode_base64url((soklet.cwd / name).read_text().strip())
    soklet.remember(material)
    return LocalKek(material)


def _json(result: Any) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.mark.slow
def test_a_store_rewrap_changes_no_key_and_a_wrong_kek_writes_nothing(soklet: Soklet, store_url: str) -> None:
    old = _kek(soklet, "old-kek")
    new = _kek(soklet, "new-kek")
    _kek(soklet, "other-kek")
    on_old = ("--store", store_url, "--kek-file", "old-kek")
    _json(soklet.run("keys", "generate", *on_old, "--id", "k1", "--json"))
    _json(soklet.run("keys", "stage", *on_old, "--generate", "--id", "k2", "--json"))
    before = _json(soklet.run("keys", "list", *on_old, "--json"))
    assert {key["kek_id"] for key in before["keys"]} == {old.kek_id}
    # A wrong current KEK: one line, exit 1, nothing written.
    wrong = soklet.run("kek", "rewrap", "--store", store_url, "--kek-file", "other-kek", "--new-kek-file", "new-kek")
    assert wrong.returncode == 1
    assert wrong.stderr.startswith("soklet: ")
    assert wrong.stderr.count("\n") == 1
    assert "wrong-kek" in wrong.stderr
    assert _json(soklet.run("keys", "list", *on_old, "--json")) == before
    rewrapped = _json(soklet.run("kek", "rewrap", *on_old, "--new-kek-file", "new-kek", "--json"))
    assert (rewrapped["old_kek_id"], rewrapped["new_kek_id"]) == (old.kek_id, new.kek_id)
    assert rewrapped["fingerprint_before"] == rewrapped["fingerprint_after"] == before["fingerprint"]
    after = _json(soklet.run("keys", "list", "--store", store_url, "--kek-file", "new-kek", "--json"))
    assert after["generation"] == before["generation"] + 1
    assert after["fingerprint"] == before["fingerprint"]
    for was, now in zip(before["keys"], after["keys"], strict=True):
        assert (now["id"], now["role"], now["check_value"], now["created"], now["retired"]) == (
            was["id"],
            was["role"],
            was["check_value"],
            was["created"],
            was["retired"],
        )
        assert now["kek_id"] == new.kek_id
    # The old KEK no longer opens it; the human output shows the fingerprint before and after, equal.
    assert soklet.run("keys", "list", *on_old).returncode == 1
    back = soklet.run("kek", "rewrap", "--store", store_url, "--kek-file", "new-kek", "--new-kek-file", "old-kek")
    assert back.returncode == 0, back.stderr
    lines = back.stdout.splitlines()
    assert lines[1].split()[-1] == lines[2].split()[-1] == before["fingerprint"]["value"]
    # Usage: one store or file, and exactly one new KEK.
    assert soklet.run("kek", "rewrap", *on_old).returncode == 2
    assert soklet.run("kek", "rewrap", "--kek-file", "old-kek", "--new-kek-file", "new-kek").returncode == 2
    assert soklet.run("kek", "rewrap", "--store", store_url, "--new-kek-file", "new-kek").returncode == 2


@pytest.mark.slow
def test_an_encrypted_keyring_file_is_rewrapped_under_the_new_kek(soklet: Soklet) -> None:
    old = _kek(soklet, "old-kek")
    new = _kek(soklet, "new-kek")
    _kek(soklet, "other-kek")
    for arguments in (("keys", "generate", "--id", "k1"), ("keys", "stage", "--generate", "--id", "k2")):
        assert soklet.run(*arguments).returncode == 0
    assert soklet.run("keys", "encrypt", "--keyring", "soklet-keyring.toml", "--kek-file", "old-kek").returncode == 0
    ring = soklet.cwd / "soklet-keyring.toml"
    before = read_keyring_file(ring, kek=old)
    untouched = ring.read_bytes()
    wrong = soklet.run(
        "kek", "rewrap", "--keyring", "soklet-keyring.toml", "--kek-file", "other-kek", "--new-kek-file", "new-kek"
    )
    assert wrong.returncode == 1
    assert wrong.stderr.count("\n") == 1
    assert ring.read_bytes() == untouched
    done = soklet.run(
        "kek", "rewrap", "--keyring", "soklet-keyring.toml", "--kek-file", "old-kek", "--new-kek-file", "new-kek"
    )
    assert done.returncode == 0, done.stderr
    after = read_keyring_file(ring, kek=new)
    assert after.keyring().fingerprint() == before.keyring().fingerprint()
    assert all(
        isinstance(entry.source, WrappedMaterial) and entry.source.kek_id == new.kek_id for entry in after.entries
    )
    assert ring.stat().st_mode & 0o777 == 0o600


@pytest.mark.slow
def test_a_rewrap_while_members_serve_changes_no_fingerprint_and_breaks_no_flow(
    tmp_path: Path, postgres_url: str, members: list[Member]
) -> None:
    fleet = FleetStore(tmp_path, postgres_url)
    generate(tmp_path, fleet)
    slots = [Slot(name) for name in ("web-1", "web-2")]
    for slot in slots:
        members.append(slot.start(tmp_path, fleet))
    wait_for(lambda: all(member.snapshot()["generation"] == 1 for member in members))
    fingerprint = members[0].snapshot()["fingerprint"]["value"]
    new_kek = tmp_path / "new-kek"
    watch = GenerationWatch(postgres_url)
    load = Load(slots, watch, clients=4)
    try:
        wait_for(lambda: load.each_completed(1), 120)
        assert run(tmp_path, "kek", "generate", "--output", str(new_kek)).returncode == 0
        result = run(
            tmp_path,
            "kek",
            "rewrap",
            "--store",
            postgres_url,
            "--kek-file",
            str(fleet.kek_file),
            "--new-kek-file",
            str(new_kek),
            "--json",
        )
        outcome = _json(result)
        assert outcome["fingerprint_before"]["value"] == outcome["fingerprint_after"]["value"] == fingerprint
        # Every member applies the rewrap's generation (with the keys it holds) and stays ready.
        wait_for(lambda: all(member.snapshot()["generation"] == 2 for member in members), 60)
        completed = load.tally.completed
        wait_for(lambda: load.tally.completed >= completed + 4, 120)
    finally:
        load.stop()
        watch.close()
    assert load.tally.failures == []
    assert load.tally.unserved == 0
    for member in members:
        assert member.snapshot()["fingerprint"]["value"] == fingerprint
        assert member.ready().status_code == 200
