"""The canonical form: the one byte sequence for a JSON value that the params digest and sealed state rely on.

No whitespace; members sorted by UTF-16 code units; strings escape only ``"``, ``\\`` and U+0000–U+001F
(``\\b \\t \\n \\f \\r``, else ``\\u00xx`` lowercase) and keep everything else as raw UTF-8; numbers in their
canonical spelling (:mod:`.numbers`). The form is versioned with the request-state envelope: changing it is a new
envelope version.

The C ``json`` encoder does the escaping and the member sort; numbers ride through it fenced as strings (see
:func:`.codec.unfence`). Large containers are encoded in slices so that the canonical text of a big document is
streamed to its consumer (a hash) instead of held whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Final

from .codec import NUMBER_CLOSE, NUMBER_OPEN, decode_text, load_raw, unfence
from .errors import JsonError, JsonErrorReason
from .limits import MAX_DEPTH
from .numbers import canonical_decimal_text, canonical_number_text
from .values import JsonArray, JsonBoolean, JsonNull, JsonNumber, JsonObject, JsonString, JsonValue

__all__ = ["canonical_bytes", "canonical_chunks", "canonical_text", "load_canonical_tree", "utf16_key"]

#: Containers with more children than this are encoded slice by slice.
_SLICE: Final = 1024
#: Containers this close to the root are always walked (so params → arguments → rows streams).
_WALK_DEPTH: Final = 3
_SORTED: Final = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False, allow_nan=False
)
_IN_ORDER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False)
# Code point order equals UTF-16 order unless a supplementary character (escaped or raw) is in play.
_SUPPLEMENTARY: Final = re.compile("[\U00010000-\U0010ffff]|\\\\u[dD][89abAB]")


def utf16_key(name: str) -> bytes:
    """Sort key giving UTF-16 code unit order."""
    return name.encode("utf-16-be")


class CanonicalTree:
    """Plain Python data ready for canonical encoding: numbers fenced, objects' order known. Internal."""

    __slots__ = ("presorted", "root")

    def __init__(self, root: Any, *, presorted: bool) -> None:
        self.root = root
        self.presorted = presorted


def _fenced_number(token: str) -> str:
    return NUMBER_OPEN + canonical_number_text(token) + NUMBER_CLOSE


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise JsonError(JsonErrorReason.DUPLICATE_MEMBER)
    return members


def _unique_utf16(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(sorted(pairs, key=lambda pair: utf16_key(pair[0])))
    if len(members) != len(pairs):
        raise JsonError(JsonErrorReason.DUPLICATE_MEMBER)
    return members


def load_canonical_tree(data: bytes | bytearray | memoryview | str, *, max_bytes: int | None = None) -> CanonicalTree:
    """Strictly parse ``data`` straight into canonical-ready data (no value model is built)."""
    text, raw = decode_text(data, max_bytes=max_bytes)
    presorted = not text.isascii() and _SUPPLEMENTARY.search(text) is not None
    hook = _unique_utf16 if presorted else _unique
    return CanonicalTree(
        load_raw(text, raw, parse_number=_fenced_number, object_pairs_hook=hook), presorted=presorted
    )


def _tree_from_value(value: JsonValue, depth: int) -> Any:
    if isinstance(value, JsonString):
        return value.value
    if isinstance(value, JsonNumber):
        return NUMBER_OPEN + canonical_decimal_text(value.value) + NUMBER_CLOSE
    if isinstance(value, JsonBoolean):
        return value.value
    if isinstance(value, JsonNull):
        return None
    if depth >= MAX_DEPTH:
        raise JsonError(JsonErrorReason.DEPTH_EXCEEDED)
    if isinstance(value, JsonObject):
        names = list(value)
        if not all(name.isascii() for name in names):
            names.sort(key=utf16_key)
        else:
            names.sort()
        return {name: _tree_from_value(value[name], depth + 1) for name in names}
    assert isinstance(value, JsonArray)
    return [_tree_from_value(item, depth + 1) for item in value]


def tree_from_value(value: JsonValue) -> CanonicalTree:
    """Canonical-ready data for a value of the model (objects presorted in UTF-16 order)."""
    return CanonicalTree(_tree_from_value(value, 0), presorted=True)


def _chunks(node: Any, depth: int, presorted: bool) -> Iterator[str]:
    encoder = _IN_ORDER if presorted else _SORTED
    kind = type(node)
    if kind is dict and (depth < _WALK_DEPTH or len(node) > _SLICE):
        names = list(node) if presorted else sorted(node)
        yield "{"
        for index, name in enumerate(names):
            yield ("," if index else "") + encoder.encode(name) + ":"
            yield from _chunks(node[name], depth + 1, presorted)
        yield "}"
    elif kind is list and (depth < _WALK_DEPTH or len(node) > _SLICE):
        if len(node) > _SLICE:
            yield "["
            for start in range(0, len(node), _SLICE):
                part = encoder.encode(node[start : start + _SLICE])
                yield ("," if start else "") + part[1:-1]
            yield "]"
        else:
            yield "["
            for index, item in enumerate(node):
                if index:
                    yield ","
                yield from _chunks(item, depth + 1, presorted)
            yield "]"
    else:
        yield encoder.encode(node)


def canonical_chunks(tree: CanonicalTree) -> Iterator[bytes]:
    """The canonical UTF-8 bytes of ``tree``, in pieces."""
    pending: list[str] = []
    size = 0
    for chunk in _chunks(tree.root, 0, tree.presorted):
        pending.append(chunk)
        size += len(chunk)
        if size >= 65536:
            yield unfence("".join(pending)).encode("utf-8")
            pending.clear()
            size = 0
    if pending:
        yield unfence("".join(pending)).encode("utf-8")


def canonical_bytes(value: JsonValue | bytes | bytearray | memoryview | str) -> bytes:
    """The canonical form of a value, or of a JSON document given as bytes or text (parsed strictly)."""
    tree = tree_from_value(value) if isinstance(value, JsonValue) else load_canonical_tree(value)
    return b"".join(canonical_chunks(tree))


def canonical_text(value: JsonValue | bytes | bytearray | memoryview | str) -> str:
    """The canonical form as text."""
    return canonical_bytes(value).decode("utf-8")


def feed_canonical(tree: CanonicalTree, sink: Callable[[bytes], object], *, limit: int | None = None) -> int:
    """Send the canonical bytes of ``tree`` to ``sink``; return their count, refusing past ``limit`` bytes."""
    total = 0
    for piece in canonical_chunks(tree):
        total += len(piece)
        if limit is not None and total > limit:
            raise JsonError(JsonErrorReason.CANONICAL_TOO_LARGE)
        sink(piece)
    return total
