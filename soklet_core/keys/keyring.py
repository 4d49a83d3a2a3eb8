"""``ProtectionKeyring``: one active key and any number of verification-only keys, immutable.

Changes never mutate a keyring: ``with_staged``, ``with_activated``, ``without`` and ``with_rotated`` return a
new keyring (or the same one when the change is a no-op), so whoever holds a keyring holds one consistent
state.
The live manager and the keyring-file commands both apply their changes through these four, so the rules live
here once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from .errors import KeyringError, KeyringErrorReason
from .fingerprint import CURRENT_FINGERPRINT_VERSION, Fingerprint, fingerprint_of_keys
from .key import ProtectionKey, is_valid_key_id

__all__ = ["ProtectionKeyring"]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ProtectionKeyring:
    """An immutable keyring: exactly one active key (seals and opens) and verification keys (open only).

    ``ProtectionKeyring(active_key, verification_keys=[k2, k3])``; ids are unique (``duplicate-key-id``
    otherwise), and :attr:`verification_keys` is kept ordered by id. Equality compares every id and (in constant
    time) every key's material and role.
    """

    active_key: ProtectionKey
    verification_keys: Sequence[ProtectionKey] = ()
    _by_id: Mapping[str, ProtectionKey] = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.active_key, ProtectionKey):
            raise TypeError("the active key must be a ProtectionKey")
        ordered = tuple(sorted(self.verification_keys, key=_key_id))
        by_id: dict[str, ProtectionKey] = {self.active_key.id: self.active_key}
        for key in ordered:
            if key.id in by_id:
                raise KeyringError(KeyringErrorReason.DUPLICATE_KEY_ID, key.id)
            by_id[key.id] = key
        object.__setattr__(self, "verification_keys", ordered)
        object.__setattr__(self, "_by_id", by_id)

    @classmethod
    def with_active_key(cls, key: ProtectionKey, verification_keys: Sequence[ProtectionKey] = ()) -> ProtectionKeyring:
        """The spec's name (``McpProtectionKeyring.withActiveKey``) for ``ProtectionKeyring(key, ...)``."""
        return cls(key, verification_keys)

    @property
    def keys(self) -> tuple[ProtectionKey, ...]:
        """Every key: the active one first, then the verification keys by id."""
        return (self.active_key, *self.verification_keys)

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every key id, in the order of :attr:`keys`."""
        return tuple(key.id for key in self.keys)

    def key(self, key_id: str) -> ProtectionKey | None:
        """The key with id ``key_id`` (active or verification), or ``None``: what opening state looks up."""
        return self._by_id.get(key_id)

    def is_active(self, key_id: str) -> bool:
        """Whether ``key_id`` is the active key's id."""
        return self.active_key.id == key_id

    def fingerprint(self, version: int = CURRENT_FINGERPRINT_VERSION) -> Fingerprint:
        """The keyring's fingerprint (v2 by default; v1 is the legacy ids-only form); raises ``ValueError`` for
        another version."""
        return fingerprint_of_keys(self.active_key, self.verification_keys, version)

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
        return ProtectionKeyring(self.active_key, (*self.verification_keys, key))

    def with_activated(self, key_id: str) -> ProtectionKeyring:
        """This keyring with ``key_id`` active and the former active key kept for verification only.

        Activating the active key is a no-op; an id not in the keyring is refused (``unknown-key``).
        """
        if self.active_key.id == key_id:
            return self
        chosen = self._by_id.get(key_id)
        if chosen is None:
            raise KeyringError(KeyringErrorReason.UNKNOWN_KEY, _printable(key_id))
        rest = [key for key in self.verification_keys if key.id != key_id]
        return ProtectionKeyring(chosen, (*rest, self.active_key))

    def without(self, key_id: str) -> ProtectionKeyring:
        """This keyring less the verification key ``key_id``. The active key and unknown ids are refused."""
        if self.active_key.id == key_id:
            raise KeyringError(KeyringErrorReason.ACTIVE_KEY_REMOVAL, key_id)
        if key_id not in self._by_id:
            raise KeyringError(KeyringErrorReason.UNKNOWN_KEY, _printable(key_id))
        return ProtectionKeyring(self.active_key, tuple(key for key in self.verification_keys if key.id != key_id))

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
        same = self.active_key == other.active_key and len(self.verification_keys) == len(other.verification_keys)
        for mine, theirs in zip(self.verification_keys, other.verification_keys, strict=False):
            same = (mine == theirs) and same
        return same

    def __hash__(self) -> int:
        return hash((ProtectionKeyring, self.key_ids))

    def __repr__(self) -> str:
        verification = tuple(key.id for key in self.verification_keys)
        return f"ProtectionKeyring(active={self.active_key.id!r}, verification={verification!r})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("ProtectionKeyring cannot be pickled: it holds key material")


def _key_id(key: ProtectionKey) -> str:
    if not isinstance(key, ProtectionKey):
        raise TypeError("a verification key must be a ProtectionKey")
    return key.id


def _printable(key_id: str) -> str | None:
    # Only a valid id is repeated in an error: anything else might be a pasted secret.
    return key_id if is_valid_key_id(key_id) else None
