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

The token-verifying policies (JWT access tokens against an issuer's key set, RFC 7662 introspection) live in
:mod:`soklet_core.mcp.server.auth`.

A custom policy is any object with ``admit(request: AdmissionRequest) -> Admission`` that raises
:class:`AdmissionRefused` to refuse; ``admit`` may be ``async def`` (the engine awaits an awaitable verdict), which
is how a policy that must ask a server (a key set, an introspection endpoint) waits without blocking. It runs on
the event loop: it must not block, and its work must be bounded (a bearer token is at most
:data:`MAX_BEARER_TOKEN_CHARS` characters, :func:`bearer_token`).

How a refusal is answered is decided by its reason alone (:attr:`AdmissionRefused.http_status`,
:attr:`AdmissionRefused.bearer_error`): 401 with ``WWW-Authenticate: Bearer`` and the RFC 6750 error code
``invalid_token`` (or none, when no credentials were sent), 403 ``insufficient_scope`` with the scopes needed, 503
when the policy could not check the token. Nothing else about why a token failed reaches the client: the reason
goes to the access log and the ``soklet_admission_refusals`` counter.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.mcp.model.context import Identity
from soklet_core.mcp.model.scopes import scope_set
from soklet_core.protection import ANONYMOUS_PARTITION

__all__ = [
    "ANONYMOUS_PARTITION",
    "MAX_BEARER_TOKEN_CHARS",
    "Admission",
    "AdmissionPolicy",
    "AdmissionRefused",
    "AdmissionRefusedReason",
    "AdmissionRequest",
    "AnonymousAdmission",
    "BearerTokenAdmission",
    "BearerTokenEntry",
    "bearer_token",
]

#: The longest bearer token a policy reads: a longer one is refused (``token-too-large``) before any verification,
#: so every policy's work per request is bounded. Real access tokens are a few KiB at most.
MAX_BEARER_TOKEN_CHARS: Final = 8192


@dataclass(frozen=True, slots=True)
class Admission:
    """The admitted identity and authorization partition of one request, and the scopes its credentials grant.

    ``scopes`` is ``None`` for an *unscoped* admission: no authorization server stands behind it (the anonymous
    caller), so per-operation scopes (``required_scopes=``) are not checked. A set (empty by default) is checked:
    an operation runs only when the set holds every scope it requires.
    """

    identity: Identity
    partition: str
    scopes: frozenset[str] | None = field(default=frozenset())

    def __post_init__(self) -> None:
        if not isinstance(self.identity, Identity) or not isinstance(self.partition, str) or not self.partition:
            raise ValueError("an admission needs an Identity and a non-empty partition")
        if self.scopes is not None and not isinstance(self.scopes, frozenset):
            raise TypeError("scopes takes a frozenset of scope values (or None: unscoped)")

    def grants(self, required: Collection[str]) -> bool:
        """Whether this admission may run an operation that requires ``required`` (always, when unscoped)."""
        return self.scopes is None or self.scopes.issuperset(required)


_ANONYMOUS_ADMISSION: Final = Admission(Identity.anonymous(), ANONYMOUS_PARTITION, scopes=None)


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
    TOKEN_TOO_LARGE = "token-too-large", "the bearer token is longer than any policy reads"
    MALFORMED_TOKEN = "malformed-token", "the bearer token is not a well-formed token of the policy's kind"
    DISALLOWED_ALGORITHM = "disallowed-algorithm", "the token's signature algorithm is not one the policy accepts"
    UNKNOWN_KEY = "unknown-key", "the token names a signing key the issuer's key set does not hold"
    BAD_SIGNATURE = "bad-signature", "the token's signature does not verify"
    EXPIRED = "expired", "the token has expired"
    NOT_YET_VALID = "not-yet-valid", "the token is not valid yet"
    WRONG_ISSUER = "wrong-issuer", "the token was issued by another issuer"
    WRONG_AUDIENCE = "wrong-audience", "the token is meant for another audience"
    BAD_CLAIM = "bad-claim", "a claim the policy reads is missing or of the wrong type"
    INACTIVE = "inactive-token", "the authorization server reports the token inactive"
    INSUFFICIENT_SCOPE = "insufficient-scope", "the token lacks a scope the request needs"
    VERIFIER_UNAVAILABLE = "verifier-unavailable", "the token could not be checked: its verifier is unreachable"
    POLICY = "policy", "the admission policy refused the request"


#: How each refusal is answered: (HTTP status, RFC 6750 error code or None). A reason not listed is an invalid
#: token (401 ``invalid_token``).
_ANSWERS: Final[Mapping[AdmissionRefusedReason, tuple[int, str | None]]] = {
    # RFC 6750 §3.1: a request without credentials gets a challenge and no error code.
    AdmissionRefusedReason.MISSING_CREDENTIALS: (401, None),
    AdmissionRefusedReason.MALFORMED_CREDENTIALS: (401, "invalid_request"),
    AdmissionRefusedReason.INSUFFICIENT_SCOPE: (403, "insufficient_scope"),
    AdmissionRefusedReason.VERIFIER_UNAVAILABLE: (503, None),
    AdmissionRefusedReason.POLICY: (401, None),
}
_INVALID_TOKEN: Final = (401, "invalid_token")


class AdmissionRefused(SokletError):
    """Raised by a policy to refuse a request; the transport answers as :attr:`http_status` says (401, 403 with
    ``scopes``, 503) with a JSON-RPC error and a ``WWW-Authenticate: Bearer`` challenge.

    ``scopes`` are the scopes the request needed (``insufficient-scope`` only). ``str()`` is the reason's slug
    alone.
    """

    reason: AdmissionRefusedReason

    def __init__(
        self, reason: AdmissionRefusedReason = AdmissionRefusedReason.POLICY, *, scopes: tuple[str, ...] = ()
    ) -> None:
        super().__init__(reason, reason.value)
        self.scopes = tuple(sorted(scope_set(scopes)))

    @property
    def http_status(self) -> int:
        """401 for missing or invalid credentials, 403 for a missing scope, 503 when the token could not be
        checked."""
        return _ANSWERS.get(self.reason, _INVALID_TOKEN)[0]

    @property
    def bearer_error(self) -> str | None:
        """The RFC 6750 error code of the challenge (``invalid_token``, ``invalid_request``,
        ``insufficient_scope``), ``None`` for none."""
        return _ANSWERS.get(self.reason, _INVALID_TOKEN)[1]


def bearer_token(request: AdmissionRequest) -> str:
    """The bearer token of ``request``'s ``Authorization`` header (RFC 6750 §2.1), the one home of reading it.

    Raises :class:`AdmissionRefused`: ``missing-credentials`` without the header, ``malformed-credentials`` for
    another scheme or an empty token, ``token-too-large`` for one over :data:`MAX_BEARER_TOKEN_CHARS`.
    """
    header = request.headers.get("authorization")
    if header is None:
        raise AdmissionRefused(AdmissionRefusedReason.MISSING_CREDENTIALS)
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AdmissionRefused(AdmissionRefusedReason.MALFORMED_CREDENTIALS)
    if len(token) > MAX_BEARER_TOKEN_CHARS:
        raise AdmissionRefused(AdmissionRefusedReason.TOKEN_TOO_LARGE)
    return token


@runtime_checkable
class AdmissionPolicy(Protocol):
    """Maps a request to an :class:`Admission` or raises :class:`AdmissionRefused`."""

    def admit(self, request: AdmissionRequest) -> Admission | Awaitable[Admission]:
        """The admission of ``request`` (or an awaitable of it: ``async def admit`` is allowed)."""
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
    """Who a bearer token admits: a subject and a partition, and the scopes it grants (none by default)."""

    subject: str
    partition: str
    scopes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "scopes", scope_set(self.scopes))


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
            entries.append((_digest(token), Admission(Identity(entry.subject), entry.partition, entry.scopes)))
        if not entries:
            raise ValueError("a bearer-token map needs at least one token")
        self._entries: tuple[tuple[bytes, Admission], ...] = tuple(entries)

    def admit(self, request: AdmissionRequest) -> Admission:
        """The entry of the request's bearer token; raises :class:`AdmissionRefused` otherwise."""
        presented = _digest(bearer_token(request))
        found: Admission | None = None
        for digest, admission in self._entries:  # no early exit: every entry is compared
            if hmac.compare_digest(digest, presented):
                found = admission
        if found is None:
            raise AdmissionRefused(AdmissionRefusedReason.UNKNOWN_CREDENTIALS)
        return found

    def __repr__(self) -> str:
        return f"BearerTokenAdmission(<{len(self._entries)} tokens>)"
