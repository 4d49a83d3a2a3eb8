"""``LiveKeyring``: one server's live keyring and its keyring file, changed together so they never disagree.

Every change (stage, activate, remove, reload) is computed from the live keyring, written to the keyring file
first (atomically, under the file's lock, by the project's keyring-file writer) and only then swapped into the
:class:`~soklet_core.keys.KeyringManager`; a refused change or a failed write leaves both as they were. Without
a file (a keyring built in code) a change alters memory only. :class:`KeyringFileWatcher` re-reads the file on a
signal (SIGHUP) or when its stat changes, through the same :meth:`LiveKeyring.reload`.

Each applied change writes one line to the ``soklet.admin.audit`` logger: who, what, key id, generation and the
new fingerprint, never material.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.files import (
    KeyringDocument,
    KeyringFileError,
    KeyringFileErrorReason,
    read_keyring_file,
    update_keyring_file,
    write_keyring_file,
)
from soklet_core.keys import (
    KeyInUse,
    KeyringError,
    KeyringManager,
    KeyringSnapshot,
    ProtectionKey,
    ProtectionKeyring,
    printable_name,
)
from soklet_core.keys.fingerprint import CURRENT_FINGERPRINT_VERSION, FINGERPRINT_VERSIONS

__all__ = [
    "DEFAULT_POLL_INTERVAL_SECONDS",
    "KeyringFileWatcher",
    "LiveKeyring",
    "LiveKeyringError",
    "LiveKeyringRefusal",
]

#: How often the watcher compares the keyring file's stat (inode, size, mtime) with the last one it read.
DEFAULT_POLL_INTERVAL_SECONDS: Final = 2.0

_audit = logging.getLogger("soklet.admin.audit")
_logger = logging.getLogger("soklet.admin")


class LiveKeyringRefusal(ErrorReason):
    """Why a change was refused beyond the keys layer's own reasons. The set is closed."""

    FILE_DIVERGED = (
        "keyring-file-diverged",
        "the keyring file holds other material under an id the live keyring also holds: writing would split them",
    )
    FILE_REFUSED = "keyring-file-refused", "the keyring file could not be read or written (see file_reason)"
    NO_KEYRING_FILE = "no-keyring-file", "a reload was asked of a keyring that has no file"


class LiveKeyringError(SokletError):
    """A refused change that is not a :class:`~soklet_core.keys.KeyringError`; the message holds no input.

    ``str()`` is the reason's slug, followed by the keyring file's reason slug in parentheses when there is one.
    """

    __slots__ = ("file_reason",)

    reason: LiveKeyringRefusal

    def __init__(self, reason: LiveKeyringRefusal, file_reason: KeyringFileErrorReason | None = None) -> None:
        self.file_reason = file_reason
        suffix = "" if file_reason is None else f" ({file_reason.value})"
        super().__init__(reason, f"{reason.value}{suffix}")


@dataclass(frozen=True, slots=True)
class _FileStat:
    inode: int
    size: int
    mtime_ns: int


def _stat(path: Path) -> _FileStat | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return _FileStat(status.st_ino, status.st_size, status.st_mtime_ns)


class LiveKeyring:
    """The live keyring of one server and its keyring file (``None``: memory only). Thread-safe.

    Changes are serialized on a lock of their own; change the manager through this object while it is attached,
    or a direct change may be overwritten by the next one made here.
    """

    __slots__ = (
        "_allow_insecure",
        "_created",
        "_file_stat",
        "_fingerprint_version",
        "_lock",
        "_manager",
        "_observers",
        "_path",
    )

    def __init__(
        self,
        manager: KeyringManager,
        path: Path | None = None,
        *,
        document: KeyringDocument | None = None,
        allow_insecure_permissions: bool = False,
        fingerprint_version: int = CURRENT_FINGERPRINT_VERSION,
    ) -> None:
        if fingerprint_version not in FINGERPRINT_VERSIONS:
            raise ValueError(f"fingerprint_version must be one of {FINGERPRINT_VERSIONS}")
        self._manager = manager
        self._path = path
        self._allow_insecure = allow_insecure_permissions
        self._fingerprint_version = fingerprint_version
        self._lock = threading.Lock()
        self._observers: list[Callable[[KeyringSnapshot], None]] = []
        self._created: dict[str, str] = {}
        self._file_stat = None if path is None else _stat(path)
        if document is not None:
            self._remember(document)

    @property
    def path(self) -> Path | None:
        """The keyring file, or ``None`` for a keyring that lives in memory only."""
        return self._path

    @property
    def manager(self) -> KeyringManager:
        """The live manager the server seals and opens with."""
        return self._manager

    def add_observer(self, observer: Callable[[KeyringSnapshot], None]) -> None:
        """Call ``observer(snapshot)`` now and after every applied change or reload (e.g. metrics)."""
        self._observers.append(observer)
        observer(self.snapshot())

    def snapshot(self) -> KeyringSnapshot:
        """The manager's snapshot, with the fingerprint version this instance reports."""
        return self._manager.snapshot(fingerprint_version=self._fingerprint_version)

    def created(self, key_id: str) -> str | None:
        """When ``key_id`` was created, as the keyring file says (ISO 8601), or ``None`` when unknown."""
        return self._created.get(key_id)

    def stage(self, key: ProtectionKey, *, actor: str) -> KeyringSnapshot:
        """Stage ``key`` for verification (identical re-stage: no change)."""
        return self._apply("stage", key.id, lambda keyring: keyring.with_staged(key), actor)

    def activate(self, key_id: str, *, actor: str) -> KeyringSnapshot:
        """Make the staged ``key_id`` the active key."""
        return self._apply("activate", key_id, lambda keyring: keyring.with_activated(key_id), actor)

    def remove(self, key_id: str, *, actor: str) -> KeyringSnapshot:
        """Remove verification key ``key_id`` (never the active key, never a reserved one)."""
        return self._apply("remove", key_id, lambda keyring: keyring.without(key_id), actor)

    def reload(self, *, actor: str) -> KeyringSnapshot:
        """Re-read the keyring file and make it the live keyring; a refused file changes nothing.

        Refuses with ``LiveKeyringError`` (no file, file unreadable or invalid) or ``KeyInUse`` (the file drops
        a key that still holds a sealing reservation).
        """
        if self._path is None:
            raise LiveKeyringError(LiveKeyringRefusal.NO_KEYRING_FILE)
        with self._lock:
            # Taken before the read: a change landing after it is seen by the next poll, never missed.
            stat = _stat(self._path)
            self._file_stat = stat
            try:
                document = read_keyring_file(self._path, allow_insecure_permissions=self._allow_insecure)
            except KeyringFileError as error:
                raise LiveKeyringError(LiveKeyringRefusal.FILE_REFUSED, error.reason) from None
            before = self._manager.generation
            snapshot = self._manager.replace_keyring(document.keyring())
            self._remember(document)
        if snapshot.generation != before:
            self._applied("reload", None, actor)
        return self.snapshot()

    def _apply(
        self,
        action: str,
        key_id: str,
        change: Callable[[ProtectionKeyring], ProtectionKeyring],
        actor: str,
    ) -> KeyringSnapshot:
        with self._lock:
            current = self._manager.current()
            keyring = change(current)
            if keyring is current:
                return self.snapshot()
            reserved = self._manager.outstanding_reservations()
            for reserved_id in sorted(reserved):
                if keyring.key(reserved_id) is None:
                    raise KeyInUse(reserved_id)
            if self._path is None:
                self._manager.replace_keyring(keyring)
            else:
                self._write_then_swap(keyring)
        self._applied(action, key_id, actor)
        return self.snapshot()

    def _write_then_swap(self, keyring: ProtectionKeyring) -> None:
        assert self._path is not None

        def changed(document: KeyringDocument | None) -> KeyringDocument:
            if document is None:
                raise LiveKeyringError(LiveKeyringRefusal.FILE_REFUSED, KeyringFileErrorReason.NOT_FOUND)
            after = document.with_keyring(keyring)
            if after.keyring() != keyring:
                # The file holds one of these ids with other bytes (edited, not reloaded): never split them.
                raise LiveKeyringError(LiveKeyringRefusal.FILE_DIVERGED)
            return after

        try:
            update = update_keyring_file(self._path, changed, allow_insecure_permissions=self._allow_insecure)
        except KeyringFileError as error:
            raise LiveKeyringError(LiveKeyringRefusal.FILE_REFUSED, error.reason) from None
        try:
            self._manager.replace_keyring(keyring)
        except KeyringError:
            # A reservation appeared between the check and the swap: put the file back as it was.
            if update.written and update.before is not None:
                write_keyring_file(self._path, update.before, allow_insecure_permissions=self._allow_insecure)
            raise
        self._remember(update.after)
        self._file_stat = _stat(self._path)

    def _remember(self, document: KeyringDocument) -> None:
        self._created = {entry.key.id: entry.created.isoformat() for entry in document.entries}

    def _applied(self, action: str, key_id: str | None, actor: str) -> None:
        snapshot = self.snapshot()
        fingerprint = snapshot.fingerprint
        shown = "-" if key_id is None else printable_name(key_id, what="a key id")
        _audit.info(
            "actor=%s action=%s key=%s generation=%d fingerprint=v%d:%s",
            actor,
            action,
            shown,
            snapshot.generation,
            fingerprint.version,
            fingerprint.value,
        )
        for observer in self._observers:
            try:
                observer(snapshot)
            except Exception as error:  # an observer (metrics) must never undo or fail an applied change
                _logger.error("keyring observer failed: %s", type(error).__name__)

    def file_changed(self) -> bool:
        """Whether the keyring file's stat (inode, size, mtime) differs from when it was last read or written."""
        return self._path is not None and _stat(self._path) != self._file_stat


class KeyringFileWatcher:
    """A daemon thread that reloads the keyring file when its stat changes or a reload is requested (SIGHUP).

    Each refused file is logged once with a bounded reason (``soklet.admin``) and the running keyring stays.
    """

    __slots__ = ("_interval", "_live", "_stop", "_thread", "_wake")

    def __init__(self, live: LiveKeyring, *, interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS) -> None:
        if not interval_seconds > 0:
            raise ValueError("interval_seconds must be above 0")
        self._live = live
        self._interval = interval_seconds
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="soklet-keyring-watch", daemon=True)

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def request_reload(self) -> None:
        """Reload now whatever the stat says (safe to call from a signal handler)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop the thread (it ends within one poll)."""
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=self._interval + 5)

    def _run(self) -> None:
        while True:
            forced = self._wake.wait(self._interval)
            self._wake.clear()
            if self._stop:
                return
            if forced or self._live.file_changed():
                self._reload("sighup" if forced else "file-watch")

    def _reload(self, actor: str) -> None:
        try:
            self._live.reload(actor=actor)
        except LiveKeyringError as error:
            _logger.warning("keyring reload (%s) refused: %s; the running keyring stays", actor, error)
        except KeyringError as error:
            _logger.warning("keyring reload (%s) refused: %s; the running keyring stays", actor, error.reason.value)
        except Exception as error:  # the watcher must outlive any surprise; the keyring stays as it was
            _logger.error("keyring reload (%s) failed: %s; the running keyring stays", actor, type(error).__name__)
