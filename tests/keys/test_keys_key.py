"""ProtectionKey: ids, material bounds, copying, redaction, constant-time equality, immutability."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import itertools
import pickle
import string

import pytest

from soklet_core.keys import (
    MAX_KEY_ID_BYTES,
    MAX_KEY_MATERIAL_BYTES,
    MIN_KEY_MATERIAL_BYTES,
    KeyringError,
    KeyringErrorReason,
    ProtectionKey,
    decode_base64url,
    encode_base64url,
    is_valid_key_id,
)
from soklet_core.keys.base64url import _MSGSPEC_FROM_CHARS

MATERIAL = bytes(range(32))


@pytest.mark.parametrize(
    "key_id",
    ["a", "2026-08", "x" * MAX_KEY_ID_BYTES, "!#$%&'*+-.^_`|~", "AZaz09", "k.2"],
)
def test_valid_ids(key_id: str) -> None:
    assert ProtectionKey.from_id_and_bytes(key_id, MATERIAL).id == key_id


@pytest.mark.parametrize(
    "key_id",
    ["", "x" * (MAX_KEY_ID_BYTES + 1), "a b", "a:b", "a/b", "a(b)", 'a"b', "a,b", "é", "a\n", "[x]", "a@b"],
)
def test_invalid_ids_are_refused_without_echo(key_id: str) -> None:
    with pytest.raises(KeyringError) as caught:
        ProtectionKey.from_id_and_bytes(key_id, MATERIAL)
    assert caught.value.reason is KeyringErrorReason.INVALID_KEY_ID
    assert caught.value.key_id is None
    if key_id:
        assert key_id not in str(caught.value)


def test_non_str_id_is_refused() -> None:
    assert not is_valid_key_id(b"abc")
    with pytest.raises(KeyringError):
        ProtectionKey.from_id_and_bytes(b"abc", MATERIAL)  # type: ignore[arg-type]


def test_material_length_edge() -> None:
    assert ProtectionKey.from_id_and_bytes("k", bytes(MIN_KEY_MATERIAL_BYTES)).size == 32
    with pytest.raises(KeyringError) as caught:
        ProtectionKey.from_id_and_bytes("k", bytes(MIN_KEY_MATERIAL_BYTES - 1))
    assert caught.value.reason is KeyringErrorReason.MATERIAL_TOO_SHORT
    assert caught.value.key_id == "k"


def test_material_must_be_bytes_like() -> None:
    with pytest.raises(TypeError):
        ProtectionKey.from_id_and_bytes("k", "x" * 40)  # type: ignore[arg-type]


def test_material_is_copied() -> None:
    buffer = bytearray(MATERIAL)
    key = ProtectionKey.from_id_and_bytes("k", buffer)
    buffer[:] = bytes(32)
    assert key.material == MATERIAL
    view_source = bytearray(MATERIAL)
    key2 = ProtectionKey.from_id_and_bytes("k", memoryview(view_source))
    view_source[0] ^= 1
    assert key2.material == MATERIAL


def test_repr_and_str_redact() -> None:
    key = ProtectionKey.from_id_and_bytes("2026-08", MATERIAL)
    assert repr(key) == "ProtectionKey(id='2026-08', material=<redacted 32 bytes>)"
    assert str(key) == repr(key)
    for text in (repr(key), str(key), f"{key}", f"{key!r}"):
        assert MATERIAL.hex() not in text
        assert encode_base64url(MATERIAL) not in text


def test_the_constructor_validates_and_the_key_is_immutable() -> None:
    assert ProtectionKey("k", MATERIAL) == ProtectionKey.from_id_and_bytes("k", MATERIAL)
    assert ProtectionKey(key_id="k", material=bytearray(MATERIAL)).material == MATERIAL
    with pytest.raises(KeyringError) as caught:
        ProtectionKey("not a token", MATERIAL)
    assert caught.value.reason is KeyringErrorReason.INVALID_KEY_ID
    with pytest.raises(KeyringError) as caught:
        ProtectionKey("k", bytes(MAX_KEY_MATERIAL_BYTES + 1))
    assert caught.value.reason is KeyringErrorReason.MATERIAL_TOO_LONG
    with pytest.raises(TypeError):
        ProtectionKey("k", "x" * 40)  # type: ignore[arg-type]
    key = ProtectionKey("k", MATERIAL)
    with pytest.raises(AttributeError):
        key._material = bytes(32)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del key._id
    with pytest.raises(AttributeError):
        key.__dict__  # noqa: B018
    assert key.material == MATERIAL


def test_equality_is_id_and_material() -> None:
    a = ProtectionKey.from_id_and_bytes("k", MATERIAL)
    same = ProtectionKey.from_id_and_bytes("k", bytes(MATERIAL))
    other_bytes = ProtectionKey.from_id_and_bytes("k", MATERIAL[:-1] + b"\xff")
    other_id = ProtectionKey.from_id_and_bytes("j", MATERIAL)
    assert a == same
    assert hash(a) == hash(same)
    assert a != other_bytes
    assert a != other_id
    assert a.same_material(other_id)
    assert not a.same_material(other_bytes)
    assert a != MATERIAL


def test_check_value_is_the_documented_hmac() -> None:
    key = ProtectionKey.from_id_and_bytes("k", MATERIAL)
    expected = hmac.new(MATERIAL, b"soklet key check value v2", hashlib.sha256).digest()
    assert key.check_value == expected
    assert key.check_value_text == encode_base64url(expected)
    assert len(key.check_value_text) == 43


def test_generate_uses_fresh_material_of_the_asked_size() -> None:
    first, second = ProtectionKey.generate("k"), ProtectionKey.generate("k")
    assert first.size == 32
    assert not first.same_material(second)
    assert ProtectionKey.generate("k", 64).size == 64
    with pytest.raises(KeyringError):
        ProtectionKey.generate("k", 31)


def test_pickle_is_refused_and_copy_is_identity() -> None:
    key = ProtectionKey.from_id_and_bytes("k", MATERIAL)
    with pytest.raises(TypeError):
        pickle.dumps(key)
    assert copy.copy(key) is key
    assert copy.deepcopy(key) is key


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("", True),
        ("AA", True),
        ("AAA", True),
        ("AAAA", True),
        ("A", False),
        ("AB", False),
        ("AA==", False),
        ("A A", False),
        ("AA+/", False),
        ("AAA\n", False),
        ("-_-_", True),
        ("AA+A", False),
        ("AA/A", False),
        ("AAA=", False),
        ("=AAA", False),
        ("AA.A", False),
        ("AAA\u00e9", False),
        ("\u0410AAA", False),
    ],
)
def test_base64url_is_strict(text: str, ok: bool) -> None:
    if ok:
        assert encode_base64url(decode_base64url(text)) == text
    else:
        with pytest.raises(ValueError, match="base64url") as caught:
            decode_base64url(text)
        assert text not in str(caught.value) or not text


@pytest.mark.slow
def test_base64url_accepts_exactly_the_canonical_spellings_of_short_texts() -> None:
    # Every text of up to three characters, and every four-to-six-character text over a sample alphabet that
    # reaches each trailing-bit pattern, against the whole-text rule: decode, write again, compare.
    full = string.ascii_letters + string.digits + "-_"
    sample = "AQgw_-9z"

    def canonical(text: str) -> bool:
        if len(text) % 4 == 1:
            return False
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii") == text

    texts = itertools.chain(
        ("".join(chars) for size in range(4) for chars in itertools.product(full, repeat=size)),
        ("".join(chars) for size in range(4, 7) for chars in itertools.product(sample, repeat=size)),
    )
    for text in texts:
        try:
            decode_base64url(text)
            accepted = True
        except ValueError:
            accepted = False
        assert accepted == canonical(text), text


def _reference_accepts(text: str) -> bool:
    # The whole rule written plainly: the URL-safe alphabet, a possible length, and the canonical spelling.
    if any(char not in string.ascii_letters + string.digits + "-_" for char in text) or len(text) % 4 == 1:
        return False
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii") == text


@pytest.mark.parametrize("size", [_MSGSPEC_FROM_CHARS - 2, _MSGSPEC_FROM_CHARS, _MSGSPEC_FROM_CHARS + 1, 1652])
def test_long_texts_are_decoded_as_strictly_as_short_ones(size: int) -> None:
    # Texts longer than _MSGSPEC_FROM_CHARS (sealed-state tokens) take another decoder, which reads a JSON string:
    # it must accept and refuse exactly what the rule says, escapes included.
    data = bytes(range(256)) * 8
    text = encode_base64url(data)[:size]
    while not _reference_accepts(text):
        text = text[:-1]
    assert encode_base64url(decode_base64url(text)) == text
    middle = len(text) // 2
    edits = [
        # Escapes a JSON string would decode ("A", "/"), four of them so the decoded text keeps a possible length.
        text[:middle] + "\\u0041" * 4 + text[middle + 4 :],
        text[:middle] + "\\/" * 4 + text[middle + 4 :],
        text[:middle] + '"' + text[middle + 1 :],
        text[:middle] + "+" + text[middle + 1 :],
        text[:middle] + " " + text[middle + 1 :],
        text[:-2] + "==",
        text + "=",
        text[:-1] + ("B" if text[-1] == "A" else "A"),  # trailing bits, when the last group is partial
        text + "A",
        text + "AA",
    ]
    for edited in edits:
        if _reference_accepts(edited):
            assert encode_base64url(decode_base64url(edited)) == edited
        else:
            with pytest.raises(ValueError, match="base64url") as caught:
                decode_base64url(edited)
            assert edited not in str(caught.value)
