"""``McpServer``: one MCP server (2026-07-28 and the 2025 era) — registry, protection, admission, HTTP settings — and
its ASGI app.

>>> from soklet_core.keys import ProtectionKey, ProtectionKeyring
>>> from soklet_core.protection import ProtectionConfig
>>> from soklet_core.mcp import Registry
>>> keyring = ProtectionKeyring(ProtectionKey.generate("dev"))
>>> server = McpServer(Registry(), protection=ProtectionConfig(keyring=keyring), path="/mcp")
>>> app = server.asgi_app()          # serve it hardened: uvicorn_server_class()(uvicorn_config(server)).run()
>>> server.protection_keyring_manager is not None
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

from soklet_core import __version__
from soklet_core.json import DEFAULT_REQUEST_BODY_BYTES, MAX_REQUEST_BODY_BYTES, RESPONSE_OUTPUT_CEILING_BYTES
from soklet_core.keys import KeyringManager
from soklet_core.mcp.model.registry import Registry
from soklet_core.mcp.model.results import CacheHint
from soklet_core.mcp.server._admission import AdmissionPolicy, AnonymousAdmission
from soklet_core.mcp.server.durable._tasks import (
    DEFAULT_POLL_INTERVAL_MS,
    DEFAULT_TASK_TTL_MS,
    MAX_STORED_TASK_BYTES_PER_PARTITION,
    MAX_STORED_TASKS_PER_PARTITION,
    TaskManager,
)
from soklet_core.mcp.server.engine._dispatcher import (
    DEFAULT_LIST_CACHE_HINT,
    DEFAULT_SERVER_NAME,
    SUPPORTED_PROTOCOL_VERSIONS,
    Dispatcher,
    Interceptor,
    LifecycleCallback,
)
from soklet_core.mcp.server.http._runner import HttpLimits
from soklet_core.mcp.server.http._transport import ASGIApp, McpAsgiApp
from soklet_core.mcp.server.legacy._engine import DEFAULT_INPUT_TIMEOUT_SECONDS, LegacyProtocol, ProtocolEras
from soklet_core.mcp.server.legacy._sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_SECONDS,
    SessionTable,
)
from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.mcp.server.ops._readiness import Readiness
from soklet_core.protection import ProtectionConfig, RequestStateSealer
from soklet_core.protocol import DEFAULT_ENDPOINT_PATH
from soklet_core.store import DurableStore

__all__ = ["DEFAULT_ENDPOINT_PATH", "McpServer"]

_NO_MOUNTS: Final[Mapping[str, ASGIApp]] = MappingProxyType({})


class McpServer:
    """A configured MCP server: ``McpServer(registry, protection=..., path=..., ...)``; serve :meth:`asgi_app`
    with uvicorn.

    Every option is keyword-only and has a default:

    * ``protection`` — seal and open FRAMEWORK_PROTECTED state with this config (required if any operation uses
      that mode: ``ValueError`` otherwise). The server copies its keyring into a live manager
      (:attr:`protection_keyring_manager`) for rotation while running.
    * ``admission`` — the admission policy (default: everyone anonymous in partition ``"anonymous"``).
    * ``path`` — the endpoint path (default ``/mcp``).
    * ``allowed_hosts`` — ``Host`` values allowed besides the loopback names (``name`` or ``name:port``);
      ``allowed_origins`` — ``Origin`` values allowed besides loopback origins (``https://app.example.com``).
    * ``max_request_body_bytes`` — 10 MiB by default, at most 16 MiB; ``output_ceiling_bytes`` — the response
      output ceiling (default 4 MiB).
    * ``supported_versions`` — the protocol versions accepted (default ``("2026-07-28",)``), preferred first.
    * ``server_name``, ``server_version`` — what ``_meta["io.modelcontextprotocol/serverInfo"]`` says on every
      result; ``instructions`` — the ``server/discover`` instructions.
    * ``list_cache_hint`` — cache hint of discovery and list results (default 60,000 ms, private).
    * ``interceptor`` — wraps every handler call: ``await interceptor(context, call_handler)``.
    * ``lifecycle_callbacks`` — each called ``callback(event, context)`` with ``"admitted"`` and ``"finished"``.
    * ``http_limits`` — head size, header/body/keep-alive timeouts, connection cap, shutdown grace
      (:class:`~soklet_core.mcp.HttpLimits`). The app enforces the body timeout and the grace;
      ``uvicorn_config(server)`` hands the rest to uvicorn.
    * ``sync_handlers_in_thread`` — run ``def`` handlers in a worker thread (the default) or, when ``False``, all
      on the event loop. A single handler that never blocks says so itself with ``blocking=False`` on its
      registration; this switch overrides every registration. Turn it off only when every sync handler returns
      quickly without blocking: the thread hop is then pure overhead, but one blocking handler would stall
      every request.
    * ``metrics`` — count requests, ``input_required`` results, seals and opens here (default: not counted).
    * ``protocol_eras`` — which protocol eras the endpoint speaks (:class:`~.legacy.ProtocolEras`): ``BOTH``
      (the default) serves the 2025 era (``initialize``, ``Mcp-Session-Id`` sessions, server-to-client requests
      over SSE; 2025-11-25, 2025-06-18, 2025-03-26) beside 2026-07-28; ``MODERN`` refuses a 2025-era
      ``initialize`` with -32022; ``LEGACY`` refuses 2026-07-28 requests with -32022.
    * ``max_sessions`` — live 2025-era sessions at once (default 1024, 1..65536; a partition holds at most a
      quarter, an anonymous peer a sixteenth, and a full share or table ends its longest-idle session for a new
      one); ``session_idle_seconds`` — an unused session with nothing running ends after this long (default
      28800, eight hours; 1..86400). Sessions live in this process: a fleet needs sticky routing for 2025-era
      clients.
    * ``input_timeout_seconds`` — how long a 2025-era request waits for the client's answers to one round of
      server-to-client requests (default 300, 1..3600).
    * ``mounts`` — path prefix (``"/link/"``: starts and ends with ``/``, outside the endpoint path) → a plain
      ASGI 3 app that answers every request under that prefix, after the ``Host``/``Origin`` checks and the
      shutdown drain check (the scope is passed unchanged, full path included; mounts get no lifespan events).
    * ``readiness`` — a :class:`~.readiness.Readiness`: while it says not ready, the endpoint answers every request
      503 with ``Retry-After`` (JSON-RPC -32603) before reading its body (default: always ready).
    * ``store`` — the durable store (:func:`soklet_core.store.open_store`) tasks live in: with it the server offers
      the tasks extension (:attr:`task_manager`, advertised in ``server/discover``); tools with task support need
      it (``ValueError`` otherwise). The store is opened on first use; its owner closes it (after
      ``await server.task_manager.close()``). ``task_ttl_ms`` — how long a task is kept from its creation
      (default 3,600,000; ``None``: unlimited); ``task_poll_interval_ms`` — the poll interval tasks name
      (default 500); ``task_max_per_partition`` and ``task_max_bytes_per_partition`` — what one partition may
      keep in the store (default 1,000 tasks and 32 MiB of task documents; past either a creation gets -32603
      ``Too many stored tasks``). Served, the task manager runs orphaned steps and purges expired tasks on its own.
    """

    __slots__ = ("_app", "_dispatcher", "_legacy", "_sealer", "_tasks")

    def __init__(
        self,
        registry: Registry,
        *,
        protection: ProtectionConfig | None = None,
        admission: AdmissionPolicy | None = None,
        path: str = DEFAULT_ENDPOINT_PATH,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        max_request_body_bytes: int = DEFAULT_REQUEST_BODY_BYTES,
        output_ceiling_bytes: int = RESPONSE_OUTPUT_CEILING_BYTES,
        supported_versions: Iterable[str] = SUPPORTED_PROTOCOL_VERSIONS,
        server_name: str = DEFAULT_SERVER_NAME,
        server_version: str = __version__,
        instructions: str | None = None,
        list_cache_hint: CacheHint = DEFAULT_LIST_CACHE_HINT,
        interceptor: Interceptor | None = None,
        lifecycle_callbacks: Iterable[LifecycleCallback] = (),
        http_limits: HttpLimits | None = None,
        sync_handlers_in_thread: bool = True,
        metrics: ServerMetrics | None = None,
        protocol_eras: ProtocolEras = ProtocolEras.BOTH,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        session_idle_seconds: float = DEFAULT_SESSION_IDLE_SECONDS,
        input_timeout_seconds: float = DEFAULT_INPUT_TIMEOUT_SECONDS,
        mounts: Mapping[str, ASGIApp] = _NO_MOUNTS,
        store: DurableStore | None = None,
        task_ttl_ms: int | None = DEFAULT_TASK_TTL_MS,
        task_poll_interval_ms: int = DEFAULT_POLL_INTERVAL_MS,
        task_max_per_partition: int = MAX_STORED_TASKS_PER_PARTITION,
        task_max_bytes_per_partition: int = MAX_STORED_TASK_BYTES_PER_PARTITION,
        readiness: Readiness | None = None,
    ) -> None:
        if not isinstance(registry, Registry):
            raise TypeError("McpServer takes a Registry")
        limit = max_request_body_bytes
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_REQUEST_BODY_BYTES:
            raise ValueError(f"the request body limit must be between 1 and {MAX_REQUEST_BODY_BYTES} bytes")
        ceiling = output_ceiling_bytes
        if isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling <= 0:
            raise ValueError("the output ceiling must be a positive int")
        if http_limits is not None and not isinstance(http_limits, HttpLimits):
            raise TypeError("http_limits takes an HttpLimits")
        if metrics is not None and not isinstance(metrics, ServerMetrics):
            raise TypeError("metrics takes a ServerMetrics")
        if not isinstance(protocol_eras, ProtocolEras):
            raise TypeError("protocol_eras takes a ProtocolEras")
        sealer = None if protection is None else RequestStateSealer(protection)
        self._tasks = (
            None
            if store is None
            else TaskManager(
                store,
                registry=registry,
                ttl_ms=task_ttl_ms,
                poll_interval_ms=task_poll_interval_ms,
                max_tasks_per_partition=task_max_per_partition,
                max_task_bytes_per_partition=task_max_bytes_per_partition,
            )
        )
        self._dispatcher = Dispatcher(
            registry=registry,
            sealer=sealer,
            admission=admission if admission is not None else AnonymousAdmission(),
            supported_versions=tuple(supported_versions),
            server_name=server_name,
            server_version=server_version,
            instructions=instructions,
            list_cache_hint=list_cache_hint,
            interceptor=interceptor,
            lifecycle=list(lifecycle_callbacks),
            sync_handlers_in_thread=sync_handlers_in_thread,
            metrics=metrics,
            tasks=self._tasks,
        )
        # The table checks its own bounds; the engine checks the input timeout and the eras.
        sessions = SessionTable(max_sessions=max_sessions, idle_seconds=session_idle_seconds)
        self._legacy = LegacyProtocol(
            self._dispatcher,
            eras=protocol_eras,
            sessions=sessions,
            input_timeout_seconds=input_timeout_seconds,
            endpoint_path=path,
        )
        self._app = McpAsgiApp(
            self._dispatcher,
            path=path,
            allowed_hosts=list(allowed_hosts),
            allowed_origins=list(allowed_origins),
            max_request_body_bytes=max_request_body_bytes,
            output_ceiling_bytes=output_ceiling_bytes,
            http_limits=http_limits if http_limits is not None else HttpLimits(),
            legacy=self._legacy,
            mounts=mounts,
            readiness=readiness,
        )
        self._sealer = sealer
        manager = None if sealer is None else sealer.keyring_manager
        if metrics is not None and manager is not None:
            metrics.watch_keyring(manager.snapshot)  # the admin listener may watch its own view instead

    @property
    def dispatcher(self) -> Dispatcher:
        """The protocol logic (for other transports and tests)."""
        return self._dispatcher

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
        return self._dispatcher.registry

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
        return self._dispatcher.metrics

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
