"""The reference strict scanner: exact reason and byte offset for any refused document.

The fast parser (``codec``) leans on the C ``json`` module and only knows *that* a document is bad. When it is,
this scanner walks the text once more, iteratively (no recursion, so depth cannot overflow the stack), and names
the first problem in document order. It is also the oracle the tests compare the fast path against.
"""

from __future__ import annotations

import re
from typing import Final

from .errors import JsonError, JsonErrorReason
from .limits import MAX_DEPTH, MAX_NODES, MAX_NUMBER_TOKEN_CHARS
from .numbers import PLAIN_NUMBER_ITEM, decimal_from_token
from .regex_support import POSSESSIVE_REPEATS_WORK

__all__ = ["RUN_VALUES", "locate_refusal"]

_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_PLAIN_RUN: Final = re.compile(r'[^"\\\x00-\x1f\ud800-\udfff]*')
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_START: Final = frozenset("-0123456789+.")
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES: Final = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS: Final = (("true", 4), ("false", 5), ("null", 4))
_NON_FINITE: Final = ("NaN", "Infinity", "-Infinity")

#: Most values one run covers (see ``_RUN``); runs are taken only while this many more values stay
#: within ``MAX_NODES``, so the value that breaks the node limit is always reached one value at a time.
RUN_VALUES: Final = 4_096


# Runs (see RUN_VALUES): up to RUN_VALUES array items, comma-separated, that the one-value-at-a-time path accepts
# with nothing to check: a plain number (numbers.PLAIN_NUMBER_ITEM, the number pattern and maximality look-ahead of
# _NUMBER and _scan_number, without an exponent), a string without an escape, a comma or a character the string
# scanner refuses, true/false/null, and, where one more level of nesting is allowed, [] and {}. Commas inside a run
# are exactly its separators, so its values are counted in C; each item ends at a character that starts no item.
# Possessive: nothing follows a run that could make it give items back, so the engine keeps no backtracking state
# per item.
_RUN_STRING: Final = r'"[^",\\\x00-\x1f\ud800-\udfff]*"'
_RUN_SCALAR: Final = rf"(?:{PLAIN_NUMBER_ITEM}|{_RUN_STRING}|true|false|null)"
_RUN_ITEM: Final = rf"(?:{PLAIN_NUMBER_ITEM}|{_RUN_STRING}|true|false|null|\[[ \t\n\r]*\]|\{{[ \t\n\r]*\}})"
_RUN: re.Pattern[str]
_RUN_OF_SCALARS: re.Pattern[str]
if POSSESSIVE_REPEATS_WORK:
    _RUN = re.compile(rf"{_RUN_ITEM}(?:[ \t\n\r]*,[ \t\n\r]*{_RUN_ITEM}){{0,{RUN_VALUES - 1}}}+")
    _RUN_OF_SCALARS = re.compile(rf"{_RUN_SCALAR}(?:[ \t\n\r]*,[ \t\n\r]*{_RUN_SCALAR}){{0,{RUN_VALUES - 1}}}+")
else:  # the same, spelled for CPython before 3.11.5 (regex_support)
    _RUN = re.compile(rf"{_RUN_ITEM}(?>(?:[ \t\n\r]*,[ \t\n\r]*{_RUN_ITEM}){{0,{RUN_VALUES - 1}}})")
    _RUN_OF_SCALARS = re.compile(rf"{_RUN_SCALAR}(?>(?:[ \t\n\r]*,[ \t\n\r]*{_RUN_SCALAR}){{0,{RUN_VALUES - 1}}})")


class _Refused(Exception):
    def __init__(self, reason: JsonErrorReason, index: int) -> None:
        self.reason = reason
        self.index = index


def _scan_string(text: str, pos: int) -> tuple[str, int]:
    """Scan the string whose opening quote is at ``pos``; return its value and the index after it."""
    parts: list[str] = []
    pos += 1
    n = len(text)
    while True:
        match = _PLAIN_RUN.match(text, pos)
        assert match is not None
        parts.append(match.group())
        pos = match.end()
        if pos >= n:
            raise _Refused(JsonErrorReason.UNTERMINATED_STRING, pos)
        char = text[pos]
        if char == '"':
            return "".join(parts), pos + 1
        if char != "\\":
            reason = (
                JsonErrorReason.LONE_SURROGATE if "\ud800" <= char <= "\udfff" else JsonErrorReason.CONTROL_CHARACTER
            )
            raise _Refused(reason, pos)
        if pos + 1 >= n:
            raise _Refused(JsonErrorReason.UNTERMINATED_STRING, n)
        kind = text[pos + 1]
        if kind in _SIMPLE_ESCAPES:
            parts.append(_SIMPLE_ESCAPES[kind])
            pos += 2
            continue
        if kind != "u" or not all(c in _HEX for c in text[pos + 2 : pos + 6]) or pos + 6 > n:
            raise _Refused(JsonErrorReason.INVALID_ESCAPE, pos)
        unit = int(text[pos + 2 : pos + 6], 16)
        if 0xDC00 <= unit <= 0xDFFF:
            raise _Refused(JsonErrorReason.LONE_SURROGATE, pos)
        if 0xD800 <= unit <= 0xDBFF:
            low = text[pos + 6 : pos + 12]
            if not (
                len(low) == 6
                and low[:2] == "\\u"
                and all(c in _HEX for c in low[2:])
                and 0xDC00 <= int(low[2:], 16) <= 0xDFFF
            ):
                raise _Refused(JsonErrorReason.LONE_SURROGATE, pos)
            parts.append(chr(0x10000 + ((unit - 0xD800) << 10) + int(low[2:], 16) - 0xDC00))
            pos += 12
            continue
        parts.append(chr(unit))
        pos += 6


def _scan_number(text: str, pos: int) -> int:
    # Hot when a huge refused document is located (millions of numbers): the common case is one regex match.
    match = _NUMBER.match(text, pos)
    if match is None:
        # No number token starts with NaN or Infinity, so they only need looking for when the match fails.
        for word in _NON_FINITE:
            if text.startswith(word, pos):
                raise _Refused(JsonErrorReason.NON_FINITE_NUMBER, pos)
        raise _Refused(JsonErrorReason.INVALID_NUMBER, pos)
    end = match.end()
    # A number followed by more number characters is malformed (01, 1., 1.e5, 1e), not trailing content.
    if end < len(text) and text[end] in "0123456789.eE+-":
        raise _Refused(JsonErrorReason.INVALID_NUMBER, pos)
    # Without an exponent part a token's value has |adjusted exponent| below its length, so within the exponent
    # limit whenever the token is within the length limit: only the other tokens need the full check.
    token = match.group()
    if len(token) > MAX_NUMBER_TOKEN_CHARS or "e" in token or "E" in token:
        try:
            decimal_from_token(token)
        except JsonError as refusal:
            raise _Refused(refusal.reason, pos) from None
    return end


def _scan(text: str, *, runs: bool = True) -> None:
    # ``runs``: consume long arrays of plain items a run at a time (one regex match, commas counted in C) instead of
    # a loop pass per value; a too-many-values document then costs far less than its MAX_NODES passes. The result
    # is the same either way (``runs=False`` is the plain walk the tests compare against).
    n = len(text)
    pos = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
    if pos >= n:
        raise _Refused(JsonErrorReason.EMPTY_INPUT, pos)
    # Each open container: None for an array, or the set of member names seen so far for an object.
    stack: list[set[str] | None] = []
    nodes = 0
    expect_value = True
    while True:
        pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
        if not expect_value and not stack:
            if pos < n:
                raise _Refused(JsonErrorReason.TRAILING_CONTENT, pos)
            return
        if pos >= n:
            raise _Refused(JsonErrorReason.UNEXPECTED_END, pos)
        char = text[pos]
        if expect_value:
            if runs and stack and stack[-1] is None and nodes <= MAX_NODES - RUN_VALUES:
                run = (_RUN if len(stack) < MAX_DEPTH else _RUN_OF_SCALARS).match(text, pos)
                if run is not None:
                    end = run.end()
                    nodes += 1 + text.count(",", pos, end)
                    pos = end
                    expect_value = False
                    continue
            nodes += 1
            if nodes > MAX_NODES:
                raise _Refused(JsonErrorReason.TOO_MANY_NODES, pos)
            if char in "[{":
                if len(stack) >= MAX_DEPTH:
                    raise _Refused(JsonErrorReason.DEPTH_EXCEEDED, pos)
                pos = _WHITESPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
                closer = "]" if char == "[" else "}"
                if pos < n and text[pos] == closer:
                    pos += 1
                    expect_value = False
                elif char == "[":
                    stack.append(None)
                    continue
                else:
                    names: set[str] = set()
                    stack.append(names)
                    pos = _scan_member_name(text, pos, names)
                    continue
            elif char == '"':
                pos = _scan_string(text, pos)[1]
            elif char in _NUMBER_START or text.startswith(("NaN", "Infinity"), pos):
                pos = _scan_number(text, pos)
            else:
                for word, length in _LITERALS:
                    if text.startswith(word, pos):
                        pos += length
                        break
                else:
                    raise _Refused(JsonErrorReason.UNEXPECTED_CHARACTER, pos)
            expect_value = False
            continue
        # After a value inside a container: a separator or that container's closer.
        top = stack[-1]
        if char == ",":
            pos = _WHITESPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            if top is not None:
                pos = _scan_member_name(text, pos, top)
            expect_value = True
        elif char == ("]" if top is None else "}"):
            stack.pop()
            pos += 1
        else:
            raise _Refused(JsonErrorReason.UNEXPECTED_CHARACTER, pos)


def _scan_member_name(text: str, pos: int, seen: set[str]) -> int:
    """Scan ``"name" :`` at ``pos``; return the index of the value that follows."""
    if pos >= len(text):
        raise _Refused(JsonErrorReason.UNEXPECTED_END, pos)
    if text[pos] != '"':
        raise _Refused(JsonErrorReason.UNEXPECTED_CHARACTER, pos)
    name, after = _scan_string(text, pos)
    if name in seen:
        raise _Refused(JsonErrorReason.DUPLICATE_MEMBER, pos)
    seen.add(name)
    after = _WHITESPACE.match(text, after).end()  # type: ignore[union-attr]
    if after >= len(text):
        raise _Refused(JsonErrorReason.UNEXPECTED_END, after)
    if text[after] != ":":
        raise _Refused(JsonErrorReason.UNEXPECTED_CHARACTER, after)
    return after + 1


def locate_refusal(text: str, *, runs: bool = True) -> JsonError | None:
    """The first problem in ``text`` as a :class:`JsonError` with its byte offset, or ``None`` if it is valid.

    ``text`` is already-decoded input (the BOM and UTF-8 checks happen on bytes, before this). ``runs=False`` walks
    every value one at a time (slower on long arrays, same result: what the tests hold the default to).
    """
    try:
        _scan(text, runs=runs)
    except _Refused as refused:
        return JsonError(refused.reason, len(text[: refused.index].encode("utf-8", "surrogatepass")))
    return None
