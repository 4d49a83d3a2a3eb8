"""``McpServer``: one MCP server (2026-07-28 and the 2025 era) — registry, options, protection, admission — and its
ASGI app.

>>> from soklet_core.keys import ProtectionKey, ProtectionKeyring
>>> from soklet_core.protection import ProtectionConfig
>>> from soklet_core.mcp import HttpOptions, Registry, ServerOptions
>>> keyring = ProtectionKeyring(ProtectionKey.generate("dev"))
>>> options = ServerOptions(http=HttpOptions(path="/mcp"))
>>> server = McpServer(Registry(), options=options, protection=ProtectionConfig(keyring=keyring))
>>> app = server.asgi_app()          # serve it hardened: uvicorn_server_class()(uvicorn_config(server)).run()
>>> server.protection_keyring_manager is not None
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

from soklet_core.keys import KeyringManager
from soklet_core.mcp.model.registry import Registry
from soklet_core.mcp.server.admission import AdmissionPolicy, AnonymousAdmission
from soklet_core.mcp.server.durable._tasks import TaskManager
from soklet_core.mcp.server.engine import Engine, Interceptor, LifecycleCallback
from soklet_core.mcp.server.http._transport import ASGIApp, McpAsgiApp
from soklet_core.mcp.server.legacy._engine import LegacyProtocol
from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.mcp.server.ops._readiness import Readiness
from soklet_core.mcp.server.options import HttpLimits, ProtocolEras, ServerOptions
from soklet_core.mcp.server.resource_metadata import ProtectedResource
from soklet_core.protection import ProtectionConfig, RequestStateSealer
from soklet_core.protocol import DEFAULT_ENDPOINT_PATH
from soklet_core.store import DurableStore

__all__ = ["DEFAULT_ENDPOINT_PATH", "McpServer"]

_NO_MOUNTS: Final[Mapping[str, ASGIApp]] = MappingProxyType({})
_DEFAULT_OPTIONS: Final = ServerOptions()


class McpServer:
    """A configured MCP server: ``McpServer(registry, options=ServerOptions(...), protection=...)``; serve
    :meth:`asgi_app` with uvicorn.

    Every tunable comes from ``options`` (:class:`~soklet_core.mcp.server.ServerOptions`: its ``protocol``,
    ``http``, ``sessions`` and ``tasks`` groups, each validated when built; docs/server.md has the table of every
    option, its default and bounds). The collaborators are keyword arguments, each with a default:

    * ``protection`` — seal and open FRAMEWORK_PROTECTED state with this config (required if any operation uses
      that mode: ``ValueError`` otherwise). The server copies its keyring into a live manager
      (:attr:`protection_keyring_manager`) for rotation while running.
    * ``admission`` — the admission policy (default: everyone anonymous in partition ``"anonymous"``); the
      token-verifying ones are in :mod:`soklet_core.mcp.server.auth`.
    * ``protected_resource`` — the endpoint's RFC 9728 metadata (:class:`~.resource_metadata.ProtectedResource`):
      served at ``/.well-known/oauth-protected-resource[/path]`` and named (``resource_metadata=``) in every
      ``WWW-Authenticate`` challenge, so that a refused MCP client finds where to get a token.
    * ``store`` — the durable store (:func:`soklet_core.store.open_store`) tasks live in: with it the server offers
      the tasks extension (:attr:`task_manager`, advertised in ``server/discover``, tuned by ``options.tasks``);
      tools with task support need it (``ValueError`` otherwise). The store is opened on first use; its owner
      closes it (after ``await server.task_manager.close()``). Served, the task manager runs orphaned steps and
      purges expired tasks on its own.
    * ``metrics`` — count requests, ``input_required`` results, seals and opens here (default: not counted).
    * ``interceptor`` — wraps every handler call: ``await interceptor(context, call_handler)``.
    * ``lifecycle_callbacks`` — each called ``callback(event, context)`` with ``"admitted"`` and ``"finished"``.
    * ``mounts`` — path prefix (``"/link/"``: starts and ends with ``/``, outside the endpoint path) → a plain
      ASGI 3 app that answers every request under that prefix, after the ``Host``/``Origin`` checks and the
      shutdown drain check (the scope is passed unchanged, full path included; mounts get no lifespan events).
    * ``readiness`` — a :class:`~.ops.Readiness`: while it says not ready, the endpoint answers every request 503
      with ``Retry-After`` (JSON-RPC -32603) before reading its body (default: always ready).
    """

    __slots__ = ("_app", "_engine", "_legacy", "_options", "_sealer", "_tasks")

    def __init__(
        self,
        registry: Registry,
        *,
        options: ServerOptions = _DEFAULT_OPTIONS,
        protection: ProtectionConfig | None = None,
        admission: AdmissionPolicy | None = None,
        protected_resource: ProtectedResource | None = None,
        store: DurableStore | None = None,
        metrics: ServerMetrics | None = None,
        interceptor: Interceptor | None = None,
        lifecycle_callbacks: Iterable[LifecycleCallback] = (),
        mounts: Mapping[str, ASGIApp] = _NO_MOUNTS,
        readiness: Readiness | None = None,
    ) -> None:
        if not isinstance(registry, Registry):
            raise TypeError("McpServer takes a Registry")
        if not isinstance(options, ServerOptions):
            raise TypeError("options takes a ServerOptions")
        if metrics is not None and not isinstance(metrics, ServerMetrics):
            raise TypeError("metrics takes a ServerMetrics")
        protocol, http, sessions = options.protocol, options.http, options.sessions
        sealer = None if protection is None else RequestStateSealer(protection)
        self._options = options
        self._tasks = None if store is None else TaskManager(store, registry=registry, options=options.tasks)
        self._engine = Engine(
            registry=registry,
            sealer=sealer,
            protocol=protocol,
            admission=admission if admission is not None else AnonymousAdmission(),
            interceptor=interceptor,
            lifecycle=list(lifecycle_callbacks),
            metrics=metrics,
            tasks=self._tasks,
            protected_resource=protected_resource,
        )
        self._legacy = LegacyProtocol(self._engine, eras=protocol.eras, sessions=sessions, endpoint_path=http.path)
        self._app = McpAsgiApp(
            self._engine,
            http=http,
            legacy=self._legacy,
            mounts=mounts,
            readiness=readiness,
        )
        self._sealer = sealer
        manager = None if sealer is None else sealer.keyring_manager
        if metrics is not None and manager is not None:
            metrics.watch_keyring(manager.snapshot)  # the admin listener may watch its own view instead

    @property
    def options(self) -> ServerOptions:
        """The options this server was built with."""
        return self._options

    @property
    def engine(self) -> Engine:
        """The transport-neutral engine (``engine.call(Call, progress) -> Outcome``), for other transports,
        library callers and tests."""
        return self._engine

    @property
    def legacy_protocol(self) -> LegacyProtocol:
        """The 2025-era engine of this server, with its session table (the stdio transport drives the same one)."""
        return self._legacy

    @property
    def protocol_eras(self) -> ProtocolEras:
        """Which protocol eras this server speaks."""
        return self._legacy.eras

    @property
    def registry(self) -> Registry:
        """The registrations served."""
        return self._engine.registry

    @property
    def task_manager(self) -> TaskManager | None:
        """The tasks extension's manager (``None`` without a store)."""
        return self._tasks

    @property
    def store(self) -> DurableStore | None:
        """The durable store tasks live in (``None``: none)."""
        return None if self._tasks is None else self._tasks.store

    @property
    def sealer(self) -> RequestStateSealer | None:
        """The framework-state sealer, or ``None`` without a protection config."""
        return self._sealer

    @property
    def protection_keyring_manager(self) -> KeyringManager | None:
        """The live keyring of this server (stage, activate, remove, snapshot), for a keyring config."""
        return None if self._sealer is None else self._sealer.keyring_manager

    @property
    def metrics(self) -> ServerMetrics | None:
        """Where this server counts requests, seals and opens (rendered by the admin ``GET /metrics``)."""
        return self._engine.metrics

    @property
    def readiness(self) -> Readiness | None:
        """What holds the endpoint back while the instance is not ready (``None``: always ready)."""
        return self._app.readiness

    @property
    def path(self) -> str:
        """The normalized endpoint path."""
        return self._app.path

    @property
    def http_limits(self) -> HttpLimits:
        """The HTTP limits and timeouts the server was built with."""
        return self._app.http_limits

    def asgi_app(self) -> McpAsgiApp:
        """The ASGI 3 application (the same instance every time)."""
        return self._app
