"""The single refusal type of the store layer and its bounded reasons."""

from __future__ import annotations

from soklet_core.errors import ErrorReason, SokletError


class StoreErrorReason(ErrorReason):
    """Why a durable store refused a URL or a call. The set is closed: callers may switch on it."""

    BAD_URL = "bad-url", "a store URL is sqlite:///absolute/path or postgresql://user@host/database"
    UNAVAILABLE = "unavailable", "the store could not be reached or did not answer in time"
    SCHEMA = "schema", "the store's schema is newer than this soklet or not the one soklet writes"
    TOO_LARGE = "too-large", "a task document, handle state or rotation record is larger than the store keeps"
    CONFLICT = "conflict", "an entry with this id already exists, or another writer changed it first"
    QUOTA = (
        "quota",
        "the store holds as many as it keeps: tasks or task bytes of the caller's partition, or instances' heartbeats",
    )
    INSECURE = (
        "insecure",
        "another user could read or change the store's file: it must be yours or root's, group and others may not"
        " access it (chmod 600), and no folder on its path may be writable by another user",
    )
    LOCKED = "locked", "another holder has the lock (its detail names who and since when)"
    NO_KEYRING = "no-keyring", "the store holds no fleet keyring yet: write the first one"
    INVALID_ARGUMENT = "invalid-argument", "a record field or call argument is empty, of the wrong type or out of range"


class StoreError(SokletError):
    """A durable store that refused a URL or could not carry out a call.

    ``reason`` is one of a closed set; ``detail`` is fixed text chosen by the store (an operation name such as
    ``insert_task``, a driver exception's class name, a redacted URL), never a driver message, a password or stored
    data, so the message can be logged as it is.
    """

    __slots__ = ("detail",)

    reason: StoreErrorReason

    def __init__(self, reason: StoreErrorReason, detail: str | None = None) -> None:
        self.detail = detail
        extra = f" ({detail})" if detail else ""
        super().__init__(reason, f"{reason.value}: {reason.description}{extra}")
