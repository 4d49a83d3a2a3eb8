"""Long arrays of plain numbers, found in a large document's text before it is decoded, so they are held packed.

A decoder makes one object per number: about 150 bytes for a ``JsonNumber`` and its ``Decimal``, 60 for the text
the digest keeps, against the 7 bytes a decimal such as ``1.0001`` takes in the body. Arrays of at least
:data:`PACKED_FROM_NUMBERS` numbers without an exponent part (``[1.25,3,-0.5,...]``, no whitespace) are cut out of
the text first and replaced by a one-item array holding a placeholder string; the decoder only sees the rest, and
the caller puts the packed array back where the placeholder stands: chunks of the array's own text, up to
:data:`CHUNK_NUMBERS` tokens each (the value model's packed ``JsonArray`` builds a ``JsonNumber`` when an item is
read, the canonical tree holds the chunks respelled).

Only for a document the structure check passed and the decoder is about to decode: a placeholder is a string of
two lone surrogates around a number, which no valid document holds, so it never meets a string of the input; an
array found inside a string (the quotes before it are odd in number) is left where it is. Every token taken is
valid and within the number limits (the pattern is the reference scanner's, without exponents, and at most
1,024 characters), so packing never changes what is refused; values and nodes stay where they were.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from .numbers import PLAIN_NUMBER_ITEM
from .regex_support import POSSESSIVE_REPEATS_WORK

__all__ = [
    "CHUNK_NUMBERS",
    "PACKED_FROM_BYTES",
    "PACKED_FROM_NUMBERS",
    "PackedText",
    "pack_number_arrays",
    "placeholder",
]

#: Documents up to this size are decoded as they are: their arrays are small, and looking costs a pass.
PACKED_FROM_BYTES: Final = 64 * 1024
#: Arrays of fewer numbers are decoded as they are.
PACKED_FROM_NUMBERS: Final = 64
#: Most tokens one chunk (and one regular expression match, holding the GIL: a few ms) covers.
CHUNK_NUMBERS: Final = 2_048

# An opening bracket followed by at least PACKED_FROM_NUMBERS number-like items (checked exactly while chunking):
# documents of many small arrays cost one bounded look-ahead each, no Python step.
# Possessive: each item ends at its comma, so an iteration never has another way to end.
# Up to CHUNK_NUMBERS tokens; the separators are a fixed comma, so the repetition cannot overlap. Possessive: a
# finished chunk gives nothing back, so the engine keeps no backtracking state per token (regex_support).
_CANDIDATE: re.Pattern[str]
_CHUNK: re.Pattern[str]
if POSSESSIVE_REPEATS_WORK:
    _CANDIDATE = re.compile(rf"\[(?=(?:-?[0-9][0-9.]*,){{{PACKED_FROM_NUMBERS - 1}}}+-?[0-9])")
    _CHUNK = re.compile(rf"{PLAIN_NUMBER_ITEM}(?:,{PLAIN_NUMBER_ITEM}){{0,{CHUNK_NUMBERS - 1}}}+")
else:  # the same, spelled for CPython before 3.11.5 (regex_support)
    _CANDIDATE = re.compile(rf"\[(?=(?>(?:-?[0-9][0-9.]*,){{{PACKED_FROM_NUMBERS - 1}}})-?[0-9])")
    _CHUNK = re.compile(rf"{PLAIN_NUMBER_ITEM}(?>(?:,{PLAIN_NUMBER_ITEM}){{0,{CHUNK_NUMBERS - 1}}})")
# Placeholders: the fences of a number (see codec.NUMBER_OPEN) the other way round, so that no part of the
# canonical encoder can take one for a number.
_OPEN: Final = "\udfff"
_CLOSE: Final = "\ud800"


def placeholder(index: int) -> str:
    """The string that stands for packed array ``index`` in the decoded document."""
    return f"{_OPEN}{index}{_CLOSE}"


@dataclass(frozen=True, slots=True)
class PackedText:
    """``text`` with each packed array replaced by ``["<placeholder>"]``; ``arrays[placeholder]`` its chunks."""

    text: str
    arrays: dict[str, tuple[str, ...]]


def _chunks(text: str, start: int) -> tuple[tuple[str, ...], int] | None:
    """The chunks of the number array whose ``[`` is at ``start``, and the index after its ``]``; None if it is
    not an array of numbers only."""
    chunks: list[str] = []
    pos = start + 1
    while True:
        match = _CHUNK.match(text, pos)
        if match is None:
            return None
        end = match.end()
        chunks.append(text[pos:end])
        if text.startswith("]", end):
            return tuple(chunks), end + 1
        if not text.startswith(",", end):
            return None
        pos = end + 1


def pack_number_arrays(text: str) -> PackedText | None:
    """The packed form of ``text`` (a document the structure check passed), or None when no array is packed."""
    if "\\\\" in text:
        # Quote parity below counts an escaped quote as \" ; a paired backslash before one would break that.
        return None
    pieces: list[str] = []
    arrays: dict[str, tuple[str, ...]] = {}
    done = counted = 0
    quotes = 0
    for candidate in _CANDIDATE.finditer(text):
        start = candidate.start()
        if start < done:
            continue
        # Quotes before the bracket, escaped ones left out; the bracket and the closing one of a packed array
        # stand next to no backslash, so no escape straddles where counting stops.
        quotes += text.count('"', counted, start) - text.count('\\"', counted, start)
        counted = start
        if quotes % 2:
            continue  # inside a string
        found = _chunks(text, start)
        if found is None:
            continue
        chunks, end = found
        name = placeholder(len(arrays))
        arrays[name] = chunks
        pieces += (text[done:start], '["', name, '"]')
        done = counted = end
    if not arrays:
        return None
    pieces.append(text[done:])
    return PackedText("".join(pieces), arrays)
