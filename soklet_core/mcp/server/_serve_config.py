"""What :func:`~soklet_core.mcp.server.run` runs: the :class:`ServeConfig` value, its parts (the keyring source, the
admin listener), the events a running server reports and :class:`ServeError`, the refusals of a start.

Every value is frozen and checked when it is made: a config that is made is one the server can try to start. What
can only be known by trying (a port taken, a store unreachable, a keyring file refused) is refused by the start
itself, with the layer's own error (:class:`~soklet_core.store.StoreError`,
:class:`~soklet_core.files.KeyringFileError`, :class:`~soklet_core.keys.KeyWrapError`) or a :class:`ServeError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, TypeAlias

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.files import KeyringDocument
from soklet_core.files.fleet_file import check_instance_name
from soklet_core.keys import Fingerprint, KeyWrapper
from soklet_core.keys.fingerprint import CURRENT_FINGERPRINT_VERSION, FINGERPRINT_VERSIONS
from soklet_core.mcp.model.registry import Registry
from soklet_core.mcp.server.http._transport import ASGIApp
from soklet_core.mcp.server.loopback import is_loopback_host
from soklet_core.mcp.server.ops._admin import AdminTokens
from soklet_core.mcp.server.ops._readiness import NotReady
from soklet_core.mcp.server.options import ServerOptions
from soklet_core.mcp.server.resource_metadata import check_resource_url
from soklet_core.protocol import DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME, DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS
from soklet_core.store import DurableStore, StoreUrl

if TYPE_CHECKING:
    # Imported when a config names auth settings (ServeConfig.__post_init__), never at import: the auth package's
    # policies bring PyJWT and an HTTP client, which a server without bearer tokens never needs.
    from soklet_core.mcp.server.auth import IntrospectionSettings, JwtSettings

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_INSTANCE",
    "DEFAULT_PORT",
    "AdminListener",
    "AdminListening",
    "AppFactory",
    "AuthEnabled",
    "AuthSettings",
    "KeyringFile",
    "KeyringFromStore",
    "KeyringLoaded",
    "Listening",
    "ReadinessChanged",
    "ServeConfig",
    "ServeError",
    "ServeErrorReason",
    "ServeEvent",
    "ServeSite",
    "Serving",
    "ShuttingDown",
    "check_admin_listener",
]

#: The address the MCP endpoint (and the admin listener) listens on by default: loopback.
DEFAULT_HOST: Final = "127.0.0.1"
#: The MCP endpoint's port by default (0 picks a free one).
DEFAULT_PORT: Final = 8765
#: The instance name (admin API, metrics, store heartbeats) by default.
DEFAULT_INSTANCE: Final = "soklet"
#: The log levels uvicorn's own loggers take.
_LOG_LEVELS: Final = frozenset({"critical", "error", "warning", "info", "debug", "trace"})
_NO_MOUNTS: Final[Mapping[str, ASGIApp]] = MappingProxyType({})


class ServeErrorReason(ErrorReason):
    """Why a server was not started (or a :class:`ServeConfig` not made). Closed."""

    CANNOT_LISTEN = "cannot-listen", "the MCP endpoint cannot listen on its address and port"
    ADMIN_CANNOT_LISTEN = "admin-cannot-listen", "the admin listener cannot listen on its address and port"
    ADMIN_TLS_UNLOADABLE = "admin-tls-unloadable", "the admin listener's TLS certificate or key cannot be loaded"
    ADMIN_ON_MCP_PORT = "admin-on-mcp-port", "the admin listener never shares the MCP port"
    ADMIN_TLS_PAIR = "admin-tls-pair", "the admin TLS certificate and key go together"
    ADMIN_NEEDS_TLS = "admin-needs-tls", "a non-loopback admin listener needs TLS (or allow_insecure)"
    ADMIN_WITH_STDIO = "admin-with-stdio", "the admin API is an HTTP listener: not with stdio"
    EXPECT_WITH_STDIO = "expect-with-stdio", "readiness is an HTTP answer: no expected fingerprint with stdio"
    STORE_KEYRING_WITH_STDIO = "store-keyring-with-stdio", "a keyring from the store is not served over stdio"
    EXPECT_WITH_STORE_KEYRING = (
        "expect-with-store-keyring",
        "an expected fingerprint is for a keyring file; a store member follows the store's generation",
    )
    TRACING = "tracing", "the OTEL_* variables ask for a trace export soklet cannot make"
    NO_FLEET_KEYRING = "no-fleet-keyring", "the store holds no fleet keyring yet"
    STDIO_UNUSABLE = "stdio-unusable", "standard input or output cannot be used"
    APP_REFERENCE = "app-reference", "an app reference is module:object"
    APP_NO_MODULE = "app-no-module", "the app's module is not in the current folder or the Python path"
    APP_IMPORT_FAILED = "app-import-failed", "importing the app's module failed in its own imports"
    APP_MODULE_RAISED = "app-module-raised", "importing the app's module raised"
    APP_NO_ATTRIBUTE = "app-no-attribute", "the app's module has no such attribute"
    APP_FACTORY_NEEDS_ARGUMENTS = "app-factory-needs-arguments", "the app's factory needs arguments"
    APP_FACTORY_RAISED = "app-factory-raised", "the app's factory raised"
    APP_NOT_A_REGISTRY = "app-not-a-registry", "the app is not a Registry or a function returning one"
    AUTH_WITH_STDIO = "auth-with-stdio", "bearer tokens are HTTP headers: stdio keeps anonymous admission"
    AUTH_NEEDS_AUTHORIZATION_SERVER = (
        "auth-needs-authorization-server",
        "the protected resource metadata names an authorization server: give one, or the token issuer",
    )
    AUTH_NEEDS_RESOURCE = (
        "auth-needs-resource",
        "on a non-loopback address the resource URL clients use cannot be guessed: give it",
    )
    RESOURCE_WITHOUT_AUTH = (
        "resource-without-auth",
        "a resource URL and authorization servers describe bearer-token admission: not without auth",
    )


class ServeError(SokletError):
    """A start refused: ``reason`` (a :class:`ServeErrorReason`), ``detail`` (an exception's type name, the
    operating system's sentence for a socket error, or a :class:`~soklet_core.tracing_setup.TracingSetupError`'s
    message, a variable's name and fixed words: never an exception's text, which could hold anything) and
    ``names`` (the parameters an app factory cannot be called without)."""

    __slots__ = ("detail", "names")

    reason: ServeErrorReason

    def __init__(self, reason: ServeErrorReason, *, detail: str | None = None, names: tuple[str, ...] = ()) -> None:
        self.detail = detail
        self.names = tuple(names)
        suffix = "" if detail is None else f" ({detail})"
        super().__init__(reason, f"{reason.value}: {reason.description}{suffix}")


def check_admin_listener(
    host: str, *, tls_cert: Path | None, tls_key: Path | None, allow_insecure: bool = False
) -> None:
    """The admin listener's own rules, the one home of them: TLS certificate and key together, and TLS on a
    non-loopback address unless ``allow_insecure`` (:class:`ServeError`)."""
    if (tls_cert is None) != (tls_key is None):
        raise ServeError(ServeErrorReason.ADMIN_TLS_PAIR)
    if tls_cert is None and not is_loopback_host(host) and not allow_insecure:
        raise ServeError(ServeErrorReason.ADMIN_NEEDS_TLS)


def _check_port(port: object) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError("a port is an int from 0 to 65535 (0 picks a free one)")


@dataclasses.dataclass(frozen=True, slots=True)
class AdminListener:
    """The admin API's listener (keyring, probes, metrics): its address, its port (0 picks a free one), its bearer
    ``tokens`` and TLS files. A non-loopback ``host`` needs TLS unless ``allow_insecure``."""

    tokens: AdminTokens
    host: str = DEFAULT_HOST
    port: int = 0
    tls_cert: Path | None = None
    tls_key: Path | None = None
    allow_insecure: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.tokens, AdminTokens):
            raise TypeError("tokens takes AdminTokens (read_admin_tokens)")
        _check_port(self.port)
        check_admin_listener(
            self.host, tls_cert=self.tls_cert, tls_key=self.tls_key, allow_insecure=self.allow_insecure
        )


@dataclasses.dataclass(frozen=True, slots=True)
class KeyringFile:
    """The keyring comes from a keyring file, reloaded on SIGHUP and when the file changes. ``kek`` reads an
    encrypted one (its keys unwrapped in memory; a key an admin change adds is wrapped under it too); ``document``
    is the file as already read (the start reads it otherwise)."""

    path: Path
    kek: KeyWrapper | None = None
    document: KeyringDocument | None = None
    allow_insecure_permissions: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.path, Path):
            raise TypeError("path takes a Path")


@dataclasses.dataclass(frozen=True, slots=True)
class KeyringFromStore:
    """The keyring is the store's fleet keyring, wrapped under ``kek``: loaded before anything listens, followed
    while serving, and the instance heartbeats into the store."""

    kek: KeyWrapper


@dataclasses.dataclass(frozen=True, slots=True)
class ServeSite:
    """What an :data:`AppFactory` may build its registry from: the endpoint's base URL (``http://host:port``;
    ``None`` over stdio) and the durable store the server uses (opened)."""

    base_url: str | None
    store: DurableStore


#: How bearer tokens are verified: a JWT policy's settings or an RFC 7662 introspection policy's.
AuthSettings: TypeAlias = "JwtSettings | IntrospectionSettings"


#: An app that needs the running site (its URL, its store): called once, after the listener is bound.
AppFactory: TypeAlias = Callable[[ServeSite], Registry]


@dataclasses.dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything ``soklet serve`` runs, as one value: hand it to :func:`~soklet_core.mcp.server.run`.

    * ``app`` — a :class:`~soklet_core.mcp.Registry`, a ``"module:object"`` reference (the object, or what calling
      it with no argument returns; the current folder importable, as with uvicorn) or an :data:`AppFactory`;
      ``registries`` are merged before it (fixtures) and ``mounts`` served beside it (``McpServer(mounts=...)``).
    * ``keyring`` — :class:`KeyringFile` or :class:`KeyringFromStore`; ``store`` — the durable store's URL (tasks,
      handles, the fleet keyring in store mode), opened before anything listens and closed at the end.
    * ``host``/``port`` — the MCP endpoint (port 0 picks a free one); ``stdio`` — serve over standard input and
      output instead (no admin listener, no expected fingerprint, no store keyring).
    * ``admin`` — the admin listener (:class:`AdminListener`), never on the MCP port; ``instance`` — this instance's
      name; ``fingerprint_version`` — the version the admin API reports; ``expect_fingerprint`` — not ready while
      the keyring's (v2) fingerprint differs.
    * ``auth`` — bearer-token admission over HTTP (:class:`~soklet_core.mcp.server.auth.JwtSettings` or
      :class:`~soklet_core.mcp.server.auth.IntrospectionSettings`; ``None``: every caller anonymous), with its
      RFC 9728 metadata: ``resource`` (default the endpoint's own URL once bound, which needs a loopback ``host``)
      and ``authorization_servers`` (default the settings' issuer). Not with ``stdio``.
    * ``state_lifetime``, ``state_rounds`` — the request-state bounds
      (:class:`~soklet_core.protection.ProtectionConfig`); ``options`` — the server's
      :class:`~soklet_core.mcp.server.ServerOptions` (protocol, HTTP and its limits, sessions, tasks);
      ``log_level`` — uvicorn's loggers (``uvicorn.error``); ``run`` installs no handler and leaves the
      process's logging configuration as the application made it, so uvicorn's lines go wherever its own go.
    * ``trace_from_environment`` — export soklet's spans as the ``OTEL_*`` variables ask
      (:func:`~soklet_core.tracing_setup.configure_from_environment`: off unless an exporter or an OTLP endpoint is
      named), from the start until the server has drained; ``False`` leaves tracing to the application (an SDK
      provider it installs itself is used either way).
    """

    app: Registry | str | AppFactory
    keyring: KeyringFile | KeyringFromStore
    store: StoreUrl
    registries: tuple[Registry, ...] = ()
    mounts: Mapping[str, ASGIApp] = dataclasses.field(default_factory=lambda: _NO_MOUNTS)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    stdio: bool = False
    admin: AdminListener | None = None
    instance: str = DEFAULT_INSTANCE
    fingerprint_version: int = CURRENT_FINGERPRINT_VERSION
    expect_fingerprint: Fingerprint | None = None
    state_lifetime: timedelta = DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME
    state_rounds: int = DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS
    options: ServerOptions = dataclasses.field(default_factory=ServerOptions)
    log_level: str = "info"
    auth: AuthSettings | None = None
    resource: str | None = None
    authorization_servers: tuple[str, ...] = ()
    trace_from_environment: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.app, (Registry, str)) and not callable(self.app):
            raise TypeError("app takes a Registry, a module:object reference or a factory of the site")
        if not isinstance(self.keyring, (KeyringFile, KeyringFromStore)):
            raise TypeError("keyring takes a KeyringFile or a KeyringFromStore")
        if not isinstance(self.store, StoreUrl):
            raise TypeError("store takes a StoreUrl (StoreUrl.parse, sqlite_url)")
        if not all(isinstance(registry, Registry) for registry in self.registries):
            raise TypeError("registries takes Registry values")
        if not isinstance(self.options, ServerOptions):
            raise TypeError("options takes a ServerOptions")
        _check_port(self.port)
        problem = check_instance_name(self.instance)
        if problem is not None:
            raise ValueError(f"instance: {problem}")
        if self.fingerprint_version not in FINGERPRINT_VERSIONS:
            raise ValueError(f"fingerprint_version must be one of {FINGERPRINT_VERSIONS}")
        if self.expect_fingerprint is not None and self.expect_fingerprint.version != CURRENT_FINGERPRINT_VERSION:
            raise ValueError(f"the expected fingerprint must be a v{CURRENT_FINGERPRINT_VERSION} fingerprint")
        if self.log_level not in _LOG_LEVELS:
            raise ValueError(f"log_level is one of {', '.join(sorted(_LOG_LEVELS))}")
        if not isinstance(self.trace_from_environment, bool):
            raise TypeError("trace_from_environment takes a bool")
        if self.stdio:
            if self.admin is not None:
                raise ServeError(ServeErrorReason.ADMIN_WITH_STDIO)
            if self.expect_fingerprint is not None:
                raise ServeError(ServeErrorReason.EXPECT_WITH_STDIO)
            if isinstance(self.keyring, KeyringFromStore):
                raise ServeError(ServeErrorReason.STORE_KEYRING_WITH_STDIO)
        if isinstance(self.keyring, KeyringFromStore) and self.expect_fingerprint is not None:
            raise ServeError(ServeErrorReason.EXPECT_WITH_STORE_KEYRING)
        if self.admin is not None and self.admin.port != 0 and self.admin.port == self.port:
            raise ServeError(ServeErrorReason.ADMIN_ON_MCP_PORT)
        self._check_auth()

    def _check_auth(self) -> None:
        """The bearer-token rules: settings of a known kind, HTTP only, a resource and an authorization server."""
        if self.resource is not None:
            check_resource_url(self.resource, "resource")
        if not isinstance(self.authorization_servers, tuple):
            raise TypeError("authorization_servers takes a tuple of URLs")
        for server in self.authorization_servers:
            check_resource_url(server, "an authorization server")
        if self.auth is None:
            if self.resource is not None or self.authorization_servers:
                raise ServeError(ServeErrorReason.RESOURCE_WITHOUT_AUTH)
            return
        from soklet_core.mcp.server.auth import IntrospectionSettings, JwtSettings  # only when auth is configured

        if not isinstance(self.auth, (JwtSettings, IntrospectionSettings)):
            raise TypeError("auth takes JwtSettings or IntrospectionSettings")
        if self.stdio:
            raise ServeError(ServeErrorReason.AUTH_WITH_STDIO)
        if not self.authorization_servers and self.auth.issuer is None:
            raise ServeError(ServeErrorReason.AUTH_NEEDS_AUTHORIZATION_SERVER)
        if self.resource is None and not is_loopback_host(self.host):
            raise ServeError(ServeErrorReason.AUTH_NEEDS_RESOURCE)

    @property
    def metadata_authorization_servers(self) -> tuple[str, ...]:
        """The authorization servers the RFC 9728 document names: those given, else the settings' issuer."""
        if self.authorization_servers:
            return self.authorization_servers
        issuer = None if self.auth is None else self.auth.issuer
        return () if issuer is None else (issuer,)


# -- what a running server reports (in this order at start; then readiness changes; then the shutdown) ------------


@dataclasses.dataclass(frozen=True, slots=True)
class Listening:
    """The MCP endpoint is bound: its ``url`` (``"stdio"`` over standard input and output) and ``port``."""

    url: str
    port: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class AdminListening:
    """The admin listener is bound at ``url`` (``http``/``https``://host:port) on ``port``."""

    url: str
    port: int


@dataclasses.dataclass(frozen=True, slots=True)
class KeyringLoaded:
    """The keyring the server seals with: its active key id and fingerprint (in the reported version), the fleet
    ``generation`` (store mode; ``None`` for a file) and ``note``, how it stays current (reloads, following)."""

    active_key_id: str
    fingerprint: Fingerprint
    generation: int | None
    note: str


@dataclasses.dataclass(frozen=True, slots=True)
class AuthEnabled:
    """Bearer tokens are required on the MCP endpoint: the policy ``kind`` (``jwt``, ``introspection``), the
    ``issuer`` and ``audience`` checked (``None`` when not checked), the ``resource`` and its RFC 9728
    ``metadata_url``. Never a secret, a key or a token."""

    kind: str
    issuer: str | None
    audience: str | None
    resource: str
    metadata_url: str


@dataclasses.dataclass(frozen=True, slots=True)
class Serving:
    """Every start-up fact has been reported and the reload signal is installed: the server serves now."""


@dataclasses.dataclass(frozen=True, slots=True)
class ReadinessChanged:
    """The first reason the instance is not ready changed (``None``: ready again). Reported on the thread that
    changed it (a file watcher, an admin request)."""

    reason: NotReady | None


@dataclasses.dataclass(frozen=True, slots=True)
class ShuttingDown:
    """A stop was requested (a signal, the end of standard input): running requests get the shutdown grace."""


#: One event of a running server.
ServeEvent: TypeAlias = (
    Listening | AdminListening | AuthEnabled | KeyringLoaded | Serving | ReadinessChanged | ShuttingDown
)
