"""Envelope v1: the built-in AES-256-GCM protector over a keyring manager.

Token = base64url without padding (canonical: re-encoding the bytes gives the same text) of::

    0x01 ‖ len(kid) (1 byte) ‖ kid (ASCII) ‖ nonce (12 bytes) ‖ AES-256-GCM ciphertext ‖ tag (16 bytes)

* AEAD key = HKDF-SHA256(key material, salt = empty, info = ``b"soklet-mcp-protection-v1/aead"``, 32 bytes),
  derived once per key and cached for as long as the key stays in the keyring.
* Associated data = ``b"soklet-mcp-protection-v1" ‖ 0x00 ‖ header`` where header = ``0x01 ‖ len(kid) ‖ kid``.
* The nonce is 12 bytes from the nonce source (the OS CSPRNG unless a test injects a fixed one).

Opening checks, in order: base64url (``BASE64URL``), version byte (``VERSION``), key id present, well formed and
in the keyring (``UNKNOWN_KEY``), then the AEAD (``AUTHENTICATION``, also for a body too short to hold a nonce
and a tag). The byte layout is documented in ``docs/protection-format.md``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from soklet_core.keys import KeyringManager, ProtectionKey, decode_base64url, encode_base64url, is_valid_key_id

from .errors import ProtectionUsageError, ProtectionUsageReason, Reason, RequestStateProtectionException
from .protector import ENVELOPE_VERSION, RequestStateProtectionContext, envelope_header

__all__ = [
    "AEAD_KEY_BYTES",
    "HKDF_INFO",
    "NONCE_BYTES",
    "TAG_BYTES",
    "EnvelopeHeader",
    "EnvelopeProtector",
    "NonceSource",
    "derive_aead_key",
]

#: The HKDF ``info`` of the AEAD key.
HKDF_INFO: Final = b"soklet-mcp-protection-v1/aead"
#: AES-256: the derived key is 32 bytes.
AEAD_KEY_BYTES: Final = 32
#: The GCM nonce, fresh for every seal.
NONCE_BYTES: Final = 12
#: The GCM tag, at the end of the envelope.
TAG_BYTES: Final = 16

#: A nonce source: called with 12, returns 12 bytes (``os.urandom`` by default).
NonceSource = Callable[[int], bytes]


def derive_aead_key(material: bytes) -> bytes:
    """HKDF-SHA256(material, salt empty, info ``soklet-mcp-protection-v1/aead``) → 32 bytes. Secret: never log."""
    return HKDF(algorithm=SHA256(), length=AEAD_KEY_BYTES, salt=None, info=HKDF_INFO).derive(material)


def _decode(token: str) -> bytes:
    try:
        # Strict and canonical: no padding, URL-safe alphabet only, unused trailing bits zero.
        return decode_base64url(token)
    except (ValueError, TypeError):
        raise RequestStateProtectionException(Reason.BASE64URL) from None


@dataclass(frozen=True, slots=True)
class EnvelopeHeader:
    """What anyone can read from a built-in token without a key.

    ``encoded_size`` is the token's length in characters (bytes: it is ASCII); ``decoded_size`` the length of
    the plaintext inside (the ciphertext length; GCM does not pad).
    """

    version: int
    key_id: str
    encoded_size: int
    decoded_size: int

    @classmethod
    def read(cls, token: str) -> EnvelopeHeader:
        """Read the header of ``token``; raises ``RequestStateProtectionException`` (``BASE64URL``,
        ``VERSION``, ``UNKNOWN_KEY`` for a missing or malformed key id, ``AUTHENTICATION`` for a body too
        short for a nonce and a tag)."""
        raw = _decode(token)
        key_id, body_start = _split_header(raw)
        if len(raw) - body_start < NONCE_BYTES + TAG_BYTES:
            raise RequestStateProtectionException(Reason.AUTHENTICATION)
        return cls(raw[0], key_id, len(token), len(raw) - body_start - NONCE_BYTES - TAG_BYTES)


def _split_header(raw: bytes) -> tuple[str, int]:
    """The key id and the offset of the nonce; raises for a bad version or key id."""
    if not raw or raw[0] != ENVELOPE_VERSION:
        raise RequestStateProtectionException(Reason.VERSION)
    if len(raw) < 2 or raw[1] == 0 or len(raw) < 2 + raw[1]:
        raise RequestStateProtectionException(Reason.UNKNOWN_KEY)
    end = 2 + raw[1]
    kid = raw[2:end]
    # A key id is RFC 9110 token characters; anything else cannot name a key in any keyring.
    key_id = kid.decode("ascii", "replace")
    if not is_valid_key_id(key_id):
        raise RequestStateProtectionException(Reason.UNKNOWN_KEY)
    return key_id, end


class EnvelopeProtector:
    """The built-in protector: envelope v1 under the active key of a :class:`~soklet_core.keys.KeyringManager`.

    Sealing holds a reservation on the active key (so a rotation cannot remove the key mid-seal) and always
    seals under the active key; opening accepts any key of the current keyring, active or verification-only.
    ``nonce_source`` (default ``os.urandom``) is for deterministic tests.
    """

    __slots__ = ("_aeads", "_lock", "_manager", "_nonce_source")

    def __init__(self, manager: KeyringManager, *, nonce_source: NonceSource | None = None) -> None:
        if not isinstance(manager, KeyringManager):
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_PROVIDER)
        self._manager = manager
        self._nonce_source: NonceSource = nonce_source if nonce_source is not None else os.urandom
        # (key id, check value) → (AESGCM, envelope header). The check value tells keys with one id but other
        # material apart without keeping the material itself as a dictionary key.
        self._aeads: dict[tuple[str, bytes], tuple[AESGCM, bytes]] = {}
        self._lock = threading.Lock()

    @property
    def keyring_manager(self) -> KeyringManager:
        """The live keyring this protector seals and opens with."""
        return self._manager

    def _aead(self, key: ProtectionKey) -> tuple[AESGCM, bytes]:
        """The cipher of ``key`` and its envelope header, made once per key while it stays in the keyring."""
        slot = (key.id, key.check_value)
        cached = self._aeads.get(slot)
        if cached is not None:
            return cached
        with self._lock:
            cached = self._aeads.get(slot)
            if cached is None:
                cached = (AESGCM(derive_aead_key(key.material)), envelope_header(key.id))
                # Forget keys that left the keyring, so their derived keys do not outlive them here.
                present = {(each.id, each.check_value) for each in self._manager.current().keys}
                present.add(slot)
                self._aeads = {**{k: v for k, v in self._aeads.items() if k in present}, slot: cached}
        return cached

    def seal(self, plaintext: bytes, context: RequestStateProtectionContext | None = None) -> str:
        """Seal ``plaintext`` under the active key (held by a reservation while sealing)."""
        base = context if context is not None else RequestStateProtectionContext.framework()
        with self._manager.reserve_active_key() as key:
            nonce = self._nonce_source(NONCE_BYTES)
            if not isinstance(nonce, bytes) or len(nonce) != NONCE_BYTES:
                raise ProtectionUsageError(ProtectionUsageReason.INVALID_NONCE_SOURCE)
            aead, header = self._aead(key)
            # The associated data is what base.for_key(key.id) holds, from the header made once per key.
            sealed = aead.encrypt(nonce, plaintext, base.associated_data + header)
            self._manager.note_sealed(key.id)
        return encode_base64url(header + nonce + sealed)

    def open(self, token: str, context: RequestStateProtectionContext | None = None) -> bytes:
        """The plaintext of ``token``, or ``RequestStateProtectionException`` with the first failing check."""
        base = context if context is not None else RequestStateProtectionContext.framework()
        raw = _decode(token)
        key_id, body = _split_header(raw)
        key = self._manager.current().key(key_id)
        if key is None:
            raise RequestStateProtectionException(Reason.UNKNOWN_KEY)
        if len(raw) - body < NONCE_BYTES + TAG_BYTES:
            raise RequestStateProtectionException(Reason.AUTHENTICATION)
        nonce = raw[body : body + NONCE_BYTES]
        try:
            plaintext = self._aead(key)[0].decrypt(nonce, raw[body + NONCE_BYTES :], base.associated_data + raw[:body])
        except InvalidTag:
            raise RequestStateProtectionException(Reason.AUTHENTICATION) from None
        self._manager.note_opened(key_id)
        return plaintext

    def __repr__(self) -> str:
        return f"EnvelopeProtector(active={self._manager.current().active_key.id!r})"
