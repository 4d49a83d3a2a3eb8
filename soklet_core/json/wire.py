"""Wire encoding: compact JSON bytes of plain response data, written in C by msgspec.

Responses and errors are assembled from plain Python data (``dict`` with ``str`` keys, ``list``, ``tuple``,
``str``, ``int``, ``bool``, ``None``) with parts of the value model inside (a handler's structured content, a
request id). :func:`encode_wire` writes them byte for byte as :func:`.codec.serialize` writes the same data as a
value: no whitespace, members in their order, strings with only ``"``, ``\\`` and U+0000–U+001F escaped
(``\\b \\t \\n \\f \\r`` short, else ``\\u00xx`` lowercase) and everything else raw UTF-8, numbers of the model
spelled as held (``3.50`` stays ``3.50``). A string holding a lone surrogate is refused, as the model refuses it.

Values of the model reach msgspec's ``enc_hook`` one level at a time (an object as its members dict, an array as
its items tuple, a leaf as its Python value, a number as ``msgspec.Raw`` of its spelling), so no plain copy of a
structured result is ever built. ``tests/json/test_json_wire.py`` holds it to the standard library's encoder.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, Final, TypeAlias

import msgspec

from .errors import JsonError, JsonErrorReason
from .values import JsonArray, JsonBoolean, JsonNull, JsonNumber, JsonObject, JsonString, JsonValue

__all__ = ["WirePlain", "encode_wire"]

#: What :func:`encode_wire` takes: plain data, with values of the model anywhere inside.
WirePlain: TypeAlias = (
    "str | int | bool | JsonValue | list[WirePlain] | tuple[WirePlain, ...] | dict[str, WirePlain] | None"
)

_Raw: Final = msgspec.Raw


def _number(value: JsonNumber) -> msgspec.Raw:
    return _Raw(str(value._value))


def _null(_: JsonNull) -> None:
    return None


def _array_items(value: JsonArray) -> tuple[Any, ...]:
    items = value._items
    # A packed array of numbers (a large parsed document) is a sequence msgspec does not know: its numbers, then.
    return items if type(items) is tuple else tuple(items)


# The model is closed, so its six classes are all there is; a dict lookup by exact type is one C call.
_PLAIN_OF: Final[dict[type, Callable[[Any], Any]]] = {
    JsonObject: attrgetter("_members"),
    JsonArray: _array_items,
    JsonString: attrgetter("_value"),
    JsonBoolean: attrgetter("_value"),
    JsonNumber: _number,
    JsonNull: _null,
}


def _plain(value: object) -> Any:
    convert = _PLAIN_OF.get(type(value))
    if convert is None:
        raise TypeError("encode_wire takes str, int, bool, None, lists, tuples, str-keyed dicts and JSON values")
    return convert(value)


_ENCODER: Final = msgspec.json.Encoder(enc_hook=_plain)


def encode_wire(data: WirePlain) -> bytes:
    """Compact JSON bytes of ``data`` (see the module docstring); ``JsonError(LONE_SURROGATE)`` for a lone surrogate.

    Only :data:`WirePlain` is wire data (the type checker holds callers to it; nothing walks the data to check):
    a number that is not an integer travels as a :class:`~soklet_core.json.JsonNumber`, exact, never as a
    ``float``. An object of no JSON kind at all is refused with ``TypeError``.
    """
    try:
        return _ENCODER.encode(data)
    except UnicodeEncodeError:
        raise JsonError(JsonErrorReason.LONE_SURROGATE) from None
