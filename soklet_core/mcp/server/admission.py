"""Admission: which identity and authorization partition a request belongs to.

Every request is admitted before any operation, capability, params or state behaviour is exposed. The
partition is part of the framework-state binding, so a state sealed for one partition never opens in another.

Two policies are built in:

* :class:`AnonymousAdmission` (the default): everyone is the anonymous caller in the one partition
  ``"anonymous"``;
* :class:`BearerTokenAdmission`: a configured map of bearer tokens, each to a subject and a partition. A request
  without ``Authorization: Bearer <token>``, or with an unknown token, is refused (HTTP 401). Tokens are compared
  in constant time against every entry, so timing reveals neither which entry matched nor how much of a token
  was right.

A custom policy is any object with ``admit(request: AdmissionRequest) -> Admission`` that raises
:class:`AdmissionRefused` to refuse. It runs on the event loop: it must not block.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.mcp.model.context import Identity
from soklet_core.protection import ANONYMOUS_PARTITION

__all__ = [
    "ANONYMOUS_PARTITION",
    "Admission",
    "AdmissionPolicy",
    "AdmissionRefused",
    "AdmissionRefusedReason",
    "AdmissionRequest",
    "AnonymousAdmission",
    "BearerTokenAdmission",
    "BearerTokenEntry",
]


@dataclass(frozen=True, slots=True)
class Admission:
    """The admitted identity and authorization partition of one request."""

    identity: Identity
    partition: str

    def __post_init__(self) -> None:
        if not isinstance(self.identity, Identity) or not isinstance(self.partition, str) or not self.partition:
            raise ValueError("an admission needs an Identity and a non-empty partition")


_ANONYMOUS_ADMISSION: Final = Admission(Identity.anonymous(), ANONYMOUS_PARTITION)


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """What a policy may look at: the endpoint path and the request headers (names lower-case).

    The body is deliberately absent: admission happens before params are touched.
    """

    path: str
    headers: Mapping[str, str]


class AdmissionRefusedReason(ErrorReason):
    """Why a request was not admitted (for the operator log; the client sees one fixed message)."""

    MISSING_CREDENTIALS = "missing-credentials", "the request carries no Authorization header"
    MALFORMED_CREDENTIALS = "malformed-credentials", "the Authorization header is not a non-empty bearer token"
    UNKNOWN_CREDENTIALS = "unknown-credentials", "the bearer token is not one the policy knows"
    POLICY = "policy", "the admission policy refused the request"


class AdmissionRefused(SokletError):
    """Raised by a policy to refuse a request; the transport answers HTTP 401 with a JSON-RPC error.

    ``str()`` is the reason's slug alone.
    """

    reason: AdmissionRefusedReason

    def __init__(self, reason: AdmissionRefusedReason = AdmissionRefusedReason.POLICY) -> None:
        super().__init__(reason, reason.value)


@runtime_checkable
class AdmissionPolicy(Protocol):
    """Maps a request to an :class:`Admission` or raises :class:`AdmissionRefused`."""

    def admit(self, request: AdmissionRequest) -> Admission:
        """The admission of ``request``."""
        ...


class AnonymousAdmission:
    """Admit every request as the anonymous caller in partition ``"anonymous"``."""

    __slots__ = ()

    def admit(self, request: AdmissionRequest) -> Admission:
        """Always the anonymous admission."""
        return _ANONYMOUS_ADMISSION

    def __repr__(self) -> str:
        return "AnonymousAdmission()"


@dataclass(frozen=True, slots=True)
class BearerTokenEntry:
    """Who a bearer token admits: a subject and a partition."""

    subject: str
    partition: str


def _digest(token: str) -> bytes:
    # Comparing fixed-size digests keeps compare_digest's running time independent of the token length.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class BearerTokenAdmission:
    """Admit requests carrying a configured bearer token; refuse every other request.

    ``tokens`` maps each token to a :class:`BearerTokenEntry` (or a ``(subject, partition)`` pair). Only the
    SHA-256 of each token is kept; ``repr`` shows how many tokens there are, never them.
    """

    __slots__ = ("_entries",)

    def __init__(self, tokens: Mapping[str, BearerTokenEntry | tuple[str, str]]) -> None:
        entries: list[tuple[bytes, Admission]] = []
        for token, entry in tokens.items():
            if not isinstance(token, str) or not token:
                raise ValueError("bearer tokens must be non-empty strings")
            if not isinstance(entry, BearerTokenEntry):
                entry = BearerTokenEntry(*entry)
            entries.append((_digest(token), Admission(Identity(entry.subject), entry.partition)))
        if not entries:
            raise ValueError("a bearer-token map needs at least one token")
        self._entries: tuple[tuple[bytes, Admission], ...] = tuple(entries)

    def admit(self, request: AdmissionRequest) -> Admission:
        """The entry of the request's bearer token; raises :class:`AdmissionRefused` otherwise."""
        header = request.headers.get("authorization")
        if header is None:
            raise AdmissionRefused(AdmissionRefusedReason.MISSING_CREDENTIALS)
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AdmissionRefused(AdmissionRefusedReason.MALFORMED_CREDENTIALS)
        presented = _digest(token)
        found: Admission | None = None
        for digest, admission in self._entries:  # no early exit: every entry is compared
            if hmac.compare_digest(digest, presented):
                found = admission
        if found is None:
            raise AdmissionRefused(AdmissionRefusedReason.UNKNOWN_CREDENTIALS)
        return found

    def __repr__(self) -> str:
        return f"BearerTokenAdmission(<{len(self._entries)} tokens>)"
