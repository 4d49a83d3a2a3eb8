"""OAuth scope values (RFC 6749 §3.3): the one home of their syntax.

A scope is a *scope-token*: one or more of the printable ASCII characters except space, ``"`` and ``\\``. The
syntax matters beyond the token: a scope a registration requires is written back to a refused client inside a
quoted ``WWW-Authenticate`` parameter (``scope="files:read files:write"``), so a value that could break the quoting
is refused where it is configured, never escaped where it is sent.

>>> sorted(scope_set(["files:read", "files:write"]))
['files:read', 'files:write']
>>> sorted(parse_scope_text("mcp:tools  openid"))
['mcp:tools', 'openid']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["MAX_SCOPES", "MAX_SCOPE_CHARS", "parse_scope_text", "scope_set"]

#: The longest scope value soklet accepts (configured or carried in a token).
MAX_SCOPE_CHARS: Final = 128
#: The most scopes one set holds (configured, or granted by one token).
MAX_SCOPES: Final = 64
#: RFC 6749 scope-token characters: %x21 / %x23-5B / %x5D-7E.
_SCOPE_CHARS: Final = frozenset(chr(code) for code in range(0x21, 0x7F)) - frozenset('"\\')


def _is_scope_token(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_SCOPE_CHARS and _SCOPE_CHARS.issuperset(value)


def scope_set(values: Iterable[str]) -> frozenset[str]:
    """``values`` as a set of scopes; ``ValueError`` (a fixed message) for a value that is not a scope-token of at
    most :data:`MAX_SCOPE_CHARS` characters, for a bare string (a string is not a list of scopes), or for more than
    :data:`MAX_SCOPES` values."""
    if isinstance(values, (str, bytes)):
        raise ValueError("scopes are given as a list of scope values, not as one string")
    found: set[str] = set()
    for count, value in enumerate(values, start=1):
        if count > MAX_SCOPES or not _is_scope_token(value):
            raise ValueError(
                f"a scope is 1-{MAX_SCOPE_CHARS} printable ASCII characters without space, '\"' or '\\' "
                f"(at most {MAX_SCOPES} of them)"
            )
        found.add(value)
    return frozenset(found)


def parse_scope_text(text: str) -> frozenset[str]:
    """The scopes of a space-delimited ``scope`` value (a token's claim, an introspection answer): ``ValueError``
    as :func:`scope_set` when one of them is not a scope-token. Runs of spaces are one separator."""
    if not isinstance(text, str):
        raise ValueError("a scope text is a string")
    if len(text) > MAX_SCOPES * (MAX_SCOPE_CHARS + 1):
        raise ValueError("a scope text is too long")
    return scope_set(part for part in text.split(" ") if part)
