"""The advisory lock that serializes read-modify-write of one keyring file across processes."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import KeyringFileError
from .errors import KeyringFileErrorReason as Reason
from .regular_file import describe_file_type
from .secret_file import is_trusted_owner

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

    The lock file is opened without following a symlink and without blocking, and must be a regular file owned
    by this process's user or root: a link planted as ``FILE.lock`` would otherwise make soklet create or
    open a file wherever it points (``lock-failed``, nothing created there).
    """
    lock_path = lock_path_for(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
    try:
        descriptor = os.open(lock_path, flags, 0o600)
    except OSError as error:
        why = "it is a symbolic link" if error.errno == errno.ELOOP else error.strerror or "I/O error"
        raise KeyringFileError(Reason.LOCK_FAILED, path=str(path), detail=f"{lock_path}: {why}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            detail = f"{lock_path}: {describe_file_type(status.st_mode)}"
            raise KeyringFileError(Reason.LOCK_FAILED, path=str(path), detail=detail)
        if not is_trusted_owner(status.st_uid):
            detail = f"{lock_path}: owned by uid {status.st_uid}"
            raise KeyringFileError(Reason.LOCK_FAILED, path=str(path), detail=detail)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except OSError as error:
            detail = f"{lock_path}: {error.strerror or 'I/O error'}"
            raise KeyringFileError(Reason.LOCK_FAILED, path=str(path), detail=detail) from None
        yield
    finally:
        # Closing the descriptor releases the lock.
        os.close(descriptor)
