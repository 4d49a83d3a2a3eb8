"""The one rule for text shaped like key material, and the material size bounds of ProtectionKey."""

from __future__ import annotations

import base64
import secrets

import pytest

from soklet_core.keys import (
    MATERIAL_HEX_RUN_CHARS,
    MATERIAL_RUN_CHARS,
    MAX_KEY_MATERIAL_BYTES,
    MIN_KEY_MATERIAL_BYTES,
    KeyringError,
    KeyringErrorReason,
    ProtectionKey,
    ProtectionKeyring,
    encode_base64url,
    looks_like_key_material,
    printable_name,
)

#: Fixed samples, so the tests never depend on the rule's small miss rate on random material.
MATERIAL_43 = "hJ3kQ9vZx2Lw7Rt5mN8bY1cF4gP6sD0aE-uW_qK3oIl"
MATERIAL_STD = "hJ3kQ9vZx2Lw7Rt5mN8bY1cF4gP6sD0aE+uW/qK3oIk="
MATERIAL_HEX = "8f3a9c2e71b04d5f6a8e9c1b2d3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f"


@pytest.mark.parametrize(
    "name",
    [
        "2026-08",
        "prod-2026-09-01.2",
        "2026-11-30.15",
        "k1",
        "eu-west-1-primary-2026-09-01",
        "soklet-2026-09-01T12-00-00Z",
        "customer-42-tenant-7-key-3",
        "MyService-Production-2026-09",
        "ThisIsAVeryLongCamelCaseIdentifier",
        "20260901120000123456789012345678901",
        "material_file",
        "eu-west-1-primary-2026-09-01-customer-tenant-key",
    ],
)
def test_names_people_choose_are_not_material(name: str) -> None:
    assert not looks_like_key_material(name)
    assert printable_name(name) == name


@pytest.mark.parametrize(
    "text",
    [
        MATERIAL_43,
        MATERIAL_43[:30],
        MATERIAL_43[: MATERIAL_RUN_CHARS + 4],
        MATERIAL_STD,
        MATERIAL_HEX,
        MATERIAL_HEX[:MATERIAL_HEX_RUN_CHARS],
        f"prefix.{MATERIAL_43}.suffix",
    ],
)
def test_material_shapes_are_recognised(text: str) -> None:
    assert looks_like_key_material(text)
    assert printable_name(text, what="an id") == "<an id that looks like key material>"


def test_hex_run_edge() -> None:
    assert looks_like_key_material(MATERIAL_HEX[:MATERIAL_HEX_RUN_CHARS])
    # One hex digit short and all lowercase-or-digit: judged by the base64 rule, which these digits miss.
    assert not looks_like_key_material("1234abcd" * 3 + "1234abc")


def test_nearly_all_random_material_is_recognised() -> None:
    misses = 0
    for _ in range(2000):
        text = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        misses += not looks_like_key_material(text)
    # Measured miss rate about 2 in 10,000; 10 in 2,000 would be a broken rule, not chance.
    assert misses < 10


def test_material_size_edges() -> None:
    assert ProtectionKey.from_id_and_bytes("k", bytes(MAX_KEY_MATERIAL_BYTES)).size == MAX_KEY_MATERIAL_BYTES
    assert ProtectionKey.generate("k", MAX_KEY_MATERIAL_BYTES).size == MAX_KEY_MATERIAL_BYTES
    assert ProtectionKey.generate("k", MIN_KEY_MATERIAL_BYTES).size == MIN_KEY_MATERIAL_BYTES
    with pytest.raises(KeyringError) as raised:
        ProtectionKey.from_id_and_bytes("k", bytes(MAX_KEY_MATERIAL_BYTES + 1))
    assert raised.value.reason is KeyringErrorReason.MATERIAL_TOO_LONG
    with pytest.raises(KeyringError) as raised:
        ProtectionKey.generate("k", MAX_KEY_MATERIAL_BYTES + 1)
    assert raised.value.reason is KeyringErrorReason.MATERIAL_TOO_LONG
    with pytest.raises(KeyringError):
        ProtectionKey.generate("k", 800_000)


def test_an_unknown_id_shaped_like_material_is_never_repeated() -> None:
    keyring = ProtectionKeyring(ProtectionKey.generate("2026-08"))
    # A valid token, but the key type refuses it (it would be published in every header), without repeating it.
    for build in (lambda: ProtectionKey.generate(MATERIAL_43[:40]), lambda: ProtectionKey(MATERIAL_43, bytes(32))):
        with pytest.raises(KeyringError) as refused:
            build()
        assert refused.value.reason is KeyringErrorReason.MATERIAL_SHAPED_KEY_ID
        assert MATERIAL_43[:16] not in str(refused.value)
        assert refused.value.key_id is None
    for change in (keyring.with_activated, keyring.without):
        with pytest.raises(KeyringError) as raised:
            change(MATERIAL_43)
        assert MATERIAL_43[:16] not in str(raised.value)
        assert "an id that looks like key material" in str(raised.value)
    with pytest.raises(KeyringError) as raised:
        keyring.with_activated("2026-09")
    assert "'2026-09'" in str(raised.value)


def test_encoded_max_key_is_short_enough_for_every_reader() -> None:
    from soklet_core.files import MAX_MATERIAL_FILE_BYTES

    assert len(encode_base64url(bytes(MAX_KEY_MATERIAL_BYTES))) < MAX_MATERIAL_FILE_BYTES


def test_every_entry_refuses_a_material_shaped_id_with_the_one_rule() -> None:
    from soklet_core.keys import check_key_id, key_id_problem

    assert key_id_problem(MATERIAL_43) is KeyringErrorReason.MATERIAL_SHAPED_KEY_ID
    assert key_id_problem("a b") is KeyringErrorReason.INVALID_KEY_ID
    assert key_id_problem("prod-2026-09-01.2") is None
    assert check_key_id("2026-09") == "2026-09"
    with pytest.raises(KeyringError) as refused:
        check_key_id(MATERIAL_43)
    assert MATERIAL_43[:16] not in str(refused.value)
