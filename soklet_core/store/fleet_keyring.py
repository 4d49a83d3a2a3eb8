"""A fleet's keyring kept in a store: the one policy the server (store mode) and the CLI (``--store``) share.

The store holds wrapped keys (:class:`~soklet_core.store.keyring_records.StoredKeyring`); a :class:`FleetKeyring`
holds the key-encryption key (a :class:`~soklet_core.keys.KeyWrapper`) and turns them into a
:class:`LoadedFleetKeyring`: the generation, the :class:`~soklet_core.keys.ProtectionKeyring` unwrapped in memory
only, and each key's creation and retirement times.

Every change is read → change → write: the keyring is read and unwrapped (so a wrong KEK is refused before
anything is written), changed by the keyring's own rules (``ProtectionKeyring.with_staged`` and its siblings: an
identical re-stage is a no-op, the same id with other material is refused ``conflicting-material``), its times
folded as a keyring file's are (``KeyringDocument.with_keyring``: a demoted key is retired now), only the new key
wrapped, and the result written with a compare-and-swap on the generation it was read at. A lost compare-and-swap
(another writer came first) starts again, at most :data:`MAX_KEYRING_WRITE_ATTEMPTS` times. Removal waits as a
file's does (``check_removal``). Unwrapping and wrapping may block (a command KEK): they run on a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, NoReturn

from soklet_core.files.document import KeyEntry, KeyringDocument, KeyRole, check_removal
from soklet_core.keys import (
    PROTECTION_PROFILE,
    KeyWrapError,
    KeyWrapErrorReason,
    KeyWrapper,
    ProtectionKey,
    ProtectionKeyring,
    WrappedKey,
)

from .errors import StoreError, StoreErrorReason
from .keyring_records import StoredKey, StoredKeyring, StoredKeyRole
from .records import from_millis, to_millis
from .repository import KeyringRepository

__all__ = ["MAX_KEYRING_WRITE_ATTEMPTS", "FleetKeyring", "LoadedFleetKeyring"]

#: How many times one change is read, made and written again after another writer changed the keyring first.
MAX_KEYRING_WRITE_ATTEMPTS: Final = 5


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LoadedFleetKeyring:
    """A fleet keyring as read from the store and unwrapped: its generation, the keyring (material in memory
    only), each key's times (as a keyring :class:`~soklet_core.files.document.KeyringDocument`: ``created`` and, for
    a key that stopped sealing, ``retired``) and the stored rows it came from (check values, KEK ids)."""

    generation: int
    keyring: ProtectionKeyring
    document: KeyringDocument
    stored: StoredKeyring

    @property
    def changed_at(self) -> datetime:
        """When the keyring last changed (the write of this generation, a KEK rewrap aside)."""
        return self.stored.changed_at

    @property
    def created(self) -> Mapping[str, datetime]:
        """Each key's creation time, by id."""
        return {entry.key.id: entry.created for entry in self.document.entries}

    @property
    def retired(self) -> Mapping[str, datetime | None]:
        """Each key's retirement time (when it stopped sealing), by id; ``None`` for the active key and a key
        that never sealed."""
        return {entry.key.id: entry.retired for entry in self.document.entries}

    def __repr__(self) -> str:
        return f"LoadedFleetKeyring(generation={self.generation}, keyring={self.keyring!r})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("LoadedFleetKeyring cannot be pickled: it holds key material")


def _now() -> datetime:
    """Now, to the millisecond (what a store keeps)."""
    return from_millis(to_millis(datetime.now(UTC)))


def _no_keyring() -> StoreError:
    return StoreError(StoreErrorReason.NO_KEYRING)


class FleetKeyring:
    """The keyring of a fleet in ``store``, unwrapped and wrapped with ``wrapper``, of one profile."""

    __slots__ = ("_profile", "_store", "_wrapper")

    def __init__(self, store: KeyringRepository, wrapper: KeyWrapper, profile: str = PROTECTION_PROFILE) -> None:
        self._store = store
        self._wrapper = wrapper
        self._profile = profile

    def __repr__(self) -> str:
        return f"FleetKeyring(kek_id={self._wrapper.kek_id!r}, profile={self._profile!r})"

    @property
    def store(self) -> KeyringRepository:
        """The store holding the keyring."""
        return self._store

    @property
    def wrapper(self) -> KeyWrapper:
        """The key-encryption key."""
        return self._wrapper

    @property
    def profile(self) -> str:
        """The protection profile every key is bound to."""
        return self._profile

    # -- reading ------------------------------------------------------------------------------------------------

    async def load(self, known: LoadedFleetKeyring | None = None) -> LoadedFleetKeyring | None:
        """The keyring of the latest generation, unwrapped; ``None`` when the store holds none yet.

        With ``known`` (a generation already loaded), a newer generation that only re-wrapped the same keys (a KEK
        rewrap: every id, role, time and check value as in ``known``) is ``known``'s keyring at the new generation,
        unwrapped not at all: a member still holding the former KEK follows a rewrap and stays ready (it needs the
        new KEK for the next key the fleet adds, so it is restarted with it).

        ``KeyWrapError(WRONG_KEK)`` (naming the key) when a key was wrapped under another KEK, ``UNWRAP_FAILED``
        when one does not authenticate or its check value differs from the stored one; ``StoreError`` otherwise.
        """
        stored = await self._store.read_keyring()
        if stored is None:
            return None
        if known is not None and _same_keys(stored, known.stored):
            return LoadedFleetKeyring(
                generation=stored.generation, keyring=known.keyring, document=known.document, stored=stored
            )
        return await self._unwrapped(stored)

    async def _unwrapped(self, stored: StoredKeyring) -> LoadedFleetKeyring:
        if stored.profile != self._profile:
            raise StoreError(StoreErrorReason.SCHEMA, "the fleet keyring in the store is of another profile")
        return await asyncio.to_thread(self._unwrap_all, stored, self._wrapper)

    def _unwrap_all(self, stored: StoredKeyring, wrapper: KeyWrapper) -> LoadedFleetKeyring:
        """Every key unwrapped (on a worker thread: a command KEK blocks)."""
        entries: list[KeyEntry] = []
        for row in stored.keys:
            key = wrapper.unwrap(row.wrapped, self._profile)
            if key.check_value_text != row.check_value:
                raise KeyWrapError(KeyWrapErrorReason.UNWRAP_FAILED, row.key_id)
            role = KeyRole.ACTIVE if row.role is StoredKeyRole.ACTIVE else KeyRole.VERIFICATION
            entries.append(KeyEntry(key, role, row.created_at, retired=row.retired_at))
        document = KeyringDocument(tuple(entries), self._profile)
        return LoadedFleetKeyring(
            generation=stored.generation, keyring=document.keyring(), document=document, stored=stored
        )

    # -- changes ------------------------------------------------------------------------------------------------

    async def initialize(self, keyring: ProtectionKeyring | KeyringDocument) -> LoadedFleetKeyring:
        """Write the fleet's first keyring (generation 1): a keyring (every key created now) or a keyring file's
        document (its times kept). ``StoreError(CONFLICT)`` when the store holds one already (nothing written)."""
        stamp = _now()
        if isinstance(keyring, KeyringDocument):
            if keyring.profile != self._profile:
                raise StoreError(StoreErrorReason.INVALID_ARGUMENT, "the keyring is of another profile")
            document = keyring
        else:
            document = KeyringDocument((), self._profile).with_keyring(keyring, now=stamp)
        stored = await asyncio.to_thread(self._stored, document, {}, 0, stamp)
        written = await self._store.write_keyring(stored, expected_generation=0)
        if written is None:
            raise StoreError(StoreErrorReason.CONFLICT, "initialize: the store holds a fleet keyring already")
        return LoadedFleetKeyring(
            generation=written.generation, keyring=document.keyring(), document=document, stored=written
        )

    async def stage(self, key: ProtectionKey) -> LoadedFleetKeyring:
        """Add ``key`` for verification; staging it again is a no-op, its id with other material is refused."""
        return await self._change(lambda loaded: loaded.keyring.with_staged(key))

    async def activate(self, key_id: str) -> LoadedFleetKeyring:
        """Make ``key_id`` the active key; the former active key is kept for verification, retired now."""
        return await self._change(lambda loaded: loaded.keyring.with_activated(key_id))

    async def rotate(self, key: ProtectionKey) -> LoadedFleetKeyring:
        """Stage ``key`` and activate it in one generation; repeating it with the same key is a no-op."""
        return await self._change(lambda loaded: loaded.keyring.with_rotated(key))

    async def remove(self, key_id: str, *, max_state_lifetime: timedelta, force: bool = False) -> LoadedFleetKeyring:
        """Remove the verification key ``key_id``: refused (``RetiredTooRecently``) until ``max_state_lifetime``
        passed since it stopped sealing, unless ``force``; the active key and unknown ids are refused."""

        def change(loaded: LoadedFleetKeyring) -> ProtectionKeyring:
            if not force:
                check_removal(
                    loaded.document, key_id, lifetime=max_state_lifetime, written=loaded.changed_at, now=_now()
                )
            return loaded.keyring.without(key_id)

        return await self._change(change)

    async def rewrap(self, new_wrapper: KeyWrapper) -> LoadedFleetKeyring:
        """Wrap every key under ``new_wrapper`` in one generation: no data key, check value, role, time or
        fingerprint changes. Every key is unwrapped under this KEK first (a wrong one is refused before anything
        is written) and the new wrapping is unwrapped again before it is written. Use a new
        :class:`FleetKeyring` with ``new_wrapper`` afterwards."""
        for _ in range(MAX_KEYRING_WRITE_ATTEMPTS):
            stored = await self._store.read_keyring()
            if stored is None:
                raise _no_keyring()
            loaded = await self._unwrapped(stored)
            rewrapped = await asyncio.to_thread(self._rewrapped, loaded, new_wrapper)
            written = await self._store.write_keyring(rewrapped, expected_generation=stored.generation)
            if written is not None:
                return LoadedFleetKeyring(
                    generation=written.generation, keyring=loaded.keyring, document=loaded.document, stored=written
                )
        raise _lost()

    def _rewrapped(self, loaded: LoadedFleetKeyring, new_wrapper: KeyWrapper) -> StoredKeyring:
        rows: list[StoredKey] = []
        for row in loaded.stored.keys:
            key = loaded.keyring.key(row.key_id)
            assert key is not None  # the keyring was unwrapped from these rows
            wrapped = new_wrapper.wrap(key, self._profile)
            if not new_wrapper.unwrap(wrapped, self._profile).same_material(key):
                raise KeyWrapError(KeyWrapErrorReason.UNWRAP_FAILED, key.id)
            rows.append(
                StoredKey(
                    wrapped=wrapped,
                    role=row.role,
                    created_at=row.created_at,
                    retired_at=row.retired_at,
                    check_value=row.check_value,
                )
            )
        # The keyring's roles and times are unchanged: so is its changed_at (what a removal waits from).
        return StoredKeyring(generation=0, profile=self._profile, keys=tuple(rows), changed_at=loaded.changed_at)

    async def _change(self, apply: Callable[[LoadedFleetKeyring], ProtectionKeyring]) -> LoadedFleetKeyring:
        """Read, apply the keyring rule, write what changed under compare-and-swap; again on a lost race."""
        for _ in range(MAX_KEYRING_WRITE_ATTEMPTS):
            stored = await self._store.read_keyring()
            if stored is None:
                raise _no_keyring()
            loaded = await self._unwrapped(stored)
            keyring = apply(loaded)
            stamp = _now()
            document = loaded.document.with_keyring(keyring, now=stamp)
            if document is loaded.document:
                return loaded  # a no-op: nothing written, no generation spent
            previous = {row.key_id: row for row in stored.keys}
            kept = {key_id: row for key_id, row in previous.items() if _same(loaded.keyring.key(key_id), keyring)}
            rows = await asyncio.to_thread(self._stored, document, kept, stored.generation, stamp)
            written = await self._store.write_keyring(rows, expected_generation=stored.generation)
            if written is not None:
                return LoadedFleetKeyring(
                    generation=written.generation, keyring=document.keyring(), document=document, stored=written
                )
        raise _lost()

    def _stored(
        self, document: KeyringDocument, kept: Mapping[str, StoredKey], generation: int, stamp: datetime
    ) -> StoredKeyring:
        """The rows of ``document``: a key in ``kept`` keeps its wrapping, every other key is wrapped now (on a
        worker thread)."""
        rows: list[StoredKey] = []
        for entry in document.entries:
            previous = kept.get(entry.key.id)
            wrapped: WrappedKey = (
                previous.wrapped if previous is not None else self._wrapper.wrap(entry.key, self._profile)
            )
            rows.append(
                StoredKey(
                    wrapped=wrapped,
                    role=StoredKeyRole.ACTIVE if entry.role is KeyRole.ACTIVE else StoredKeyRole.VERIFICATION,
                    created_at=entry.created,
                    retired_at=entry.retired,
                    check_value=entry.key.check_value_text,
                )
            )
        return StoredKeyring(generation=generation, profile=self._profile, keys=tuple(rows), changed_at=stamp)


def _same_keys(stored: StoredKeyring, known: StoredKeyring) -> bool:
    """Whether ``stored`` holds the keys of ``known`` (ids, roles, times, check values), whatever their wrapping."""

    def facts(keyring: StoredKeyring) -> tuple[object, ...]:
        keys = [(key.key_id, key.role, key.created_at, key.retired_at, key.check_value) for key in keyring.keys]
        return keyring.profile, keyring.changed_at, keys

    return facts(stored) == facts(known)


def _same(key: ProtectionKey | None, keyring: ProtectionKeyring) -> bool:
    """Whether ``key`` is in ``keyring`` with the same material (so its stored wrapping still holds it)."""
    if key is None:
        return False
    now = keyring.key(key.id)
    return now is not None and now.same_material(key)


def _lost() -> StoreError:
    return StoreError(
        StoreErrorReason.CONFLICT,
        f"the fleet keyring changed under this change {MAX_KEYRING_WRITE_ATTEMPTS} times in a row; try again",
    )
