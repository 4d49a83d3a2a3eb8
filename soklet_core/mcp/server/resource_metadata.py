"""OAuth 2.0 Protected Resource Metadata (RFC 9728): what an MCP client reads to find where to get a token.

An MCP server that admits callers by access token is an OAuth resource server. A client refused with 401 reads
the ``resource_metadata`` URL of the ``WWW-Authenticate: Bearer`` challenge, fetches the document there, and
learns the resource's identifier (the audience its token must name, RFC 8707), the authorization servers that
issue such tokens, the scopes and how a token is sent. :class:`ProtectedResource` is that document as a value:
the transport serves it (``GET /.well-known/oauth-protected-resource`` and the path-suffixed form of RFC 9728
§3.1) and the engine names its URL in every challenge.

>>> meta = ProtectedResource(
...     resource="https://mcp.example.com/mcp", authorization_servers=("https://auth.example.com/realms/acme",)
... )
>>> meta.metadata_url
'https://mcp.example.com/.well-known/oauth-protected-resource/mcp'
>>> meta.metadata_paths
('/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from soklet_core.json import WirePlain, encode_wire
from soklet_core.mcp.model.scopes import scope_set
from soklet_core.mcp.server.loopback import is_loopback_host

__all__ = ["WELL_KNOWN_PATH", "ProtectedResource", "check_resource_url"]

#: RFC 9728 §3: the well-known URI suffix of a protected resource's metadata.
WELL_KNOWN_PATH: Final = "/.well-known/oauth-protected-resource"
#: The longest URL a metadata document names (a resource, an authorization server).
_MAX_URL_CHARS: Final = 2048
#: The most authorization servers one document names.
_MAX_AUTHORIZATION_SERVERS: Final = 16
#: Characters a URL may hold here: printable ASCII without space, quotes, backslash or angle brackets, so the URL
#: can be written inside a quoted challenge parameter as is.
_URL_CHARS: Final = frozenset(chr(code) for code in range(0x21, 0x7F)) - frozenset('"\\<>`{}|^')


def check_resource_url(url: object, what: str) -> str:
    """``url`` when it is an absolute ``https://`` URL (``http://`` only to a loopback host: development and tests)
    without a fragment; ``ValueError`` naming ``what`` (never the value) otherwise. The one home of that rule for
    every URL the authorization settings take."""
    if not isinstance(url, str) or not 0 < len(url) <= _MAX_URL_CHARS or not _URL_CHARS.issuperset(url):
        raise ValueError(f"{what} must be an absolute URL of at most {_MAX_URL_CHARS} printable characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a malformed port raises here, not later
    except ValueError:
        raise ValueError(f"{what} must be an absolute URL") from None
    if not host or parts.fragment or parts.username is not None or parts.password is not None:
        raise ValueError(f"{what} must be an absolute URL with a host, no credentials and no fragment")
    if parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(host)):
        return url
    raise ValueError(f"{what} must use https:// (http:// only to a loopback host)")


@dataclass(frozen=True, slots=True)
class ProtectedResource:
    """The RFC 9728 metadata of one MCP endpoint.

    * ``resource`` — the endpoint's canonical URL (``https://mcp.example.com/mcp``): the audience tokens for it
      carry, and the base of the metadata URL;
    * ``authorization_servers`` — the issuers of its tokens (at least one; the JWT issuer by default);
    * ``scopes_supported`` — the scopes a client may ask for (default: none listed);
    * ``resource_name`` — a human-readable name (optional).

    Tokens are accepted in the ``Authorization`` header only (``bearer_methods_supported: ["header"]``): a token in
    a query string ends up in logs.
    """

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: frozenset[str] = field(default=frozenset())
    resource_name: str | None = None

    def __post_init__(self) -> None:
        check_resource_url(self.resource, "the resource")
        servers: object = self.authorization_servers
        if not isinstance(servers, (tuple, list)) or not 0 < len(servers) <= _MAX_AUTHORIZATION_SERVERS:
            raise ValueError(f"a protected resource names 1-{_MAX_AUTHORIZATION_SERVERS} authorization servers")
        object.__setattr__(
            self, "authorization_servers", tuple(check_resource_url(url, "an authorization server") for url in servers)
        )
        object.__setattr__(self, "scopes_supported", scope_set(self.scopes_supported))
        name = self.resource_name
        if name is not None and (not isinstance(name, str) or not 0 < len(name) <= 200 or not name.isprintable()):
            raise ValueError("resource_name must be 1-200 printable characters")

    @property
    def metadata_paths(self) -> tuple[str, ...]:
        """The paths the document is served at: the path-suffixed form first (RFC 9728 §3.1: the well-known suffix
        inserted before the resource's path), then the root form MCP clients fall back to."""
        path = urlsplit(self.resource).path.rstrip("/")
        return (WELL_KNOWN_PATH + path, WELL_KNOWN_PATH) if path else (WELL_KNOWN_PATH,)

    @property
    def metadata_url(self) -> str:
        """The URL of the document, as named in the ``resource_metadata`` parameter of every challenge."""
        parts = urlsplit(self.resource)
        return f"{parts.scheme}://{parts.netloc}{self.metadata_paths[0]}"

    def document(self) -> bytes:
        """The metadata document as JSON bytes (RFC 9728 §2)."""
        members: dict[str, WirePlain] = {
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ("header",),
        }
        if self.scopes_supported:
            members["scopes_supported"] = tuple(sorted(self.scopes_supported))
        if self.resource_name is not None:
            members["resource_name"] = self.resource_name
        return encode_wire(members)
