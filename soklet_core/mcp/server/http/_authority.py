"""Strict ``Host`` and ``Origin`` values (hand-written RFC 9112/3986/6454 parsers, no regular expressions): what the
transport checks before it reads a body, and what ``soklet serve --allowed-host/--allowed-origin`` accept.

>>> parse_authority("LocalHost:8080")
('localhost', 8080)
>>> parse_origin("https://[::1]")
('https', '[::1]', None)
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Final

from soklet_core.errors import SokletError

__all__ = [
    "HOSTS_REMEMBERED",
    "LOCAL_HOSTS",
    "MAX_PORT",
    "AllowedAuthorities",
    "MalformedAuthority",
    "parse_authority",
    "parse_origin",
]

#: Host names always allowed in ``Host`` and ``Origin`` (with any port).
LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})

_ALPHA: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS: Final = frozenset("0123456789")
_HEXDIGITS: Final = _DIGITS | frozenset("abcdefABCDEF")
#: RFC 3986 reg-name characters besides pct-encoded triplets: unreserved and sub-delims.
_REG_NAME: Final = _ALPHA | _DIGITS | frozenset("-._~!$&'()*+,;=")
_SCHEME: Final = _ALPHA | _DIGITS | frozenset("+-.")
#: The largest TCP port.
MAX_PORT: Final = 65535
_MAX_PORT_DIGITS: Final = 5


class MalformedAuthority(SokletError, ValueError):
    """A ``Host`` or ``Origin`` value that is not well formed (the message is fixed: no input is echoed).

    ``message`` is one of three fixed phrases (``malformed host``, ``malformed port``, ``malformed origin``);
    there is no reason enum (``reason`` is ``None``) because the transport answers every one alike.
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(None, message)


def _reg_name(text: str) -> str:
    index = 0
    while index < len(text):
        char = text[index]
        if char == "%":
            if index + 2 >= len(text) or text[index + 1] not in _HEXDIGITS or text[index + 2] not in _HEXDIGITS:
                raise MalformedAuthority("malformed host")
            index += 3
        elif char in _REG_NAME:
            index += 1
        else:
            raise MalformedAuthority("malformed host")
    return text.lower()


def parse_authority(text: str) -> tuple[str, int | None]:
    """``uri-host [":" port]`` (RFC 9112 ``Host``, RFC 3986 ``authority`` without userinfo) → (host, port).

    The host is lower-cased; an IPv6 literal is returned bracketed in its compressed form (``[::1]``). A zone id,
    IPvFuture, an empty host, an empty port, a port that is not 1–5 ASCII digits or above :data:`MAX_PORT`, and
    anything after the host that is not ``:port`` raise :class:`MalformedAuthority`.
    """
    if text.startswith("["):
        end = text.find("]")
        literal = text[1:end] if end > 0 else ""
        if not literal or "%" in literal:
            raise MalformedAuthority("malformed host")
        try:
            host = f"[{ipaddress.IPv6Address(literal).compressed}]"
        except ValueError:
            raise MalformedAuthority("malformed host") from None
        rest = text[end + 1 :]
    else:
        colon = text.find(":")
        name, rest = (text, "") if colon < 0 else (text[:colon], text[colon:])
        if not name:
            raise MalformedAuthority("malformed host")
        host = _reg_name(name)
    if not rest:
        return host, None
    digits = rest[1:]
    if rest[0] != ":" or not 0 < len(digits) <= _MAX_PORT_DIGITS or not _DIGITS.issuperset(digits):
        raise MalformedAuthority("malformed port")
    port = int(digits)
    if port > MAX_PORT:
        raise MalformedAuthority("malformed port")
    return host, port


def parse_origin(text: str) -> tuple[str, str, int | None]:
    """A serialized origin (RFC 6454: ``scheme "://" host [":" port]``, nothing else) → (scheme, host, port).

    Userinfo, a path (even ``/``), a query or a fragment, ``null`` and anything else raise
    :class:`MalformedAuthority`.
    """
    separator = text.find("://")
    scheme = text[:separator] if separator > 0 else ""
    if not scheme or scheme[0] not in _ALPHA or not _SCHEME.issuperset(scheme):
        raise MalformedAuthority("malformed origin")
    host, port = parse_authority(text[separator + 3 :])
    return scheme.lower(), host, port


#: How many distinct ``Host`` values an :class:`AllowedAuthorities` remembers the answer for.
HOSTS_REMEMBERED: Final = 64


class AllowedAuthorities:
    """The ``Host`` and ``Origin`` an endpoint accepts: the loopback names with any port, plus the configured ones
    (``ValueError`` for a configured value that does not parse)."""

    __slots__ = ("_hosts", "_hosts_seen", "_origins")

    def __init__(self, allowed_hosts: Iterable[str], allowed_origins: Iterable[str]) -> None:
        try:
            self._hosts = frozenset(parse_authority(host.strip()) for host in allowed_hosts)
            self._origins = frozenset(parse_origin(origin.strip()) for origin in allowed_origins)
        except MalformedAuthority:
            raise ValueError("allowed hosts are host[:port] and allowed origins scheme://host[:port]") from None
        self._hosts_seen: dict[str, tuple[int, str] | None] = {}

    def host_status(self, values: list[str]) -> tuple[int, str] | None:
        """``None`` when the single ``Host`` is allowed, else (400 malformed or repeated | 403 not allowed, reason)."""
        if len(values) != 1:
            return 400, "host-count"
        value = values[0]
        if value in self._hosts_seen:
            return self._hosts_seen[value]
        try:
            host, port = parse_authority(value)
        except MalformedAuthority:
            return 400, "host-malformed"
        status: tuple[int, str] | None = (
            None if host in LOCAL_HOSTS or (host, None) in self._hosts or (host, port) in self._hosts else (403, "host")
        )
        # A server hears the same few Host values on every request; the answers are remembered, boundedly (the
        # values are client input: a flood of distinct ones only empties the memo).
        if len(self._hosts_seen) >= HOSTS_REMEMBERED:
            self._hosts_seen.clear()
        self._hosts_seen[value] = status
        return status

    def origin_status(self, values: list[str]) -> tuple[int, str] | None:
        """``None`` when there is no ``Origin`` or it is allowed; 400 for several, 403 malformed or not allowed."""
        if not values:
            return None
        if len(values) > 1:
            return 400, "origin-count"
        try:
            origin = parse_origin(values[0])
        except MalformedAuthority:
            return 403, "origin"
        scheme, host, _port = origin
        if origin in self._origins or (scheme in ("http", "https") and host in LOCAL_HOSTS):
            return None
        return 403, "origin"
