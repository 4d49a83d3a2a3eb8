"""``KeyringManager``: the live, thread-safe keyring of one server, changed copy-on-write.

Readers call :meth:`KeyringManager.current` and get an immutable keyring; a change builds a new keyring and
swaps one reference, so a seal or an open never sees half a change. Writers serialize on a lock. Sealing code
holds a reservation (:meth:`KeyringManager.reserve_active_key`) for as long as it uses the active key, and a
reserved key cannot be removed, so state sealed during a rotation always has a key that opens it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType

from .errors import KeyInUse
from .fingerprint import CURRENT_FINGERPRINT_VERSION
from .key import ProtectionKey
from .keyring import ProtectionKeyring
from .snapshot import KeyringSnapshot, KeyUse

__all__ = ["KeyringManager", "SealingReservation"]


@dataclass(frozen=True, slots=True)
class _State:
    # Keyring and generation travel together so a snapshot never pairs one with the other's neighbour.
    keyring: ProtectionKeyring
    generation: int


class KeyringManager:
    """The live keyring of one server.

    Every change returns the snapshot after it. A change that alters nothing (an identical re-stage,
    activating the active key, repeating a rotation) keeps the generation; every real change adds one.
    Refusals raise ``KeyringError`` (``KeyInUse`` for a reserved key) and leave the keyring as it was.
    """

    __slots__ = ("_last_opened", "_last_sealed", "_lock", "_reservations", "_state")

    def __init__(self, keyring: ProtectionKeyring) -> None:
        if not isinstance(keyring, ProtectionKeyring):
            raise TypeError("KeyringManager needs a ProtectionKeyring")
        self._lock = threading.Lock()
        self._state = _State(keyring, 0)
        self._reservations: Counter[str] = Counter()
        # Key id → epoch ms of the last seal / open. Written without the lock: one dict store per seal or open,
        # and a reader that sees the previous value a moment longer loses nothing.
        self._last_sealed: dict[str, int] = {}
        self._last_opened: dict[str, int] = {}

    def current(self) -> ProtectionKeyring:
        """The keyring now: immutable, so it stays consistent however long the caller holds it."""
        return self._state.keyring

    @property
    def generation(self) -> int:
        """How many real changes the keyring has seen since this manager was built."""
        return self._state.generation

    def snapshot(self, *, fingerprint_version: int = CURRENT_FINGERPRINT_VERSION) -> KeyringSnapshot:
        """A secret-free snapshot of the current keyring, its generation, and each key's last use.

        ``fingerprint_version`` 1 reports the legacy fingerprint (what an older build publishes).
        """
        with self._lock:
            state = self._state
            reservations = dict(self._reservations)
        return KeyringSnapshot.of(
            state.keyring,
            state.generation,
            fingerprint_version=fingerprint_version,
            key_use=tuple(
                KeyUse(
                    key.id,
                    self._last_sealed.get(key.id),
                    self._last_opened.get(key.id),
                    max(reservations.get(key.id, 0), 0),
                )
                for key in state.keyring.keys
            ),
        )

    def note_sealed(self, key_id: str) -> None:
        """Record that ``key_id`` sealed state now (called by the protector after each seal)."""
        self._last_sealed[key_id] = time.time_ns() // 1_000_000

    def note_opened(self, key_id: str) -> None:
        """Record that ``key_id`` opened state now (called by the protector after each successful open)."""
        self._last_opened[key_id] = time.time_ns() // 1_000_000

    def replace_keyring(self, keyring: ProtectionKeyring) -> KeyringSnapshot:
        """Replace the whole keyring (a reload from a file): same reservation rule as a removal.

        A key that holds a sealing reservation must stay (``KeyInUse``, nothing changes); a keyring equal to the
        current one (same ids, roles and bytes) is a no-op that keeps the generation.
        """
        if not isinstance(keyring, ProtectionKeyring):
            raise TypeError("replace_keyring needs a ProtectionKeyring")

        def replace(current: ProtectionKeyring) -> ProtectionKeyring:
            for key_id in sorted(self._reservations):
                if self._reservations[key_id] > 0 and keyring.key(key_id) is None:
                    raise KeyInUse(key_id)
            return current if keyring == current else keyring

        return self._change(replace)

    def stage_verification_key(self, key: ProtectionKey) -> KeyringSnapshot:
        """Add ``key`` for verification. Identical re-stage: no-op. Same id, other bytes: refused."""
        return self._change(lambda keyring: keyring.with_staged(key))

    def activate_staged_key(self, key_id: str) -> KeyringSnapshot:
        """Make ``key_id`` (already staged) the active key; the former active key stays for verification."""
        return self._change(lambda keyring: keyring.with_activated(key_id))

    def remove_verification_key(self, key_id: str) -> KeyringSnapshot:
        """Remove verification key ``key_id``; refused for the active key, unknown ids and reserved keys."""

        def remove(keyring: ProtectionKeyring) -> ProtectionKeyring:
            changed = keyring.without(key_id)
            if self._reservations[key_id] > 0:
                raise KeyInUse(key_id)
            return changed

        return self._change(remove)

    def rotate_active_key(self, key: ProtectionKey) -> KeyringSnapshot:
        """Stage ``key`` and activate it in one change; repeating it with the same key is a no-op."""
        return self._change(lambda keyring: keyring.with_rotated(key))

    def reserve_active_key(self) -> SealingReservation:
        """A context manager that yields the active key and keeps it from being removed until exit.

        >>> with manager.reserve_active_key() as key:   # doctest: +SKIP
        ...     token = seal(key, state)
        """
        return SealingReservation(self)

    def outstanding_reservations(self) -> Mapping[str, int]:
        """Key id → number of sealing reservations currently held on it (ids with none are left out)."""
        with self._lock:
            return {key_id: count for key_id, count in self._reservations.items() if count > 0}

    def _change(self, change: Callable[[ProtectionKeyring], ProtectionKeyring]) -> KeyringSnapshot:
        with self._lock:
            state = self._state
            keyring = change(state.keyring)
            if keyring is not state.keyring:
                state = _State(keyring, state.generation + 1)
                self._state = state
                # Forget the last use of keys that left, so the tables stay as small as the keyring.
                for table in (self._last_sealed, self._last_opened):
                    for key_id in [key_id for key_id in list(table) if key_id not in keyring]:
                        table.pop(key_id, None)
            return KeyringSnapshot.of(state.keyring, state.generation)

    def _acquire(self) -> ProtectionKey:
        with self._lock:
            key = self._state.keyring.active_key
            self._reservations[key.id] += 1
            return key

    def _release(self, key_id: str) -> None:
        with self._lock:
            self._reservations[key_id] -= 1
            if self._reservations[key_id] <= 0:
                del self._reservations[key_id]


class SealingReservation:
    """A hold on the active key for one seal: ``with manager.reserve_active_key() as key: ...``.

    Entering takes the active key at that moment and counts a reservation on its id; leaving releases it,
    whatever happened inside. The key handed out is the one to seal with, even if a rotation activates another
    key meanwhile. A reservation is entered once.
    """

    __slots__ = ("_key", "_manager", "_state")

    def __init__(self, manager: KeyringManager) -> None:
        self._manager = manager
        self._key: ProtectionKey | None = None
        self._state = "new"

    @property
    def key(self) -> ProtectionKey:
        """The reserved key (only while entered)."""
        if self._key is None or self._state != "held":
            raise RuntimeError("the reservation is not held")
        return self._key

    def __enter__(self) -> ProtectionKey:
        if self._state != "new":
            raise RuntimeError("a sealing reservation can be entered only once")
        self._key = self._manager._acquire()
        self._state = "held"
        return self._key

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._state == "held" and self._key is not None:
            self._state = "released"
            self._manager._release(self._key.id)
