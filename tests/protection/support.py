"""Shared helpers for the protection tests: a settable clock, fixed nonces, keyrings and MCP requests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from soklet_core.json import JsonValue
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.protection import (
    ANONYMOUS_PARTITION,
    BoundRequest,
    ProtectionConfig,
    RequestStateSealer,
    bind_request,
)

#: 2026-08-01T00:00:00Z in epoch milliseconds.
T0 = 1_785_542_400_000
MINUTE = 60_000


@dataclass
class Clock:
    """A clock the test moves by hand (epoch milliseconds)."""

    now: int = T0

    def __call__(self) -> int:
        return self.now


def key(key_id: str, fill: int | None = None) -> ProtectionKey:
    """A key with id ``key_id``: fixed material ``bytes([fill] * 32)`` when ``fill`` is given, else random."""
    if fill is None:
        return ProtectionKey.generate(key_id)
    return ProtectionKey.from_id_and_bytes(key_id, bytes([fill]) * 32)


def keyring(active: ProtectionKey, *verification: ProtectionKey) -> ProtectionKeyring:
    return ProtectionKeyring(active, [*verification])


def sealer_for(ring: ProtectionKeyring, clock: Clock | None = None, **limits: Any) -> tuple[RequestStateSealer, Clock]:
    """A sealer over ``ring`` with a hand clock; ``limits`` are :class:`ProtectionConfig` keywords."""
    clock = clock or Clock()
    return RequestStateSealer(ProtectionConfig(keyring=ring, **limits), clock=clock), clock


def request(
    request_id: Any = 1,
    *,
    method: str = "tools/call",
    name: str = "checkout.continue",
    arguments: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    **extra_params: Any,
) -> bytes:
    """A ``tools/call`` JSON-RPC request as bytes."""
    params: dict[str, Any] = {
        "name": name,
        "arguments": arguments if arguments is not None else {"sku": "A-100", "quantity": 3},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "clientCapabilities": {"elicitation": {"form": {}}},
        },
    }
    if meta:
        params["_meta"].update(meta)
    params.update(extra_params)
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()


def bound(
    data: bytes | None = None,
    *,
    path: str = "/mcp",
    partition: str = ANONYMOUS_PARTITION,
    protocol_version: str | None = None,
) -> BoundRequest:
    return bind_request(
        data if data is not None else request(), path=path, partition=partition, protocol_version=protocol_version
    )


def state(data: Any) -> JsonValue:
    return JsonValue.from_python(data)
