"""Keyring files on disk: permissions, atomic replacement (also under SIGKILL), locking, update semantics."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from soklet_core.files import (
    TEMP_PREFIX,
    KeyringDocument,
    KeyringFileError,
    KeyringFileErrorReason,
    atomic_write,
    file_lock,
    lock_path_for,
    read_keyring_file,
    update_keyring_file,
    write_keyring_file,
)
from soklet_core.keys import ProtectionKey, encode_base64url


def new_file(path: Path, key_id: str = "k1") -> KeyringDocument:
    document = KeyringDocument.new(ProtectionKey.generate(key_id))
    write_keyring_file(path, document)
    return document


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_written_file_is_0600_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    document = new_file(path)
    assert mode_of(path) == 0o600
    assert read_keyring_file(path) == document
    assert mode_of(lock_path_for(path)) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["ring.toml", "ring.toml.lock"]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602, 0o610])
def test_group_or_other_access_is_refused_unless_allowed(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "ring.toml"
    document = new_file(path)
    path.chmod(mode)
    with pytest.raises(KeyringFileError) as caught:
        read_keyring_file(path)
    assert caught.value.reason is KeyringFileErrorReason.INSECURE_PERMISSIONS
    assert f"mode {mode:04o}" in str(caught.value)
    assert read_keyring_file(path, allow_insecure_permissions=True) == document
    with pytest.raises(KeyringFileError):
        update_keyring_file(path, lambda current: current or document)


def test_owner_only_modes_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    document = new_file(path)
    path.chmod(0o400)
    assert read_keyring_file(path) == document


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(KeyringFileError) as missing:
        read_keyring_file(tmp_path / "nope.toml")
    assert missing.value.reason is KeyringFileErrorReason.NOT_FOUND
    assert missing.value.reason.is_io
    with pytest.raises(KeyringFileError) as folder:
        read_keyring_file(tmp_path)
    assert folder.value.reason is KeyringFileErrorReason.NOT_A_FILE


def test_update_creates_changes_and_skips_noops(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    first = ProtectionKey.generate("k1")
    created = update_keyring_file(path, lambda current: KeyringDocument.new(first))
    assert created.before is None
    assert created.written
    assert mode_of(path) == 0o600
    inode = path.stat().st_ino
    same = update_keyring_file(path, lambda current: current)  # type: ignore[arg-type,return-value]
    assert not same.written
    assert path.stat().st_ino == inode
    second = ProtectionKey.generate("k2")

    def stage(current: KeyringDocument | None) -> KeyringDocument:
        assert current is not None
        return current.with_keyring(current.keyring().with_staged(second))

    staged = update_keyring_file(path, stage)
    assert staged.written
    assert path.stat().st_ino != inode
    assert read_keyring_file(path).keyring().key_ids == ("k1", "k2")
    again = update_keyring_file(path, stage)
    assert not again.written


def test_failed_change_leaves_the_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    new_file(path)
    before = path.read_bytes()

    def boom(current: KeyringDocument | None) -> KeyringDocument:
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError):
        update_keyring_file(path, boom)
    assert path.read_bytes() == before
    assert not [name for name in os.listdir(tmp_path) if name.startswith(TEMP_PREFIX)]


def test_rewrite_keeps_material_references(tmp_path: Path) -> None:
    material = ProtectionKey.generate("k1").material
    (tmp_path / "k1.secret").write_text(encode_base64url(material))
    (tmp_path / "k1.secret").chmod(0o600)
    path = tmp_path / "ring.toml"
    path.write_text(
        'format = "soklet-keyring/1"\nprofile = "soklet-mcp-protection-v1"\n\n[[keys]]\nid = "k1"\n'
        'role = "active"\nmaterial_file = "k1.secret"\ncreated = 2026-08-01T00:00:00Z\n'
    )
    path.chmod(0o600)
    extra = ProtectionKey.generate("k2")
    update_keyring_file(path, lambda current: current.with_keyring(current.keyring().with_staged(extra)))  # type: ignore[union-attr]
    text = path.read_text()
    assert 'material_file = "k1.secret"' in text
    assert encode_base64url(material) not in text
    assert read_keyring_file(path).keyring().key("k1").material == material  # type: ignore[union-attr]


def test_write_through_a_symlink_replaces_the_target(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    new_file(real)
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    extra = ProtectionKey.generate("k2")
    update_keyring_file(link, lambda current: current.with_keyring(current.keyring().with_staged(extra)))  # type: ignore[union-attr]
    assert link.is_symlink()
    assert read_keyring_file(real).keyring().key_ids == ("k1", "k2")


def test_atomic_write_failure_removes_its_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "occupied"
    target.mkdir()
    (target / "child").write_text("x")
    with pytest.raises(KeyringFileError) as caught:
        atomic_write(target, b"data")
    assert caught.value.reason is KeyringFileErrorReason.WRITE_FAILED
    assert [name for name in os.listdir(tmp_path)] == ["occupied"]
    with pytest.raises(KeyringFileError) as missing_folder:
        atomic_write(tmp_path / "no" / "such" / "file", b"data")
    assert missing_folder.value.reason is KeyringFileErrorReason.WRITE_FAILED


def test_threads_updating_one_file_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    new_file(path)
    keys = [ProtectionKey.generate(f"t{index}") for index in range(8)]
    start = threading.Barrier(len(keys))

    def add(key: ProtectionKey) -> None:
        start.wait()
        update_keyring_file(path, lambda current: current.with_keyring(current.keyring().with_staged(key)))  # type: ignore[union-attr]

    threads = [threading.Thread(target=add, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(read_keyring_file(path).keyring().key_ids) == {"k1", *(key.id for key in keys)}


def test_lock_excludes_another_holder(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    order: list[str] = []
    inside = threading.Event()

    def second() -> None:
        inside.wait(10)
        with file_lock(path):
            order.append("second")

    thread = threading.Thread(target=second)
    with file_lock(path):
        thread.start()
        inside.set()
        thread.join(0.3)
        assert thread.is_alive()
        order.append("first")
    thread.join(10)
    assert order == ["first", "second"]


# Runs in a child process: replace() is patched there only, to stop after the temp file is complete and fsynced.
_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from soklet_core.files import KeyringDocument, write_keyring_file
    from soklet_core.keys import ProtectionKey

    real_replace = os.replace

    def paused_replace(source, target):
        sys.stdout.write(source + "\\n")
        sys.stdout.flush()
        time.sleep(60)
        real_replace(source, target)

    os.replace = paused_replace
    write_keyring_file(sys.argv[1], KeyringDocument.new(ProtectionKey.generate("replacement")))
    """
)


def test_writer_killed_before_rename_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "ring.toml"
    old = new_file(path)
    old_bytes = path.read_bytes()
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert child.stdout is not None
        temp_name = child.stdout.readline().strip()
        temp = Path(temp_name)
        # The new content is fully written and synced beside the old file when the writer dies.
        assert temp.parent == tmp_path
        assert temp.name.startswith(TEMP_PREFIX)
        assert b'id = "replacement"' in temp.read_bytes()
        assert mode_of(temp) == 0o600
        child.send_signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert path.read_bytes() == old_bytes
    assert read_keyring_file(path) == old
    # The lock died with the writer: the next update goes through, and the stray temp file is ignored.
    extra = ProtectionKey.generate("k2")
    update_keyring_file(path, lambda current: current.with_keyring(current.keyring().with_staged(extra)))  # type: ignore[union-attr]
    assert read_keyring_file(path).keyring().key_ids == ("k1", "k2")
