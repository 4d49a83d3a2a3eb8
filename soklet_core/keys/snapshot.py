"""``KeyringSnapshot``: what an instance may publish about its keyring. Holds no secret."""

from __future__ import annotations

from dataclasses import dataclass, field

from .fingerprint import CURRENT_FINGERPRINT_VERSION, Fingerprint
from .keyring import ProtectionKeyring
from .profile import PROTECTION_PROFILE

__all__ = ["KeyCheckValue", "KeyUse", "KeyringSnapshot"]


@dataclass(frozen=True, slots=True)
class KeyCheckValue:
    """One key's id and check value (base64url HMAC-SHA256 of the material over a fixed label)."""

    key_id: str
    check_value: str

    @property
    def short(self) -> str:
        """The first 8 characters: enough for a person to tell keys apart in a listing."""
        return self.check_value[:8]


@dataclass(frozen=True, slots=True)
class KeyUse:
    """When one key last sealed and opened state here (epoch ms, ``None`` if never) and its open reservations."""

    key_id: str
    last_sealed_ms: int | None = None
    last_opened_ms: int | None = None
    reservations: int = 0


@dataclass(frozen=True, slots=True)
class KeyringSnapshot:
    """A secret-free view of a keyring at one generation.

    ``check_values`` lists every key (active first, then verification keys by id). Two instances whose
    snapshots carry equal v2 fingerprints hold byte-identical keys.
    """

    profile: str
    generation: int
    active_key_id: str
    verification_key_ids: tuple[str, ...]
    check_values: tuple[KeyCheckValue, ...]
    fingerprint: Fingerprint
    #: Per key (in the order of ``check_values``): last use and reservations, as the live manager saw them.
    #: Telemetry, not identity: two snapshots of one keyring and generation are equal whatever it says.
    key_use: tuple[KeyUse, ...] = field(default=(), compare=False)

    @classmethod
    def of(
        cls,
        keyring: ProtectionKeyring,
        generation: int = 0,
        *,
        fingerprint_version: int = CURRENT_FINGERPRINT_VERSION,
        key_use: tuple[KeyUse, ...] = (),
    ) -> KeyringSnapshot:
        """The snapshot of ``keyring``, labelled with ``generation``.

        ``fingerprint_version`` 1 reports the legacy fingerprint, as an older build would.
        """
        return cls(
            profile=PROTECTION_PROFILE,
            generation=generation,
            active_key_id=keyring.active_key.id,
            verification_key_ids=tuple(key.id for key in keyring.verification_keys),
            check_values=tuple(KeyCheckValue(key.id, key.check_value_text) for key in keyring.keys),
            fingerprint=keyring.fingerprint(version=fingerprint_version),
            key_use=key_use,
        )

    def check_value(self, key_id: str) -> str | None:
        """The check value of ``key_id``, or ``None`` if the keyring has no such key."""
        for entry in self.check_values:
            if entry.key_id == key_id:
                return entry.check_value
        return None

    def use(self, key_id: str) -> KeyUse:
        """The last use and reservations of ``key_id`` (all empty when not recorded)."""
        for entry in self.key_use:
            if entry.key_id == key_id:
                return entry
        return KeyUse(key_id)

    def to_json(self) -> dict[str, object]:
        """The snapshot as a JSON-ready document (what the admin API and ``--json`` print)."""
        return {
            "profile": self.profile,
            "generation": self.generation,
            "active": self.active_key_id,
            "verification": list(self.verification_key_ids),
            "check_values": {entry.key_id: entry.check_value for entry in self.check_values},
            "fingerprint": self.fingerprint.to_json(),
        }
