"""Opaque (or any) access tokens checked by asking the authorization server (RFC 7662): :class:`IntrospectionSettings`
and the :class:`IntrospectionAdmission` they build.

One admission: the bearer token (:func:`~soklet_core.mcp.server.admission.bearer_token`), then the answer cache,
then, on a miss, one ``POST`` of ``token=<t>&token_type_hint=access_token`` to the introspection endpoint with this
server's client credentials as HTTP Basic authentication (each form-urlencoded first, RFC 6749 §2.3.1). The answer
(HTTP 200, a JSON object of at most :data:`MAX_INTROSPECTION_BYTES`) must say ``"active": true`` (else
``inactive-token``); its ``exp`` and ``nbf``, when present, are checked with the leeway (``expired``,
``not-yet-valid``); its ``iss`` must be the configured issuer and its ``aud`` (a string or a list) must name the
configured audience, when those are set (``wrong-issuer``, ``wrong-audience``); subject, partition and scopes are
read as for a JWT (:mod:`soklet_core.mcp.server.auth._claims`).

What keeps the endpoint from being flooded:

* answers are cached by the token's SHA-256 digest (never the token): an active one for ``cache_ttl`` and never past
  its ``exp``, a refusal the answer decided (inactive, expired, wrong issuer or audience, a bad claim) for
  :data:`NEGATIVE_CACHE_SECONDS`, so a flood of one bad token costs one call;
* concurrent misses of one token share one call;
* at most ``max_concurrent`` calls are in flight; a call beyond waits up to :data:`SLOT_WAIT_SECONDS` for a slot,
  then is refused ``verifier-unavailable`` (as is an unreachable endpoint, a non-200 answer or one that is not a
  JSON object): the server answers 503 rather than queueing without bound.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Final, NoReturn
from urllib.parse import quote_plus

import httpx

from soklet_core.mcp.server.admission import (
    Admission,
    AdmissionRefused,
    AdmissionRefusedReason,
    AdmissionRequest,
    bearer_token,
)
from soklet_core.mcp.server.auth._claims import admission_from_claims, require_scopes
from soklet_core.mcp.server.auth._settings import (
    MAX_CACHE_SIZE,
    MAX_CACHE_TTL,
    MAX_CLIENT_ID_CHARS,
    MAX_CLIENT_SECRET_CHARS,
    MAX_CONCURRENT_INTROSPECTIONS,
    MAX_LEEWAY,
    check_claim_name,
    check_count,
    check_span,
    check_text,
    check_url,
    required_scope_set,
)
from soklet_core.mcp.server.auth._token_cache import TokenCache, token_digest

__all__ = [
    "INTROSPECTION_TIMEOUT_SECONDS",
    "MAX_INTROSPECTION_BYTES",
    "NEGATIVE_CACHE_SECONDS",
    "SLOT_WAIT_SECONDS",
    "IntrospectionAdmission",
    "IntrospectionSettings",
]

#: The largest introspection answer read.
MAX_INTROSPECTION_BYTES: Final = 64 * 1024
#: The whole budget of one introspection call.
INTROSPECTION_TIMEOUT_SECONDS: Final = 5.0
#: How long a refusal decided by the endpoint's answer is reused.
NEGATIVE_CACHE_SECONDS: Final = 5.0
#: The longest a call waits for one of the ``max_concurrent`` slots.
SLOT_WAIT_SECONDS: Final = 1.0

_R = AdmissionRefusedReason
#: A verdict: the admission an active answer grants (before required scopes), or the reason it was refused.
_Verdict = Admission | AdmissionRefusedReason
#: Refusals the answer decided and that will not change within NEGATIVE_CACHE_SECONDS (not-yet-valid may).
_CACHED_REFUSALS: Final = frozenset({_R.INACTIVE, _R.EXPIRED, _R.WRONG_ISSUER, _R.WRONG_AUDIENCE, _R.BAD_CLAIM})

_logger = logging.getLogger("soklet.auth")


class _Unavailable(Exception):
    """The endpoint gave no usable answer; ``str()`` is a fixed word naming why."""


def _refuse(reason: AdmissionRefusedReason) -> NoReturn:
    raise AdmissionRefused(reason)


def _no_constant(name: str) -> NoReturn:
    # NaN and Infinity are not JSON, and a NaN exp would compare as never expired.
    raise ValueError("not a JSON number")


def _time_claim(answer: Mapping[str, object], name: str) -> float | None:
    value = answer.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _refuse(_R.BAD_CLAIM)
    return float(value)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class IntrospectionSettings:
    """How :class:`~soklet_core.mcp.server.auth.IntrospectionAdmission` asks an RFC 7662 endpoint about a token.

    * ``introspection_url``: the authorization server's introspection endpoint, ``https://``;
    * ``client_id``, ``client_secret``: this server's client credentials, sent as HTTP Basic authentication (the
      secret is never in ``repr`` and never logged);
    * ``issuer``, ``audience``: when set, the answer's ``iss`` must equal ``issuer`` and its ``aud`` (a string or
      a list) must contain ``audience``;
    * ``partition_claim``, ``subject_claim``, ``required_scopes``, ``leeway``: as for
      :class:`JwtSettings`;
    * ``cache_ttl``: how long an active answer is reused (never past the token's ``exp``), 0 to 1 h;
    * ``cache_size``: how many answers are kept (least recently used first out), 1 to 1,000,000;
    * ``max_concurrent``: how many introspection calls may be in flight at once, 1 to 1,024 (a request beyond waits
      at most a second, then is refused ``verifier-unavailable``).
    """

    introspection_url: str
    client_id: str
    client_secret: str = dataclasses.field(repr=False)
    issuer: str | None = None
    audience: str | None = None
    partition_claim: str | None = None
    subject_claim: str = "sub"
    required_scopes: frozenset[str] = frozenset()
    leeway: timedelta = timedelta(seconds=30)
    cache_ttl: timedelta = timedelta(seconds=60)
    cache_size: int = 10_000
    max_concurrent: int = 16

    def __post_init__(self) -> None:
        check_url(self.introspection_url, "introspection_url")
        check_text(self.client_id, "client_id", limit=MAX_CLIENT_ID_CHARS)
        check_text(self.client_secret, "client_secret", limit=MAX_CLIENT_SECRET_CHARS)
        check_url(self.issuer, "issuer", required=False)
        check_text(self.audience, "audience", required=False)
        check_claim_name(self.partition_claim, "partition_claim", required=False)
        check_claim_name(self.subject_claim, "subject_claim")
        object.__setattr__(self, "required_scopes", required_scope_set(self.required_scopes))
        check_span(self.leeway, "leeway", timedelta(0), MAX_LEEWAY)
        check_span(self.cache_ttl, "cache_ttl", timedelta(0), MAX_CACHE_TTL)
        check_count(self.cache_size, "cache_size", 1, MAX_CACHE_SIZE)
        check_count(self.max_concurrent, "max_concurrent", 1, MAX_CONCURRENT_INTROSPECTIONS)

    def policy(self) -> IntrospectionAdmission:
        """An :class:`~soklet_core.mcp.server.auth.IntrospectionAdmission` with these settings (close it with
        ``aclose``)."""
        return IntrospectionAdmission(self)


class IntrospectionAdmission:
    """Admit requests whose bearer token the authorization server's introspection endpoint reports active.

    Built from :class:`~soklet_core.mcp.server.auth.IntrospectionSettings` (``settings.policy()``); ``clock`` is the
    monotonic clock of the answer cache and ``wall_clock`` the time ``exp`` and ``nbf`` are compared with
    (parameters so that tests can move time). Without a ``partition_claim`` each subject is its own partition.
    Close it with :meth:`aclose`.
    """

    __slots__ = ("_cache", "_client", "_inflight", "_settings", "_slots", "_wall_clock")

    def __init__(
        self,
        settings: IntrospectionSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(settings, IntrospectionSettings):
            raise TypeError("IntrospectionAdmission takes IntrospectionSettings")
        self._settings = settings
        self._wall_clock = wall_clock
        self._cache: TokenCache[_Verdict] = TokenCache(settings.cache_size, clock=clock)
        self._inflight: dict[bytes, asyncio.Task[_Verdict]] = {}
        self._slots = asyncio.Semaphore(settings.max_concurrent)
        # RFC 6749 §2.3.1: the id and the secret are each form-urlencoded before the Basic encoding.
        auth = httpx.BasicAuth(quote_plus(settings.client_id), quote_plus(settings.client_secret))
        # trust_env=False: no proxy, .netrc credentials or CA bundle slipped in from the environment.
        self._client = httpx.AsyncClient(
            auth=auth, timeout=INTROSPECTION_TIMEOUT_SECONDS, follow_redirects=False, trust_env=False
        )

    @property
    def settings(self) -> IntrospectionSettings:
        """The settings this policy introspects with."""
        return self._settings

    async def admit(self, request: AdmissionRequest) -> Admission:
        """The admission the request's token is granted by its introspection answer (cached); refuses otherwise."""
        token = bearer_token(request)
        digest = token_digest(token)
        verdict = self._cache.get(digest)
        if verdict is None:
            task = self._inflight.get(digest)
            if task is None:
                task = asyncio.create_task(self._introspect(digest, token))
                self._inflight[digest] = task
                task.add_done_callback(lambda done: self._forget(digest, done))
            # Shielded: a caller that gives up does not cancel the call the others are waiting for.
            verdict = await asyncio.shield(task)
        if isinstance(verdict, AdmissionRefusedReason):
            raise AdmissionRefused(verdict)
        return require_scopes(verdict, self._settings.required_scopes)

    def _forget(self, digest: bytes, task: asyncio.Task[_Verdict]) -> None:
        if self._inflight.get(digest) is task:
            del self._inflight[digest]

    async def _introspect(self, digest: bytes, token: str) -> _Verdict:
        try:
            await asyncio.wait_for(self._slots.acquire(), SLOT_WAIT_SECONDS)
        except TimeoutError:
            _logger.warning("token introspection refused: all %d slots busy", self._settings.max_concurrent)
            return _R.VERIFIER_UNAVAILABLE
        try:
            answer = await self._call(token)
        except _Unavailable as failure:
            _logger.warning("token introspection failed (%s)", failure)
            return _R.VERIFIER_UNAVAILABLE
        finally:
            self._slots.release()
        now = self._wall_clock()
        try:
            admission, lifetime = self._judge(answer, now)
        except AdmissionRefused as refusal:
            if refusal.reason in _CACHED_REFUSALS:
                self._cache.put(digest, refusal.reason, NEGATIVE_CACHE_SECONDS)
            return refusal.reason
        self._cache.put(digest, admission, lifetime)
        return admission

    async def _call(self, token: str) -> dict[str, object]:
        body = bytearray()
        form = {"token": token, "token_type_hint": "access_token"}
        # identity encoding: the size bound holds on the bytes received, never a decompression multiple.
        headers = {"accept": "application/json", "accept-encoding": "identity"}
        try:
            # One budget for the whole call: httpx's timeout is per read, which a server dripping bytes would stretch.
            async with asyncio.timeout(INTROSPECTION_TIMEOUT_SECONDS):
                async with self._client.stream(
                    "POST", self._settings.introspection_url, data=form, headers=headers
                ) as response:
                    if response.status_code != 200:
                        raise _Unavailable("status")
                    if response.headers.get("content-encoding", "identity").lower() != "identity":
                        raise _Unavailable("encoded")
                    length = response.headers.get("content-length")
                    if length is not None and (not length.isdigit() or int(length) > MAX_INTROSPECTION_BYTES):
                        raise _Unavailable("too-large")
                    async for chunk in response.aiter_raw():
                        body += chunk
                        if len(body) > MAX_INTROSPECTION_BYTES:
                            raise _Unavailable("too-large")
        except (httpx.HTTPError, TimeoutError):
            raise _Unavailable("unreachable") from None
        try:
            answer = json.loads(body, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise _Unavailable("not-json") from None
        if not isinstance(answer, dict):
            raise _Unavailable("not-an-object")
        return answer

    def _judge(self, answer: Mapping[str, object], now: float) -> tuple[Admission, float]:
        """The admission an answer grants and how long it may be reused; :class:`AdmissionRefused` otherwise."""
        settings = self._settings
        if answer.get("active") is not True:
            _refuse(_R.INACTIVE)
        leeway = settings.leeway.total_seconds()
        expires, not_before = _time_claim(answer, "exp"), _time_claim(answer, "nbf")
        if expires is not None and now > expires + leeway:
            _refuse(_R.EXPIRED)
        if not_before is not None and now < not_before - leeway:
            _refuse(_R.NOT_YET_VALID)
        if settings.issuer is not None and answer.get("iss") != settings.issuer:
            _refuse(_R.WRONG_ISSUER)
        if settings.audience is not None:
            audience = answer.get("aud")
            named = [audience] if isinstance(audience, str) else audience
            if not isinstance(named, list) or settings.audience not in named:
                _refuse(_R.WRONG_AUDIENCE)
        admission = admission_from_claims(
            answer, subject_claim=settings.subject_claim, partition_claim=settings.partition_claim
        )
        lifetime = settings.cache_ttl.total_seconds()
        if expires is not None:
            lifetime = min(lifetime, expires - now)  # never reused past the token's own end
        return admission, lifetime

    async def aclose(self) -> None:
        """Cancel the calls in flight and close the HTTP client."""
        for task in list(self._inflight.values()):
            task.cancel()
        await self._client.aclose()

    def __repr__(self) -> str:
        return f"IntrospectionAdmission(introspection_url={self._settings.introspection_url!r})"
