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


def atomic_write(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o600) -> None:
    """Replace the file at ``path`` with ``data``, atomically and durably, with permissions ``mode``.

    Writes a temporary file in the same folder (created with ``mode``, so the secret is never briefly
    world-readable), fsyncs it, renames it over ``path``, then fsyncs the folder so the rename itself survives
    a power cut. If the process dies before the rename, ``path`` is untouched. Raises ``KeyringFileError``
    (``write-failed``).
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
        os.replace(temp_name, target)
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
