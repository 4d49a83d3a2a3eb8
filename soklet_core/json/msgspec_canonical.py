"""The canonical form through msgspec: the params digest's fast path, and canonical bytes of model values.

msgspec parses and encodes in C, faster than the standard library with the hooks the exact path needs, but it is
not strict or exact in the ways soklet is: it keeps the last of two equal member names, takes ``-0`` as ``0``,
writes integers as Python writes them (``100``, not the canonical ``1E+2``), sorts member names by code point
(not UTF-16 code units) and nests past 256. So it is only trusted where each of those can be proved harmless on
the document at hand, and anything else, including every error it raises, sends the document back to the exact
path (:func:`.canonical.load_canonical_tree`), whose refusal reasons and byte offsets stay the only ones given:

* numbers with a fraction or exponent reach a hook as their token text; the hook checks the token's limits and
  hands back its canonical spelling as ``msgspec.Raw``, which the encoder writes as it is (no fences, no pass over
  the output);
* integers arrive as ``int``; one walk over the decoded data respells those with trailing zeros (``1E+2``) and
  sends back those past the token length limit, and counts the members;
* duplicate members: every ``:`` byte of the input separates a member or sits inside a string (a member name or a
  string value). The decoded data holds every member but the ones a duplicate replaced (with everything inside
  them), so its members never outnumber the input's ``:`` bytes, and equal them only when nothing was dropped.
  Otherwise the encoded data, which writes every ``:`` of a string raw, must hold exactly as many ``:`` as the
  input: a dropped member takes at least its own separator away. An escaped ``\\u003a`` would add a ``:`` the
  input does not have, so such a document goes to the exact path;
* documents whose member names hold a supplementary character (UTF-16 order differs from code point order there)
  are sent back; so is anything the structure check (depth, node count) doubts.

Strings need nothing: msgspec writes them exactly as the canonical form does (only ``"``, ``\\`` and U+0000–U+001F
escaped, ``\\b \\t \\n \\f \\r`` short, else ``\\u00xx`` lowercase; everything else raw UTF-8), and refuses
unescaped control characters, invalid UTF-8, and lone surrogates raw or escaped (the differential tests in
``tests/json/test_json_msgspec_canonical.py`` hold it to that against the exact path).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

import msgspec

from .errors import JsonError
from .limits import MAX_NUMBER_TOKEN_CHARS, MAX_REQUEST_BODY_BYTES
from .numbers import CANONICAL_TOKEN, canonical_decimal_text, canonical_number_text
from .structure import structure_within_limits
from .values import JsonArray, JsonBoolean, JsonNull, JsonNumber, JsonObject, JsonString, JsonValue

__all__ = [
    "DIGEST_DOCUMENT_BYTES",
    "SMALL_DOCUMENT_BYTES",
    "encode_canonical",
    "encode_value",
    "load_canonical_data",
    "no_member_dropped",
]

#: Bytes up to this many are parsed into the value model through msgspec first (larger ones share equal numbers).
SMALL_DOCUMENT_BYTES: Final = 64 * 1024
#: A digest that is not cooperative tries msgspec first up to the largest request body; larger documents stream
#: through the exact path. A cooperative one (a worker thread beside the event loop) never does: msgspec keeps the
#: GIL through every stretch of a document without a number.
DIGEST_DOCUMENT_BYTES: Final = MAX_REQUEST_BODY_BYTES

Raw: Final = msgspec.Raw

# A token of n digits (n + 1 characters when negative) stays within the length limit.
_POSITIVE_BOUND: Final = 10**MAX_NUMBER_TOKEN_CHARS
_NEGATIVE_BOUND: Final = -(10 ** (MAX_NUMBER_TOKEN_CHARS - 1))
# An escaped supplementary character in a member name starts with an escaped high surrogate.
_ESCAPED_HIGH_SURROGATE: Final = re.compile(rb"\\u[dD][89abAB]")


class _Doubt(Exception):
    """The document needs the exact path."""


def _number(token: str) -> msgspec.Raw:
    # Every token with a fraction or an exponent part: checked and spelled canonically (JsonError otherwise).
    if CANONICAL_TOKEN.fullmatch(token) is None:
        token = canonical_number_text(token)
    return Raw(token)


_DECODER: Final = msgspec.json.Decoder(float_hook=_number)
_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def _integer(value: int) -> msgspec.Raw:
    if not _NEGATIVE_BOUND < value < _POSITIVE_BOUND:
        raise _Doubt
    return Raw(canonical_number_text(str(value)))


def _walk(node: Any) -> int:
    """Respell and check the integers inside ``node`` (a container) in place; return its member count."""
    count = 0
    if type(node) is dict:
        count = len(node)
        for name, item in node.items():
            kind = type(item)
            if kind is int:
                if item % 10 == 0 or not _NEGATIVE_BOUND < item < _POSITIVE_BOUND:
                    node[name] = _integer(item)
            elif kind is dict or kind is list:
                count += _walk(item)
    else:
        for index, item in enumerate(node):
            kind = type(item)
            if kind is int:
                if item % 10 == 0 or not _NEGATIVE_BOUND < item < _POSITIVE_BOUND:
                    node[index] = _integer(item)
            elif kind is dict or kind is list:
                count += _walk(item)
    return count


def _names_in_bmp(node: Any) -> bool:
    """Whether every member name inside ``node`` is free of supplementary characters."""
    kind = type(node)
    if kind is dict:
        names = "".join(node)
        if not names.isascii() and max(names) > "\uffff":
            return False
        return all(map(_names_in_bmp, node.values()))
    if kind is list:
        return all(map(_names_in_bmp, node))
    return True


def _may_name_supplementary(raw: bytes) -> bool:
    if not raw.isascii() and (b"\xf0" in raw or b"\xf1" in raw or b"\xf2" in raw or b"\xf3" in raw or b"\xf4" in raw):
        return True
    # A one-byte search is a memchr; most documents hold no backslash, and the two-byte search costs a microsecond
    # per kilobyte.
    return b"\\" in raw and b"\\u" in raw and _ESCAPED_HIGH_SURROGATE.search(raw) is not None


def no_member_dropped(raw: bytes, members: int, encode: Callable[[], bytes]) -> bool:
    """Whether msgspec's data of ``raw``, holding ``members`` members, kept every member (no name repeated).

    ``encode`` writes that data as JSON with every ``:`` of a string raw. The data never hold more members and
    string colons than the input has ``:`` bytes (an escaped colon aside), so members alone equal to them prove
    it; else the encoded data must hold as many. A document with an escaped colon is not proved.
    """
    separators = raw.count(b":")
    if members == separators:
        return True
    if b"\\" in raw and (b"\\u003a" in raw or b"\\u003A" in raw):
        return False
    return encode().count(b":") == separators


def load_canonical_data(raw: bytes) -> Any | None:
    """Strictly parse ``raw`` (UTF-8, at most :data:`DIGEST_DOCUMENT_BYTES`) into canonical-ready data, or None.

    The data is plain ``dict``/``list``/``str``/``bool``/``None``, with every number either an ``int`` already in
    canonical spelling or ``msgspec.Raw`` holding it; :func:`encode_canonical` writes its canonical bytes. None
    says the exact path must decide: the document may be refused, or need what only that path does.
    """
    try:
        root = _DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, JsonError, RecursionError, ValueError):
        return None
    kind = type(root)
    if kind is dict or kind is list:
        if not structure_within_limits(raw):
            return None
        try:
            members = _walk(root)
        except _Doubt:
            return None
        if not no_member_dropped(raw, members, lambda: _ENCODER.encode(root)):
            return None
        if _may_name_supplementary(raw) and not _names_in_bmp(root):
            return None
    elif kind is int and not _NEGATIVE_BOUND < root < _POSITIVE_BOUND:
        # A bare integer is never encoded (params must be structured), but its length is still checked.
        return None
    return root


def encode_canonical(node: Any) -> bytes:
    """The canonical bytes of data from :func:`load_canonical_data` (or any part of it)."""
    return _ENCODER.encode(node)


# --- values of the model ---------------------------------------------------------------------------------------


def _plain_value(value: JsonValue) -> Any:
    """msgspec-ready data of ``value``: dicts, lists, strings, booleans, None and numbers as canonical ``Raw``.

    One Python walk with the leaves inside a container converted in place costs less than handing every value to
    an ``enc_hook`` (a call from C per value). Raises ``_Doubt`` for a member name outside the Basic
    Multilingual Plane.
    """
    kind = type(value)
    if kind is JsonObject:
        members: dict[str, JsonValue] = value._members  # type: ignore[attr-defined]
        names = "".join(members)
        if not names.isascii() and max(names) > "\uffff":
            raise _Doubt
        node: dict[str, Any] = {}
        for name, item in members.items():
            item_kind = type(item)
            if item_kind is JsonString or item_kind is JsonBoolean:
                node[name] = item._value  # type: ignore[attr-defined]
            elif item_kind is JsonNumber:
                node[name] = Raw(canonical_decimal_text(item._value))  # type: ignore[attr-defined]
            elif item_kind is JsonNull:
                node[name] = None
            else:
                node[name] = _plain_value(item)
        return node
    if kind is JsonArray:
        return [_plain_value(item) for item in value._items]  # type: ignore[attr-defined]
    if kind is JsonString or kind is JsonBoolean:
        return value._value  # type: ignore[attr-defined]
    if kind is JsonNumber:
        return Raw(canonical_decimal_text(value._value))  # type: ignore[attr-defined]
    return None


def encode_value(value: JsonValue) -> bytes | None:
    """The canonical bytes of a value of the model, or None when the exact path must write them.

    Member names are sorted by msgspec (code point order, UTF-16 order for every name in the Basic Multilingual
    Plane: an object with a supplementary character in a name sends the value back), numbers are written in their
    canonical spelling, and the output is held to the depth limit by the structure check of the parser (the model
    can nest values built apart deeper than a parse allows; the exact path refuses those).
    """
    try:
        encoded = _ENCODER.encode(_plain_value(value))
    except (_Doubt, RecursionError):
        return None
    return encoded if structure_within_limits(encoded) else None
