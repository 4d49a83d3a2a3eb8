"""Whether a host name or address is the local machine's loopback: the one home of that rule.

A loopback host is where the server allows what it refuses elsewhere: an admin listener without TLS, and plain
``http://`` issuer, JWKS and introspection URLs (for development and tests). The rule is deliberately narrow:
the name ``localhost``, an IPv4 address in ``127.0.0.0/8`` or the IPv6 ``::1``; no resolution, so a name that
merely resolves to a loopback address does not count.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback_host"]


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an IP address without brackets) is ``localhost`` or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
