"""base64url without padding (RFC 4648 §5), strict: the one text form of key material and check values."""

from __future__ import annotations

import binascii
import functools
from collections.abc import Callable
from typing import Final

__all__ = ["decode_base64url", "encode_base64url"]

_TO_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE: Final = bytes.maketrans(b"-_", b"+/")
#: Texts longer than this (sealed-state tokens, not key material or check values) are decoded by msgspec, about
#: three times faster than binascii at a kilobyte. It is imported on the first such text, so reading a keyring
#: never loads it.
_MSGSPEC_FROM_CHARS: Final = 256
_REFUSED: Final = "not unpadded base64url text"


def encode_base64url(data: bytes) -> str:
    """``data`` as base64url text without ``=`` padding."""
    # binascii straight (the base64 module's layers over it add a frame and a copy each).
    return binascii.b2a_base64(data, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")


@functools.cache
def _long_decoder() -> Callable[[bytes], bytes]:
    """msgspec's strict base64 decoder (standard alphabet, padded), reading a JSON string."""
    import msgspec  # only for long texts: see _MSGSPEC_FROM_CHARS

    decode: Callable[[bytes], bytes] = msgspec.json.Decoder(bytes).decode
    return decode


def decode_base64url(text: str) -> bytes:
    """The bytes of canonical, unpadded base64url ``text``.

    Refuses (``ValueError``, with a message that never repeats the text) padding, whitespace, characters
    outside the URL-safe alphabet, an impossible length, and non-canonical spellings whose unused trailing
    bits are not zero: one byte string has exactly one accepted text.
    """
    if not isinstance(text, str):
        raise TypeError("base64url text is a str")
    if len(text) % 4 == 1 or not text.isascii():
        raise ValueError(_REFUSED)
    encoded = text.encode("ascii")
    # The standard alphabet's own characters and padding are not base64url; once they are refused, translating
    # leaves a strict standard decoder to refuse every other character outside the alphabet, in one pass in C.
    if b"+" in encoded or b"/" in encoded or b"=" in encoded:
        raise ValueError(_REFUSED)
    standard = encoded.translate(_FROM_URLSAFE) + b"=" * (-len(text) % 4)
    try:
        if len(text) > _MSGSPEC_FROM_CHARS:
            # Read as a JSON string: an escape would be decoded before the base64 check, so none may stand.
            if b"\\" in encoded:
                raise ValueError(_REFUSED)
            data = _long_decoder()(b'"' + standard + b'"')
        else:
            data = binascii.a2b_base64(standard, strict_mode=True)
    except ValueError:  # binascii.Error and msgspec's DecodeError are both ValueErrors
        raise ValueError(_REFUSED) from None
    # Only a final partial group can carry unused bits: its bytes, written again, must give the same characters.
    partial = len(text) % 4
    if partial and encode_base64url(data[len(data) - (partial - 1) :]) != text[-partial:]:
        raise ValueError("not canonical base64url text (nonzero trailing bits)")
    return data
