"""``ProtectionConfig``: which protector seals framework state, and the limits a sealed state must respect.

Exactly one provider: ``keyring=`` (the built-in AES-256-GCM envelope over the keyring) or ``protector=`` (a
custom :class:`RequestStateProtector`), and any limit left at its default:

>>> from datetime import timedelta
>>> from soklet_core.keys import ProtectionKey, ProtectionKeyring
>>> keyring = ProtectionKeyring(ProtectionKey.generate("2026-08"))
>>> config = ProtectionConfig(
...     keyring=keyring,
...     maximum_request_state_lifetime=timedelta(minutes=15),
...     maximum_request_state_rounds=10,
... )
>>> config.maximum_encoded_bytes, config.maximum_decoded_bytes
(65536, 49152)

``ProtectionConfig.with_keyring(keyring, ...)`` is the spec's name for the keyring form.

The config holds the keyring as given. Each server (each :class:`~soklet_core.protection.sealer.RequestStateSealer`
built from the config) copies it into a live :class:`~soklet_core.keys.KeyringManager` of its own, so rotating
one server's keys never changes another's. The constructor checks that every limit is positive and that the decoded
limit does not exceed the encoded one; it cannot promise that every continuation fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from soklet_core.keys import ProtectionKeyring
from soklet_core.protocol import DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME, DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS

from .errors import ProtectionUsageError, ProtectionUsageReason
from .protector import RequestStateProtector

__all__ = [
    "DEFAULT_MAXIMUM_DECODED_BYTES",
    "DEFAULT_MAXIMUM_ENCODED_BYTES",
    "DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME",
    "DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS",
    "ProtectionConfig",
]

#: Longest token accepted or emitted, in bytes (characters: tokens are ASCII).
DEFAULT_MAXIMUM_ENCODED_BYTES: Final = 65_536
#: Largest plaintext (canonical framework metadata + application state) accepted or emitted, in bytes.
DEFAULT_MAXIMUM_DECODED_BYTES: Final = 49_152

_MILLISECOND: Final = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtectionConfig:
    """A validated protection configuration: exactly one of ``keyring`` and ``protector``, and the limits.

    Refuses (``ProtectionUsageError``) no provider or two (``invalid-provider``), a limit that is not positive
    (``non-positive-limit``; the lifetime is at least 1 ms) and a decoded limit above the encoded one
    (``decoded-over-encoded``).
    """

    #: The keyring of the built-in AES-256-GCM envelope.
    keyring: ProtectionKeyring | None = None
    #: A custom protector, instead of the keyring.
    protector: RequestStateProtector | None = None
    #: Longest life of a state from its first emission (default 15 minutes; at least 1 ms).
    maximum_request_state_lifetime: timedelta = DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME
    #: Most continuations one flow may emit (default 10).
    maximum_request_state_rounds: int = DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS
    #: Longest token accepted or emitted (default 65,536).
    maximum_encoded_bytes: int = DEFAULT_MAXIMUM_ENCODED_BYTES
    #: Largest plaintext accepted or emitted (default 49,152); must not exceed the encoded limit.
    maximum_decoded_bytes: int = DEFAULT_MAXIMUM_DECODED_BYTES

    def __post_init__(self) -> None:
        if self.keyring is not None:
            if self.protector is not None or not isinstance(self.keyring, ProtectionKeyring):
                raise ProtectionUsageError(ProtectionUsageReason.INVALID_PROVIDER)
        elif isinstance(self.protector, ProtectionKeyring) or not isinstance(self.protector, RequestStateProtector):
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_PROVIDER)
        lifetime = self.maximum_request_state_lifetime
        if not isinstance(lifetime, timedelta) or lifetime < _MILLISECOND:
            raise ProtectionUsageError(ProtectionUsageReason.NON_POSITIVE_LIMIT)
        _check_positive(self.maximum_request_state_rounds)
        _check_positive(self.maximum_encoded_bytes)
        _check_positive(self.maximum_decoded_bytes)
        if self.maximum_decoded_bytes > self.maximum_encoded_bytes:
            raise ProtectionUsageError(ProtectionUsageReason.DECODED_OVER_ENCODED)

    @classmethod
    def with_keyring(cls, keyring: ProtectionKeyring, **limits: Any) -> ProtectionConfig:
        """The spec's name (``McpProtectionConfig.withKeyring``) for ``ProtectionConfig(keyring=keyring, **limits)``."""
        return cls(keyring=keyring, **limits)

    @property
    def lifetime_ms(self) -> int:
        """The maximum lifetime in whole milliseconds (what expiry times are computed with)."""
        return self.maximum_request_state_lifetime // _MILLISECOND


def _check_positive(value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ProtectionUsageError(ProtectionUsageReason.NON_POSITIVE_LIMIT)
