"""Reading a file that holds secrets: a regular file, yours or root's, owner-only, in folders no one else can
change, and of bounded size."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import KeyringFileError
from .errors import KeyringFileErrorReason as Reason
from .regular_file import read_regular_file

__all__ = ["check_folders", "is_mode_secure", "is_trusted_owner", "read_secret_file"]


def is_mode_secure(mode: int) -> bool:
    """Whether ``mode`` gives group and others no access at all (read, write or execute)."""
    return stat.S_IMODE(mode) & 0o077 == 0


def is_trusted_owner(uid: int) -> bool:
    """Whether a file owned by ``uid`` may hold this process's secrets: its own user's, or root's."""
    return uid in (os.geteuid(), 0)


def check_folders(path: str | os.PathLike[str], *, label: str | None = None) -> None:
    """Refuse (``untrusted-folder``) when another user could replace the file at ``path``.

    Every folder from ``path``'s own up to ``/`` is checked, along the path as written and along the path with
    symlinks resolved: each must belong to this process's user or root and must not be writable by group or
    others, unless it has the sticky bit (as ``/tmp`` does), which stops others renaming files they do not own.
    A folder that someone else can write lets them rename their own file over a keyring, whatever its mode.
    """
    shown = label if label is not None else str(path)
    given = Path(os.path.abspath(path))
    seen: set[Path] = set()
    for start in (given, Path(os.path.realpath(given))):
        for folder in start.parents:
            if folder in seen:
                continue
            seen.add(folder)
            try:
                status = os.stat(folder)
            except FileNotFoundError:
                # A missing folder cannot be swapped; opening the file then reports not-found.
                continue
            except OSError as error:
                detail = f"{folder}: {error.strerror or 'I/O error'}"
                raise KeyringFileError(Reason.UNREADABLE, path=shown, detail=detail) from None
            if not is_trusted_owner(status.st_uid):
                detail = f"folder {folder} belongs to uid {status.st_uid}"
                raise KeyringFileError(Reason.UNTRUSTED_FOLDER, path=shown, detail=detail)
            if status.st_mode & 0o022 and not status.st_mode & stat.S_ISVTX:
                mode = f"{stat.S_IMODE(status.st_mode):04o}"
                detail = f"folder {folder} is writable by group or others (mode {mode}) without the sticky bit"
                raise KeyringFileError(Reason.UNTRUSTED_FOLDER, path=shown, detail=detail)


def read_secret_file(path: str | os.PathLike[str], *, limit: int, allow_insecure_permissions: bool = False) -> bytes:
    """The bytes of the secret file at ``path``.

    Never blocks on a FIFO or device (see :func:`read_regular_file`). The type, owner and permission checks run
    on the opened descriptor, so the file checked is the file read. Refuses (``KeyringFileError``) a missing
    file, a non-regular file, a file over ``limit`` bytes and, unless ``allow_insecure_permissions``: a file
    that group or others may access (``insecure-permissions``), one owned by another user than this process's
    or root (``untrusted-owner``), and one in a folder another user could change (``untrusted-folder``, see
    :func:`check_folders`).
    """
    label = str(path)
    if not allow_insecure_permissions:
        check_folders(path, label=label)

    def check(status: os.stat_result) -> None:
        if allow_insecure_permissions:
            return
        if not is_trusted_owner(status.st_uid):
            raise KeyringFileError(Reason.UNTRUSTED_OWNER, path=label, detail=f"owned by uid {status.st_uid}")
        if not is_mode_secure(status.st_mode):
            mode = f"mode {stat.S_IMODE(status.st_mode):04o}"
            raise KeyringFileError(Reason.INSECURE_PERMISSIONS, path=label, detail=mode)

    return read_regular_file(path, limit=limit, check=check)
