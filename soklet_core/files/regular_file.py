"""Opening a file soklet reads (a keyring, a material file, a command's input) without ever blocking on it.

A plain ``open`` of a FIFO waits for a writer forever, and one of a device may never end; the regular-file
check must come after an open that cannot block. So: open with ``O_NONBLOCK`` (a FIFO opens at once, a socket
fails), ``fstat`` the descriptor, refuse anything but a regular file, then clear ``O_NONBLOCK`` and read at most
``limit + 1`` bytes. Every check runs on the descriptor, so the file checked is the file read.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Callable

from .errors import KeyringFileError
from .errors import KeyringFileErrorReason as Reason

__all__ = ["describe_file_type", "read_regular_file"]

_KINDS = (
    (stat.S_ISDIR, "it is a directory"),
    (stat.S_ISFIFO, "it is a FIFO"),
    (stat.S_ISSOCK, "it is a socket"),
    (stat.S_ISCHR, "it is a character device"),
    (stat.S_ISBLK, "it is a block device"),
    (stat.S_ISLNK, "it is a symbolic link"),
)


def describe_file_type(mode: int) -> str:
    """A fixed phrase naming the kind of a non-regular file (``it is a FIFO (named pipe)``)."""
    for test, phrase in _KINDS:
        if test(mode):
            return phrase
    return "it is not a regular file"


def read_regular_file(
    path: str | os.PathLike[str],
    *,
    limit: int,
    follow_symlinks: bool = True,
    check: Callable[[os.stat_result], None] | None = None,
) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them; never blocks on a special file.

    ``check`` runs on the ``fstat`` of the opened descriptor before anything is read (permission and owner
    checks go there) and may raise. With ``follow_symlinks=False`` a symbolic link is refused. Raises
    ``KeyringFileError``: ``not-found``, ``not-a-file`` (a directory, FIFO, socket, device or, when not
    followed, a symlink; the detail says which), ``unreadable``, ``too-large``, or whatever ``check`` raises.
    """
    label = str(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise KeyringFileError(Reason.NOT_FOUND, path=label) from None
    except OSError as error:
        raise _open_error(error, label, follow_symlinks) from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise KeyringFileError(Reason.NOT_A_FILE, path=label, detail=describe_file_type(status.st_mode))
        if check is not None:
            check(status)
        try:
            # Regular files never block; clearing the flag keeps reads ordinary on every platform.
            fcntl.fcntl(descriptor, fcntl.F_SETFL, fcntl.fcntl(descriptor, fcntl.F_GETFL) & ~os.O_NONBLOCK)
            data = _read_at_most(descriptor, limit + 1)
        except OSError as error:
            raise KeyringFileError(Reason.UNREADABLE, path=label, detail=error.strerror or "I/O error") from None
    finally:
        with contextlib.suppress(OSError):
            os.close(descriptor)
    if len(data) > limit:
        raise KeyringFileError(Reason.TOO_LARGE, path=label, detail=f"limit {limit} bytes")
    return data


def _open_error(error: OSError, label: str, follow_symlinks: bool) -> KeyringFileError:
    if error.errno == errno.EISDIR:
        return KeyringFileError(Reason.NOT_A_FILE, path=label, detail="it is a directory")
    if error.errno == errno.ENXIO:
        # Opening a Unix socket (or a FIFO for writing with no reader) fails with ENXIO.
        return KeyringFileError(Reason.NOT_A_FILE, path=label, detail="it is a socket")
    if error.errno == errno.ELOOP and not follow_symlinks:
        return KeyringFileError(Reason.NOT_A_FILE, path=label, detail="it is a symbolic link")
    return KeyringFileError(Reason.UNREADABLE, path=label, detail=error.strerror or "I/O error")


def _read_at_most(descriptor: int, count: int) -> bytes:
    chunks: list[bytes] = []
    remaining = count
    while remaining > 0:
        chunk = os.read(descriptor, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
