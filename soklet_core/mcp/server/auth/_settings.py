"""The token policies' settings rules: every bound of their configuration and the checks the settings run once.

:class:`~soklet_core.mcp.server.auth.JwtSettings` and :class:`~soklet_core.mcp.server.auth.IntrospectionSettings`
live beside the policy each builds (``settings.policy()``: a settings module importing the policies would be an
import circle); what they check, they check here. Each check raises ``ValueError`` (or ``TypeError`` for a value of
the wrong type) with a fixed message that names the field and its rule and never repeats the value: settings hold
URLs and a client secret, and a refused value may be a secret pasted into the wrong field. URLs are held to
:func:`~soklet_core.mcp.server.resource_metadata.check_resource_url`, the one home of the authorization URL rule
(``https://``, or ``http://`` to a loopback host for development and tests).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from soklet_core.mcp.model.scopes import scope_set
from soklet_core.mcp.server.resource_metadata import check_resource_url

__all__ = [
    "MAX_CACHE_SIZE",
    "MAX_CACHE_TTL",
    "MAX_CLAIM_NAME_CHARS",
    "MAX_CLIENT_ID_CHARS",
    "MAX_CLIENT_SECRET_CHARS",
    "MAX_CONCURRENT_INTROSPECTIONS",
    "MAX_LEEWAY",
    "MAX_REFRESH_INTERVAL",
    "MAX_TEXT_CHARS",
    "MIN_REFRESH_INTERVAL",
    "check_claim_name",
    "check_count",
    "check_span",
    "check_text",
    "check_url",
    "required_scope_set",
]

#: The most clock skew a policy may forgive on ``exp`` and ``nbf``.
MAX_LEEWAY: Final = timedelta(minutes=5)
#: The bounds of how often a key set may be fetched again for an unknown key (or a key file's change looked for).
MIN_REFRESH_INTERVAL: Final = timedelta(seconds=1)
MAX_REFRESH_INTERVAL: Final = timedelta(hours=1)
#: The longest claim name (``subject_claim``, ``partition_claim``).
MAX_CLAIM_NAME_CHARS: Final = 64
#: The longest audience.
MAX_TEXT_CHARS: Final = 2048
#: Introspection's bounds: how long an active answer is reused, how many are kept, how many calls may be in flight.
MAX_CACHE_TTL: Final = timedelta(hours=1)
MAX_CACHE_SIZE: Final = 1_000_000
MAX_CONCURRENT_INTROSPECTIONS: Final = 1024
#: The longest client id and client secret.
MAX_CLIENT_ID_CHARS: Final = 256
MAX_CLIENT_SECRET_CHARS: Final = 1024


def check_url(value: object, field: str, *, required: bool = True) -> None:
    """``value`` is an authorization URL (``None`` too when not ``required``); ``ValueError`` naming ``field``."""
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise TypeError(f"{field} takes a URL string")
    check_resource_url(value, field)


def check_text(value: object, field: str, *, limit: int = MAX_TEXT_CHARS, required: bool = True) -> None:
    """``value`` is 1 to ``limit`` printable characters (``None`` too when not ``required``)."""
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise TypeError(f"{field} takes a string")
    if not value or len(value) > limit or not value.isprintable():
        raise ValueError(f"{field} must be 1-{limit} printable characters")


def check_claim_name(value: object, field: str, *, required: bool = True) -> None:
    """``value`` names a claim: 1 to :data:`MAX_CLAIM_NAME_CHARS` printable characters."""
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise TypeError(f"{field} takes a claim name string")
    if not value or len(value) > MAX_CLAIM_NAME_CHARS or not value.isprintable():
        raise ValueError(f"{field} must be a claim name of 1-{MAX_CLAIM_NAME_CHARS} printable characters")


def check_span(value: object, field: str, low: timedelta, high: timedelta) -> None:
    """``value`` is a ``timedelta`` from ``low`` to ``high``."""
    if not isinstance(value, timedelta):
        raise TypeError(f"{field} takes a timedelta")
    if not low <= value <= high:
        raise ValueError(f"{field} must be from {low.total_seconds():g} s to {high.total_seconds():g} s")


def check_count(value: object, field: str, low: int, high: int) -> None:
    """``value`` is an ``int`` (not a ``bool``) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} takes an int")
    if not low <= value <= high:
        raise ValueError(f"{field} must be from {low} to {high}")


def required_scope_set(value: object) -> frozenset[str]:
    """``required_scopes`` as a frozenset of RFC 6749 scope-tokens (any collection of them, never one string)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (frozenset, set, list, tuple)):
        raise TypeError("required_scopes takes a frozenset of scope values")
    try:
        return scope_set(value)
    except ValueError:
        # scope_set's message is fixed too; this one names the field.
        raise ValueError(
            "required_scopes must hold RFC 6749 scope-tokens (printable ASCII, no space, '\"' or '\\')"
        ) from None
