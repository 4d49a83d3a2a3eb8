"""The keyring file format: round trips, references, and one clear message per malformed case."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from soklet_core.files import (
    MAX_KEYRING_FILE_BYTES,
    InlineMaterial,
    KeyEntry,
    KeyringDocument,
    KeyringFileError,
    KeyringFileErrorReason,
    KeyRole,
    MaterialEnv,
    MaterialFile,
    parse_keyring_document,
    render_keyring_document,
)
from soklet_core.keys import ProtectionKey, encode_base64url

A = bytes(range(32))
B = bytes(range(100, 132))
A_TEXT = encode_base64url(A)
B_TEXT = encode_base64url(B)
WHEN = datetime(2026, 8, 1, tzinfo=UTC)


def toml(*keys: str, header: str = 'format = "soklet-keyring/1"\nprofile = "soklet-mcp-protection-v1"\n') -> str:
    return header + "".join(f"\n[[keys]]\n{body}\n" for body in keys)


def key_table(key_id: str = "k1", role: str = "active", material: str | None = None, extra: str = "") -> str:
    source = f'material = "{material if material is not None else A_TEXT}"\n' if material != "" else ""
    return f'id = "{key_id}"\nrole = "{role}"\n{source}created = 2026-08-01T00:00:00Z\n{extra}'


def refused(text: str | bytes, **kwargs: object) -> KeyringFileError:
    with pytest.raises(KeyringFileError) as caught:
        parse_keyring_document(text, path="ring.toml", **kwargs)  # type: ignore[arg-type]
    message = str(caught.value)
    for secret in (A_TEXT, B_TEXT, A.hex(), B.hex()):
        assert secret not in message
    assert message.startswith("ring.toml: ")
    return caught.value


def test_issue_example_parses() -> None:
    document = parse_keyring_document(
        toml(key_table("2026-08"), key_table("2026-07", "verification", B_TEXT)), path="ring.toml"
    )
    keyring = document.keyring()
    assert keyring.active_key == ProtectionKey.from_id_and_bytes("2026-08", A)
    assert keyring.key("2026-07") == ProtectionKey.from_id_and_bytes("2026-07", B)
    assert [entry.created for entry in document.entries] == [WHEN, WHEN]
    assert all(isinstance(entry.source, InlineMaterial) for entry in document.entries)


def test_render_then_parse_round_trips_and_uses_the_documented_layout() -> None:
    document = KeyringDocument(
        (
            KeyEntry(ProtectionKey.from_id_and_bytes("k1", A), KeyRole.ACTIVE, WHEN),
            KeyEntry(ProtectionKey.from_id_and_bytes("k2", B), KeyRole.VERIFICATION, WHEN, MaterialEnv("K2")),
        )
    )
    text = render_keyring_document(document)
    assert 'format = "soklet-keyring/1"\nprofile = "soklet-mcp-protection-v1"\n' in text
    assert f'[[keys]]\nid = "k1"\nrole = "active"\nmaterial = "{A_TEXT}"\ncreated = 2026-08-01T00:00:00Z\n' in text
    assert '[[keys]]\nid = "k2"\nrole = "verification"\nmaterial_env = "K2"\ncreated = 2026-08-01T00:00:00Z\n' in text
    assert B_TEXT not in text
    again = parse_keyring_document(text, environ={"K2": B_TEXT})
    assert again == document


def test_material_file_is_relative_to_the_keyring_folder(tmp_path: Path) -> None:
    secret = tmp_path / "secrets" / "k2"
    secret.parent.mkdir()
    secret.write_text(B_TEXT + "\n")
    secret.chmod(0o600)
    text = toml(
        key_table(),
        f'id = "k2"\nrole = "verification"\nmaterial_file = "secrets/k2"\ncreated = {WHEN:%Y-%m-%dT%H:%M:%SZ}',
    )
    document = parse_keyring_document(text, base_dir=tmp_path)
    entry = document.entry("k2")
    assert entry is not None
    assert entry.source == MaterialFile("secrets/k2")
    assert entry.key.material == B
    assert 'material_file = "secrets/k2"' in render_keyring_document(document)


def test_offset_datetimes_are_normalized_to_utc() -> None:
    text = toml(key_table().replace("2026-08-01T00:00:00Z", "2026-08-01T02:00:00+02:00"))
    assert parse_keyring_document(text).entries[0].created == WHEN


CASES = [
    (
        "no active key",
        toml(key_table(role="verification")),
        KeyringFileErrorReason.NO_ACTIVE_KEY,
        None,
        "role",
    ),
    (
        "two active keys",
        toml(key_table("k1"), key_table("k2", material=B_TEXT)),
        KeyringFileErrorReason.MULTIPLE_ACTIVE_KEYS,
        None,
        "role",
    ),
    ("no keys at all", toml(), KeyringFileErrorReason.NO_ACTIVE_KEY, None, "role"),
    (
        "duplicate ids",
        toml(key_table("k1"), key_table("k1", "verification", B_TEXT)),
        KeyringFileErrorReason.DUPLICATE_KEY_ID,
        "'k1' (keys[1])",
        "id",
    ),
    (
        "bad base64",
        toml(key_table(material=A_TEXT[:-2] + "*=")),
        KeyringFileErrorReason.INVALID_BASE64,
        "'k1' (keys[0])",
        "material",
    ),
    (
        "padded base64",
        toml(key_table(material=A_TEXT + "=")),
        KeyringFileErrorReason.INVALID_BASE64,
        "'k1' (keys[0])",
        "material",
    ),
    (
        "non-canonical bits",
        toml(key_table(material=A_TEXT[:-1] + "J")),
        KeyringFileErrorReason.INVALID_BASE64,
        "'k1' (keys[0])",
        "material",
    ),
    (
        "short material",
        toml(key_table(material=A_TEXT[:40])),
        KeyringFileErrorReason.MATERIAL_TOO_SHORT,
        "'k1' (keys[0])",
        "material",
    ),
    ("bad id", toml(key_table("bad id")), KeyringFileErrorReason.INVALID_KEY_ID, "keys[0]", "id"),
    ("long id", toml(key_table("x" * 65)), KeyringFileErrorReason.INVALID_KEY_ID, "keys[0]", "id"),
    (
        "id not a string",
        toml(key_table().replace('id = "k1"', "id = 7")),
        KeyringFileErrorReason.INVALID_FIELD,
        "keys[0]",
        "id",
    ),
    (
        "missing id",
        toml(key_table().replace('id = "k1"\n', "")),
        KeyringFileErrorReason.MISSING_FIELD,
        "keys[0]",
        "id",
    ),
    (
        "bad role",
        toml(key_table(role="primary")),
        KeyringFileErrorReason.INVALID_ROLE,
        "'k1' (keys[0])",
        "role",
    ),
    (
        "missing role",
        toml(key_table().replace('role = "active"\n', "")),
        KeyringFileErrorReason.MISSING_FIELD,
        "'k1' (keys[0])",
        "role",
    ),
    (
        "missing created",
        toml(key_table().replace("created = 2026-08-01T00:00:00Z\n", "")),
        KeyringFileErrorReason.MISSING_FIELD,
        "'k1' (keys[0])",
        "created",
    ),
    (
        "local created",
        toml(key_table().replace("2026-08-01T00:00:00Z", "2026-08-01T00:00:00")),
        KeyringFileErrorReason.INVALID_CREATED,
        "'k1' (keys[0])",
        "created",
    ),
    (
        "created as a string",
        toml(key_table().replace("2026-08-01T00:00:00Z", '"2026-08-01"')),
        KeyringFileErrorReason.INVALID_CREATED,
        "'k1' (keys[0])",
        "created",
    ),
    (
        "no material",
        toml(key_table(material="")),
        KeyringFileErrorReason.MISSING_MATERIAL,
        "'k1' (keys[0])",
        "material",
    ),
    (
        "two material sources",
        toml(key_table(extra='material_env = "K"\n')),
        KeyringFileErrorReason.CONFLICTING_MATERIAL_SOURCES,
        "'k1' (keys[0])",
        "material and material_env",
    ),
    (
        "material not a string",
        toml(key_table().replace(f'material = "{A_TEXT}"', "material = 12")),
        KeyringFileErrorReason.INVALID_FIELD,
        "'k1' (keys[0])",
        "material",
    ),
    (
        "unknown key field",
        toml(key_table(extra='materal = "x"\n')),
        KeyringFileErrorReason.UNKNOWN_FIELD,
        "'k1' (keys[0])",
        "materal",
    ),
    (
        "missing env var",
        toml(key_table(material="", extra='material_env = "SOKLET_TEST_UNSET_VARIABLE"\n')),
        KeyringFileErrorReason.MATERIAL_ENV_MISSING,
        "'k1' (keys[0])",
        "material_env",
    ),
    (
        "bad env name",
        toml(key_table(material="", extra='material_env = "A-B"\n')),
        KeyringFileErrorReason.INVALID_FIELD,
        "'k1' (keys[0])",
        "material_env",
    ),
    (
        "missing material file",
        toml(key_table(material="", extra='material_file = "no/such/file"\n')),
        KeyringFileErrorReason.MATERIAL_FILE_NOT_FOUND,
        "'k1' (keys[0])",
        "material_file",
    ),
    (
        "unknown format",
        toml(key_table(), header='format = "soklet-keyring/2"\nprofile = "soklet-mcp-protection-v1"\n'),
        KeyringFileErrorReason.UNKNOWN_FORMAT,
        None,
        "format",
    ),
    (
        "missing format",
        toml(key_table(), header='profile = "soklet-mcp-protection-v1"\n'),
        KeyringFileErrorReason.MISSING_FIELD,
        None,
        "format",
    ),
    (
        "unknown profile",
        toml(key_table(), header='format = "soklet-keyring/1"\nprofile = "other"\n'),
        KeyringFileErrorReason.UNKNOWN_PROFILE,
        None,
        "profile",
    ),
    (
        "missing profile",
        toml(key_table(), header='format = "soklet-keyring/1"\n'),
        KeyringFileErrorReason.MISSING_FIELD,
        None,
        "profile",
    ),
    (
        "unknown top-level field",
        toml(
            key_table(),
            header='format = "soklet-keyring/1"\nprofile = "soklet-mcp-protection-v1"\nowner = "me"\n',
        ),
        KeyringFileErrorReason.UNKNOWN_FIELD,
        None,
        "owner",
    ),
    (
        "keys not tables",
        'format = "soklet-keyring/1"\nprofile = "soklet-mcp-protection-v1"\nkeys = [1]\n',
        KeyringFileErrorReason.INVALID_FIELD,
        None,
        "keys",
    ),
]


@pytest.mark.parametrize(("case", "text", "reason", "key", "field"), CASES, ids=[case[0] for case in CASES])
def test_each_malformed_case_names_key_and_field(
    case: str, text: str, reason: KeyringFileErrorReason, key: str | None, field: str, tmp_path: Path
) -> None:
    error = refused(text, base_dir=tmp_path, environ={})
    assert error.reason is reason, case
    assert error.key == key
    assert error.field == field
    message = str(error)
    assert reason.value in message
    assert reason.description in message
    assert f"field {field!r}" in message
    if key is not None:
        assert f"key {key}" in message


def test_invalid_toml_gives_only_a_position() -> None:
    error = refused(toml(key_table()) + f'oops = "{A_TEXT}\n')
    assert error.reason is KeyringFileErrorReason.INVALID_TOML
    assert error.detail is not None
    assert error.detail.startswith("line ")


def test_not_utf8_and_too_large() -> None:
    assert refused(b"\xff\xfe").reason is KeyringFileErrorReason.INVALID_UTF8
    assert refused(b"#" * (MAX_KEYRING_FILE_BYTES + 1)).reason is KeyringFileErrorReason.TOO_LARGE
    # The limit itself passes the size check (and then fails only for its content).
    assert refused(b"#" * MAX_KEYRING_FILE_BYTES).reason is KeyringFileErrorReason.MISSING_FIELD


def test_insecure_material_file_is_refused_unless_allowed(tmp_path: Path) -> None:
    secret = tmp_path / "k"
    secret.write_text(A_TEXT)
    secret.chmod(0o644)
    text = toml(key_table(material="", extra='material_file = "k"\n'))
    error = refused(text, base_dir=tmp_path)
    assert error.reason is KeyringFileErrorReason.MATERIAL_FILE_INSECURE
    assert error.field == "material_file"
    assert "mode 0644" in str(error)
    document = parse_keyring_document(text, base_dir=tmp_path, allow_insecure_permissions=True)
    assert document.keyring().active_key.material == A


def test_material_from_env_uses_the_given_environment() -> None:
    text = toml(key_table(material="", extra='material_env = "SOKLET_K1"\n'))
    document = parse_keyring_document(text, environ={"SOKLET_K1": A_TEXT + "\n"})
    assert document.keyring().active_key.material == A
    os.environ.pop("SOKLET_K1", None)


def test_a_hand_edited_id_that_looks_like_material_is_refused_by_position_only() -> None:
    pasted = "hJ3kQ9vZx2Lw7Rt5mN8bY1cF4gP6sD0aE-uW_qK3oIl"
    error = refused(toml(key_table("k1"), key_table(pasted, role="verification", material=B_TEXT)))
    assert error.reason is KeyringFileErrorReason.MATERIAL_SHAPED_KEY_ID
    assert (error.key, error.field) == ("keys[1]", "id")
    assert pasted[:16] not in str(error)


def test_retired_is_optional_round_trips_and_belongs_to_verification_keys_only() -> None:
    old = parse_keyring_document(toml(key_table("k1"), key_table("k2", role="verification", material=B_TEXT)))
    assert [entry.retired for entry in old.entries] == [None, None]  # a file without it stays readable
    retired = key_table("k2", role="verification", material=B_TEXT, extra="retired = 2026-09-01T02:00:00+02:00\n")
    document = parse_keyring_document(toml(key_table("k1"), retired))
    assert document.entry("k2").retired == datetime(2026, 9, 1, tzinfo=UTC)  # type: ignore[union-attr]
    text = render_keyring_document(document)
    assert "retired = 2026-09-01T00:00:00Z" in text
    assert parse_keyring_document(text) == document
    error = refused(toml(key_table("k1", extra="retired = 2026-09-01T00:00:00Z\n")))
    assert (error.reason, error.field) == (KeyringFileErrorReason.INVALID_FIELD, "retired")
    error = refused(toml(key_table("k1"), key_table("k2", role="verification", material=B_TEXT, extra="retired = 3\n")))
    assert (error.reason, error.field) == (KeyringFileErrorReason.INVALID_CREATED, "retired")


def test_a_demotion_records_the_retired_time_and_an_activation_clears_it() -> None:
    k1, k2 = ProtectionKey("k1", A), ProtectionKey("k2", B)
    document = KeyringDocument.new(k1, created=WHEN)
    later = datetime(2026, 9, 1, tzinfo=UTC)
    rotated = document.with_keyring(document.keyring().with_rotated(k2), now=later)
    assert rotated.entry("k1").retired == later  # type: ignore[union-attr]
    assert rotated.entry("k2").retired is None  # type: ignore[union-attr]
    back = rotated.with_keyring(rotated.keyring().with_activated("k1"), now=later)
    assert back.entry("k1").retired is None  # type: ignore[union-attr]
    assert back.entry("k2").retired == later  # type: ignore[union-attr]
