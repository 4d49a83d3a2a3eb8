"""``soklet keys rotate --fleet`` end to end: real ``soklet serve --admin-port 0`` processes on loopback, each
with its own keyring file and the fleet's admin token, rotated by a real ``soklet`` subprocess."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from soklet_core.files import read_keyring_file
from soklet_core.keys import ProtectionKey, encode_base64url
from tests.fleet.support_served import TOKEN, Served, multi_round, soklet, start_fleet, stop_all

pytestmark = pytest.mark.slow

NAMES = ("a", "b", "c")
LIFETIME = "3s"
#: The lifetime of a fleet whose test stops the rotation at its first "waiting" line: long enough that a busy
#: machine's test process reads that line and acts while the rotation still waits (3 s was not, at load 6.5).
WAITING_LIFETIME = "20s"
#: The lifetime of a fleet whose test never lets the wait end.
LONG_LIFETIME = "120s"
#: Seconds a client waits before its retry (a person answering), all within the lifetime.
PAUSES = (0.0, 0.5, 0.0, 1.5)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[dict[str, Served]]:
    """Three instances with a 3 s request-state lifetime, one keyring file each (active key 2026-08)."""
    served = start_fleet(tmp_path, NAMES, "--state-lifetime", LIFETIME)
    yield served
    stop_all(served)


@pytest.fixture
def waiting_fleet(tmp_path: Path) -> Iterator[dict[str, Served]]:
    """The same three instances with a :data:`WAITING_LIFETIME` request-state lifetime."""
    served = start_fleet(tmp_path, NAMES, "--state-lifetime", WAITING_LIFETIME)
    yield served
    stop_all(served)


@pytest.fixture
def long_fleet(tmp_path: Path) -> Iterator[dict[str, Served]]:
    """The same three instances with a :data:`LONG_LIFETIME` request-state lifetime."""
    served = start_fleet(tmp_path, NAMES, "--state-lifetime", LONG_LIFETIME)
    yield served
    stop_all(served)


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _key_file(folder: Path, key: ProtectionKey) -> Path:
    path = folder / "new-key"
    path.write_text(encode_base64url(key.material) + "\n")
    path.chmod(0o600)
    return path


def _assert_rotated(fleet: dict[str, Served], new_id: str, former: str) -> None:
    snapshots = [instance.snapshot() for instance in fleet.values()]
    assert {snapshot["active"] for snapshot in snapshots} == {new_id}
    assert all(snapshot["verification"] == [] for snapshot in snapshots)
    assert len({snapshot["fingerprint"]["value"] for snapshot in snapshots}) == 1
    # Each instance's keyring file agrees with its live keyring and with the others'.
    files = [read_keyring_file(instance.keyring).keyring() for instance in fleet.values()]
    assert {keyring.active_key.id for keyring in files} == {new_id}
    assert all(former not in keyring for keyring in files)
    assert len({keyring.fingerprint().value for keyring in files}) == 1
    assert files[0].fingerprint().value == snapshots[0]["fingerprint"]["value"]


def test_three_instances_rotate_step_by_step(tmp_path: Path, fleet: dict[str, Served]) -> None:
    key = ProtectionKey.generate("2026-09")
    key_file = _key_file(tmp_path, key)
    result = soklet(
        tmp_path,
        "keys",
        "rotate",
        "--fleet",
        "fleet.toml",
        "--key-file",
        str(key_file),
        "--id",
        "2026-09",
        "--yes",
        "--json",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    events = _events(result.stdout)
    assert events[0]["event"] == "plan"
    assert events[0]["former_key"] == "2026-08"
    assert events[0]["check_value"] == key.check_value_text
    steps = [event["step"] for event in events if event["event"] == "done"]
    assert steps == ["stage", "verify-staged", "activate", "verify-active", "wait", "remove", "verify-removed"]
    verified = [event for event in events if event["event"] == "verified"]
    assert [event["status"] for event in verified] == ["converged"] * 3
    assert all(event["fingerprint"]["version"] == 2 for event in verified)
    assert events[-1] == {
        "event": "finished",
        "step": "verify-removed",
        "new_key": "2026-09",
        "removed": "2026-08",
        "record": "fleet.toml.rotation.json",
        "excluded": [],
    }
    _assert_rotated(fleet, "2026-09", "2026-08")
    # The material was sent in stage bodies only: never printed, never in the record (0600).
    material = encode_base64url(key.material)
    assert material not in result.stdout + result.stderr
    record_path = tmp_path / "fleet.toml.rotation.json"
    assert stat.S_IMODE(record_path.stat().st_mode) == 0o600
    record = json.loads(record_path.read_text())
    assert material not in record_path.read_text()
    assert record["step"] == "verify-removed"
    assert record["wait_ms"] == 3000
    # Run again with --resume: the finished record says so, nothing changes.
    again = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes", "--json")
    assert again.returncode == 0, again.stderr
    assert _events(again.stdout)[-1]["event"] == "finished"


def test_rotation_under_load_fails_no_continuation(tmp_path: Path, fleet: dict[str, Served]) -> None:
    """8 clients run the two-round catalog.continue flow continuously, each first round on one instance and its
    retry on the next (so every continuation crosses instances), while the fleet rotates. Half the clients answer
    at once, the others after 0.5 to 1.5 s (within the 3 s lifetime): a state sealed under the former key just
    before activation is then retried well after it, which a rotation that removed the former key without the
    wait would break (checked by hand: removing right after activation failed such continuations)."""
    urls = [fleet[name].url for name in NAMES]
    stop = threading.Event()
    failures: list[str] = []
    completed = [0] * 8

    def client(index: int) -> None:
        request_id = index * 1_000_000
        turn = index
        with httpx.Client(timeout=30) as http:
            while not stop.is_set():
                request_id += 2
                turn += 1
                try:
                    problem = multi_round(http, urls[turn % 3], urls[(turn + 1) % 3], request_id, PAUSES[index % 4])
                except httpx.HTTPError as error:
                    problem = f"HTTP: {type(error).__name__}"
                if problem is not None:
                    failures.append(problem)
                else:
                    completed[index] += 1

    threads = [threading.Thread(target=client, args=(index,), daemon=True) for index in range(8)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)
        before = sum(completed)
        result = soklet(
            tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--id", "2026-09", "--yes", "--json"
        )
        during = sum(completed) - before
        time.sleep(1.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    print(f"under load: {during} two-round flows completed during the rotation, {len(failures)} failed")
    assert result.returncode == 0, result.stdout + result.stderr
    assert failures == []
    # The load really ran across the whole rotation (which waits at least the 3 s lifetime).
    assert during >= 24, during
    assert all(count > 0 for count in completed)
    _assert_rotated(fleet, "2026-09", "2026-08")
    events = _events(result.stdout)
    # The generated material was in the record only until every instance held it.
    record = json.loads((tmp_path / "fleet.toml.rotation.json").read_text())
    assert "material" not in record
    assert all("material" not in json.dumps(event) for event in events)


def test_killed_during_wait_resumes(tmp_path: Path, waiting_fleet: dict[str, Served]) -> None:
    fleet = waiting_fleet
    key = ProtectionKey.generate("2026-09")
    key_file = _key_file(tmp_path, key)
    command = [
        sys.executable,
        "-m",
        "soklet_cli",
        "keys",
        "rotate",
        "--fleet",
        "fleet.toml",
        "--key-file",
        str(key_file),
        "--id",
        "2026-09",
        "--yes",
        "--json",
    ]
    process = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    assert process.stdout is not None
    try:
        seen = []
        for line in process.stdout:
            seen.append(json.loads(line))
            if seen[-1]["event"] == "waiting":
                break
        process.send_signal(signal.SIGKILL)
        process.wait(15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL
    record = json.loads((tmp_path / "fleet.toml.rotation.json").read_text())
    assert record["step"] == "verify-active"
    activated_at = record["activated_at_ms"]
    # Mid-way: the new key active everywhere, the former key still there for verification.
    for instance in fleet.values():
        snapshot = instance.snapshot()
        assert snapshot["active"] == "2026-09"
        assert snapshot["verification"] == ["2026-08"]
    # A new rotation is refused while this one is unfinished.
    other = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--yes")
    assert other.returncode == 1
    assert "a rotation is unfinished (step verify-active done)" in other.stderr
    # --resume finishes it (no material needed: every instance holds the key), waiting only what is left of the
    # lifetime counted from the recorded activation.
    resumed = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes", "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    events = _events(resumed.stdout)
    assert events[0]["event"] == "plan"
    assert events[0]["steps"] == ["wait", "remove", "verify-removed"]
    waiting = [event for event in events if event["event"] == "waiting"]
    # Less than the whole wait (the lifetime plus the clock skew measured between members): only what is left.
    assert waiting[0]["wait_ms"] == 20_000
    assert waiting[0]["remaining_ms"] < waiting[0]["wait_ms"] + waiting[0]["skew_ms"]
    assert [event["step"] for event in events if event["event"] == "done"] == ["wait", "remove", "verify-removed"]
    assert json.loads((tmp_path / "fleet.toml.rotation.json").read_text())["activated_at_ms"] == activated_at
    _assert_rotated(fleet, "2026-09", "2026-08")


def test_divergent_instance_aborts_before_activation(tmp_path: Path, fleet: dict[str, Served]) -> None:
    # c already holds 2026-09 with other bytes.
    assert fleet["c"].stage("2026-09", encode_base64url(ProtectionKey.generate("2026-09").material)) == 200
    key_file = _key_file(tmp_path, ProtectionKey.generate("2026-09"))
    result = soklet(
        tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--key-file", str(key_file), "--id", "2026-09", "--yes"
    )
    # The preflight sees c holding a key the others lack: diverged before anything is staged.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "key 2026-09: missing on a, b (held by c)" in result.stdout
    assert all(instance.snapshot()["active"] == "2026-08" for instance in fleet.values())
    assert all("2026-09" not in instance.snapshot()["verification"] for name, instance in fleet.items() if name != "c")


def test_same_id_other_bytes_found_at_stage_aborts_before_activation(tmp_path: Path, fleet: dict[str, Served]) -> None:
    """The preflight converged; between it and the stage step c got 2026-09 with other bytes (simulated by a
    resume whose record says nothing is done yet): c refuses the stage (409). The abort says what to do, takes the
    key back from a and b, and removes the record: nothing blocks a later rotation or --dry-run."""
    key = ProtectionKey.generate("2026-09")
    key_file = _key_file(tmp_path, key)
    record_path = tmp_path / "fleet.toml.rotation.json"
    record_path.write_text(json.dumps(_record_at_none(key)))
    record_path.chmod(0o600)
    assert fleet["c"].stage("2026-09", encode_base64url(ProtectionKey.generate("2026-09").material)) == 200
    result = soklet(
        tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--resume", "--key-file", str(key_file), "--yes", "--json"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    events = _events(result.stdout)
    refused = [event for event in events if event["event"] == "instance" and not event["ok"]]
    assert [(event["instance"], event["status"]) for event in refused] == [("c", 409)]
    assert "conflicting-material" in refused[0]["problem"]
    unstaged = [event["instance"] for event in events if event["event"] == "instance" and event["step"] == "unstage"]
    assert unstaged == ["a", "b"]
    abort = events[-1]
    assert abort["event"] == "abort"
    assert abort["status"] == "diverged"
    assert "that id already holds other bytes; choose another --id" in abort["message"]
    assert any("key 2026-09: the same id with other bytes" in text and "on c" in text for text in abort["details"])
    assert not any(event["event"] == "step" and event["step"] == "activate" for event in events)
    assert all(instance.snapshot()["active"] == "2026-08" for instance in fleet.values())
    assert (abort["record"], abort["resume"]) == (None, None)
    assert not record_path.exists()
    assert [fleet[name].snapshot()["verification"] for name in ("a", "b")] == [[], []]
    assert encode_base64url(key.material) not in result.stdout + result.stderr
    # Nothing blocks the next attempt: c's odd key dealt with, a dry run and a rotation under the id go through.
    removed = httpx.post(
        fleet["c"].admin_url + "/v1/keyring/remove",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json={"id": "2026-09"},
        timeout=10,
    )
    assert removed.status_code == 200
    rotate = ("keys", "rotate", "--fleet", "fleet.toml", "--key-file", str(key_file), "--id", "2026-09")
    assert soklet(tmp_path, *rotate, "--dry-run").returncode == 0
    resumed = soklet(tmp_path, *rotate, "--yes")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    _assert_rotated(fleet, "2026-09", "2026-08")
    assert fleet["c"].snapshot()["keys"][0]["check_value"] == key.check_value_text


def test_unreachable_instance_aborts_before_any_change(tmp_path: Path, fleet: dict[str, Served]) -> None:
    fleet["c"].stop()
    key_file = _key_file(tmp_path, ProtectionKey.generate("2026-09"))
    result = soklet(
        tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--key-file", str(key_file), "--id", "2026-09", "--yes"
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "aborted: before the rotation: the fleet is unreachable" in result.stdout
    assert "c: connection refused" in result.stdout
    assert all(fleet[name].snapshot()["verification"] == [] for name in ("a", "b"))
    assert not (tmp_path / "fleet.toml.rotation.json").exists()


def test_resume_before_staging_needs_the_same_key_file(tmp_path: Path, fleet: dict[str, Served]) -> None:
    key = ProtectionKey.generate("2026-09")
    record_path = tmp_path / "fleet.toml.rotation.json"
    record_path.write_text(json.dumps(_record_at_none(key)))
    record_path.chmod(0o600)
    rotate = ("keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes")
    missing = soklet(tmp_path, *rotate)
    assert missing.returncode == 2
    assert "key 2026-09 is still to be staged on a, b, c: give the same --key-file again" in missing.stderr
    other = soklet(tmp_path, *rotate, "--key-file", str(_key_file(tmp_path, ProtectionKey.generate("x"))))
    assert other.returncode == 1
    assert "--key-file holds other material than the recorded new key" in other.stderr
    assert all(instance.snapshot()["verification"] == [] for instance in fleet.values())
    done = soklet(tmp_path, *rotate, "--key-file", str(_key_file(tmp_path, key)))
    assert done.returncode == 0, done.stdout + done.stderr
    _assert_rotated(fleet, "2026-09", "2026-08")
    assert encode_base64url(key.material) not in done.stdout + done.stderr + missing.stderr + other.stderr


def _record_at_none(key: ProtectionKey) -> dict[str, Any]:
    return {
        "format": "soklet-fleet-rotation-v1",
        "step": "none",
        "instances": list(NAMES),
        "new_key": key.id,
        "former_key": "2026-08",
        "check_value": key.check_value_text,
        "activated_at_ms": None,
        "wait_ms": 0,
    }


def test_dry_run_confirmation_and_progress_for_people(tmp_path: Path, fleet: dict[str, Served]) -> None:
    before = [instance.snapshot() for instance in fleet.values()]
    dry = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--id", "2026-09", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "plan (dry run: nothing changes): rotate 3 instances (a, b, c)" in dry.stdout
    assert "former key 2026-08" in dry.stdout
    assert "steps: stage, verify-staged, activate, verify-active, wait, remove, verify-removed" in dry.stdout
    assert not (tmp_path / "fleet.toml.rotation.json").exists()
    # On a terminal the command asks; "n" changes nothing.
    controller, terminal = os.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "soklet_cli", "keys", "rotate", "--fleet", "fleet.toml", "--generate"],
            cwd=tmp_path,
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(controller, b"n\n")
        stdout, stderr = process.communicate(timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    assert process.returncode == 2, stdout + stderr
    assert "Rotate 3 instances to key" in stdout
    assert "not confirmed; nothing changed" in stderr
    assert not (tmp_path / "fleet.toml.rotation.json").exists()
    assert [instance.snapshot() for instance in fleet.values()] == before
    # Progress for people: each step, each instance, the wait, the end.
    result = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--id", "2026-09", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for step in ("stage", "verify-staged", "activate", "verify-active", "wait", "remove", "verify-removed"):
        assert f"step {step}" in lines
    assert lines.count("  c: ok") == 3
    # The wait: the 3 s lifetime plus the largest clock skew between members (at least the Date header's 2 s).
    assert any(line.startswith("  waiting: ") and " s of " in line for line in lines)
    assert "the longest state lifetime (3 s) plus the largest clock skew measured between members" in dry.stdout
    assert "  fleet converged (fingerprint v2:" in result.stdout
    assert lines[-1] == "rotated: 2026-09 is active everywhere, 2026-08 removed everywhere"
    _assert_rotated(fleet, "2026-09", "2026-08")


def test_resume_stages_generated_material_kept_in_the_record(tmp_path: Path, fleet: dict[str, Served]) -> None:
    """A rotation with --generate stopped before every instance held the key: the record (0600) still holds the
    material, so --resume stages it without a key file; the material leaves the record once staged everywhere."""
    key = ProtectionKey.generate("2026-09")
    record_path = tmp_path / "fleet.toml.rotation.json"
    record_path.write_text(json.dumps({**_record_at_none(key), "material": encode_base64url(key.material)}))
    record_path.chmod(0o600)
    assert fleet["a"].stage("2026-09", encode_base64url(key.material)) == 200
    result = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    staged = [event["instance"] for event in _events(result.stdout) if event["event"] == "instance"][:2]
    assert staged == ["b", "c"]
    _assert_rotated(fleet, "2026-09", "2026-08")
    assert fleet["a"].snapshot()["keys"][0]["check_value"] == key.check_value_text
    assert "material" not in json.loads(record_path.read_text())
    assert encode_base64url(key.material) not in result.stdout + result.stderr


def test_instance_lost_during_the_wait_is_reported_and_excluded_on_resume(
    tmp_path: Path, waiting_fleet: dict[str, Served]
) -> None:
    """c stops during the wait: the rotation says so at once, waits on for the others, and at the wait's end
    stops naming the command that resumes without c; that command finishes the rotation on a and b, names c as
    excluded in its output and in the record."""
    fleet = waiting_fleet
    command = [sys.executable, "-m", "soklet_cli", "keys", "rotate", "--fleet", "fleet.toml", "--generate"]
    process = subprocess.Popen(
        [*command, "--id", "2026-09", "--yes", "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if json.loads(line)["event"] == "waiting":
            fleet["c"].stop()
            break
    rest, _ = process.communicate(timeout=180)
    assert process.returncode == 3
    events = _events(rest)
    lost = [event for event in events if event["event"] == "lost"]
    assert [event["instance"] for event in lost] == ["c"]
    assert any(event["event"] == "waiting" and event["lost"] == ["c"] for event in events)
    abort = events[-1]
    assert abort["event"] == "abort"
    assert abort["status"] == "unreachable"
    assert abort["message"].startswith("wait: unreachable: c (")
    assert abort["lost"] == ["c"]
    assert abort["resume_without_lost"] == "soklet keys rotate --fleet fleet.toml --resume --exclude c"
    assert json.loads((tmp_path / "fleet.toml.rotation.json").read_text())["step"] == "verify-active"
    for name in ("a", "b"):
        assert fleet[name].snapshot()["verification"] == ["2026-08"]
    resumed = soklet(tmp_path, *abort["resume_without_lost"].split()[1:], "--yes")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "excluded and now stale: c (rejoin: see docs/fleet.md" in resumed.stdout
    record = json.loads((tmp_path / "fleet.toml.rotation.json").read_text())
    assert (record["step"], record["instances"], record["excluded"]) == ("verify-removed", ["a", "b"], ["c"])
    for name in ("a", "b"):
        snapshot = fleet[name].snapshot()
        assert (snapshot["active"], snapshot["verification"]) == ("2026-09", [])


def test_v1_fleet_is_refused_before_any_change(tmp_path: Path) -> None:
    served = start_fleet(tmp_path, ("a", "b"), "--fingerprint-version", "1")
    try:
        result = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--yes")
        assert result.returncode == 3, result.stdout + result.stderr
        assert "aborted: before the rotation: the fleet reports v1 fingerprints" in result.stdout
        assert all(instance.snapshot()["verification"] == [] for instance in served.values())
        assert not (tmp_path / "fleet.toml.rotation.json").exists()
    finally:
        stop_all(served)


def test_interrupted_rotation_says_how_to_resume(tmp_path: Path, waiting_fleet: dict[str, Served]) -> None:
    fleet = waiting_fleet
    command = [sys.executable, "-m", "soklet_cli", "keys", "rotate", "--fleet", "fleet.toml", "--generate"]
    process = subprocess.Popen(
        [*command, "--id", "2026-09", "--yes", "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if json.loads(line)["event"] == "waiting":
            process.send_signal(signal.SIGINT)
            break
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    # The real command line, with the fleet file as given.
    assert (
        "the record fleet.toml.rotation.json is kept: finish with soklet keys rotate --fleet fleet.toml --resume"
        in stderr
    )
    assert "Traceback" not in stderr
    assert json.loads((tmp_path / "fleet.toml.rotation.json").read_text())["step"] == "verify-active"
    resumed = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    _assert_rotated(fleet, "2026-09", "2026-08")


def test_the_wait_counts_down_in_place_on_a_terminal(tmp_path: Path, fleet: dict[str, Served]) -> None:
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "soklet_cli", "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--yes"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(terminal)
    output = bytearray()
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(controller)
        process.wait(60)
    text = output.decode("utf-8", "replace")
    assert process.returncode == 0, text
    assert "waiting: " in text
    assert "\x1b[?25l" in text  # the status line hides the cursor while it counts down ...
    assert text.rfind("\x1b[?25h") > text.rfind("\x1b[?25l")  # ... and gives it back
    assert "rotated: " in text
    assert "is active everywhere, 2026-08 removed everywhere" in text


def _rotation_stopped_in_its_wait(folder: Path) -> dict[str, Any]:
    """A rotation to 2026-09 killed at its first "waiting" line; the record it left (step verify-active)."""
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
    try:
        for line in process.stdout:
            if json.loads(line)["event"] == "waiting":
                break
        process.send_signal(signal.SIGKILL)
        process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    record: dict[str, Any] = json.loads((folder / "fleet.toml.rotation.json").read_text())
    assert record["step"] == "verify-active", record
    return record


def _write_record(folder: Path, record: dict[str, Any]) -> None:
    path = folder / "fleet.toml.rotation.json"
    path.write_text(json.dumps(record))
    path.chmod(0o600)


def test_an_edited_activation_time_does_not_skip_the_wait(tmp_path: Path, long_fleet: dict[str, Served]) -> None:
    """``activated_at_ms = 0`` written into the record of a rotation stopped in its wait: the resumed wait still
    counts from what the instances report (the new key was staged, so created, before it was activated), so it
    waits about the whole 120 s lifetime instead of removing the former key at once."""
    started_ms = time.time_ns() // 1_000_000
    record = _rotation_stopped_in_its_wait(tmp_path)
    _write_record(tmp_path, {**record, "activated_at_ms": 0})
    command = [sys.executable, "-m", "soklet_cli", "keys", "rotate", "--fleet", "fleet.toml", "--resume"]
    process = subprocess.Popen(
        [*command, "--yes", "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        waiting = None
        for line in process.stdout:
            event = json.loads(line)
            if event["event"] == "waiting":
                waiting = event
                break
        read_ms = time.time_ns() // 1_000_000
    finally:
        process.kill()
        process.communicate(timeout=60)
    assert waiting is not None
    assert waiting["wait_ms"] == 120_000
    # The key was created (to the second) after this test started: what is left is at least the lifetime less
    # the time this test took so far, however slow the machine.
    assert waiting["remaining_ms"] >= 120_000 - (read_ms - started_ms) - 1_000, waiting
    assert waiting["remaining_ms"] > 0
    for instance in long_fleet.values():
        assert instance.snapshot()["verification"] == ["2026-08"]


def test_a_record_claiming_the_wait_done_is_refused(tmp_path: Path, long_fleet: dict[str, Served]) -> None:
    """A record edited to say the wait is done, while the instances show the new key created moments ago: the
    resume refuses (exit 1) and names what the instances show; the former key stays everywhere."""
    record = _rotation_stopped_in_its_wait(tmp_path)
    _write_record(tmp_path, {**record, "step": "wait"})
    result = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "aborted: the record does not match the fleet: it says wait is done, but per " in result.stdout
    assert " a state sealed under 2026-08 may live until " in result.stdout
    assert "(run --resume again after then)" in result.stdout
    assert "Traceback" not in result.stderr
    for instance in long_fleet.values():
        assert instance.snapshot()["verification"] == ["2026-08"]
    assert json.loads((tmp_path / "fleet.toml.rotation.json").read_text())["step"] == "wait"


def test_a_record_claiming_steps_the_fleet_does_not_show_is_refused(tmp_path: Path, fleet: dict[str, Served]) -> None:
    """Records that say a step is done while the instances show otherwise: each refused with exit 1 before any
    change, naming the step, the instances and what they lack."""
    key = ProtectionKey.generate("2026-09")
    material = encode_base64url(key.material)
    before = [instance.snapshot() for instance in fleet.values()]
    rotate = ("keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes", "--json")
    _write_record(tmp_path, {**_record_at_none(key), "step": "verify-removed", "activated_at_ms": 1, "wait_ms": 3000})
    result = soklet(tmp_path, *rotate)
    assert result.returncode == 1, result.stdout + result.stderr
    abort = _events(result.stdout)[-1]
    assert abort["event"] == "abort"
    assert abort["status"] == "diverged"
    assert abort["record"] is None
    assert abort["message"] == (
        "the record does not match the fleet: it says verify-removed is done, but a, b, c hold no key 2026-09 "
        f"with check value {key.check_value_text[:8]}"
    )
    assert [instance.snapshot() for instance in fleet.values()] == before
    # Staged everywhere, not activated: a record that says activate is done is refused too.
    assert all(instance.stage("2026-09", material) == 200 for instance in fleet.values())
    _write_record(tmp_path, {**_record_at_none(key), "step": "activate", "activated_at_ms": 1, "wait_ms": 3000})
    result = soklet(tmp_path, *rotate)
    assert result.returncode == 1, result.stdout + result.stderr
    assert _events(result.stdout)[-1]["message"] == (
        "the record does not match the fleet: it says activate is done, but a, b, c do not seal with 2026-09"
    )
    assert all(instance.snapshot()["active"] == "2026-08" for instance in fleet.values())
    assert material not in result.stdout + result.stderr


def test_one_instance_listed_twice_is_refused_before_any_change(tmp_path: Path, fleet: dict[str, Served]) -> None:
    """The fleet file lists a under a second name (and leaves c out): the preflight names the duplicate and
    refuses (exit 2, the listing is wrong) before anything is staged."""
    lines = ['[defaults]\nadmin_token_file = "token"\n']
    for name, url in (("a", fleet["a"].admin_url), ("a-again", fleet["a"].admin_url), ("b", fleet["b"].admin_url)):
        lines.append(f'[[instances]]\nname = "{name}"\nurl = "{url}"\n')
    (tmp_path / "twice.toml").write_text("\n".join(lines))
    result = soklet(tmp_path, "keys", "rotate", "--fleet", "twice.toml", "--generate", "--yes")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "aborted: before the rotation: the fleet is duplicated; a, a-again report one instance, a" in result.stdout
    assert all(instance.snapshot()["verification"] == [] for instance in fleet.values())
    assert not (tmp_path / "twice.toml.rotation.json").exists()


def _admin_post(instance: Served, action: str, body: dict[str, str]) -> dict[str, Any]:
    answer = httpx.post(
        f"{instance.admin_url}/v1/keyring/{action}",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json=body,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


def _backdate(keyring: Path, key_id: str, created: str) -> None:
    # The keyring file's created time of key_id, edited as an operator would (the instance reloads it).
    blocks = keyring.read_text().split("[[keys]]")
    for index, block in enumerate(blocks):
        if f'id = "{key_id}"' in block:
            lines = [f"created = {created}" if line.startswith("created = ") else line for line in block.split("\n")]
            blocks[index] = "\n".join(lines)
    keyring.write_text("[[keys]]".join(blocks))


def _ms(text: str) -> int:
    return round(datetime.fromisoformat(text).timestamp() * 1000)


def test_the_retired_time_is_published_and_bounds_the_wait(tmp_path: Path, long_fleet: dict[str, Served]) -> None:
    """The new key staged with a creation time long past (a key staged weeks ahead), then activated by admin
    calls: each instance publishes when the former key stopped sealing (``retired``), and a resumed rotation
    counts its wait from that moment. Without it, nothing reported would be recent (no seal since start, the
    record's activation edited away) and the former key would be removed at once."""
    key = ProtectionKey.generate("2026-09")
    material = encode_base64url(key.material)
    for instance in long_fleet.values():
        assert instance.stage("2026-09", material) == 200
        _backdate(instance.keyring, "2026-09", "2020-01-01T00:00:00Z")
        _admin_post(instance, "reload", {})
        former = _admin_post(instance, "activate", {"id": "2026-09"})["keys"]
        retired = {entry["id"]: entry.get("retired") for entry in former}
        assert retired["2026-09"] is None
        assert retired["2026-08"] is not None
        on_file = read_keyring_file(instance.keyring).entry("2026-08")
        assert on_file is not None
        assert on_file.retired is not None
        assert retired["2026-08"] == on_file.retired.isoformat()
    snapshots = {name: instance.snapshot() for name, instance in long_fleet.items()}
    for snapshot in snapshots.values():
        (new,) = (entry for entry in snapshot["keys"] if entry["id"] == "2026-09")
        assert new["created"].startswith("2020-01-01")
    latest_name, latest = max(
        ((name, _ms(entry["retired"])) for name, snapshot in snapshots.items() for entry in snapshot["keys"]
         if entry["id"] == "2026-08"),
        key=lambda pair: pair[1],
    )  # fmt: skip
    record = {**_record_at_none(key), "activated_at_ms": 1, "wait_ms": 120_000}
    # A record claiming the wait is done is refused, naming the end of the wait the retired time sets.
    _write_record(tmp_path, {**record, "step": "wait"})
    result = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes")
    assert result.returncode == 1, result.stdout + result.stderr
    # The end is the retired time plus the lifetime plus the clock skew measured between members (at least the
    # Date header's 2 s on one host, more as the machine answers slower): never earlier than lifetime alone.
    said = f"per {latest_name} a state sealed under 2026-08 may live until "
    assert said in result.stdout, result.stdout
    until_text = result.stdout.split(said, 1)[1][:20]
    until = datetime.strptime(until_text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert until.timestamp() * 1000 >= latest + 120_000 + 2_000 - 1_000
    # A record stopped before its wait waits from the retired time, not at once.
    _write_record(tmp_path, {**record, "step": "verify-active"})
    command = [sys.executable, "-m", "soklet_cli", "keys", "rotate", "--fleet", "fleet.toml", "--resume"]
    process = subprocess.Popen(
        [*command, "--yes", "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        waiting = None
        for line in process.stdout:
            event = json.loads(line)
            if event["event"] == "waiting":
                waiting = event
                break
        read_ms = time.time_ns() // 1_000_000
    finally:
        process.kill()
        process.communicate(timeout=60)
    assert waiting is not None
    # Counted from the retired time (to the second), less the time this test took since, however slow the machine.
    assert waiting["remaining_ms"] >= latest + 120_000 - read_ms - 1_000, waiting
    assert waiting["remaining_ms"] > 0
    for instance in long_fleet.values():
        assert instance.snapshot()["verification"] == ["2026-08"]
