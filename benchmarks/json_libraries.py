"""msgspec and orjson against the standard library, where soklet's JSON rules could let them in.

Run: ``.venv/bin/python benchmarks/json_libraries.py`` (``--quick`` for a short run). ``msgspec`` is a dependency
of soklet since this comparison (the digest of small documents and the wire encoding use it, behind differential
tests: ``docs/json.md``); ``orjson`` is not, and is reported and skipped when it is not installed.

Three parts, all in one run:

* **strictness** — what each decoder does with what soklet must refuse or keep exact: duplicate member names, lone
  surrogates (escaped and as UTF-8 bytes), integers past 64 bits and past 1,024 digits, the spelling of decimals,
  ``-0``, nesting past 256. A library can only stand in where every answer is "refused" or "exact".
* **speed** — best-of-N per call, ratios to the stdlib in the same run: decoding a 1 KiB ``tools/call`` request
  (stdlib ``json.loads`` with ``Decimal`` hooks as the exact reference, soklet ``parse``), and encoding a plain
  wire response (``str``/``int``/``bool``/``None`` dicts and lists, what results and errors are) with the C
  encoder soklet uses against ``orjson.dumps`` and ``msgspec.json.encode``.
* **agreement** — the fast encoders against the stdlib C encoder on generated wire structures (control characters,
  U+2028, quotes, backslashes, supplementary characters, 80-digit integers), and ``msgspec``'s ``Decimal``
  decoding against ``json.loads(parse_float=Decimal, parse_int=Decimal)`` on generated documents (60-digit numbers,
  exponents at ±10,000): the bytes, or the exact values, must be identical.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import timeit
from collections.abc import Callable
from decimal import Decimal
from types import ModuleType
from typing import Any

from json_digest import small_request

from soklet_core.json import parse

_STDLIB_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False)


def optional(name: str) -> ModuleType | None:
    """The module, or None (reported) when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        print(f"  {name}: not installed, skipped")
        return None


def outcome(fn: Callable[[], Any]) -> str:
    """What a decoder made of one input, in a few words."""
    try:
        value = fn()
    except RecursionError:
        return "refused (recursion)"
    except Exception as error:  # any refusal counts; its type is shown
        return f"refused ({type(error).__name__})"
    return "accepted: " + repr(value)[:40]


STRICTNESS_INPUTS: list[tuple[str, bytes]] = [
    ("duplicate member", b'{"a":1,"a":2}'),
    ("duplicate member, escaped", b'{"a":1,"\\u0061":2}'),
    ("lone surrogate, escaped", b'["\\ud800"]'),
    ("lone low surrogate, escaped", b'["\\udc00x"]'),
    ("surrogate as UTF-8 bytes", b'["\xed\xa0\x80"]'),
    ("integer past 64 bits", b"[18446744073709551616]"),
    ("integer of 1,025 digits", b"[" + b"1" * 1025 + b"]"),
    ("decimal 1.50 (scale)", b"[1.50]"),
    ("-0", b"[-0]"),
    ("exponent 1e10001", b"[1e10001]"),
    ("nesting 300 deep", b"[" * 300 + b"]" * 300),
]


def strictness(msgspec: ModuleType | None, orjson: ModuleType | None) -> None:
    decoders: dict[str, Callable[[bytes], Any]] = {
        "json.loads(Decimal hooks)": lambda data: json.loads(data, parse_float=Decimal, parse_int=Decimal),
        "soklet parse": lambda data: parse(data).to_python(),
    }
    if msgspec is not None:
        exact = msgspec.json.Decoder(float_hook=Decimal)
        decoders["msgspec Decoder(float_hook=Decimal)"] = exact.decode
    if orjson is not None:
        decoders["orjson.loads"] = orjson.loads
    print("\nstrictness (soklet must refuse the first five and the 1,025 digits, the exponent and the nesting)")
    for label, data in STRICTNESS_INPUTS:
        print(f"  {label}")
        for name, decode in decoders.items():
            print(f"    {name:38s} {outcome(lambda decode=decode, data=data: decode(data))}")


def best(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Best seconds per call."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def wire_response() -> dict[str, Any]:
    """A plain ~600-byte tools/call response: what results are serialised from."""
    return {
        "jsonrpc": "2.0",
        "id": 42,
        "result": {
            "content": [{"type": "text", "text": "Deliver to the loading dock — ask for Zoë at reception. " * 6}],
            "isError": False,
            "structuredContent": {"sku": "A-100", "qty": 3, "ok": True, "note": None, "tags": ["a", "b", "c"] * 5},
        },
    }


def speed(msgspec: ModuleType | None, orjson: ModuleType | None, rounds: int) -> None:
    request = small_request()
    decode: dict[str, Callable[[], object]] = {
        "json.loads": lambda: json.loads(request),
        "json.loads(Decimal hooks)": lambda: json.loads(request, parse_float=Decimal, parse_int=Decimal),
        "soklet parse (strict, value model)": lambda: parse(request),
    }
    if msgspec is not None:
        exact = msgspec.json.Decoder(float_hook=Decimal)
        decode["msgspec Decoder(float_hook=Decimal)"] = lambda: exact.decode(request)
    if orjson is not None:
        decode["orjson.loads (lossy floats)"] = lambda: orjson.loads(request)
    response = wire_response()
    encode: dict[str, Callable[[], object]] = {
        "stdlib C encoder + UTF-8": lambda: _STDLIB_ENCODER.encode(response).encode("utf-8"),
    }
    if orjson is not None:
        encode["orjson.dumps"] = lambda: orjson.dumps(response)
    if msgspec is not None:
        encoder = msgspec.json.Encoder()
        encode["msgspec Encoder.encode"] = lambda: encoder.encode(response)
    for title, contenders, base in (
        (f"decode a {len(request):,}-byte tools/call request", decode, "json.loads"),
        (f"encode a {len(_STDLIB_ENCODER.encode(response).encode()):,}-byte wire response", encode, None),
    ):
        times = {name: float("inf") for name in contenders}
        for _ in range(rounds):
            for name, fn in contenders.items():
                times[name] = min(times[name], best(fn, 1000, 3))
        reference = times[base] if base else next(iter(times.values()))
        label = base or next(iter(times))
        print(f"\n{title}")
        for name, seconds in times.items():
            print(f"  {name:38s} {seconds * 1e6:8.2f} us   {seconds / reference:5.2f}× {label}")


_TRICKY = ["\x00", "\x01", "\x1f", "\x7f", "\b", "\t", "\n", "\f", "\r", '"', "\\", "/", "\u2028", "é", "\U0001f600"]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice([*_TRICKY, "a", "Z", " ", "λ"]) for _ in range(rng.randrange(0, 12)))


def _wire(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return _text(rng)
    if kind == 1:
        return rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randrange(-(10**80), 10**80)])
    if kind == 2:
        return rng.choice([True, False])
    if kind in (3, 4):
        return None if kind == 3 else rng.randrange(-1000, 1000)
    if kind == 5:
        return [_wire(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    return {_text(rng): _wire(rng, depth + 1) for _ in range(rng.randrange(0, 5))}


def _number_token(rng: random.Random) -> str:
    digits = str(rng.randrange(1, 10 ** rng.randrange(1, 61)))
    token = ("-" if rng.random() < 0.3 else "") + digits
    if rng.random() < 0.5:
        token += "." + str(rng.randrange(10**30)).zfill(rng.randrange(1, 40))
    if rng.random() < 0.4:
        token += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.choice([0, 7, 9_999, 10_000]))
    return token


def _plain(value: Any) -> Any:
    """Ints as Decimal, so the two decoders' exact values compare alike."""
    if isinstance(value, dict):
        return {name: _plain(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    return value


def agreement(msgspec: ModuleType | None, orjson: ModuleType | None, cases: int) -> None:
    rng = random.Random(10)
    print(f"\nagreement on {cases:,} generated structures")
    encoders: dict[str, Callable[[Any], bytes]] = {}
    if orjson is not None:
        encoders["orjson.dumps"] = orjson.dumps
    if msgspec is not None:
        encoders["msgspec.json.encode"] = msgspec.json.encode
    results = {name: [0, 0, 0] for name in encoders}  # same bytes, other bytes, refused
    for _ in range(cases):
        value = _wire(rng)
        expected = _STDLIB_ENCODER.encode(value).encode("utf-8")
        for name, encode in encoders.items():
            try:
                results[name][0 if encode(value) == expected else 1] += 1
            except (TypeError, OverflowError):
                results[name][2] += 1
    for name, (same, other, refused) in results.items():
        print(f"  encode {name:30s} same bytes {same:6,}   other bytes {other:4,}   refused {refused:5,}")
    if msgspec is not None:
        exact = msgspec.json.Decoder(float_hook=Decimal)
        same = other = 0
        for _ in range(cases):
            document = "[" + ",".join(_number_token(rng) for _ in range(rng.randrange(1, 8))) + "]"
            reference = json.loads(document, parse_float=Decimal, parse_int=Decimal)
            decoded = _plain(exact.decode(document))
            if [(str(a), a) for a in reference] == [(str(b), b) for b in decoded]:
                same += 1
            else:
                other += 1
        print(f"  decode msgspec(float_hook=Decimal)   same values and spelling {same:6,}   other {other:4,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and generated cases")
    args = parser.parse_args()
    print("libraries")
    msgspec = optional("msgspec")
    orjson = optional("orjson")
    for module in (msgspec, orjson):
        if module is not None:
            print(f"  {module.__name__} {getattr(module, '__version__', '?')}")
    strictness(msgspec, orjson)
    speed(msgspec, orjson, 2 if args.quick else 7)
    agreement(msgspec, orjson, 500 if args.quick else 20_000)


if __name__ == "__main__":
    main()
