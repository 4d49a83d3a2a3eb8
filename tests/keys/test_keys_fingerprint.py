"""Fingerprints v2 and legacy v1: the documented encoding, order independence, byte sensitivity, comparison."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soklet_core.keys import (
    PROTECTION_PROFILE,
    Fingerprint,
    FingerprintComparison,
    KeyringError,
    ProtectionKey,
    ProtectionKeyring,
    compare,
)

ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=12)
materials = st.binary(min_size=32, max_size=40)


def ring(active: tuple[str, bytes], *verification: tuple[str, bytes]) -> ProtectionKeyring:
    others = [ProtectionKey.from_id_and_bytes(key_id, material) for key_id, material in verification]
    return ProtectionKeyring(ProtectionKey.from_id_and_bytes(*active), others)


def by_hand(version: int, active: tuple[str, bytes], verification: list[tuple[str, bytes]]) -> str:
    """The encoding exactly as docs/keys.md states it, computed without the library."""

    def check(material: bytes) -> bytes:
        return hmac.new(material, b"soklet key check value v2", hashlib.sha256).digest()

    fields = [b"soklet-mcp-protection-v1", active[0].encode()]
    if version == 2:
        fields.append(check(active[1]))
    for key_id, material in sorted(verification):
        fields.append(key_id.encode())
        if version == 2:
            fields.append(check(material))
    encoded = b"".join(struct.pack(">I", len(field)) + field for field in fields)
    return base64.urlsafe_b64encode(hashlib.sha256(encoded).digest()).rstrip(b"=").decode()


def test_known_answer_matches_the_documented_encoding() -> None:
    active = ("2026-08", bytes(range(32)))
    verification = [("2026-07", bytes(range(1, 33))), ("2025-12", bytes(32))]
    keyring = ring(active, *verification)
    assert keyring.fingerprint() == Fingerprint(2, PROTECTION_PROFILE, by_hand(2, active, verification))
    assert keyring.fingerprint(1) == Fingerprint(1, PROTECTION_PROFILE, by_hand(1, active, verification))
    assert len(keyring.fingerprint().value) == 43


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(ids, materials, min_size=1, max_size=6),
    st.randoms(use_true_random=False),
)
def test_verification_order_does_not_matter(keys: dict[str, bytes], chooser: object) -> None:
    items = list(keys.items())
    active, rest = items[0], items[1:]
    shuffled = list(rest)
    chooser.shuffle(shuffled)  # type: ignore[attr-defined]
    for version in (1, 2):
        assert ring(active, *rest).fingerprint(version) == ring(active, *shuffled).fingerprint(version)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(ids, materials, min_size=1, max_size=5),
    st.data(),
)
def test_any_byte_change_changes_v2_but_not_v1(keys: dict[str, bytes], data: st.DataObject) -> None:
    items = list(keys.items())
    target = data.draw(st.integers(0, len(items) - 1))
    key_id, material = items[target]
    position = data.draw(st.integers(0, len(material) - 1))
    flip = data.draw(st.integers(1, 255))
    changed_material = bytearray(material)
    changed_material[position] ^= flip
    changed = list(items)
    changed[target] = (key_id, bytes(changed_material))
    before, after = ring(items[0], *items[1:]), ring(changed[0], *changed[1:])
    assert before.fingerprint(2).compare(after.fingerprint(2)) is FingerprintComparison.DIFFERENT
    assert before.fingerprint(1).compare(after.fingerprint(1)) is FingerprintComparison.EQUAL


def test_same_ids_other_bytes_equal_under_v1_different_under_v2() -> None:
    one = ring(("a", b"\x01" * 32), ("b", b"\x02" * 32))
    two = ring(("a", b"\x09" * 32), ("b", b"\x08" * 32))
    assert compare(one.fingerprint(1), two.fingerprint(1)) is FingerprintComparison.EQUAL
    assert compare(one.fingerprint(2), two.fingerprint(2)) is FingerprintComparison.DIFFERENT


def test_role_and_id_changes_change_both_versions() -> None:
    base = ring(("a", b"\x01" * 32), ("b", b"\x02" * 32))
    swapped = ring(("b", b"\x02" * 32), ("a", b"\x01" * 32))
    renamed = ring(("a", b"\x01" * 32), ("c", b"\x02" * 32))
    for version in (1, 2):
        assert base.fingerprint(version) != swapped.fingerprint(version)
        assert base.fingerprint(version) != renamed.fingerprint(version)


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(ids, materials, min_size=1, max_size=4), st.dictionaries(ids, materials, min_size=1, max_size=4))
def test_v1_and_v2_are_incomparable_never_equal(first: dict[str, bytes], second: dict[str, bytes]) -> None:
    a = list(first.items())
    b = list(second.items())
    v1, v2 = ring(a[0], *a[1:]).fingerprint(1), ring(b[0], *b[1:]).fingerprint(2)
    assert compare(v1, v2) is FingerprintComparison.INCOMPARABLE
    assert compare(v2, v1) is FingerprintComparison.INCOMPARABLE
    # Even a v1 fingerprint that copies a v2's profile and value is not equal to it.
    forged = Fingerprint(1, v2.profile, v2.value)
    assert compare(forged, v2) is FingerprintComparison.INCOMPARABLE


def test_profile_mismatch_is_different() -> None:
    fingerprint = ring(("a", b"\x01" * 32)).fingerprint()
    other = Fingerprint(2, "another-profile", fingerprint.value)
    assert compare(fingerprint, other) is FingerprintComparison.DIFFERENT
    assert compare(fingerprint, fingerprint) is FingerprintComparison.EQUAL


def test_json_round_trip_and_validation() -> None:
    fingerprint = ring(("a", b"\x01" * 32)).fingerprint()
    assert fingerprint.to_json() == {"version": 2, "profile": PROTECTION_PROFILE, "value": fingerprint.value}
    assert Fingerprint.from_json(fingerprint.to_json()) == fingerprint
    assert Fingerprint.from_json({**fingerprint.to_json(), "version": 3}).version == 3
    for bad in (
        {},
        {**fingerprint.to_json(), "version": "2"},
        {**fingerprint.to_json(), "version": True},
        {**fingerprint.to_json(), "version": 0},
        {**fingerprint.to_json(), "profile": ""},
        {**fingerprint.to_json(), "value": "short"},
        {**fingerprint.to_json(), "value": fingerprint.value + "="},
        {**fingerprint.to_json(), "value": 7},
    ):
        with pytest.raises(KeyringError):
            Fingerprint.from_json(bad)


def test_unknown_version_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fingerprint version"):
        ring(("a", b"\x01" * 32)).fingerprint(3)
