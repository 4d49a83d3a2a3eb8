"""The refusal types of the protection layer and their bounded reasons.

Two kinds of failure, one hierarchy (:class:`ProtectionError`):

* :class:`RequestStateProtectionException` — a sealed state that will not open, or a state that cannot be
  sealed. Its :class:`Reason` is a closed enum; the reason goes to the operator log and to ``soklet
  inspect-state``. What a client is told is the MCP layer's business (``soklet_core.mcp.server.jsonrpc``): it depends
  only on the direction (:attr:`Reason.is_sealing`), so clients cannot tell reasons apart.
* :class:`ProtectionUsageError` — a configuration or an argument the caller got wrong (a non-positive limit, an
  endpoint path that is not a path, a request id that is neither string nor number).

Messages are built only from the reason (and, for bindings, the field name), never from the token, the
plaintext, the key material or anything else an attacker or a secret store supplied.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar, Final

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


class RequestStateProtectionReason(enum.Enum):
    """Why a state did not open or could not be sealed. Closed: callers may switch on it.

    Opening reasons are listed in the order the opener checks them; the first that applies is reported.
    """

    # Opening, in order.
    ENCODED_TOO_LARGE = "encoded-too-large"
    BASE64URL = "base64url"
    VERSION = "version"
    UNKNOWN_KEY = "unknown-key"
    AUTHENTICATION = "authentication"
    DECODED_TOO_LARGE = "decoded-too-large"
    JSON = "json"
    EXPIRED = "expired"
    ROUND = "round"
    BINDING_METHOD = "binding-method"
    BINDING_PATH = "binding-path"
    BINDING_PROTOCOL_VERSION = "binding-protocol-version"
    BINDING_PARTITION = "binding-partition"
    BINDING_PARAMS = "binding-params"
    REQUEST_ID_REUSED = "request-id-reused"
    # Sealing.
    TOO_LARGE = "too-large"
    LAST_ROUND = "last-round"
    EXPIRED_DURING_HANDLER = "expired-during-handler"
    #: A custom protector raised something other than this exception while sealing. (While opening, such a
    #: failure fails closed as ``AUTHENTICATION``: the token could not be authenticated.)
    PROTECTOR_FAILED = "protector-failed"

    @property
    def description(self) -> str:
        """A fixed, human sentence for the reason; never contains input or secrets."""
        return _DESCRIPTIONS[self]

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

_DESCRIPTIONS: dict[RequestStateProtectionReason, str] = {
    _R.ENCODED_TOO_LARGE: "the token is longer than the encoded limit",
    _R.BASE64URL: "the token is not canonical unpadded base64url",
    _R.VERSION: "the envelope format version is not supported",
    _R.UNKNOWN_KEY: "no key in the keyring has the envelope's key id",
    _R.AUTHENTICATION: "the envelope did not authenticate under the key with its id",
    _R.DECODED_TOO_LARGE: "the decrypted state is larger than the decoded limit",
    _R.JSON: "the decrypted state is not the sealed-state JSON schema",
    _R.EXPIRED: "the state has expired",
    _R.ROUND: "the state's round is outside the allowed rounds",
    _R.BINDING_METHOD: "the state was sealed for another JSON-RPC method",
    _R.BINDING_PATH: "the state was sealed for another endpoint path",
    _R.BINDING_PROTOCOL_VERSION: "the state was sealed for another protocol version",
    _R.BINDING_PARTITION: "the state was sealed for another authorization partition",
    _R.BINDING_PARAMS: "the state was sealed for other stable request params",
    _R.REQUEST_ID_REUSED: "the retry reuses the request id that emitted the state",
    _R.TOO_LARGE: "the sealed state would exceed a size limit",
    _R.LAST_ROUND: "the retry carried the last allowed round; no further state may be emitted",
    _R.EXPIRED_DURING_HANDLER: "the state expired while the handler ran",
    _R.PROTECTOR_FAILED: "the request-state protector failed",
}


class ProtectionError(Exception):
    """Base of every refusal the protection layer raises."""

    __slots__ = ()


class RequestStateProtectionException(ProtectionError):
    """A state that did not open or could not be sealed, with a bounded :class:`Reason`.

    ``str()`` is ``"<reason>: <description>"`` and nothing else. It carries no wire code or client message: the
    MCP layer maps it to one.
    """

    __slots__ = ("reason",)

    #: The reason enum, reachable from the exception as the spec names it.
    Reason: ClassVar[type[RequestStateProtectionReason]] = RequestStateProtectionReason

    def __init__(self, reason: RequestStateProtectionReason) -> None:
        if not isinstance(reason, RequestStateProtectionReason):
            raise TypeError("reason must be a RequestStateProtectionException.Reason")
        self.reason = reason
        super().__init__(f"{reason.value}: {reason.description}")

    @property
    def binding_field(self) -> BindingField | None:
        """The binding field that differed, for ``BINDING_*`` reasons."""
        return self.reason.binding_field

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), (self.reason,))


class ProtectionUsageReason(enum.Enum):
    """Why a configuration or an argument of the protection layer was refused. Closed."""

    NON_POSITIVE_LIMIT = "non-positive-limit"
    DECODED_OVER_ENCODED = "decoded-over-encoded"
    INVALID_PROVIDER = "invalid-provider"
    INVALID_ENDPOINT_PATH = "invalid-endpoint-path"
    INVALID_REQUEST = "invalid-request"
    INVALID_REQUEST_ID = "invalid-request-id"
    INVALID_BINDING = "invalid-binding"
    INVALID_NONCE_SOURCE = "invalid-nonce-source"
    INVALID_CLOCK = "invalid-clock"

    @property
    def description(self) -> str:
        """A fixed, human sentence for the reason."""
        return _USAGE_DESCRIPTIONS[self]


_U = ProtectionUsageReason
_USAGE_DESCRIPTIONS: dict[ProtectionUsageReason, str] = {
    _U.NON_POSITIVE_LIMIT: "limits, lifetime and rounds must be positive",
    _U.DECODED_OVER_ENCODED: "the decoded limit must not exceed the encoded limit",
    _U.INVALID_PROVIDER: "the provider must be a ProtectionKeyring or a RequestStateProtector",
    _U.INVALID_ENDPOINT_PATH: (
        "an endpoint path must be a str starting with '/' without query or fragment, "
        "at most MAX_ENDPOINT_PATH_CHARS characters (raw and normalized)"
    ),
    _U.INVALID_REQUEST: "not a JSON-RPC request object with a string method",
    _U.INVALID_REQUEST_ID: "a JSON-RPC request id must be a JSON string or number",
    _U.INVALID_BINDING: "binding fields must be strings; digests must be 43-character base64url",
    _U.INVALID_NONCE_SOURCE: "the nonce source must return exactly 12 bytes",
    _U.INVALID_CLOCK: "the clock must return integer epoch milliseconds",
}


class ProtectionUsageError(ProtectionError, ValueError):
    """A configuration or argument refused by the protection layer; ``reason`` is a closed enum."""

    __slots__ = ("reason",)

    def __init__(self, reason: ProtectionUsageReason) -> None:
        self.reason = reason
        super().__init__(f"{reason.value}: {reason.description}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), (self.reason,))
