"""The Streamable HTTP transport: a raw ASGI 3 application around an :class:`~soklet_core.mcp.server.engine.Engine`
(a 2026-07-28 POST through :class:`~soklet_core.mcp.server.http._dispatch.HttpDispatch`).

This is the only module of ``soklet_core`` that speaks ASGI. It owns the HTTP side of the protocol:

* one endpoint (default :data:`~soklet_core.protocol.DEFAULT_ENDPOINT_PATH`); other paths: 404, except those under
  a mount prefix, which go to the mounted ASGI app after the ``Host``/``Origin`` and drain checks;
* both protocol eras on that endpoint (:class:`.ProtocolEras`). A POST without ``Mcp-Session-Id`` whose
  ``MCP-Protocol-Version`` header names a modern version is 2026-07-28, decided from the headers alone; only
  otherwise is the body read for the era (:func:`.is_legacy_message`), and a 2025-era message goes to
  :meth:`.LegacyProtocol.handle <soklet_core.mcp.server.legacy._engine.LegacyProtocol.handle>` with this POST's
  response stream as its channel: the server's own requests to the client (``elicitation/create``...) are
  ``event: message`` frames of that stream, which starts at the first frame (a request that needs no input gets
  a plain JSON answer). An unknown or expired ``Mcp-Session-Id``: 404, JSON-RPC -32001 ``Session not found``;
* with the engine's :class:`.ProtectedResource` (a server that admits callers by access token), its RFC 9728
  metadata document on ``GET`` of the well-known paths (``/.well-known/oauth-protected-resource`` and the form
  suffixed with the endpoint's path), after the ``Host``/``Origin`` checks; other methods there: 405;
* GET: 405 (``Allow: POST, DELETE`` when the 2025 era is served: no standalone SSE stream is offered, as the
  2025-11-25 transport permits; ``Allow: POST`` otherwise). DELETE with ``Mcp-Session-Id`` ends that session
  (its running requests are cancelled) once admitted as every request of the session is: 200, refused by the
  admission policy 401, unknown or another partition's 404, no header 400; 405 on a modern-only server. The rest:
  405;
* strict ``Host`` and ``Origin`` (hand-written RFC 9112/3986/6454 parsers, no regular expressions): exactly one
  ``Host`` = ``uri-host [":" port]``, else 400; a well-formed ``Host`` that is not allowed is 403; at most one
  ``Origin`` (several: 400), a serialized origin ``scheme://host[:port]`` and nothing else, else 403. Allowed:
  ``localhost``, ``127.0.0.1`` and ``[::1]`` with any port, plus configured values. All before the body is read;
* the request body limit (10 MiB by default, at most 16 MiB), read incrementally and refused with 413 as soon as
  it is exceeded (or at once when ``Content-Length`` says so), and the body read timeout (408, connection
  closed) from :class:`~soklet_core.mcp.server.options.HttpLimits` (the app takes an ``HttpOptions``);
* the 4 MiB response output ceiling: a larger answer becomes a ``-32603`` error;
* compact single-line JSON responses, or request-scoped SSE (``event: message`` frames, ``X-Accel-Buffering:
  no``) once a handler reports progress on a request with a ``progressToken`` and no unmet CONDITIONAL
  capability holds the response uncommitted;
* 202 for notifications;
* client disconnect cancels the handler cooperatively (task cancellation plus ``InvocationFeatures.cancelled``);
* readiness: while the :class:`.Readiness` it is given says not ready (the keyring not loaded, a newer
  fleet generation seen than applied, ...), every request to the endpoint, of either era, is answered 503 with
  ``Retry-After`` (JSON-RPC ``-32603``) once its path, method, ``Host`` and ``Origin`` are checked, before its body
  is read, so a load balancer routes around the instance and nothing is sealed or opened with a stale keyring
  (mounted pages are served as before);
* graceful shutdown: :meth:`McpAsgiApp.begin_drain` (called by the uvicorn server of :mod:`._serving` when a
  stop is requested, or at the ASGI lifespan shutdown) answers new requests 503 (JSON-RPC ``-32603``); requests
  still running after the grace period are cancelled and answered 503 the same way;
* one access-log line per request on logger ``soklet.mcp.access``:
  ``method=… operation=… status=… code=… duration_ms=… [reason=…]``. Only known method names, registered
  operation names and bounded reasons appear: never tokens, headers, params or other raw input;
* with the engine's :class:`.ServerMetrics`, the same answer counted by method and outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from soklet_core.json import (
    JsonError,
    JsonNull,
    JsonNumber,
    JsonObject,
    JsonString,
    JsonValue,
    parse,
)
from soklet_core.json.limits import INLINE_BODY_BYTES
from soklet_core.mcp.model.context import RequestId
from soklet_core.mcp.server._headers import HttpRequest
from soklet_core.mcp.server._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    DispatchResult,
    McpError,
    busy_refusal,
    encode_error,
)
from soklet_core.mcp.server.engine import Engine
from soklet_core.mcp.server.http._access_log import record_answer
from soklet_core.mcp.server.http._authority import (
    LOCAL_HOSTS,
    MAX_PORT,
    AllowedAuthorities,
    MalformedAuthority,
    parse_authority,
    parse_origin,
)
from soklet_core.mcp.server.http._dispatch import HttpDispatch
from soklet_core.mcp.server.http._exchange import (
    QUIET,
    SSE_DATA,
    SSE_END,
    SSE_HEADERS,
    ASGIApp,
    BodyWindow,
    Channel,
    Exchange,
    Message,
    Receive,
    Scope,
    Send,
    SentTracker,
    sse_frame,
)
from soklet_core.mcp.server.legacy._engine import (
    SESSION_HEADER,
    SESSION_NOT_FOUND,
    SESSION_NOT_FOUND_MESSAGE,
    LegacyProtocol,
    LegacyRequest,
    ProtocolEras,
    era_from_headers,
)
from soklet_core.mcp.server.legacy._sessions import LegacySession
from soklet_core.mcp.server.ops._readiness import RETRY_AFTER_SECONDS, Readiness
from soklet_core.mcp.server.options import SHUTDOWN_MARGIN_SECONDS, HttpLimits, HttpOptions
from soklet_core.protection import normalize_endpoint_path

_DEFAULT_HTTP: Final = HttpOptions()

__all__ = [
    "LOCAL_HOSTS",
    "MAX_MOUNTS",
    "MAX_PORT",
    "ASGIApp",
    "MalformedAuthority",
    "McpAsgiApp",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "parse_authority",
    "parse_origin",
]

_NO_MOUNTS: Final[Mapping[str, ASGIApp]] = MappingProxyType({})
#: At most this many mounts: the path of every request outside the endpoint is compared with each prefix.
MAX_MOUNTS: Final = 16

_logger = logging.getLogger("soklet.mcp")


_JSON_HEADERS: Final = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]


class McpAsgiApp:
    """The ASGI 3 application of one MCP endpoint. Build it with ``McpServer.asgi_app()``."""

    def __init__(
        self,
        engine: Engine,
        *,
        http: HttpOptions = _DEFAULT_HTTP,
        legacy: LegacyProtocol | None = None,
        mounts: Mapping[str, ASGIApp] = _NO_MOUNTS,
        readiness: Readiness | None = None,
    ) -> None:
        if not isinstance(http, HttpOptions):
            raise TypeError("http takes an HttpOptions")
        path, allowed_hosts, allowed_origins = http.path, http.allowed_hosts, http.allowed_origins
        max_request_body_bytes, output_ceiling_bytes, http_limits = (
            http.max_request_body_bytes,
            http.output_ceiling_bytes,
            http.limits,
        )
        self._engine = engine
        self._modern = HttpDispatch(engine)
        self._metrics = engine.metrics
        self._path = normalize_endpoint_path(path)
        self._authorities = AllowedAuthorities(allowed_hosts, allowed_origins)
        self._max_body = max_request_body_bytes
        self._ceiling = output_ceiling_bytes
        self._limits = http_limits
        self._active = 0
        self._idle: asyncio.Event | None = None
        self._draining = False
        self._grace_over: asyncio.Future[None] | None = None
        if legacy is not None and not isinstance(legacy, LegacyProtocol):
            raise TypeError("legacy takes a LegacyProtocol")
        self._legacy = legacy
        eras = ProtocolEras.MODERN if legacy is None else legacy.eras
        # The header-only fast path: a modern version header and no session header is a 2026-07-28 request,
        # decided without reading the body (a legacy-only server has no fast path).
        self._fast_versions = frozenset(engine.supported_versions) if eras.modern else frozenset()
        self._sessions = legacy.sessions if legacy is not None and eras.legacy else None
        self._allow = b"POST" if self._sessions is None else b"POST, DELETE"
        self._mounts = _checked_mounts(mounts, self._path)
        if readiness is not None and not isinstance(readiness, Readiness):
            raise TypeError("readiness takes a Readiness")
        self._readiness = readiness
        resource = engine.protected_resource
        self._metadata_paths = frozenset(() if resource is None else resource.metadata_paths)
        # The document is the same for every request: encoded once (it is configuration, never client input).
        self._metadata = b"" if resource is None else resource.document()

    @property
    def readiness(self) -> Readiness | None:
        """What decides whether requests are served now (``None``: always, as long as the app is not draining)."""
        return self._readiness

    @property
    def path(self) -> str:
        """The normalized endpoint path."""
        return self._path

    @property
    def http_limits(self) -> HttpLimits:
        """The HTTP limits and timeouts this app was built with (the server side reads them from here)."""
        return self._limits

    @property
    def draining(self) -> bool:
        """Whether a stop was requested: new requests are answered 503."""
        return self._draining

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    # ------------------------------------------------------------------------------------------------ lifespan

    def _grace_signal(self) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        if self._grace_over is None or self._grace_over.get_loop() is not loop:
            self._grace_over = loop.create_future()
        return self._grace_over

    def begin_drain(self) -> None:
        """Start the shutdown drain (call on the event loop; repeated calls do nothing).

        From now on new requests are answered 503; requests still running :attr:`HttpLimits.shutdown_grace_seconds`
        later are cancelled and answered 503 (JSON-RPC). The uvicorn server of :mod:`._serving` calls it when a
        stop is requested; under another ASGI server the lifespan shutdown event does.
        """
        if self._draining:
            return
        self._draining = True
        signal = self._grace_signal()
        asyncio.get_running_loop().call_later(self._limits.shutdown_grace_seconds, _resolve, signal)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._draining = False  # the same app may be served again after a stop
                self._grace_over = None
                tasks = self._engine.task_manager
                if tasks is not None:
                    tasks.start()  # orphaned steps and expired tasks are looked after without waiting for a request
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.begin_drain()
                if self._active:
                    self._idle = asyncio.Event()
                    # Past the grace every running request is cancelled and answered, so this ends soon after.
                    wait = self._limits.shutdown_grace_seconds + SHUTDOWN_MARGIN_SECONDS
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._idle.wait(), wait)
                if self._legacy is not None:
                    self._legacy.close()  # 2025-era sessions do not outlive the server
                tasks = self._engine.task_manager
                if tasks is not None:
                    await tasks.close()  # task steps stop here and give their leases back (the store stays open)
                await send({"type": "lifespan.shutdown.complete"})
                return

    # ------------------------------------------------------------------------------------------------ http

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        self._active += 1
        sent = SentTracker(send)
        try:
            result = await self._handle(scope, receive, sent)
        except asyncio.CancelledError:
            if not self._draining:
                raise
            # The server gave up waiting (its own shutdown timeout): answer if still possible, never a traceback.
            if not sent.started:
                with contextlib.suppress(Exception):
                    await self._plain(sent, 503, "shutdown-cancelled", close=True, text=_CANCELLED_TEXT)
            result = DispatchResult(503, None, reason="shutdown-cancelled")
        finally:
            self._active -= 1
            if self._active == 0 and self._idle is not None:
                self._idle.set()
        if result is not None:
            record_answer(result, started, self._metrics)

    async def _plain(
        self,
        send: Send,
        status: int,
        reason: str,
        extra: list[tuple[bytes, bytes]] | None = None,
        *,
        close: bool = False,
        text: str | None = None,
    ) -> DispatchResult:
        # 503 is the server's state, not the request's fault: -32603 rather than -32600.
        code = INTERNAL_ERROR if status == 503 else INVALID_REQUEST
        body = encode_error(None, code, text or _STATUS_TEXT.get(status, "Refused"))
        headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()), *(extra or [])]
        if close:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return DispatchResult(status, None, reason=reason)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> DispatchResult | None:
        path = scope["path"]
        if path != self._path:  # the endpoint exactly as normalized needs no normalizing (the common case)
            try:
                path = normalize_endpoint_path(path)
            except ValueError:
                path = None
        mount: ASGIApp | None = None
        metadata = False
        if path != self._path:
            metadata = scope["path"] in self._metadata_paths
            mount = self._mount_of(scope["path"]) if self._mounts and not metadata else None
            if mount is None and not metadata:
                return await self._plain(send, 404, "not-found")
        elif scope["method"] != "POST" and (scope["method"] != "DELETE" or self._sessions is None):
            return await self._plain(send, 405, "method-not-allowed", [(b"allow", self._allow)])
        headers: dict[str, str] = {}
        hosts: list[str] = []
        origins: list[str] = []
        for raw_name, raw_value in scope["headers"]:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            # A field value excludes surrounding OWS (RFC 9110 §5.5); httptools leaves the trailing part in place.
            if name == "host":
                hosts.append(value.strip(" \t"))
            elif name == "origin":
                origins.append(value.strip(" \t"))
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        refusal = self._authorities.host_status(hosts) or self._authorities.origin_status(origins)
        if refusal is not None:
            return await self._plain(send, refusal[0], refusal[1])
        if self._draining:
            return await self._plain(send, 503, "shutting-down", close=True)
        if metadata:
            await self._resource_metadata(scope["method"], send)
            return None  # logged by _resource_metadata; not an MCP request for the metrics
        if mount is not None:
            await self._mounted(mount, scope, receive, send)
            return None  # logged by _mounted; not an MCP request for the metrics
        readiness = self._readiness
        if readiness is not None and not readiness.ready:
            # Before the body: a request that cannot be served now costs no read, no parse and no key.
            refused = busy_refusal(_NOT_READY_TEXT, retry_after=RETRY_AFTER_SECONDS, reason="not-ready")
            return await self._finish(send, DispatchResult.refused(refused), QUIET, False)
        if scope["method"] == "DELETE":
            return await self._end_session(scope["path"], headers, send)
        body = await self._read_body(headers, receive)
        if body is _TOO_LARGE:
            return await self._plain(send, 413, "body-too-large")
        if body is _TIMED_OUT:
            return await self._plain(send, 408, "body-timeout", close=True)
        if body is _DRAINED or self._draining:
            # The head came before the stop, the body after: the request never started, so it is refused as new.
            return await self._plain(send, 503, "shutting-down", close=True)
        assert isinstance(body, bytes)
        # The headers alone decide most requests: a 2026-07-28 one goes straight to the HTTP side, body unread.
        if era_from_headers(headers, modern_versions=self._fast_versions) is ProtocolEras.MODERN:
            return await self._respond(HttpRequest(scope["path"], headers, body), receive, send)
        client = scope.get("client")
        peer = str(client[0]) if client else None
        return await self._by_era(scope["path"], headers, body, receive, send, peer)

    async def _resource_metadata(self, method: str, send: Send) -> None:
        """The RFC 9728 document (GET, HEAD), or 405. Logged as the endpoint's requests are, not counted as an MCP
        request."""
        started = time.perf_counter()
        if method not in ("GET", "HEAD"):
            result = await self._plain(send, 405, "method-not-allowed", [(b"allow", b"GET, HEAD")])
        else:
            body = self._metadata
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                # Clients fetch it on every 401; it changes only with the configuration.
                (b"cache-control", b"public, max-age=3600"),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body if method == "GET" else b""})
            result = DispatchResult(200, None, reason="resource-metadata")
        record_answer(result, started, None)

    # ------------------------------------------------------------------------------------------------ mounts

    def _mount_of(self, path: str) -> ASGIApp | None:
        for prefix, app in self._mounts:
            if path.startswith(prefix):
                return app
        return None

    async def _mounted(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand a request under a mount prefix to its app (the checks passed); log it as the endpoint's are."""
        started = time.perf_counter()
        status = 500  # what the server answers for an app that starts no response

        async def tracked(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await app(scope, receive, tracked)
        finally:
            # Not counted in the MCP request metrics: a mounted page is not an MCP request.
            record_answer(DispatchResult(status, None, reason="mount"), started, None)

    # ------------------------------------------------------------------------------------------------ 2025 era

    async def _by_era(
        self, path: str, headers: dict[str, str], body: bytes, receive: Receive, send: Send, peer: str | None
    ) -> DispatchResult | None:
        """A POST the headers alone did not decide: the body says which era (``is_legacy_message``)."""
        legacy = self._legacy
        if legacy is None:
            return await self._respond(HttpRequest(path, headers, body), receive, send)
        message: JsonValue | None = None
        session: LegacySession | None = None
        session_id = headers.get(SESSION_HEADER)
        if session_id is not None:
            if self._sessions is not None:
                # Known before the body is read: an unknown or expired session costs no parse (id unknown: null).
                session = self._sessions.get(session_id.strip())
                if session is None:
                    return await self._answer(
                        send, 404, SESSION_NOT_FOUND, SESSION_NOT_FOUND_MESSAGE, "session-not-found"
                    )
            try:
                message = await self._engine.parse_body(body)
            except McpError as error:
                return await self._finish(send, DispatchResult.refused(error), QUIET, False)
        else:
            # Without a session only an initialize opens the 2025 era, and an initialize is small: a body over the
            # inline size is left to the 2026-07-28 path (which parses large bodies off the loop).
            if len(body) <= INLINE_BODY_BYTES:
                with contextlib.suppress(JsonError):
                    message = parse(body)
            if message is None or not legacy.is_legacy(headers, message):
                if legacy.eras.modern:
                    return await self._respond(HttpRequest(path, headers, body), receive, send)
                if message is None:
                    return await self._answer(send, 400, PARSE_ERROR, "Parse error", "parse-error")
                return await self._finish(send, legacy.refuse_modern(message), QUIET, False)
        return await self._respond(LegacyRequest(path, headers, message, session, len(body), peer), receive, send)

    async def _answer(
        self, send: Send, status: int, code: int, message: str, reason: str, extra: tuple[tuple[bytes, bytes], ...] = ()
    ) -> DispatchResult:
        body = encode_error(None, code, message)
        headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()), *extra]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return DispatchResult(status, None, reason=reason, code=code)

    async def _end_session(self, path: str, headers: dict[str, str], send: Send) -> DispatchResult:
        """``DELETE`` with ``Mcp-Session-Id``: end that session (its running requests are cancelled) → 200, once
        admitted as every request of the session is (:meth:`.LegacyProtocol.end_session`)."""
        assert self._legacy is not None
        if SESSION_HEADER not in headers:
            return await self._answer(send, 400, INVALID_REQUEST, _NO_SESSION_TEXT, "session-missing")
        result = await self._legacy.end_session(LegacyRequest(path, headers, JsonNull.instance()))
        return await self._finish(send, result, QUIET, False)

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes | object:
        """The body, or a marker: :data:`_TOO_LARGE`, :data:`_TIMED_OUT` (body timeout) or :data:`_DRAINED`."""
        declared = headers.get("content-length")
        if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > self._max_body:
            return _TOO_LARGE  # refused before reading a byte
        grace = self._grace_signal()
        if grace.done():
            return _DRAINED
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        chunks: list[bytes] = []
        size = 0
        # One deadline for the whole body (a trickle cannot renew it); the end of the shutdown grace brings it
        # forward. Both only matter while receive() waits: they are armed on the loop's next turn, so a body that
        # is all there when the request starts (the common case) costs one call_soon handle, no timer.
        window = BodyWindow(task, loop.time() + self._limits.body_timeout_seconds, grace)
        arming = loop.call_soon(window.arm)
        try:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    break
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self._max_body:
                    return _TOO_LARGE  # stop reading at the limit
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        except asyncio.CancelledError:
            if window.cut is None or task.uncancel() > window.cancelling:
                raise  # not the window's: the server cancels the request
            return _DRAINED if window.cut == "grace" else _TIMED_OUT
        finally:
            arming.cancel()
            window.disarm()
        return b"".join(chunks)

    async def _respond(
        self, request: HttpRequest | LegacyRequest, receive: Receive, send: Send
    ) -> DispatchResult | None:
        # The dispatch runs in this request's own task: no task per request for it and no wait on a set of
        # futures. A disconnect (seen by a watcher task) or the end of the shutdown grace cancels this task;
        # progress frames are written by a writer task started only when a handler streams. The watcher starts
        # on the loop's next turn, so a dispatch that never suspends (the common small request) needs none: a
        # disconnect is then seen one turn later at most.
        task = asyncio.current_task()
        assert task is not None
        exchange = Exchange(send, task)
        channel = exchange.channel
        grace = self._grace_signal()
        start_watching = asyncio.get_running_loop().call_soon(exchange.watch, receive)
        grace.add_done_callback(exchange.on_grace)
        try:
            if isinstance(request, HttpRequest):
                result = await self._modern.dispatch(request, channel)
            else:  # a 2025-era message: server-to-client requests go out as frames of this response's stream
                assert self._legacy is not None
                result = await self._legacy.handle(request, channel)
        except asyncio.CancelledError:
            if exchange.stopped is None:
                exchange.abandon()
                raise  # not ours: the server cancels the request
            result = None
        except BaseException:
            exchange.abandon()
            raise
        finally:
            exchange.finished = True
            start_watching.cancel()
            grace.remove_done_callback(exchange.on_grace)
            exchange.unwatch()
        streaming = await exchange.writer_done()
        if exchange.stopped is not None:
            # Whatever the cancelled handler returned or raised, it is over: only this layer answers now.
            task.uncancel()
            if exchange.stopped == "disconnect":
                return DispatchResult(499, None, reason="client-disconnected")
            return await self._cancelled_by_shutdown(send, streaming, _request_id(request))
        assert result is not None
        return await self._finish(send, result, channel, streaming)

    async def _cancelled_by_shutdown(self, send: Send, streaming: bool, request_id: RequestId | None) -> DispatchResult:
        # The answer names the request it ends: a client waits for its own id (an id null answer matches nothing).
        body = encode_error(request_id, INTERNAL_ERROR, _CANCELLED_TEXT)
        if not streaming:
            headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return DispatchResult(503, None, reason="shutdown-cancelled", code=INTERNAL_ERROR)
        # The stream already committed 200: the error is its last frame.
        await send({"type": "http.response.body", "body": SSE_DATA + body + SSE_END})
        return DispatchResult(200, None, reason="shutdown-cancelled", code=INTERNAL_ERROR)

    async def _finish(self, send: Send, result: DispatchResult, channel: Channel, streaming: bool) -> DispatchResult:
        if result.body is None:
            await send({"type": "http.response.start", "status": result.status, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return result
        result = result.within(self._ceiling)
        body = result.body
        assert body is not None
        held = channel.frames if result.status == 200 else []
        if streaming or held:
            if not streaming:
                await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            prefix = b"".join(sse_frame(frame) for frame in held)
            await send({"type": "http.response.body", "body": prefix + SSE_DATA + body + SSE_END})
            return result
        headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())]
        headers.extend((name.encode("latin-1"), value.encode("latin-1")) for name, value in result.headers)
        await send({"type": "http.response.start", "status": result.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return result


_STATUS_TEXT: Final = {
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request body timeout",
    413: "Request body too large",
    503: "Service unavailable: shutting down",
}

_CANCELLED_TEXT: Final = "Server shutting down: request cancelled"
_NOT_READY_TEXT: Final = "Service unavailable: not ready"
_NO_SESSION_TEXT: Final = "Bad Request: Mcp-Session-Id header required"

#: Markers :meth:`McpAsgiApp._read_body` returns instead of a body.
_TOO_LARGE: Final = object()
_TIMED_OUT: Final = object()
_DRAINED: Final = object()
#: Markers :meth:`McpAsgiApp._parse` returns instead of a message.


def _checked_mounts(mounts: Mapping[str, ASGIApp], endpoint: str) -> tuple[tuple[str, ASGIApp], ...]:
    """The mounts as (prefix, app) pairs, after checking them (``ValueError``/``TypeError`` name the rule broken).

    A prefix is a normalized path that starts and ends with ``/`` (``/link/``), neither holds nor lies inside the
    endpoint path, and neither holds nor lies inside another prefix, so every request has at most one place to go.
    """
    if not isinstance(mounts, Mapping):
        raise TypeError("mounts takes a mapping of path prefix to ASGI app")
    if len(mounts) > MAX_MOUNTS:
        raise ValueError(f"at most {MAX_MOUNTS} mounts")
    pairs: list[tuple[str, ASGIApp]] = []
    for prefix, app in mounts.items():
        if not isinstance(prefix, str) or not callable(app):
            raise TypeError("mounts takes a mapping of path prefix to ASGI app")
        if not (len(prefix) > 1 and prefix.startswith("/") and prefix.endswith("/")):
            raise ValueError("a mount prefix starts and ends with '/' and is not '/' alone")
        try:
            normal = normalize_endpoint_path(prefix) + "/" == prefix
        except ValueError:
            normal = False
        if not normal:
            raise ValueError("a mount prefix is a normalized path (no '//', dot segments or escapes to decode)")
        if (endpoint + "/").startswith(prefix) or prefix.startswith(endpoint + "/"):
            raise ValueError("a mount prefix must not overlap the endpoint path")
        if any(prefix.startswith(other) or other.startswith(prefix) for other, _app in pairs):
            raise ValueError("mount prefixes must not overlap each other")
        pairs.append((prefix, app))
    return tuple(pairs)


def _request_id(request: HttpRequest | LegacyRequest) -> RequestId | None:
    """The JSON-RPC id of a request (``None`` when it has none or its body is too large to read again here)."""
    message: JsonValue | None = None
    if isinstance(request, LegacyRequest):
        message = request.message
    elif len(request.body) <= INLINE_BODY_BYTES:  # bounded work on the loop; a larger body keeps id null
        with contextlib.suppress(JsonError):
            message = parse(request.body)
    found = message.get("id") if isinstance(message, JsonObject) else None
    return found if isinstance(found, JsonString | JsonNumber) else None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
