"""``soklet kek generate`` and ``soklet keys encrypt`` through the real command in subprocesses, and the commands
that read an encrypted keyring file given its KEK. Every output is scanned for key material and for the KEK."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from soklet_core.files import WrappedMaterial, read_keyring_file
from soklet_core.keys import LocalKek, decode_base64url, encode_base64url
from tests.cli.test_inspect_state_cli import LATER, sealed, write_request
from tests.conftest import Soklet, secret_forms

RING = "soklet-keyring.toml"
PROGRAM = str(Path(__file__).resolve().parents[1] / "kms_program.py")


def _kek(soklet: Soklet, name: str = "kek") -> tuple[Path, LocalKek]:
    result = soklet.run("kek", "generate", "--output", name, "--json")
    assert result.returncode == 0, result.stderr
    path = soklet.cwd / name
    material = decode_base64url(path.read_text().strip())
    soklet.remember(material)
    kek = LocalKek(material)
    assert json.loads(result.stdout) == {"kek_file": name, "kek_id": kek.kek_id, "mode": "0600"}
    return path, kek


def _keyring(soklet: Soklet) -> Path:
    for arguments in (("keys", "generate", "--id", "k1"), ("keys", "stage", "--generate", "--id", "k2")):
        result = soklet.run(*arguments)
        assert result.returncode == 0, result.stderr
    return soklet.cwd / RING


def _fingerprint(soklet: Soklet, *kek_options: str) -> str:
    result = soklet.run("keys", "list", "--json", *kek_options)
    assert result.returncode == 0, result.stderr
    value: str = json.loads(result.stdout)["fingerprint"]["value"]
    return value


def _assert_no_material(path: Path, soklet: Soklet) -> None:
    text = path.read_text()
    for secret in soklet.secrets:
        for form in secret_forms(secret):
            assert form not in text


def _one_line_refusal(result: object, code: int) -> str:
    assert getattr(result, "returncode", None) == code, getattr(result, "stderr", "")
    stderr: str = getattr(result, "stderr", "")
    assert stderr.startswith("soklet: ")
    assert stderr.count("\n") == 1
    assert "Traceback" not in stderr
    return stderr


@pytest.mark.slow
def test_kek_generate_writes_a_new_0600_file_and_prints_only_its_id(soklet: Soklet) -> None:
    path, kek = _kek(soklet)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = soklet.run("kek", "generate", "--output", "other")
    assert text.returncode == 0, text.stderr
    assert "mode 0600" in text.stdout
    assert LocalKek(decode_base64url((soklet.cwd / "other").read_text().strip())).kek_id in text.stdout
    soklet.remember(decode_base64url((soklet.cwd / "other").read_text().strip()))
    before = path.read_bytes()
    again = soklet.run("kek", "generate", "--output", "kek")
    assert "already-exists" in _one_line_refusal(again, 3)
    assert path.read_bytes() == before
    assert kek.kek_id not in again.stderr


@pytest.mark.slow
def test_keys_encrypt_wraps_every_key_and_keeps_the_fingerprint(soklet: Soklet) -> None:
    ring = _keyring(soklet)
    fingerprint = _fingerprint(soklet)
    kek_path, kek = _kek(soklet)
    result = soklet.run("keys", "encrypt", "--kek-file", "kek", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["wrapped"] == ["k1", "k2"]
    assert document["clear"] == []
    assert document["changed"] is True
    assert document["kek_id"] == kek.kek_id
    assert document["fingerprint"]["value"] == fingerprint
    assert stat.S_IMODE(os.stat(ring).st_mode) == 0o600
    _assert_no_material(ring, soklet)
    entries = read_keyring_file(ring, kek=kek).entries
    assert all(isinstance(entry.source, WrappedMaterial) for entry in entries)
    again = soklet.run("keys", "encrypt", "--kek-file", str(kek_path))
    assert again.returncode == 0, again.stderr
    assert "already wrapped" in again.stdout
    assert fingerprint in again.stdout


@pytest.mark.slow
def test_an_encrypted_file_without_its_kek_or_under_another_is_refused_in_one_line(soklet: Soklet) -> None:
    ring = _keyring(soklet)
    _kek(soklet)
    _kek(soklet, "other")
    assert soklet.run("keys", "encrypt", "--kek-file", "kek").returncode == 0
    raw = ring.read_bytes()
    encrypt = _one_line_refusal(soklet.run("keys", "encrypt", "--kek-file", "other"), 1)
    assert "wrong-kek" in encrypt
    assert "'k1'" in encrypt
    listed = _one_line_refusal(soklet.run("keys", "list", "--kek-file", "other"), 1)
    assert "wrong-kek" in listed
    stage = soklet.run("keys", "stage", "--generate", "--id", "k3", "--kek-file", "other")
    assert "wrong-kek" in _one_line_refusal(stage, 1)
    assert ring.read_bytes() == raw


@pytest.mark.slow
def test_keys_encrypt_needs_exactly_one_kek_option(soklet: Soklet, monkeypatch: pytest.MonkeyPatch) -> None:
    _keyring(soklet)
    _kek(soklet)
    assert "--kek-file" in _one_line_refusal(soklet.run("keys", "encrypt"), 2)
    both = soklet.run("keys", "encrypt", "--kek-file", "kek", "--kek-env", "SOKLET_KEK")
    assert "not several" in _one_line_refusal(both, 2)


@pytest.mark.slow
@pytest.mark.parametrize("length", [31, 33])
def test_a_kek_of_the_wrong_length_is_refused_in_one_line(soklet: Soklet, length: int) -> None:
    ring = _keyring(soklet)
    raw = ring.read_bytes()
    material = bytes(range(length))
    soklet.remember(material)
    path = soklet.cwd / "short"
    path.write_text(encode_base64url(material) + "\n")
    path.chmod(0o600)
    message = _one_line_refusal(soklet.run("keys", "encrypt", "--kek-file", "short"), 1)
    assert "invalid-kek" in message
    assert f"{length} bytes" in message
    assert ring.read_bytes() == raw


@pytest.mark.slow
def test_an_insecure_kek_file_is_refused(soklet: Soklet) -> None:
    _keyring(soklet)
    path, _ = _kek(soklet)
    path.chmod(0o644)
    assert "insecure-permissions" in _one_line_refusal(soklet.run("keys", "encrypt", "--kek-file", "kek"), 1)


@pytest.mark.slow
def test_keys_encrypt_decrypt_writes_the_keys_in_clear_again(soklet: Soklet) -> None:
    ring = _keyring(soklet)
    fingerprint = _fingerprint(soklet)
    _kek(soklet)
    assert soklet.run("keys", "encrypt", "--kek-file", "kek").returncode == 0
    result = soklet.run("keys", "encrypt", "--decrypt", "--kek-file", "kek", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["clear"] == ["k1", "k2"]
    assert document["wrapped"] == []
    assert _fingerprint(soklet) == fingerprint
    assert "wrapped_material" not in ring.read_text()


@pytest.mark.slow
def test_a_kek_from_a_variable(soklet: Soklet) -> None:
    ring = _keyring(soklet)
    fingerprint = _fingerprint(soklet)
    material = bytes(range(32, 64))
    soklet.remember(material)
    env = {"SOKLET_TEST_KEK": encode_base64url(material)}
    result = soklet.run("keys", "encrypt", "--kek-env", "SOKLET_TEST_KEK", env=env)
    assert result.returncode == 0, result.stderr
    assert read_keyring_file(ring, kek=LocalKek(material)).keyring().fingerprint().value == fingerprint
    unset = soklet.run("keys", "encrypt", "--kek-env", "SOKLET_TEST_KEK")
    assert "$SOKLET_TEST_KEK is not set" in _one_line_refusal(unset, 1)


@pytest.mark.slow
def test_a_kek_command_encrypts_and_reads_and_a_failing_one_is_one_line(soklet: Soklet) -> None:
    ring = _keyring(soklet)
    fingerprint = _fingerprint(soklet)
    material = bytes(range(64, 96))
    soklet.remember(material)
    kms_kek = soklet.cwd / "kms-kek.txt"
    kms_kek.write_text(encode_base64url(material))
    kms_kek.chmod(0o600)
    env = {"SOKLET_TEST_KMS_KEK_FILE": str(kms_kek)}
    command = f"{sys.executable} {PROGRAM}"
    result = soklet.run("keys", "encrypt", "--kek-command", command, "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["kek_id"].startswith("test-kms/")
    _assert_no_material(ring, soklet)
    again = soklet.run("keys", "encrypt", "--json", "--kek-command", command, env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["changed"] is False
    assert json.loads(again.stdout)["fingerprint"]["value"] == fingerprint
    failing = soklet.run("keys", "encrypt", "--kek-command", command, env={**env, "SOKLET_TEST_KMS_MODE": "exit3"})
    message = _one_line_refusal(failing, 1)
    assert "kek-unavailable" in message
    assert "status 3" in message
    garbage = soklet.run("keys", "encrypt", "--kek-command", command, env={**env, "SOKLET_TEST_KMS_MODE": "garbage"})
    assert "this is not JSON" not in _one_line_refusal(garbage, 1)
    bad = soklet.run("keys", "encrypt", "--kek-command", "kms 'open")
    assert "unbalanced" in _one_line_refusal(bad, 2)


@pytest.mark.slow
def test_every_keys_command_reads_and_changes_an_encrypted_file_given_its_kek(soklet: Soklet) -> None:
    ring = _keyring(soklet)
    _, kek = _kek(soklet)
    assert soklet.run("keys", "encrypt", "--kek-file", "kek").returncode == 0
    fingerprint = _fingerprint(soklet, "--kek-file", "kek")
    assert "kek-required" in _one_line_refusal(soklet.run("keys", "list"), 1)
    assert "kek-required" in _one_line_refusal(soklet.run("fingerprint"), 1)
    printed = soklet.run("fingerprint", "--json", "--kek-file", "kek")
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["value"] == fingerprint
    exported = soklet.run("keys", "export", "k1", "--kek-file", "kek")
    assert exported.returncode == 0, exported.stderr
    material = read_keyring_file(ring, kek=kek).entry("k1")
    assert material is not None
    assert exported.stdout.strip() == encode_base64url(material.key.material)
    for arguments in (
        ("keys", "generate", "--id", "k3"),
        ("keys", "stage", "--generate", "--id", "k4"),
        ("keys", "activate", "k3"),
        ("keys", "rotate", "--id", "k5"),
        ("keys", "remove", "k4", "--force"),
    ):
        result = soklet.run(*arguments, "--kek-file", "kek")
        assert result.returncode == 0, (arguments, result.stderr)
        for entry in read_keyring_file(ring, kek=kek).entries:
            soklet.remember(entry.key)
            assert isinstance(entry.source, WrappedMaterial), (arguments, entry)
        _assert_no_material(ring, soklet)
    assert [entry.key.id for entry in read_keyring_file(ring, kek=kek).entries] == ["k1", "k2", "k3", "k5"]
    assert "kek-required" in _one_line_refusal(soklet.run("keys", "stage", "--generate", "--id", "k6"), 1)


@pytest.mark.slow
def test_a_new_keyring_made_with_a_kek_is_encrypted_from_its_first_key(soklet: Soklet) -> None:
    _, kek = _kek(soklet)
    result = soklet.run("keys", "generate", "--id", "k1", "--kek-file", "kek")
    assert result.returncode == 0, result.stderr
    ring = soklet.cwd / RING
    entries = read_keyring_file(ring, kek=kek).entries
    soklet.remember(entries[0].key)
    assert isinstance(entries[0].source, WrappedMaterial)
    _assert_no_material(ring, soklet)


@pytest.mark.slow
def test_inspect_state_opens_with_an_encrypted_keyring(soklet: Soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1)
    token = sealed(soklet)
    _kek(soklet)
    assert soklet.run("keys", "encrypt", "--kek-file", "kek").returncode == 0
    without = soklet.run("inspect-state", "--keyring", RING, "--at", LATER, token)
    assert "kek-required" in _one_line_refusal(without, 1)
    opened = soklet.run("inspect-state", "--keyring", RING, "--at", LATER, "--kek-file", "kek", token)
    assert opened.returncode == 0, opened.stderr


@pytest.mark.slow
def test_keys_encrypt_leaves_material_file_keys_as_references(soklet: Soklet) -> None:
    ring = _keyring(soklet)
    material = bytes(range(200, 232))
    soklet.remember(material)
    key_file = soklet.cwd / "k9.key"
    key_file.write_text(encode_base64url(material) + "\n")
    key_file.chmod(0o600)
    with ring.open("a") as handle:
        handle.write('\n[[keys]]\nid = "k9"\nrole = "verification"\nmaterial_file = "k9.key"\n')
        handle.write("created = 2026-08-01T00:00:00Z\n")
    _kek(soklet)
    result = soklet.run("keys", "encrypt", "--kek-file", "kek")
    assert result.returncode == 0, result.stderr
    assert "wrapped 2 keys of soklet-keyring.toml under kek-" in result.stdout
    assert "left as references (material_file or material_env): k9" in result.stdout
    assert 'material_file = "k9.key"' in ring.read_text()
    _assert_no_material(ring, soklet)
    as_json = json.loads(soklet.run("keys", "encrypt", "--kek-file", "kek", "--json").stdout)
    assert as_json["references"] == ["k9"]
    assert as_json["changed"] is False


@pytest.mark.slow
def test_seal_state_seals_with_an_encrypted_keyring(soklet: Soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    _kek(soklet)
    assert soklet.run("keys", "encrypt", "--kek-file", "kek").returncode == 0
    write_request(soklet.cwd, "call.json", 1)
    (soklet.cwd / "state.json").write_text('{"step": 1}')
    refused = soklet.run("seal-state", "--request", "call.json", "--state", "state.json")
    assert "kek-required" in _one_line_refusal(refused, 1)
    token = sealed(soklet, "--kek-file", "kek")
    opened = soklet.run("inspect-state", "--keyring", RING, "--at", LATER, "--kek-file", "kek", token)
    assert opened.returncode == 0, opened.stderr
