"""base64url without padding (RFC 4648 §5), strict: the one text form of key material and check values."""

from __future__ import annotations

import binascii
from typing import Final

__all__ = ["decode_base64url", "encode_base64url"]

_TO_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE: Final = bytes.maketrans(b"-_", b"+/")


def encode_base64url(data: bytes) -> str:
    """``data`` as base64url text without ``=`` padding."""
    # binascii straight (the base64 module's layers over it add a frame and a copy each).
    return binascii.b2a_base64(data, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")


def decode_base64url(text: str) -> bytes:
    """The bytes of canonical, unpadded base64url ``text``.

    Refuses (``ValueError``, with a message that never repeats the text) padding, whitespace, characters
    outside the URL-safe alphabet, an impossible length, and non-canonical spellings whose unused trailing
    bits are not zero: one byte string has exactly one accepted text.
    """
    if not isinstance(text, str):
        raise TypeError("base64url text is a str")
    if len(text) % 4 == 1 or not text.isascii():
        raise ValueError("not unpadded base64url text")
    encoded = text.encode("ascii")
    # The standard alphabet's own characters and padding are not base64url; once they are refused, translating
    # leaves strict binascii to refuse every other character outside the alphabet, in one pass in C.
    if b"+" in encoded or b"/" in encoded or b"=" in encoded:
        raise ValueError("not unpadded base64url text")
    try:
        data = binascii.a2b_base64(encoded.translate(_FROM_URLSAFE) + b"=" * (-len(text) % 4), strict_mode=True)
    except binascii.Error:
        raise ValueError("not unpadded base64url text") from None
    # Only a final partial group can carry unused bits: its bytes, written again, must give the same characters.
    partial = len(text) % 4
    if partial and encode_base64url(data[len(data) - (partial - 1) :]) != text[-partial:]:
        raise ValueError("not canonical base64url text (nonzero trailing bits)")
    return data
