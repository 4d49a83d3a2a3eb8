"""The depth and node limits, checked on the bytes of a document before anything is built from it.

Only for grammatical input (a decoder accepted it, or is about to be asked): string contents are removed by pairing
quotes and escapes, which is exact then. Shared by the strict parser, the msgspec paths and the request-state
codec, which all check the limits this way.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Final

from .limits import MAX_DEPTH, MAX_NODES

__all__ = ["structure_within_limits"]

_KEEP_STRUCTURAL_AND_QUOTES: Final = bytes(b for b in range(256) if b not in b'[]{},"')
_DEPTH_DELTA: Final = [0] * 256
_DEPTH_DELTA[ord("[")] = _DEPTH_DELTA[ord("{")] = 1
_DEPTH_DELTA[ord("]")] = _DEPTH_DELTA[ord("}")] = -1

#: Documents up to this size first try counting their brackets, strings included: few are deep enough to fail.
_COUNT_FIRST_BYTES: Final = 16 * 1024
#: Rounds of peeling empty containers before the depth is counted bracket by bracket.
_PEEL_ROUNDS: Final = 8


def structure_within_limits(raw: bytes) -> bool:
    """Whether a document that the grammar accepted is within the depth and node limits.

    Only for grammatical input: string contents are removed by pairing quotes and escapes, which is exact then.
    """
    # Every value takes at least one byte and every level of nesting two, so small documents need no counting.
    size = len(raw)
    if size <= 2 * MAX_DEPTH + 1:
        return True
    if size <= _COUNT_FIRST_BYTES and raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return True
    if b"\\" in raw:
        # Escapes go first (they pair left to right as a parser reads them).
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    # What remains of quotes then fences exactly the strings, whose contents are dropped with every byte that is
    # not structural.
    bare = raw.translate(None, _KEEP_STRUCTURAL_AND_QUOTES)
    # Contents are gone, so most strings are now '""'. When pairing quotes left to right leaves none over, every
    # string is empty here and the quotes are harmless; else dropping those pairs cannot shift the quote parity.
    quotes = bare.count(b'"')
    if quotes != 2 * bare.count(b'""'):
        bare = bare.replace(b'""', b"")
        bare = b"".join(bare.split(b'"')[::2])
    opened = bare.count(b"[") + bare.count(b"{")
    if size > MAX_NODES:
        # Values = the root + one per comma + one for the first item of each non-empty container.
        nodes = 1 + bare.count(b",") + opened - bare.count(b"[]") - bare.count(b"{}")
        if nodes > MAX_NODES:
            return False
    if opened <= MAX_DEPTH:
        return True
    brackets = bare.translate(None, b'",')
    # Each pass drops only innermost (empty) containers, so it lowers the depth by at most one: when a few passes
    # leave nothing, the depth is at most their number. Real documents are shallow and get here.
    peeled = brackets
    for _ in range(_PEEL_ROUNDS):
        peeled = peeled.replace(b"[]", b"").replace(b"{}", b"")
        if not peeled:
            return True
    return max(accumulate(map(_DEPTH_DELTA.__getitem__, brackets))) <= MAX_DEPTH
