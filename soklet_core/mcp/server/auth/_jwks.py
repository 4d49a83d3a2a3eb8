"""The issuer's key set (JWKS, RFC 7517): fetched or read, bounded, cached, refreshed without a storm.

A :class:`JwksSource` holds the keys a :class:`~soklet_core.mcp.server.auth.JwtAdmission` verifies signatures
with, from one of two places:

* **a URL** (the issuer's ``jwks_uri``): fetched with ``httpx`` (5 s timeout, no redirects, no proxy or ``.netrc``
  from the environment, the body read in chunks and refused past :data:`MAX_JWKS_BYTES`), kept for the answer's
  ``Cache-Control: max-age`` clamped to 60 s - 24 h (5 minutes without one);
* **a file**: read in a worker thread (the same size bound) and read again when its modification time, size or
  inode changes, looked at no more than once per ``refresh_interval``.

A token naming a key id the set does not hold makes the source look again, but no more than once per
``refresh_interval``, and concurrent lookups share that one fetch (an :class:`asyncio.Lock` with a generation
count): a thousand forged key ids cost one fetch per interval, not a thousand. A fetch or read that fails (the
issuer unreachable, a non-200 answer, a body too large, not a JWKS) keeps the keys already loaded; only when no key
was ever loaded is a token refused ``verifier-unavailable``.

Only keys a policy can use are kept (:func:`parse_jwks`): ``use`` absent or ``"sig"``, ``key_ops`` absent or
naming ``verify``, and of a type one of :data:`SIGNING_ALGORITHMS` verifies with (RSA of 2048 to 8192 bits for
``RS256``, EC P-256 for ``ES256``, OKP Ed25519 for ``EdDSA``), an ``alg`` member, when present, naming that
algorithm. Only the public members are loaded (private members a misconfigured set might publish are dropped).
Every other key is skipped and counted, never a crash: :attr:`JwksSource.skipped_keys`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Final

import httpx
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, EllipticCurvePublicKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from jwt import PyJWK
from jwt.exceptions import PyJWTError

from soklet_core.files import KeyringFileError, read_regular_file
from soklet_core.mcp.server.admission import AdmissionRefused, AdmissionRefusedReason

__all__ = [
    "DEFAULT_MAX_AGE",
    "MAX_JWKS_BYTES",
    "MAX_JWKS_KEYS",
    "MAX_KEY_ID_CHARS",
    "SIGNING_ALGORITHMS",
    "JwksSource",
    "KeySet",
    "parse_jwks",
]

#: The signature algorithms a token may use, the whole allowlist: RSA PKCS#1 v1.5 with SHA-256, ECDSA P-256 with
#: SHA-256, Ed25519. ``none``, every HMAC algorithm (a public key must never become a shared secret) and every
#: other algorithm are refused.
SIGNING_ALGORITHMS: Final = frozenset({"RS256", "ES256", "EdDSA"})
#: The largest JWKS document read (fetched or from a file).
MAX_JWKS_BYTES: Final = 256 * 1024
#: The most keys one JWKS document may list (a longer one is refused whole).
MAX_JWKS_KEYS: Final = 64
#: The longest key id kept (and looked up).
MAX_KEY_ID_CHARS: Final = 256
#: How long a fetched key set is kept without ``Cache-Control: max-age``, and the bounds a ``max-age`` is clamped to.
DEFAULT_MAX_AGE: Final = timedelta(minutes=5)
MIN_MAX_AGE: Final = timedelta(seconds=60)
MAX_MAX_AGE: Final = timedelta(hours=24)
#: The whole budget of one fetch: connect, send, wait and read.
FETCH_TIMEOUT_SECONDS: Final = 5.0

_RSA_BITS: Final = (2048, 8192)
#: Each key type's one algorithm, and the JWK members its public key is made of.
_FAMILIES: Final[Mapping[tuple[str, str | None], tuple[str, tuple[str, ...]]]] = {
    ("RSA", None): ("RS256", ("n", "e")),
    ("EC", "P-256"): ("ES256", ("crv", "x", "y")),
    ("OKP", "Ed25519"): ("EdDSA", ("crv", "x")),
}

_logger = logging.getLogger("soklet.auth")


class _JwksUnavailable(Exception):
    """A key set could not be fetched, read or parsed; ``str()`` is a fixed word naming why (never a value)."""


def _key_type_matches(algorithm: str, key: object) -> bool:
    # PyJWK already built the key from the family's members; this is the second lock on the same door.
    if algorithm == "RS256":
        return isinstance(key, RSAPublicKey) and _RSA_BITS[0] <= key.key_size <= _RSA_BITS[1]
    if algorithm == "ES256":
        return isinstance(key, EllipticCurvePublicKey) and isinstance(key.curve, SECP256R1)
    return algorithm == "EdDSA" and isinstance(key, Ed25519PublicKey)


def _usable_key(member: object) -> tuple[str | None, PyJWK] | None:
    """``(kid, key)`` for a JWK a policy can verify with, ``None`` for any other."""
    if not isinstance(member, dict):
        return None
    kty, crv = member.get("kty"), member.get("crv")
    family = _FAMILIES.get((kty, None) if kty == "RSA" else (kty, crv))  # type: ignore[arg-type]
    if family is None:
        return None
    algorithm, members = family
    use, ops, alg, kid = member.get("use"), member.get("key_ops"), member.get("alg"), member.get("kid")
    if use is not None and use != "sig":
        return None
    if ops is not None and (not isinstance(ops, list) or "verify" not in ops):
        return None
    if alg is not None and alg != algorithm:
        return None
    if kid is not None and (not isinstance(kid, str) or not kid or len(kid) > MAX_KEY_ID_CHARS):
        return None
    if not all(isinstance(member.get(name), str) for name in members):
        return None
    public = {"kty": kty, **{name: member[name] for name in members}}
    try:
        key = PyJWK(public, algorithm=algorithm)
    except (PyJWTError, ValueError, TypeError):
        return None
    if not _key_type_matches(algorithm, key.key):
        return None
    return kid, key


@dataclasses.dataclass(frozen=True, slots=True)
class KeySet:
    """The usable keys of one JWKS document (``(kid, key)``, in document order) and how many were skipped."""

    keys: tuple[tuple[str | None, PyJWK], ...]
    skipped: int = 0

    def find(self, algorithm: str, kid: str | None) -> PyJWK | None:
        """The key for a token signed with ``algorithm`` naming ``kid``; without a ``kid``, the one key of that
        algorithm when the set holds exactly one. ``None`` when there is no such key."""
        if kid is None:
            candidates = [key for _, key in self.keys if key.algorithm_name == algorithm]
            return candidates[0] if len(candidates) == 1 else None
        for key_id, key in self.keys:
            if key_id == kid and key.algorithm_name == algorithm:
                return key
        return None

    def holds(self, kid: str) -> bool:
        """Whether some key of the set has the id ``kid`` (of whatever algorithm)."""
        return any(key_id == kid for key_id, _ in self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        return f"KeySet(<{len(self.keys)} keys, {self.skipped} skipped>)"


def parse_jwks(body: bytes) -> KeySet:
    """The usable keys of a JWKS document; :class:`_JwksUnavailable` when it is not one (not a JSON object with a
    ``keys`` list, more than :data:`MAX_JWKS_KEYS` keys, or no usable key at all)."""
    if len(body) > MAX_JWKS_BYTES:
        raise _JwksUnavailable("too-large")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise _JwksUnavailable("not-json") from None
    members = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(members, list) or len(members) > MAX_JWKS_KEYS:
        raise _JwksUnavailable("not-a-jwks")
    usable = [found for found in map(_usable_key, members) if found is not None]
    if not usable:
        # A set without one usable key is a broken set, not a revocation of every key: keep what was loaded.
        raise _JwksUnavailable("no-usable-key")
    return KeySet(tuple(usable), skipped=len(members) - len(usable))


def _max_age(cache_control: str | None) -> float:
    """The answer's ``max-age`` in seconds, clamped; the default without one."""
    seconds = DEFAULT_MAX_AGE.total_seconds()
    for directive in (cache_control or "").split(","):
        name, _, value = directive.strip().partition("=")
        name = name.strip().lower()
        if name in ("no-store", "no-cache"):
            seconds = 0.0
        elif name == "max-age" and value.strip().isdigit() and len(value.strip()) <= 12:
            seconds = float(value.strip())
    return min(max(seconds, MIN_MAX_AGE.total_seconds()), MAX_MAX_AGE.total_seconds())


def _file_signature(path: Path) -> tuple[int, int, int]:
    stat = os.stat(path)
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


class JwksSource:
    """The issuer's key set, from ``url`` or ``file`` (exactly one), refreshed as the module docstring says.

    ``refresh_interval`` is the least time between two fetches (or file looks) made for an unknown key id or after
    a failure. ``clock`` is the monotonic clock the cache runs on (a parameter so tests can move time). Close it
    with :meth:`aclose`.
    """

    __slots__ = (
        "_client",
        "_clock",
        "_due",
        "_file",
        "_file_signature",
        "_generation",
        "_interval",
        "_keys",
        "_last_attempt",
        "_lock",
        "_url",
    )

    def __init__(
        self,
        *,
        url: str | None = None,
        file: Path | None = None,
        refresh_interval: timedelta = timedelta(seconds=30),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (url is None) == (file is None):
            raise ValueError("a JWKS source takes exactly one of url and file")
        self._url = url
        self._file = file
        self._interval = refresh_interval.total_seconds()
        self._clock = clock
        self._client: httpx.AsyncClient | None = None
        if url is not None:
            # trust_env=False: no proxy, .netrc credentials or CA bundle slipped in from the environment.
            self._client = httpx.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS, follow_redirects=False, trust_env=False)
        self._keys: KeySet | None = None
        self._due = 0.0
        self._last_attempt: float | None = None
        self._generation = 0
        self._file_signature: tuple[int, int, int] | None = None
        self._lock = asyncio.Lock()

    @property
    def loaded(self) -> bool:
        """Whether a key set was ever loaded."""
        return self._keys is not None

    @property
    def skipped_keys(self) -> int:
        """How many keys of the current set were skipped as unusable (0 before the first load)."""
        return 0 if self._keys is None else self._keys.skipped

    async def current(self) -> KeySet:
        """The key set, fetched or re-read first when it is due; ``verifier-unavailable`` when none was ever
        loaded."""
        if self._keys is not None and (self._clock() < self._due or self._lock.locked()):
            # Fresh, or being refreshed right now: the cached keys answer without waiting for the refresh.
            return self._keys
        await self._reload(forced=False)
        return self._loaded()

    async def refresh_for_unknown_key(self) -> KeySet:
        """The key set after looking again for a key id it did not hold: a real fetch no more than once per
        ``refresh_interval``, shared by every concurrent caller."""
        await self._reload(forced=True)
        return self._loaded()

    def _loaded(self) -> KeySet:
        if self._keys is None:
            raise AdmissionRefused(AdmissionRefusedReason.VERIFIER_UNAVAILABLE)
        return self._keys

    async def _reload(self, *, forced: bool) -> None:
        generation = self._generation
        async with self._lock:
            if self._generation != generation:
                return  # another caller looked while this one waited: its answer is this one's
            now = self._clock()
            if self._last_attempt is not None and now - self._last_attempt < self._interval:
                return  # looked too recently (the rate limit on unknown key ids and on failures)
            if not forced and self._keys is not None and now < self._due:
                return
            self._last_attempt = now
            self._generation += 1
            try:
                if self._client is not None and self._url is not None:
                    keys, max_age = await self._fetch(self._client, self._url)
                else:
                    assert self._file is not None
                    keys, max_age = await self._read_file(self._file)
            except _JwksUnavailable as failure:
                # Try again after an interval, not on every request; keep serving the keys we have.
                self._due = now + self._interval
                kept = 0 if self._keys is None else len(self._keys)
                _logger.warning("JWKS refresh failed (%s); %d cached keys kept", failure, kept)
                return
            if keys is not self._keys:
                if keys.skipped:
                    _logger.info("JWKS loaded: %d usable keys, %d skipped", len(keys), keys.skipped)
                self._keys = keys
            self._due = now + max_age

    async def _fetch(self, client: httpx.AsyncClient, url: str) -> tuple[KeySet, float]:
        body = bytearray()
        try:
            # identity encoding: the size bound holds on the bytes received, never a decompression multiple.
            headers = {"accept": "application/json", "accept-encoding": "identity"}
            # One budget for the whole fetch: httpx's timeout is per read, which a server dripping bytes would stretch.
            async with asyncio.timeout(FETCH_TIMEOUT_SECONDS):
                async with client.stream("GET", url, headers=headers) as response:
                    if response.status_code != 200:
                        raise _JwksUnavailable("status")
                    if response.headers.get("content-encoding", "identity").lower() != "identity":
                        raise _JwksUnavailable("encoded")
                    length = response.headers.get("content-length")
                    if length is not None and (not length.isdigit() or int(length) > MAX_JWKS_BYTES):
                        raise _JwksUnavailable("too-large")
                    async for chunk in response.aiter_raw():
                        body += chunk
                        if len(body) > MAX_JWKS_BYTES:
                            raise _JwksUnavailable("too-large")
                    max_age = _max_age(response.headers.get("cache-control"))
        except (httpx.HTTPError, TimeoutError):
            raise _JwksUnavailable("unreachable") from None
        return parse_jwks(bytes(body)), max_age

    async def _read_file(self, path: Path) -> tuple[KeySet, float]:
        def read() -> tuple[KeySet | None, tuple[int, int, int]]:
            signature = _file_signature(path)
            if signature == self._file_signature and self._keys is not None:
                return None, signature
            return parse_jwks(read_regular_file(path, limit=MAX_JWKS_BYTES)), signature

        try:
            keys, signature = await asyncio.to_thread(read)
        except (OSError, KeyringFileError):
            raise _JwksUnavailable("unreadable") from None
        if keys is None:
            assert self._keys is not None
            return self._keys, self._interval
        self._file_signature = signature
        return keys, self._interval

    async def aclose(self) -> None:
        """Close the HTTP client (a file source has none)."""
        if self._client is not None:
            await self._client.aclose()

    def __repr__(self) -> str:
        where = "url" if self._file is None else "file"
        return f"JwksSource({where}, <{0 if self._keys is None else len(self._keys)} keys>)"
