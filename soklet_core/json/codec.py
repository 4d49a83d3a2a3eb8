"""The strict JSON codec: bytes in, closed value model out, and back.

Parsing takes two steps. The C ``json`` module does the grammar, with hooks that keep every number exact, check
the number limits and refuse duplicate members and non-finite constants; cheap whole-buffer passes check depth,
node count and escaped surrogates. Whenever either step doubts the document, the reference scanner
(:mod:`.scanner`) walks it again and reports the first problem with its byte offset, so every refusal is the same
:class:`JsonError` whichever step noticed it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final, NoReturn

from .errors import JsonError, JsonErrorReason
from .limits import MAX_DEPTH, MAX_NUMBER_TOKEN_CHARS
from .msgspec_parse import SMALL_DOCUMENT_BYTES, parse_small
from .number_runs import PACKED_FROM_BYTES, pack_number_arrays
from .numbers import decimal_from_token
from .scanner import locate_refusal
from .structure import structure_within_limits
from .values import (
    JsonArray,
    JsonBoolean,
    JsonNull,
    JsonNumber,
    JsonObject,
    JsonString,
    JsonValue,
    new_array,
    new_number,
    new_object,
    new_packed_array,
)

__all__ = [
    "NUMBER_CLOSE",
    "NUMBER_OPEN",
    "decode_text",
    "load_raw",
    "parse",
    "serialize",
    "structure_within_limits",
]

_BOM: Final = b"\xef\xbb\xbf"
# An escaped surrogate pair, and any escaped surrogate; what is left after removing pairs is a lone one.
_ESCAPED_PAIR: Final = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_ESCAPED_SURROGATE: Final = re.compile(r"\\u[dD][89a-fA-F]")


class _Doubt(Exception):
    """Raised from inside a parse hook; the reference scanner then finds the exact reason and offset."""


def decode_text(data: bytes | bytearray | memoryview | str, *, max_bytes: int | None = None) -> tuple[str, bytes]:
    """Strictly decode input to ``(text, utf8_bytes)``: no BOM, valid UTF-8, no lone surrogates."""
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError as error:
            offset = len(data[: error.start].encode("utf-8", "surrogatepass"))
            raise JsonError(JsonErrorReason.LONE_SURROGATE, offset) from None
        text = data
    else:
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            start = error.start
            # UTF-8 encodings of surrogates (ED A0..BF xx) are refused by the codec; name them for what they are.
            lone = raw[start] == 0xED and start + 1 < len(raw) and 0xA0 <= raw[start + 1] <= 0xBF
            reason = JsonErrorReason.LONE_SURROGATE if lone else JsonErrorReason.INVALID_UTF8
            raise JsonError(reason, start) from None
    if raw.startswith(_BOM):
        raise JsonError(JsonErrorReason.BYTE_ORDER_MARK, 0)
    if max_bytes is not None and len(raw) > max_bytes:
        raise JsonError(JsonErrorReason.INPUT_TOO_LARGE, max_bytes)
    return text, raw


def _may_hold_lone_surrogate(text: str, raw: bytes) -> bool:
    # memchr on the bytes first: most documents hold no backslash at all.
    if b"\\" not in raw or b"\\u" not in raw or not _ESCAPED_SURROGATE.search(text):
        return False
    # Escaped backslashes pair up left to right exactly as a parser reads them; once each is replaced by a
    # character that is no backslash (so its neighbours cannot join into a false pair), every remaining backslash
    # starts an escape of its own.
    return _ESCAPED_SURROGATE.search(_ESCAPED_PAIR.sub("", text.replace("\\\\", "."))) is not None


def _refuse_constant(_: str) -> NoReturn:
    raise _Doubt


def strict_decoder(
    *,
    parse_int: Callable[[str], Any],
    parse_float: Callable[[str], Any],
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any],
) -> json.JSONDecoder:
    """A reusable C decoder with the given hooks that refuses NaN/Infinity and raw control characters."""
    return json.JSONDecoder(
        parse_int=parse_int,
        parse_float=parse_float,
        parse_constant=_refuse_constant,
        object_pairs_hook=object_pairs_hook,
        strict=True,
    )


def load_raw(text: str, raw: bytes, decoder: json.JSONDecoder, *, prepare: Callable[[str], str] | None = None) -> Any:
    """Decode with every strict check; raise :class:`JsonError` (reason and byte offset) on refusal.

    The depth and node limits are checked on the bytes before the decoder builds anything, so an over-deep or
    over-large document costs no tree. ``prepare`` turns the checked text into what the decoder reads (packing
    number arrays, see :mod:`.number_runs`); a refusal is still located in ``text``.
    """
    if structure_within_limits(raw) and not _may_hold_lone_surrogate(text, raw):
        try:
            prepared = text if prepare is None else prepare(text)
            if prepared is not text:
                try:
                    return decoder.decode(prepared)
                except (_Doubt, JsonError, ValueError, RecursionError):
                    pass  # the text as it came decides (a refusal is located there anyway)
            return decoder.decode(text)
        except (_Doubt, JsonError, ValueError, RecursionError):
            pass
    raise locate(text)


def locate(text: str) -> JsonError:
    """The refusal the reference scanner finds in ``text``, which the fast path already doubted."""
    refusal = locate_refusal(text)
    # None only if the fast path and the reference scanner disagree; refuse rather than guess.
    return refusal if refusal is not None else JsonError(JsonErrorReason.UNEXPECTED_CHARACTER, 0)


def _integer(token: str) -> JsonNumber:
    if len(token) > MAX_NUMBER_TOKEN_CHARS:
        raise _Doubt
    return new_number(Decimal(token))


def _number(token: str) -> JsonNumber:
    return new_number(decimal_from_token(token))


_EMPTY_ARRAY: Final = JsonArray.empty_instance()
_EMPTY_OBJECT: Final = JsonObject.empty_instance()
_TRUE: Final = JsonBoolean.from_value(True)
_FALSE: Final = JsonBoolean.from_value(False)
_NULL: Final = JsonNull.instance()


_allocate = object.__new__
_store = object.__setattr__


def _wrapper(packed: dict[str, JsonArray]) -> Callable[[Any], JsonValue]:
    """The function that turns what the C decoder hands over into the value model; a one-item array holding a
    key of ``packed`` (a placeholder, see :mod:`.number_runs`) becomes that packed array."""

    def wrap(value: Any) -> JsonValue:
        # Hot: once per value the C decoder hands over. Allocation is inlined (two C calls, no Python frame)
        # because the decoder builds strings, lists and literals itself; numbers and objects already come wrapped
        # by hooks.
        kind = type(value)
        if kind is str:
            wrapped = _allocate(JsonString)
            _store(wrapped, "_value", value)
            return wrapped
        if kind is list:
            if not value:
                # Every empty array is the one shared (immutable) instance: [[],[],...] costs a reference per item.
                return _EMPTY_ARRAY
            if packed and len(value) == 1 and type(value[0]) is str and value[0] in packed:
                # Each placeholder stands once: taking it out leaves the ones the decoder never met.
                return packed.pop(value[0])
            return new_array(tuple(map(wrap, value)))
        if value is True:
            return _TRUE
        if value is False:
            return _FALSE
        if value is None:
            return _NULL
        return value  # type: ignore[no-any-return]  # already a JsonObject or JsonNumber from a hook

    return wrap


def _objects(wrap: Callable[[Any], JsonValue]) -> Callable[[list[tuple[str, Any]]], JsonObject]:
    """The object hook that goes with ``wrap``."""

    def make(pairs: list[tuple[str, Any]]) -> JsonObject:
        if not pairs:
            return _EMPTY_OBJECT  # shared, like the empty array
        members: dict[str, JsonValue] = {}
        for name, value in pairs:
            if type(value) is str:
                wrapped = _allocate(JsonString)
                _store(wrapped, "_value", value)
                members[name] = wrapped
            else:
                members[name] = wrap(value)
        if len(members) != len(pairs):
            raise _Doubt
        return new_object(members)

    return make


_wrap: Final = _wrapper({})
_object: Final = _objects(_wrap)
_VALUE_DECODER: Final = strict_decoder(parse_int=_integer, parse_float=_number, object_pairs_hook=_object)

#: Documents larger than this are parsed with equal number tokens sharing one (immutable) JsonNumber.
_SHARING_FROM_BYTES: Final = 64 * 1024
#: Most distinct number tokens remembered per parse: a document of distinct numbers gains nothing from sharing and
#: must not pay for a table the size of the document.
_SHARED_TOKENS: Final = 4096


def _sharing_decoder(packed: dict[str, JsonArray]) -> json.JSONDecoder:
    # A JsonNumber (with its Decimal) is about 150 bytes; a repeated token (0, 1, 12.5, ...) costs only the
    # reference to the first one. Per parse, so no table outlives or crosses documents (or threads).
    shared: dict[str, JsonNumber] = {}

    def share(token: str, make: Callable[[str], JsonNumber]) -> JsonNumber:
        number = shared.get(token)
        if number is None:
            number = make(token)
            if len(shared) < _SHARED_TOKENS:
                shared[token] = number
        return number

    return strict_decoder(
        parse_int=lambda token: share(token, _integer),
        parse_float=lambda token: share(token, _number),
        object_pairs_hook=_objects(_wrapper(packed)),
    )


def parse(data: bytes | bytearray | memoryview | str, *, max_bytes: int | None = None) -> JsonValue:
    """Parse one strict JSON document into the closed value model.

    Refuses (with :class:`JsonError`, reason and byte offset) a BOM, invalid UTF-8, lone surrogates (raw or
    escaped), duplicate member names, NaN/Infinity, malformed numbers, unescaped control characters, trailing
    content, number tokens over 1,024 characters, exponents beyond ±10,000 (token or canonical), nesting deeper
    than 256, more than ``MAX_NODES`` values, and input over ``max_bytes`` when given.
    """
    if type(data) is bytes and len(data) <= SMALL_DOCUMENT_BYTES and (max_bytes is None or len(data) <= max_bytes):
        # Request bodies and sealed states: msgspec, where it can prove the document (see msgspec_parse).
        value = parse_small(data)
        if value is not None:
            return value
    text, raw = decode_text(data, max_bytes=max_bytes)
    if len(raw) <= _SHARING_FROM_BYTES and len(raw) <= PACKED_FROM_BYTES:
        return _wrap(load_raw(text, raw, _VALUE_DECODER))
    # Large documents: equal number tokens share one JsonNumber, and long arrays of numbers are held packed.
    packed: dict[str, JsonArray] = {}

    def pack(checked: str) -> str:
        found = pack_number_arrays(checked)
        if found is None:
            return checked
        for name, chunks in found.arrays.items():
            packed[name] = new_packed_array(chunks)
        return found.text

    value = _wrapper(packed)(load_raw(text, raw, _sharing_decoder(packed), prepare=pack))
    if packed:
        # A placeholder the decoder did not meet as an array (never, for the texts pack_number_arrays packs):
        # the document as it came.
        return _wrap(load_raw(text, raw, _sharing_decoder({})))
    return value


# Numbers travel through the C encoder as strings fenced by two lone surrogates. Strings that came from valid
# input can never hold a lone surrogate, so after encoding, '"\ud800' and '\udfff"' mark exactly the fences.
NUMBER_OPEN: Final = "\ud800"
NUMBER_CLOSE: Final = "\udfff"
_FENCE_OPEN: Final = '"' + NUMBER_OPEN
_FENCE_CLOSE: Final = NUMBER_CLOSE + '"'


def _unfence(chunk: str) -> str:
    return chunk.replace(_FENCE_OPEN, "").replace(_FENCE_CLOSE, "") if not chunk.isascii() else chunk


_AS_HELD: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False)


def _fenced_as_held(value: JsonValue, depth: int) -> Any:
    # Hot on every response: exact type checks and direct slot reads (the classes are closed and final).
    kind = type(value)
    if kind is JsonString or kind is JsonBoolean:
        return value._value  # type: ignore[attr-defined]
    if kind is JsonNumber:
        return NUMBER_OPEN + str(value._value) + NUMBER_CLOSE  # type: ignore[attr-defined]
    if kind is JsonNull:
        return None
    if depth >= MAX_DEPTH:
        raise JsonError(JsonErrorReason.DEPTH_EXCEEDED)
    if kind is JsonObject:
        return {name: _fenced_as_held(item, depth + 1) for name, item in value._members.items()}  # type: ignore[attr-defined]
    return [_fenced_as_held(item, depth + 1) for item in value._items]  # type: ignore[attr-defined]


def serialize(value: JsonValue) -> str:
    """Compact JSON text of ``value``: members in their held order, numbers spelled as held (``3.50``)."""
    return _unfence(_AS_HELD.encode(_fenced_as_held(value, 0)))
