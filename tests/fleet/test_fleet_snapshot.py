"""The snapshot answer read strictly: exactly the contract's members, each of its type, bounded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from soklet_core.fleet import (
    MAX_PROCESS_ID_CHARS,
    MAX_SNAPSHOT_BYTES,
    MAX_SNAPSHOT_KEYS,
    MIN_PROCESS_ID_CHARS,
    KeyRoleName,
    SnapshotError,
    parse_admin_snapshot,
)
from soklet_core.keys import ProtectionKey
from soklet_core.mcp.server.ops._snapshot import new_process_id
from tests.fleet.support_snapshots import A, B, document, keyring, process_id_of


def _parse(doc: dict[str, Any]) -> None:
    parse_admin_snapshot(json.dumps(doc).encode())


def test_a_contract_document_round_trips() -> None:
    doc = document(keyring(A, B), "eu-1")
    parsed = parse_admin_snapshot(json.dumps(doc).encode())
    assert parsed.to_json() == doc
    assert parsed.instance == "eu-1"
    assert parsed.key("2026-09") is not None
    assert parsed.keys[0].role is KeyRoleName.ACTIVE
    assert parsed.keys[1].short_check_value == B.check_value_text[:8]
    assert parsed.fingerprint == keyring(A, B).fingerprint()
    assert parsed.process_id == process_id_of("eu-1")
    assert parsed.keys[1].retired is None
    retired = document(keyring(A, B), retired="2026-09-01T08:00:00+00:00")
    parsed = parse_admin_snapshot(json.dumps(retired).encode())
    assert parsed.to_json() == retired
    assert parsed.keys[1].retired == "2026-09-01T08:00:00+00:00"


def test_an_older_builds_snapshot_parses_without_the_optional_members() -> None:
    """No ``process_id`` and no ``retired`` (a build before them): read, identified by name; a ``retired`` of
    null reads as unknown."""
    doc = document(keyring(A, B), "eu-1", legacy=True)
    parsed = parse_admin_snapshot(json.dumps(doc).encode())
    assert parsed.process_id is None
    assert parsed.to_json() == doc
    doc["keys"][1]["retired"] = None
    assert parse_admin_snapshot(json.dumps(doc).encode()).keys[1].retired is None


def test_process_identity_at_its_edges() -> None:
    """What ``new_process_id`` makes reads back; 22 and 64 base64url characters pass, 21 and 65 are refused."""
    made = new_process_id()
    assert len(made) == MIN_PROCESS_ID_CHARS
    assert made != new_process_id()
    for text in (made, "A" * MIN_PROCESS_ID_CHARS, "-_" * (MAX_PROCESS_ID_CHARS // 2)):
        assert parse_admin_snapshot(json.dumps(document(keyring(A), process_id=text)).encode()).process_id == text
    for text in ("A" * (MIN_PROCESS_ID_CHARS - 1), "A" * (MAX_PROCESS_ID_CHARS + 1)):
        with pytest.raises(SnapshotError) as caught:
            _parse(document(keyring(A), process_id=text))
        assert caught.value.where == "process_id"


def _broken(change: str) -> dict[str, Any]:
    doc = document(keyring(A, B))
    if change == "missing":
        del doc["generation"]
    elif change == "extra":
        doc["material"] = "x"
    elif change == "generation":
        doc["generation"] = -1
    elif change == "fraction":
        doc["max_state_rounds"] = 1.5
    elif change == "string-number":
        doc["max_state_lifetime_ms"] = "900000"
    elif change == "bool":
        doc["generation"] = True
    elif change == "role":
        doc["keys"][0]["role"] = "primary"
    elif change == "check":
        doc["keys"][0]["check_value"] = "short"
    elif change == "key-member":
        doc["keys"][0]["material"] = "x"
    elif change == "key-id":
        doc["keys"][0]["id"] = "a b"
    elif change == "duplicate":
        doc["keys"][1]["id"] = doc["keys"][0]["id"]
    elif change == "active":
        doc["active"] = "2026-09"
    elif change == "verification":
        doc["verification"] = []
    elif change == "fingerprint":
        doc["fingerprint"]["value"] = "x"
    elif change == "fingerprint-extra":
        doc["fingerprint"]["extra"] = 1
    elif change == "instance":
        doc["instance"] = "bad\u001b[2J"
    elif change == "reservations":
        doc["keys"][0]["reservations"] = None
    elif change == "process-charset":
        doc["process_id"] = "A" * 21 + "="
    elif change == "process-space":
        doc["process_id"] = "A" * 21 + " "
    elif change == "process-null":
        doc["process_id"] = None
    elif change == "process-number":
        doc["process_id"] = 12345678901234567890123
    elif change == "process-escape":
        doc["process_id"] = "A" * 21 + "\u001b"
    elif change == "retired":
        doc["keys"][1]["retired"] = 1_790_000_000_000
    elif change == "retired-empty":
        doc["keys"][1]["retired"] = ""
    elif change == "extra-with-optional":
        doc["keys"][1]["retired"] = "2026-09-01T08:00:00+00:00"
        doc["keys"][1]["material"] = "x"
    return doc


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ("missing", "generation"),
        ("extra", None),
        ("generation", "generation"),
        ("fraction", "max_state_rounds"),
        ("string-number", "max_state_lifetime_ms"),
        ("bool", "generation"),
        ("role", "keys[0].role"),
        ("check", "keys[0].check_value"),
        ("key-member", "keys[0]"),
        ("key-id", "keys[0].id"),
        ("duplicate", "keys"),
        ("active", "active"),
        ("verification", "verification"),
        ("fingerprint", "fingerprint"),
        ("fingerprint-extra", "fingerprint"),
        ("instance", "instance"),
        ("reservations", "keys[0].reservations"),
        ("process-charset", "process_id"),
        ("process-space", "process_id"),
        ("process-null", "process_id"),
        ("process-number", "process_id"),
        ("process-escape", "process_id"),
        ("retired", "keys[1].retired"),
        ("retired-empty", "keys[1].retired"),
        ("extra-with-optional", "keys[1]"),
    ],
)
def test_every_departure_from_the_contract_is_named(change: str, where: str | None) -> None:
    with pytest.raises(SnapshotError) as caught:
        _parse(_broken(change))
    assert caught.value.where == where


@pytest.mark.parametrize("body", [b"", b"[]", b'{"a":1,"a":2}', b"\xef\xbb\xbf{}", b"{} x", b'{"x": NaN}', b"\xff"])
def test_non_json_is_refused_without_repeating_it(body: bytes) -> None:
    with pytest.raises(SnapshotError) as caught:
        parse_admin_snapshot(body)
    assert "NaN" not in str(caught.value)


def test_size_and_key_count_at_their_edge() -> None:
    keys = [
        ProtectionKey.from_id_and_bytes(f"k{index}", bytes([index % 256]) * 32) for index in range(MAX_SNAPSHOT_KEYS)
    ]
    doc = document(keyring(keys[0], *keys[1:]))
    _parse(doc)
    extra = ProtectionKey.from_id_and_bytes("extra", b"e" * 32)
    with pytest.raises(SnapshotError, match="more than 1,000 keys"):
        _parse(document(keyring(keys[0], *keys[1:], extra)))
    body = json.dumps(document(keyring(A))).encode()
    padded = body[:-1] + b" " * (MAX_SNAPSHOT_BYTES - len(body)) + b"}"
    assert len(padded) == MAX_SNAPSHOT_BYTES
    parse_admin_snapshot(padded)
    with pytest.raises(SnapshotError, match="not strict JSON"):
        parse_admin_snapshot(padded[:-1] + b" }")
