"""The admin contract's keyring document, ``GET /v1/keyring``: one value, written by the admin listener and read
strictly by the fleet client.

:class:`AdminSnapshot` is the document; :meth:`AdminSnapshot.to_json` is how an instance writes it
(:mod:`.admin`), and :func:`parse_admin_snapshot` how ``soklet fleet`` reads another instance's answer
(:mod:`soklet_core.fleet.client`). The document must hold exactly the members of the admin contract
(docs/fleet.md), each of its type: an instance that answers anything else is reported as unreadable rather than
guessed at. Errors name the member and never repeat the answer's content.

Two members are optional when read, so that an older build's snapshot still parses: ``process_id``, the random
identity each serving process makes at start with :func:`new_process_id` (what tells two instances apart when
they report one ``instance`` name), and a key's ``retired``, when it stopped sealing (from the keyring file).
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from soklet_core.errors import SokletError
from soklet_core.json import JsonError, parse
from soklet_core.keys import Fingerprint, KeyringError, decode_base64url, encode_base64url, is_valid_key_id

__all__ = [
    "ADMIN_SNAPSHOT_PATH",
    "MAX_PROCESS_ID_CHARS",
    "MAX_SNAPSHOT_BYTES",
    "MAX_SNAPSHOT_KEYS",
    "MIN_PROCESS_ID_CHARS",
    "PROCESS_ID_BYTES",
    "AdminKey",
    "AdminSnapshot",
    "KeyRoleName",
    "SnapshotError",
    "new_process_id",
    "parse_admin_snapshot",
]

#: Where the snapshot lives under an instance's admin base URL.
ADMIN_SNAPSHOT_PATH: Final = "/v1/keyring"
#: Largest snapshot answer read, in bytes; a longer one is cut off and the instance reported unreadable.
MAX_SNAPSHOT_BYTES: Final = 1024 * 1024
#: Most keys one snapshot may list (a keyring file of 1 MiB holds a few hundred).
MAX_SNAPSHOT_KEYS: Final = 1_000
#: Random bytes of a process identity (:func:`new_process_id`): 128 bits, so two processes never draw one.
PROCESS_ID_BYTES: Final = 16
#: Shortest ``process_id`` read: 22 base64url characters, what :data:`PROCESS_ID_BYTES` bytes spell.
MIN_PROCESS_ID_CHARS: Final = 22
#: Longest ``process_id`` read.
MAX_PROCESS_ID_CHARS: Final = 64
_BASE64URL: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
# Longest instance name, profile or created text taken from an answer.
_MAX_TEXT_CHARS: Final = 256
# A check value is base64url HMAC-SHA256: 32 bytes.
_CHECK_VALUE_BYTES: Final = 32

_TOP: Final = (
    "instance",
    "profile",
    "generation",
    "active",
    "verification",
    "keys",
    "max_state_lifetime_ms",
    "max_state_rounds",
    "fingerprint",
)
_KEY: Final = ("id", "role", "check_value", "created", "last_sealed_ms", "last_opened_ms", "reservations")
# Members an older build's snapshot may lack.
_OPTIONAL_TOP: Final = ("process_id",)
_OPTIONAL_KEY: Final = ("retired",)


def new_process_id() -> str:
    """A fresh process identity: :data:`PROCESS_ID_BYTES` random bytes, base64url. It holds no secret and says
    nothing of the host; it only tells one serving process from every other."""
    return encode_base64url(secrets.token_bytes(PROCESS_ID_BYTES))


class KeyRoleName(enum.StrEnum):
    """A key's role in a snapshot."""

    ACTIVE = "active"
    VERIFICATION = "verification"


class SnapshotError(SokletError):
    """A snapshot answer that is not the admin contract's document. ``where`` names the member.

    There is no reason enum (``reason`` is ``None``): ``problem`` is a sentence naming a limit or the expected
    shape, and every one means the same to a caller: the instance's answer is unusable.
    """

    __slots__ = ("problem", "where")

    def __init__(self, problem: str, where: str | None = None) -> None:
        self.problem = problem
        self.where = where
        super().__init__(None, f"{where}: {problem}" if where else problem)


@dataclass(frozen=True, slots=True)
class AdminKey:
    """One key of a snapshot: id, role, check value (base64url, 43 characters), its use, and when it stopped
    sealing (``retired``, ISO 8601; ``None`` when the instance does not know or the key never sealed)."""

    id: str
    role: KeyRoleName
    check_value: str
    created: str | None
    last_sealed_ms: int | None
    last_opened_ms: int | None
    reservations: int
    retired: str | None = None

    @property
    def short_check_value(self) -> str:
        """The first 8 characters of the check value: enough for a person to tell keys apart."""
        return self.check_value[:8]


@dataclass(frozen=True, slots=True)
class AdminSnapshot:
    """A secret-free keyring snapshot as one instance reported it. ``process_id`` is the reporting process's
    identity (``None``: an older build that does not report one)."""

    instance: str
    profile: str
    generation: int
    active: str
    verification: tuple[str, ...]
    keys: tuple[AdminKey, ...]
    max_state_lifetime_ms: int
    max_state_rounds: int
    fingerprint: Fingerprint
    process_id: str | None = None

    def key(self, key_id: str) -> AdminKey | None:
        """The key ``key_id``, or ``None``."""
        for key in self.keys:
            if key.id == key_id:
                return key
        return None

    def to_json(self) -> dict[str, Any]:
        """The snapshot as the admin contract spells it (optional members only when known)."""
        document: dict[str, Any] = {
            "instance": self.instance,
            "profile": self.profile,
            "generation": self.generation,
            "active": self.active,
            "verification": list(self.verification),
            "keys": [_key_json(key) for key in self.keys],
            "max_state_lifetime_ms": self.max_state_lifetime_ms,
            "max_state_rounds": self.max_state_rounds,
            "fingerprint": self.fingerprint.to_json(),
        }
        if self.process_id is not None:
            document["process_id"] = self.process_id
        return document


def _key_json(key: AdminKey) -> dict[str, Any]:
    document: dict[str, Any] = {
        "id": key.id,
        "role": key.role.value,
        "check_value": key.check_value,
        "created": key.created,
        "last_sealed_ms": key.last_sealed_ms,
        "last_opened_ms": key.last_opened_ms,
        "reservations": key.reservations,
    }
    if key.retired is not None:
        document["retired"] = key.retired
    return document


def parse_admin_snapshot(data: bytes) -> AdminSnapshot:
    """Parse a ``GET /v1/keyring`` answer body (strict JSON, at most :data:`MAX_SNAPSHOT_BYTES`).

    Raises :class:`SnapshotError` naming the member that is missing, unknown or of the wrong type, or a key
    listed twice, roles that disagree with ``active``/``verification``, a bad check value or fingerprint.
    """
    try:
        document = parse(data, max_bytes=MAX_SNAPSHOT_BYTES).to_python()
    except JsonError as error:
        raise SnapshotError(f"not strict JSON ({error.reason.value})") from None
    top = _members(document, _TOP, None, _OPTIONAL_TOP)
    keys_value = top["keys"]
    if not isinstance(keys_value, list):
        raise SnapshotError("must be an array", "keys")
    if len(keys_value) > MAX_SNAPSHOT_KEYS:
        raise SnapshotError(f"more than {MAX_SNAPSHOT_KEYS:,} keys", "keys")
    keys = tuple(_key(index, value) for index, value in enumerate(keys_value))
    ids = [key.id for key in keys]
    if len(set(ids)) != len(ids):
        raise SnapshotError("a key id is listed twice", "keys")
    active = _key_id(top["active"], "active")
    verification_value = top["verification"]
    if not isinstance(verification_value, list):
        raise SnapshotError("must be an array", "verification")
    verification = tuple(_key_id(value, f"verification[{index}]") for index, value in enumerate(verification_value))
    roles = {key.id: key.role for key in keys}
    if roles.get(active) is not KeyRoleName.ACTIVE or sum(key.role is KeyRoleName.ACTIVE for key in keys) != 1:
        raise SnapshotError("does not name the one key whose role is active", "active")
    if sorted(verification) != sorted(key.id for key in keys if key.role is KeyRoleName.VERIFICATION):
        raise SnapshotError("does not list exactly the keys whose role is verification", "verification")
    fingerprint_value = top["fingerprint"]
    if not isinstance(fingerprint_value, dict) or set(fingerprint_value) != {"version", "profile", "value"}:
        raise SnapshotError("must be an object of version, profile and value", "fingerprint")
    try:
        fingerprint = Fingerprint.from_json({name: _plain(value) for name, value in fingerprint_value.items()})
    except KeyringError:
        raise SnapshotError("is not a fingerprint (version, profile, base64url SHA-256 value)", "fingerprint") from None
    return AdminSnapshot(
        instance=_text(top["instance"], "instance"),
        profile=_text(top["profile"], "profile"),
        generation=_natural(top["generation"], "generation"),
        active=active,
        verification=verification,
        keys=keys,
        max_state_lifetime_ms=_natural(top["max_state_lifetime_ms"], "max_state_lifetime_ms"),
        max_state_rounds=_natural(top["max_state_rounds"], "max_state_rounds"),
        fingerprint=fingerprint,
        process_id=_process_id(top["process_id"]) if "process_id" in top else None,
    )


def _members(
    value: object, names: tuple[str, ...], where: str | None, optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SnapshotError("must be an object", where)
    for name in names:
        if name not in value:
            raise SnapshotError("missing", f"{where}.{name}" if where else name)
    if len(value) != len(names) + sum(name in value for name in optional):
        raise SnapshotError(f"has members beyond {', '.join(names + optional)}", where)
    return value


def _process_id(value: object) -> str:
    if (
        not isinstance(value, str)
        or not MIN_PROCESS_ID_CHARS <= len(value) <= MAX_PROCESS_ID_CHARS
        or not _BASE64URL.issuperset(value)
    ):
        raise SnapshotError(
            f"must be {MIN_PROCESS_ID_CHARS} to {MAX_PROCESS_ID_CHARS} base64url characters", "process_id"
        )
    return value


def _key(index: int, value: object) -> AdminKey:
    where = f"keys[{index}]"
    members = _members(value, _KEY, where, _OPTIONAL_KEY)
    role_text = members["role"]
    if role_text not in ("active", "verification"):
        raise SnapshotError('must be "active" or "verification"', f"{where}.role")
    check_value = members["check_value"]
    try:
        valid = isinstance(check_value, str) and len(decode_base64url(check_value)) == _CHECK_VALUE_BYTES
    except ValueError:
        valid = False
    if not valid:
        raise SnapshotError("must be a base64url HMAC-SHA256 value", f"{where}.check_value")
    created = members["created"]
    retired = members.get("retired")
    return AdminKey(
        id=_key_id(members["id"], f"{where}.id"),
        role=KeyRoleName(role_text),
        check_value=check_value,
        created=None if created is None else _text(created, f"{where}.created"),
        last_sealed_ms=_optional_natural(members["last_sealed_ms"], f"{where}.last_sealed_ms"),
        last_opened_ms=_optional_natural(members["last_opened_ms"], f"{where}.last_opened_ms"),
        reservations=_natural(members["reservations"], f"{where}.reservations"),
        retired=None if retired is None else _text(retired, f"{where}.retired"),
    )


def _key_id(value: object, where: str) -> str:
    if not is_valid_key_id(value):
        raise SnapshotError("must be a key id (1 to 64 RFC 9110 token characters)", where)
    assert isinstance(value, str)
    return value


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT_CHARS or not value.isprintable():
        raise SnapshotError(f"must be 1 to {_MAX_TEXT_CHARS} printable characters", where)
    return value


# Integers beyond 2**63 are no count or time any instance reports.
_MAX_INTEGER: Final = 2**63 - 1


def _natural(value: object, where: str) -> int:
    if not isinstance(value, Decimal) or value != value.to_integral_value() or not 0 <= value <= _MAX_INTEGER:
        raise SnapshotError("must be a whole number from 0", where)
    return int(value)


def _optional_natural(value: object, where: str) -> int | None:
    return None if value is None else _natural(value, where)


def _plain(value: object) -> object:
    # Fingerprint.from_json wants a Python int version; the JSON model gives a Decimal.
    if isinstance(value, Decimal) and value == value.to_integral_value() and abs(value) <= _MAX_INTEGER:
        return int(value)
    return value
