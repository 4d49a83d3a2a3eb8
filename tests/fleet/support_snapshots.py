"""Snapshots built from real keyrings, spelled as the admin contract's ``GET /v1/keyring`` answer."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from soklet_core.fleet import AdminSnapshot, InstanceReading, parse_admin_snapshot
from soklet_core.keys import PROTECTION_PROFILE, ProtectionKey, ProtectionKeyring, encode_base64url

A = ProtectionKey.from_id_and_bytes("2026-08", b"a" * 32)
B = ProtectionKey.from_id_and_bytes("2026-09", b"b" * 32)
B_OTHER = ProtectionKey.from_id_and_bytes("2026-09", b"c" * 32)


def keyring(active: ProtectionKey, *verification: ProtectionKey) -> ProtectionKeyring:
    """A keyring of ``active`` and ``verification``."""
    return ProtectionKeyring(active, [*verification])


def process_id_of(instance: str) -> str:
    """A process identity of the contract's shape, one per ``instance`` name (a test's stand-in for a process)."""
    return encode_base64url(hashlib.sha256(instance.encode()).digest()[:16])


def document(
    ring: ProtectionKeyring,
    instance: str = "i",
    *,
    version: int = 2,
    process_id: str | None = None,
    legacy: bool = False,
    retired: str | None = None,
) -> dict[str, Any]:
    """The admin contract's snapshot document of ``ring``: its ``process_id`` is ``process_id`` or one derived
    from ``instance``, none when ``legacy`` (an older build); ``retired`` is given to every verification key."""
    keys = [ring.active_key, *ring.verification_keys]
    built: dict[str, Any] = {
        "instance": instance,
        "profile": PROTECTION_PROFILE,
        "generation": 3,
        "active": ring.active_key.id,
        "verification": [key.id for key in ring.verification_keys],
        "keys": [
            {
                "id": key.id,
                "role": "active" if key is ring.active_key else "verification",
                "check_value": key.check_value_text,
                "created": "2026-08-01T00:00:00Z",
                "last_sealed_ms": None,
                "last_opened_ms": 1_785_000_000_000,
                "reservations": 0,
            }
            for key in keys
        ],
        "max_state_lifetime_ms": 900_000,
        "max_state_rounds": 8,
        "fingerprint": ring.fingerprint(version).to_json(),
    }
    if retired is not None:
        for key in built["keys"][1:]:
            key["retired"] = retired
    if not legacy:
        built["process_id"] = process_id or process_id_of(instance)
    return built


def snapshot(
    ring: ProtectionKeyring,
    instance: str = "i",
    *,
    version: int = 2,
    process_id: str | None = None,
    legacy: bool = False,
) -> AdminSnapshot:
    """The parsed snapshot of ``ring``."""
    built = document(ring, instance, version=version, process_id=process_id, legacy=legacy)
    return parse_admin_snapshot(json.dumps(built).encode())


def reading(
    name: str,
    ring: ProtectionKeyring | None,
    *,
    version: int = 2,
    instance: str | None = None,
    process_id: str | None = None,
    legacy: bool = False,
) -> InstanceReading:
    """A reading of the listing ``name``: the snapshot of ``instance`` (default: ``name``), or refused when
    ``ring`` is None."""
    if ring is None:
        return InstanceReading(name, f"http://{name}:9001", None, "connection refused")
    shown = snapshot(ring, instance or name, version=version, process_id=process_id, legacy=legacy)
    return InstanceReading(name, f"http://{name}:9001", shown)
