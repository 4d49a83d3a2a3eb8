"""``soklet fingerprint`` through the real command: output shapes, versions, and what the versions can tell."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from soklet_core.files import KeyEntry, KeyringDocument, KeyRole, read_keyring_file, write_keyring_file
from soklet_core.keys import PROTECTION_PROFILE, Fingerprint, ProtectionKey


def make_keyring(path: Path, fill: int) -> KeyringDocument:
    """Keys k1 (active) and k2 whose bytes depend on ``fill``: same ids, other bytes for another fill."""
    document = KeyringDocument(
        (
            KeyEntry(ProtectionKey.from_id_and_bytes("k1", bytes([fill]) * 32), KeyRole.ACTIVE, _when()),
            KeyEntry(ProtectionKey.from_id_and_bytes("k2", bytes([fill + 1]) * 32), KeyRole.VERIFICATION, _when()),
        )
    )
    write_keyring_file(path, document)
    return document


def _when() -> datetime:
    return datetime(2026, 8, 1, tzinfo=UTC)


@pytest.mark.slow
def test_json_and_human_output(soklet) -> None:
    document = make_keyring(soklet.cwd / "soklet-keyring.toml", 1)
    expected = document.keyring().fingerprint()
    as_json, human, legacy = soklet.run_together(
        ("fingerprint", "--json"), ("fingerprint",), ("fingerprint", "--version", "1", "--json")
    )
    assert as_json.returncode == 0
    assert as_json.stdout == (
        '{"version": 2, "profile": "soklet-mcp-protection-v1", "value": "' + expected.value + '"}\n'
    )
    assert human.stdout.splitlines() == ["version  2", f"profile  {PROTECTION_PROFILE}", f"value    {expected.value}"]
    assert Fingerprint.from_json(json.loads(legacy.stdout)) == document.keyring().fingerprint(1)


@pytest.mark.slow
def test_same_ids_other_bytes_match_only_under_v1(soklet, tmp_path: Path) -> None:
    make_keyring(tmp_path / "a.toml", 1)
    make_keyring(tmp_path / "b.toml", 7)
    runs = soklet.run_together(
        *[
            ("fingerprint", "--json", "--version", version, "--keyring", str(tmp_path / name))
            for version in ("1", "2")
            for name in ("a.toml", "b.toml")
        ]
    )
    v1a, v1b, v2a, v2b = (Fingerprint.from_json(json.loads(run.stdout)) for run in runs)
    assert v1a == v1b
    assert v2a != v2b
    assert v2a.compare(v1a).value == "incomparable"


@pytest.mark.slow
def test_errors(soklet, tmp_path: Path) -> None:
    make_keyring(soklet.cwd / "soklet-keyring.toml", 1)
    bad_version, missing = soklet.run_together(
        ("fingerprint", "--version", "3"), ("fingerprint", "--keyring", str(tmp_path / "missing.toml"))
    )
    assert bad_version.returncode == 2
    assert "--version must be one of 1, 2" in bad_version.stderr
    assert missing.returncode == 3
    assert "not-found" in missing.stderr
    assert read_keyring_file(soklet.cwd / "soklet-keyring.toml").keyring().key_ids == ("k1", "k2")
