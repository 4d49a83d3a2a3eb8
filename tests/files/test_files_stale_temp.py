"""Temporary keyring files a killed writer left (material included) are removed on the next write and when a
server starts with the keyring; only our own, stale, regular ones."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from soklet_core.files import (
    STALE_TEMP_SECONDS,
    TEMP_PREFIX,
    TEMP_SUFFIX,
    KeyringDocument,
    is_temp_name,
    read_keyring_file,
    remove_stale_temp_files,
    render_keyring_document,
    write_keyring_file,
)
from soklet_core.keys import KeyringManager, ProtectionKey
from soklet_core.mcp.server.ops import LiveKeyring
from tests.conftest import Soklet


def _leftover(folder: Path, name: str, *, age_seconds: float, removed_key: ProtectionKey) -> Path:
    # What a writer killed between its temporary write and its rename leaves: a whole keyring, 0600.
    path = folder / name
    path.write_text(render_keyring_document(KeyringDocument.new(removed_key)))
    path.chmod(0o600)
    moment = time.time() - age_seconds
    os.utime(path, (moment, moment))
    return path


def test_the_name_rule_matches_only_what_atomic_write_makes() -> None:
    assert is_temp_name(f"{TEMP_PREFIX}ab_9xyz1{TEMP_SUFFIX}")
    for name in (
        f"{TEMP_PREFIX}ab_9xyz{TEMP_SUFFIX}",  # 7 random characters
        f"{TEMP_PREFIX}ab_9xyz12{TEMP_SUFFIX}",  # 9
        f"{TEMP_PREFIX}AB_9XYZ1{TEMP_SUFFIX}",  # mkstemp never uses uppercase
        f"{TEMP_PREFIX}ab/9xyz1{TEMP_SUFFIX}",
        f"{TEMP_PREFIX}ab_9xyz1.toml",
        "keys.toml",
    ):
        assert not is_temp_name(name)


def test_only_stale_regular_temp_files_of_ours_are_removed(tmp_path: Path) -> None:
    key = ProtectionKey.generate("gone")
    stale = _leftover(tmp_path, f"{TEMP_PREFIX}abcd1234{TEMP_SUFFIX}", age_seconds=3600, removed_key=key)
    # At the bound minus a margin: a write in flight (another writer's) is left alone.
    fresh = _leftover(
        tmp_path, f"{TEMP_PREFIX}efgh5678{TEMP_SUFFIX}", age_seconds=STALE_TEMP_SECONDS - 30, removed_key=key
    )
    other = _leftover(tmp_path, "notes.tmp", age_seconds=3600, removed_key=key)
    target = _leftover(tmp_path, "elsewhere.toml", age_seconds=3600, removed_key=key)
    link = tmp_path / f"{TEMP_PREFIX}link0000{TEMP_SUFFIX}"
    link.symlink_to(target)
    os.utime(link, (1, 1), follow_symlinks=False)
    assert remove_stale_temp_files(tmp_path) == 1
    assert not stale.exists()
    assert fresh.exists()
    assert other.exists()
    assert link.is_symlink()
    assert target.exists()


@pytest.mark.slow
def test_the_next_cli_write_removes_a_leftover(soklet: Soklet) -> None:
    assert soklet.run("keys", "generate", "--id", "k1").returncode == 0
    gone = ProtectionKey.generate("gone")
    soklet.remember(gone)
    stale = _leftover(soklet.cwd, f"{TEMP_PREFIX}kill9aaa{TEMP_SUFFIX}", age_seconds=600, removed_key=gone)
    assert soklet.run("keys", "list").returncode == 0  # a read writes nothing and removes nothing
    assert stale.exists()
    staged = soklet.run("keys", "stage", "--generate", "--id", "k2")
    assert staged.returncode == 0, staged.stderr
    assert not stale.exists()


def test_a_server_starting_with_the_keyring_removes_a_leftover(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.toml"
    write_keyring_file(path, KeyringDocument.new(ProtectionKey.generate("k1")))
    stale = _leftover(
        tmp_path, f"{TEMP_PREFIX}kill9bbb{TEMP_SUFFIX}", age_seconds=600, removed_key=ProtectionKey.generate("gone")
    )
    document = read_keyring_file(path)
    with caplog.at_level(logging.INFO, logger="soklet.admin"):
        LiveKeyring(KeyringManager(document.keyring()), path, document=document)
    assert not stale.exists()
    assert "removed 1 temporary file left beside the keyring file by a killed writer" in caplog.text
