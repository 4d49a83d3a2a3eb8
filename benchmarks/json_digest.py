"""Strict parse and params digest against ``json.loads`` of the same bytes, in one run.

Run: ``.venv/bin/python benchmarks/json_digest.py`` (add ``--quick`` for a short smoke run).

Prints, for a 1 KiB ``tools/call`` request and a 10 MiB params document with many numbers and strings, the
best-of-N time of each contender and its ratio to ``json.loads`` measured in the same run, then the peak
traced memory of the 10 MiB digest against ``json.loads(..., parse_float=Decimal, parse_int=Decimal)``.
Targets (issue 10): 10 MiB digest ≤ 3×, 1 KiB digest ≤ 3×, digest peak ≤ the Decimal-loads peak. The
"cooperative" line is the digest the server takes of a body over 64 KiB (in a worker thread, a Python-level number
hook so the event loop gets the GIL). Up to 16 MiB a digest that is not cooperative goes through msgspec
(``soklet_core/json/msgspec_canonical.py``); the "exact path only" line is the path the cooperative digest, every
larger document and every doubtful one take. The "floor" line (C decode, C sorted re-encode, SHA-256; lossy on numbers,
no strictness) shows what no stdlib-based exact digest can undercut.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import time
import tracemalloc
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from soklet_core.json import params_digest, parse
from soklet_core.json.canonical import load_canonical_tree

MIB = 1024 * 1024


def small_request() -> bytes:
    """A realistic ~1 KiB MCP tools/call request."""
    request = {
        "jsonrpc": "2.0",
        "id": 42,
        "method": "tools/call",
        "params": {
            "name": "catalog.continue",
            "arguments": {
                "sku": "A-100-BLUE",
                "quantity": 3,
                "unitPrice": 19.99,
                "discount": 0.15,
                "note": "Deliver to the loading dock — ask for Zoë at reception, not the front desk.",
                "tags": ["priority", "fragile", "weekday-only", "gift-wrap"],
                "dimensions": {"width": 12.5, "height": 30, "depth": 4.25, "unit": "cm"},
                "history": [{"at": 1764480000000, "event": "created"}, {"at": 1764480123456, "event": "priced"}],
            },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "progressToken": "tok-7f3a",
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "io.modelcontextprotocol/clientCapabilities": {
                    "elicitation": {"form": {}, "url": {}},
                    "sampling": {},
                    "roots": {},
                },
                "io.modelcontextprotocol/clientInfo": {"name": "bench-client", "version": "1.0.0"},
            },
        },
    }
    text = json.dumps(request, ensure_ascii=False, indent=1)
    return text.encode("utf-8")


_WORDS = ["alpha", "beta", "gamma", "delta", "épsilon", "zeta", "eta", "theta", "ïota", "kappa", "λambda", "mu"]


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _mixed_row(rng: random.Random, index: int) -> str:
    """A catalogue record: text fields of realistic length beside prices, counts and timestamps."""
    weight = f"{rng.randrange(1, 99)}e{rng.randrange(-3, 4)}" if index % 20 == 0 else f"{rng.randrange(1, 9999) / 100}"
    return (
        f'{{"id":{index},"sku":"{rng.choice(_WORDS)}-{rng.randrange(10_000)}","price":{rng.randrange(1, 1000)}.'
        f'{rng.randrange(100):02d},"qty":{rng.randrange(0, 500)},"weight":{weight},'
        f'"updated":{1764480000000 + rng.randrange(10**9)},"name":"{_sentence(rng, 3)}",'
        f'"description":"{_sentence(rng, rng.randrange(8, 16))}",'
        f'"tags":["{rng.choice(_WORDS)}","{rng.choice(_WORDS)}"],'
        f'"ok":{"true" if rng.random() < 0.5 else "false"},"extra":null}}'
    )


def _dense_row(rng: random.Random, index: int) -> str:
    """A worst case for number spelling: short strings and many numbers, one in six with an exponent."""
    return (
        f'{{"id":{index},"sku":"{rng.choice(_WORDS)}-{rng.randrange(10_000)}","price":{rng.randrange(1, 1000)}.'
        f'{rng.randrange(100):02d},"qty":{rng.randrange(0, 500)},'
        f'"weight":{rng.randrange(1, 99)}e{rng.randrange(-3, 4)},'
        f'"ratio":0.{rng.randrange(1, 10**6)},"name":"{rng.choice(_WORDS)} {rng.choice(_WORDS)}",'
        f'"tags":["{rng.choice(_WORDS)}","{rng.choice(_WORDS)}"],"ok":{"true" if rng.random() < 0.5 else "false"},'
        f'"extra":null}}'
    )


def large_params(target: int, *, dense: bool = False, seed: int = 7) -> bytes:
    """A params object of about ``target`` bytes holding an array of records (see the two row shapes)."""
    rng = random.Random(seed)
    make_row = _dense_row if dense else _mixed_row
    rows: list[str] = []
    size = 0
    while size < target:
        row = make_row(rng, len(rows))
        rows.append(row)
        size += len(row.encode("utf-8")) + 1
    document = (
        '{"name":"catalog.import","arguments":{"rows":['
        + ",".join(rows)
        + ']},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}'
    )
    return document.encode("utf-8")


def naive_digest(data: bytes) -> bytes:
    """The obvious exact approach: Decimal-walking canonicalizer in Python, then SHA-256."""

    def canon(value: Any) -> str:
        if isinstance(value, dict):
            items = sorted(value.items(), key=lambda item: item[0].encode("utf-16-be"))
            return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canon(v) for k, v in items) + "}"
        if isinstance(value, list):
            return "[" + ",".join(canon(v) for v in value) + "]"
        if isinstance(value, Decimal):
            if not value:
                return "0"
            sign, digits, exponent = value.as_tuple()
            end = len(digits)
            while digits[end - 1] == 0:
                end -= 1
            return str(Decimal((sign, digits[:end], int(exponent) + len(digits) - end)))
        return json.dumps(value, ensure_ascii=False)

    tree = json.loads(data, parse_float=Decimal, parse_int=Decimal)
    return hashlib.sha256(canon(tree).encode("utf-8")).digest()


_FLOOR_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False)


def floor_digest(data: bytes) -> bytes:
    """What any stdlib-based canonical digest pays at least: C decode, C sorted re-encode, SHA-256 (lossy numbers)."""
    return hashlib.sha256(_FLOOR_ENCODER.encode(json.loads(data)).encode("utf-8")).digest()


def best_of(fn: Callable[[], object], repeat: int, number: int) -> float:
    """Best mean seconds per call over ``repeat`` batches of ``number`` calls."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - start) / number)
    return best


def peak_bytes(fn: Callable[[], object]) -> int:
    """Peak traced allocation while ``fn`` runs (its result is dropped inside the measurement)."""
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def measure(label: str, data: bytes, repeat: int, number: int, *, with_naive: bool) -> dict[str, float]:
    contenders: dict[str, Callable[[], object]] = {
        "json.loads": lambda: json.loads(data),
        "soklet parse (strict, value model)": lambda: parse(data),
        "soklet params_digest": lambda: params_digest(data),
        "soklet params_digest, exact path only": lambda: params_digest(load_canonical_tree(data)),
        "soklet params_digest, cooperative": lambda: params_digest(data, cooperative=True),
        "floor: loads + sorted C encode + SHA-256": lambda: floor_digest(data),
    }
    if with_naive:
        contenders["naive Decimal canonicalizer + SHA-256"] = lambda: naive_digest(data)
    # Rounds interleave the contenders, so a noisy moment on this shared machine hits all of them alike.
    times = {name: float("inf") for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            times[name] = min(times[name], best_of(fn, 1, number))
    base = times["json.loads"]
    print(f"\n{label} ({len(data):,} bytes), best of {repeat} × {number}")
    for name, seconds in times.items():
        print(f"  {name:42s} {seconds * 1e3:10.3f} ms   {seconds / base:6.2f}× json.loads")
    return {name: seconds / base for name, seconds in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, smaller large document")
    args = parser.parse_args()
    small = small_request()
    large = large_params(MIB if args.quick else 10 * MIB)
    assert params_digest(small).text
    assert params_digest(large).text
    small_ratios = measure("1 KiB tools/call request", small, 3 if args.quick else 7, 2000, with_naive=True)
    large_ratios = measure("10 MiB params document (mixed records)", large, 2 if args.quick else 5, 1, with_naive=True)
    dense = large_params(len(large), dense=True)
    measure("10 MiB params document (number-dense worst case)", dense, 2 if args.quick else 3, 1, with_naive=True)

    loads_peak = peak_bytes(lambda: json.loads(large, parse_float=Decimal, parse_int=Decimal))
    digest_peak = peak_bytes(lambda: params_digest(large))
    print(f"\npeak traced memory on the {len(large):,}-byte document")
    print(f"  json.loads(parse_float=Decimal, parse_int=Decimal) {loads_peak / MIB:8.1f} MiB")
    print(
        f"  soklet params_digest                               {digest_peak / MIB:8.1f} MiB"
        f"   {digest_peak / loads_peak:5.2f}× the Decimal loads peak"
    )

    print("\ntargets")
    checks = [
        ("10 MiB digest ≤ 3× json.loads", large_ratios["soklet params_digest"] <= 3.0),
        ("10 MiB cooperative digest ≤ 3× json.loads", large_ratios["soklet params_digest, cooperative"] <= 3.0),
        ("1 KiB digest ≤ 3× json.loads", small_ratios["soklet params_digest"] <= 3.0),
        ("10 MiB digest peak ≤ Decimal-loads peak", digest_peak <= loads_peak),
    ]
    for text, ok in checks:
        print(f"  {'met ' if ok else 'MISS'}  {text}")


if __name__ == "__main__":
    main()
