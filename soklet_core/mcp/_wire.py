"""Wire shapes written once, read two ways: as a :class:`~soklet_core.json.JsonObject` or as encoded JSON text.

A model type describes its wire object once, as an ordered list of ``(member, value)`` pairs (:data:`Members`;
``None`` values are left out). :func:`to_object` builds the value model from it (``to_wire()``), and
:func:`encode` writes the same members straight to compact JSON text, byte for byte what
:func:`soklet_core.json.serialize` writes for that object, without building the model first: the response
path's encoding. Values are ``str``, ``bool``, ``int``, any :class:`~soklet_core.json.JsonValue` (written by
``serialize``), nested :class:`Members`, or tuples of those.
"""

from __future__ import annotations

import json
from typing import Final, TypeAlias

from soklet_core.json import JsonArray, JsonObject, JsonString, JsonValue, serialize

__all__ = ["Members", "WireValue", "encode", "to_object"]

#: One member's value; ``None`` leaves the member out.
WireValue: TypeAlias = "str | bool | int | JsonValue | Members | tuple[WireValue, ...] | None"
#: A wire object: its members in order.
Members: TypeAlias = list[tuple[str, WireValue]]

# The same C encoder settings as soklet_core.json.serialize; used for ASCII text only, where the two agree
# trivially (non-ASCII text goes through serialize itself, which refuses lone surrogates).
_TEXT: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode


def _value(value: WireValue) -> JsonValue:
    if isinstance(value, JsonValue):
        return value
    if isinstance(value, list):
        return to_object(value)
    if isinstance(value, tuple):
        return JsonArray.of(*(_value(item) for item in value))
    assert value is not None
    return JsonValue.from_python(value)


def to_object(members: Members) -> JsonObject:
    """The value model of ``members`` (``None`` values left out)."""
    out = JsonObject.builder()
    for name, value in members:
        if value is not None:
            out.put(name, _value(value))
    return out.build()


def _text(value: str) -> str:
    return _TEXT(value) if value.isascii() else serialize(JsonString.from_value(value))


# Member names are nearly all fixed words of the protocol ("resultType", "content", "text", an app's few input
# request keys): each is encoded once. Bounded, since a handler could name keys from anything.
_NAME_TEXT: Final[dict[str, str]] = {}
_NAMES_REMEMBERED: Final = 512


def _name(name: str) -> str:
    text = _NAME_TEXT.get(name)
    if text is None:
        text = _text(name) + ":"
        if len(_NAME_TEXT) < _NAMES_REMEMBERED:
            _NAME_TEXT[name] = text
    return text


def _encode_value(value: WireValue, out: list[str]) -> None:
    kind = type(value)
    if kind is str:
        out.append(_text(value))  # type: ignore[arg-type]
    elif kind is bool:
        out.append("true" if value else "false")
    elif kind is int:
        out.append(str(value))
    elif kind is list:
        _encode_members(value, out)  # type: ignore[arg-type]
    elif kind is tuple:
        out.append("[")
        for index, item in enumerate(value):  # type: ignore[arg-type]
            if index:
                out.append(",")
            _encode_value(item, out)
        out.append("]")
    else:
        assert isinstance(value, JsonValue)
        out.append(serialize(value))


def _encode_members(members: Members, out: list[str]) -> None:
    separator = "{"
    for name, value in members:
        if value is None:
            continue
        out.append(separator)
        out.append(_name(name))
        _encode_value(value, out)
        separator = ","
    out.append("{}" if separator == "{" else "}")


def encode(members: Members) -> str:
    """Compact JSON text of ``members``: what ``serialize(to_object(members))`` writes."""
    out: list[str] = []
    _encode_members(members, out)
    return "".join(out)
