"""JWT access tokens (RFC 9068) verified against the issuer's key set: :class:`JwtSettings` and the
:class:`JwtAdmission` they build (together: a settings module importing the policy would be an import circle).

The steps of one admission, each refusal a bounded :class:`AdmissionRefusedReason`:

1. the bearer token of the request (:func:`~soklet_core.mcp.server.admission.bearer_token`: ``missing-credentials``,
   ``malformed-credentials``, ``token-too-large``), so every later step works on at most
   :data:`~soklet_core.mcp.server.admission.MAX_BEARER_TOKEN_CHARS` characters and may run on the event loop;
2. the verified-token cache: a token verified before is admitted again without a signature check until its ``exp``
   (and for five minutes at most), keyed by the token's SHA-256 digest, never the token;
3. the unverified header: not a JWS is ``malformed-token``; an ``alg`` outside :data:`SIGNING_ALGORITHMS` (``none``,
   every ``HS*``, any other) is ``disallowed-algorithm``;
4. the key, by ``kid`` (a token without one only when the set holds exactly one key for its algorithm): a key id
   the set holds for another key type (an RS256 header naming an EC key) is ``disallowed-algorithm``; an id it
   does not hold makes the set look again (rate-limited, :class:`~soklet_core.mcp.server.auth.JwksSource`), then
   ``unknown-key``;
5. the signature and the registered claims, by PyJWT given only that one allowlisted algorithm and that one key:
   ``exp``, ``iss`` and ``aud`` required; ``expired``, ``not-yet-valid``, ``wrong-issuer``, ``wrong-audience``,
   ``bad-signature``, ``bad-claim``, else ``malformed-token``;
6. the subject, partition and scopes (:mod:`soklet_core.mcp.server.auth._claims`; without a ``partition_claim``
   each subject is its own partition), then ``required_scopes`` (``insufficient-scope``, naming them).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import jwt
from jwt.exceptions import (
    ExpiredSignatureError,
    ImmatureSignatureError,
    InvalidAudienceError,
    InvalidIssuedAtError,
    InvalidIssuerError,
    InvalidJTIError,
    InvalidSignatureError,
    InvalidSubjectError,
    MissingRequiredClaimError,
    PyJWTError,
)

from soklet_core.keys.base64url import decode_base64url
from soklet_core.mcp.server.admission import (
    Admission,
    AdmissionRefused,
    AdmissionRefusedReason,
    AdmissionRequest,
    bearer_token,
)
from soklet_core.mcp.server.auth._claims import admission_from_claims, require_scopes
from soklet_core.mcp.server.auth._jwks import MAX_KEY_ID_CHARS, SIGNING_ALGORITHMS, JwksSource
from soklet_core.mcp.server.auth._settings import (
    MAX_LEEWAY,
    MAX_REFRESH_INTERVAL,
    MIN_REFRESH_INTERVAL,
    check_claim_name,
    check_span,
    check_text,
    check_url,
    required_scope_set,
)
from soklet_core.mcp.server.auth._token_cache import TokenCache, token_digest

__all__ = ["MAX_VERIFIED_TOKEN_AGE_SECONDS", "VERIFIED_TOKEN_CACHE_SIZE", "JwtAdmission", "JwtSettings"]

#: How many verified tokens are remembered (least recently used first out).
VERIFIED_TOKEN_CACHE_SIZE: Final = 4096
#: The longest a verified token is admitted from the cache before its signature is checked again.
MAX_VERIFIED_TOKEN_AGE_SECONDS: Final = 300.0

_R = AdmissionRefusedReason
#: PyJWT's failures and the reason each is (the first match wins: InvalidSignatureError is a DecodeError).
_FAILURES: Final[tuple[tuple[type[PyJWTError], AdmissionRefusedReason], ...]] = (
    (ExpiredSignatureError, _R.EXPIRED),
    (ImmatureSignatureError, _R.NOT_YET_VALID),
    (InvalidIssuerError, _R.WRONG_ISSUER),
    (InvalidAudienceError, _R.WRONG_AUDIENCE),
    (InvalidSignatureError, _R.BAD_SIGNATURE),
    (MissingRequiredClaimError, _R.BAD_CLAIM),
    # A registered claim of the wrong type (sub, jti, iat) is a claim problem, not a malformed token.
    (InvalidSubjectError, _R.BAD_CLAIM),
    (InvalidJTIError, _R.BAD_CLAIM),
    (InvalidIssuedAtError, _R.BAD_CLAIM),
)
_REQUIRED_CLAIMS: Final = ("exp", "iss", "aud")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class JwtSettings:
    """How :class:`~soklet_core.mcp.server.auth.JwtAdmission` verifies JWT access tokens (RFC 9068).

    * ``issuer``: the ``iss`` every token must carry, an ``https://`` URL;
    * ``audience``: the ``aud`` a token must name (this server's resource identifier);
    * exactly one of ``jwks_url`` (the issuer's ``jwks_uri``, ``https://``) and ``jwks_file`` (a JWKS document on
      disk, re-read when it changes);
    * ``partition_claim``: the claim naming the caller's partition (e.g. a tenant id); ``None`` makes each subject
      its own partition;
    * ``subject_claim``: the claim naming the caller (``sub``);
    * ``required_scopes``: scopes every admitted token must grant (else ``insufficient-scope``, HTTP 403);
    * ``leeway``: clock skew forgiven on ``exp`` and ``nbf``, 0 to 5 minutes;
    * ``refresh_interval``: the least time between two fetches of the key set for an unknown key id (and between
      two looks at the key file), 1 s to 1 h.

    ``http://`` URLs are accepted only to a loopback host (development and tests).
    """

    issuer: str
    audience: str
    jwks_url: str | None = None
    jwks_file: Path | None = None
    partition_claim: str | None = None
    subject_claim: str = "sub"
    required_scopes: frozenset[str] = frozenset()
    leeway: timedelta = timedelta(seconds=30)
    refresh_interval: timedelta = timedelta(seconds=30)

    def __post_init__(self) -> None:
        check_url(self.issuer, "issuer")
        check_text(self.audience, "audience")
        if (self.jwks_url is None) == (self.jwks_file is None):
            raise ValueError("exactly one of jwks_url and jwks_file is required")
        check_url(self.jwks_url, "jwks_url", required=False)
        if self.jwks_file is not None and not isinstance(self.jwks_file, Path):
            raise TypeError("jwks_file takes a pathlib.Path")
        check_claim_name(self.partition_claim, "partition_claim", required=False)
        check_claim_name(self.subject_claim, "subject_claim")
        object.__setattr__(self, "required_scopes", required_scope_set(self.required_scopes))
        check_span(self.leeway, "leeway", timedelta(0), MAX_LEEWAY)
        check_span(self.refresh_interval, "refresh_interval", MIN_REFRESH_INTERVAL, MAX_REFRESH_INTERVAL)

    def policy(self) -> JwtAdmission:
        """A :class:`~soklet_core.mcp.server.auth.JwtAdmission` with these settings (close it with ``aclose``)."""
        return JwtAdmission(self)


def _refused(reason: AdmissionRefusedReason) -> AdmissionRefused:
    return AdmissionRefused(reason)


def _header(token: str) -> tuple[str, str | None]:
    """The token's allowlisted ``alg`` and its ``kid`` (``None`` without one), read before any verification."""
    # Only the header segment is decoded here (strictly, by the one base64url decoder): PyJWT's own header read
    # decodes the payload and signature too, and jwt.decode parses them again once the key is known.
    encoded, dot, rest = token.partition(".")
    if not dot or rest.count(".") != 1:
        raise _refused(_R.MALFORMED_TOKEN)
    try:
        header = json.loads(decode_base64url(encoded))
    except (ValueError, RecursionError):  # RecursionError: a header nested deeper than the parser goes
        raise _refused(_R.MALFORMED_TOKEN) from None
    if not isinstance(header, dict):
        raise _refused(_R.MALFORMED_TOKEN)
    algorithm, kid = header.get("alg"), header.get("kid")
    if not isinstance(algorithm, str):
        raise _refused(_R.MALFORMED_TOKEN)
    if algorithm not in SIGNING_ALGORITHMS:
        raise _refused(_R.DISALLOWED_ALGORITHM)
    if "crit" in header:
        # RFC 7515 §4.1.11: an extension the verifier must understand; this one understands none.
        raise _refused(_R.MALFORMED_TOKEN)
    if kid is not None and (not isinstance(kid, str) or not kid or len(kid) > MAX_KEY_ID_CHARS):
        raise _refused(_R.MALFORMED_TOKEN)
    return algorithm, kid


class JwtAdmission:
    """Admit requests whose bearer token is a JWT the configured issuer signed for the configured audience.

    Built from :class:`~soklet_core.mcp.server.auth.JwtSettings` (``settings.policy()``); ``source`` replaces the
    key set the settings name (tests, or a source shared by several policies), ``clock`` the monotonic clock of the
    verified-token cache. The partition is the ``partition_claim`` claim, or, without one, the subject: each caller
    is then a partition of its own. Close it with :meth:`aclose` (the key set's HTTP client).
    """

    __slots__ = ("_cache", "_settings", "_source", "_wall_clock")

    def __init__(
        self,
        settings: JwtSettings,
        *,
        source: JwksSource | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(settings, JwtSettings):
            raise TypeError("JwtAdmission takes JwtSettings")
        self._settings = settings
        self._source = source or JwksSource(
            url=settings.jwks_url, file=settings.jwks_file, refresh_interval=settings.refresh_interval
        )
        self._cache: TokenCache[Admission] = TokenCache(VERIFIED_TOKEN_CACHE_SIZE, clock=clock)
        self._wall_clock = wall_clock

    @property
    def settings(self) -> JwtSettings:
        """The settings this policy verifies with."""
        return self._settings

    @property
    def source(self) -> JwksSource:
        """The issuer's key set."""
        return self._source

    async def admit(self, request: AdmissionRequest) -> Admission:
        """The admission the request's JWT grants; :class:`AdmissionRefused` with the step's reason otherwise."""
        token = bearer_token(request)
        digest = token_digest(token)
        admission = self._cache.get(digest)
        if admission is None:
            claims = await self._verify(token)
            admission = admission_from_claims(
                claims, subject_claim=self._settings.subject_claim, partition_claim=self._settings.partition_claim
            )
            # Kept until exp (no leeway: a cached answer never outlives the token), five minutes at most.
            lifetime = min(float(claims["exp"]) - self._wall_clock(), MAX_VERIFIED_TOKEN_AGE_SECONDS)
            self._cache.put(digest, admission, lifetime)
        return require_scopes(admission, self._settings.required_scopes)

    async def _verify(self, token: str) -> Mapping[str, Any]:
        algorithm, kid = _header(token)
        keys = await self._source.current()
        key = keys.find(algorithm, kid)
        if key is None and kid is not None and keys.holds(kid):
            raise _refused(_R.DISALLOWED_ALGORITHM)  # the named key is of another type than the header's alg
        if key is None:
            keys = await self._source.refresh_for_unknown_key()
            key = keys.find(algorithm, kid)
            if key is None:
                raise _refused(_R.DISALLOWED_ALGORITHM if kid is not None and keys.holds(kid) else _R.UNKNOWN_KEY)
        settings = self._settings
        try:
            # One algorithm, the allowlisted one the key was chosen for: never a list taken from the header.
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=settings.leeway,
                options={"require": list(_REQUIRED_CLAIMS)},
            )
        except PyJWTError as failure:
            for kind, reason in _FAILURES:
                if isinstance(failure, kind):
                    raise _refused(reason) from None
            raise _refused(_R.MALFORMED_TOKEN) from None
        return claims

    async def aclose(self) -> None:
        """Close the key set's HTTP client."""
        await self._source.aclose()

    def __repr__(self) -> str:
        return f"JwtAdmission(issuer={self._settings.issuer!r}, audience={self._settings.audience!r})"
