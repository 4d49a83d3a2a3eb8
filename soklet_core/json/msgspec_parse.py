"""The strict parse of documents up to 64 KiB through msgspec: the value model, built from msgspec's data.

:func:`.codec.parse` tries this first for small ``bytes`` (request bodies, sealed states). msgspec does the
grammar in C; what it does not do as soklet's rules say is proved harmless on the document at hand, or the
document goes to the exact path (the C ``json`` module with hooks, and the reference scanner for the reason and
offset of a refusal), which decides alone:

* a number with a fraction or exponent reaches a hook as its token text and becomes a ``JsonNumber`` there, every
  limit checked (``decimal_from_token``, as the exact path does), its scale kept;
* integers arrive as ``int``: ``-0`` would lose its sign, so a document where ``-0`` may stand as a token goes
  back; any past the token length limit go back;
* duplicate members are proved absent as in :func:`.msgspec_canonical.no_member_dropped`;
* depth and node count are the same structure check as the exact path's.

Nothing else differs: msgspec refuses invalid UTF-8, lone surrogates raw or escaped, control characters in
strings, ``NaN``, leading zeros, a byte-order mark and trailing content (the exact path says why), and accepts
the same whitespace. ``tests/json/test_json_msgspec_parse.py`` holds it to the exact path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

import msgspec

from .errors import JsonError
from .limits import MAX_NUMBER_TOKEN_CHARS
from .msgspec_canonical import SMALL_DOCUMENT_BYTES, no_member_dropped
from .numbers import decimal_from_token
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
    new_string,
)
from .wire import encode_wire

__all__ = ["SMALL_DOCUMENT_BYTES", "parse_small"]

# A token of n digits (n + 1 characters when negative) stays within the length limit.
_POSITIVE_BOUND: Final = 10**MAX_NUMBER_TOKEN_CHARS
_NEGATIVE_BOUND: Final = -(10 ** (MAX_NUMBER_TOKEN_CHARS - 1))
# "-0" as a whole token (not "-0.5", "-0e1" or the "-07" of a date); inside a string too, which costs only a
# trip to the exact path.
_NEGATIVE_ZERO: Final = re.compile(rb"-0(?![.0-9eE])")

_EMPTY_ARRAY: Final = JsonArray.empty_instance()
_EMPTY_OBJECT: Final = JsonObject.empty_instance()
_TRUE: Final = JsonBoolean.from_value(True)
_FALSE: Final = JsonBoolean.from_value(False)
_NULL: Final = JsonNull.instance()
_allocate: Final = object.__new__


def _slot_setter(cls: type, name: str) -> Callable[[object, object], None]:
    # A slot's own setter: one C call, without the lookup by name that object.__setattr__ makes (the model's
    # classes refuse plain assignment).
    setter: Callable[[object, object], None] = vars(cls)[name].__set__
    return setter


_set_string: Final = _slot_setter(JsonString, "_value")
_set_number: Final = _slot_setter(JsonNumber, "_value")
_set_members: Final = _slot_setter(JsonObject, "_members")
_set_object_hash: Final = _slot_setter(JsonObject, "_hash")


class _Doubt(Exception):
    """The document needs the exact path."""


def _number(token: str) -> JsonValue:
    return new_number(decimal_from_token(token))


_DECODER: Final = msgspec.json.Decoder(float_hook=_number)


def _model(node: Any, members: list[int]) -> JsonValue:
    """The value model of msgspec's ``node``; adds the members of every object to ``members[0]``.

    msgspec's dicts are fresh and ours: each becomes the members of its object in place (no second dict), its
    values replaced by their model values.
    """
    kind = type(node)
    if kind is dict:
        if not node:
            return _EMPTY_OBJECT
        members[0] += len(node)
        for name, item in node.items():
            # Hot: strings and integers, the commonest members, are allocated inline (no call). Replacing the
            # value of a present key does not change the dict's size, so iterating it stays valid.
            item_kind = type(item)
            if item_kind is str:
                wrapped = _allocate(JsonString)
                _set_string(wrapped, item)
                node[name] = wrapped
            elif item_kind is int and _NEGATIVE_BOUND < item < _POSITIVE_BOUND:
                number = _allocate(JsonNumber)
                _set_number(number, Decimal(item))
                node[name] = number
            else:
                node[name] = _model(item, members)
        result = _allocate(JsonObject)
        _set_members(result, node)
        _set_object_hash(result, None)
        return result
    if kind is list:
        return new_array(tuple([_model(item, members) for item in node])) if node else _EMPTY_ARRAY
    if kind is str:
        return new_string(node)
    if kind is int:
        if not _NEGATIVE_BOUND < node < _POSITIVE_BOUND:
            raise _Doubt
        return new_number(Decimal(node))
    if node is True:
        return _TRUE
    if node is False:
        return _FALSE
    if node is None:
        return _NULL
    return node  # type: ignore[no-any-return]  # a JsonNumber from the hook


def parse_small(raw: bytes) -> JsonValue | None:
    """The value model of ``raw`` (at most :data:`SMALL_DOCUMENT_BYTES`), or None when the exact path must decide."""
    if b"-0" in raw and _NEGATIVE_ZERO.search(raw) is not None:
        return None
    try:
        node = _DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, JsonError, RecursionError, ValueError):
        return None
    if not structure_within_limits(raw):
        return None
    members = [0]
    try:
        value = _model(node, members)
    except _Doubt:
        return None
    if not no_member_dropped(raw, members[0], lambda: encode_wire(value)):
        return None
    return value
