"""What a file was when it was last read, so that a watcher never misses a change made between two polls.

A stat alone can miss one: an in-place edit keeps the inode, a same-size change keeps the size, a coarse clock
or a ``touch -r`` keeps the modification time, and a rename may reuse a freed inode number. The signature holds
the device, inode, size, modification and change times (the kernel sets the latter on every write and no
caller can set it back) and a SHA-256 digest of the content, so two signatures are equal only when the file
very likely holds the same bytes.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Final

from .errors import KeyringFileError
from .regular_file import read_regular_file

__all__ = ["MAX_SIGNED_FILE_BYTES", "FileSignature", "file_signature"]

#: A file larger than this is signed by its stat alone (its content is not read); keyring files are smaller.
MAX_SIGNED_FILE_BYTES: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileSignature:
    """A file's identity, times, size and content digest (``digest`` empty when the content was not read)."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    digest: bytes

    def __repr__(self) -> str:
        return f"FileSignature(inode={self.inode}, size={self.size}, mtime_ns={self.mtime_ns})"


def file_signature(path: str | os.PathLike[str]) -> FileSignature | None:
    """The signature of the file at ``path`` now, or ``None`` when there is no file there (or it cannot be
    stat'ed). Reads at most ``MAX_SIGNED_FILE_BYTES`` of it, without blocking on a special file."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    try:
        digest = hashlib.sha256(read_regular_file(path, limit=MAX_SIGNED_FILE_BYTES)).digest()
    except KeyringFileError:
        # Too large, unreadable, not a regular file: the stat still tells most changes apart.
        digest = b""
    return FileSignature(status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns, digest)
