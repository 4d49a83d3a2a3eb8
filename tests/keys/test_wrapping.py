"""LocalKek and WrappedKey: AES-256-GCM under a 32-byte KEK, bound to the key id and profile, every limit at its
edge, and no KEK or key material in any repr or message."""

from __future__ import annotations

import pickle

import pytest

from soklet_core.keys import (
    KEK_BYTES,
    KeyWrapError,
    KeyWrapErrorReason,
    LocalKek,
    ProtectionKey,
    WrappedKey,
    encode_base64url,
)
from soklet_core.keys.wrapping import MAX_WRAPPED_BYTES, check_kek_id

PROFILE = "soklet-mcp-protection-v1"
KEK = bytes(range(1, 33))


@pytest.mark.parametrize("length", [KEK_BYTES - 1, KEK_BYTES + 1, 0])
def test_a_kek_must_be_exactly_32_bytes(length: int) -> None:
    with pytest.raises(KeyWrapError) as caught:
        LocalKek(bytes(length))
    assert caught.value.reason is KeyWrapErrorReason.INVALID_KEK


def test_a_wrapped_key_unwraps_to_the_same_key_and_hides_it() -> None:
    kek = LocalKek(KEK)
    key = ProtectionKey.generate("2026-08")
    wrapped = kek.wrap(key, PROFILE)
    assert wrapped.kek_id == kek.kek_id
    assert key.material not in wrapped.ciphertext
    assert kek.unwrap(wrapped, PROFILE).same_material(key)
    assert wrapped.ciphertext != kek.wrap(key, PROFILE).ciphertext  # a fresh nonce each time
    for text in (repr(kek), repr(wrapped), kek.kek_id):
        assert encode_base64url(KEK) not in text
        assert encode_base64url(key.material) not in text
        assert KEK.hex() not in text


def test_the_kek_id_tells_keks_apart_and_is_stable() -> None:
    assert LocalKek(KEK).kek_id == LocalKek(KEK).kek_id
    assert LocalKek(KEK).kek_id != LocalKek(bytes(32)).kek_id
    assert LocalKek(KEK).kek_id.startswith("kek-")


def test_another_kek_is_wrong_kek_and_a_moved_or_tampered_key_does_not_unwrap() -> None:
    kek = LocalKek(KEK)
    wrapped = kek.wrap(ProtectionKey.generate("k1"), PROFILE)
    with pytest.raises(KeyWrapError) as caught:
        LocalKek(bytes(32)).unwrap(wrapped, PROFILE)
    assert caught.value.reason is KeyWrapErrorReason.WRONG_KEK
    assert "'k1'" in str(caught.value)
    flipped = bytes([wrapped.ciphertext[-1] ^ 1])
    for bad, profile in (
        (WrappedKey(key_id="k2", kek_id=wrapped.kek_id, ciphertext=wrapped.ciphertext), PROFILE),
        (wrapped, "another-profile"),
        (WrappedKey(key_id="k1", kek_id=wrapped.kek_id, ciphertext=wrapped.ciphertext[:-1] + flipped), PROFILE),
    ):
        with pytest.raises(KeyWrapError) as caught:
            kek.unwrap(bad, profile)
        assert caught.value.reason is KeyWrapErrorReason.UNWRAP_FAILED
    short = WrappedKey(key_id="k1", kek_id=wrapped.kek_id, ciphertext=wrapped.ciphertext[:28])
    with pytest.raises(KeyWrapError) as caught:
        kek.unwrap(short, PROFILE)
    assert caught.value.reason is KeyWrapErrorReason.MALFORMED_WRAPPED_KEY


def test_wrapped_ciphertext_and_kek_id_limits_at_their_edges() -> None:
    WrappedKey(key_id="k1", kek_id="x" * 64, ciphertext=b"\x00" * MAX_WRAPPED_BYTES)
    WrappedKey(key_id="k1", kek_id="x", ciphertext=b"\x00")
    for kek_id, ciphertext in (("x" * 65, b"\x00"), ("", b"\x00"), ("a b", b"\x00"), ("x", b"")):
        with pytest.raises(KeyWrapError) as caught:
            WrappedKey(key_id="k1", kek_id=kek_id, ciphertext=ciphertext)
        assert caught.value.reason is KeyWrapErrorReason.MALFORMED_WRAPPED_KEY
    with pytest.raises(KeyWrapError):
        WrappedKey(key_id="k1", kek_id="x", ciphertext=b"\x00" * (MAX_WRAPPED_BYTES + 1))
    assert check_kek_id("kek-abc") == "kek-abc"


def test_a_kek_cannot_be_pickled() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(LocalKek(KEK))
