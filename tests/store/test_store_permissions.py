"""A SQLite store is held to the keyring files' rules: a database another user could read or change (mode 0644, a
-wal file of mode 0644, a folder writable by others) is refused, new files are owner-only, and the CLI says so in
one sentence with exit 3. Real files with real permissions."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from soklet_core.store import StoreError, StoreErrorReason, open_store, sqlite_url


def _open(path: Path) -> None:
    async def main() -> None:
        store = open_store(sqlite_url(path))
        try:
            await store.open()
            assert await store.get_task("task-1") is None
        finally:
            await store.close()

    asyncio.run(main())


def _refusal(path: Path) -> StoreError:
    with pytest.raises(StoreError) as caught:
        _open(path)
    assert caught.value.reason is StoreErrorReason.INSECURE
    return caught.value


def _database(folder: Path, mode: int) -> Path:
    """A database file of ``mode`` made by another tool (sqlite3 itself), schema included."""
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / "store.db"
    _open(path)
    path.chmod(mode)
    return path


def test_new_store_files_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "store.db"
    _open(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    for companion in path.parent.iterdir():  # -wal and -shm too
        assert companion.stat().st_mode & 0o077 == 0, companion


def test_a_database_others_can_read_is_refused(tmp_path: Path) -> None:
    path = _database(tmp_path / "data", 0o644)
    refused = _refusal(path)
    assert "mode 0644" in str(refused)
    assert "chmod 600" in str(refused)
    path.chmod(0o600)
    _open(path)  # owner-only again: accepted


def test_a_wal_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = _database(tmp_path / "data", 0o600)
    wal = Path(f"{path}-wal")
    with sqlite3.connect(path) as connection:  # another tool leaves a world-readable log beside it
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("CREATE TABLE IF NOT EXISTS other (x INTEGER)")
        wal.touch()
        wal.chmod(0o644)
        assert "-wal" in str(_refusal(path))
    connection.close()


def test_a_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    path = _database(folder, 0o600)
    folder.chmod(0o777)
    try:
        refused = _refusal(path)
        assert "writable by group or others" in str(refused)
        # A fresh store in such a folder is refused before any file is made there.
        with pytest.raises(StoreError):
            _open(folder / "new.db")
        assert not (folder / "new.db").exists()
        folder.chmod(0o1777)  # the sticky bit stops others renaming the file, as /tmp's does
        _open(path)
    finally:
        folder.chmod(0o700)


@pytest.mark.slow
def test_the_cli_refuses_an_insecure_store_in_one_sentence_with_exit_3(tmp_path: Path) -> None:
    path = _database(tmp_path / "data", 0o644)
    for command in (["tasks", "list"], ["handles", "purge-expired"], ["serve", "--port", "0", "--dev-key"]):
        result = subprocess.run(
            [sys.executable, "-m", "soklet_cli", *command, "--store", f"sqlite://{path}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 3, (command, result.stderr)
        assert result.stderr.count("\n") == 1, result.stderr
        assert "insecure: another user could read or change the store's file" in result.stderr
        assert "mode 0644" in result.stderr
        assert "Traceback" not in result.stderr
