"""The token policies' settings: every bound and rule of their configuration, checked once when a value is built.

Each check raises ``ValueError`` (or ``TypeError`` for a value of the wrong type) with a fixed message that names
the field and its rule and never repeats the value: settings hold URLs and a client secret, and a refused value
may be a secret pasted into the wrong field.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from soklet_core.mcp.model.scopes import scope_set
from soklet_core.mcp.server.loopback import is_loopback_host

if TYPE_CHECKING:
    from soklet_core.mcp.server.auth._introspection import IntrospectionAdmission
    from soklet_core.mcp.server.auth._jwt import JwtAdmission

__all__ = [
    "MAX_CLAIM_NAME_CHARS",
    "MAX_LEEWAY",
    "MAX_REFRESH_INTERVAL",
    "MIN_REFRESH_INTERVAL",
    "IntrospectionSettings",
    "JwtSettings",
]

#: The most clock skew a policy may forgive on ``exp`` and ``nbf``.
MAX_LEEWAY: Final = timedelta(minutes=5)
#: The bounds of how often a key set may be fetched again for an unknown key (or a key file's change looked for).
MIN_REFRESH_INTERVAL: Final = timedelta(seconds=1)
MAX_REFRESH_INTERVAL: Final = timedelta(hours=1)
#: The longest claim name (``subject_claim``, ``partition_claim``).
MAX_CLAIM_NAME_CHARS: Final = 64
#: The longest configured URL, issuer or audience.
_MAX_URL_CHARS: Final = 2048
#: Introspection's bounds: how long an active answer is reused, how many are kept, how many calls may be in flight.
MAX_CACHE_TTL: Final = timedelta(hours=1)
MAX_CACHE_SIZE: Final = 1_000_000
MAX_CONCURRENT_INTROSPECTIONS: Final = 1024
_MAX_CLIENT_ID_CHARS: Final = 256
_MAX_CLIENT_SECRET_CHARS: Final = 1024


def _check_url(value: object, field: str, *, required: bool = True) -> None:
    """``https://`` with a host, no credentials and no fragment; ``http://`` only to a loopback host."""
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise TypeError(f"{field} takes a URL string")
    rule = f"{field} must be an https:// URL with a host and no user info or fragment (http:// only to loopback)"
    if not value or len(value) > _MAX_URL_CHARS or not value.isprintable() or " " in value:
        raise ValueError(rule)
    try:
        parts = urlsplit(value)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise ValueError(rule) from None
    # User info in a URL would be a credential that repr() and logs print; a fragment is never sent to a server.
    if not host or parts.username is not None or parts.password is not None or parts.fragment or "#" in value:
        raise ValueError(rule)
    scheme = parts.scheme.lower()
    if scheme == "https" or (scheme == "http" and is_loopback_host(host)):
        return
    raise ValueError(rule)


def _check_text(value: object, field: str, *, limit: int = _MAX_URL_CHARS, required: bool = True) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise TypeError(f"{field} takes a string")
    if not value or len(value) > limit or not value.isprintable():
        raise ValueError(f"{field} must be 1-{limit} printable characters")


def _check_claim_name(value: object, field: str, *, required: bool = True) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise TypeError(f"{field} takes a claim name string")
    if not value or len(value) > MAX_CLAIM_NAME_CHARS or not value.isprintable():
        raise ValueError(f"{field} must be a claim name of 1-{MAX_CLAIM_NAME_CHARS} printable characters")


def _check_span(value: object, field: str, low: timedelta, high: timedelta) -> None:
    if not isinstance(value, timedelta):
        raise TypeError(f"{field} takes a timedelta")
    if not low <= value <= high:
        raise ValueError(f"{field} must be from {low.total_seconds():g} s to {high.total_seconds():g} s")


def _check_count(value: object, field: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} takes an int")
    if not low <= value <= high:
        raise ValueError(f"{field} must be from {low} to {high}")


def _scopes(value: object) -> frozenset[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (frozenset, set, list, tuple)):
        raise TypeError("required_scopes takes a frozenset of scope values")
    try:
        return scope_set(value)
    except ValueError:
        # scope_set's message is fixed too; this one names the field.
        raise ValueError(
            "required_scopes must hold RFC 6749 scope-tokens (printable ASCII, no space, '\"' or '\\')"
        ) from None


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
        _check_url(self.issuer, "issuer")
        _check_text(self.audience, "audience")
        if (self.jwks_url is None) == (self.jwks_file is None):
            raise ValueError("exactly one of jwks_url and jwks_file is required")
        _check_url(self.jwks_url, "jwks_url", required=False)
        if self.jwks_file is not None and not isinstance(self.jwks_file, Path):
            raise TypeError("jwks_file takes a pathlib.Path")
        _check_claim_name(self.partition_claim, "partition_claim", required=False)
        _check_claim_name(self.subject_claim, "subject_claim")
        object.__setattr__(self, "required_scopes", _scopes(self.required_scopes))
        _check_span(self.leeway, "leeway", timedelta(0), MAX_LEEWAY)
        _check_span(self.refresh_interval, "refresh_interval", MIN_REFRESH_INTERVAL, MAX_REFRESH_INTERVAL)

    def policy(self) -> JwtAdmission:
        """A :class:`~soklet_core.mcp.server.auth.JwtAdmission` with these settings (close it with ``aclose``)."""
        from soklet_core.mcp.server.auth._jwt import JwtAdmission  # the policy imports these settings

        return JwtAdmission(self)


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
        _check_url(self.introspection_url, "introspection_url")
        _check_text(self.client_id, "client_id", limit=_MAX_CLIENT_ID_CHARS)
        _check_text(self.client_secret, "client_secret", limit=_MAX_CLIENT_SECRET_CHARS)
        _check_url(self.issuer, "issuer", required=False)
        _check_text(self.audience, "audience", required=False)
        _check_claim_name(self.partition_claim, "partition_claim", required=False)
        _check_claim_name(self.subject_claim, "subject_claim")
        object.__setattr__(self, "required_scopes", _scopes(self.required_scopes))
        _check_span(self.leeway, "leeway", timedelta(0), MAX_LEEWAY)
        _check_span(self.cache_ttl, "cache_ttl", timedelta(0), MAX_CACHE_TTL)
        _check_count(self.cache_size, "cache_size", 1, MAX_CACHE_SIZE)
        _check_count(self.max_concurrent, "max_concurrent", 1, MAX_CONCURRENT_INTROSPECTIONS)

    def policy(self) -> IntrospectionAdmission:
        """An :class:`~soklet_core.mcp.server.auth.IntrospectionAdmission` with these settings (close it with
        ``aclose``)."""
        from soklet_core.mcp.server.auth._introspection import IntrospectionAdmission  # it imports these settings

        return IntrospectionAdmission(self)
