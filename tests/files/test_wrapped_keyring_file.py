"""Keyring files holding wrapped material (``wrapped_material`` + ``kek``): read only with the right KEK, changed
without ever gaining a key in clear, the fingerprint unchanged by wrapping, no key material in the file or in any
message."""

from __future__ import annotations

import os
import stat
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from soklet_core.files import (
    InlineMaterial,
    KeyEntry,
    KeyringDocument,
    KeyringFileError,
    KeyringFileErrorReason,
    KeyRole,
    MaterialFile,
    WrappedMaterial,
    read_keyring_file,
    render_keyring_document,
    update_keyring_file,
    write_keyring_file,
)
from soklet_core.keys import LocalKek, ProtectionKey, encode_base64url
from soklet_core.keys.kek_command import CommandKek

Reason = KeyringFileErrorReason
KEK = LocalKek(bytes(range(32)))
OTHER_KEK = LocalKek(bytes(range(1, 33)))
CREATED = datetime(2026, 8, 1, tzinfo=UTC)
PROGRAM = str(Path(__file__).resolve().parents[1] / "kms_program.py")


def _keys() -> tuple[ProtectionKey, ProtectionKey]:
    return ProtectionKey.generate("2026-09"), ProtectionKey.generate("2026-08")


def _document(active: ProtectionKey, old: ProtectionKey) -> KeyringDocument:
    return KeyringDocument(
        (
            KeyEntry(active, KeyRole.ACTIVE, CREATED),
            KeyEntry(old, KeyRole.VERIFICATION, CREATED, retired=CREATED),
        )
    )


def _assert_hidden(text: str, *keys: ProtectionKey) -> None:
    for key in keys:
        assert encode_base64url(key.material) not in text
        assert key.material.hex() not in text


def _wrapped_file(tmp_path: Path, kek: LocalKek | CommandKek = KEK) -> tuple[Path, ProtectionKey, ProtectionKey]:
    active, old = _keys()
    path = tmp_path / "keyring.toml"
    write_keyring_file(path, _document(active, old).wrapped(kek))
    return path, active, old


def test_a_wrapped_file_holds_no_key_and_reads_back_the_same_keyring(tmp_path: Path) -> None:
    active, old = _keys()
    clear = _document(active, old)
    path = tmp_path / "keyring.toml"
    write_keyring_file(path, clear.wrapped(KEK))
    text = path.read_text()
    assert text.count("wrapped_material = ") == 2
    assert text.count(f'kek = "{KEK.kek_id}"') == 2
    assert "\nmaterial = " not in text
    _assert_hidden(text, active, old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    read = read_keyring_file(path, kek=KEK)
    assert read.keyring().fingerprint() == clear.keyring().fingerprint()
    assert all(isinstance(entry.source, WrappedMaterial) for entry in read.entries)
    assert read.entries[1].retired == CREATED
    # Written back unchanged, the ciphertext stays as it was.
    assert render_keyring_document(read) == text


def test_without_a_kek_a_wrapped_file_is_refused_naming_the_key(tmp_path: Path) -> None:
    path, active, old = _wrapped_file(tmp_path)
    with pytest.raises(KeyringFileError) as caught:
        read_keyring_file(path)
    assert caught.value.reason is Reason.KEK_REQUIRED
    assert "'2026-09'" in str(caught.value)
    _assert_hidden(str(caught.value), active, old)


def test_another_kek_is_wrong_kek_naming_the_key_only(tmp_path: Path) -> None:
    path, active, old = _wrapped_file(tmp_path)
    with pytest.raises(KeyringFileError) as caught:
        read_keyring_file(path, kek=OTHER_KEK)
    assert caught.value.reason is Reason.WRONG_KEK
    assert "'2026-09'" in str(caught.value)
    _assert_hidden(str(caught.value), active, old)
    assert encode_base64url(bytes(range(1, 33))) not in str(caught.value)


def test_a_tampered_or_renamed_wrapped_key_does_not_unwrap(tmp_path: Path) -> None:
    path, _, _ = _wrapped_file(tmp_path)
    text = path.read_text()
    renamed = text.replace('id = "2026-08"', 'id = "2026-07"')
    path.write_text(renamed)
    with pytest.raises(KeyringFileError) as caught:
        read_keyring_file(path, kek=KEK)
    assert caught.value.reason is Reason.UNWRAP_FAILED
    assert "'2026-07'" in str(caught.value)
    start = text.index('wrapped_material = "') + len('wrapped_material = "')
    flipped = "A" if text[start + 10] != "A" else "B"
    path.write_text(text[: start + 10] + flipped + text[start + 11 :])
    with pytest.raises(KeyringFileError) as caught:
        read_keyring_file(path, kek=KEK)
    assert caught.value.reason is Reason.UNWRAP_FAILED


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda t: t.replace("wrapped_material = ", "material = ", 1), Reason.UNKNOWN_FIELD),
        (lambda t: t.replace(f'kek = "{KEK.kek_id}"\n', "", 1), Reason.MISSING_FIELD),
        (
            lambda t: t.replace('role = "active"', 'role = "active"\nmaterial = "x"', 1),
            Reason.CONFLICTING_MATERIAL_SOURCES,
        ),
        (lambda t: t.replace('wrapped_material = "', 'wrapped_material = "=', 1), Reason.INVALID_BASE64),
        (lambda t: t.replace(f'kek = "{KEK.kek_id}"', "kek = 7", 1), Reason.INVALID_FIELD),
        (lambda t: t.replace(f'kek = "{KEK.kek_id}"', f'kek = "{"k" * 65}"', 1), Reason.INVALID_FIELD),
    ],
)
def test_malformed_wrapped_fields_are_refused(tmp_path: Path, edit: object, reason: Reason) -> None:
    path, active, old = _wrapped_file(tmp_path)
    assert callable(edit)
    path.write_text(edit(path.read_text()))
    with pytest.raises(KeyringFileError) as caught:
        read_keyring_file(path, kek=KEK)
    assert caught.value.reason is reason
    _assert_hidden(str(caught.value), active, old)


def test_wrapped_ciphertext_at_its_limit_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    path, _, _ = _wrapped_file(tmp_path)
    text = path.read_text()
    start = text.index('wrapped_material = "') + len('wrapped_material = "')
    end = text.index('"', start)
    for size, reason in ((4096, Reason.UNWRAP_FAILED), (4097, Reason.INVALID_FIELD)):
        path.write_text(text[:start] + encode_base64url(b"\x01" * size) + text[end:])
        with pytest.raises(KeyringFileError) as caught:
            read_keyring_file(path, kek=KEK)
        assert caught.value.reason is reason


def test_a_change_to_a_wrapped_file_wraps_the_new_key_and_keeps_the_others(tmp_path: Path) -> None:
    path, active, old = _wrapped_file(tmp_path)
    before = {entry.key.id: entry.source for entry in read_keyring_file(path, kek=KEK).entries}
    new = ProtectionKey.generate("2026-10")

    def stage(document: KeyringDocument | None) -> KeyringDocument:
        assert document is not None
        return document.with_keyring(document.keyring().with_staged(new))

    update = update_keyring_file(path, stage, kek=KEK)
    assert update.written
    assert all(isinstance(entry.source, WrappedMaterial) for entry in update.after.entries)
    text = path.read_text()
    _assert_hidden(text, active, old, new)
    after = read_keyring_file(path, kek=KEK)
    assert after.entry("2026-10") is not None
    assert {entry.key.id: entry.source for entry in after.entries if entry.key.id != "2026-10"} == before
    assert after.keyring().fingerprint() == update.after.keyring().fingerprint()


def test_a_clear_file_changed_with_a_kek_stays_clear_and_a_new_file_is_wrapped(tmp_path: Path) -> None:
    active, old = _keys()
    path = tmp_path / "clear.toml"
    write_keyring_file(path, _document(active, old))
    new = ProtectionKey.generate("2026-10")

    def stage(document: KeyringDocument | None) -> KeyringDocument:
        assert document is not None
        return document.with_keyring(document.keyring().with_staged(new))

    assert update_keyring_file(path, stage, kek=KEK).written
    assert all(isinstance(entry.source, InlineMaterial) for entry in read_keyring_file(path).entries)
    fresh = tmp_path / "new.toml"
    update_keyring_file(fresh, lambda _: KeyringDocument.new(new), kek=KEK)
    _assert_hidden(fresh.read_text(), new)
    assert read_keyring_file(fresh, kek=KEK).keyring().fingerprint() == KeyringDocument.new(new).keyring().fingerprint()


def test_a_change_without_a_kek_cannot_read_a_wrapped_file(tmp_path: Path) -> None:
    path, _, _ = _wrapped_file(tmp_path)
    raw = path.read_bytes()
    with pytest.raises(KeyringFileError) as caught:
        update_keyring_file(path, lambda document: KeyringDocument.new(ProtectionKey.generate("x")))
    assert caught.value.reason is Reason.KEK_REQUIRED
    assert path.read_bytes() == raw


def test_material_file_keys_stay_references_and_unwrapped_restores_inline(tmp_path: Path) -> None:
    active, old = _keys()
    material = tmp_path / "old.key"
    material.write_text(encode_base64url(old.material))
    material.chmod(0o600)
    document = KeyringDocument(
        (
            KeyEntry(active, KeyRole.ACTIVE, CREATED),
            KeyEntry(old, KeyRole.VERIFICATION, CREATED, MaterialFile("old.key")),
        )
    )
    wrapped = document.wrapped(KEK)
    assert isinstance(wrapped.entries[0].source, WrappedMaterial)
    assert wrapped.entries[1].source == MaterialFile("old.key")
    assert wrapped.wrapped(KEK) is wrapped
    path = tmp_path / "keyring.toml"
    write_keyring_file(path, wrapped)
    read = read_keyring_file(path, kek=KEK)
    clear = read.unwrapped()
    assert clear.entries[0].source == InlineMaterial()
    assert clear.entries[1].source == MaterialFile("old.key")
    assert clear.keyring().fingerprint() == document.keyring().fingerprint()
    assert clear.unwrapped() is clear


def test_rewrapping_under_another_kek_keeps_the_keys(tmp_path: Path) -> None:
    path, active, _ = _wrapped_file(tmp_path)
    read = read_keyring_file(path, kek=KEK)
    moved = read.wrapped(OTHER_KEK)
    assert all(
        isinstance(entry.source, WrappedMaterial) and entry.source.kek_id == OTHER_KEK.kek_id for entry in moved.entries
    )
    assert moved.keyring().fingerprint() == read.keyring().fingerprint()
    assert "ciphertext=<" in repr(moved.entries[0].source)
    assert encode_base64url(active.material) not in repr(moved.entries[0].source)


def test_a_file_wrapped_by_a_kek_command_reads_through_it_and_a_failing_one_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kms_kek = tmp_path / "kms-kek"
    kms_kek.write_text(encode_base64url(bytes(range(50, 82))))
    kms_kek.chmod(0o600)
    monkeypatch.setenv("SOKLET_TEST_KMS_KEK_FILE", str(kms_kek))
    monkeypatch.delenv("SOKLET_TEST_KMS_MODE", raising=False)
    command = CommandKek([sys.executable, PROGRAM])
    path, active, old = _wrapped_file(tmp_path, command)
    assert (
        read_keyring_file(path, kek=command).keyring().fingerprint() == _document(active, old).keyring().fingerprint()
    )
    monkeypatch.setenv("SOKLET_TEST_KMS_MODE", "exit3")
    with pytest.raises(KeyringFileError) as caught:
        read_keyring_file(path, kek=command)
    assert caught.value.reason is Reason.KEK_UNAVAILABLE
    assert "status 3" in str(caught.value)
