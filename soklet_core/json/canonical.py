"""The canonical form: the one byte sequence for a JSON value that the params digest and sealed state rely on.

No whitespace; members sorted by UTF-16 code units; strings escape only ``"``, ``\\`` and U+0000–U+001F
(``\\b \\t \\n \\f \\r``, else ``\\u00xx`` lowercase) and keep everything else as raw UTF-8; numbers in their
canonical spelling (:mod:`.numbers`). The form is versioned with the request-state envelope: changing it is a new
envelope version.

How it stays fast in pure Python: the C ``json`` module parses, with every number token kept as its exact text
fenced by two lone surrogates (a C-level ``%`` format, no Python call per number), and the C encoder escapes
strings and sorts members. Its output becomes UTF-8 with the fences passed through, where one C-level regular
expression finds the rare number tokens whose spelling must change (exponents, trailing zeros, ``-0``, tiny
fractions) and rewrites only those through :func:`.numbers.canonical_number_text`, and splitting drops the
fences. Strings from valid input can never hold a lone surrogate, so the fences are unambiguous. Trees whose
numbers are canonical already (from model values, or from a cooperative parse, which spells them in its number
hook) skip the regular expression. Large containers are encoded in slices, so the canonical bytes of a big
document are streamed to their consumer instead of held whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Final

from .codec import NUMBER_CLOSE, NUMBER_OPEN, decode_text, load_raw, locate, strict_decoder
from .errors import JsonError, JsonErrorReason
from .limits import MAX_DEPTH
from .msgspec_canonical import encode_value
from .number_runs import PACKED_FROM_BYTES, pack_number_arrays
from .numbers import CANONICAL_SPELLING, CANONICAL_TOKEN, canonical_decimal_text, canonical_number_text
from .regex_support import POSSESSIVE_REPEATS_WORK
from .values import JsonArray, JsonBoolean, JsonNull, JsonNumber, JsonObject, JsonString, JsonValue

__all__ = [
    "CanonicalTree",
    "canonical_bytes",
    "canonical_chunks",
    "canonical_text",
    "check_numbers",
    "feed_canonical",
    "load_canonical_tree",
    "tree_from_value",
    "utf16_key",
]

#: Containers with more children than this are encoded slice by slice.
_SLICE: Final = 1024
#: Containers this close to the root are always walked (so params → arguments → rows streams).
_WALK_DEPTH: Final = 3
#: Encoder output is gathered into pieces of about this many characters before it is finished and yielded.
_PIECE: Final = 1 << 16


def _encoder(*, sort_keys: bool) -> Callable[[Any], str]:
    """A compact, non-ASCII-preserving encoder; the C one directly where CPython has it (it saves a third)."""
    if c_make_encoder is not None:
        encode = c_make_encoder(None, None, encode_basestring, None, ":", ",", sort_keys, False, False)
        return lambda node: "".join(encode(node, 0))
    encoder = json.JSONEncoder(
        ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys, check_circular=False, allow_nan=False
    )
    return encoder.encode


_SORTED: Final = _encoder(sort_keys=True)
_IN_ORDER: Final = _encoder(sort_keys=False)
# Code point order equals UTF-16 order unless a supplementary character is in play: raw (its UTF-8 lead byte
# is F0–F4) or escaped as a surrogate pair.
_ESCAPED_HIGH_SURROGATE: Final = re.compile(r"\\u[dD][89abAB]")


def _needs_utf16_order(text: str, raw: bytes) -> bool:
    # Membership tests of bytes are memchr scans, several times faster than any one-pass alternative.
    if b"\\" in raw and b"\\u" in raw and _ESCAPED_HIGH_SURROGATE.search(text) is not None:
        return True
    if text.isascii():
        return False
    return b"\xf0" in raw or b"\xf1" in raw or b"\xf2" in raw or b"\xf3" in raw or b"\xf4" in raw


# "%" formatting is a C call like str.format but skips parsing a replacement field: measurably cheaper per number.
_FENCE: Final = (NUMBER_OPEN + "%s" + NUMBER_CLOSE).__mod__
# Every other token is respelled (and so checked) one by one. This runs on UTF-8 bytes, with the fences passed
# through as surrogates (three bytes each), where splitting the fences off afterwards is cheapest.
_NEEDS_SPELLING: Final = re.compile(
    f'"{NUMBER_OPEN}(?!{CANONICAL_SPELLING}{NUMBER_CLOSE})([-+.0-9eE]*){NUMBER_CLOSE}"'.encode("utf-8", "surrogatepass")
)
_OPEN_BYTES: Final = ('"' + NUMBER_OPEN).encode("utf-8", "surrogatepass")
_CLOSE_BYTES: Final = (NUMBER_CLOSE + '"').encode("utf-8", "surrogatepass")


def utf16_key(name: str) -> bytes:
    """Sort key giving UTF-16 code unit order."""
    return name.encode("utf-16-be")


class CanonicalTree:
    """Plain Python data ready for canonical encoding: numbers fenced, member order known.

    ``source`` is the UTF-8 input it was parsed from (kept by reference, to locate a refusal found while
    encoding, and as a size hint: small documents are encoded in one call, large ones streamed). ``respelled``
    says the fenced numbers are already in canonical spelling and checked, so encoding only drops the fences.
    """

    __slots__ = ("presorted", "respelled", "root", "source")

    def __init__(self, root: Any, *, presorted: bool, source: bytes | None, respelled: bool = False) -> None:
        self.root = root
        self.presorted = presorted
        self.source = source
        self.respelled = respelled

    def with_root(self, root: Any) -> CanonicalTree:
        """The same tree settings over another root (a part of this tree)."""
        return CanonicalTree(root, presorted=self.presorted, source=self.source, respelled=self.respelled)


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


_DECODER: Final = strict_decoder(parse_int=_FENCE, parse_float=_FENCE, object_pairs_hook=_unique)
_UTF16_DECODER: Final = strict_decoder(parse_int=_FENCE, parse_float=_FENCE, object_pairs_hook=_unique_utf16)
#: Most distinct number tokens whose fenced text a cooperative parse shares (per parse).
_SHARED_TOKENS: Final = 4096


def _cooperative_decoder(presorted: bool) -> json.JSONDecoder:
    # With a C-level number hook the C decoder holds the GIL for a whole array of numbers (0.5 s for 10 MiB): a
    # worker thread parsing a large body would stall the event loop that much. This hook is a Python frame, where
    # the interpreter may switch threads; being Python anyway, it also shares the fenced text of equal tokens
    # (about 95 bytes each otherwise), from a table that lives for one parse, and spells each token canonically
    # once (so encoding needs no respelling pass).
    shared: dict[str, str] = {}

    def fence(token: str) -> str:
        fenced = shared.get(token)
        if fenced is None:
            fenced = _FENCE(token if CANONICAL_TOKEN.fullmatch(token) else canonical_number_text(token))
            if len(shared) < _SHARED_TOKENS:
                shared[token] = fenced
        return fenced

    pairs = _unique_utf16 if presorted else _unique
    return strict_decoder(parse_int=fence, parse_float=fence, object_pairs_hook=pairs)


def load_canonical_tree(
    data: bytes | bytearray | memoryview | str, *, max_bytes: int | None = None, cooperative: bool = False
) -> CanonicalTree:
    """Strictly parse ``data`` straight into canonical-ready data (no value model is built).

    Number limits are checked while encoding (see :func:`canonical_chunks`), still with the exact offset.
    ``cooperative=True`` is for a worker thread beside an event loop: other threads get the GIL while it parses
    (every number passes a Python-level hook, which also shares the text of equal number tokens and spells and
    checks them there), in about the time of the plain parse and encoding together.
    """
    text, raw = decode_text(data, max_bytes=max_bytes)
    presorted = _needs_utf16_order(text, raw)
    plain = _UTF16_DECODER if presorted else _DECODER
    decoder = _cooperative_decoder(presorted) if cooperative else plain
    if len(raw) <= PACKED_FROM_BYTES:
        root = load_raw(text, raw, decoder)
    else:
        packed: dict[str, list[str]] = {}

        def pack(checked: str) -> str:
            found = pack_number_arrays(checked)
            if found is None:
                return checked
            for name, chunks in found.arrays.items():
                packed[name] = [_FENCE(_respelled_run(chunk)) for chunk in chunks]
            return found.text

        root = load_raw(text, raw, decoder, prepare=pack)
        if packed:
            root = _unpacked(root, packed)
        if packed:
            # A placeholder the decoder did not meet as an array (never, for the texts pack_number_arrays packs):
            # the document as it came.
            root = load_raw(text, raw, decoder)
    return CanonicalTree(root, presorted=presorted, source=raw, respelled=cooperative)


# A run of plain number tokens (see number_runs) already in canonical spelling, and a token of one that is not.
# Each token of the run ends at its comma (the look-ahead), so the possessive repeat never needs an item back.
_CANONICAL_RUN: re.Pattern[str]
if POSSESSIVE_REPEATS_WORK:
    _CANONICAL_RUN = re.compile(f"{CANONICAL_SPELLING}(?![^,])(?:,{CANONICAL_SPELLING}(?![^,]))*+")
else:  # the same, spelled for CPython before 3.11.5 (regex_support)
    _CANONICAL_RUN = re.compile(f"{CANONICAL_SPELLING}(?![^,])(?>(?:,{CANONICAL_SPELLING}(?![^,]))*)")
_RESPELLED_IN_RUN: Final = re.compile(f"(?<![^,])(?!{CANONICAL_SPELLING}(?![^,]))[^,]+")


def _respell_token(match: re.Match[str]) -> str:
    return canonical_number_text(match.group())


def _respelled_run(chunk: str) -> str:
    """A chunk of a packed number array in canonical spelling: its tokens are checked already (number_runs)."""
    return chunk if _CANONICAL_RUN.fullmatch(chunk) else _RESPELLED_IN_RUN.sub(_respell_token, chunk)


def _unpacked(root: Any, packed: dict[str, list[str]]) -> Any:
    """``root`` with every placeholder array replaced by its fenced canonical chunks, which the encoder writes
    with a comma between them: exactly the array's canonical items."""

    def restored(node: Any) -> Any:
        if type(node) is list and len(node) == 1 and type(node[0]) is str and node[0] in packed:
            # Taken out of ``packed``: what remains there the decoder never met as an array.
            return packed.pop(node[0])
        return node

    root = restored(root)
    pending = [root]
    while pending and packed:
        node = pending.pop()
        if type(node) is dict:
            for name, item in node.items():
                if type(item) is dict or type(item) is list:
                    node[name] = item = restored(item)
                    pending.append(item)
        elif type(node) is list:
            for index, item in enumerate(node):
                if type(item) is dict or type(item) is list:
                    node[index] = item = restored(item)
                    pending.append(item)
    return root


def _tree_from_value(value: JsonValue, depth: int) -> Any:
    # Hot for every sealed state: leaves inside a container are converted in place (no call per leaf).
    kind = type(value)
    if kind is JsonObject:
        if depth >= MAX_DEPTH:
            raise JsonError(JsonErrorReason.DEPTH_EXCEEDED)
        members = value._members  # type: ignore[attr-defined]
        # Joining the names is one C call; code point order is UTF-16 order for ASCII (and all BMP) names.
        names = sorted(members) if "".join(members).isascii() else sorted(members, key=utf16_key)
        node: dict[str, Any] = {}
        for name in names:
            item = members[name]
            item_kind = type(item)
            if item_kind is JsonString or item_kind is JsonBoolean:
                node[name] = item._value
            elif item_kind is JsonNumber:
                node[name] = _FENCE(canonical_decimal_text(item._value))
            elif item_kind is JsonNull:
                node[name] = None
            else:
                node[name] = _tree_from_value(item, depth + 1)
        return node
    if kind is JsonArray:
        if depth >= MAX_DEPTH:
            raise JsonError(JsonErrorReason.DEPTH_EXCEEDED)
        return [_tree_from_value(item, depth + 1) for item in value._items]  # type: ignore[attr-defined]
    if kind is JsonString or kind is JsonBoolean:
        return value._value  # type: ignore[attr-defined]
    if kind is JsonNumber:
        return _FENCE(canonical_decimal_text(value._value))  # type: ignore[attr-defined]
    return None


def tree_from_value(value: JsonValue) -> CanonicalTree:
    """Canonical-ready data for a value of the model (objects presorted in UTF-16 order)."""
    return CanonicalTree(_tree_from_value(value, 0), presorted=True, source=None, respelled=True)


def _encoded(node: Any, depth: int, presorted: bool) -> Iterator[str]:
    encoder = _IN_ORDER if presorted else _SORTED
    kind = type(node)
    if kind is dict and (depth < _WALK_DEPTH or len(node) > _SLICE):
        names = list(node) if presorted else sorted(node)
        yield "{"
        for index, name in enumerate(names):
            yield ("," if index else "") + encoder(name) + ":"
            yield from _encoded(node[name], depth + 1, presorted)
        yield "}"
    elif kind is list and len(node) > _SLICE:
        yield "["
        for start in range(0, len(node), _SLICE):
            yield ("," if start else "") + encoder(node[start : start + _SLICE])[1:-1]
        yield "]"
    elif kind is list and depth < _WALK_DEPTH:
        yield "["
        for index, item in enumerate(node):
            if index:
                yield ","
            yield from _encoded(item, depth + 1, presorted)
        yield "]"
    else:
        yield encoder(node)


def _respell(match: re.Match[bytes]) -> bytes:
    return canonical_number_text(match.group(1).decode("ascii")).encode("ascii")


def _finish(piece: str, tree: CanonicalTree) -> bytes:
    """Turn encoder output into canonical UTF-8: numbers checked and respelled, fences dropped."""
    if piece.isascii():
        return piece.encode("ascii")
    data = piece.encode("utf-8", "surrogatepass")
    if not tree.respelled:
        try:
            data = _NEEDS_SPELLING.sub(_respell, data)
        except JsonError:
            if tree.source is None:
                raise
            raise locate(tree.source.decode("utf-8")) from None
    return b"".join(b"".join(data.split(_OPEN_BYTES)).split(_CLOSE_BYTES))


def canonical_chunks(tree: CanonicalTree) -> Iterator[bytes]:
    """The canonical UTF-8 bytes of ``tree``, in pieces of about 64 KiB (more when one value is larger)."""
    if tree.source is None or len(tree.source) <= _PIECE:
        # Values built in code (sealed states) and small requests: one encoder call beats walking.
        yield _finish((_IN_ORDER if tree.presorted else _SORTED)(tree.root), tree)
        return
    pending: list[str] = []
    size = 0
    for chunk in _encoded(tree.root, 0, tree.presorted):
        pending.append(chunk)
        size += len(chunk)
        if size >= _PIECE:
            yield _finish("".join(pending), tree)
            pending.clear()
            size = 0
    if pending:
        yield _finish("".join(pending), tree)


def check_numbers(tree: CanonicalTree, node: Any) -> None:
    """Check the number limits inside ``node``, a part of ``tree`` that will not be encoded (and so not checked).

    Number tokens are only spelled, and so checked, while encoding; parts a digest leaves out (the request
    envelope, excluded members) must still refuse what the strict parser refuses.
    """
    kind = type(node)
    if tree.respelled:
        return
    if kind is str:
        # One number (a request id, say): its token alone, without an encoder call.
        if node.startswith(NUMBER_OPEN) and CANONICAL_TOKEN.fullmatch(node, 1, len(node) - 1) is None:
            _finish(_SORTED(node), tree)
    elif kind is dict or kind is list:
        _finish((_IN_ORDER if tree.presorted else _SORTED)(node), tree)


def feed_canonical(tree: CanonicalTree, sink: Callable[[bytes], object], *, limit: int | None = None) -> int:
    """Send the canonical bytes of ``tree`` to ``sink``; return their count, refusing past ``limit`` bytes."""
    total = 0
    for piece in canonical_chunks(tree):
        total += len(piece)
        if limit is not None and total > limit:
            raise JsonError(JsonErrorReason.CANONICAL_TOO_LARGE)
        sink(piece)
    return total


def canonical_bytes(value: JsonValue | bytes | bytearray | memoryview | str) -> bytes:
    """The canonical form of a value, or of a JSON document given as bytes or text (parsed strictly)."""
    if isinstance(value, JsonValue):
        # Sealed states: msgspec writes them in C where it can (see msgspec_canonical.encode_value).
        encoded = encode_value(value)
        if encoded is not None:
            return encoded
        tree = tree_from_value(value)
    else:
        tree = load_canonical_tree(value)
    return b"".join(canonical_chunks(tree))


def canonical_text(value: JsonValue | bytes | bytearray | memoryview | str) -> str:
    """The canonical form as text."""
    return canonical_bytes(value).decode("utf-8")
