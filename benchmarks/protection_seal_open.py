"""Seal + open of a 1 KiB state for a 1 KiB request: soklet against the AES-GCM floor and the MCP SDK's boundary.

Run: ``bash scripts/bench`` (installs ``requirements/bench.lock``), or ``.venv/bin/python
benchmarks/protection_seal_open.py`` once the ``bench`` extra is installed; ``--quick`` for a smoke run.

Every contender handles the same state and the same request, in one process, rounds interleaved, best-of-N:

* **soklet** — seal leg: stable params digest of the emitting request's bytes, ``bind_request`` (the parsed
  request, as the server holds it, with the version it validated and that digest), ``RequestStateSealer.seal``
  (canonical plaintext, AES-256-GCM under a reserved key). Open leg: digest of the retry's bytes, ``bind_request``,
  ``RequestStateSealer.open`` and the application JSON (``.state``), every opening check included. The request
  itself is parsed outside the legs, as the peer is handed its params already parsed.
* **floor** — AES-256-GCM encrypt + decrypt of the same plaintext (prebuilt cipher) plus one SHA-256 of the params
  bytes: what any design must at least pay.
* **peer** — the official MCP Python SDK (``mcp`` 2.3.0), ``mcp.server.request_state.RequestStateBoundary``: the
  server middleware that seals an ``input_required`` result's ``requestState`` (claims JSON + AES-256-GCM) and
  verifies it on the retry (expiry, method/target/arguments digest, audience, principal). Driven through its public
  ``__call__`` with trivial handlers (the coroutine is stepped directly, no event loop). Its state is a string, so
  it gets the state's canonical JSON text: it seals the same bytes but never parses them, which favours the peer.

Targets: soklet seal + open ≤ 1.5 × peer seal + verify (issue 23), and issue 10's ≤ 0.8 ×. Every contender is
timed in CPU time, in short batches (250 calls) many times over, interleaved, and its best batch kept: on a busy
machine a long batch is rarely left alone for its whole length, a short one often is. The phases of soklet's two
legs are timed apart too (digest, binding, codec write, AEAD seal and open with the envelope, codec read, the
opening checks), so the figures show where the time goes.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from soklet_core.json import JsonValue, canonical_bytes, canonical_text, params_digest, parse
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.protection import (
    ANONYMOUS_PARTITION,
    BoundRequest,
    ProtectionConfig,
    RequestStateProtectionContext,
    RequestStateSealer,
    SealedStateContents,
    bind_request,
)
from soklet_core.protocol import PROTOCOL_VERSION, PROTOCOL_VERSION_META_KEY

KIB = 1024


def request_document(request_id: int, *, retry: bool) -> dict[str, Any]:
    """A realistic tools/call request of about 1 KiB (the retry adds inputResponses and a requestState)."""
    params: dict[str, Any] = {
        "name": "catalog.checkout",
        "arguments": {
            "sku": "A-100-BLUE",
            "quantity": 3,
            "unitPrice": "19.99",
            "note": "Deliver to the loading dock — ask for Zoë at reception, not the front desk.",
            "tags": ["priority", "fragile", "weekday-only", "gift-wrap"],
            "dimensions": {"width": 12.5, "height": 30, "depth": 4.25, "unit": "cm"},
            "history": [{"at": 1764480000000, "event": "created"}, {"at": 1764480123456, "event": "priced"}],
            "address": {"street": "1 Harbour Road", "city": "Portsmouth", "postcode": "PO1 3LJ", "country": "GB"},
            "instructions": "Leave with the concierge if nobody answers; call ahead on weekdays before noon.",
        },
        "_meta": {
            PROTOCOL_VERSION_META_KEY: PROTOCOL_VERSION,
            "progressToken": f"tok-{request_id}",
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "clientCapabilities": {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}},
            "clientInfo": {"name": "bench-client", "version": "1.0.0"},
        },
    }
    if retry:
        params["inputResponses"] = {"confirm": {"action": "accept", "content": {"ok": True}}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def state_value() -> JsonValue:
    """An application state of about 1 KiB (canonical bytes)."""
    items = [{"sku": f"A-{i}00-BLUE", "qty": i + 1, "price": "19.99", "note": "gift wrap"} for i in range(14)]
    return JsonValue.from_python(
        {"phase": "awaiting-confirmation", "step": 2, "deadline": 1785543300000, "cart": items, "who": "Zoë"}
    )


def best(function: Callable[[], object], number: int, repeat: int) -> float:
    """Best per-call CPU time in seconds over ``repeat`` runs of ``number`` calls.

    CPU time of this process (every contender is single-threaded): the other processes of a busy machine take
    turns on its cores, which inflates wall time but not this.
    """
    times = []
    for _ in range(repeat):
        gc.disable()
        start = time.process_time()
        for _ in range(number):
            function()
        times.append((time.process_time() - start) / number)
        gc.enable()
    return min(times)


def step(coroutine: Any) -> Any:
    """Run a coroutine that never awaits anything pending: one send, then its return value."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the coroutine suspended")


def peer_contenders(first: dict[str, Any], retry: dict[str, Any], state_text: str) -> dict[str, Callable[[], object]]:
    """The MCP SDK's seal and verify legs, or {} when the ``mcp`` package is absent."""
    try:
        from mcp.server.context import ServerRequestContext
        from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
    except ImportError:
        return {}
    boundary = RequestStateBoundary(RequestStateSecurity(keys=[os.urandom(32)], ttl=900.0), default_audience="bench")

    async def emit(ctx: Any) -> dict[str, Any]:
        return {
            "resultType": "input_required",
            "inputRequests": {"confirm": {"method": "elicitation/create", "params": {"message": "ok?"}}},
            "requestState": state_text,
        }

    async def complete(ctx: Any) -> dict[str, Any]:
        assert ctx.params["requestState"] == state_text
        return {"content": [{"type": "text", "text": "done"}]}

    def context(request: dict[str, Any]) -> Any:
        return ServerRequestContext(
            session=None,  # type: ignore[arg-type]
            lifespan_context={},
            protocol_version=PROTOCOL_VERSION,
            method=request["method"],
            params=request["params"],
            request_id=request["id"],
        )

    first_ctx = context(first)
    token = step(boundary(first_ctx, emit))["requestState"]
    retry_ctx = context({**retry, "params": {**retry["params"], "requestState": token}})
    assert step(boundary(retry_ctx, complete))["content"]
    return {
        "peer seal": lambda: step(boundary(first_ctx, emit)),
        "peer verify": lambda: step(boundary(retry_ctx, complete)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    arguments = parser.parse_args()
    number, rounds = (200, 2) if arguments.quick else (250, 56)

    first, retry = request_document(41, retry=False), request_document(42, retry=True)
    first_bytes = json.dumps(first, ensure_ascii=False).encode()
    retry_bytes = json.dumps(retry, ensure_ascii=False).encode()
    state = state_value()
    state_text = canonical_text(state)

    keyring = ProtectionKeyring(ProtectionKey.generate("2026-08"))
    sealer = RequestStateSealer(ProtectionConfig(keyring=keyring))
    first_request, retry_request = parse(first_bytes), parse(retry_bytes)

    def bound(data: bytes, request: JsonValue) -> BoundRequest:
        digest = params_digest(data, whole_request=True)
        return bind_request(
            request, path="/mcp", partition=ANONYMOUS_PARTITION, protocol_version=PROTOCOL_VERSION, params_digest=digest
        )

    token = sealer.seal(state, bound(first_bytes, first_request))
    assert sealer.open(token, bound(retry_bytes, retry_request)).state == state
    contents = sealer.diagnose(token).contents
    assert contents is not None
    plaintext = contents.plaintext()
    cached_first, cached_retry = bound(first_bytes, first_request), bound(retry_bytes, retry_request)
    first_digest = params_digest(first_bytes, whole_request=True)
    state_bytes = canonical_bytes(state)
    context = RequestStateProtectionContext.framework()
    protector = sealer.protector

    aead = AESGCM(os.urandom(32))
    nonce = os.urandom(12)
    params_bytes = json.dumps(first["params"], ensure_ascii=False).encode()

    contenders: dict[str, Callable[[], object]] = {
        "soklet seal": lambda: sealer.seal(state, bound(first_bytes, first_request)),
        "soklet open": lambda: sealer.open(token, bound(retry_bytes, retry_request)).state,
        "floor": lambda: (
            aead.decrypt(nonce, aead.encrypt(nonce, plaintext, b"ad"), b"ad"),
            hashlib.sha256(params_bytes).digest(),
        ),
    }
    contenders.update(peer_contenders(first, retry, state_text))
    # The phases of soklet's legs (each leg runs digest and binding once).
    phases: dict[str, Callable[[], object]] = {
        "digest (emitting request)": lambda: params_digest(first_bytes, whole_request=True),
        "digest (retry)": lambda: params_digest(retry_bytes, whole_request=True),
        "binding (digest given)": lambda: bind_request(
            first_request,
            path="/mcp",
            partition=ANONYMOUS_PARTITION,
            protocol_version=PROTOCOL_VERSION,
            params_digest=first_digest,
        ),
        "seal, binding given": lambda: sealer.seal(state, cached_first),
        "  codec write (plaintext)": contents.plaintext,
        "    of which canonical_bytes(state)": lambda: canonical_bytes(state),
        "  AEAD seal (envelope)": lambda: protector.seal(plaintext, context),
        "open, binding given": lambda: sealer.open(token, cached_retry).state,
        "  AEAD open (envelope)": lambda: protector.open(token, context),
        "  codec read (plaintext)": lambda: SealedStateContents.from_plaintext(plaintext),
        "    of which parse(state)": lambda: parse(state_bytes),
    }
    contenders.update(phases)

    times = {name: float("inf") for name in contenders}
    for _ in range(rounds):  # interleaved, so a noisy moment hits every contender alike
        for name, function in contenders.items():
            times[name] = min(times[name], best(function, number, 1))

    print(
        f"request {len(first_bytes):,} B, retry {len(retry_bytes):,} B, state {len(state_text.encode()):,} B "
        f"canonical, plaintext {len(plaintext):,} B, token {len(token):,} chars; best of {rounds} × {number}"
    )
    for name, seconds in times.items():
        if name not in phases:
            print(f"  {name:<36} {seconds * 1e6:9.2f} µs")
    soklet = times["soklet seal"] + times["soklet open"]
    print(f"  {'soklet seal + open':<36} {soklet * 1e6:9.2f} µs   {soklet / times['floor']:6.1f}× the floor")
    print("soklet phases (µs, and share of seal + open):")
    checks = times["open, binding given"] - times["  AEAD open (envelope)"] - times["  codec read (plaintext)"]
    rows = [*((name, times[name]) for name in phases), ("  opening checks (the rest)", checks)]
    for name, seconds in rows:
        print(f"  {name:<36} {seconds * 1e6:9.2f} µs   {seconds / soklet:6.1%}")
    json_layer = sum(
        times[name]
        for name in (
            "digest (emitting request)",
            "digest (retry)",
            "    of which canonical_bytes(state)",
            "    of which parse(state)",
        )
    )
    print(f"  {'the JSON layer (digests, state codec)':<36} {json_layer * 1e6:9.2f} µs   {json_layer / soklet:6.1%}")
    if "peer seal" in times:
        peer = times["peer seal"] + times["peer verify"]
        ratio = soklet / peer
        print(f"  {'peer seal + verify':<36} {peer * 1e6:9.2f} µs   {peer / times['floor']:6.1f}× the floor")
        print(
            f"ratio soklet / peer: {ratio:.2f}×   (seal {times['soklet seal'] / times['peer seal']:.2f}×, "
            f"open {times['soklet open'] / times['peer verify']:.2f}×)"
        )
        for target in (1.5, 0.8):
            print(f"target soklet seal + open ≤ {target}× peer seal + verify: {'MET' if ratio <= target else 'MISSED'}")
    else:
        print("peer: the mcp package is not installed (bash scripts/bench installs requirements/bench.lock)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
