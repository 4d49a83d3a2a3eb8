"""Endpoint-path normalization: the one spelling of an endpoint path that a sealed state is bound to.

Two requests reach the same endpoint through many spellings (``/mcp``, ``/mcp/``, ``//mcp``, ``/a/../mcp``,
``/%6Dcp``). A state sealed for one of them must open for the others, and for no other endpoint, so the binding
holds the normalized path. :func:`normalize_endpoint_path` applies, in this order:

1. **Encode.** Every character that is not allowed raw in an RFC 3986 path (``unreserved``, ``sub-delims``,
   ``:``, ``@``, ``/``) is percent-encoded as its UTF-8 bytes; a ``%`` not followed by two hex digits becomes
   ``%25``. A decoded path (``/mcp ü``) and its encoded form (``/mcp%20%C3%BC``) therefore agree.
2. **Escapes.** Every escape ``%xx`` gets uppercase hex digits; an escape of an *unreserved* character
   (``A-Z a-z 0-9 - . _ ~``) is replaced by the character (RFC 3986 §6.2.2.2). Reserved escapes such as ``%2F``
   stay escaped: ``/a%2Fb`` is one segment, not two.
3. **Slashes.** Runs of ``/`` collapse into one.
4. **Dot segments.** ``.`` and ``..`` segments are removed as RFC 3986 §5.2.4 says (after step 2, so ``%2E%2E``
   counts as ``..``); ``..`` never climbs above the root.
5. **Trailing slash.** A trailing ``/`` is removed, except for the root path ``/`` itself.

The path must be a ``str`` that starts with ``/`` and holds no ``?`` or ``#`` (pass the path, not the target), and
both it and its normalized form must be at most :data:`MAX_ENDPOINT_PATH_CHARS` characters; anything else is
refused with ``ProtectionUsageError(INVALID_ENDPOINT_PATH)``. The raw length is checked first, so a long path costs
nothing and an accepted one costs time linear in its length: every step is a single left-to-right scan (no regular
expression with nested repetition). Case is kept: ``/MCP`` and ``/mcp`` are different endpoints. The function is
idempotent.

>>> normalize_endpoint_path("//api/./v1/../%6dcp/")
'/api/mcp'
"""

from __future__ import annotations

import re
from typing import Final

from .errors import ProtectionUsageError, ProtectionUsageReason

__all__ = ["MAX_ENDPOINT_PATH_CHARS", "normalize_endpoint_path"]

MAX_ENDPOINT_PATH_CHARS: Final = 2_048
"""The longest endpoint path, in characters, that :func:`normalize_endpoint_path` accepts, before and after
normalization.

A real MCP endpoint path is a few characters (``/mcp``); 2,048 is the classic URL length that browsers, proxies
and servers all carry, so no reachable endpoint is refused, and a normalized path stays a small part of a sealed
state's default 49,152-byte plaintext, which binds it. The raw length is checked before any other work (the
transport normalizes every request's path before it looks at the method, the headers or the body); the normalized
length is checked too, because encoding can grow a path 12-fold (one non-BMP character becomes ``%F0%9F%98%80``)
and normalizing a normalized path must give it back, not a refusal.
"""

_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# What may stand raw in a path: unreserved, sub-delims, ":", "@", "/" and "%" (checked as an escape below).
_RAW_OK: Final = _UNRESERVED | frozenset("!$&'()*+,;=:@/")
_ESCAPE: Final = re.compile(r"%([0-9A-Fa-f]{2})")
# A segment of an already-normal path may not start with "." (no dot segments) and holds no "%" (no escapes).
_SEGMENT_CHARS: Final = _RAW_OK - frozenset("/")
_SEGMENT_START: Final = _SEGMENT_CHARS - frozenset(".")
_SLASHES: Final = re.compile(r"/{2,}")


def _already_normal(path: str) -> bool:
    # One scan: "/" alone, or "/" segments each starting with a non-dot character, no "%", no "//", no trailing "/".
    if path == "/":
        return True
    previous = ""
    for char in path:
        if previous == "/":
            if char not in _SEGMENT_START:
                return False
        elif char != "/" and char not in _SEGMENT_CHARS:
            return False
        previous = char
    return previous != "/"


def _encode(path: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(path):
        char = path[index]
        if char == "%" and _ESCAPE.match(path, index):
            out.append(path[index : index + 3])
            index += 3
            continue
        if char in _RAW_OK:
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        index += 1
    return "".join(out)


def _escape(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else "%" + match.group(1).upper()


def _remove_dot_segments(path: str) -> str:
    # RFC 3986 §5.2.4 on an absolute path whose slashes are already collapsed: a segment stack is equivalent.
    output: list[str] = []
    segments = path.split("/")[1:]
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if output:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    return "/" + "/".join(output)


def _normalize(path: str) -> str:
    # The five steps of the module documentation, on a path already checked by normalize_endpoint_path.
    encoded = _encode(path)
    escaped = _ESCAPE.sub(_escape, encoded) if "%" in encoded else encoded
    collapsed = _SLASHES.sub("/", escaped)
    undotted = _remove_dot_segments(collapsed)
    undotted = _SLASHES.sub("/", undotted)
    if len(undotted) > 1 and undotted.endswith("/"):
        undotted = undotted.rstrip("/") or "/"
    return undotted


def normalize_endpoint_path(path: str) -> str:
    """The normalized form of endpoint path ``path`` (see the module documentation for the rules)."""
    if not isinstance(path, str) or len(path) > MAX_ENDPOINT_PATH_CHARS:
        raise ProtectionUsageError(ProtectionUsageReason.INVALID_ENDPOINT_PATH)
    if not path.startswith("/") or "?" in path or "#" in path:
        raise ProtectionUsageError(ProtectionUsageReason.INVALID_ENDPOINT_PATH)
    # The common case (/mcp) needs none of the steps.
    if _already_normal(path):
        return path
    normal = _normalize(path)
    if len(normal) > MAX_ENDPOINT_PATH_CHARS:
        raise ProtectionUsageError(ProtectionUsageReason.INVALID_ENDPOINT_PATH)
    return normal
