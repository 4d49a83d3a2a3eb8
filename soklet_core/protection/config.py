"""``ProtectionConfig``: which protector seals framework state, and the limits a sealed state must respect.

Exactly one provider: ``ProtectionConfig.with_keyring(keyring)`` (the built-in AES-256-GCM envelope over the
keyring) or ``ProtectionConfig.with_protector(protector)`` (a custom :class:`RequestStateProtector`). Then set
the limits and ``build()``:

>>> from datetime import timedelta
>>> from soklet_core.keys import ProtectionKey, ProtectionKeyring
>>> keyring = ProtectionKeyring.with_active_key(ProtectionKey.generate("2026-08")).build()
>>> config = (ProtectionConfig.with_keyring(keyring)
...           .maximum_request_state_lifetime(timedelta(minutes=15))
...           .maximum_request_state_rounds(10)
...           .build())
>>> config.maximum_encoded_bytes, config.maximum_decoded_bytes
(65536, 49152)

The config holds the keyring as given. Each server (each :class:`~soklet_core.protection.sealer.RequestStateSealer`
built from the config) copies it into a live :class:`~soklet_core.keys.KeyringManager` of its own, so rotating
one server's keys never changes another's. The builder checks that every limit is positive and that the decoded
limit does not exceed the encoded one; it cannot promise that every continuation fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

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
    "ProtectionConfigBuilder",
]

#: Longest token accepted or emitted, in bytes (characters: tokens are ASCII).
DEFAULT_MAXIMUM_ENCODED_BYTES: Final = 65_536
#: Largest plaintext (canonical framework metadata + application state) accepted or emitted, in bytes.
DEFAULT_MAXIMUM_DECODED_BYTES: Final = 49_152

_MILLISECOND: Final = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True, init=False)
class ProtectionConfig:
    """A validated protection configuration. Build it with :meth:`with_keyring` or :meth:`with_protector`;
    there is no public constructor.

    Exactly one of ``keyring`` and ``protector`` is set.
    """

    keyring: ProtectionKeyring | None
    protector: RequestStateProtector | None
    maximum_request_state_lifetime: timedelta
    maximum_request_state_rounds: int
    maximum_encoded_bytes: int
    maximum_decoded_bytes: int

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("use ProtectionConfig.with_keyring(keyring) or ProtectionConfig.with_protector(protector)")

    @staticmethod
    def with_keyring(keyring: ProtectionKeyring) -> ProtectionConfigBuilder:
        """Start a config whose state is sealed by the built-in AES-256-GCM envelope over ``keyring``."""
        if not isinstance(keyring, ProtectionKeyring):
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_PROVIDER)
        return ProtectionConfigBuilder._start(keyring, None)

    @staticmethod
    def with_protector(protector: RequestStateProtector) -> ProtectionConfigBuilder:
        """Start a config whose state is sealed by a custom ``protector``."""
        if isinstance(protector, ProtectionKeyring) or not isinstance(protector, RequestStateProtector):
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_PROVIDER)
        return ProtectionConfigBuilder._start(None, protector)

    @classmethod
    def _create(cls, **fields: object) -> ProtectionConfig:
        config = object.__new__(cls)
        for name, value in fields.items():
            object.__setattr__(config, name, value)
        return config

    @property
    def lifetime_ms(self) -> int:
        """The maximum lifetime in whole milliseconds (what expiry times are computed with)."""
        return self.maximum_request_state_lifetime // _MILLISECOND


class ProtectionConfigBuilder:
    """Sets the limits of a :class:`ProtectionConfig`; :meth:`build` validates them."""

    __slots__ = ("_decoded", "_encoded", "_keyring", "_lifetime", "_protector", "_rounds")

    _keyring: ProtectionKeyring | None
    _protector: RequestStateProtector | None
    _lifetime: timedelta
    _rounds: int
    _encoded: int
    _decoded: int

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("use ProtectionConfig.with_keyring(keyring) or ProtectionConfig.with_protector(protector)")

    @classmethod
    def _start(
        cls, keyring: ProtectionKeyring | None, protector: RequestStateProtector | None
    ) -> ProtectionConfigBuilder:
        builder = object.__new__(cls)
        builder._keyring = keyring
        builder._protector = protector
        builder._lifetime = DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME
        builder._rounds = DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS
        builder._encoded = DEFAULT_MAXIMUM_ENCODED_BYTES
        builder._decoded = DEFAULT_MAXIMUM_DECODED_BYTES
        return builder

    def maximum_request_state_lifetime(self, lifetime: timedelta) -> ProtectionConfigBuilder:
        """Longest life of a state from its first emission (default 15 minutes; at least 1 ms)."""
        if not isinstance(lifetime, timedelta) or lifetime < _MILLISECOND:
            raise ProtectionUsageError(ProtectionUsageReason.NON_POSITIVE_LIMIT)
        self._lifetime = lifetime
        return self

    def maximum_request_state_rounds(self, rounds: int) -> ProtectionConfigBuilder:
        """Most continuations one flow may emit (default 10)."""
        self._rounds = _positive(rounds)
        return self

    def maximum_encoded_bytes(self, limit: int) -> ProtectionConfigBuilder:
        """Longest token accepted or emitted (default 65,536)."""
        self._encoded = _positive(limit)
        return self

    def maximum_decoded_bytes(self, limit: int) -> ProtectionConfigBuilder:
        """Largest plaintext accepted or emitted (default 49,152); must not exceed the encoded limit."""
        self._decoded = _positive(limit)
        return self

    def build(self) -> ProtectionConfig:
        """The config; refuses a decoded limit above the encoded limit."""
        if self._decoded > self._encoded:
            raise ProtectionUsageError(ProtectionUsageReason.DECODED_OVER_ENCODED)
        return ProtectionConfig._create(
            keyring=self._keyring,
            protector=self._protector,
            maximum_request_state_lifetime=self._lifetime,
            maximum_request_state_rounds=self._rounds,
            maximum_encoded_bytes=self._encoded,
            maximum_decoded_bytes=self._decoded,
        )


def _positive(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ProtectionUsageError(ProtectionUsageReason.NON_POSITIVE_LIMIT)
    return value
