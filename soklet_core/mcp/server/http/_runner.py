"""The HTTP edge of an :class:`.McpServer` on uvicorn: limits, timeouts, the connection cap and the drain.

Every limit the HTTP server itself enforces is enforced here (the body limit and the output ceiling live with the
JSON codec; the endpoint path bound with the path rules). :class:`HttpLimits` holds them with named defaults and
bounds (its home is the server's options, ``_options``);
:func:`uvicorn_config` and :func:`uvicorn_server_class` turn an app built with those limits into a hardened
uvicorn server (uvloop + httptools). ``soklet serve`` and the test suite run exactly this.

>>> limits = HttpLimits(header_timeout_seconds=5.0)
>>> limits.max_head_bytes == DEFAULT_MAX_HEAD_BYTES
True

Serving a library app (uvicorn is imported only when these functions are called)::

    config = uvicorn_config(server.asgi_app())
    uvicorn_server_class()(config).run()

What each limit does, and what the client sees:

* the request head (request line and header fields, as they arrive on the wire) is counted before the parser
  buffers it: more than ``max_head_bytes`` → ``431`` with a JSON-RPC error body, and the connection closes;
* a head not complete ``header_timeout_seconds`` after the connection opened (or after the first byte of a later
  request on a kept-alive connection) → the connection closes without an answer;
* a body not complete ``body_timeout_seconds`` after its head → ``408`` with a JSON-RPC error, connection closed
  (the transport enforces it with bounded waits on ``receive()``);
* an idle kept-alive connection closes after ``keep_alive_timeout_seconds``;
* more than ``max_connections`` open connections → the new one gets ``503`` with a JSON-RPC error and is closed
  at once (uvicorn's own ``limit_concurrency`` only looks once a head is complete, so it cannot bound slow heads);
* a stop: the app drains at once (new requests ``503``), requests still running ``shutdown_grace_seconds`` later
  are cancelled and answered ``503`` (JSON-RPC); uvicorn's own timeout is that grace plus
  :data:`SHUTDOWN_MARGIN_SECONDS`, so its bare-text ``500`` never fires.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Final, cast

from soklet_core.mcp.server._jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, encode_error
from soklet_core.mcp.server.options import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEADER_TIMEOUT_SECONDS,
    DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEAD_BYTES,
    MAX_CONNECTIONS_CEILING,
    MAX_HEAD_BYTES_CEILING,
    MAX_TIMEOUT_SECONDS,
    MIN_HEAD_BYTES,
    SHUTDOWN_MARGIN_SECONDS,
    HttpLimits,
)
from soklet_core.protocol import DEFAULT_SHUTDOWN_GRACE_SECONDS

if TYPE_CHECKING:
    import uvicorn

__all__ = [
    "DEFAULT_BODY_TIMEOUT_SECONDS",
    "DEFAULT_HEADER_TIMEOUT_SECONDS",
    "DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_HEAD_BYTES",
    "DEFAULT_SHUTDOWN_GRACE_SECONDS",
    "MAX_CONNECTIONS_CEILING",
    "MAX_HEAD_BYTES_CEILING",
    "MAX_TIMEOUT_SECONDS",
    "MIN_HEAD_BYTES",
    "SHUTDOWN_MARGIN_SECONDS",
    "HttpLimits",
    "limited_uvicorn_config",
    "run_together",
    "serve_together",
]


def _refusal(status: int, phrase: str, code: int, message: str) -> bytes:
    """A complete ``Connection: close`` HTTP/1.1 response with a JSON-RPC error body, written by the protocol."""
    body = encode_error(None, code, message)
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\ncache-control: no-store\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


_HEAD_TOO_LARGE: Final = _refusal(
    431, "Request Header Fields Too Large", INVALID_REQUEST, "Request header fields too large"
)
_TOO_MANY_CONNECTIONS: Final = _refusal(503, "Service Unavailable", INTERNAL_ERROR, "Too many connections")

_protocol_classes: dict[HttpLimits, type[asyncio.Protocol]] = {}


def http_protocol_class(limits: HttpLimits) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with ``limits`` applied (head size, header timeout, keep-alive, cap)."""
    cached = _protocol_classes.get(limits)
    if cached is not None:
        return cached
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class LimitedHttpToolsProtocol(HttpToolsProtocol):
        """Counts head bytes before httptools buffers them, times out slow heads and caps connections."""

        soklet_limits: ClassVar[HttpLimits] = limits

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # uvicorn types its keep-alive as int but only hands it to call_later, which takes float seconds.
            self.timeout_keep_alive = self.soklet_limits.keep_alive_timeout_seconds  # type: ignore[assignment]
            self._in_head = True
            self._head_bytes = 0
            self._head_timer: asyncio.TimerHandle | None = None
            self._refused = False

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            if len(self.connections) >= self.soklet_limits.max_connections:
                # Refused before it counts: the answer and the close are queued at once, nothing is read.
                self._refused = True
                # uvloop's transports are not asyncio.Transport subclasses, only alike: a cast, not a check.
                self.transport = cast(asyncio.Transport, transport)
                self.transport.write(_TOO_MANY_CONNECTIONS)
                self.transport.close()
                return
            super().connection_made(transport)  # type: ignore[arg-type]
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            if self._refused:
                return
            super().connection_lost(exc)

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(self.soklet_limits.header_timeout_seconds, self._head_timed_out)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self._in_head and not self.transport.is_closing():
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            if self._refused or self.transport.is_closing():
                return
            if not self._in_head:
                super().data_received(data)
                return
            room = self.soklet_limits.max_head_bytes - self._head_bytes
            if len(data) <= room:
                self._head_bytes += len(data)
                super().data_received(data)
                return
            # The head may still end within the room left: let the parser see exactly that much first.
            self._head_bytes = self.soklet_limits.max_head_bytes
            if room:
                super().data_received(data[:room])
            if self.transport.is_closing():
                return
            if self._head_pending():  # the parser did not reach the end of the head within the limit
                self._refuse_head()
                return
            super().data_received(data[room:])

        def _head_pending(self) -> bool:
            return self._in_head

        def _refuse_head(self) -> None:
            self._cancel_head_timer()
            if self.cycle is None or self.cycle.response_complete:
                self.transport.write(_HEAD_TOO_LARGE)
            # else a pipelined head overflowed while an answer is being written: closing is all that is safe.
            self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._head_timer is None:
                self._arm_head_timer()

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._cancel_head_timer()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            # Whatever follows this message on the connection is the head of the next one. Its bytes that came in
            # the same read as this message's end are not counted: the bound is the limit plus one read (uvloop
            # reads at most 256 KiB), and a pipelined request waits with reading paused anyway.
            self._in_head = True
            self._head_bytes = 0
            super().on_message_complete()

    _protocol_classes[limits] = LimitedHttpToolsProtocol
    return LimitedHttpToolsProtocol


def limited_uvicorn_config(app: Any, limits: HttpLimits, **options: Any) -> uvicorn.Config:
    """A hardened ``uvicorn.Config`` for any ASGI ``app`` (the admin listener's) under ``limits``.

    The same protocol, head limit, timeouts and connection cap as the MCP listener; ``options`` (TLS files,
    ``log_level``…) go to ``uvicorn.Config`` but cannot override a limit.
    """
    import uvicorn

    fixed = {
        "http",
        "timeout_keep_alive",
        "timeout_graceful_shutdown",
        "limit_concurrency",
        "h11_max_incomplete_event_size",
    }
    clash = fixed.intersection(options)
    if clash:
        raise ValueError("set the HTTP limits with ServerOptions(http=HttpOptions(limits=...)), not uvicorn options")
    settings: dict[str, Any] = {"loop": "uvloop", "lifespan": "on", "access_log": False}
    settings.update(options)
    return uvicorn.Config(
        app,
        http=http_protocol_class(limits),
        timeout_keep_alive=math.ceil(limits.keep_alive_timeout_seconds),
        timeout_graceful_shutdown=limits.uvicorn_shutdown_timeout_seconds,
        **settings,
    )


async def serve_together(
    primary: uvicorn.Server, primary_sockets: list[Any], others: list[tuple[uvicorn.Server, list[Any]]]
) -> None:
    """Run ``primary`` and ``others`` on one event loop; a stop of any one stops them all.

    Only ``primary`` handles stop signals (uvicorn installs its handlers per server, and the last one would win);
    when it ends, the others are told to exit, and when one of the others ends (stopped or failed to start), the
    primary is too.
    """
    for server, _ in others:
        # Signals belong to the primary: a second handler would replace its own.
        server.capture_signals = _no_signals  # type: ignore[method-assign]

    async def run_other(server: uvicorn.Server, sockets: list[Any]) -> None:
        try:
            await server.serve(sockets=sockets)
        finally:
            primary.should_exit = True

    tasks = [asyncio.ensure_future(run_other(server, sockets)) for server, sockets in others]
    try:
        await primary.serve(sockets=primary_sockets)
    finally:
        for server, _ in others:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)


def run_together(
    primary: uvicorn.Server, primary_sockets: list[Any], others: list[tuple[uvicorn.Server, list[Any]]]
) -> None:
    """:func:`serve_together` on a new event loop of the primary's kind (uvloop), as ``uvicorn.Server.run`` does."""
    with asyncio.Runner(loop_factory=primary.config.get_loop_factory()) as runner:
        runner.run(serve_together(primary, primary_sockets, others))


@contextlib.contextmanager
def _no_signals() -> Iterator[None]:
    yield
