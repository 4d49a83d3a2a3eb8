"""``LiveKeyring``: one server's live keyring and its keyring file, changed together so they never disagree.

Every change (stage, activate, remove) is applied to what the keyring file holds, not to the server's view of
it: under the file's lock the file is re-read, the change is applied to it, the result is written (atomically,
by the project's keyring-file writer) and swapped into the :class:`~soklet_core.keys.KeyringManager` before the
lock is released. So a change another process (``soklet keys ...``) made to the file since the server last read
it is kept, and goes live together with this one; it is never written over. The one disagreement refused
(``keyring-file-diverged``, 409) is an id the file and the live keyring both hold with other material: taking
either would silently change what that key opens. A refused change or a failed write leaves file and memory as
they were. Without a file (a keyring built in code) a change alters memory only.

:class:`KeyringFileWatcher` re-reads the file on a signal (SIGHUP) or when its
:class:`~soklet_core.files.FileSignature` (inode, size, times and a content digest) differs from the one taken
before the last read or under the lock of the last write, so no change between two polls is missed.

A reload (file watch, SIGHUP, the admin API's reload) is refused exactly as a change is: a file that gives an id
the live keyring holds other bytes (``keyring-file-diverged``, a WARNING line naming the id, never material), a
file that cannot be read, parsed or trusted (``keyring-file-refused``), a file that drops a key still reserved for
sealing. The live keyring is kept and goes on serving; while the file on disk is refused the instance is held not
ready (:attr:`~soklet_core.mcp.server.ops._readiness.NotReady.KEYRING_FILE_REFUSED`, when a
:class:`~soklet_core.mcp.server.ops._readiness.Readiness` is given) and :attr:`LiveKeyring.file_refused` is true (the
``soklet_keyring_file_refused`` metric); the next reload or change that succeeds clears both.

Each applied change writes one line to the ``soklet.admin.audit`` logger: who, what, key id, generation and the
new fingerprint, never material; each refused one a line to ``soklet.admin``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final, Protocol

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.files import (
    FileSignature,
    KeyringDocument,
    KeyringFileError,
    KeyringFileErrorReason,
    KeyringUpdate,
    file_signature,
    read_keyring_file,
    remove_stale_temp_files,
    update_keyring_file,
)
from soklet_core.keys import (
    KeyInUse,
    KeyringError,
    KeyringManager,
    KeyringSnapshot,
    KeyWrapper,
    ProtectionKey,
    ProtectionKeyring,
    printable_name,
)
from soklet_core.keys.fingerprint import CURRENT_FINGERPRINT_VERSION, FINGERPRINT_VERSIONS
from soklet_core.keys.key import key_id_problem
from soklet_core.mcp.server.ops._readiness import NotReady, Readiness

__all__ = [
    "DEFAULT_POLL_INTERVAL_SECONDS",
    "KeyringFileWatcher",
    "KeyringHolder",
    "LiveKeyring",
    "LiveKeyringError",
    "LiveKeyringRefusal",
    "announce_change",
]

#: How often the watcher compares the keyring file's signature (inode, size, times, digest) with the last one.
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


class KeyringHolder(Protocol):
    """What the admin API and the metrics read and change: a server's live keyring, however it is persisted
    (:class:`LiveKeyring` over a keyring file or memory; the store-backed keyring of a fleet). Changes block (file
    or store I/O): call them in a worker thread."""

    @property
    def manager(self) -> KeyringManager:
        """The live keyring manager the server seals and opens with."""
        ...

    def snapshot(self) -> KeyringSnapshot:
        """The secret-free snapshot in the configured fingerprint version."""
        ...

    def created(self, key_id: str) -> str | None:
        """When the key was created (RFC 3339 text), if recorded."""
        ...

    def retired(self, key_id: str) -> str | None:
        """When the key stopped sealing (RFC 3339 text), if recorded."""
        ...

    def stage(self, key: ProtectionKey, *, actor: str) -> KeyringSnapshot:
        """Stage a verification key (persisted first)."""
        ...

    def activate(self, key_id: str, *, actor: str) -> KeyringSnapshot:
        """Make a staged key the active one (persisted first)."""
        ...

    def remove(self, key_id: str, *, actor: str) -> KeyringSnapshot:
        """Remove a verification key (persisted first)."""
        ...

    def reload(self, *, actor: str) -> KeyringSnapshot:
        """Load what is persisted now."""
        ...


class LiveKeyring:
    """The live keyring of one server and its keyring file (``None``: memory only). Thread-safe.

    ``kek`` reads a keyring file holding wrapped keys (``soklet keys encrypt``) and wraps the keys a change adds to
    it; ``readiness`` is held back (:attr:`NotReady.KEYRING_FILE_REFUSED`) while the file on disk is refused.

    Changes are serialized on a lock of their own; change the manager through this object while it is attached,
    or a direct change may be overwritten by the next one made here.
    """

    __slots__ = (
        "_allow_insecure",
        "_created",
        "_file_refused",
        "_fingerprint_version",
        "_kek",
        "_lock",
        "_manager",
        "_observers",
        "_path",
        "_readiness",
        "_retired",
        "_signature",
    )

    def __init__(
        self,
        manager: KeyringManager,
        path: Path | None = None,
        *,
        document: KeyringDocument | None = None,
        allow_insecure_permissions: bool = False,
        fingerprint_version: int = CURRENT_FINGERPRINT_VERSION,
        readiness: Readiness | None = None,
        kek: KeyWrapper | None = None,
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
        self._retired: dict[str, str] = {}
        self._signature: FileSignature | None = None if path is None else file_signature(path)
        self._readiness = readiness
        self._file_refused = False
        # Unwraps a keyring file holding wrapped keys (and wraps what a change adds to it); in memory only.
        self._kek = kek
        if document is not None:
            self._remember(document)
        if path is not None:
            # A writer killed mid-write (kill -9) left a temporary copy of the keyring beside it, material of
            # keys since removed included.
            removed = remove_stale_temp_files(path.parent)
            if removed:
                _logger.info("removed %s left beside the keyring file by a killed writer", _temp_files(removed))

    @property
    def path(self) -> Path | None:
        """The keyring file, or ``None`` for a keyring that lives in memory only."""
        return self._path

    @property
    def manager(self) -> KeyringManager:
        """The live manager the server seals and opens with."""
        return self._manager

    @property
    def file_refused(self) -> bool:
        """True while the keyring file on disk is refused (the last reload, or a change, found it diverged,
        unreadable, invalid or insecure): the live keyring is the last one accepted."""
        return self._file_refused

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

    def retired(self, key_id: str) -> str | None:
        """When ``key_id`` stopped sealing, as the keyring file records it (ISO 8601), or ``None`` when unknown
        (the active key, a key never activated, a file that does not say, a keyring without a file)."""
        return self._retired.get(key_id)

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

        Refuses with ``LiveKeyringError`` (no file; file unreadable, invalid or insecure: ``keyring-file-refused``;
        an id the live keyring holds given other bytes: ``keyring-file-diverged``, logged as a WARNING naming the
        id) or ``KeyInUse`` (the file drops a key that still holds a sealing reservation). While the file is
        refused the instance is held not ready; a reload that succeeds (even of an unchanged file) clears it.
        """
        if self._path is None:
            raise LiveKeyringError(LiveKeyringRefusal.NO_KEYRING_FILE)
        with self._lock:
            # Taken before the read: a change landing after it is seen by the next poll, never missed.
            self._signature = file_signature(self._path)
            try:
                document = read_keyring_file(self._path, allow_insecure_permissions=self._allow_insecure, kek=self._kek)
            except KeyringFileError as error:
                self._refuse_file()
                raise LiveKeyringError(LiveKeyringRefusal.FILE_REFUSED, error.reason) from None
            on_disk = document.keyring()
            diverged = _diverged_ids(on_disk, self._manager.current())
            if diverged:
                self._refuse_file()
                shown = ", ".join(printable_name(key_id, what="a key id") for key_id in diverged)
                _logger.warning(
                    "keyring reload (%s) refused: the keyring file gives key id %s other bytes than the live "
                    "keyring holds (%s); the live keyring stays",
                    actor,
                    shown,
                    LiveKeyringRefusal.FILE_DIVERGED.value,
                )
                raise LiveKeyringError(LiveKeyringRefusal.FILE_DIVERGED)
            before = self._manager.generation
            try:
                snapshot = self._manager.replace_keyring(on_disk)
            except KeyInUse:
                self._refuse_file()
                raise
            self._remember(document)
            self._accept_file()
        if snapshot.generation != before:
            self._applied("reload", None, actor)
        else:
            _logger.info(
                "keyring reload (%s): the keyring file is unchanged (generation %d kept)", actor, snapshot.generation
            )
        return self.snapshot()

    def _apply(
        self,
        action: str,
        key_id: str,
        change: Callable[[ProtectionKeyring], ProtectionKeyring],
        actor: str,
    ) -> KeyringSnapshot:
        with self._lock:
            before = self._manager.generation
            try:
                adopted = self._apply_in_memory(change) if self._path is None else self._apply_to_file(change)
            except LiveKeyringError as error:
                if error.reason is LiveKeyringRefusal.FILE_DIVERGED:
                    # What is on disk now is refused, as a reload of it is. (A file that fails to read is the
                    # watcher's to judge: a failed write or a busy lock says nothing of what the file holds.)
                    self._refuse_file()
                _logger.warning(
                    "keyring %s of %s by %s refused: %s", action, _shown_id(key_id), actor, error.reason.value
                )
                raise
            except KeyringError as error:
                _logger.warning(
                    "keyring %s of %s by %s refused: %s", action, _shown_id(key_id), actor, error.reason.value
                )
                raise
            changed = self._manager.generation != before
        if adopted:
            _logger.warning(
                "keyring %s by %s: the keyring file had changed since this server last read it; that change is "
                "kept and live too",
                action,
                actor,
            )
        if changed:
            self._applied(action, key_id, actor)
        return self.snapshot()

    def _apply_in_memory(self, change: Callable[[ProtectionKeyring], ProtectionKeyring]) -> bool:
        current = self._manager.current()
        keyring = change(current)
        if keyring is not current:
            self._check_reservations(keyring)
            self._manager.replace_keyring(keyring)
        return False

    def _apply_to_file(self, change: Callable[[ProtectionKeyring], ProtectionKeyring]) -> bool:
        """Apply ``change`` to what the file holds, under its lock; return whether the file held a change the live
        keyring had not taken yet (it is live now)."""
        assert self._path is not None
        path = self._path
        live = self._manager.current()
        adopted: list[bool] = []

        def changed(document: KeyringDocument | None) -> KeyringDocument:
            if document is None:
                raise LiveKeyringError(LiveKeyringRefusal.FILE_REFUSED, KeyringFileErrorReason.NOT_FOUND)
            on_disk = document.keyring()
            if _diverged(on_disk, live):
                # The file holds one of these ids with other bytes (edited, not reloaded): never split them.
                raise LiveKeyringError(LiveKeyringRefusal.FILE_DIVERGED)
            adopted.append(on_disk != live)
            keyring = change(on_disk)
            if keyring is on_disk:
                return document
            self._check_reservations(keyring)
            return document.with_keyring(keyring)

        def commit(update: KeyringUpdate) -> None:
            # Still under the file's lock: the live keyring and the signature are the file as written.
            self._manager.replace_keyring(update.after.keyring())
            self._remember(update.after)
            self._signature = file_signature(path)
            self._accept_file()

        try:
            update_keyring_file(
                path, changed, allow_insecure_permissions=self._allow_insecure, commit=commit, kek=self._kek
            )
        except KeyringFileError as error:
            raise LiveKeyringError(LiveKeyringRefusal.FILE_REFUSED, error.reason) from None
        return bool(adopted) and adopted[-1]

    def _refuse_file(self) -> None:
        self._file_refused = True
        if self._readiness is not None:
            self._readiness.set(NotReady.KEYRING_FILE_REFUSED)

    def _accept_file(self) -> None:
        self._file_refused = False
        if self._readiness is not None:
            self._readiness.clear(NotReady.KEYRING_FILE_REFUSED)

    def _check_reservations(self, keyring: ProtectionKeyring) -> None:
        for reserved_id in sorted(self._manager.outstanding_reservations()):
            if keyring.key(reserved_id) is None:
                raise KeyInUse(reserved_id)

    def _remember(self, document: KeyringDocument) -> None:
        self._created = {entry.key.id: entry.created.isoformat() for entry in document.entries}
        self._retired = {
            entry.key.id: entry.retired.isoformat() for entry in document.entries if entry.retired is not None
        }

    def _applied(self, action: str, key_id: str | None, actor: str) -> None:
        announce_change(self.snapshot(), action=action, key_id=key_id, actor=actor, observers=self._observers)

    def file_changed(self) -> bool:
        """Whether the keyring file's signature (inode, size, times, content digest) differs from the one taken
        before its last read or under the lock of its last write."""
        return self._path is not None and file_signature(self._path) != self._signature


def announce_change(
    snapshot: KeyringSnapshot,
    *,
    action: str,
    key_id: str | None,
    actor: str,
    observers: Iterable[Callable[[KeyringSnapshot], None]],
) -> None:
    """Tell of an applied keyring change, whatever holds the keyring: one ``soklet.admin.audit`` line (who, what,
    key id, generation, fingerprint; never material), then every observer (metrics), none of which may undo or
    fail the change."""
    fingerprint = snapshot.fingerprint
    shown = "-" if key_id is None else _shown_id(key_id)
    fields = {
        "event": "keyring-change",
        "actor": actor,
        "action": action,
        "key_id": None if key_id is None else shown,
        "generation": snapshot.generation,
        "fingerprint": f"v{fingerprint.version}:{fingerprint.value}",
    }
    _audit.info(
        "actor=%s action=%s key=%s generation=%d fingerprint=v%d:%s",
        actor,
        action,
        shown,
        snapshot.generation,
        fingerprint.version,
        fingerprint.value,
        extra={"soklet": fields},
    )
    for observer in observers:
        try:
            observer(snapshot)
        except Exception as error:  # an observer (metrics) must never undo or fail an applied change
            _logger.error("keyring observer failed: %s", type(error).__name__)


def _shown_id(key_id: str) -> str:
    # A refused change may name an id that breaks the key-id rule: that is the client's text, never logged.
    if key_id_problem(key_id) is not None:
        return "<not a key id>"
    return printable_name(key_id, what="a key id")


def _diverged(on_disk: ProtectionKeyring, live: ProtectionKeyring) -> bool:
    """Whether an id both hold names other material in each (compared in constant time)."""
    return bool(_diverged_ids(on_disk, live))


def _diverged_ids(on_disk: ProtectionKeyring, live: ProtectionKeyring) -> tuple[str, ...]:
    """The ids both hold with other material in each (every key compared, each in constant time)."""
    diverged: list[str] = []
    for key in on_disk.keys:
        mine = live.key(key.id)
        if mine is not None and not mine.same_material(key):
            diverged.append(key.id)
    return tuple(diverged)


def _temp_files(count: int) -> str:
    return "1 temporary file" if count == 1 else f"{count} temporary files"


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
            if error.reason is LiveKeyringRefusal.FILE_DIVERGED:
                return  # already logged by the reload, naming the id
            _logger.warning("keyring reload (%s) refused: %s; the running keyring stays", actor, error)
        except KeyringError as error:
            _logger.warning("keyring reload (%s) refused: %s; the running keyring stays", actor, error.reason.value)
        except Exception as error:  # the watcher must outlive any surprise; the keyring stays as it was
            _logger.error("keyring reload (%s) failed: %s; the running keyring stays", actor, type(error).__name__)
