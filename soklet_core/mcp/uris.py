"""Resource URIs and resource URI templates (the RFC 6570 subset soklet routes on).

A template may use simple expressions ``{name}`` (one path segment's worth: no ``/``, ``?`` or ``#``) and reserved
expressions ``{+name}`` (anything, ``/`` included). Other RFC 6570 operators are refused at registration rather
than half-supported. Matched values are percent-decoded::

    template = UriTemplate.parse("test://template/{id}/data")
    template.match("test://template/123/data")   # {"id": "123"}
    template.expand(id="a b")                     # "test://template/a%20b/data"
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

from ._frozen import new_frozen
from .errors import McpModelErrorReason, RegistrationError

__all__ = ["UriTemplate", "is_absolute_uri"]

_ABSOLUTE_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x20\x7f]*")
_EXPRESSION: Final = re.compile(r"\{(\+?)([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)\}")
_LITERAL: Final = re.compile(r"[^\x00-\x20\x7f{}]*")
# RFC 3986 reserved characters stay literal in a {+name} expansion.
_RESERVED: Final = ":/?#[]@!$&'()*+,;="


def is_absolute_uri(uri: object) -> bool:
    """Whether ``uri`` is a str with a scheme and no whitespace or control characters (``test://x``, ``file:///a``)."""
    return isinstance(uri, str) and _ABSOLUTE_URI.fullmatch(uri) is not None


@dataclass(frozen=True, slots=True, init=False)
class UriTemplate:
    """A parsed resource URI template. Build it with :meth:`parse`; it is kept as written (``text``)."""

    text: str
    variables: tuple[str, ...]
    _pattern: re.Pattern[str]
    _parts: tuple[tuple[str, str, bool], ...]

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("use UriTemplate.parse(text)")

    @classmethod
    def parse(cls, text: str) -> UriTemplate:
        """Parse ``text``; raises :class:`RegistrationError` ``invalid-uri-template`` for anything outside the
        subset, a repeated variable, or a template that does not start like an absolute URI."""
        if not isinstance(text, str):
            raise RegistrationError(McpModelErrorReason.INVALID_URI_TEMPLATE)
        parts: list[tuple[str, str, bool]] = []  # (literal before, variable, reserved)
        pattern = ""
        position = 0
        for match in _EXPRESSION.finditer(text):
            literal = text[position : match.start()]
            if not _LITERAL.fullmatch(literal):
                raise RegistrationError(McpModelErrorReason.INVALID_URI_TEMPLATE, text)
            reserved, name = match.group(1) == "+", match.group(2)
            parts.append((literal, name, reserved))
            group = f"(?P<v{len(parts) - 1}>{'.+?' if reserved else '[^/?#]+?'})"
            pattern += re.escape(literal) + group
            position = match.end()
        tail = text[position:]
        if not _LITERAL.fullmatch(tail) or not parts:
            raise RegistrationError(McpModelErrorReason.INVALID_URI_TEMPLATE, text)
        names = tuple(name for _, name, _ in parts)
        if len(set(names)) != len(names) or not is_absolute_uri(parts[0][0] + "x"):
            raise RegistrationError(McpModelErrorReason.INVALID_URI_TEMPLATE, text)
        parts.append((tail, "", False))
        return new_frozen(
            cls, text=text, variables=names, _pattern=re.compile(pattern + re.escape(tail)), _parts=tuple(parts)
        )

    def match(self, uri: str) -> dict[str, str] | None:
        """The percent-decoded variable values if ``uri`` matches the whole template, else ``None``."""
        found = self._pattern.fullmatch(uri) if isinstance(uri, str) else None
        if found is None:
            return None
        return {name: unquote(found.group(f"v{index}")) for index, name in enumerate(self.variables)}

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
