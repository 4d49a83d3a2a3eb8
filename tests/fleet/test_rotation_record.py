"""The fleet rotation record file: round trip, 0600, atomic replacement, strict reading, the size bound."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from soklet_core.files import KeyringFileError
from soklet_core.fleet import (
    MAX_RECORD_BYTES,
    RecordError,
    RotationRecord,
    RotationStep,
    default_record_path,
    read_record,
    write_record,
)
from soklet_core.keys import ProtectionKey, encode_base64url

RECORD = RotationRecord(("a", "b"), "2026-09", "2026-08", "x" * 43, RotationStep.ACTIVATE, 1_700_000_000_000, 3000)


def test_round_trip_0600(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml.rotation.json"
    write_record(path, RECORD)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_record(path) == RECORD
    assert json.loads(path.read_text())["step"] == "activate"
    key = ProtectionKey.generate("n")
    material = encode_base64url(key.material)
    write_record(path, RotationRecord(("a",), "n", "o", key.check_value_text, material=material))
    again = read_record(path)
    assert again.material == material
    assert material not in repr(again)
    assert not again.finished
    assert [step.label for step in RotationStep][1:] == [
        "stage",
        "verify-staged",
        "activate",
        "verify-active",
        "wait",
        "remove",
        "verify-removed",
    ]


def test_default_record_path_is_next_to_the_fleet_file(tmp_path: Path) -> None:
    assert default_record_path(tmp_path / "prod.toml") == tmp_path / "prod.toml.rotation.json"


def test_size_bound_at_its_edge(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    text = json.dumps(RECORD.to_json())
    path.write_text(text + " " * (MAX_RECORD_BYTES - len(text)))
    path.chmod(0o600)
    assert read_record(path) == RECORD
    path.write_text(text + " " * (MAX_RECORD_BYTES + 1 - len(text)))
    with pytest.raises(KeyringFileError):
        read_record(path)


@pytest.mark.parametrize(
    "change",
    [
        {"format": "other"},
        {"step": "later"},
        {"new_key": "not a key id"},
        {"instances": "a"},
        {"activated_at_ms": -1},
        {"wait_ms": "3s"},
        {"material": 5},
    ],
)
def test_malformed_records_refused(tmp_path: Path, change: dict[str, object]) -> None:
    path = tmp_path / "record.json"
    path.write_text(json.dumps({**RECORD.to_json(), **change}))
    path.chmod(0o600)
    with pytest.raises(RecordError):
        read_record(path)


def test_insecure_record_refused(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    write_record(path, RECORD)
    path.chmod(0o644)
    with pytest.raises(KeyringFileError):
        read_record(path)


def test_kept_material_must_be_the_recorded_key(tmp_path: Path) -> None:
    key, other = ProtectionKey.generate("2026-09"), ProtectionKey.generate("2026-09")
    path = tmp_path / "record.json"
    kept = RotationRecord(("a",), "2026-09", "2026-08", key.check_value_text, material=encode_base64url(key.material))
    write_record(path, kept)
    assert read_record(path) == kept
    for material in (encode_base64url(other.material), "not base64url!", encode_base64url(b"short")):
        path.write_text(json.dumps({**kept.to_json(), "material": material}))
        path.chmod(0o600)
        with pytest.raises(RecordError):
            read_record(path)
