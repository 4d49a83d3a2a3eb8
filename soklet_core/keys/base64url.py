"""base64url without padding (RFC 4648 §5), strict: the one text form of key material and check values."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

__all__ = ["decode_base64url", "encode_base64url"]

_ALPHABET: Final = re.compile(r"[A-Za-z0-9_-]*")


def encode_base64url(data: bytes) -> str:
    """``data`` as base64url text without ``=`` padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def decode_base64url(text: str) -> bytes:
    """The bytes of canonical, unpadded base64url ``text``.

    Refuses (``ValueError``, with a message that never repeats the text) padding, whitespace, characters
    outside the URL-safe alphabet, an impossible length, and non-canonical spellings whose unused trailing
    bits are not zero: one byte string has exactly one accepted text.
    """
    if not _ALPHABET.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url text")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not unpadded base64url text") from None
    # Only a final partial group can carry unused bits: its bytes, written again, must give the same characters.
    partial = len(text) % 4
    if partial and encode_base64url(data[len(data) - (partial - 1) :]) != text[-partial:]:
        raise ValueError("not canonical base64url text (nonzero trailing bits)")
    return data
