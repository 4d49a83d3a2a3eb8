"""``McpServer``: one MCP 2026-07-28 server — registry, protection, admission and HTTP settings — and its ASGI app.

>>> from soklet_core.keys import ProtectionKey, ProtectionKeyring
>>> from soklet_core.protection import ProtectionConfig
>>> from soklet_core.mcp import Registry
>>> keyring = ProtectionKeyring.with_active_key(ProtectionKey.generate("dev")).build()
>>> server = (McpServer.builder(Registry.of())
...           .protection_config(ProtectionConfig.with_keyring(keyring).build())
...           .path("/mcp")
...           .build())
>>> app = server.asgi_app()          # serve it hardened: uvicorn_server_class()(uvicorn_config(server)).run()
>>> server.protection_keyring_manager is not None
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Self

from soklet_core import __version__
from soklet_core.json import DEFAULT_REQUEST_BODY_BYTES, MAX_REQUEST_BODY_BYTES, RESPONSE_OUTPUT_CEILING_BYTES
from soklet_core.keys import KeyringManager
from soklet_core.mcp.model.registry import Registry
from soklet_core.mcp.model.results import CacheHint
from soklet_core.protection import ProtectionConfig, RequestStateSealer
from soklet_core.protocol import DEFAULT_ENDPOINT_PATH

from .admission import AdmissionPolicy, AnonymousAdmission
from .dispatcher import (
    DEFAULT_LIST_CACHE_HINT,
    SUPPORTED_PROTOCOL_VERSIONS,
    Dispatcher,
    Interceptor,
    LifecycleCallback,
)
from .http_runner import HttpLimits
from .metrics import ServerMetrics
from .transport import McpAsgiApp

__all__ = ["DEFAULT_ENDPOINT_PATH", "McpServer", "McpServerBuilder"]

#: Where the MCP endpoint listens unless configured.


class McpServer:
    """A configured MCP server. Build it with :meth:`builder`; serve :meth:`asgi_app` with uvicorn.

    The server copies its protection keyring into a live manager (:attr:`protection_keyring_manager`) for
    rotation while running.
    """

    __slots__ = ("_app", "_dispatcher", "_sealer")

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("use McpServer.builder(registry) ... .build()")

    @classmethod
    def builder(cls, registry: Registry) -> McpServerBuilder:
        """A builder serving ``registry``."""
        return McpServerBuilder(registry)

    @classmethod
    def _create(cls, dispatcher: Dispatcher, sealer: RequestStateSealer | None, app: McpAsgiApp) -> McpServer:
        server = object.__new__(cls)
        server._dispatcher = dispatcher
        server._sealer = sealer
        server._app = app
        return server

    _dispatcher: Dispatcher
    _sealer: RequestStateSealer | None
    _app: McpAsgiApp

    @property
    def dispatcher(self) -> Dispatcher:
        """The protocol logic (for other transports and tests)."""
        return self._dispatcher

    @property
    def registry(self) -> Registry:
        """The registrations served."""
        return self._dispatcher.registry

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
        return self._dispatcher.metrics

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


class McpServerBuilder:
    """Collects the configuration of one :class:`McpServer`. Every setter returns the builder."""

    def __init__(self, registry: Registry) -> None:
        if not isinstance(registry, Registry):
            raise TypeError("McpServer.builder takes a Registry")
        self._registry = registry
        self._protection: ProtectionConfig | None = None
        self._admission: AdmissionPolicy = AnonymousAdmission()
        self._path = DEFAULT_ENDPOINT_PATH
        self._hosts: list[str] = []
        self._origins: list[str] = []
        self._body_limit = DEFAULT_REQUEST_BODY_BYTES
        self._output_ceiling = RESPONSE_OUTPUT_CEILING_BYTES
        self._versions: tuple[str, ...] = SUPPORTED_PROTOCOL_VERSIONS
        self._name = "soklet"
        self._version = __version__
        self._instructions: str | None = None
        self._cache_hint = DEFAULT_LIST_CACHE_HINT
        self._interceptor: Interceptor | None = None
        self._lifecycle: list[LifecycleCallback] = []
        self._limits = HttpLimits()
        self._in_thread = True
        self._metrics: ServerMetrics | None = None

    def protection_config(self, config: ProtectionConfig) -> Self:
        """Seal and open FRAMEWORK_PROTECTED state with ``config`` (required if any operation uses that mode)."""
        self._protection = config
        return self

    def admission(self, policy: AdmissionPolicy) -> Self:
        """The admission policy (default: everyone anonymous in partition ``"anonymous"``)."""
        self._admission = policy
        return self

    def path(self, path: str) -> Self:
        """The endpoint path (default ``/mcp``)."""
        self._path = path
        return self

    def allowed_hosts(self, hosts: Iterable[str]) -> Self:
        """``Host`` values allowed besides the loopback names (``name`` or ``name:port``)."""
        self._hosts.extend(hosts)
        return self

    def allowed_origins(self, origins: Iterable[str]) -> Self:
        """``Origin`` values allowed besides loopback origins, e.g. ``https://app.example.com``."""
        self._origins.extend(origins)
        return self

    def max_request_body_bytes(self, limit: int) -> Self:
        """The request body limit: 10 MiB by default, at most 16 MiB."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_REQUEST_BODY_BYTES:
            raise ValueError(f"the request body limit must be between 1 and {MAX_REQUEST_BODY_BYTES} bytes")
        self._body_limit = limit
        return self

    def output_ceiling_bytes(self, limit: int) -> Self:
        """The response output ceiling (default 4 MiB)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ValueError("the output ceiling must be a positive int")
        self._output_ceiling = limit
        return self

    def supported_versions(self, versions: Iterable[str]) -> Self:
        """The protocol versions accepted (default ``("2026-07-28",)``); the first is the preferred one."""
        self._versions = tuple(versions)
        return self

    def server_info(self, name: str, version: str) -> Self:
        """What ``_meta["io.modelcontextprotocol/serverInfo"]`` says on every result."""
        self._name, self._version = name, version
        return self

    def instructions(self, text: str) -> Self:
        """``server/discover`` instructions."""
        self._instructions = text
        return self

    def list_cache_hint(self, hint: CacheHint) -> Self:
        """Cache hint of discovery and list results (default 300,000 ms, public)."""
        self._cache_hint = hint
        return self

    def interceptor(self, interceptor: Interceptor) -> Self:
        """Wrap every handler call: ``await interceptor(context, call_handler)``."""
        self._interceptor = interceptor
        return self

    def lifecycle_callback(self, callback: LifecycleCallback) -> Self:
        """Add ``callback(event, context)``, called with ``"admitted"`` and ``"finished"``."""
        self._lifecycle.append(callback)
        return self

    def shutdown_grace_seconds(self, seconds: float) -> Self:
        """How long a stop waits for running requests before cancelling them with a 503 (default 10 s).

        Shorthand for replacing ``shutdown_grace_seconds`` in :meth:`http_limits`.
        """
        self._limits = dataclasses.replace(self._limits, shutdown_grace_seconds=seconds)
        return self

    def http_limits(self, limits: HttpLimits) -> Self:
        """The HTTP limits and timeouts (head size, header/body/keep-alive timeouts, connection cap, grace).

        The app enforces the body timeout and the grace; ``soklet_core.mcp.uvicorn_config(server)`` hands the rest
        to uvicorn. Defaults: :class:`~soklet_core.mcp.HttpLimits`.
        """
        if not isinstance(limits, HttpLimits):
            raise TypeError("http_limits takes an HttpLimits")
        self._limits = limits
        return self

    def sync_handlers_in_thread(self, enabled: bool) -> Self:
        """Run ``def`` handlers in a worker thread (the default) or, when ``False``, all on the event loop.

        A single handler that never blocks says so itself with ``blocking=False`` on its registration; this
        switch overrides every registration. Turn it off only when every sync handler returns quickly without
        blocking (no I/O, no sleeps): the thread hop is then pure overhead, but one blocking handler would stall
        every request.
        """
        self._in_thread = enabled
        return self

    def metrics(self, metrics: ServerMetrics) -> Self:
        """Count requests, ``input_required`` results, seals and opens in ``metrics`` (default: not counted)."""
        if not isinstance(metrics, ServerMetrics):
            raise TypeError("metrics takes a ServerMetrics")
        self._metrics = metrics
        return self

    def build(self) -> McpServer:
        """The server. Raises ``ValueError`` if a FRAMEWORK_PROTECTED operation has no protection config."""
        sealer = None if self._protection is None else RequestStateSealer.for_server(self._protection)
        dispatcher = Dispatcher(
            registry=self._registry,
            sealer=sealer,
            admission=self._admission,
            supported_versions=self._versions,
            server_name=self._name,
            server_version=self._version,
            instructions=self._instructions,
            list_cache_hint=self._cache_hint,
            interceptor=self._interceptor,
            lifecycle=self._lifecycle,
            sync_handlers_in_thread=self._in_thread,
            metrics=self._metrics,
        )
        app = McpAsgiApp(
            dispatcher,
            path=self._path,
            allowed_hosts=self._hosts,
            allowed_origins=self._origins,
            max_request_body_bytes=self._body_limit,
            output_ceiling_bytes=self._output_ceiling,
            http_limits=self._limits,
        )
        manager = None if sealer is None else sealer.keyring_manager
        if self._metrics is not None and manager is not None:
            self._metrics.watch_keyring(manager.snapshot)  # the admin listener may watch its own view instead
        return McpServer._create(dispatcher, sealer, app)
