"""Keyring files under attack: special files, other owners, writable folders, planted lock links, malformed
values that used to escape as internal errors, and the size of a keyring full of the largest keys."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from soklet_core.files import (
    MAX_KEYRING_FILE_BYTES,
    MAX_MATERIAL_FILE_BYTES,
    KeyringDocument,
    KeyringFileError,
    KeyringFileErrorReason,
    atomic_write,
    lock_path_for,
    parse_keyring_document,
    read_keyring_file,
    read_regular_file,
    read_secret_file,
    render_keyring_document,
    update_keyring_file,
    write_keyring_file,
)
from soklet_core.keys import MAX_KEY_ID_BYTES, MAX_KEY_MATERIAL_BYTES, ProtectionKey, encode_base64url

Reason = KeyringFileErrorReason
#: The uid of "nobody": a user other than the one running the tests.
OTHER_UID = 65534
A_TEXT = encode_base64url(bytes(range(32)))
#: How long a read of a special file may take before the test calls it a hang (a hang is forever: generous, so a
#: busy machine is not taken for one).
PROMPT = 30.0

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def header() -> str:
    return 'format = "soklet-keyring/1"\nprofile = "soklet-mcp-protection-v1"\n'


def key_table(extra: str = "", created: str = "2026-08-01T00:00:00Z", material: str = f'"{A_TEXT}"') -> str:
    return f'\n[[keys]]\nid = "k1"\nrole = "active"\nmaterial = {material}\ncreated = {created}\n{extra}'


def refused(text: str, **kwargs: object) -> KeyringFileError:
    with pytest.raises(KeyringFileError) as caught:
        parse_keyring_document(text, path="ring.toml", **kwargs)  # type: ignore[arg-type]
    return caught.value


def in_time(call: object) -> BaseException | None:
    """Run ``call`` in a thread; fail if it has not finished within PROMPT seconds; return what it raised."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()  # type: ignore[operator]
        except BaseException as error:  # handed back to the test
            outcome.append(error)
        else:
            outcome.append(None)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(PROMPT)
    assert not worker.is_alive(), "the read blocked on a special file"
    return outcome[0]


# --- special files (item 7) ------------------------------------------------------------------------------------


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "ring.toml"
    os.mkfifo(fifo, 0o600)
    for read in (
        lambda: read_keyring_file(fifo),
        lambda: read_secret_file(fifo, limit=100),
        lambda: read_regular_file(fifo, limit=100),
    ):
        error = in_time(read)
        assert isinstance(error, KeyringFileError)
        assert error.reason is Reason.NOT_A_FILE
        assert error.detail == "it is a FIFO"


def test_a_fifo_material_file_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "k1.key", 0o600)
    text = header() + key_table().replace(f'material = "{A_TEXT}"', 'material_file = "k1.key"')
    error = in_time(lambda: parse_keyring_document(text, path="ring.toml", base_dir=tmp_path))
    assert isinstance(error, KeyringFileError)
    assert error.reason is Reason.MATERIAL_FILE_UNREADABLE
    assert error.field == "material_file"
    assert "FIFO" in str(error)


def test_devices_sockets_and_directories_are_refused(tmp_path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "sock"))
    try:
        cases = {"/dev/zero": "character device", str(tmp_path / "sock"): "socket", str(tmp_path): "directory"}
        for path, kind in cases.items():
            error = in_time(lambda path=path: read_regular_file(path, limit=10))
            assert isinstance(error, KeyringFileError), path
            assert error.reason is Reason.NOT_A_FILE
            assert kind in (error.detail or "")
    finally:
        listener.close()


def test_symlink_refused_only_when_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.write_bytes(b"abc")
    (tmp_path / "link").symlink_to(target)
    assert read_regular_file(tmp_path / "link", limit=3) == b"abc"
    with pytest.raises(KeyringFileError) as caught:
        read_regular_file(tmp_path / "link", limit=3, follow_symlinks=False)
    assert caught.value.detail == "it is a symbolic link"
    with pytest.raises(KeyringFileError) as caught:
        read_regular_file(target, limit=2)
    assert caught.value.reason is Reason.TOO_LARGE


# --- owners, folders and the lock (item 11) --------------------------------------------------------------------


def new_ring(path: Path) -> KeyringDocument:
    document = KeyringDocument.new(ProtectionKey.generate("k1"))
    write_keyring_file(path, document)
    return document


@needs_root
def test_a_keyring_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    document = new_ring(path)
    os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(KeyringFileError) as caught:
        read_keyring_file(path)
    assert caught.value.reason is Reason.UNTRUSTED_OWNER
    assert f"uid {OTHER_UID}" in str(caught.value)
    assert caught.value.reason.is_io
    with pytest.raises(KeyringFileError):
        update_keyring_file(path, lambda current: current)  # type: ignore[arg-type,return-value]
    assert read_keyring_file(path, allow_insecure_permissions=True) == document


@needs_root
def test_a_material_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "k1.key"
    secret.write_text(A_TEXT)
    secret.chmod(0o600)
    os.chown(secret, OTHER_UID, OTHER_UID)
    text = header() + key_table().replace(f'material = "{A_TEXT}"', 'material_file = "k1.key"')
    error = refused(text, base_dir=tmp_path)
    assert error.reason is Reason.MATERIAL_FILE_INSECURE
    assert f"uid {OTHER_UID}" in str(error)


@needs_root
def test_a_folder_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    new_ring(folder / "ring.toml")
    os.chown(folder, OTHER_UID, OTHER_UID)
    with pytest.raises(KeyringFileError) as caught:
        read_keyring_file(folder / "ring.toml")
    assert caught.value.reason is Reason.UNTRUSTED_FOLDER
    assert f"belongs to uid {OTHER_UID}" in str(caught.value)


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o722])
def test_a_folder_others_can_write_is_refused_for_read_and_write(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    path = folder / "ring.toml"
    document = new_ring(path)
    folder.chmod(mode)
    for action in (
        lambda: read_keyring_file(path),
        lambda: update_keyring_file(path, lambda current: current),  # type: ignore[arg-type,return-value]
        lambda: write_keyring_file(path, document),
        lambda: write_keyring_file(folder / "new.toml", document),
    ):
        with pytest.raises(KeyringFileError) as caught:
            action()
        assert caught.value.reason is Reason.UNTRUSTED_FOLDER
        assert f"mode {mode:04o}" in str(caught.value)
    assert not (folder / "new.toml").exists()
    assert read_keyring_file(path, allow_insecure_permissions=True) == document


def test_a_sticky_shared_folder_is_accepted(tmp_path: Path) -> None:
    folder = tmp_path / "sticky"
    folder.mkdir()
    folder.chmod(0o1777)
    document = new_ring(folder / "ring.toml")
    assert read_keyring_file(folder / "ring.toml") == document


def test_the_folder_of_a_symlinks_target_is_checked(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    new_ring(folder / "ring.toml")
    folder.chmod(0o777)
    safe = tmp_path / "safe"
    safe.mkdir(mode=0o700)
    (safe / "ring.toml").symlink_to(folder / "ring.toml")
    with pytest.raises(KeyringFileError) as caught:
        read_keyring_file(safe / "ring.toml")
    assert caught.value.reason is Reason.UNTRUSTED_FOLDER


def test_a_planted_lock_symlink_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "created-by-soklet"
    lock_path_for(path).symlink_to(target)
    with pytest.raises(KeyringFileError) as caught:
        write_keyring_file(path, KeyringDocument.new(ProtectionKey.generate("k1")))
    assert caught.value.reason is Reason.LOCK_FAILED
    assert "symbolic link" in str(caught.value)
    assert not target.exists()
    assert not path.exists()


def test_a_lock_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    os.mkfifo(lock_path_for(path), 0o600)
    error = in_time(lambda: write_keyring_file(path, KeyringDocument.new(ProtectionKey.generate("k1"))))
    assert isinstance(error, KeyringFileError)
    assert error.reason is Reason.LOCK_FAILED


@needs_root
def test_a_lock_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    new_ring(path)
    os.chown(lock_path_for(path), OTHER_UID, OTHER_UID)
    with pytest.raises(KeyringFileError) as caught:
        update_keyring_file(path, lambda current: current)  # type: ignore[arg-type,return-value]
    assert caught.value.reason is Reason.LOCK_FAILED
    assert f"uid {OTHER_UID}" in str(caught.value)


# --- malformed values (item 8) ---------------------------------------------------------------------------------


@pytest.mark.parametrize("created", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_created_out_of_range_after_utc_conversion(created: str) -> None:
    error = refused(header() + key_table(created=created))
    assert error.reason is Reason.INVALID_CREATED
    assert error.key == "'k1' (keys[0])"
    assert error.field == "created"
    assert created not in str(error)


def test_the_extreme_in_range_created_times_still_read() -> None:
    for created in ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00-01:00"):
        document = parse_keyring_document(header() + key_table(created=created))
        assert render_keyring_document(document)


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("[" * 5000 + "]" * 5000, "values nested too deeply"),
        ("{a=" * 3000 + "1" + "}" * 3000, "values nested too deeply"),
        ("9" * 5000, "a number too long to read"),
    ],
)
def test_values_tomllib_cannot_hold_are_invalid_toml(value: str, detail: str) -> None:
    error = refused(header() + key_table(extra=f"x = {value}\n"))
    assert error.reason is Reason.INVALID_TOML
    assert error.detail == detail
    assert len(str(error)) < 200


def test_material_longer_than_the_maximum_is_refused() -> None:
    longest = encode_base64url(bytes(MAX_KEY_MATERIAL_BYTES))
    assert parse_keyring_document(header() + key_table(material=f'"{longest}"')).entries[0].key.size == 1024
    error = refused(header() + key_table(material=f'"{encode_base64url(bytes(MAX_KEY_MATERIAL_BYTES + 1))}"'))
    assert error.reason is Reason.MATERIAL_TOO_LONG
    assert error.field == "material"


def test_names_shaped_like_material_are_not_printed(tmp_path: Path) -> None:
    pasted = "hJ3kQ9vZx2Lw7Rt5mN8bY1cF4gP6sD"  # 30 characters of a key, a valid bare TOML key
    error = refused(header() + key_table(extra=f"{pasted} = 1\n"))
    assert error.reason is Reason.UNKNOWN_FIELD
    assert pasted[:12] not in str(error)
    assert "looks like key material" in str(error)
    error = refused(header() + key_table().replace('"k1"', f'"{pasted}"') + "oops = 1\n")
    assert error.key == "keys[0]"
    assert pasted[:12] not in str(error)
    env_text = header() + key_table().replace(f'material = "{A_TEXT}"', f'material_env = "{pasted}"')
    error = refused(env_text, environ={})
    assert error.reason is Reason.MATERIAL_ENV_MISSING
    assert pasted[:12] not in str(error)


# --- sizes (item 6) --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_keyring_full_of_the_largest_keys_is_readable_and_never_outgrown(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"

    def largest(index: int) -> ProtectionKey:
        return ProtectionKey.generate(f"{index:0{MAX_KEY_ID_BYTES}d}", MAX_KEY_MATERIAL_BYTES)

    document = KeyringDocument.new(largest(0))
    one = len(render_keyring_document(document).encode())
    per_key = len(render_keyring_document(document.with_keyring(document.keyring().with_staged(largest(1)))).encode())
    per_key -= one
    keyring = document.keyring()
    count = 1 + (MAX_KEYRING_FILE_BYTES - one) // per_key
    for index in range(1, count):
        keyring = keyring.with_staged(largest(index))
    full = document.with_keyring(keyring)
    write_keyring_file(path, full)
    assert MAX_KEYRING_FILE_BYTES - per_key < path.stat().st_size <= MAX_KEYRING_FILE_BYTES
    assert read_keyring_file(path) == full
    # One more key would make a file soklet refuses to read: the write is refused and the file kept.
    bigger = full.with_keyring(keyring.with_staged(largest(count)))
    with pytest.raises(KeyringFileError) as caught:
        write_keyring_file(path, bigger)
    assert caught.value.reason is Reason.TOO_LARGE
    with pytest.raises(KeyringFileError) as caught:
        update_keyring_file(path, lambda current: bigger)
    assert caught.value.reason is Reason.TOO_LARGE
    assert read_keyring_file(path) == full
    # A material file and an environment variable holding the largest key are read too.
    secret = tmp_path / "big.key"
    secret.write_text(encode_base64url(bytes(MAX_KEY_MATERIAL_BYTES)) + "\n")
    secret.chmod(0o600)
    assert secret.stat().st_size < MAX_MATERIAL_FILE_BYTES
    as_file = header() + key_table().replace(f'material = "{A_TEXT}"', 'material_file = "big.key"')
    assert parse_keyring_document(as_file, base_dir=tmp_path).entries[0].key.size == MAX_KEY_MATERIAL_BYTES
    as_env = header() + key_table().replace(f'material = "{A_TEXT}"', 'material_env = "BIG"')
    environ = {"BIG": encode_base64url(bytes(MAX_KEY_MATERIAL_BYTES))}
    assert parse_keyring_document(as_env, environ=environ).entries[0].key.size == MAX_KEY_MATERIAL_BYTES


# --- no-clobber writes (item 10) -------------------------------------------------------------------------------


def test_atomic_write_without_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "out"
    atomic_write(path, b"one", overwrite=False)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(KeyringFileError) as caught:
        atomic_write(path, b"two", overwrite=False)
    assert caught.value.reason is Reason.ALREADY_EXISTS
    assert path.read_bytes() == b"one"
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(KeyringFileError):
        atomic_write(link, b"two", overwrite=False)
    assert not (tmp_path / "nowhere").exists()
    atomic_write(path, b"two")
    assert path.read_bytes() == b"two"
    assert sorted(os.listdir(tmp_path)) == ["link", "out"]
