"""The Streamable HTTP transport: a raw ASGI 3 application around a :class:`~.dispatcher.Dispatcher`.

This is the only module of ``soklet_core`` that speaks ASGI. It owns the HTTP side of the protocol:

* one endpoint (default ``/mcp``), POST only (GET, DELETE and the rest: 405; other paths: 404);
* ``Host`` and ``Origin`` allow-lists (``localhost``, ``127.0.0.1`` and ``[::1]`` with any port, plus configured
  values): a bad ``Host`` or a present-and-bad ``Origin`` is refused with 403 before the body is read;
* the request body limit (10 MiB by default, at most 16 MiB), read incrementally and refused with 413 as soon as
  it is exceeded (or at once when ``Content-Length`` says so);
* the 4 MiB response output ceiling: a larger answer becomes a ``-32603`` error;
* compact single-line JSON responses, or request-scoped SSE (``event: message`` frames, ``X-Accel-Buffering:
  no``) once a handler reports progress on a request with a ``progressToken`` and no unmet CONDITIONAL
  capability holds the response uncommitted;
* 202 for notifications;
* client disconnect cancels the handler cooperatively (task cancellation plus ``InvocationFeatures.cancelled``);
* graceful shutdown through the ASGI lifespan protocol: in-flight requests finish, new ones get 503;
* one access-log line per request on logger ``soklet.mcp.access``:
  ``method=… operation=… status=… code=… duration_ms=… [reason=…]``. Only known method names, registered
  operation names and bounded reasons appear: never tokens, headers, params or other raw input.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Final, TypeAlias
from urllib.parse import urlsplit

from soklet_core.json import (
    DEFAULT_REQUEST_BODY_BYTES,
    MAX_REQUEST_BODY_BYTES,
    RESPONSE_OUTPUT_CEILING_BYTES,
    JsonObject,
    JsonValue,
    serialize,
)
from soklet_core.protection import normalize_endpoint_path

from .dispatcher import INTERNAL_ERROR, INVALID_REQUEST, Dispatcher, DispatchResult, HttpRequest, error_response

__all__ = ["LOCAL_HOSTS", "McpAsgiApp"]

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]

_access_log = logging.getLogger("soklet.mcp.access")
_logger = logging.getLogger("soklet.mcp")

#: Host names always allowed in ``Host`` and ``Origin`` (with any port).
LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})

_JSON_HEADERS: Final = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class _Channel:
    """Progress frames of one request, between the handler (via the dispatcher) and the response writer."""

    __slots__ = ("_signal", "allowed", "cancelled", "frames")

    def __init__(self) -> None:
        self.cancelled = False
        self.allowed = False
        self.frames: list[JsonObject] = []
        self._signal: asyncio.Future[None] | None = None

    def arm(self) -> asyncio.Future[None]:
        self._signal = asyncio.get_running_loop().create_future()
        if self.allowed and self.frames:
            self._signal.set_result(None)
        return self._signal

    def _wake(self) -> None:
        if self._signal is not None and not self._signal.done():
            self._signal.set_result(None)

    def allow_streaming(self) -> None:
        self.allowed = True
        if self.frames:
            self._wake()

    def progress(self, frame: JsonObject) -> None:
        self.frames.append(frame)
        if self.allowed:
            self._wake()


def _sse_frame(message: JsonValue) -> bytes:
    return b"event: message\ndata: " + serialize(message).encode("utf-8") + b"\n\n"


class McpAsgiApp:
    """The ASGI 3 application of one MCP endpoint. Build it with ``McpServer.asgi_app()``."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        path: str = "/mcp",
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        max_request_body_bytes: int = DEFAULT_REQUEST_BODY_BYTES,
        output_ceiling_bytes: int = RESPONSE_OUTPUT_CEILING_BYTES,
        shutdown_grace_seconds: float = 10.0,
    ) -> None:
        if not 0 < max_request_body_bytes <= MAX_REQUEST_BODY_BYTES:
            raise ValueError(f"the request body limit must be between 1 and {MAX_REQUEST_BODY_BYTES} bytes")
        if output_ceiling_bytes <= 0:
            raise ValueError("the output ceiling must be positive")
        self._dispatcher = dispatcher
        self._path = normalize_endpoint_path(path)
        self._hosts = frozenset(host.strip().lower() for host in allowed_hosts)
        self._origins = frozenset(origin.strip().lower().rstrip("/") for origin in allowed_origins)
        self._max_body = max_request_body_bytes
        self._ceiling = output_ceiling_bytes
        self._grace = shutdown_grace_seconds
        self._active = 0
        self._idle: asyncio.Event | None = None
        self._draining = False

    @property
    def path(self) -> str:
        """The normalized endpoint path."""
        return self._path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    # ------------------------------------------------------------------------------------------------ lifespan

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self._draining = True
                if self._active:
                    self._idle = asyncio.Event()
                    try:
                        await asyncio.wait_for(self._idle.wait(), self._grace)
                    except TimeoutError:
                        _logger.warning("shutdown: %d requests still running after the grace period", self._active)
                await send({"type": "lifespan.shutdown.complete"})
                return

    # ------------------------------------------------------------------------------------------------ checks

    def _host_allowed(self, host: str | None) -> bool:
        if host is None:
            return False
        name = _host_name(host)
        return name in LOCAL_HOSTS or name in self._hosts or host.strip().lower() in self._hosts

    def _origin_allowed(self, origin: str) -> bool:
        normalized = origin.strip().lower().rstrip("/")
        if normalized in self._origins:
            return True
        try:
            parts = urlsplit(normalized)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc or "@" in parts.netloc:
            return False
        return _host_name(parts.netloc) in LOCAL_HOSTS

    # ------------------------------------------------------------------------------------------------ http

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        self._active += 1
        try:
            result = await self._handle(scope, receive, send)
        finally:
            self._active -= 1
            if self._active == 0 and self._idle is not None:
                self._idle.set()
        if result is not None:
            self._log(result, started)

    def _log(self, result: DispatchResult, started: float) -> None:
        if not _access_log.isEnabledFor(logging.INFO):
            return
        duration = (time.perf_counter() - started) * 1000
        _access_log.info(
            "method=%s operation=%s status=%d code=%s duration_ms=%.1f%s",
            result.method or "-",
            result.operation or "-",
            result.status,
            result.code if result.code is not None else "-",
            duration,
            "" if result.reason is None else f" reason={result.reason}",
        )

    async def _plain(
        self, send: Send, status: int, reason: str, extra: list[tuple[bytes, bytes]] | None = None
    ) -> DispatchResult:
        body = serialize(error_response(None, INVALID_REQUEST, _STATUS_TEXT.get(status, "Refused"))).encode()
        headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()), *(extra or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return DispatchResult(status, None, reason=reason)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> DispatchResult | None:
        try:
            path = normalize_endpoint_path(scope["path"])
        except ValueError:
            path = None
        if path != self._path:
            return await self._plain(send, 404, "not-found")
        if scope["method"] != "POST":
            return await self._plain(send, 405, "method-not-allowed", [(b"allow", b"POST")])
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        if not self._host_allowed(headers.get("host")):
            return await self._plain(send, 403, "host")
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin):
            return await self._plain(send, 403, "origin")
        if self._draining:
            return await self._plain(send, 503, "shutting-down")
        body = await self._read_body(headers, receive)
        if body is None:
            return await self._plain(send, 413, "body-too-large")
        return await self._respond(HttpRequest(scope["path"], headers, body), receive, send)

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes | None:
        declared = headers.get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self._max_body:
            return None  # refused before reading a byte
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max_body:
                return None  # stop reading at the limit
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _respond(self, request: HttpRequest, receive: Receive, send: Send) -> DispatchResult | None:
        loop = asyncio.get_running_loop()
        channel = _Channel()
        task = loop.create_task(self._dispatcher.dispatch(request, channel))
        watcher = loop.create_task(_wait_disconnect(receive))
        streaming = False
        signal = channel.arm()
        try:
            while True:
                signal = channel.arm()
                await asyncio.wait((task, watcher, signal), return_when=asyncio.FIRST_COMPLETED)
                if watcher.done() and not task.done():
                    channel.cancelled = True
                    task.cancel()
                    # Whatever the cancelled handler raised, the client is gone: nothing more is sent.
                    with contextlib.suppress(Exception, asyncio.CancelledError):
                        await task
                    return DispatchResult(499, None, reason="client-disconnected")
                if channel.allowed and channel.frames and not task.done():
                    streaming = await self._stream(send, channel, streaming)
                if task.done():
                    break
        finally:
            watcher.cancel()
            signal.cancel()
        result = task.result()
        return await self._finish(send, result, channel, streaming)

    async def _stream(self, send: Send, channel: _Channel, started: bool) -> bool:
        if not started:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        frames, channel.frames = channel.frames, []
        await send(
            {"type": "http.response.body", "body": b"".join(_sse_frame(frame) for frame in frames), "more_body": True}
        )
        return True

    def _bounded(self, result: DispatchResult) -> tuple[DispatchResult, bytes]:
        assert result.message is not None
        body = serialize(result.message).encode("utf-8")
        if len(body) <= self._ceiling:
            return result, body
        request_id = result.message.get("id")
        replaced = error_response(request_id, INTERNAL_ERROR, "Response too large")
        _logger.error("response over the %d-byte output ceiling replaced by an error", self._ceiling)
        result = DispatchResult(
            200,
            replaced,
            method=result.method,
            operation=result.operation,
            reason="output-ceiling",
            code=INTERNAL_ERROR,
        )
        return result, serialize(replaced).encode("utf-8")

    async def _finish(self, send: Send, result: DispatchResult, channel: _Channel, streaming: bool) -> DispatchResult:
        if result.message is None:
            await send({"type": "http.response.start", "status": result.status, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return result
        result, body = self._bounded(result)
        held = channel.frames if result.status == 200 else []
        if streaming or held:
            if not streaming:
                await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            prefix = b"".join(_sse_frame(frame) for frame in held)
            await send({"type": "http.response.body", "body": prefix + b"event: message\ndata: " + body + b"\n\n"})
            return result
        headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())]
        headers.extend((name.encode("latin-1"), value.encode("latin-1")) for name, value in result.headers)
        await send({"type": "http.response.start", "status": result.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return result


_STATUS_TEXT: Final = {
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Request body too large",
    503: "Service Unavailable",
}


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
