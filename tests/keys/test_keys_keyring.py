"""ProtectionKeyring: the builder, its invariants, and the four immutable transitions."""

from __future__ import annotations

import pytest

from soklet_core.keys import KeyringError, KeyringErrorReason, ProtectionKey, ProtectionKeyring


def key(key_id: str, fill: int = 1) -> ProtectionKey:
    return ProtectionKey.from_id_and_bytes(key_id, bytes([fill]) * 32)


def test_builder_orders_verification_keys_by_id() -> None:
    ring = ProtectionKeyring(key("b"), [key("z"), key("a")])
    assert ring.active_key.id == "b"
    assert [k.id for k in ring.verification_keys] == ["a", "z"]
    assert ring.key_ids == ("b", "a", "z")
    assert "a" in ring
    assert "q" not in ring
    assert len(ring) == 3
    assert ring.key("z") == key("z")
    assert ring.key("q") is None
    assert repr(ring) == "ProtectionKeyring(active='b', verification=('a', 'z'))"


@pytest.mark.parametrize("dup", ["a", "b"])
def test_constructor_refuses_duplicate_ids(dup: str) -> None:
    with pytest.raises(KeyringError) as caught:
        ProtectionKeyring(key("a"), [key("b"), key(dup, 2)])
    assert caught.value.reason is KeyringErrorReason.DUPLICATE_KEY_ID
    assert caught.value.key_id == dup


def test_constructor_checks_types_and_the_keyring_is_immutable() -> None:
    with pytest.raises(TypeError):
        ProtectionKeyring()  # type: ignore[call-arg]
    ring = ProtectionKeyring(key("a"))
    with pytest.raises(AttributeError):
        ring.active_key = key("b")  # type: ignore[misc]
    with pytest.raises(TypeError):
        ProtectionKeyring("a")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ProtectionKeyring(key("a"), ["b"])  # type: ignore[list-item]
    assert ProtectionKeyring.with_active_key(key("a"), [key("b")]) == ProtectionKeyring(key("a"), [key("b")])


def test_stage_adds_a_verification_key_without_touching_the_original() -> None:
    ring = ProtectionKeyring(key("a"))
    staged = ring.with_staged(key("b", 2))
    assert ring.key_ids == ("a",)
    assert staged.key_ids == ("a", "b")
    assert staged.active_key.id == "a"


def test_identical_restage_is_a_noop_in_either_role() -> None:
    ring = ProtectionKeyring(key("a"), [key("b", 2)])
    assert ring.with_staged(key("b", 2)) is ring
    assert ring.with_staged(key("a")) is ring


@pytest.mark.parametrize("key_id", ["a", "b"])
def test_same_id_other_bytes_is_refused(key_id: str) -> None:
    ring = ProtectionKeyring(key("a"), [key("b", 2)])
    with pytest.raises(KeyringError) as caught:
        ring.with_staged(key(key_id, 9))
    assert caught.value.reason is KeyringErrorReason.CONFLICTING_MATERIAL


def test_activate_demotes_the_former_active_key() -> None:
    ring = ProtectionKeyring(key("a"), [key("b", 2)])
    activated = ring.with_activated("b")
    assert activated.active_key.id == "b"
    assert [k.id for k in activated.verification_keys] == ["a"]
    assert activated.with_activated("b") is activated
    with pytest.raises(KeyringError) as caught:
        ring.with_activated("nope")
    assert caught.value.reason is KeyringErrorReason.UNKNOWN_KEY


def test_remove_refuses_the_active_key_and_unknown_ids() -> None:
    ring = ProtectionKeyring(key("a"), [key("b", 2)])
    assert ring.without("b").key_ids == ("a",)
    with pytest.raises(KeyringError) as active:
        ring.without("a")
    assert active.value.reason is KeyringErrorReason.ACTIVE_KEY_REMOVAL
    with pytest.raises(KeyringError) as unknown:
        ring.without("zz")
    assert unknown.value.reason is KeyringErrorReason.UNKNOWN_KEY
    with pytest.raises(KeyringError) as invalid:
        ring.without("not a valid id")
    assert invalid.value.key_id is None


def test_rotate_is_retry_safe() -> None:
    ring = ProtectionKeyring(key("a"))
    rotated = ring.with_rotated(key("b", 2))
    assert rotated.active_key.id == "b"
    assert rotated.key_ids == ("b", "a")
    assert rotated.with_rotated(key("b", 2)) is rotated
    with pytest.raises(KeyringError):
        rotated.with_rotated(key("b", 3))


def test_equality_compares_material() -> None:
    one = ProtectionKeyring(key("a"), [key("b", 2)])
    same = ProtectionKeyring(key("a"), [key("b", 2)])
    other = ProtectionKeyring(key("a"), [key("b", 3)])
    swapped = ProtectionKeyring(key("b", 2), [key("a")])
    assert one == same
    assert hash(one) == hash(same)
    assert one != other
    assert one != swapped
