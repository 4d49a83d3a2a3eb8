"""``soklet keys rotate --fleet``: usage, help and refusals that need no running instance (the end-to-end runs
are in tests/fleet/test_rotation_fleet.py), and the single-file rotate left as it was."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from soklet_core.files import read_keyring_file
from tests.conftest import Soklet


def _fleet_file(folder: Path) -> Path:
    # A fleet whose one admin URL answers nothing: every refusal here must come before any instance is contacted.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (folder / "token").write_text("ops:fleetRotateToken-5b1e8f27c94a06d3\n")
    (folder / "token").chmod(0o600)
    path = folder / "fleet.toml"
    path.write_text(
        f'[defaults]\nadmin_token_file = "token"\n\n[[instances]]\nname = "a"\nurl = "http://127.0.0.1:{port}"\n'
    )
    return path


@pytest.mark.slow
def test_help_names_the_fleet_options_examples_and_exit_codes(soklet: Soklet) -> None:
    result = soklet.run("keys", "rotate", "--help")
    assert result.returncode == 0
    options = ("--fleet", "--key-file", "--generate", "--yes", "--dry-run", "--resume", "--record", "--abort")
    for text in (*options, "--exclude", "--resolve", "--token-file"):
        assert text in result.stdout
    assert "soklet keys rotate --fleet fleet.toml --resume --yes --json" in result.stdout
    assert "soklet keys rotate --fleet fleet.toml --abort --yes" in result.stdout
    # Wrapped where the terminal's width falls: compared with single spaces.
    text = " ".join(result.stdout.split())
    assert "no --yes while standard input is not a terminal" in text
    assert "plus the largest clock skew measured between members" in text


@pytest.mark.slow
def test_fleet_options_need_fleet(soklet: Soklet) -> None:
    options = (("--generate",), ("--yes",), ("--dry-run",), ("--resume",), ("--key-file", "k"), ("--record", "r"))
    for option in (*options, ("--abort",), ("--exclude", "a")):
        result = soklet.run("keys", "rotate", *option)
        assert result.returncode == 2, option
        assert "need --fleet FILE" in result.stderr
    assert not (soklet.cwd / "soklet-keyring.toml").exists()


@pytest.mark.slow
def test_fleet_usage_errors(soklet: Soklet) -> None:
    _fleet_file(soklet.cwd)
    cases = {
        ("--key-file", "k", "--generate", "--yes"): "give --key-file PATH or --generate, not both",
        ("--yes",): "give the new key with --key-file PATH or --generate",
        ("--state-lifetime", "5m", "--generate", "--yes"): "--state-lifetime does not apply with --fleet",
        ("--resume", "--yes"): "--resume: no rotation record at fleet.toml.rotation.json",
        ("--resume", "--generate", "--yes"): "--resume continues with the recorded key",
    }
    for args, message in cases.items():
        result = soklet.run("keys", "rotate", "--fleet", "fleet.toml", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)


def test_without_yes_refused_when_stdin_is_not_a_terminal(soklet: Soklet) -> None:
    _fleet_file(soklet.cwd)
    result = soklet.run("keys", "rotate", "--fleet", "fleet.toml", "--generate", input="y\n")
    assert result.returncode == 2
    assert "standard input is not a terminal: give --yes" in result.stderr
    assert not (soklet.cwd / "fleet.toml.rotation.json").exists()


@pytest.mark.slow
def test_unreachable_fleet_exit_3_and_no_record(soklet: Soklet) -> None:
    _fleet_file(soklet.cwd)
    for extra in ((), ("--dry-run",)):
        result = soklet.run("keys", "rotate", "--fleet", "fleet.toml", "--generate", "--yes", *extra)
        assert result.returncode == 3
        assert "aborted: before the rotation: the fleet is unreachable" in result.stdout
    assert not (soklet.cwd / "fleet.toml.rotation.json").exists()


@pytest.mark.slow
def test_unusable_record_exit_3(soklet: Soklet) -> None:
    _fleet_file(soklet.cwd)
    record = soklet.cwd / "fleet.toml.rotation.json"
    record.write_text("{}")
    record.chmod(0o600)
    result = soklet.run("keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes")
    assert result.returncode == 3
    assert "not a soklet-fleet-rotation-v1 record" in result.stderr
    record.chmod(0o644)
    result = soklet.run("keys", "rotate", "--fleet", "fleet.toml", "--resume", "--yes")
    assert result.returncode == 3


def test_single_file_rotate_unchanged(soklet: Soklet) -> None:
    assert soklet.run("keys", "generate", "--id", "2026-08").returncode == 0
    result = soklet.run("keys", "rotate", "--id", "2026-09", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {
        "keyring",
        "active",
        "check_value",
        "former_active",
        "remove_after",
        "state_lifetime_seconds",
        "fingerprint",
    }
    assert (document["active"], document["former_active"], document["state_lifetime_seconds"]) == (
        "2026-09",
        "2026-08",
        900,
    )
    keyring = read_keyring_file(soklet.cwd / "soklet-keyring.toml").keyring()
    assert keyring.active_key.id == "2026-09"
    assert "2026-08" in keyring


@pytest.mark.slow
def test_repair_and_member_options_usage(soklet: Soklet) -> None:
    _fleet_file(soklet.cwd)
    cases = {
        ("keys", "activate", "x", "--exclude", "a"): "--exclude needs --fleet FILE or --resolve HOST:PORT",
        ("keys", "remove", "x", "--token-file", "token"): "--token-env, --token-file and --ca-file need --resolve",
        ("keys", "activate", "x", "--fleet", "fleet.toml", "--resolve", "127.0.0.1:1"): "not both",
        ("keys", "activate", "x", "--fleet", "fleet.toml", "--exclude", "z"): "--exclude: no member is named z",
        ("keys", "remove", "x", "--fleet", "fleet.toml", "--state-lifetime", "5m"): "--state-lifetime does not apply",
        ("keys", "rotate", "--fleet", "fleet.toml", "--abort", "--resume", "--yes"): "--abort abandons the recorded",
        ("keys", "rotate", "--fleet", "fleet.toml", "--abort", "--yes"): "--abort: no rotation record at",
        ("keys", "rotate", "--resolve", "127.0.0.1:1", "--generate", "--yes"): "--token-env VAR or --token-file FILE",
    }
    for args, message in cases.items():
        result = soklet.run(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
    assert not (soklet.cwd / "soklet-keyring.toml").exists()


@pytest.mark.slow
def test_a_member_down_is_exit_3_for_a_repair(soklet: Soklet) -> None:
    _fleet_file(soklet.cwd)
    result = soklet.run("keys", "activate", "2026-09", "--fleet", "fleet.toml", "--json")
    assert result.returncode == 3
    document = json.loads(result.stdout)
    assert (document["ok"], document["exit_code"]) == (False, 3)
    assert document["instances"][0]["problem"] == "connection refused"
    assert "activate failed on a" in result.stderr
