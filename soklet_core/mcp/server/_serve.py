"""Run what ``soklet serve`` runs, from Python: :func:`run` (blocking, as ``uvicorn.run``) and :func:`serve` (its
coroutine) build and run a whole server from one :class:`~soklet_core.mcp.server.ServeConfig`.

>>> from soklet_core.mcp.server import ServeConfig, run          # doctest: +SKIP
>>> run(ServeConfig(app="myapp.mcp:registry", keyring=KeyringFile(Path("keys.toml")), store=default_store_url()))

In order: standard output handed to the protocol alone (stdio), the trace export the ``OTEL_*`` variables ask for
installed (:mod:`soklet_core.tracing_setup`; off unless asked), the app loaded (a module that cannot be imported
stops the start before anything is opened), the store opened (and, in store mode, the fleet keyring loaded from
it), the MCP listener bound, the server built (metrics, readiness, the 2025 era, tasks; with ``auth`` the
bearer-token policy and its RFC 9728 metadata), the admin listener bound, the live keyring attached (file: reloaded
on SIGHUP and when the file changes; store: followed, heartbeats), the expected fingerprint checked, and the
listeners served on one event loop until SIGINT or SIGTERM, which end the run normally after the graceful shutdown;
then the task steps stop, the store closes, the token policy closes, the spans still batched are exported, and the
signal handlers and descriptors are restored. Signals are handled only when it runs on the main thread.

Start-up facts, readiness changes and the shutdown are reported as typed events (:data:`ServeEvent`) to
``on_event``; refusals are core errors (:class:`ServeError`, :class:`~soklet_core.store.StoreError`, the keyring
file's and the KEK's own errors).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, Final, cast

from soklet_core.files import read_keyring_file
from soklet_core.mcp.model.registry import Registry
from soklet_core.mcp.server._serve_config import (
    AdminListening,
    AuthEnabled,
    KeyringFile,
    KeyringFromStore,
    KeyringLoaded,
    Listening,
    ReadinessChanged,
    ServeConfig,
    ServeError,
    ServeErrorReason,
    ServeEvent,
    ServeSite,
    Serving,
    ShuttingDown,
)
from soklet_core.mcp.server._server import McpServer
from soklet_core.mcp.server.http._runner import limited_uvicorn_config, serve_together
from soklet_core.mcp.server.http._serving import uvicorn_config, uvicorn_server_class
from soklet_core.mcp.server.ops._admin import AdminApp
from soklet_core.mcp.server.ops._live_keyring import DEFAULT_POLL_INTERVAL_SECONDS, KeyringFileWatcher, LiveKeyring
from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.mcp.server.ops._readiness import ExpectedFingerprint, NotReady, Readiness
from soklet_core.mcp.server.ops._snapshot import new_process_id
from soklet_core.mcp.server.ops._store_keyring import HEARTBEAT_SECONDS, PROPAGATION_BOUND_SECONDS, StoreKeyring
from soklet_core.mcp.server.resource_metadata import ProtectedResource
from soklet_core.mcp.server.stdio._transport import StdioTransport, open_pipe_streams
from soklet_core.protection import ProtectionConfig, normalize_endpoint_path
from soklet_core.store import DurableStore, FleetKeyring, KeyringRepository, StoreError, open_store
from soklet_core.tracing_setup import TracingSetup, TracingSetupError, configure_from_environment

if TYPE_CHECKING:
    from soklet_core.mcp.server.auth import IntrospectionAdmission, JwtAdmission

__all__ = ["FOLLOW_NOTE", "RELOAD_NOTE", "load_app", "protocol_stdout", "run", "serve"]

#: How a keyring file stays current while serving.
RELOAD_NOTE: Final = f"reloaded on SIGHUP and when the file changes (checked every {DEFAULT_POLL_INTERVAL_SECONDS:g} s)"
#: How the store's fleet keyring stays current while serving.
FOLLOW_NOTE: Final = (
    f"followed: a change in the store applies within {PROPAGATION_BOUND_SECONDS:g} s; "
    f"heartbeat every {HEARTBEAT_SECONDS:g} s"
)
#: The backlog of each listening socket.
LISTEN_BACKLOG: Final = 2048
_STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
_logger = logging.getLogger("soklet.serve")

EventSink = Callable[[ServeEvent], None]


def run(config: ServeConfig, *, on_event: EventSink | None = None) -> None:
    """Build and run everything ``config`` describes until a stop signal (or, over stdio, the end of standard
    input), on a new event loop (uvloop over HTTP, as uvicorn runs). Returns normally after a requested stop."""
    if not isinstance(config, ServeConfig):
        raise TypeError("run takes a ServeConfig")
    # One event loop for the listeners and the store: a PostgreSQL pool belongs to the loop it was opened on.
    loop_factory = (
        None
        if config.stdio
        else limited_uvicorn_config(None, config.options.http.limits, log_config=None).get_loop_factory()
    )
    with _early_stop() as early, asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(_serve(config, on_event or _ignore, early))


async def serve(config: ServeConfig, *, on_event: EventSink | None = None) -> None:
    """:func:`run` on the running event loop."""
    if not isinstance(config, ServeConfig):
        raise TypeError("serve takes a ServeConfig")
    with _early_stop() as early:
        await _serve(config, on_event or _ignore, early)


def _ignore(_event: ServeEvent) -> None:
    pass


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _early_stop() -> Iterator[list[int]]:
    """A stop requested while starting (before uvicorn listens for signals) must still end cleanly: SIGINT and
    SIGTERM are noted from the first moment; the handlers that were there are restored after."""
    early: list[int] = []
    if not _main_thread():
        yield early
        return
    previous = {sig: signal.signal(sig, lambda number, _frame: early.append(number)) for sig in _STOP_SIGNALS}
    try:
        yield early
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _sighup(action: Callable[[], None]) -> Iterator[None]:
    """SIGHUP runs ``action`` (a reload) while the block runs, on the main thread only."""
    if not _main_thread():
        yield
        return
    previous = signal.signal(signal.SIGHUP, lambda _number, _frame: action())
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


def load_app(reference: str) -> Registry:
    """The Registry ``module:object`` names: the object itself, or what calling it (with no argument) returns. The
    current folder is importable, as with uvicorn. Every failure is a :class:`ServeError` naming the problem with
    the exception's type, never its text (which could hold anything the app knows)."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ServeError(ServeErrorReason.APP_REFERENCE)
    # As uvicorn does: the folder the server runs in is where an app's module is looked for first.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (module_name == error.name or module_name.startswith(f"{error.name}.")):
            raise ServeError(ServeErrorReason.APP_NO_MODULE) from None
        raise ServeError(ServeErrorReason.APP_IMPORT_FAILED, detail="ModuleNotFoundError") from None
    except (Exception, SystemExit) as error:  # the app's module raised while it was imported
        raise ServeError(ServeErrorReason.APP_MODULE_RAISED, detail=type(error).__name__) from None
    try:
        target: Any = getattr(module, attribute)
    except AttributeError:
        raise ServeError(ServeErrorReason.APP_NO_ATTRIBUTE) from None
    if callable(target) and not isinstance(target, Registry):
        needed = _required_parameters(target)
        if needed:
            raise ServeError(ServeErrorReason.APP_FACTORY_NEEDS_ARGUMENTS, names=needed)
        try:
            target = target()
        except (Exception, SystemExit) as error:  # the app's factory raised
            raise ServeError(ServeErrorReason.APP_FACTORY_RAISED, detail=type(error).__name__) from None
    if not isinstance(target, Registry):
        raise ServeError(ServeErrorReason.APP_NOT_A_REGISTRY, detail=type(target).__name__)
    return target


def _required_parameters(factory: Any) -> tuple[str, ...]:
    """The names of the parameters ``factory`` cannot be called without (none when its signature is unknown)."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(
        parameter.name
        for parameter in parameters
        if parameter.default is inspect.Parameter.empty
        and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    )


@contextlib.contextmanager
def protocol_stdout() -> Iterator[BinaryIO]:
    """Standard output for the protocol alone: the file of descriptor 1 is handed out on a descriptor of its own
    and descriptor 1 becomes standard error while the server runs, so the start-up facts, the logs and any stray
    ``print`` of an app land on stderr, never among protocol lines. Descriptor 1 is restored after."""
    sys.stdout.flush()
    saved = os.dup(1)
    protocol = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    try:
        yield protocol
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        protocol.close()


def _listen(host: str, port: int, reason: ServeErrorReason) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ServeError(reason, detail=error.strerror or "error") from None
    sock.listen(LISTEN_BACKLOG)
    sock.set_inheritable(True)
    return sock


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def _serve(config: ServeConfig, emit: EventSink, early: list[int]) -> None:
    with contextlib.ExitStack() as stack:
        protocol_out = stack.enter_context(protocol_stdout()) if config.stdio else None
        # Before anything that makes spans (the store, the server); flushed only once all of it has stopped.
        tracing = _start_tracing() if config.trace_from_environment else None
        try:
            await _serve_traced(config, emit, early, stack, protocol_out, tracing)
        finally:
            if tracing is not None:
                # The flush waits on the exporter's thread (an HTTP post): off the loop.
                await asyncio.to_thread(tracing.shutdown)


def _start_tracing() -> TracingSetup | None:
    """The trace export the ``OTEL_*`` variables ask for; a refusal is a :class:`ServeError` like any other bad
    configuration."""
    try:
        return configure_from_environment()
    except TracingSetupError as error:
        raise ServeError(ServeErrorReason.TRACING, detail=str(error)) from error


async def _serve_traced(
    config: ServeConfig,
    emit: EventSink,
    early: list[int],
    stack: contextlib.ExitStack,
    protocol_out: BinaryIO | None,
    tracing: TracingSetup | None,
) -> None:
    # The app first: a module that cannot be imported stops the start before anything is opened.
    app = load_app(config.app) if isinstance(config.app, str) else config.app
    durable = open_store(config.store)
    # Opened before anything listens: an unreachable store or a foreign schema stops the start, not the first
    # request.
    await durable.open()
    server: McpServer | None = None
    # Built on the server's loop (its key-set or introspection client belongs to it) and closed on it.
    policy = None if config.auth is None else config.auth.policy()
    try:
        server = await _run_opened(config, app, durable, policy, protocol_out, emit, early, stack, tracing)
    finally:
        await _close_store(server, durable)
        if policy is not None:
            await policy.aclose()


async def _run_opened(
    config: ServeConfig,
    app: Registry | Callable[[ServeSite], Registry],
    durable: DurableStore,
    policy: JwtAdmission | IntrospectionAdmission | None,
    protocol_out: BinaryIO | None,
    emit: EventSink,
    early: list[int],
    stack: contextlib.ExitStack,
    tracing: TracingSetup | None,
) -> McpServer:
    source = config.keyring
    fleet = None
    if isinstance(source, KeyringFromStore):
        # open_store's backends are both a DurableStore and a KeyringRepository.
        fleet = FleetKeyring(cast(KeyringRepository, durable), source.kek)
        loaded = await fleet.load()
        if loaded is None:
            raise ServeError(ServeErrorReason.NO_FLEET_KEYRING)
        ring = loaded.keyring
        document = None
    else:
        document = source.document
        if document is None:
            document = read_keyring_file(
                source.path, allow_insecure_permissions=source.allow_insecure_permissions, kek=source.kek
            )
        ring = document.keyring()
        loaded = None
    sock = None
    if not config.stdio:
        sock = _listen(config.host, config.port, ServeErrorReason.CANNOT_LISTEN)
        stack.callback(sock.close)
    bound_port = None if sock is None else int(sock.getsockname()[1])
    base_url = None if sock is None else f"http://{_url_host(config.host)}:{bound_port}"
    registry = app if isinstance(app, Registry) else app(ServeSite(base_url, durable))
    metrics = ServerMetrics(instance=config.instance)
    # One readiness for the whole instance: the MCP endpoint answers 503 while it holds the instance back, the
    # admin probes report it, and each part that can hold it back sets its own reason.
    readiness = Readiness() if fleet is None else Readiness(NotReady.KEYRING_NOT_LOADED)  # cleared by its load
    readiness.add_observer(lambda reason: emit(ReadinessChanged(reason)))
    protection = ProtectionConfig(
        keyring=ring,
        maximum_request_state_lifetime=config.state_lifetime,
        maximum_request_state_rounds=config.state_rounds,
    )
    merged = Registry.merge(*config.registries, registry)
    protected = None if policy is None or base_url is None else _protected_resource(config, merged, base_url)
    server = McpServer(
        merged,
        protection=protection,
        options=config.options,
        metrics=metrics,
        mounts=config.mounts,
        store=durable,
        readiness=readiness,
        admission=policy,
        protected_resource=protected,
    )
    emit(Listening("stdio" if base_url is None else f"{base_url}{server.path}", bound_port))
    auth = None if protected is None else _auth_enabled(config, protected)
    if auth is not None:
        emit(auth)
    manager = server.protection_keyring_manager
    assert manager is not None
    # What holds this instance back (a refused keyring file, ...): published as metrics at every scrape.
    metrics.watch_readiness(readiness)
    # This process's identity: what its admin snapshot and its store heartbeats report.
    process_id = new_process_id()
    admin = config.admin
    admin_sock = None
    admin_url = None
    if admin is not None:
        admin_sock = _listen(admin.host, admin.port, ServeErrorReason.ADMIN_CANNOT_LISTEN)
        stack.callback(admin_sock.close)
        scheme = "https" if admin.tls_cert is not None else "http"
        admin_url = f"{scheme}://{_url_host(admin.host)}:{admin_sock.getsockname()[1]}"
    live: LiveKeyring | StoreKeyring
    watcher: KeyringFileWatcher | None = None
    if fleet is not None:
        assert loaded is not None
        live = StoreKeyring(
            manager,
            fleet,
            loaded,
            readiness=readiness,
            instance=config.instance,
            process_id=process_id,
            max_state_lifetime=config.state_lifetime,
            admin_url=admin_url,
            metrics=metrics,
            fingerprint_version=config.fingerprint_version,
        )
    else:
        assert isinstance(source, KeyringFile)
        live = LiveKeyring(
            manager,
            source.path,
            document=document,
            allow_insecure_permissions=source.allow_insecure_permissions,
            fingerprint_version=config.fingerprint_version,
            readiness=readiness,
            kek=source.kek,
        )
        watcher = KeyringFileWatcher(live)
    # Scrapes read the keyring as this instance reports it (the fingerprint version included); every change is
    # seen at once too (the removed key ids that tell a retired-key refusal from an unknown-key one).
    metrics.watch_keyring(live.snapshot)
    live.add_observer(metrics.observe_keyring)
    metrics.watch_store(durable)
    admin_server: Any = None
    if admin is not None:
        assert admin_sock is not None
        assert admin_url is not None
        admin_app = AdminApp(
            live,
            admin.tokens,
            instance=config.instance,
            lifetime_ms=protection.lifetime_ms,
            rounds=protection.maximum_request_state_rounds,
            metrics=metrics,
            body_timeout_seconds=config.options.http.limits.body_timeout_seconds,
            store=durable,
            readiness=readiness,
            process_id=process_id,
        )
        tls: dict[str, Any] = {}
        if admin.tls_cert is not None:
            tls = {"ssl_certfile": str(admin.tls_cert), "ssl_keyfile": str(admin.tls_key)}
        admin_config = limited_uvicorn_config(
            admin_app, config.options.http.limits, log_level=config.log_level, log_config=None, **tls
        )
        try:
            admin_config.load()  # TLS files are read here: a bad one stops the start, not a running server
        except (OSError, ValueError) as error:
            raise ServeError(ServeErrorReason.ADMIN_TLS_UNLOADABLE, detail=type(error).__name__) from None
        admin_server = uvicorn_server_class()(admin_config)
        emit(AdminListening(admin_url, int(admin_sock.getsockname()[1])))
    reload = live.request_reload if isinstance(live, StoreKeyring) else cast(KeyringFileWatcher, watcher).request_reload
    # Installed before the start-up facts are reported: whoever reads them may send SIGHUP at once.
    stack.enter_context(_sighup(reload))
    reported = live.snapshot()
    emit(
        KeyringLoaded(
            reported.active_key_id,
            reported.fingerprint,
            None if loaded is None else loaded.generation,
            RELOAD_NOTE if fleet is None else FOLLOW_NOTE,
        )
    )
    emit(Serving())
    _logger.info(
        "sealing with key %s, fingerprint v%d %s; keyring %s",
        reported.active_key_id,
        reported.fingerprint.version,
        reported.fingerprint.value,
        RELOAD_NOTE if fleet is None else FOLLOW_NOTE,
    )
    if auth is not None:
        # Which tokens are taken, so an operator can match a refusal to the issuer: never a secret or a key.
        _logger.info(
            "bearer tokens required (%s): issuer %s, audience %s; resource metadata at %s",
            auth.kind,
            auth.issuer or "not checked",
            auth.audience or "not checked",
            auth.metadata_url,
        )
    if tracing is not None:
        # Where spans go, by the exporters' names: never an endpoint's headers, which may hold an API key.
        _logger.info("tracing: exporting spans (%s) as service %s", ", ".join(tracing.exporters), tracing.service_name)
    if config.expect_fingerprint is not None:
        # Checked now and after every reload or admin change; a mismatch holds the instance back (logged).
        expectation = ExpectedFingerprint(readiness, config.expect_fingerprint)

        def check_expected(_snapshot: object) -> None:
            expectation.check(live.manager.current())

        live.add_observer(check_expected)
    if watcher is not None:
        watcher.start()
        stack.callback(watcher.stop)
    if protocol_out is not None:
        await _serve_stdio(server, protocol_out, emit, early)
        return server
    assert sock is not None
    # log_config=None: uvicorn leaves the process's logging as the application set it (its loggers' lines go to
    # the application's handlers, formatted as its own lines: soklet serve's text or JSON).
    primary = _quiet_server_class(early, emit)(uvicorn_config(server, log_level=config.log_level, log_config=None))
    others = [] if admin_server is None else [(admin_server, [admin_sock])]
    following: asyncio.Task[None] | None = None
    if isinstance(live, StoreKeyring):
        following = asyncio.get_running_loop().create_task(live.run(), name="soklet-store-keyring")
    try:
        await serve_together(primary, [sock], others)
    finally:
        if following is not None:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following
    return server


def _protected_resource(config: ServeConfig, registry: Registry, base_url: str) -> ProtectedResource:
    """The endpoint's RFC 9728 metadata: the configured resource (else the endpoint's own URL), the authorization
    servers (else the issuer) and every scope a client may need: the policy's and each registration's."""
    assert config.auth is not None
    resource = config.resource or f"{base_url}{normalize_endpoint_path(config.options.http.path)}"
    return ProtectedResource(
        resource=resource,
        authorization_servers=config.metadata_authorization_servers,
        scopes_supported=config.auth.required_scopes | registry.required_scopes,
    )


def _auth_enabled(config: ServeConfig, protected: ProtectedResource) -> AuthEnabled:
    """The start-up fact of bearer-token admission: the policy kind, issuer and audience (never the secret)."""
    from soklet_core.mcp.server.auth import IntrospectionSettings  # already imported: config.auth is one of its

    settings = config.auth
    assert settings is not None
    kind = "introspection" if isinstance(settings, IntrospectionSettings) else "jwt"
    return AuthEnabled(kind, settings.issuer, settings.audience, protected.resource, protected.metadata_url)


async def _close_store(server: McpServer | None, durable: DurableStore) -> None:
    """Stop the steps running here (their leases go back, so another instance, or this one restarted, runs them
    at once), then close the store. A store that fails now has nothing left to lose: the stop goes on."""
    manager = None if server is None else server.task_manager
    if manager is not None:
        with contextlib.suppress(StoreError):
            await manager.close()
    with contextlib.suppress(StoreError):
        await durable.close()


async def _serve_stdio(server: McpServer, protocol_out: BinaryIO, emit: EventSink, early: list[int]) -> None:
    """Serve over standard input and ``protocol_out`` until the input ends or a stop signal comes.

    Standard input closed at start is an input that has already ended; a regular file or ``/dev/null`` is read as a
    pipe is. Requests still running at the end of the input get the shutdown grace to be answered."""
    if early:
        emit(ShuttingDown())
        return
    source = sys.stdin.buffer if sys.stdin is not None else None
    try:
        reader, writer = await open_pipe_streams(source, protocol_out)
    except (OSError, ValueError) as error:
        raise ServeError(ServeErrorReason.STDIO_UNUSABLE, detail=type(error).__name__) from None
    loop = asyncio.get_running_loop()
    if server.task_manager is not None:
        server.task_manager.start()  # orphaned steps and expired tasks, as the HTTP server's lifespan start does
    transport = StdioTransport(server.legacy_protocol, server.options.http)
    serving = loop.create_task(transport.serve(reader, writer))
    handled = _main_thread()
    if handled:
        for sig in _STOP_SIGNALS:
            loop.add_signal_handler(sig, serving.cancel)
    try:
        await serving
    except asyncio.CancelledError:
        _logger.info("stop requested: running requests cancelled")
    finally:
        emit(ShuttingDown())
        if handled:
            for sig in _STOP_SIGNALS:
                loop.remove_signal_handler(sig)
        writer.close()


def _quiet_server_class(early: list[int], emit: EventSink) -> type[Any]:
    class QuietServer(uvicorn_server_class()):  # type: ignore[misc]
        """uvicorn's server, but a stop signal ends the run normally after the graceful shutdown.

        uvicorn re-raises the captured signal after shutting down, which turns a requested stop into exit 130
        (SIGINT) or death by SIGTERM; an operator asked for the stop, so it is a normal ending here.
        """

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if not _main_thread():
                yield
                return
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
            if early:
                self.should_exit = True
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        async def shutdown(self, sockets: Any = None) -> None:
            emit(ShuttingDown())
            await super().shutdown(sockets)

    return QuietServer
