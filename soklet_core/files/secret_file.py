"""Reading a file that holds secrets: regular file only, owner-only permissions, bounded size."""

from __future__ import annotations

import os
import stat

from .errors import KeyringFileError
from .errors import KeyringFileErrorReason as Reason

__all__ = ["is_mode_secure", "read_secret_file"]


def is_mode_secure(mode: int) -> bool:
    """Whether ``mode`` gives group and others no access at all (read, write or execute)."""
    return stat.S_IMODE(mode) & 0o077 == 0


def read_secret_file(path: str | os.PathLike[str], *, limit: int, allow_insecure_permissions: bool = False) -> bytes:
    """The bytes of the secret file at ``path``.

    The type and permission checks run on the opened descriptor, so the file checked is the file read. Refuses
    (``KeyringFileError``) a missing file, a non-regular file, a file that group or others may access (unless
    ``allow_insecure_permissions``), and a file over ``limit`` bytes.
    """
    label = str(path)
    try:
        with open(path, "rb") as handle:
            status = os.fstat(handle.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise KeyringFileError(Reason.NOT_A_FILE, path=label)
            if not is_mode_secure(status.st_mode) and not allow_insecure_permissions:
                mode = f"mode {stat.S_IMODE(status.st_mode):04o}"
                raise KeyringFileError(Reason.INSECURE_PERMISSIONS, path=label, detail=mode)
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise KeyringFileError(Reason.NOT_FOUND, path=label) from None
    except IsADirectoryError:
        raise KeyringFileError(Reason.NOT_A_FILE, path=label, detail="it is a directory") from None
    except OSError as error:
        raise KeyringFileError(Reason.UNREADABLE, path=label, detail=error.strerror or "I/O error") from None
    if len(data) > limit:
        raise KeyringFileError(Reason.TOO_LARGE, path=label, detail=f"limit {limit} bytes")
    return data
