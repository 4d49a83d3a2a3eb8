"""What a store keeps of a fleet's keyring: wrapped keys and the fleet generation, heartbeats, the rotation record.

The keyring in a store is one row per key (id, role, created and retired times, check value, the material
*wrapped* under a key-encryption key, never in the clear) and one generation, a counter every change raises by one
in the same transaction. Instances apply the newest generation they see and record a :class:`Heartbeat`; a fleet
rotation keeps its :class:`RotationRecord` (no material) in the store so another operator can resume it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final

from soklet_core.keys import WrappedKey

from .errors import StoreError, StoreErrorReason

__all__ = [
    "MAX_ADMIN_URL_CHARS",
    "MAX_FLEET_KEYS",
    "MAX_HEARTBEATS",
    "MAX_ROTATION_DOCUMENT_BYTES",
    "Heartbeat",
    "RotationRecord",
    "StoredKey",
    "StoredKeyRole",
    "StoredKeyring",
]

#: The most keys a fleet keyring in a store holds (one active, the rest verification-only).
MAX_FLEET_KEYS: Final = 64
#: The most heartbeat rows a store keeps (instances); a beat from one more instance is refused.
MAX_HEARTBEATS: Final = 1024
#: The longest admin URL an instance records.
MAX_ADMIN_URL_CHARS: Final = 2048
#: The largest rotation record (UTF-8 bytes of its JSON text).
MAX_ROTATION_DOCUMENT_BYTES: Final = 64 * 1024


class StoredKeyRole(StrEnum):
    """A stored key's role: it seals and opens (one per keyring), or it opens only."""

    ACTIVE = "active"
    VERIFICATION = "verification"


def _invalid(name: str) -> StoreError:
    return StoreError(StoreErrorReason.INVALID_ARGUMENT, name)


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

    @property
    def key_id(self) -> str:
        """The key's id (public)."""
        return self.wrapped.key_id


@dataclass(frozen=True, slots=True)
class StoredKeyring:
    """A fleet keyring: its generation (≥ 1 once written), profile, keys and when it last changed."""

    generation: int
    profile: str
    keys: tuple[StoredKey, ...]
    changed_at: datetime

    def __post_init__(self) -> None:
        if not isinstance(self.generation, int) or self.generation < 0:
            raise _invalid("generation")
        if len(self.keys) > MAX_FLEET_KEYS:
            raise _invalid("keys")
        ids = [key.key_id for key in self.keys]
        if len(set(ids)) != len(ids):
            raise _invalid("keys")
        if self.keys and sum(key.role is StoredKeyRole.ACTIVE for key in self.keys) != 1:
            raise _invalid("keys")


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What one instance last told the store: which generation it applied, with which fingerprint, its clock."""

    instance: str
    process_id: str
    generation: int
    #: The keyring fingerprint (v2 value) of what the instance applied, or ``None`` before it loaded one.
    fingerprint: str | None
    #: The instance's wall clock when it beat.
    clock: datetime
    admin_url: str | None
    #: The store's clock when it recorded the beat: ``clock - seen_at`` estimates the instance's clock offset.
    seen_at: datetime
    #: The longest state lifetime the instance seals with (ms): what a rotation must wait before removing a key.
    max_state_lifetime_ms: int = 0


@dataclass(frozen=True, slots=True)
class RotationRecord:
    """The one fleet rotation in progress: who runs it, since when, its steps (JSON text, never material), and a
    version for compare-and-swap."""

    owner: str
    started_at: datetime
    document: str
    version: int
