"""CommandKek against a real external program (tests/kms_program.py run as a subprocess): the protocol's round
trip, and every way the program can misbehave refused as kek-unavailable without echoing what it printed."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from soklet_core.files.kek_source import KekSource, load_kek
from soklet_core.keys import KeyWrapError, KeyWrapErrorReason, ProtectionKey, WrappedKey, encode_base64url
from soklet_core.keys.kek_command import (
    DEFAULT_KEK_COMMAND_OUTPUT_BYTES,
    MAX_KEK_COMMAND_OUTPUT_BYTES,
    MAX_KEK_COMMAND_TIMEOUT_SECONDS,
    CommandKek,
)

PROGRAM = str(Path(__file__).resolve().parents[1] / "kms_program.py")
ARGV = (sys.executable, PROGRAM)
PROFILE = "soklet-mcp-protection-v1"
KMS_KEK = bytes(range(7, 39))
#: Long enough for a busy machine to start Python; the misbehaving program sleeps an hour.
SHORT_TIMEOUT = 3.0


@pytest.fixture
def kms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    kek_file = tmp_path / "kms-kek"
    kek_file.write_text(encode_base64url(KMS_KEK) + "\n")
    kek_file.chmod(0o600)
    log = tmp_path / "kms.log"
    monkeypatch.setenv("SOKLET_TEST_KMS_KEK_FILE", str(kek_file))
    monkeypatch.setenv("SOKLET_TEST_KMS_LOG", str(log))
    monkeypatch.delenv("SOKLET_TEST_KMS_MODE", raising=False)
    return log


def _ops(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def _refused(kek: CommandKek, reason: KeyWrapErrorReason = KeyWrapErrorReason.KEK_UNAVAILABLE) -> str:
    key = ProtectionKey.generate("k1")
    with pytest.raises(KeyWrapError) as caught:
        kek.wrap(key, PROFILE)
    assert caught.value.reason is reason
    message = str(caught.value)
    assert encode_base64url(key.material) not in message
    return message


def test_wrap_and_unwrap_round_trip_and_describe_is_asked_once(kms: Path) -> None:
    kek = CommandKek(ARGV)
    key = ProtectionKey.generate("2026-08")
    wrapped = kek.wrap(key, PROFILE)
    assert wrapped.kek_id == kek.kek_id
    assert wrapped.kek_id.startswith("test-kms/")
    assert key.material not in wrapped.ciphertext
    assert kek.unwrap(wrapped, PROFILE).same_material(key)
    assert kek.unwrap(kek.wrap(key, PROFILE), PROFILE).same_material(key)
    assert _ops(kms) == ["describe", "wrap", "unwrap", "wrap", "unwrap"]


def test_another_kek_id_is_wrong_kek_without_running_the_program(kms: Path) -> None:
    kek = CommandKek(ARGV)
    wrapped = kek.wrap(ProtectionKey.generate("k1"), PROFILE)
    before = _ops(kms)
    with pytest.raises(KeyWrapError) as caught:
        kek.unwrap(WrappedKey(key_id="k1", kek_id="another", ciphertext=wrapped.ciphertext), PROFILE)
    assert caught.value.reason is KeyWrapErrorReason.WRONG_KEK
    assert _ops(kms) == before


def test_a_tampered_or_moved_key_is_unwrap_failed(kms: Path) -> None:
    kek = CommandKek(ARGV)
    wrapped = kek.wrap(ProtectionKey.generate("k1"), PROFILE)
    flipped = bytes([wrapped.ciphertext[0] ^ 1]) + wrapped.ciphertext[1:]
    for bad in (
        WrappedKey(key_id="k1", kek_id=wrapped.kek_id, ciphertext=flipped),
        WrappedKey(key_id="k2", kek_id=wrapped.kek_id, ciphertext=wrapped.ciphertext),
    ):
        with pytest.raises(KeyWrapError) as caught:
            kek.unwrap(bad, PROFILE)
        assert caught.value.reason is KeyWrapErrorReason.UNWRAP_FAILED


@pytest.mark.parametrize(
    ("mode", "detail"),
    [
        ("garbage", "not one JSON document"),
        ("flood", "more than 65,536 bytes"),
        ("exit3", "status 3"),
        ("array", "not a JSON object"),
        ("no-member", "no valid kek_id"),
        ("wrong-type", "no valid kek_id"),
    ],
)
def test_a_misbehaving_program_is_kek_unavailable(
    kms: Path, monkeypatch: pytest.MonkeyPatch, mode: str, detail: str
) -> None:
    monkeypatch.setenv("SOKLET_TEST_KMS_MODE", mode)
    message = _refused(CommandKek(ARGV))
    assert detail in message
    assert "this is not JSON" not in message
    assert "xxxx" not in message


def test_an_answer_naming_another_kek_is_refused(kms: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kek = CommandKek(ARGV)
    assert kek.kek_id.startswith("test-kms/")
    monkeypatch.setenv("SOKLET_TEST_KMS_MODE", "other-kek")
    assert "another KEK id" in _refused(kek)


def test_missing_or_mistyped_members_of_a_wrap_answer_are_refused(kms: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kek = CommandKek(ARGV)
    _ = kek.kek_id
    monkeypatch.setenv("SOKLET_TEST_KMS_MODE", "no-member")
    _refused(kek)
    monkeypatch.setenv("SOKLET_TEST_KMS_MODE", "wrong-type")
    _refused(kek)


def test_output_at_the_cap_is_read_and_one_byte_more_is_refused(kms: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOKLET_TEST_KMS_MODE", "pad")
    monkeypatch.setenv("SOKLET_TEST_KMS_PAD", str(DEFAULT_KEK_COMMAND_OUTPUT_BYTES))
    key = ProtectionKey.generate("k1")
    kek = CommandKek(ARGV)
    assert kek.unwrap(kek.wrap(key, PROFILE), PROFILE).same_material(key)
    monkeypatch.setenv("SOKLET_TEST_KMS_PAD", str(DEFAULT_KEK_COMMAND_OUTPUT_BYTES + 1))
    assert "more than 65,536 bytes" in _refused(kek)


@pytest.mark.slow
def test_a_program_that_does_not_answer_in_time_is_killed(kms: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOKLET_TEST_KMS_MODE", "sleep")
    assert "did not answer within 3 s" in _refused(CommandKek(ARGV, timeout_seconds=SHORT_TIMEOUT))


@pytest.mark.slow
def test_a_timeout_kills_what_the_program_left_behind(
    kms: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("SOKLET_TEST_KMS_MODE", "orphan")
    monkeypatch.setenv("SOKLET_TEST_KMS_PIDFILE", str(pid_file))
    with pytest.raises(KeyWrapError) as caught:
        _ = CommandKek(ARGV, timeout_seconds=SHORT_TIMEOUT).kek_id
    assert caught.value.reason is KeyWrapErrorReason.KEK_UNAVAILABLE
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        # The child is killed but may wait for its parent to reap it: a zombie holds its pid.
        status = Path(f"/proc/{child}/stat")
        if status.exists() and status.read_text().split(")")[-1].split()[0] == "Z":
            return
        time.sleep(0.1)
    pytest.fail("the program's child outlived the timeout")


def test_stderr_is_never_shown(kms: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SOKLET_TEST_KMS_MODE", "stderr")
    key = ProtectionKey.generate("k1")
    kek = CommandKek(ARGV)
    kek.wrap(key, PROFILE)
    captured = capfd.readouterr()
    assert encode_base64url(key.material) not in captured.out + captured.err


def test_a_program_that_cannot_start_is_unavailable(tmp_path: Path) -> None:
    kek = CommandKek([str(tmp_path / "missing")])
    assert "could not be started" in _refused(kek)


def test_the_bounds_are_checked_at_their_edges() -> None:
    CommandKek(ARGV, timeout_seconds=MAX_KEK_COMMAND_TIMEOUT_SECONDS, max_output_bytes=MAX_KEK_COMMAND_OUTPUT_BYTES)
    CommandKek(ARGV, max_output_bytes=1)
    with pytest.raises(ValueError, match="timeout"):
        CommandKek(ARGV, timeout_seconds=MAX_KEK_COMMAND_TIMEOUT_SECONDS + 0.5)
    with pytest.raises(ValueError, match="timeout"):
        CommandKek(ARGV, timeout_seconds=0)
    with pytest.raises(ValueError, match="max_output"):
        CommandKek(ARGV, max_output_bytes=MAX_KEK_COMMAND_OUTPUT_BYTES + 1)
    with pytest.raises(ValueError, match="max_output"):
        CommandKek(ARGV, max_output_bytes=0)
    with pytest.raises(ValueError, match="non-empty"):
        CommandKek([])


def test_repr_names_the_program_only() -> None:
    assert repr(CommandKek([*ARGV, "--token", "s3cret"])) == f"CommandKek(program={os.path.basename(ARGV[0])!r})"


def test_load_kek_asks_a_command_for_its_id_at_once(kms: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kek = load_kek(KekSource(command=ARGV))
    assert kek.kek_id.startswith("test-kms/")
    assert _ops(kms) == ["describe"]
    monkeypatch.setenv("SOKLET_TEST_KMS_MODE", "exit3")
    with pytest.raises(KeyWrapError) as caught:
        load_kek(KekSource(command=ARGV))
    assert caught.value.reason is KeyWrapErrorReason.KEK_UNAVAILABLE
