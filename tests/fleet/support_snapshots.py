"""Snapshots built from real keyrings, spelled as the admin contract's ``GET /v1/keyring`` answer."""

from __future__ import annotations

import json
from typing import Any

from soklet_core.fleet import AdminSnapshot, InstanceReading, parse_admin_snapshot
from soklet_core.keys import PROTECTION_PROFILE, ProtectionKey, ProtectionKeyring

A = ProtectionKey.from_id_and_bytes("2026-08", b"a" * 32)
B = ProtectionKey.from_id_and_bytes("2026-09", b"b" * 32)
B_OTHER = ProtectionKey.from_id_and_bytes("2026-09", b"c" * 32)


def keyring(active: ProtectionKey, *verification: ProtectionKey) -> ProtectionKeyring:
    """A keyring of ``active`` and ``verification``."""
    return ProtectionKeyring(active, [*verification])


def document(ring: ProtectionKeyring, instance: str = "i", *, version: int = 2) -> dict[str, Any]:
    """The admin contract's snapshot document of ``ring``."""
    keys = [ring.active_key, *ring.verification_keys]
    return {
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


def snapshot(ring: ProtectionKeyring, instance: str = "i", *, version: int = 2) -> AdminSnapshot:
    """The parsed snapshot of ``ring``."""
    return parse_admin_snapshot(json.dumps(document(ring, instance, version=version)).encode())


def reading(name: str, ring: ProtectionKeyring | None, *, version: int = 2) -> InstanceReading:
    """A reading of instance ``name``: its snapshot, or refused when ``ring`` is None."""
    if ring is None:
        return InstanceReading(name, f"http://{name}:9001", None, "connection refused")
    return InstanceReading(name, f"http://{name}:9001", snapshot(ring, name, version=version))
