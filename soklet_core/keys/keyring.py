"""``ProtectionKeyring``: one active key and any number of verification-only keys, immutable.

Changes never mutate a keyring: ``with_staged``, ``with_activated``, ``without`` and ``with_rotated`` return a
new keyring (or the same one when the change is a no-op), so whoever holds a keyring holds one consistent
state.
The live manager and the keyring-file commands both apply their changes through these four, so the rules live
here once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NoReturn

from .errors import KeyringError, KeyringErrorReason
from .fingerprint import Fingerprint
from .key import ProtectionKey, is_valid_key_id

__all__ = ["ProtectionKeyring", "ProtectionKeyringBuilder"]


class ProtectionKeyring:
    """An immutable keyring: exactly one active key (seals and opens) and verification keys (open only).

    Build one with ``ProtectionKeyring.with_active_key(key).verification_key(k2).build()``; ids are unique.
    Equality compares every id and (in constant time) every key's material and role.
    """

    __slots__ = ("_active", "_by_id", "_verification")

    _active: ProtectionKey
    _verification: tuple[ProtectionKey, ...]
    _by_id: dict[str, ProtectionKey]

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("use ProtectionKeyring.with_active_key(key)...build()")

    @classmethod
    def _create(cls, active: ProtectionKey, verification: Iterable[ProtectionKey]) -> ProtectionKeyring:
        ordered = tuple(sorted(verification, key=lambda key: key.id))
        by_id: dict[str, ProtectionKey] = {active.id: active}
        for key in ordered:
            if key.id in by_id:
                raise KeyringError(KeyringErrorReason.DUPLICATE_KEY_ID, key.id)
            by_id[key.id] = key
        keyring = object.__new__(cls)
        object.__setattr__(keyring, "_active", active)
        object.__setattr__(keyring, "_verification", ordered)
        object.__setattr__(keyring, "_by_id", by_id)
        return keyring

    @staticmethod
    def with_active_key(key: ProtectionKey) -> ProtectionKeyringBuilder:
        """Start a keyring whose active key is ``key``."""
        return ProtectionKeyringBuilder._start(key)

    @property
    def active_key(self) -> ProtectionKey:
        """The key that seals new state (and opens it)."""
        return self._active

    @property
    def verification_keys(self) -> tuple[ProtectionKey, ...]:
        """The keys that only open state, ordered by id."""
        return self._verification

    @property
    def keys(self) -> tuple[ProtectionKey, ...]:
        """Every key: the active one first, then the verification keys by id."""
        return (self._active, *self._verification)

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every key id, in the order of :attr:`keys`."""
        return tuple(key.id for key in self.keys)

    def key(self, key_id: str) -> ProtectionKey | None:
        """The key with id ``key_id`` (active or verification), or ``None``: what opening state looks up."""
        return self._by_id.get(key_id)

    def is_active(self, key_id: str) -> bool:
        """Whether ``key_id`` is the active key's id."""
        return self._active.id == key_id

    def fingerprint(self, version: int = 2) -> Fingerprint:
        """The keyring's fingerprint (v2 by default; v1 is the legacy ids-only form)."""
        return Fingerprint.of(self, version=version)

    def with_staged(self, key: ProtectionKey) -> ProtectionKeyring:
        """This keyring plus ``key`` as a verification key.

        Staging a key that is already present with identical material (in either role) is a no-op and returns
        ``self``; the same id with other material is refused (``conflicting-material``).
        """
        present = self._by_id.get(key.id)
        if present is not None:
            if present.same_material(key):
                return self
            raise KeyringError(KeyringErrorReason.CONFLICTING_MATERIAL, key.id)
        return ProtectionKeyring._create(self._active, (*self._verification, key))

    def with_activated(self, key_id: str) -> ProtectionKeyring:
        """This keyring with ``key_id`` active and the former active key kept for verification only.

        Activating the active key is a no-op; an id not in the keyring is refused (``unknown-key``).
        """
        if self._active.id == key_id:
            return self
        chosen = self._by_id.get(key_id)
        if chosen is None:
            raise KeyringError(KeyringErrorReason.UNKNOWN_KEY, _printable(key_id))
        rest = [key for key in self._verification if key.id != key_id]
        return ProtectionKeyring._create(chosen, (*rest, self._active))

    def without(self, key_id: str) -> ProtectionKeyring:
        """This keyring less the verification key ``key_id``. The active key and unknown ids are refused."""
        if self._active.id == key_id:
            raise KeyringError(KeyringErrorReason.ACTIVE_KEY_REMOVAL, key_id)
        if key_id not in self._by_id:
            raise KeyringError(KeyringErrorReason.UNKNOWN_KEY, _printable(key_id))
        return ProtectionKeyring._create(self._active, (key for key in self._verification if key.id != key_id))

    def with_rotated(self, key: ProtectionKey) -> ProtectionKeyring:
        """Stage ``key`` and activate it in one change; repeating it with the same key is a no-op."""
        return self.with_staged(key).with_activated(key.id)

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._by_id

    def __iter__(self) -> Iterator[ProtectionKey]:
        return iter(self.keys)

    def __len__(self) -> int:
        return len(self._by_id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProtectionKeyring):
            return NotImplemented
        # Every comparison runs, so the time taken does not reveal which key differed.
        same = self._active == other._active and len(self._verification) == len(other._verification)
        for mine, theirs in zip(self._verification, other._verification, strict=False):
            same = (mine == theirs) and same
        return same

    def __hash__(self) -> int:
        return hash((ProtectionKeyring, self.key_ids))

    def __repr__(self) -> str:
        verification = tuple(key.id for key in self._verification)
        return f"ProtectionKeyring(active={self._active.id!r}, verification={verification!r})"

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("ProtectionKeyring is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("ProtectionKeyring is immutable")

    def __reduce__(self) -> NoReturn:
        raise TypeError("ProtectionKeyring cannot be pickled: it holds key material")


class ProtectionKeyringBuilder:
    """Collects an active key and verification keys; :meth:`build` checks the ids and freezes them."""

    __slots__ = ("_active", "_verification")

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("use ProtectionKeyring.with_active_key(key)")

    @classmethod
    def _start(cls, active: ProtectionKey) -> ProtectionKeyringBuilder:
        if not isinstance(active, ProtectionKey):
            raise TypeError("the active key must be a ProtectionKey")
        builder = object.__new__(cls)
        builder._active = active
        builder._verification = []
        return builder

    _active: ProtectionKey
    _verification: list[ProtectionKey]

    def verification_key(self, key: ProtectionKey) -> ProtectionKeyringBuilder:
        """Add a verification-only key; returns the builder for chaining."""
        if not isinstance(key, ProtectionKey):
            raise TypeError("a verification key must be a ProtectionKey")
        self._verification.append(key)
        return self

    def verification_keys(self, keys: Iterable[ProtectionKey]) -> ProtectionKeyringBuilder:
        """Add several verification-only keys; returns the builder for chaining."""
        for key in keys:
            self.verification_key(key)
        return self

    def build(self) -> ProtectionKeyring:
        """The keyring. Raises ``KeyringError`` (``duplicate-key-id``) when two keys share an id."""
        return ProtectionKeyring._create(self._active, self._verification)


def _printable(key_id: str) -> str | None:
    # Only a valid id is repeated in an error: anything else might be a pasted secret.
    return key_id if is_valid_key_id(key_id) else None
