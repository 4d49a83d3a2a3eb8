"""The keyring file's content as values: a profile and keys with role, creation time and material source.

A document is what a keyring file says; :meth:`KeyringDocument.keyring` turns it into the
``ProtectionKeyring`` that seals and opens. Changes go the other way: apply a keyring change (``with_staged``,
``with_activated``, ...) and fold the result back with :meth:`KeyringDocument.with_keyring`, which keeps each
surviving key's creation time and material source (a key read from ``material_file`` is written back as that
reference, never inlined).

A key read from ``wrapped_material`` is held unwrapped in memory, beside its :class:`WrappedMaterial` (the KEK id
and ciphertext written back unchanged). :meth:`KeyringDocument.wrapped` wraps every inline key under a KEK (what
``soklet keys encrypt`` and every later change of an encrypted file do), :meth:`KeyringDocument.unwrapped` the
reverse; keys read from ``material_file`` or ``material_env`` stay references either way (their material is not in
the file).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from soklet_core.keys import (
    PROTECTION_PROFILE,
    KeyWrapper,
    ProtectionKey,
    ProtectionKeyring,
    RetiredTooRecently,
    WrappedKey,
)

__all__ = [
    "InlineMaterial",
    "KeyEntry",
    "KeyRole",
    "KeyringDocument",
    "MaterialEnv",
    "MaterialFile",
    "MaterialSource",
    "WrappedMaterial",
    "check_removal",
    "utc_now",
]


class KeyRole(enum.Enum):
    """A key's role in the file: the one active key, or a verification-only key."""

    ACTIVE = "active"
    VERIFICATION = "verification"


@dataclass(frozen=True, slots=True)
class InlineMaterial:
    """The material is written in the file itself (``material = "..."``)."""

    @property
    def kind(self) -> str:
        """``inline``."""
        return "inline"


@dataclass(frozen=True, slots=True)
class MaterialFile:
    """The material is read from another file (``material_file = PATH``), relative to the keyring's folder."""

    path: str

    @property
    def kind(self) -> str:
        """``file``."""
        return "file"


@dataclass(frozen=True, slots=True)
class MaterialEnv:
    """The material is read from an environment variable (``material_env = NAME``)."""

    name: str

    @property
    def kind(self) -> str:
        """``env``."""
        return "env"


@dataclass(frozen=True, slots=True)
class WrappedMaterial:
    """The material is written in the file wrapped under a key-encryption key (``wrapped_material = "..."`` and
    ``kek = "<KEK id>"``): what ``soklet keys encrypt`` writes. Reading it takes that KEK."""

    kek_id: str
    ciphertext: bytes

    @classmethod
    def of(cls, wrapped: WrappedKey) -> WrappedMaterial:
        """The source that keeps ``wrapped``."""
        return cls(kek_id=wrapped.kek_id, ciphertext=wrapped.ciphertext)

    def wrapped_key(self, key_id: str) -> WrappedKey:
        """This material as the wrapped key ``key_id`` (validated: KEK id and ciphertext length)."""
        return WrappedKey(key_id=key_id, kek_id=self.kek_id, ciphertext=self.ciphertext)

    @property
    def kind(self) -> str:
        """``wrapped``."""
        return "wrapped"

    def __repr__(self) -> str:
        return f"WrappedMaterial(kek_id={self.kek_id!r}, ciphertext=<{len(self.ciphertext)} bytes>)"


#: Where a key's material comes from. The first three hold base64url text without padding; the last, the key
#: wrapped under a KEK.
MaterialSource = InlineMaterial | MaterialFile | MaterialEnv | WrappedMaterial


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """One ``[[keys]]`` table: the key, its role, when it was created, where its material lives, and, for a
    verification key that was active, when it stopped sealing (``retired``; ``None`` when the file does not
    say: a key staged and never activated, or one retired by a soklet that did not record it)."""

    key: ProtectionKey
    role: KeyRole
    created: datetime
    source: MaterialSource = InlineMaterial()
    retired: datetime | None = None

    def __post_init__(self) -> None:
        if self.retired is not None and self.role is KeyRole.ACTIVE:
            raise ValueError("the active key has no retired time")

    def __repr__(self) -> str:
        return f"KeyEntry(id={self.key.id!r}, role={self.role.value}, source={self.source.kind})"


def utc_now() -> datetime:
    """The current time in UTC, to the second: the precision of ``created`` in the file."""
    return datetime.now(UTC).replace(microsecond=0)


@dataclass(frozen=True, slots=True)
class KeyringDocument:
    """A whole keyring file: the profile and the key entries in file order.

    A document built by this package always holds a valid keyring (one active key, unique ids); the parser
    and :meth:`with_keyring` guarantee it.
    """

    entries: tuple[KeyEntry, ...]
    profile: str = PROTECTION_PROFILE

    @classmethod
    def new(cls, active: ProtectionKey, *, created: datetime | None = None) -> KeyringDocument:
        """A document holding one key, ``active``, with inline material."""
        return cls((KeyEntry(active, KeyRole.ACTIVE, created or utc_now()),))

    def keyring(self) -> ProtectionKeyring:
        """The keyring this document describes."""
        active = next(entry.key for entry in self.entries if entry.role is KeyRole.ACTIVE)
        others = tuple(entry.key for entry in self.entries if entry.role is KeyRole.VERIFICATION)
        return ProtectionKeyring(active, others)

    def entry(self, key_id: str) -> KeyEntry | None:
        """The entry of key ``key_id``, or ``None``."""
        return next((entry for entry in self.entries if entry.key.id == key_id), None)

    @property
    def active_entry(self) -> KeyEntry:
        """The entry of the active key."""
        return next(entry for entry in self.entries if entry.role is KeyRole.ACTIVE)

    @property
    def is_wrapped(self) -> bool:
        """Whether any key's material is wrapped under a KEK (the file is encrypted)."""
        return any(isinstance(entry.source, WrappedMaterial) for entry in self.entries)

    def wrapped(self, kek: KeyWrapper, *, added_since: KeyringDocument | None = None) -> KeyringDocument:
        """This document with every inline key wrapped under ``kek``, and every key wrapped under another KEK
        wrapped again under ``kek``; keys wrapped under ``kek`` already keep their ciphertext, and keys read from
        ``material_file`` or ``material_env`` stay references. With ``added_since``, only the keys that document
        does not hold (by id and material) are touched: what a change added. Returns ``self`` when nothing
        changes.

        Raises ``KeyWrapError`` when ``kek`` cannot wrap (an external KEK that is unavailable)."""
        changed = False
        entries: list[KeyEntry] = []
        for entry in self.entries:
            source = entry.source
            earlier = None if added_since is None else added_since.entry(entry.key.id)
            kept = earlier is not None and earlier.key.same_material(entry.key)
            if not kept and (
                isinstance(source, InlineMaterial)
                or (isinstance(source, WrappedMaterial) and source.kek_id != kek.kek_id)
            ):
                entry = replace(entry, source=WrappedMaterial.of(kek.wrap(entry.key, self.profile)))
                changed = True
            entries.append(entry)
        return KeyringDocument(tuple(entries), self.profile) if changed else self

    def unwrapped(self) -> KeyringDocument:
        """This document with every wrapped key written inline again (``soklet keys encrypt --decrypt``).
        Returns ``self`` when no key is wrapped."""
        if not self.is_wrapped:
            return self
        entries = tuple(
            replace(entry, source=InlineMaterial()) if isinstance(entry.source, WrappedMaterial) else entry
            for entry in self.entries
        )
        return KeyringDocument(entries, self.profile)

    def with_keyring(self, keyring: ProtectionKeyring, *, now: datetime | None = None) -> KeyringDocument:
        """This document changed to hold exactly ``keyring``'s keys and roles.

        Keys that stay keep their position, creation time and material source; keys that leave are dropped;
        new keys (an id already here with other material included) are appended with inline material, created
        ``now``. A key demoted from active is recorded as retired ``now`` (what ``check_removal`` waits on); a
        key made active loses its retired time. Returns ``self`` when nothing changes.
        """
        stamp = now or utc_now()
        kept: list[KeyEntry] = []
        for entry in self.entries:
            key = keyring.key(entry.key.id)
            if key is None or not key.same_material(entry.key):
                # Gone, or the same id with other material: that is another key, appended below as new.
                continue
            role = KeyRole.ACTIVE if keyring.is_active(key.id) else KeyRole.VERIFICATION
            if role is entry.role:
                kept.append(entry)
            elif role is KeyRole.VERIFICATION:
                kept.append(replace(entry, role=role, retired=stamp))
            else:
                kept.append(replace(entry, role=role, retired=None))
        present = {entry.key.id for entry in kept}
        for key in keyring.keys:
            if key.id not in present:
                role = KeyRole.ACTIVE if keyring.is_active(key.id) else KeyRole.VERIFICATION
                kept.append(KeyEntry(key, role, stamp))
        if tuple(kept) == self.entries:
            return self
        return KeyringDocument(tuple(kept), self.profile)


def check_removal(
    document: KeyringDocument, key_id: str, *, lifetime: timedelta, written: datetime, now: datetime | None = None
) -> None:
    """Refuse (``RetiredTooRecently``) to remove verification key ``key_id`` before ``lifetime`` (the maximum
    request-state lifetime) has passed since it stopped sealing: state it sealed would stop opening.

    The time it stopped sealing is its ``retired`` time. A key without one (staged and never activated, or
    retired by a soklet that did not record it) is taken, conservatively, to have stopped sealing at ``written``,
    the keyring file's last change: whatever demoted it was a change of the file, so it cannot be later than
    that. The active key and unknown ids pass: the keyring's own rules refuse those.
    """
    entry = document.entry(key_id)
    if entry is None or entry.role is KeyRole.ACTIVE:
        return
    since = entry.retired if entry.retired is not None else written
    removable_at = since + lifetime
    if (now or datetime.now(UTC)) < removable_at:
        raise RetiredTooRecently(key_id, removable_at, recorded=entry.retired is not None)
