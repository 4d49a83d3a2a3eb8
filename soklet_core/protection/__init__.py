"""Framework-protected MCP request state: configuration, envelope v1, binding, sealing and opening.

>>> from soklet_core.json import JsonValue
>>> from soklet_core.keys import ProtectionKey, ProtectionKeyring
>>> from soklet_core.protection import ANONYMOUS_PARTITION, ProtectionConfig, RequestStateSealer, bind_request
>>> keyring = ProtectionKeyring(ProtectionKey.generate("2026-08"))
>>> sealer = RequestStateSealer(ProtectionConfig(keyring=keyring))
>>> first = bind_request(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}',
...                      path="/mcp", partition=ANONYMOUS_PARTITION)
>>> token = sealer.seal(JsonValue.from_python({"step": 100}), first)
>>> retry = bind_request(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t"}}',
...                      path="/mcp/", partition=ANONYMOUS_PARTITION)
>>> sealer.open(token, retry).state.to_python()
{'step': Decimal('1E+2')}

The format is specified byte by byte, with test vectors, in ``docs/protection-format.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soklet_core.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .binding import (
        ANONYMOUS_PARTITION,
        DEFAULT_PROTOCOL_VERSION,
        PARTITION_DIGEST_LABEL,
        BoundRequest,
        RequestId,
        RequestStateBinding,
        bind_request,
        partition_digest,
    )
    from .config import (
        DEFAULT_MAXIMUM_DECODED_BYTES,
        DEFAULT_MAXIMUM_ENCODED_BYTES,
        DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME,
        DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS,
        ProtectionConfig,
    )
    from .envelope import (
        AEAD_KEY_BYTES,
        HKDF_INFO,
        NONCE_BYTES,
        TAG_BYTES,
        EnvelopeHeader,
        EnvelopeProtector,
        NonceSource,
        derive_aead_key,
    )
    from .errors import (
        BindingField,
        ProtectionError,
        ProtectionUsageError,
        ProtectionUsageReason,
        Reason,
        RequestStateProtectionException,
        RequestStateProtectionReason,
    )
    from .paths import MAX_ENDPOINT_PATH_CHARS, normalize_endpoint_path
    from .protector import (
        ASSOCIATED_DATA_PREFIX,
        ENVELOPE_VERSION,
        RequestStateProtectionContext,
        RequestStateProtector,
        envelope_header,
    )
    from .sealer import (
        MAX_ISSUED_AT_SKEW,
        CheckResult,
        CheckStatus,
        Clock,
        OpenedRequestState,
        OpeningDiagnosis,
        OpeningStep,
        RequestStateSealer,
        SealedStateContents,
        system_clock_ms,
    )

__all__ = [
    "AEAD_KEY_BYTES",
    "ANONYMOUS_PARTITION",
    "ASSOCIATED_DATA_PREFIX",
    "DEFAULT_MAXIMUM_DECODED_BYTES",
    "DEFAULT_MAXIMUM_ENCODED_BYTES",
    "DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME",
    "DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS",
    "DEFAULT_PROTOCOL_VERSION",
    "ENVELOPE_VERSION",
    "HKDF_INFO",
    "MAX_ENDPOINT_PATH_CHARS",
    "MAX_ISSUED_AT_SKEW",
    "NONCE_BYTES",
    "PARTITION_DIGEST_LABEL",
    "TAG_BYTES",
    "BindingField",
    "BoundRequest",
    "CheckResult",
    "CheckStatus",
    "Clock",
    "EnvelopeHeader",
    "EnvelopeProtector",
    "NonceSource",
    "OpenedRequestState",
    "OpeningDiagnosis",
    "OpeningStep",
    "ProtectionConfig",
    "ProtectionError",
    "ProtectionUsageError",
    "ProtectionUsageReason",
    "Reason",
    "RequestId",
    "RequestStateBinding",
    "RequestStateProtectionContext",
    "RequestStateProtectionException",
    "RequestStateProtectionReason",
    "RequestStateProtector",
    "RequestStateSealer",
    "SealedStateContents",
    "bind_request",
    "derive_aead_key",
    "envelope_header",
    "normalize_endpoint_path",
    "partition_digest",
    "system_clock_ms",
]


# Each name is imported from its module on first use (PEP 562): the sealer and the envelope bring cryptography and
# the JSON codec, so a caller that needs only the endpoint-path rule or a usage error (a command's option parser)
# does not pay for sealing.
_EXPORTS: dict[str, str] = {
    "ANONYMOUS_PARTITION": ".binding",
    "DEFAULT_PROTOCOL_VERSION": ".binding",
    "PARTITION_DIGEST_LABEL": ".binding",
    "BoundRequest": ".binding",
    "RequestId": ".binding",
    "RequestStateBinding": ".binding",
    "bind_request": ".binding",
    "partition_digest": ".binding",
    "DEFAULT_MAXIMUM_DECODED_BYTES": ".config",
    "DEFAULT_MAXIMUM_ENCODED_BYTES": ".config",
    "DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME": ".config",
    "DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS": ".config",
    "ProtectionConfig": ".config",
    "AEAD_KEY_BYTES": ".envelope",
    "HKDF_INFO": ".envelope",
    "NONCE_BYTES": ".envelope",
    "TAG_BYTES": ".envelope",
    "EnvelopeHeader": ".envelope",
    "EnvelopeProtector": ".envelope",
    "NonceSource": ".envelope",
    "derive_aead_key": ".envelope",
    "BindingField": ".errors",
    "ProtectionError": ".errors",
    "ProtectionUsageError": ".errors",
    "ProtectionUsageReason": ".errors",
    "Reason": ".errors",
    "RequestStateProtectionException": ".errors",
    "RequestStateProtectionReason": ".errors",
    "MAX_ENDPOINT_PATH_CHARS": ".paths",
    "normalize_endpoint_path": ".paths",
    "ASSOCIATED_DATA_PREFIX": ".protector",
    "ENVELOPE_VERSION": ".protector",
    "RequestStateProtectionContext": ".protector",
    "RequestStateProtector": ".protector",
    "envelope_header": ".protector",
    "MAX_ISSUED_AT_SKEW": ".sealer",
    "CheckResult": ".sealer",
    "CheckStatus": ".sealer",
    "Clock": ".sealer",
    "OpenedRequestState": ".sealer",
    "OpeningDiagnosis": ".sealer",
    "OpeningStep": ".sealer",
    "RequestStateSealer": ".sealer",
    "SealedStateContents": ".sealer",
    "system_clock_ms": ".sealer",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
