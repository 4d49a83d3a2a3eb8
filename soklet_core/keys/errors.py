"""The single refusal type of the keys layer and its bounded reasons."""

from __future__ import annotations

from datetime import datetime

from soklet_core.errors import ErrorReason, SokletError

from .material_shape import looks_like_key_material


class KeyringErrorReason(ErrorReason):
    """Why a key, a keyring or a keyring change was refused. The set is closed: callers may switch on it."""

    INVALID_KEY_ID = "invalid-key-id", "a key id must be 1 to 64 RFC 9110 token characters"
    MATERIAL_SHAPED_KEY_ID = (
        "key-id-looks-like-material",
        "a key id must not look like key material (a long run of mixed-case letters and digits, or of hex "
        "digits): ids are published in every sealed state's header",
    )
    MATERIAL_TOO_SHORT = "material-too-short", "key material must be at least 32 bytes"
    MATERIAL_TOO_LONG = "material-too-long", "key material must be at most 1024 bytes"
    NO_ACTIVE_KEY = "no-active-key", "a keyring needs exactly one active key"
    DUPLICATE_KEY_ID = "duplicate-key-id", "two keys in one keyring share an id"
    CONFLICTING_MATERIAL = "conflicting-material", "the keyring holds a key with this id but other material"
    UNKNOWN_KEY = "unknown-key", "no key with this id is in the keyring"
    ACTIVE_KEY_REMOVAL = "active-key-removal", "the active key cannot be removed; activate another key first"
    KEY_IN_USE = "key-in-use", "the key still has an outstanding sealing reservation"
    RETIRED_TOO_RECENTLY = (
        "retired-too-recently",
        "the key stopped sealing less than the maximum state lifetime ago: state it sealed may still be open",
    )
    INVALID_FINGERPRINT = "invalid-fingerprint", "not a valid keyring fingerprint"


class KeyringError(SokletError, ValueError):
    """A refused key, keyring or keyring change.

    ``reason`` is one of a closed set. ``key_id`` names the key concerned when it is a valid (and therefore
    non-secret, printable) id; an id that failed validation is never repeated, since it may be anything the
    caller pasted, a secret included, and neither is an id that looks like key material
    (:func:`looks_like_key_material`): the message says "an id that looks like key material" instead. The
    message is built only from these two.
    """

    __slots__ = ("key_id",)

    reason: KeyringErrorReason

    def __init__(self, reason: KeyringErrorReason, key_id: str | None = None) -> None:
        self.key_id = key_id
        if key_id is None:
            subject = ""
        elif looks_like_key_material(key_id):
            subject = " (an id that looks like key material)"
        else:
            subject = f" (key {key_id!r})"
        super().__init__(reason, f"{reason.value}{subject}: {reason.description}")


class RetiredTooRecently(KeyringError):
    """A verification key may not be removed yet: it stopped sealing less than the maximum state lifetime ago.

    ``removable_at`` is the earliest time (UTC) it may go; ``recorded`` says whether the keyring file records
    when it stopped sealing (else the bound is the file's last change, see ``check_removal``).
    """

    __slots__ = ("recorded", "removable_at")

    def __init__(self, key_id: str, removable_at: datetime, *, recorded: bool) -> None:
        super().__init__(KeyringErrorReason.RETIRED_TOO_RECENTLY, key_id)
        self.removable_at = removable_at
        self.recorded = recorded


class KeyInUse(KeyringError):
    """A verification key cannot be removed yet: a sealing reservation on it is still outstanding."""

    __slots__ = ()

    def __init__(self, key_id: str) -> None:
        super().__init__(KeyringErrorReason.KEY_IN_USE, key_id)
