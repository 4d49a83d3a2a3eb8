"""The MCP request headers of the 2026-07-28 HTTP transport as values: :class:`HttpRequest` (a POST's path, headers
and body) and the ``Mcp-Name`` / ``Mcp-Param-*`` value codec (:func:`encode_header`, :func:`decode_header`: as is
for printable ASCII, else the ``=?base64?...?=`` sentinel).

Below the rooms so that every room that speaks these headers reads one codec.

>>> decode_header(encode_header("naïve"))
'naïve'
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["HttpRequest", "decode_header", "encode_header"]

_BASE64_SENTINEL: Final = re.compile(r"=\?base64\?([A-Za-z0-9+/=_-]*)\?=")


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One POST of the 2026-07-28 transport: the endpoint path, headers with lower-case names, and the body."""

    path: str
    headers: Mapping[str, str]
    body: bytes


def decode_header(value: str) -> str | None:
    """An ``Mcp-Name`` or ``Mcp-Param-*`` value as text (surrounding spaces removed, the sentinel decoded); ``None``
    for a sentinel that does not decode (base64, then UTF-8)."""
    value = value.strip()
    match = _BASE64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match.group(1), validate=False).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def encode_header(text: str) -> str:
    """``text`` as an ``Mcp-Name`` or ``Mcp-Param-*`` header value: as is when it is printable ASCII without
    surrounding spaces (and not itself sentinel-shaped), else the ``=?base64?...?=`` sentinel the server decodes."""
    if text.isascii() and text.isprintable() and text == text.strip() and _BASE64_SENTINEL.fullmatch(text) is None:
        return text
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="
