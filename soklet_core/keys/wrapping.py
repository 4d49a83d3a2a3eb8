"""Key wrapping: a data key's material encrypted under a key-encryption key (KEK), so a store or a file holds no key.

A :class:`WrappedKey` is what is kept at rest: the data key's id, the id of the KEK that wrapped it, and the
ciphertext. The KEK id is public (a one-way check value of a local KEK, or what an external KMS reports): it tells
"this keyring was wrapped under another KEK" apart from "this ciphertext was tampered with", so a wrong KEK is
refused with one clear sentence before any key is used.

:class:`LocalKek` wraps with AES-256-GCM under 32 bytes held in memory. The associated data is the format tag, the
profile and the key id, so a wrapped key moved to another id or another profile does not unwrap. Any other holder
of a KEK (a KMS, an HSM: see ``kek_command``) implements :class:`KeyWrapper`: ``kek_id``, ``wrap``, ``unwrap``.

Wrapped ciphertext = nonce (12 random bytes) ‖ AES-256-GCM ciphertext ‖ tag (16 bytes); associated data =
``b"soklet-kek-v1" ‖ 0x00 ‖ profile ‖ 0x00 ‖ key id``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Final, NoReturn, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from soklet_core.errors import ErrorReason, SokletError

from .base64url import encode_base64url
from .key import ProtectionKey, check_key_id

__all__ = [
    "KEK_BYTES",
    "MAX_WRAPPED_BYTES",
    "KeyWrapError",
    "KeyWrapErrorReason",
    "KeyWrapper",
    "LocalKek",
    "WrappedKey",
    "check_kek_id",
]

#: A local KEK is exactly 32 bytes (AES-256).
KEK_BYTES: Final = 32
#: The largest wrapped ciphertext kept or accepted (the largest key material, 1,024 bytes, plus room for a
#: KMS's own framing).
MAX_WRAPPED_BYTES: Final = 4096
#: A KEK id: 1 to 64 RFC 9110 token characters, like a key id (it is printed and stored beside every key).
_KEK_ID_MAX: Final = 64
_NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16
_FORMAT: Final = b"soklet-kek-v1"
_CHECK_LABEL: Final = b"soklet kek check value v1"


class KeyWrapErrorReason(ErrorReason):
    """Why a key could not be wrapped or unwrapped. The set is closed."""

    INVALID_KEK = "invalid-kek", "a key-encryption key must be exactly 32 bytes"
    WRONG_KEK = "wrong-kek", "the key was wrapped under another key-encryption key than the one given"
    UNWRAP_FAILED = (
        "unwrap-failed",
        "the wrapped key did not authenticate under the key-encryption key (tampered, or moved to another id)",
    )
    MALFORMED_WRAPPED_KEY = "malformed-wrapped-key", "a wrapped key is not well formed"
    KEK_UNAVAILABLE = (
        "kek-unavailable",
        "the key-encryption key could not be reached (its command failed, timed out or answered out of protocol)",
    )


class KeyWrapError(SokletError):
    """A key that could not be wrapped or unwrapped. The message names the key id (public) and the reason, never
    material, a KEK, or what an external command printed."""

    __slots__ = ("detail", "key_id")

    reason: KeyWrapErrorReason

    def __init__(self, reason: KeyWrapErrorReason, key_id: str | None = None, detail: str | None = None) -> None:
        self.key_id = key_id
        # Fixed text or a count, never input: another layer may repeat it in its own message.
        self.detail = detail
        subject = "" if key_id is None else f" (key {key_id!r})"
        more = "" if detail is None else f"; {detail}"
        super().__init__(reason, f"{reason.value}{subject}: {reason.description}{more}")


def check_kek_id(kek_id: object) -> str:
    """``kek_id`` if it is 1 to 64 printable ASCII characters without spaces; else ``KeyWrapError``."""
    if (
        not isinstance(kek_id, str)
        or not 1 <= len(kek_id) <= _KEK_ID_MAX
        or not kek_id.isascii()
        or not all(33 <= ord(c) <= 126 for c in kek_id)
    ):
        raise KeyWrapError(
            KeyWrapErrorReason.MALFORMED_WRAPPED_KEY, detail="a KEK id must be 1 to 64 printable characters"
        )
    return kek_id


@dataclass(frozen=True, slots=True)
class WrappedKey:
    """A data key at rest: its id, the id of the KEK that wrapped it, and the ciphertext (opaque to soklet for an
    external KEK). Holds no secret: the ciphertext reveals nothing without the KEK."""

    key_id: str
    kek_id: str
    ciphertext: bytes

    def __post_init__(self) -> None:
        check_key_id(self.key_id)
        check_kek_id(self.kek_id)
        if not isinstance(self.ciphertext, bytes) or not 1 <= len(self.ciphertext) <= MAX_WRAPPED_BYTES:
            raise KeyWrapError(KeyWrapErrorReason.MALFORMED_WRAPPED_KEY, self.key_id)

    def __repr__(self) -> str:
        return f"WrappedKey(key_id={self.key_id!r}, kek_id={self.kek_id!r}, ciphertext=<{len(self.ciphertext)} bytes>)"


class KeyWrapper(Protocol):
    """Whoever holds a KEK: wraps a data key for storage and unwraps it into memory.

    ``unwrap`` raises ``KeyWrapError(WRONG_KEK)`` when ``wrapped.kek_id`` is not its own, ``UNWRAP_FAILED`` when
    the ciphertext does not authenticate, ``KEK_UNAVAILABLE`` when the KEK cannot be reached. Both may block (an
    external command): call them off the event loop.
    """

    @property
    def kek_id(self) -> str:
        """The public id of this KEK, stored beside every key it wraps."""
        ...

    def wrap(self, key: ProtectionKey, profile: str) -> WrappedKey:
        """``key`` wrapped under this KEK, bound to its id and ``profile``."""
        ...

    def unwrap(self, wrapped: WrappedKey, profile: str) -> ProtectionKey:
        """The data key ``wrapped`` holds."""
        ...


def _associated_data(key_id: str, profile: str) -> bytes:
    return _FORMAT + b"\x00" + profile.encode("utf-8") + b"\x00" + key_id.encode("ascii")


class LocalKek:
    """A 32-byte KEK held in memory (read from a file or an environment variable). Redacted in every repr."""

    __slots__ = ("_aead", "_kek_id")

    def __init__(self, material: bytes | bytearray | memoryview) -> None:
        secret = bytes(material)
        if len(secret) != KEK_BYTES:
            raise KeyWrapError(KeyWrapErrorReason.INVALID_KEK)
        check = hmac.new(secret, _CHECK_LABEL, hashlib.sha256).digest()
        # 96 bits of a one-way, domain-separated value: enough to tell KEKs apart, nothing about the KEK.
        self._kek_id = "kek-" + encode_base64url(check[:12])
        self._aead = AESGCM(secret)

    @classmethod
    def generate(cls) -> tuple[LocalKek, bytes]:
        """A new KEK from the CSPRNG and its bytes (to write to a 0600 file)."""
        material = os.urandom(KEK_BYTES)
        return cls(material), material

    @property
    def kek_id(self) -> str:
        """``kek-`` and 16 base64url characters of HMAC-SHA256(KEK, "soklet kek check value v1")."""
        return self._kek_id

    def wrap(self, key: ProtectionKey, profile: str) -> WrappedKey:
        """``key`` encrypted with AES-256-GCM under this KEK, a fresh random nonce, its id and profile as AD."""
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, key.material, _associated_data(key.id, profile))
        return WrappedKey(key_id=key.id, kek_id=self._kek_id, ciphertext=nonce + sealed)

    def unwrap(self, wrapped: WrappedKey, profile: str) -> ProtectionKey:
        """The data key; refused when wrapped under another KEK or when the ciphertext does not authenticate."""
        if wrapped.kek_id != self._kek_id:
            raise KeyWrapError(KeyWrapErrorReason.WRONG_KEK, wrapped.key_id)
        blob = wrapped.ciphertext
        if len(blob) < _NONCE_BYTES + _TAG_BYTES + 1:
            raise KeyWrapError(KeyWrapErrorReason.MALFORMED_WRAPPED_KEY, wrapped.key_id)
        try:
            material = self._aead.decrypt(
                blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], _associated_data(wrapped.key_id, profile)
            )
        except InvalidTag:
            raise KeyWrapError(KeyWrapErrorReason.UNWRAP_FAILED, wrapped.key_id) from None
        return ProtectionKey.from_id_and_bytes(wrapped.key_id, material)

    def __repr__(self) -> str:
        return f"LocalKek(kek_id={self._kek_id!r})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a KEK cannot be pickled")
