"""KEK sources: a 0600 file or an environment variable holding 32 bytes of base64url text, or a command; new KEK
files written 0600 and never over an existing file; no message ever holding KEK bytes or a variable's value."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from soklet_core.files import KeyringFileError, KeyringFileErrorReason
from soklet_core.files.kek_source import (
    MAX_KEK_COMMAND_CHARS,
    MAX_KEK_COMMAND_WORDS,
    MAX_KEK_FILE_BYTES,
    MAX_KEK_TEXT_CHARS,
    KekSource,
    load_kek,
    write_kek_file,
)
from soklet_core.keys import KeyWrapError, KeyWrapErrorReason, LocalKek, ProtectionKey, encode_base64url

KEK = bytes(range(100, 132))
KEK_TEXT = encode_base64url(KEK)


def _secret(path: Path, data: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


def _assert_no_secret(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text


def test_a_kek_file_of_32_bytes_loads_as_that_kek(tmp_path: Path) -> None:
    path = _secret(tmp_path / "kek", (KEK_TEXT + "\n").encode())
    kek = load_kek(KekSource(file=str(path)))
    assert kek.kek_id == LocalKek(KEK).kek_id
    key = ProtectionKey.generate("k1")
    assert LocalKek(KEK).unwrap(kek.wrap(key, "p"), "p").same_material(key)
    assert KEK_TEXT not in repr(kek)


@pytest.mark.parametrize("length", [31, 33, 0])
def test_a_kek_of_another_length_is_refused_naming_the_length_only(tmp_path: Path, length: int) -> None:
    text = encode_base64url(bytes(range(length)))
    path = _secret(tmp_path / "kek", text.encode())
    with pytest.raises(KeyWrapError) as caught:
        load_kek(KekSource(file=str(path)))
    assert caught.value.reason is KeyWrapErrorReason.INVALID_KEK
    assert f"{length} bytes" in str(caught.value)
    if text:
        _assert_no_secret(str(caught.value), text)


def test_kek_text_that_is_not_base64url_is_refused_without_repeating_it(tmp_path: Path) -> None:
    text = KEK_TEXT[:-1] + "="
    path = _secret(tmp_path / "kek", text.encode())
    with pytest.raises(KeyWrapError) as caught:
        load_kek(KekSource(file=str(path)))
    assert caught.value.reason is KeyWrapErrorReason.INVALID_KEK
    _assert_no_secret(str(caught.value), text, KEK_TEXT[:20])


def test_a_kek_file_others_may_read_is_refused_unless_allowed(tmp_path: Path) -> None:
    path = _secret(tmp_path / "kek", KEK_TEXT.encode(), mode=0o644)
    with pytest.raises(KeyringFileError) as caught:
        load_kek(KekSource(file=str(path)))
    assert caught.value.reason is KeyringFileErrorReason.INSECURE_PERMISSIONS
    assert load_kek(KekSource(file=str(path)), allow_insecure_permissions=True).kek_id == LocalKek(KEK).kek_id


def test_a_missing_kek_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(KeyringFileError) as caught:
        load_kek(KekSource(file=str(tmp_path / "nothing")))
    assert caught.value.reason is KeyringFileErrorReason.NOT_FOUND


def test_a_kek_file_at_its_size_limit_loads_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    padded = (KEK_TEXT + "\n").encode().ljust(MAX_KEK_FILE_BYTES, b" ")
    assert len(padded) == MAX_KEK_FILE_BYTES
    path = _secret(tmp_path / "kek", padded)
    assert load_kek(KekSource(file=str(path))).kek_id == LocalKek(KEK).kek_id
    _secret(path, padded + b" ")
    with pytest.raises(KeyringFileError) as caught:
        load_kek(KekSource(file=str(path)))
    assert caught.value.reason is KeyringFileErrorReason.TOO_LARGE


def test_a_kek_variable_loads_and_an_unset_one_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOKLET_TEST_KEK", f" {KEK_TEXT}\n")
    assert load_kek(KekSource(env="SOKLET_TEST_KEK")).kek_id == LocalKek(KEK).kek_id
    monkeypatch.delenv("SOKLET_TEST_KEK")
    with pytest.raises(KeyWrapError) as caught:
        load_kek(KekSource(env="SOKLET_TEST_KEK"))
    assert caught.value.reason is KeyWrapErrorReason.KEK_UNAVAILABLE
    assert "$SOKLET_TEST_KEK" in str(caught.value)


def test_a_kek_variable_at_its_length_limit_loads_and_one_more_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOKLET_TEST_KEK", KEK_TEXT.ljust(MAX_KEK_TEXT_CHARS))
    assert load_kek(KekSource(env="SOKLET_TEST_KEK")).kek_id == LocalKek(KEK).kek_id
    monkeypatch.setenv("SOKLET_TEST_KEK", KEK_TEXT.ljust(MAX_KEK_TEXT_CHARS + 1))
    with pytest.raises(KeyWrapError) as caught:
        load_kek(KekSource(env="SOKLET_TEST_KEK"))
    assert caught.value.reason is KeyWrapErrorReason.INVALID_KEK
    _assert_no_secret(str(caught.value), KEK_TEXT)


def test_a_kek_variable_of_31_bytes_is_refused_without_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    text = encode_base64url(KEK[:31])
    monkeypatch.setenv("SOKLET_TEST_KEK", text)
    with pytest.raises(KeyWrapError) as caught:
        load_kek(KekSource(env="SOKLET_TEST_KEK"))
    assert caught.value.reason is KeyWrapErrorReason.INVALID_KEK
    _assert_no_secret(str(caught.value), text)


def test_a_source_is_exactly_one_thing() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        KekSource()
    with pytest.raises(ValueError, match="exactly one"):
        KekSource(file="a", env="B")
    with pytest.raises(ValueError, match="environment"):
        KekSource(env="1BAD")
    with pytest.raises(ValueError, match="file"):
        KekSource(file="")


def test_a_command_line_is_split_without_a_shell_and_bounded() -> None:
    source = KekSource.from_command_line("kms --key 'my key' a\\ b")
    assert source.command == ("kms", "--key", "my key", "a b")
    for bad in ("", "   ", "kms 'open"):
        with pytest.raises(ValueError, match=r"empty|unbalanced"):
            KekSource.from_command_line(bad)
    at_limit = "k" * MAX_KEK_COMMAND_CHARS
    assert KekSource.from_command_line(at_limit).command == (at_limit,)
    with pytest.raises(ValueError, match="at most"):
        KekSource.from_command_line(at_limit + "k")
    words = " ".join(["w"] * MAX_KEK_COMMAND_WORDS)
    assert KekSource.from_command_line(words).command is not None
    with pytest.raises(ValueError, match="words"):
        KekSource.from_command_line(words + " w")


def test_a_command_that_cannot_start_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(KeyWrapError) as caught:
        load_kek(KekSource(command=(str(tmp_path / "no-such-program"),)))
    assert caught.value.reason is KeyWrapErrorReason.KEK_UNAVAILABLE


def test_write_kek_file_makes_a_new_0600_file_that_loads(tmp_path: Path) -> None:
    path = tmp_path / "kek"
    kek = write_kek_file(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = path.read_text()
    assert text.endswith("\n")
    assert len(text.strip()) == 43
    assert load_kek(KekSource(file=str(path))).kek_id == kek.kek_id
    assert text.strip() not in repr(kek)


def test_write_kek_file_never_overwrites(tmp_path: Path) -> None:
    path = _secret(tmp_path / "kek", b"keep me")
    with pytest.raises(KeyringFileError) as caught:
        write_kek_file(path)
    assert caught.value.reason is KeyringFileErrorReason.ALREADY_EXISTS
    assert path.read_bytes() == b"keep me"
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(KeyringFileError):
        write_kek_file(link)
    assert not (tmp_path / "elsewhere").exists()
