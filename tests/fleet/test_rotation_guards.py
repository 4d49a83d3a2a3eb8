"""``soklet keys rotate --fleet``'s guards and repairs end to end, on real ``soklet serve --admin-port 0``
processes on loopback driven by a real ``soklet`` subprocess: one run at a time (the lock), an id already taken
refused before any change (also by --dry-run, which shows the wait), --abort, --exclude, --resolve, and
``keys stage|activate|remove --fleet``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soklet_core.keys import ProtectionKey, encode_base64url
from tests.fleet.support_served import Served, soklet, start_fleet, stop_all

pytestmark = pytest.mark.slow

NAMES = ("a", "b", "c")


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[dict[str, Served]]:
    """Three instances with a 3 s request-state lifetime, one keyring file each (active key 2026-08)."""
    served = start_fleet(tmp_path, NAMES, "--state-lifetime", "3s")
    yield served
    stop_all(served)


@pytest.fixture
def long_fleet(tmp_path: Path) -> Iterator[dict[str, Served]]:
    """The same with a 120 s lifetime: a rotation started there waits long enough for a test to act."""
    served = start_fleet(tmp_path, NAMES, "--state-lifetime", "120s")
    yield served
    stop_all(served)


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _key_file(folder: Path, key: ProtectionKey, name: str = "new-key") -> Path:
    path = folder / name
    path.write_text(encode_base64url(key.material) + "\n")
    path.chmod(0o600)
    return path


def _start_waiting(folder: Path) -> subprocess.Popen[str]:
    """A rotation (generated key 2026-09) run until its first "waiting" event."""
    command = [sys.executable, "-m", "soklet_cli", "keys", "rotate", "--fleet", "fleet.toml", "--generate"]
    process = subprocess.Popen(
        [*command, "--id", "2026-09", "--yes", "--json"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if json.loads(line)["event"] == "waiting":
            return process
    raise AssertionError("the rotation never waited")


def _stop(process: subprocess.Popen[str]) -> None:
    process.kill()
    process.communicate(timeout=60)


def test_a_second_run_is_refused_at_once_naming_the_holder(tmp_path: Path, long_fleet: dict[str, Served]) -> None:
    first = _start_waiting(tmp_path)
    try:
        lock = tmp_path / "fleet.toml.rotation.json.lock"
        assert lock.exists()
        second = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes")
        assert second.returncode == 1, second.stdout + second.stderr
        assert f"another rotation of this fleet is running (pid {first.pid} since 20" in second.stderr
        fresh = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--yes")
        assert fresh.returncode == 1
        assert f"(pid {first.pid} since " in fresh.stderr
        # A dry run only looks: it takes no lock.
        assert soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--resume", "--dry-run").returncode == 0
    finally:
        _stop(first)
    # kill -9 released the lock with its holder: the next run goes on (and is refused by the record, not the lock).
    after = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--yes")
    assert after.returncode == 1
    assert "a rotation is unfinished (step verify-active done)" in after.stderr
    assert "soklet keys rotate --fleet fleet.toml --resume" in after.stderr
    assert "another rotation" not in after.stderr


def test_an_id_taken_with_other_bytes_is_refused_by_the_dry_run_and_the_rotation(
    tmp_path: Path, fleet: dict[str, Served]
) -> None:
    other = encode_base64url(ProtectionKey.generate("2026-09").material)
    for instance in fleet.values():
        assert instance.stage("2026-09", other) == 200
    before = [instance.snapshot() for instance in fleet.values()]
    key_file = _key_file(tmp_path, ProtectionKey.generate("2026-09"))
    rotate = ("keys", "rotate", "--fleet", "fleet.toml", "--key-file", str(key_file), "--id", "2026-09")
    for extra in ("--dry-run", "--yes"):
        result = soklet(tmp_path, *rotate, extra)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "key 2026-09 is already on a, b, c: that id already holds other bytes; choose another --id" in (
            result.stderr
        )
        assert not (tmp_path / "fleet.toml.rotation.json").exists()
    assert [instance.snapshot() for instance in fleet.values()] == before
    # Another id goes through, and nothing was left behind to block it.
    dry = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--id", "2026-10", "--dry-run")
    assert dry.returncode == 0, dry.stderr


def test_the_dry_run_shows_the_wait(tmp_path: Path, fleet: dict[str, Served]) -> None:
    result = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    plan = _events(result.stdout)[0]
    assert plan["wait_ms"] == 3000
    # Three clocks read: the skew the Date headers cannot exclude (whole seconds, cached for up to one).
    assert plan["skew_ms"] >= 2000
    assert plan["excluded"] == []
    people = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--dry-run")
    assert "the longest state lifetime (3 s) plus the largest clock skew measured between members" in people.stdout


def test_abort_takes_a_staged_key_back_and_leaves_nothing(tmp_path: Path, fleet: dict[str, Served]) -> None:
    """A rotation stopped after staging on a only (its record at none, the generated material in it): --abort
    removes the key from a, drops the material, deletes the record and the lock; every instance and the folder
    are as before."""
    before = [instance.snapshot()["fingerprint"] for instance in fleet.values()]
    listing = _listing(tmp_path)
    key = ProtectionKey.generate("2026-09")
    record_path = tmp_path / "fleet.toml.rotation.json"
    record = {
        "format": "soklet-fleet-rotation-v1",
        "step": "none",
        "instances": list(NAMES),
        "new_key": "2026-09",
        "former_key": "2026-08",
        "check_value": key.check_value_text,
        "activated_at_ms": None,
        "wait_ms": 0,
        "material": encode_base64url(key.material),
    }
    record_path.write_text(json.dumps(record))
    record_path.chmod(0o600)
    assert fleet["a"].stage("2026-09", encode_base64url(key.material)) == 200
    # Without --yes and no terminal: refused before anything changes.
    assert soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--abort").returncode == 2
    assert soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--abort", "--generate", "--yes").returncode == 2
    result = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--abort", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  a: ok" in result.stdout
    assert "abandoned: 2026-09 removed wherever it was staged, the record deleted" in result.stdout
    assert [instance.snapshot()["fingerprint"] for instance in fleet.values()] == before
    assert _listing(tmp_path) == listing
    again = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--abort", "--yes")
    assert again.returncode == 2
    assert "--abort: no rotation record at fleet.toml.rotation.json" in again.stderr


def _listing(folder: Path) -> list[str]:
    # The folder's files but the instances' own transient lock files (their keyring writes).
    return sorted(name for name in os.listdir(folder) if not name.endswith(".toml.lock"))


def test_abort_after_the_activation_is_refused(tmp_path: Path, long_fleet: dict[str, Served]) -> None:
    _stop(_start_waiting(tmp_path))
    result = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--abort", "--yes")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "abort: key 2026-09 was activated on a, b, c: an activation is not undone" in result.stdout
    record = json.loads((tmp_path / "fleet.toml.rotation.json").read_text())
    assert record["step"] == "verify-active"
    assert "material" not in record
    assert all(instance.snapshot()["active"] == "2026-09" for instance in long_fleet.values())


def test_an_excluded_instance_is_not_contacted_and_named(tmp_path: Path, fleet: dict[str, Served]) -> None:
    fleet["c"].stop()
    unknown = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--exclude", "z", "--yes")
    assert unknown.returncode == 2
    assert "--exclude: no member is named z" in unknown.stderr
    result = soklet(
        tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--id", "2026-09", "--exclude", "c", "--yes"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "plan: rotate 2 instances (a, b)" in result.stdout
    assert "  excluded (not contacted, stale afterwards): c" in result.stdout
    assert "excluded and now stale: c" in result.stdout
    record = json.loads((tmp_path / "fleet.toml.rotation.json").read_text())
    assert (record["instances"], record["excluded"]) == (["a", "b"], ["c"])
    assert all(fleet[name].snapshot()["active"] == "2026-09" for name in ("a", "b"))


def test_resolve_discovers_the_members(tmp_path: Path) -> None:
    served = start_fleet(tmp_path, ("a",), "--state-lifetime", "3s")
    try:
        port = served["a"].admin_url.rsplit(":", 1)[1]
        base = ("keys", "rotate", "--resolve", f"127.0.0.1:{port}", "--token-file", "token")
        assert soklet(tmp_path, "keys", "rotate", "--resolve", f"127.0.0.1:{port}", "--generate").returncode == 2
        result = soklet(tmp_path, *base, "--generate", "--id", "2026-09", "--yes")
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"plan: rotate 1 instance (127.0.0.1:{port})" in result.stdout
        assert "record: soklet-fleet.rotation.json" in result.stdout
        assert served["a"].snapshot()["active"] == "2026-09"
        both = soklet(tmp_path, *base, "--fleet", "fleet.toml", "--generate", "--yes")
        assert both.returncode == 2
        assert "--fleet FILE or --resolve HOST:PORT, not both" in both.stderr
    finally:
        stop_all(served)


def test_stage_activate_remove_across_the_fleet(tmp_path: Path, fleet: dict[str, Served]) -> None:
    key = ProtectionKey.generate("2026-09")
    key_file = _key_file(tmp_path, key)
    staged = soklet(tmp_path, "keys", "stage", "--id", "2026-09", "--from-file", str(key_file), "--fleet", "fleet.toml")
    assert staged.returncode == 0, staged.stdout + staged.stderr
    assert f"stage 2026-09 (check {key.check_value_text[:8]}) on 3 instances:" in staged.stdout
    assert staged.stdout.count(": ok") == 3
    assert all(instance.snapshot()["verification"] == ["2026-09"] for instance in fleet.values())
    # Other bytes under the id: refused where it is held, with what to do.
    other = _key_file(tmp_path, ProtectionKey.generate("x"), "other-key")
    conflict = soklet(tmp_path, "keys", "stage", "--id", "2026-09", "--from-file", str(other), "--fleet", "fleet.toml")
    assert conflict.returncode == 1
    assert "that id already holds other bytes; choose another --id" in conflict.stderr
    activated = soklet(tmp_path, "keys", "activate", "2026-09", "--fleet", "fleet.toml", "--json")
    assert activated.returncode == 0, activated.stderr
    document = json.loads(activated.stdout)
    assert (document["ok"], [i["name"] for i in document["instances"] if i["ok"]]) == (True, ["a", "b", "c"])
    # The former key stopped sealing just now: its states may live 3 s more.
    early = soklet(tmp_path, "keys", "remove", "2026-08", "--fleet", "fleet.toml")
    assert early.returncode == 1
    assert "a state sealed under 2026-08 may live until" in early.stderr
    assert all("2026-08" in instance.snapshot()["verification"] for instance in fleet.values())
    # A member down: exit 3 naming it; excluded: done on the others.
    fleet["c"].stop()
    down = soklet(tmp_path, "keys", "remove", "2026-08", "--force", "--fleet", "fleet.toml")
    assert down.returncode == 3
    assert "remove failed on c" in down.stderr
    removed = soklet(tmp_path, "keys", "remove", "2026-08", "--force", "--fleet", "fleet.toml", "--exclude", "c")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "excluded (not contacted): c" in removed.stdout
    assert all(fleet[name].snapshot()["verification"] == [] for name in ("a", "b"))
    assert encode_base64url(key.material) not in staged.stdout + staged.stderr + conflict.stdout
