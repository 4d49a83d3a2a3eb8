"""The advisory lock that serializes read-modify-write of one keyring file across processes."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import KeyringFileError
from .errors import KeyringFileErrorReason as Reason

__all__ = ["LOCK_SUFFIX", "file_lock", "lock_path_for"]

#: The lock of ``keys.toml`` is ``keys.toml.lock`` in the same folder.
LOCK_SUFFIX = ".lock"


def lock_path_for(path: str | os.PathLike[str]) -> Path:
    """The sidecar lock file of ``path``."""
    target = Path(path)
    return target.with_name(target.name + LOCK_SUFFIX)


@contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the sidecar lock file of ``path`` for the ``with`` block.

    The lock lives on a separate file because the keyring file itself is replaced by rename on every write: a
    lock on the old inode would not exclude a writer that opened the new one. The sidecar is never deleted
    (deleting it would let two writers lock two different inodes). The kernel drops the lock if the process
    dies, so a killed writer never leaves the file locked. Blocks until the lock is free.
    """
    lock_path = lock_path_for(path)
    try:
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as error:
        detail = f"{lock_path}: {error.strerror or 'I/O error'}"
        raise KeyringFileError(Reason.LOCK_FAILED, path=str(path), detail=detail) from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except OSError as error:
            detail = f"{lock_path}: {error.strerror or 'I/O error'}"
            raise KeyringFileError(Reason.LOCK_FAILED, path=str(path), detail=detail) from None
        yield
    finally:
        # Closing the descriptor releases the lock.
        os.close(descriptor)
