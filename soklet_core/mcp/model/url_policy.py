"""URL-mode elicitation rules: a server-owned HTTPS origin, no userinfo, no query or fragment, an opaque handle.

The spec: "use a server-owned HTTPS origin outside development. Put no username, user data, pre-authenticated
bearer capability, or secret in userinfo, query, or fragment. Give the URL an opaque, single-purpose state handle
stored server-side and bind that handle to the verified initiating user." :func:`check_elicitation_url` enforces
the parts a URL's spelling can show; :func:`mint_url_handle` makes the handle; binding it to the user, expiring and
consuming it stay with the application (its repository)::

    handle = mint_url_handle()                      # store server-side: handle -> (user, purpose, expiry)
    url = url_with_handle("https://approve.example.com/mcp/approve", handle)
    # https://approve.example.com/mcp/approve/3q2-7w… : no query, no fragment, no user data

Plain ``http`` is accepted only with ``development=True`` and only to ``localhost``, ``127.0.0.1`` or ``[::1]``.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from typing import Final
from urllib.parse import urlsplit

from .errors import InputRequestError, McpModelErrorReason

__all__ = [
    "DEFAULT_HANDLE_BYTES",
    "LOOPBACK_HOSTS",
    "MIN_HANDLE_BYTES",
    "check_elicitation_url",
    "is_opaque_handle",
    "mint_url_handle",
    "url_with_handle",
]

#: Hosts a development URL may reach over plain HTTP.
LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})
#: The least randomness an opaque handle may carry: 16 bytes, 128 bits.
MIN_HANDLE_BYTES: Final = 16
#: What :func:`mint_url_handle` draws by default: 32 bytes, 256 bits.
DEFAULT_HANDLE_BYTES: Final = 32

# One dot-separated label of a host name; the name is split on "." first, so that no pattern repeats a repetition.
_LABEL: Final = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
_PORT: Final = re.compile(r"[0-9]{1,5}")
# base64url of at least 16 bytes is at least 22 characters.
_HANDLE: Final = re.compile(r"[A-Za-z0-9_-]{22,}")


def _refuse(reason: McpModelErrorReason) -> InputRequestError:
    return InputRequestError(reason)


def _host(authority: str) -> str | None:
    """The host of an authority without userinfo (``[v6]`` kept bracketed), or ``None`` if host or port is bad."""
    if authority.startswith("["):
        close = authority.find("]")
        host, rest = (authority[: close + 1], authority[close + 1 :]) if close > 0 else ("", "")
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return None
    else:
        host, colon, port = authority.partition(":")
        rest = colon + port
        if not all(_LABEL.fullmatch(label) for label in host.split(".")):
            return None
    if rest and not (rest.startswith(":") and _PORT.fullmatch(rest[1:]) and int(rest[1:]) <= 65535):
        return None
    return host


def check_elicitation_url(url: str, *, development: bool = False) -> str:
    """Return ``url`` unchanged if it may be sent in a URL-mode elicitation; raise :class:`InputRequestError`.

    Reasons, in the order checked: ``invalid-url`` (not a str; non-ASCII, whitespace, control characters or
    backslashes; not ``http``/``https``; no host; a malformed host or port), ``url-userinfo`` (any ``@`` in the
    authority), ``url-query-or-fragment`` (any ``?`` or ``#``, even empty), ``insecure-url`` (``http`` outside
    development, or to a non-loopback host). The message never repeats the URL.
    """
    if not isinstance(url, str) or not url.isascii() or any(char <= " " or char in "\x7f\\" for char in url):
        raise _refuse(McpModelErrorReason.INVALID_URL)
    try:
        parts = urlsplit(url)
    except ValueError:  # unbalanced or invalid IPv6 brackets
        raise _refuse(McpModelErrorReason.INVALID_URL) from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not url[len(parts.scheme) :].startswith("://") or not parts.netloc:
        raise _refuse(McpModelErrorReason.INVALID_URL)
    if "@" in parts.netloc:
        raise _refuse(McpModelErrorReason.URL_USERINFO)
    if "?" in url or "#" in url:
        raise _refuse(McpModelErrorReason.URL_QUERY_OR_FRAGMENT)
    host = _host(parts.netloc.lower())
    if host is None:
        raise _refuse(McpModelErrorReason.INVALID_URL)
    if scheme == "http" and not (development and host in LOOPBACK_HOSTS):
        raise _refuse(McpModelErrorReason.INSECURE_URL)
    return url


def mint_url_handle(nbytes: int = DEFAULT_HANDLE_BYTES) -> str:
    """A fresh opaque handle: ``nbytes`` (at least 16) from the OS CSPRNG, base64url without padding.

    The handle must mean nothing by itself: store what it stands for (user, purpose, expiry) server-side.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < MIN_HANDLE_BYTES:
        raise InputRequestError(McpModelErrorReason.WEAK_HANDLE)
    return secrets.token_urlsafe(nbytes)


def is_opaque_handle(handle: object) -> bool:
    """Whether ``handle`` looks like a minted handle: base64url, at least 22 characters (128 bits)."""
    return isinstance(handle, str) and _HANDLE.fullmatch(handle) is not None


def url_with_handle(base_url: str, handle: str, *, development: bool = False) -> str:
    """``base_url`` with ``handle`` appended as the last path segment, checked as by :func:`check_elicitation_url`.

    Raises ``weak-handle`` unless ``handle`` is base64url of at least 128 bits (use :func:`mint_url_handle`).
    """
    if not is_opaque_handle(handle):
        raise InputRequestError(McpModelErrorReason.WEAK_HANDLE)
    check_elicitation_url(base_url, development=development)
    return check_elicitation_url(base_url.rstrip("/") + "/" + handle, development=development)
