"""One HTTP exchange of the transport while it runs: the ASGI types, the response stream (plain JSON or SSE
frames), the body read's deadline window, the client-disconnect watch and the progress writer.

:class:`~soklet_core.mcp.server.http._transport.McpAsgiApp` decides what to answer; this module holds how an
answer in progress is written and stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final, TypeAlias

from soklet_core.json import JsonObject, JsonValue, encode_wire

__all__ = [
    "QUIET",
    "SSE_DATA",
    "SSE_END",
    "SSE_HEADERS",
    "ASGIApp",
    "BodyWindow",
    "Channel",
    "Exchange",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "SentTracker",
    "sse_frame",
    "stream_frames",
    "wait_disconnect",
]

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
#: A plain ASGI 3 application (what a mount serves).
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]

SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class Channel:
    """The frames of one request's response stream, between the protocol logic and the response writer.

    Progress frames (from a handler, via the engine) are held until streaming is allowed; a frame sent with
    :meth:`send` (a server-to-client request of a 2025-era session, which the client must see to answer) allows
    streaming itself. ``ready`` is called (on the event loop) whenever frames may be streamed: frames are held
    and streaming is allowed. The stream starts lazily, at the first frame written: a request that streams
    nothing gets a plain JSON answer.
    """

    __slots__ = ("_ready", "allowed", "cancelled", "frames")

    def __init__(self, ready: Callable[[], None]) -> None:
        self.cancelled = False
        self.allowed = False
        self.frames: list[JsonObject] = []
        self._ready = ready

    def allow_streaming(self) -> None:
        self.allowed = True
        if self.frames:
            self._ready()

    def progress(self, frame: JsonObject) -> None:
        self.frames.append(frame)
        if self.allowed:
            self._ready()

    def send(self, frame: JsonObject) -> None:
        """Queue one JSON-RPC message to the client (never blocks): it commits the response as SSE."""
        self.frames.append(frame)
        self.allowed = True
        self._ready()


def _nothing() -> None:
    """No frames to write."""


#: The channel of an answer given without running anything (no frames are ever held in it).
QUIET: Final = Channel(_nothing)

SSE_DATA: Final = b"event: message\ndata: "
SSE_END: Final = b"\n\n"


def sse_frame(message: JsonValue) -> bytes:
    """One ``event: message`` frame of the response stream."""
    return SSE_DATA + encode_wire(message) + SSE_END


async def stream_frames(send: Send, channel: Channel, started: bool) -> bool:
    """Write the frames held in ``channel`` as SSE (starting the response if it has not started); ``True``."""
    if not started:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    frames, channel.frames = channel.frames, []
    await send(
        {"type": "http.response.body", "body": b"".join(sse_frame(frame) for frame in frames), "more_body": True}
    )
    return True


class BodyWindow:
    """The body read's deadline and the end of the shutdown grace, armed only once the read has waited a turn.

    Either cancels the reading task once (``cut`` says which: ``"deadline"`` or ``"grace"``); the reader takes the
    cancellation back (``Task.uncancel``) unless the task was also cancelled from outside, as ``asyncio.timeout``
    does.
    """

    __slots__ = ("_deadline", "_grace", "_task", "_timer", "cancelling", "cut")

    def __init__(self, task: asyncio.Task[Any], deadline: float, grace: asyncio.Future[None]) -> None:
        self._task = task
        self._deadline = deadline
        self._grace = grace
        self._timer: asyncio.TimerHandle | None = None
        self.cancelling = task.cancelling()
        self.cut: str | None = None

    def arm(self) -> None:
        """The read is still waiting: start the deadline's timer and follow the grace."""
        self._timer = asyncio.get_running_loop().call_at(self._deadline, self._expire, "deadline")
        self._grace.add_done_callback(self._on_grace)

    def disarm(self) -> None:
        """The read is over (armed or not)."""
        if self._timer is not None:
            self._timer.cancel()
            self._grace.remove_done_callback(self._on_grace)

    def _on_grace(self, _grace: asyncio.Future[None]) -> None:
        self._expire("grace")

    def _expire(self, why: str) -> None:
        if self.cut is None:
            self.cut = why
            self._task.cancel()


class Exchange:
    """The response side of one request while its dispatch runs: who stopped it, and the progress writer."""

    __slots__ = ("_send", "_task", "_watcher", "_writer", "channel", "finished", "stopped", "streaming")

    def __init__(self, send: Send, task: asyncio.Task[Any]) -> None:
        self._send = send
        self._task = task
        self._writer: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self.channel = Channel(self._frames_ready)
        self.finished = False
        self.stopped: str | None = None
        self.streaming = False

    def _stop(self, why: str) -> None:
        if self.stopped is None and not self.finished:
            self.stopped = why
            self.channel.cancelled = True
            self._task.cancel()

    def watch(self, receive: Receive) -> None:
        """Start watching for the client's disconnect (the dispatch is still running)."""
        if not self.finished:
            self._watcher = asyncio.get_running_loop().create_task(wait_disconnect(receive))
            self._watcher.add_done_callback(self.on_disconnect)

    def unwatch(self) -> None:
        """Stop watching: the dispatch is over."""
        if self._watcher is not None:
            self._watcher.remove_done_callback(self.on_disconnect)
            self._watcher.cancel()

    def on_disconnect(self, watcher: asyncio.Task[None]) -> None:
        """The watcher ended: the client is gone (a receive failure counts as gone)."""
        if not watcher.cancelled():
            watcher.exception()  # retrieved: its failure means the same as a disconnect
            self._stop("disconnect")

    def on_grace(self, _grace: asyncio.Future[None]) -> None:
        """The shutdown grace is over: the running request is cancelled and answered 503."""
        self._stop("grace")

    def _frames_ready(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        channel = self.channel
        while channel.frames and not self.finished and self.stopped is None:
            self.streaming = await stream_frames(self._send, channel, self.streaming)

    async def writer_done(self) -> bool:
        """Wait for the progress writer (if one ran); whether the response is committed as SSE."""
        if self._writer is not None:
            await self._writer
        return self.streaming

    def abandon(self) -> None:
        """The request is cancelled from outside: stop the writer too."""
        if self._writer is not None:
            self._writer.cancel()


class SentTracker:
    """Wraps ``send`` to remember whether the response has started (so a late cancellation can still answer)."""

    __slots__ = ("_send", "started")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    def __call__(self, message: Message) -> Awaitable[None]:
        # The server's own awaitable is handed back: no coroutine of this wrapper per message.
        if message["type"] == "http.response.start":
            self.started = True
        return self._send(message)


async def wait_disconnect(receive: Receive) -> None:
    """Return once the client has disconnected."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
