"""The protector protocol: what seals the framework's plaintext into a token and opens it again.

The framework (:mod:`.sealer`) owns everything about a sealed state except the cryptography: the plaintext
schema, the size limits, expiry, rounds, binding and the request id. A :class:`RequestStateProtector` turns
plaintext bytes into a URL-safe token and back, authenticating the exact associated data of the
:class:`RequestStateProtectionContext` it is handed. soklet's built-in protector is
:class:`~soklet_core.protection.envelope.EnvelopeProtector` (AES-256-GCM over a keyring manager).

The framework hands every protector :meth:`RequestStateProtectionContext.framework`: the profile and the
associated data ``b"soklet-mcp-protection-v1" ‖ 0x00``. A protector that writes a header of its own (the
built-in one writes ``0x01 ‖ len(kid) ‖ kid``) appends it with :meth:`RequestStateProtectionContext.for_key` and
authenticates the result, so the associated data always reads *profile ‖ 0x00 ‖ header*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from soklet_core.keys import PROTECTION_PROFILE, is_valid_key_id

from .errors import ProtectionUsageError, ProtectionUsageReason

__all__ = [
    "ASSOCIATED_DATA_PREFIX",
    "ENVELOPE_VERSION",
    "RequestStateProtectionContext",
    "RequestStateProtector",
    "envelope_header",
]

#: The envelope format version, the first byte of every built-in token (and of the header in the AD).
ENVELOPE_VERSION: Final = 1
#: What every associated data starts with: the profile name and one 0x00 byte.
ASSOCIATED_DATA_PREFIX: Final = PROTECTION_PROFILE.encode("ascii") + b"\x00"


def envelope_header(key_id: str) -> bytes:
    """The envelope v1 header for ``key_id``: ``0x01 ‖ len(kid) (1 byte) ‖ kid (ASCII)``."""
    if not is_valid_key_id(key_id):
        raise ProtectionUsageError(ProtectionUsageReason.INVALID_BINDING)
    kid = key_id.encode("ascii")
    return bytes((ENVELOPE_VERSION, len(kid))) + kid


@dataclass(frozen=True, slots=True)
class RequestStateProtectionContext:
    """What a protector must bind its token to.

    ``profile`` names the protection scheme (``soklet-mcp-protection-v1``); ``associated_data`` is the exact
    byte string the protector must authenticate; ``key_id`` is the key the token is sealed under, where a
    protector has one (the built-in protector fills it in with :meth:`for_key`).
    """

    profile: str
    associated_data: bytes
    key_id: str | None = None

    @classmethod
    def framework(cls) -> RequestStateProtectionContext:
        """The context the framework hands every protector: profile and ``profile ‖ 0x00``, no key id yet."""
        return _FRAMEWORK

    def for_key(self, key_id: str) -> RequestStateProtectionContext:
        """This context for a token sealed under ``key_id``: the envelope header is appended to the AD."""
        return RequestStateProtectionContext(self.profile, self.associated_data + envelope_header(key_id), key_id)


_FRAMEWORK: Final = RequestStateProtectionContext(PROTECTION_PROFILE, ASSOCIATED_DATA_PREFIX, None)


@runtime_checkable
class RequestStateProtector(Protocol):
    """Seals plaintext into a token and opens it, authenticating ``context.associated_data`` exactly.

    Contract:

    * ``open(seal(p, c), c) == p``; ``open`` must refuse any token it did not produce unmodified.
    * Tokens are URL-safe text. The framework checks their length against the encoded limit before ``open``
      and the plaintext length against the decoded limit after it.
    * Failures raise :class:`~soklet_core.protection.errors.RequestStateProtectionException` with one of the
      reasons ``BASE64URL``, ``VERSION``, ``UNKNOWN_KEY`` or ``AUTHENTICATION`` (open) and never carry key
      material, plaintext or the token in their text. Anything else a protector raises fails closed: as
      ``AUTHENTICATION`` while opening, ``PROTECTOR_FAILED`` while sealing.
    * Both methods are synchronous and may run on many threads at once.
    """

    def seal(self, plaintext: bytes, context: RequestStateProtectionContext) -> str:
        """A token that protects ``plaintext`` and authenticates ``context.associated_data``."""
        ...

    def open(self, token: str, context: RequestStateProtectionContext) -> bytes:
        """The plaintext of ``token``; raises ``RequestStateProtectionException`` when it does not open."""
        ...
