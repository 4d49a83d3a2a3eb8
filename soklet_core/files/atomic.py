"""Atomic file replacement: readers see the old content or the new, never a torn file, even after a crash."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Final

from .errors import KeyringFileError
from .errors import KeyringFileErrorReason as Reason

__all__ = [
    "MAX_TEMP_SCAN_ENTRIES",
    "STALE_TEMP_SECONDS",
    "TEMP_PREFIX",
    "TEMP_SUFFIX",
    "atomic_write",
    "is_temp_name",
    "remove_stale_temp_files",
]

#: Temporary files start with this; one left behind by a killed writer is safe to delete.
TEMP_PREFIX: Final = ".soklet-tmp-"
#: ... and end with this.
TEMP_SUFFIX: Final = ".tmp"
#: A temporary file untouched for this long is a killed writer's leftover, not a write in flight (a write takes
#: milliseconds; the worst a wrongly deleted one causes is that writer's ``write-failed``).
STALE_TEMP_SECONDS: Final = 60.0
#: At most this many folder entries are looked at per clean-up, so a huge folder costs a bounded time.
MAX_TEMP_SCAN_ENTRIES: Final = 10_000
# What tempfile.mkstemp puts between prefix and suffix (its _RandomNameSequence).
_RANDOM_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
_RANDOM_LENGTH: Final = 8


def atomic_write(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o600, overwrite: bool = True) -> None:
    """Replace the file at ``path`` with ``data``, atomically and durably, with permissions ``mode``.

    Writes a temporary file in the same folder (created with ``mode``, so the secret is never briefly
    world-readable), fsyncs it, renames it over ``path``, then fsyncs the folder so the rename itself survives
    a power cut. If the process dies before the rename, ``path`` is untouched. With ``overwrite=False`` the
    temporary file is hard-linked to ``path`` instead, which fails if anything (a file, a symlink) is there:
    ``already-exists``, nothing changed. Raises ``KeyringFileError`` (``write-failed``, ``already-exists``).
    """
    target = Path(path)
    folder = target.parent
    label = str(path)
    try:
        descriptor, temp_name = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=folder)
    except OSError as error:
        raise KeyringFileError(Reason.WRITE_FAILED, path=label, detail=error.strerror or "I/O error") from None
    try:
        try:
            os.fchmod(descriptor, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        if overwrite:
            os.replace(temp_name, target)
        else:
            try:
                os.link(temp_name, target, follow_symlinks=False)
            finally:
                os.unlink(temp_name)
    except FileExistsError:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise KeyringFileError(Reason.ALREADY_EXISTS, path=label) from None
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise KeyringFileError(Reason.WRITE_FAILED, path=label, detail=error.strerror or "I/O error") from None
    _fsync_folder(folder, label)
    # A writer killed before its rename left its temporary file (material included): this one finished, so
    # clean up after those.
    remove_stale_temp_files(folder)


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is exactly what :func:`atomic_write` names its temporary files."""
    if not (name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)):
        return False
    middle = name[len(TEMP_PREFIX) : len(name) - len(TEMP_SUFFIX)]
    return len(middle) == _RANDOM_LENGTH and all(char in _RANDOM_CHARS for char in middle)


def remove_stale_temp_files(folder: str | os.PathLike[str], *, older_than_seconds: float = STALE_TEMP_SECONDS) -> int:
    """Delete the temporary files killed writers left in ``folder``; return how many were deleted.

    Only entries named as :func:`atomic_write` names them (:func:`is_temp_name`), that are regular files (not
    followed through a symlink), owned by this process's user and unmodified for ``older_than_seconds``: another
    writer's temporary file still in flight is newer. Looks at no more than ``MAX_TEMP_SCAN_ENTRIES`` entries.
    Best effort: a folder or file that cannot be read or deleted is left as it is.
    """
    deadline = time.time() - older_than_seconds
    removed = 0
    try:
        entries = os.scandir(folder)
    except OSError:
        return 0
    with entries:
        for count, entry in enumerate(entries):
            if count >= MAX_TEMP_SCAN_ENTRIES:
                break
            if not is_temp_name(entry.name):
                continue
            try:
                status = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(status.st_mode) or status.st_uid != os.geteuid() or status.st_mtime > deadline:
                    continue
                os.unlink(entry.path)
            except OSError:
                continue
            removed += 1
    return removed


def _fsync_folder(folder: Path, label: str) -> None:
    try:
        handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as error:
        raise KeyringFileError(Reason.WRITE_FAILED, path=label, detail=error.strerror or "I/O error") from None
    try:
        os.fsync(handle)
    except OSError as error:
        raise KeyringFileError(Reason.WRITE_FAILED, path=label, detail=error.strerror or "I/O error") from None
    finally:
        os.close(handle)
