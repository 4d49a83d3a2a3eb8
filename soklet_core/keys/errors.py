"""The single refusal type of the keys layer and its bounded reasons."""

from __future__ import annotations

import enum
from typing import Any

from .material_shape import looks_like_key_material


class KeyringErrorReason(enum.Enum):
    """Why a key, a keyring or a keyring change was refused. The set is closed: callers may switch on it."""

    INVALID_KEY_ID = "invalid-key-id"
    MATERIAL_TOO_SHORT = "material-too-short"
    MATERIAL_TOO_LONG = "material-too-long"
    NO_ACTIVE_KEY = "no-active-key"
    DUPLICATE_KEY_ID = "duplicate-key-id"
    CONFLICTING_MATERIAL = "conflicting-material"
    UNKNOWN_KEY = "unknown-key"
    ACTIVE_KEY_REMOVAL = "active-key-removal"
    KEY_IN_USE = "key-in-use"
    INVALID_FINGERPRINT = "invalid-fingerprint"

    @property
    def description(self) -> str:
        """A fixed, human sentence for the reason; never contains key material or raw input."""
        return _DESCRIPTIONS[self]


_DESCRIPTIONS: dict[KeyringErrorReason, str] = {
    KeyringErrorReason.INVALID_KEY_ID: "a key id must be 1 to 64 RFC 9110 token characters",
    KeyringErrorReason.MATERIAL_TOO_SHORT: "key material must be at least 32 bytes",
    KeyringErrorReason.MATERIAL_TOO_LONG: "key material must be at most 1024 bytes",
    KeyringErrorReason.NO_ACTIVE_KEY: "a keyring needs exactly one active key",
    KeyringErrorReason.DUPLICATE_KEY_ID: "two keys in one keyring share an id",
    KeyringErrorReason.CONFLICTING_MATERIAL: "the keyring holds a key with this id but other material",
    KeyringErrorReason.UNKNOWN_KEY: "no key with this id is in the keyring",
    KeyringErrorReason.ACTIVE_KEY_REMOVAL: "the active key cannot be removed; activate another key first",
    KeyringErrorReason.KEY_IN_USE: "the key still has an outstanding sealing reservation",
    KeyringErrorReason.INVALID_FINGERPRINT: "not a valid keyring fingerprint",
}


class KeyringError(ValueError):
    """A refused key, keyring or keyring change.

    ``reason`` is one of a closed set. ``key_id`` names the key concerned when it is a valid (and therefore
    non-secret, printable) id; an id that failed validation is never repeated, since it may be anything the
    caller pasted, a secret included, and neither is an id that looks like key material
    (:func:`looks_like_key_material`): the message says "an id that looks like key material" instead. The
    message is built only from these two.
    """

    __slots__ = ("key_id", "reason")

    def __init__(self, reason: KeyringErrorReason, key_id: str | None = None) -> None:
        self.reason = reason
        self.key_id = key_id
        if key_id is None:
            subject = ""
        elif looks_like_key_material(key_id):
            subject = " (an id that looks like key material)"
        else:
            subject = f" (key {key_id!r})"
        super().__init__(f"{reason.value}{subject}: {reason.description}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), (self.reason, self.key_id))


class KeyInUse(KeyringError):
    """A verification key cannot be removed yet: a sealing reservation on it is still outstanding."""

    __slots__ = ()

    def __init__(self, key_id: str) -> None:
        super().__init__(KeyringErrorReason.KEY_IN_USE, key_id)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), (self.key_id,))
