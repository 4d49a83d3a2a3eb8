"""Framework-protected MCP request state: configuration, envelope v1, binding, sealing and opening.

>>> from soklet_core.json import JsonValue
>>> from soklet_core.keys import ProtectionKey, ProtectionKeyring
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
