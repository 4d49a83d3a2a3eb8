"""Resource URIs and resource URI templates (the RFC 6570 subset soklet routes on).

A template may use simple expressions ``{name}`` (one path segment's worth: no ``/``, ``?`` or ``#``) and reserved
expressions ``{+name}`` (anything but a line feed, ``/`` included). Other RFC 6570 operators are refused at
registration rather than half-supported. Matched values are percent-decoded::

    template = UriTemplate.parse("test://template/{id}/data")
    template.match("test://template/123/data")   # {"id": "123"}
    template.expand(id="a b")                     # "test://template/a%20b/data"

Matching is a hand-written walk over the template's parts, not a regular expression: a regex with one lazy loop
per variable (``(.+?)/(.+?)/...``) backtracks for a power of the URI's length, and resources/read URIs are client
input. The walk gives the answer such a regex would (each variable as short as the rest still allows, leftmost
first) in time proportional to the URI's length times the number of variables, on URIs of at most
:data:`MAX_MATCHED_URI_CHARS` characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import quote, unquote

from .errors import McpModelErrorReason, RegistrationError

__all__ = ["MAX_MATCHED_URI_CHARS", "UriTemplate", "is_absolute_uri"]

#: The longest URI a template is matched against; a longer one matches no template (a fixed resource's exact URI
#: is looked up whatever its length). Bounds the work a resources/read URI can cost: O(length x variables).
MAX_MATCHED_URI_CHARS: Final = 8192

_ABSOLUTE_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x20\x7f]*")
# A variable name is dot-separated runs of [A-Za-z0-9_]; the dots are checked after the match (_is_name), so that
# the pattern holds no repetition inside a repetition.
_EXPRESSION: Final = re.compile(r"\{(\+?)([A-Za-z0-9_.]+)\}")
_LITERAL: Final = re.compile(r"[^\x00-\x20\x7f{}]*")
# RFC 3986 reserved characters stay literal in a {+name} expansion.
_RESERVED: Final = ":/?#[]@!$&'()*+,;="
# What each kind of variable may not contain: a {+name} anything but a line feed (what the regex "." of the former
# matcher excluded), a {name} no "/", "?" or "#".
_RESERVED_STOPS: Final = "\n"
_SIMPLE_STOPS: Final = "/?#"


def is_absolute_uri(uri: object) -> bool:
    """Whether ``uri`` is a str with a scheme and no whitespace or control characters (``test://x``, ``file:///a``)."""
    return isinstance(uri, str) and _ABSOLUTE_URI.fullmatch(uri) is not None


def _is_name(name: str) -> bool:
    return all(name.split("."))


def _stops(text: str, stops: str) -> list[int]:
    """``result[p]``: the first index at or after ``p`` holding one of ``stops`` (``len(text)`` if none)."""
    result = [len(text)] * (len(text) + 1)
    for position in range(len(text) - 1, -1, -1):
        result[position] = position if text[position] in stops else result[position + 1]
    return result


def _walk(uri: str, parts: tuple[tuple[str, str, bool], ...]) -> list[str] | None:
    """The raw values of the variables of ``parts`` (see :class:`UriTemplate`) in ``uri``, or ``None``.

    Among all ways to cut ``uri``, the one whose variable ends are smallest, first variable first: what a
    backtracking regex of one lazy loop per variable returns, found without backtracking. Backwards, variable by
    variable, ``first_end[p]`` is the first ``e >= p`` where the variable may end with the rest of the template
    still matching ``uri[e:]``; forwards, each variable then takes the first such end its characters reach.
    O(len(uri) x variables), plus the literal comparisons.
    """
    length = len(uri)
    count = len(parts) - 1  # parts[i] = (literal before variable i, variable i, reserved); parts[-1][0] is the tail
    if not uri.startswith(parts[0][0]) or sum(len(literal) for literal, _, _ in parts) + count > length:
        return None
    stops = [_RESERVED_STOPS if reserved else _SIMPLE_STOPS for _, _, reserved in parts[:-1]]
    stop_tables: dict[str, list[int]] = {}
    first_ends: list[list[int]] = [[]] * count
    # rest[p]: whether what follows the current variable (its next literal and on) can match uri[p:] exactly.
    rest = [False] * length + [True]
    for index in range(count - 1, -1, -1):
        literal = parts[index + 1][0]
        first_end = [length + 1] * (length + 2)
        for end in range(length - len(literal), -1, -1):
            good = rest[end + len(literal)] and uri.startswith(literal, end)
            first_end[end] = end if good else first_end[end + 1]
        first_ends[index] = first_end
        if stops[index] not in stop_tables:
            stop_tables[stops[index]] = _stops(uri, stops[index])
        stop = stop_tables[stops[index]]
        # The variable may start at `start` if an end lies in (start, the first stop character at or after start].
        rest = [first_end[start + 1] <= stop[start] for start in range(length)] + [False]
    values: list[str] = []
    start = len(parts[0][0])
    for index in range(count):
        end = first_ends[index][start + 1] if start < length else length + 1
        if end > length or any(char in stops[index] for char in uri[start:end]):
            return None
        values.append(uri[start:end])
        start = end + len(parts[index + 1][0])
    return values


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class UriTemplate:
    """A parsed resource URI template: ``UriTemplate(text)`` (or :meth:`parse`); it is kept as written (``text``).

    Raises :class:`RegistrationError` ``invalid-uri-template`` for anything outside the subset, a repeated
    variable, or a template that does not start like an absolute URI. Equality and hash are the text's.
    """

    text: str
    variables: tuple[str, ...] = field(init=False)
    _parts: tuple[tuple[str, str, bool], ...] = field(init=False)

    def __post_init__(self) -> None:
        text = self.text
        if not isinstance(text, str):
            raise RegistrationError(McpModelErrorReason.INVALID_URI_TEMPLATE)
        parts: list[tuple[str, str, bool]] = []  # (literal before, variable, reserved)
        position = 0
        for match in _EXPRESSION.finditer(text):
            literal = text[position : match.start()]
            if not _LITERAL.fullmatch(literal) or not _is_name(match.group(2)):
                raise RegistrationError(McpModelErrorReason.INVALID_URI_TEMPLATE, text)
            parts.append((literal, match.group(2), match.group(1) == "+"))
            position = match.end()
        tail = text[position:]
        if not _LITERAL.fullmatch(tail) or not parts:
            raise RegistrationError(McpModelErrorReason.INVALID_URI_TEMPLATE, text)
        names = tuple(name for _, name, _ in parts)
        if len(set(names)) != len(names) or not is_absolute_uri(parts[0][0] + "x"):
            raise RegistrationError(McpModelErrorReason.INVALID_URI_TEMPLATE, text)
        parts.append((tail, "", False))
        object.__setattr__(self, "variables", names)
        object.__setattr__(self, "_parts", tuple(parts))

    @classmethod
    def parse(cls, text: str) -> UriTemplate:
        """Parse ``text`` as a template: the same as ``UriTemplate(text)``."""
        return cls(text)

    def match(self, uri: str) -> dict[str, str] | None:
        """The percent-decoded variable values if ``uri`` matches the whole template, else ``None``.

        Each variable takes at least one character and as few as the rest of the template allows, leftmost first
        (``{+a}/{+b}`` on ``x/y/z`` gives ``a = "x"``). A URI longer than :data:`MAX_MATCHED_URI_CHARS` matches
        nothing."""
        if not isinstance(uri, str) or len(uri) > MAX_MATCHED_URI_CHARS:
            return None
        found = _walk(uri, self._parts)
        if found is None:
            return None
        return {name: unquote(value) for name, value in zip(self.variables, found, strict=True)}

    def expand(self, values: Mapping[str, str] | None = None, /, **named: str) -> str:
        """The URI with every variable replaced (``{name}`` fully percent-encoded, ``{+name}`` keeping reserved
        characters). Raises ``KeyError`` for a missing variable."""
        supplied = {**(values or {}), **named}
        out = []
        for literal, name, reserved in self._parts:
            out.append(literal)
            if name:
                out.append(quote(supplied[name], safe=_RESERVED if reserved else ""))
        return "".join(out)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UriTemplate) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"UriTemplate({self.text!r})"
