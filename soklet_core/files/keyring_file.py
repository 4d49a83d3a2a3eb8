"""Reading, writing and updating a keyring file on disk.

A file holding wrapped keys (``soklet keys encrypt``) is read given its key-encryption key (``kek=``); changing it
through :func:`update_keyring_file` wraps every new key under that KEK too, so an encrypted file never gains a
key in clear.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from soklet_core.keys import KeyWrapError, KeyWrapper

from .atomic import atomic_write
from .document import KeyringDocument
from .errors import KeyringFileError
from .errors import KeyringFileErrorReason as Reason
from .keyring_format import MAX_KEYRING_FILE_BYTES, parse_keyring_document, render_keyring_document
from .lock import file_lock
from .secret_file import check_folders, read_secret_file

__all__ = [
    "KEYRING_FILE_MODE",
    "KeyringUpdate",
    "file_written_at",
    "read_keyring_file",
    "update_keyring_file",
    "write_keyring_file",
]

#: Keyring files are written owner read/write only.
KEYRING_FILE_MODE = 0o600


@dataclass(frozen=True, slots=True)
class KeyringUpdate:
    """What :func:`update_keyring_file` did: the document before (``None`` if there was no file), after,
    and whether the file was written (``False`` when the change was a no-op)."""

    before: KeyringDocument | None
    after: KeyringDocument
    written: bool


def read_keyring_file(
    path: str | os.PathLike[str],
    *,
    allow_insecure_permissions: bool = False,
    environ: Mapping[str, str] | None = None,
    kek: KeyWrapper | None = None,
) -> KeyringDocument:
    """Read and validate the keyring file at ``path``; ``material_file`` paths are relative to its folder;
    ``kek`` unwraps ``wrapped_material`` (in memory only).

    Refuses a file that group or others may access unless ``allow_insecure_permissions``, and a file holding
    wrapped keys without ``kek`` (``kek-required``) or under another KEK (``wrong-kek``, naming the key). Raises
    ``KeyringFileError``.
    """
    data = read_secret_file(path, limit=MAX_KEYRING_FILE_BYTES, allow_insecure_permissions=allow_insecure_permissions)
    return parse_keyring_document(
        data,
        path=str(path),
        base_dir=Path(path).parent,
        environ=environ,
        allow_insecure_permissions=allow_insecure_permissions,
        kek=kek,
    )


def file_written_at(path: str | os.PathLike[str]) -> datetime:
    """When the file at ``path`` last changed (its modification time, UTC): the latest a change recorded in it,
    such as a key's demotion, can have happened. Raises ``KeyringFileError`` (``not-found``, ``unreadable``)."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise KeyringFileError(Reason.NOT_FOUND, path=str(path)) from None
    except OSError as error:
        raise KeyringFileError(Reason.UNREADABLE, path=str(path), detail=error.strerror or "I/O error") from None
    return datetime.fromtimestamp(status.st_mtime, UTC)


def write_keyring_file(
    path: str | os.PathLike[str], document: KeyringDocument, *, allow_insecure_permissions: bool = False
) -> None:
    """Write ``document`` to ``path`` atomically with mode 0600.

    Holds the file's lock while writing; to change a file based on what it holds, use
    :func:`update_keyring_file`, which holds the lock across the read as well. Refuses a folder another user
    could change (``untrusted-folder``) unless ``allow_insecure_permissions``, and a document whose file would
    be over ``MAX_KEYRING_FILE_BYTES`` (``too-large``): soklet never writes a file it would refuse to read.
    """
    target = _real(path)
    data = _rendered(document, str(path))
    if not allow_insecure_permissions:
        check_folders(target, label=str(path))
    with file_lock(target):
        atomic_write(target, data, mode=KEYRING_FILE_MODE)


def update_keyring_file(
    path: str | os.PathLike[str],
    change: Callable[[KeyringDocument | None], KeyringDocument],
    *,
    allow_insecure_permissions: bool = False,
    environ: Mapping[str, str] | None = None,
    commit: Callable[[KeyringUpdate], None] | None = None,
    kek: KeyWrapper | None = None,
) -> KeyringUpdate:
    """Read, change and write the keyring file at ``path`` under its exclusive lock.

    ``change`` gets the current document (``None`` when the file does not exist) and returns the new one;
    returning the same object means "no change" and nothing is written. Whatever ``change`` raises propagates
    with the file untouched, and so does ``too-large`` for a result over ``MAX_KEYRING_FILE_BYTES``. The folder
    is checked first (``untrusted-folder``, unless ``allow_insecure_permissions``). Concurrent updates from
    any number of processes are serialized, so none is lost.

    ``commit``, when given, is called with the outcome while the lock is still held, after the write (or after
    deciding there is nothing to write): whoever mirrors the file (a live keyring) takes the new state there, so
    no other writer's change can slip in between. If ``commit`` raises, the file's former bytes are put back
    (still under the lock) and the error propagates.

    ``kek`` unwraps a file holding wrapped keys. When the file held wrapped keys, or did not exist, and ``kek`` is
    given, every key the change adds in clear is wrapped under ``kek`` before the write (``after`` holds the
    wrapped form), so an encrypted file never gains a key in clear; a clear file stays clear, and the keys the
    file already held keep the form the change gave them (``unwrapped()`` decrypts). A KEK that cannot wrap
    (``KeyWrapError``) is ``kek-unavailable`` with the file untouched.
    """
    target = _real(path)
    if not allow_insecure_permissions:
        check_folders(target, label=str(path))
    with file_lock(target):
        try:
            raw: bytes | None = read_secret_file(
                target, limit=MAX_KEYRING_FILE_BYTES, allow_insecure_permissions=allow_insecure_permissions
            )
        except KeyringFileError as error:
            if error.reason is not Reason.NOT_FOUND:
                raise
            raw = None
        before = None if raw is None else _parsed(raw, path, target, allow_insecure_permissions, environ, kek)
        after = change(before)
        written = after is not before
        if written and kek is not None and (before is None or before.is_wrapped):
            try:
                after = after.wrapped(kek, added_since=before)
            except KeyWrapError as error:
                raise KeyringFileError(Reason.KEK_UNAVAILABLE, path=str(path), detail=error.detail) from None
        if written:
            atomic_write(target, _rendered(after, str(path)), mode=KEYRING_FILE_MODE)
        update = KeyringUpdate(before, after, written=written)
        if commit is not None:
            try:
                commit(update)
            except BaseException:
                if written:
                    _put_back(target, raw)
                raise
        return update


def _parsed(
    raw: bytes,
    path: str | os.PathLike[str],
    target: Path,
    allow_insecure_permissions: bool,
    environ: Mapping[str, str] | None,
    kek: KeyWrapper | None,
) -> KeyringDocument:
    return parse_keyring_document(
        raw,
        path=str(path),
        base_dir=target.parent,
        environ=environ,
        allow_insecure_permissions=allow_insecure_permissions,
        kek=kek,
    )


def _put_back(target: Path, raw: bytes | None) -> None:
    # The exact former bytes (comments and all), or no file when there was none.
    if raw is None:
        os.unlink(target)
    else:
        atomic_write(target, raw, mode=KEYRING_FILE_MODE)


def _rendered(document: KeyringDocument, label: str) -> bytes:
    data = render_keyring_document(document).encode("utf-8")
    if len(data) > MAX_KEYRING_FILE_BYTES:
        # Written, it would lock everyone out: every later read refuses a file this large.
        raise KeyringFileError(Reason.TOO_LARGE, path=label, detail=f"limit {MAX_KEYRING_FILE_BYTES} bytes")
    return data


def _real(path: str | os.PathLike[str]) -> Path:
    # Through a symlink, replace (and lock) the file it points to rather than the link.
    return Path(os.path.realpath(path))
