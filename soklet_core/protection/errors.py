"""The refusal types of the protection layer and their bounded reasons.

Two kinds of failure, one hierarchy (:class:`ProtectionError`):

* :class:`RequestStateProtectionException` — a sealed state that will not open, or a state that cannot be
  sealed. Its :class:`Reason` is a closed enum; the reason goes to the operator log and to ``soklet
  inspect-state``. What a client is told is the MCP layer's business (``soklet_core.mcp.server._jsonrpc``): it depends
  only on the direction (:attr:`Reason.is_sealing`), so clients cannot tell reasons apart.
* :class:`ProtectionUsageError` — a configuration or an argument the caller got wrong (a non-positive limit, an
  endpoint path that is not a path, a request id that is neither string nor number).

Messages are built only from the reason (and, for bindings, the field name), never from the token, the
plaintext, the key material or anything else an attacker or a secret store supplied.
"""

from __future__ import annotations

import enum
from typing import ClassVar, Final

from soklet_core.errors import ErrorReason, SokletError

__all__ = [
    "BindingField",
    "ProtectionError",
    "ProtectionUsageError",
    "ProtectionUsageReason",
    "Reason",
    "RequestStateProtectionException",
    "RequestStateProtectionReason",
]


class BindingField(enum.Enum):
    """One field of a :class:`~soklet_core.protection.binding.RequestStateBinding`, valued by its plaintext name.

    Members are declared in the order the opener compares them: method, path, protocol version, partition,
    params.
    """

    METHOD = "m"
    PATH = "p"
    PROTOCOL_VERSION = "v"
    PARTITION = "a"
    PARAMS = "d"

    @property
    def label(self) -> str:
        """A human name: ``method``, ``path``, ``protocol version``, ``partition`` or ``params``."""
        return _FIELD_LABELS[self]


_FIELD_LABELS: dict[BindingField, str] = {
    BindingField.METHOD: "method",
    BindingField.PATH: "path",
    BindingField.PROTOCOL_VERSION: "protocol version",
    BindingField.PARTITION: "partition",
    BindingField.PARAMS: "params",
}


class RequestStateProtectionReason(ErrorReason):
    """Why a state did not open or could not be sealed. Closed: callers may switch on it.

    Opening reasons are listed in the order the opener checks them; the first that applies is reported.
    """

    # Opening, in order.
    ENCODED_TOO_LARGE = "encoded-too-large", "the token is longer than the encoded limit"
    BASE64URL = "base64url", "the token is not canonical unpadded base64url"
    VERSION = "version", "the envelope format version is not supported"
    UNKNOWN_KEY = "unknown-key", "no key in the keyring has the envelope's key id"
    AUTHENTICATION = "authentication", "the envelope did not authenticate under the key with its id"
    DECODED_TOO_LARGE = "decoded-too-large", "the decrypted state is larger than the decoded limit"
    JSON = "json", "the decrypted state is not the sealed-state JSON schema"
    EXPIRED = "expired", "the state has expired"
    ISSUED_IN_FUTURE = "issued-in-future", "the state's issue time is further ahead of this clock than the skew bound"
    LIFETIME_EXCEEDED = "lifetime-exceeded", "the state's lifetime is longer than the configured maximum"
    ROUND = "round", "the state's round is outside the allowed rounds"
    BINDING_METHOD = "binding-method", "the state was sealed for another JSON-RPC method"
    BINDING_PATH = "binding-path", "the state was sealed for another endpoint path"
    BINDING_PROTOCOL_VERSION = "binding-protocol-version", "the state was sealed for another protocol version"
    BINDING_PARTITION = "binding-partition", "the state was sealed for another authorization partition"
    BINDING_PARAMS = "binding-params", "the state was sealed for other stable request params"
    REQUEST_ID_REUSED = "request-id-reused", "the retry reuses the request id that emitted the state"
    # Sealing.
    TOO_LARGE = "too-large", "the sealed state would exceed a size limit"
    LAST_ROUND = "last-round", "the retry carried the last allowed round; no further state may be emitted"
    EXPIRED_DURING_HANDLER = "expired-during-handler", "the state expired while the handler ran"
    #: A custom protector raised something other than this exception while sealing. (While opening, such a
    #: failure fails closed as ``AUTHENTICATION``: the token could not be authenticated.)
    PROTECTOR_FAILED = "protector-failed", "the request-state protector failed"

    @property
    def is_sealing(self) -> bool:
        """True for the reasons a seal fails with (after the handler ran), False for opening reasons (before)."""
        return self in _SEALING

    @property
    def binding_field(self) -> BindingField | None:
        """The binding field a ``BINDING_*`` reason is about, else ``None``."""
        return _BINDING_FIELD_OF.get(self)

    @staticmethod
    def for_binding(field: BindingField) -> RequestStateProtectionReason:
        """The ``BINDING_*`` reason for ``field``."""
        return _BINDING_REASON_OF[field]


#: The short name used throughout soklet (also ``RequestStateProtectionException.Reason``).
Reason = RequestStateProtectionReason
_R = RequestStateProtectionReason

_SEALING: Final = frozenset({_R.TOO_LARGE, _R.LAST_ROUND, _R.EXPIRED_DURING_HANDLER, _R.PROTECTOR_FAILED})

_BINDING_REASON_OF: dict[BindingField, RequestStateProtectionReason] = {
    BindingField.METHOD: _R.BINDING_METHOD,
    BindingField.PATH: _R.BINDING_PATH,
    BindingField.PROTOCOL_VERSION: _R.BINDING_PROTOCOL_VERSION,
    BindingField.PARTITION: _R.BINDING_PARTITION,
    BindingField.PARAMS: _R.BINDING_PARAMS,
}
_BINDING_FIELD_OF: dict[RequestStateProtectionReason, BindingField] = {
    reason: field for field, reason in _BINDING_REASON_OF.items()
}


class ProtectionError(SokletError):
    """Base of every refusal the protection layer raises."""

    __slots__ = ()


class RequestStateProtectionException(ProtectionError):
    """A state that did not open or could not be sealed, with a bounded :class:`Reason`.

    ``str()`` is ``"<reason>: <description>"`` and nothing else. It carries no wire code or client message: the
    MCP layer maps it to one.
    """

    __slots__ = ()

    #: The reason enum, reachable from the exception as the spec names it.
    Reason: ClassVar[type[RequestStateProtectionReason]] = RequestStateProtectionReason

    reason: RequestStateProtectionReason

    def __init__(self, reason: RequestStateProtectionReason) -> None:
        if not isinstance(reason, RequestStateProtectionReason):
            raise TypeError("reason must be a RequestStateProtectionException.Reason")
        super().__init__(reason)

    @property
    def binding_field(self) -> BindingField | None:
        """The binding field that differed, for ``BINDING_*`` reasons."""
        return self.reason.binding_field


class ProtectionUsageReason(ErrorReason):
    """Why a configuration or an argument of the protection layer was refused. Closed."""

    NON_POSITIVE_LIMIT = "non-positive-limit", "limits, lifetime and rounds must be positive"
    DECODED_OVER_ENCODED = "decoded-over-encoded", "the decoded limit must not exceed the encoded limit"
    INVALID_PROVIDER = "invalid-provider", "the provider must be a ProtectionKeyring or a RequestStateProtector"
    INVALID_ENDPOINT_PATH = (
        "invalid-endpoint-path",
        "an endpoint path must be a str starting with '/' without query or fragment, "
        "at most MAX_ENDPOINT_PATH_CHARS characters (raw and normalized)",
    )
    INVALID_REQUEST = "invalid-request", "not a JSON-RPC request object with a string method"
    INVALID_REQUEST_ID = "invalid-request-id", "a JSON-RPC request id must be a JSON string or number"
    INVALID_BINDING = "invalid-binding", "binding fields must be strings; digests must be 43-character base64url"
    INVALID_NONCE_SOURCE = "invalid-nonce-source", "the nonce source must return exactly 12 bytes"
    INVALID_CLOCK = "invalid-clock", "the clock must return integer epoch milliseconds"


class ProtectionUsageError(ProtectionError, ValueError):
    """A configuration or argument refused by the protection layer; ``reason`` is a closed enum."""

    __slots__ = ()

    reason: ProtectionUsageReason

    def __init__(self, reason: ProtectionUsageReason) -> None:
        super().__init__(reason)
