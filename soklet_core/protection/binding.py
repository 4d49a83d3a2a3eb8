"""What a sealed state is bound to: :class:`RequestStateBinding`, and :class:`BoundRequest` (binding + request id).

The binding holds five strings, compared in this order when a state is opened (each mismatch has its own
reason): the JSON-RPC **method**, the normalized endpoint **path** (:mod:`.paths`), the MCP **protocol
version**, the **partition digest** of the admitted authorization partition, and the stable **params digest**
(:func:`soklet_core.json.params_digest`: it ignores ``inputResponses``, ``requestState`` and the transient
``_meta`` members, so a retry that adds responses still matches).

:func:`bind_request` is the one place a request becomes a :class:`BoundRequest`: the server calls it with the
protocol version it validated and the digest it took, ``soklet inspect-state --request`` and ``seal-state`` call
it with the request alone, and both get the same binding for the same request.

The partition itself is not sealed, only its digest: base64url (no padding) of SHA-256 over
``b"soklet partition" ‖ 0x00 ‖ partition (UTF-8)``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from soklet_core.json import JsonError, JsonNumber, JsonObject, JsonString, JsonValue, ParamsDigest, parse
from soklet_core.json import params_digest as compute_params_digest
from soklet_core.protocol import PROTOCOL_VERSION, PROTOCOL_VERSION_META_KEY

from .errors import BindingField, ProtectionUsageError, ProtectionUsageReason
from .paths import normalize_endpoint_path

__all__ = [
    "ANONYMOUS_PARTITION",
    "DEFAULT_PROTOCOL_VERSION",
    "PARTITION_DIGEST_LABEL",
    "BoundRequest",
    "RequestId",
    "RequestStateBinding",
    "bind_request",
    "partition_digest",
]

#: The protocol version a request is taken to speak when its ``params._meta`` does not say.
DEFAULT_PROTOCOL_VERSION: Final = PROTOCOL_VERSION
#: The partition an unauthenticated caller is admitted to.
ANONYMOUS_PARTITION: Final = "anonymous"
#: The domain-separation label of the partition digest (followed by one 0x00 byte, then the partition).
PARTITION_DIGEST_LABEL: Final = b"soklet partition"

#: A JSON-RPC request id: a JSON string or a JSON number. Compared as JSON values (``1`` equals ``1.0``).
RequestId = JsonString | JsonNumber

_DIGEST_TEXT: Final = re.compile(r"[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]")


def partition_digest(partition: str) -> str:
    """base64url (no padding) SHA-256 of ``b"soklet partition" ‖ 0x00 ‖ partition``; 43 characters."""
    if not isinstance(partition, str):
        raise ProtectionUsageError(ProtectionUsageReason.INVALID_BINDING)
    return _partition_digest(partition)


# Partitions come from admission (a configured map, or the one anonymous partition), so they are few: every
# request of a partition would otherwise hash the same bytes again.
@functools.lru_cache(maxsize=1024)
def _partition_digest(partition: str) -> str:
    try:
        data = partition.encode("utf-8")
    except UnicodeEncodeError:
        raise ProtectionUsageError(ProtectionUsageReason.INVALID_BINDING) from None
    digest = hashlib.sha256(PARTITION_DIGEST_LABEL + b"\x00" + data).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class RequestStateBinding:
    """The request a state is bound to, as sealed: every field a plain string.

    Build it with :meth:`of` (which normalizes the path and digests the partition), or bind a whole request with
    :func:`bind_request`; the constructor takes the fields exactly as they appear in the plaintext and only checks
    their types.
    """

    method: str
    path: str
    protocol_version: str
    partition_digest: str
    params_digest: str

    def __post_init__(self) -> None:
        # Once per request: a plain chain, no generator frame.
        if not (
            isinstance(self.method, str)
            and isinstance(self.path, str)
            and isinstance(self.protocol_version, str)
            and isinstance(self.partition_digest, str)
            and isinstance(self.params_digest, str)
        ):
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_BINDING)

    @classmethod
    def of(
        cls,
        *,
        method: str,
        path: str,
        protocol_version: str,
        partition: str,
        params_digest: ParamsDigest | str,
    ) -> RequestStateBinding:
        """The binding of one request: ``path`` is normalized, ``partition`` digested.

        ``params_digest`` is a :class:`~soklet_core.json.ParamsDigest` or its 43-character text.
        """
        digest = params_digest.text if isinstance(params_digest, ParamsDigest) else params_digest
        if not isinstance(digest, str) or not _DIGEST_TEXT.fullmatch(digest):
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_BINDING)
        if not isinstance(method, str) or not isinstance(protocol_version, str):
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_BINDING)
        return cls(method, normalize_endpoint_path(path), protocol_version, partition_digest(partition), digest)

    def mismatches(self, other: RequestStateBinding) -> tuple[BindingField, ...]:
        """The fields in which ``other`` differs, in comparison order (method, path, version, partition, params)."""
        return tuple(field for field in _FIELDS if _READERS[field](self) != _READERS[field](other))

    def first_mismatch(self, other: RequestStateBinding) -> BindingField | None:
        """The first field (in comparison order) in which ``other`` differs, or ``None`` when they agree."""
        for field in _FIELDS:
            read = _READERS[field]
            if read(self) != read(other):
                return field
        return None

    def field(self, field: BindingField) -> str:
        """The value of one binding field."""
        return _READERS[field](self)

    @staticmethod
    def reader(field: BindingField) -> Callable[[RequestStateBinding], str]:
        """A C-level reader of one field: what comparing many bindings field by field calls."""
        return _READERS[field]


#: The fields in comparison order (iterating the enum itself costs a generator per comparison).
_FIELDS: Final = tuple(BindingField)
#: The attribute that holds each field (BindingField values are the plaintext names, not these).
_READERS: Final[dict[BindingField, Callable[[RequestStateBinding], str]]] = {
    BindingField.METHOD: operator.attrgetter("method"),
    BindingField.PATH: operator.attrgetter("path"),
    BindingField.PROTOCOL_VERSION: operator.attrgetter("protocol_version"),
    BindingField.PARTITION: operator.attrgetter("partition_digest"),
    BindingField.PARAMS: operator.attrgetter("params_digest"),
}


def _check_request_id(request_id: object) -> RequestId:
    if isinstance(request_id, JsonString | JsonNumber):
        return request_id
    if isinstance(request_id, str):
        return JsonString.from_value(request_id)
    if isinstance(request_id, int) and not isinstance(request_id, bool):
        return JsonNumber.from_value(request_id)
    raise ProtectionUsageError(ProtectionUsageReason.INVALID_REQUEST_ID)


@dataclass(frozen=True, slots=True)
class BoundRequest:
    """One request as the sealer and opener see it: its binding and its JSON-RPC id.

    A server computes it once per request and uses it to open the state the request carries and to seal the
    state its handler emits.
    """

    binding: RequestStateBinding
    request_id: RequestId

    def __post_init__(self) -> None:
        if not isinstance(self.binding, RequestStateBinding):
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_BINDING)
        object.__setattr__(self, "request_id", _check_request_id(self.request_id))


def bind_request(
    request: JsonValue | bytes,
    *,
    path: str,
    partition: str,
    protocol_version: str | None = None,
    params_digest: ParamsDigest | None = None,
) -> BoundRequest:
    """The binding and id of one JSON-RPC request: what a state it emits is sealed to, and what a state it
    carries must match.

    ``request`` is the parsed request object or its JSON bytes (parsed strictly). ``protocol_version`` is the
    version the server validated; without it, the request's ``params._meta`` member
    ``io.modelcontextprotocol/protocolVersion`` (:data:`~soklet_core.protocol.PROTOCOL_VERSION_META_KEY`) when
    it is a string, else :data:`~soklet_core.protocol.PROTOCOL_VERSION`. ``params_digest`` is the request's
    digest when the caller already took it (the server takes it once per request, from the body bytes);
    without it the digest is taken here, from the bytes when given bytes.

    Raises ``ProtectionUsageError`` with ``INVALID_REQUEST`` (not a request object with a string method and
    structured params), ``INVALID_REQUEST_ID`` or ``INVALID_BINDING``; ``JsonError`` reasons are not repeated:
    they would only describe attacker input.
    """
    source: JsonValue | bytes = request
    if isinstance(request, bytes | bytearray | memoryview):
        # Parsed once for method and id; the digest reads the bytes again, which is cheaper than the model.
        source = bytes(request)
        try:
            request = parse(source)
        except JsonError:
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_REQUEST) from None
    if not isinstance(request, JsonObject):
        raise ProtectionUsageError(ProtectionUsageReason.INVALID_REQUEST)
    method = request.get("method")
    if not isinstance(method, JsonString):
        raise ProtectionUsageError(ProtectionUsageReason.INVALID_REQUEST)
    request_id = request.get("id")
    if not isinstance(request_id, JsonString | JsonNumber):
        raise ProtectionUsageError(ProtectionUsageReason.INVALID_REQUEST_ID)
    if protocol_version is None:
        protocol_version = _declared_protocol_version(request) or PROTOCOL_VERSION
    if params_digest is None:
        try:
            params_digest = compute_params_digest(source, whole_request=True)
        except JsonError:
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_REQUEST) from None
    binding = RequestStateBinding.of(
        method=method.value,
        path=path,
        protocol_version=protocol_version,
        partition=partition,
        params_digest=params_digest,
    )
    return BoundRequest(binding, request_id)


def _declared_protocol_version(request: JsonObject) -> str | None:
    params = request.get("params")
    meta = params.get("_meta") if isinstance(params, JsonObject) else None
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, JsonObject) else None
    return version.value if isinstance(version, JsonString) else None
