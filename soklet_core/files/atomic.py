"""Atomic file replacement: readers see the old content or the new, never a torn file, even after a crash."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .errors import KeyringFileError
from .errors import KeyringFileErrorReason as Reason

__all__ = ["TEMP_PREFIX", "atomic_write"]

#: Temporary files start with this; one left behind by a killed writer is safe to delete.
TEMP_PREFIX = ".soklet-tmp-"


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
        descriptor, temp_name = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".tmp", dir=folder)
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
