"""Wire shapes written once, read two ways: as a :class:`~soklet_core.json.JsonObject` or as encoded JSON bytes.

A model type describes its wire object once, as an ordered list of ``(member, value)`` pairs (:data:`Members`;
``None`` values are left out). :func:`to_object` builds the value model from it (``to_wire()``), and
:func:`encode_bytes` writes the same members straight to compact UTF-8 JSON, byte for byte
what :func:`soklet_core.json.serialize` writes for that object, without building the model first: the response
path's encoding, done in C by :func:`soklet_core.json.encode_wire`. Values are ``str``, ``bool``, ``int``, any
:class:`~soklet_core.json.JsonValue` (written as ``serialize`` writes it), nested :class:`Members`, or tuples of
those.
"""

from __future__ import annotations

from typing import TypeAlias, cast

from soklet_core.json import JsonArray, JsonObject, JsonValue, WirePlain, encode_wire

__all__ = ["Members", "WireValue", "encode_bytes", "to_object"]

#: One member's value; ``None`` leaves the member out.
WireValue: TypeAlias = "str | bool | int | JsonValue | Members | tuple[WireValue, ...] | None"
#: A wire object: its members in order.
Members: TypeAlias = list[tuple[str, WireValue]]


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


def _plain(value: WireValue) -> WirePlain:
    # Only the shapes of this module are converted: members to a dict, tuples to lists of converted items.
    # Everything else (text, numbers, flags, values of the model) is wire data for encode_wire as it is.
    kind = type(value)
    if kind is list:
        return {name: _plain(item) for name, item in cast(Members, value) if item is not None}
    if kind is tuple:
        return [_plain(item) for item in cast(tuple[WireValue, ...], value)]
    return cast(WirePlain, value)


def encode_bytes(members: Members) -> bytes:
    """Compact JSON of ``members`` as UTF-8: what ``serialize(to_object(members))`` writes (in C, by msgspec)."""
    return encode_wire(_plain(members))
