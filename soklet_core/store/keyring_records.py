"""What a store keeps of a fleet's keyring: wrapped keys and the fleet generation, heartbeats, the rotation record.

The keyring in a store is one row per key (id, role, created and retired times, check value, the material
*wrapped* under a key-encryption key, never in the clear) and one generation, a counter every change raises by one
in the same transaction. Instances apply the newest generation they see and record a :class:`Heartbeat`; a fleet
rotation keeps its :class:`RotationRecord` (no material) in the store so another operator can resume it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final

from soklet_core.errors import SokletError
from soklet_core.keys import WrappedKey

from .errors import StoreError, StoreErrorReason
from .records import MAX_KEY_CHARS, check_json_text, from_millis, stored_int, to_millis, utc_moment

__all__ = [
    "HEARTBEAT_COLUMNS",
    "KEYRING_LISTEN_RECHECK_SECONDS",
    "KEYRING_POLL_SECONDS",
    "KEY_COLUMNS",
    "LOCK_HOLDER_PATIENCE_SECONDS",
    "MAX_ADMIN_URL_CHARS",
    "MAX_CHECK_VALUE_CHARS",
    "MAX_FLEET_KEYS",
    "MAX_HEARTBEATS",
    "MAX_KEYRING_WAIT_SECONDS",
    "MAX_ROTATION_DOCUMENT_BYTES",
    "ROTATION_COLUMNS",
    "Heartbeat",
    "RotationRecord",
    "StoredKey",
    "StoredKeyRole",
    "StoredKeyring",
    "check_owner",
    "check_wait",
    "describe_holder",
    "heartbeat_from_row",
    "heartbeat_values",
    "key_from_row",
    "key_values",
    "keyring_from_rows",
    "read_holder",
    "rotation_from_row",
]

#: The most keys a fleet keyring in a store holds (one active, the rest verification-only).
MAX_FLEET_KEYS: Final = 64
#: The most heartbeat rows a store keeps (instances); a beat from one more instance is refused.
MAX_HEARTBEATS: Final = 1024
#: The longest admin URL an instance records.
MAX_ADMIN_URL_CHARS: Final = 2048
#: The largest rotation record (UTF-8 bytes of its JSON text).
MAX_ROTATION_DOCUMENT_BYTES: Final = 64 * 1024
#: How long a refused rotation lock waits for its holder's row to name it (the holder writes it right after it
#: took the lock).
LOCK_HOLDER_PATIENCE_SECONDS: Final = 2.0
_HOLDER_POLL_SECONDS: Final = 0.05
#: The longest check value a stored key carries (base64url of a short digest: 22 characters today).
MAX_CHECK_VALUE_CHARS: Final = 128
#: The longest one ``wait_for_keyring_change`` may be asked to wait.
MAX_KEYRING_WAIT_SECONDS: Final = 3600.0
#: How often a follower reads the generation when no notification can wake it (SQLite; PostgreSQL while its
#: listening connection is down or disabled).
KEYRING_POLL_SECONDS: Final = 1.0
#: How often a PostgreSQL follower whose listening connection is up reads the generation all the same (a
#: notification is lost only with its connection, which the listener then reopens; this bounds the rest).
KEYRING_LISTEN_RECHECK_SECONDS: Final = 30.0


class StoredKeyRole(StrEnum):
    """A stored key's role: it seals and opens (one per keyring), or it opens only."""

    ACTIVE = "active"
    VERIFICATION = "verification"


def _invalid(name: str) -> StoreError:
    return StoreError(StoreErrorReason.INVALID_ARGUMENT, name)


def _count(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**62:
        raise _invalid(f"{name} must be a non-negative integer")


def _text(value: object, name: str, limit: int, *, optional: bool = False) -> None:
    """Printable text of 1 to ``limit`` characters (it may be printed: a refusal names a lock's owner)."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not 1 <= len(value) <= limit or not value.isprintable():
        raise _invalid(f"{name} must be 1 to {limit} printable characters")


@dataclass(frozen=True, slots=True)
class StoredKey:
    """One key of a fleet keyring as the store keeps it: public facts and the wrapped material."""

    wrapped: WrappedKey
    role: StoredKeyRole
    created_at: datetime
    #: When it stopped sealing (a verification key that was active once), else ``None``.
    retired_at: datetime | None
    #: The key's check value (base64url), so a snapshot and a fingerprint need no unwrap.
    check_value: str

    def __post_init__(self) -> None:
        if not isinstance(self.wrapped, WrappedKey):
            raise _invalid("wrapped must be a WrappedKey")
        if not isinstance(self.role, StoredKeyRole):
            raise _invalid("role must be a StoredKeyRole")
        object.__setattr__(self, "created_at", utc_moment(self.created_at, "created_at"))
        if self.retired_at is not None:
            if self.role is StoredKeyRole.ACTIVE:
                raise _invalid("the active key has no retired time")
            object.__setattr__(self, "retired_at", utc_moment(self.retired_at, "retired_at"))
        _text(self.check_value, "check_value", MAX_CHECK_VALUE_CHARS)

    @property
    def key_id(self) -> str:
        """The key's id (public)."""
        return self.wrapped.key_id


@dataclass(frozen=True, slots=True)
class StoredKeyring:
    """A fleet keyring: its generation (≥ 1 once written), profile, keys (1 to :data:`MAX_FLEET_KEYS`, exactly
    one active, kept ordered by id) and when it last changed."""

    generation: int
    profile: str
    keys: tuple[StoredKey, ...]
    changed_at: datetime

    def __post_init__(self) -> None:
        _count(self.generation, "generation")
        _text(self.profile, "profile", MAX_KEY_CHARS)
        if not isinstance(self.keys, tuple) or not all(isinstance(key, StoredKey) for key in self.keys):
            raise _invalid("keys must be a tuple of StoredKey")
        if not 1 <= len(self.keys) <= MAX_FLEET_KEYS:
            raise _invalid(f"a fleet keyring holds 1 to {MAX_FLEET_KEYS} keys")
        # Kept ordered by id, as a store reads them back: a keyring compares equal to its round trip.
        object.__setattr__(self, "keys", tuple(sorted(self.keys, key=lambda key: key.key_id)))
        ids = [key.key_id for key in self.keys]
        if len(set(ids)) != len(ids):
            raise _invalid("two keys share an id")
        if sum(key.role is StoredKeyRole.ACTIVE for key in self.keys) != 1:
            raise _invalid("a fleet keyring has exactly one active key")
        object.__setattr__(self, "changed_at", utc_moment(self.changed_at, "changed_at"))

    @property
    def active(self) -> StoredKey:
        """The active key's row."""
        return next(key for key in self.keys if key.role is StoredKeyRole.ACTIVE)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What one instance last told the store: which generation it applied, with which fingerprint, its clock."""

    #: The instance's name (1 to ``MAX_KEY_CHARS`` printable characters), its row's key.
    instance: str
    process_id: str
    generation: int
    #: The keyring fingerprint (v2 value) of what the instance applied, or ``None`` before it loaded one.
    fingerprint: str | None
    #: The instance's wall clock when it beat.
    clock: datetime
    admin_url: str | None
    #: The store's clock when it recorded the beat: ``clock - seen_at`` estimates the instance's clock offset.
    #: Ignored by ``beat``, which sets it.
    seen_at: datetime
    #: The longest request-state lifetime the instance seals with, in milliseconds (0: not told): a rotation
    #: waits the fleet's longest before it removes a key.
    max_state_lifetime_ms: int = 0

    def __post_init__(self) -> None:
        _text(self.instance, "instance", MAX_KEY_CHARS)
        _text(self.process_id, "process_id", MAX_KEY_CHARS)
        _count(self.generation, "generation")
        _text(self.fingerprint, "fingerprint", MAX_KEY_CHARS, optional=True)
        object.__setattr__(self, "clock", utc_moment(self.clock, "clock"))
        _text(self.admin_url, "admin_url", MAX_ADMIN_URL_CHARS, optional=True)
        object.__setattr__(self, "seen_at", utc_moment(self.seen_at, "seen_at"))
        _count(self.max_state_lifetime_ms, "max_state_lifetime_ms")


@dataclass(frozen=True, slots=True)
class RotationRecord:
    """The one fleet rotation in progress: who runs it, since when, its steps (JSON text, never material), and a
    version for compare-and-swap."""

    owner: str
    started_at: datetime
    document: str
    version: int

    def __post_init__(self) -> None:
        _text(self.owner, "owner", MAX_KEY_CHARS)
        object.__setattr__(self, "started_at", utc_moment(self.started_at, "started_at"))
        check_json_text(self.document, "document", MAX_ROTATION_DOCUMENT_BYTES)
        _count(self.version, "version")


def check_owner(owner: object) -> str:
    """``owner`` (who holds or asks for the rotation lock) if it is 1 to ``MAX_KEY_CHARS`` printable characters."""
    _text(owner, "owner", MAX_KEY_CHARS)
    assert isinstance(owner, str)
    return owner


#: The key table's columns, in the order :func:`key_values` and :func:`key_from_row` use.
KEY_COLUMNS: Final = ("key_id", "role", "created_at", "retired_at", "check_value", "kek_id", "wrapped")
#: The heartbeat table's columns, in the order :func:`heartbeat_values` and :func:`heartbeat_from_row` use.
#: ``seen_at`` is last: the store sets it.
HEARTBEAT_COLUMNS: Final = (
    "instance",
    "process_id",
    "generation",
    "fingerprint",
    "clock",
    "admin_url",
    "max_state_lifetime_ms",
    "seen_at",
)
#: The rotation record's columns (its one row), in the order :func:`rotation_from_row` uses.
ROTATION_COLUMNS: Final = ("owner", "started_at", "document", "version")

KeyRow = tuple[str, str, int, int | None, str, str, bytes]
HeartbeatRow = tuple[str, str, int, str | None, int, str | None, int]


def key_values(key: StoredKey) -> KeyRow:
    """``key`` as one row of :data:`KEY_COLUMNS`."""
    return (
        key.key_id,
        key.role.value,
        to_millis(key.created_at),
        None if key.retired_at is None else to_millis(key.retired_at),
        key.check_value,
        key.wrapped.kek_id,
        key.wrapped.ciphertext,
    )


def key_from_row(row: tuple[object, ...]) -> StoredKey:
    """The stored key of one row of :data:`KEY_COLUMNS`."""
    key_id, role, created, retired, check_value, kek_id, wrapped = row
    if not isinstance(wrapped, bytes | bytearray | memoryview):
        raise StoreError(StoreErrorReason.SCHEMA, "a wrapped key is not bytes")
    try:
        return StoredKey(
            wrapped=WrappedKey(key_id=str(key_id), kek_id=str(kek_id), ciphertext=bytes(wrapped)),
            role=StoredKeyRole(str(role)),
            created_at=from_millis(stored_int(created)),
            retired_at=None if retired is None else from_millis(stored_int(retired)),
            check_value=str(check_value),
        )
    except (ValueError, SokletError):
        raise StoreError(StoreErrorReason.SCHEMA, "a stored key is not well formed") from None


def heartbeat_values(heartbeat: Heartbeat) -> HeartbeatRow:
    """``heartbeat`` as :data:`HEARTBEAT_COLUMNS` but the last (the store sets ``seen_at``)."""
    return (
        heartbeat.instance,
        heartbeat.process_id,
        heartbeat.generation,
        heartbeat.fingerprint,
        to_millis(heartbeat.clock),
        heartbeat.admin_url,
        heartbeat.max_state_lifetime_ms,
    )


def heartbeat_from_row(row: tuple[object, ...]) -> Heartbeat:
    """The heartbeat of one row of :data:`HEARTBEAT_COLUMNS`."""
    instance, process_id, generation, fingerprint, clock, admin_url, lifetime, seen_at = row
    return Heartbeat(
        instance=str(instance),
        process_id=str(process_id),
        generation=stored_int(generation),
        fingerprint=None if fingerprint is None else str(fingerprint),
        clock=from_millis(stored_int(clock)),
        admin_url=None if admin_url is None else str(admin_url),
        seen_at=from_millis(stored_int(seen_at)),
        max_state_lifetime_ms=stored_int(lifetime),
    )


def rotation_from_row(row: tuple[object, ...]) -> RotationRecord:
    """The rotation record of its row (:data:`ROTATION_COLUMNS`)."""
    owner, started_at, document, version = row
    return RotationRecord(
        owner=str(owner),
        started_at=from_millis(stored_int(started_at)),
        document=str(document),
        version=stored_int(version),
    )


def keyring_from_rows(rows: list[tuple[object, ...]]) -> StoredKeyring | None:
    """The keyring of ``Statements.select_keyring``'s rows (generation, profile, changed_at, then a key's
    columns), or ``None`` for no row; ``StoreError(SCHEMA)`` when the rows do not make a keyring (more than
    ``MAX_FLEET_KEYS`` keys, none active)."""
    if not rows:
        return None
    generation, profile, changed_at = rows[0][:3]
    keys = tuple(key_from_row(row[3:]) for row in rows if row[3] is not None)
    try:
        return StoredKeyring(
            generation=stored_int(generation),
            profile=str(profile),
            keys=keys,
            changed_at=from_millis(stored_int(changed_at)),
        )
    except StoreError:
        raise StoreError(StoreErrorReason.SCHEMA, "the stored fleet keyring is not well formed") from None


def check_wait(after_generation: object, timeout_seconds: object) -> None:
    """Refuse a ``wait_for_keyring_change`` whose generation is not a count or whose timeout is not a finite
    number of seconds from 0 to ``MAX_KEYRING_WAIT_SECONDS``."""
    _count(after_generation, "after_generation")
    if (
        isinstance(timeout_seconds, bool)
        or not isinstance(timeout_seconds, int | float)
        or not 0 <= timeout_seconds <= MAX_KEYRING_WAIT_SECONDS
    ):
        raise _invalid(f"timeout_seconds must be 0 to {MAX_KEYRING_WAIT_SECONDS:g}")


async def read_holder(read: Callable[[], Awaitable[tuple[object, ...] | None]]) -> tuple[object, ...] | None:
    """The rotation lock holder's row, read again for at most :data:`LOCK_HOLDER_PATIENCE_SECONDS` while it is
    absent: a holder writes it just after it took the lock, so a refusal in between still names it."""
    deadline = time.monotonic() + LOCK_HOLDER_PATIENCE_SECONDS
    while (row := await read()) is None and time.monotonic() < deadline:
        await asyncio.sleep(_HOLDER_POLL_SECONDS)
    return row


def describe_holder(row: tuple[object, ...] | None) -> str:
    """A refused rotation lock's detail from the holder's row (owner, since in epoch ms): "held by OWNER since
    TIME", or a sentence without them when the holder did not write its row (it is taking or leaving the lock)."""
    if row is None:
        return "the rotation lock is held by another process"
    owner, since = row
    return f"the rotation lock is held by {str(owner)!r} since {from_millis(stored_int(since)).isoformat()}"
