"""The stdio transport: newline-delimited JSON-RPC over standard input and output, for hosts that launch a server
by command.

One connection per process: every line of the input is one JSON-RPC message, every line of the output is one.
Standard output carries protocol messages only; logs go to standard error (the caller configures logging so).

* **Lines** are bounded by the server's request body limit: a longer line is answered at once with a ``-32600``
  error (id null) and the rest of it is read and dropped, never held whole. Each line is parsed by
  :meth:`~soklet_core.mcp.server.engine.Engine.parse_body`, as an HTTP body is: on the event loop up to
  :data:`~soklet_core.json.limits.INLINE_BODY_BYTES`, larger ones in the engine's bounded workers (the reader
  waits for it). Invalid UTF-8 or JSON: ``-32700``, id null. That is the only parse of a line.
* **Requests run concurrently**, each in its own task, at most :data:`.MAX_INFLIGHT_PER_SESSION` (32)
  at a time; one more is answered ``-32603`` (busy) at once. Notifications, the client's responses and
  ``initialize`` are handled in input order, before the next line is read.
* **2026-07-28 messages** (``params._meta`` names the protocol version) are checked as a POST is, by the same
  rules, minus the header checks (stdio has no headers; none is made up): the envelope, ``_meta`` and the version,
  the method, the routing member and admission; then the :class:`~soklet_core.mcp.server.engine.Call` runs on the
  engine and its outcome is written as the 2026-07-28 wire writes it. Progress notifications are written as lines
  while the handler runs.
* **2025-era messages** (:func:`.is_legacy_message`): ``initialize`` creates the connection's one session
  in the engine's table, and the engine answers everything else of that session; its server-to-client requests
  (``elicitation/create``...) are written as lines and the client's responses, read as lines, are delivered to the
  session. A second ``initialize`` is refused (``-32600``).
* **Writes are serialized** through one writer task, so lines never interleave.
* **Admission** sees no headers: with the default policy every request is anonymous; a policy that needs a bearer
  token refuses every stdio request (401 becomes a JSON-RPC ``-32600`` ``Unauthorized`` line).
* **End of input** is the host's way to stop the server, but what it wrote before is answered: the requests still
  running get the end-of-input grace (the server's shutdown grace, 10 s by default) to finish and be written, as
  a server over stdio conventionally does (``echo REQUEST | server`` prints the answer); past the grace they are
  cancelled, and a request waiting for the client's answer to a server request (nobody can answer it now) within a
  second. Then what is queued is written and :meth:`StdioTransport.serve` returns: the process exits 0.
* **Input that the event loop cannot watch** (a regular file, ``/dev/null``) is read by one worker thread, a chunk
  at a time and only as fast as the lines are taken (the reader's own flow control), so ``< requests.txt`` and
  ``< /dev/null`` work like a pipe; a regular file as output is written directly (``> answers.jsonl``).
* One access-log line per answered request on ``soklet.mcp.access``, as the HTTP transport writes it, with
  ``transport=stdio``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import selectors
import stat
import threading
import time
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import BinaryIO, Final

from soklet_core.json import JsonNumber, JsonObject, JsonString, encode_wire
from soklet_core.mcp.model.context import RequestId
from soklet_core.mcp.server._jsonrpc import (
    INVALID_REQUEST,
    DispatchResult,
    McpError,
    busy_refusal,
    check_envelope,
    envelope_refusal,
)
from soklet_core.mcp.server.engine import CanonicalParams
from soklet_core.mcp.server.http._access_log import record_answer
from soklet_core.mcp.server.http._dispatch import HttpDispatch
from soklet_core.mcp.server.legacy._engine import SESSION_HEADER, LegacyProtocol, LegacyRequest
from soklet_core.mcp.server.legacy._sessions import MAX_INFLIGHT_PER_SESSION, LegacySession
from soklet_core.mcp.server.options import HttpOptions
from soklet_core.protection import normalize_endpoint_path
from soklet_core.protocol import PROTOCOL_VERSION_META_KEY

__all__ = ["StdioTransport", "open_pipe_streams"]

#: How much of the input is read at a time.
_READ_CHUNK: Final = 64 * 1024
#: Progress notifications queued for output beyond which more are dropped (a reader that does not keep up loses
#: progress, never answers).
_MAX_QUEUED_NOTIFICATIONS: Final = 1024

_META_VERSION: Final = PROTOCOL_VERSION_META_KEY
_DEFAULT_HTTP: Final = HttpOptions()
#: stdio has no headers: admission and era detection see none.
_NO_HEADERS: Final[Mapping[str, str]] = MappingProxyType({})

_logger = logging.getLogger("soklet.mcp.stdio")


class _Writer:
    """The one task that writes output lines, in the order they were queued."""

    __slots__ = ("_closed", "_notifications", "_queue", "_stream", "_task")

    def __init__(self, stream: asyncio.StreamWriter) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[tuple[bytes, bool] | None] = asyncio.Queue()
        self._notifications = 0
        self._closed = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    def line(self, message: bytes, *, droppable: bool = False) -> None:
        """Queue one encoded message (without its newline); a droppable one only while the queue is short."""
        if self._closed:
            return
        if droppable:
            if self._notifications >= _MAX_QUEUED_NOTIFICATIONS:
                return
            self._notifications += 1
        self._queue.put_nowait((message, droppable))

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            if item is None:
                return
            message, droppable = item
            if droppable:
                self._notifications -= 1
            try:
                self._stream.write(message + b"\n")
                await self._stream.drain()
            except (OSError, RuntimeError) as error:
                # The host closed our output: nobody reads answers any more; keep consuming the queue quietly.
                if not self._closed:
                    _logger.warning("standard output closed (%s): answers are dropped", type(error).__name__)
                self._closed = True

    async def close(self) -> None:
        """Write everything queued, then stop."""
        self._queue.put_nowait(None)
        await self._task


class _Progress:
    """The :class:`~soklet_core.mcp.server.engine.ProgressChannel` of one stdio request: frames become lines."""

    __slots__ = ("_held", "_writer", "allowed", "cancelled")

    def __init__(self, writer: _Writer) -> None:
        self._writer = writer
        self._held: list[JsonObject] = []
        self.allowed = False
        self.cancelled = False

    def allow_streaming(self) -> None:
        self.allowed = True
        held, self._held = self._held, []
        for frame in held:
            self._writer.line(encode_wire(frame), droppable=True)

    def progress(self, frame: JsonObject) -> None:
        if self.allowed:
            self._writer.line(encode_wire(frame), droppable=True)
        elif len(self._held) < _MAX_QUEUED_NOTIFICATIONS:
            self._held.append(frame)

    def release(self, result: DispatchResult) -> None:
        """Frames held back until the answer is known go out before a successful answer, as over HTTP."""
        if result.status == 200 and result.code is None:
            self.allow_streaming()


class _Lines:
    """The :class:`.ClientChannel` of a 2025-era request on stdio: server requests become output lines.

    Once the input has ended, nobody can answer a server request: the request that waits for one counts as
    cancelled (its round's wait sees it within a second), and a new one is not written."""

    __slots__ = ("_asked", "_connection", "_unanswerable")

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection
        self._asked: set[RequestId] = set()
        self._unanswerable = False

    @property
    def cancelled(self) -> bool:
        connection = self._connection
        if connection.closing or self._unanswerable:
            return True
        if not connection.input_ended or not self._asked:
            return False
        session = connection.session
        self._asked = {asked for asked in self._asked if session is not None and session.waiting_for(asked)}
        # Sticky: the round's cleanup forgets the request it waited for, and the request must still read as gone.
        self._unanswerable = bool(self._asked)
        return self._unanswerable

    def send(self, frame: JsonObject) -> None:
        request_id = frame.get("id")
        if isinstance(request_id, JsonString | JsonNumber):
            self._asked.add(request_id)
            if self._connection.input_ended:
                return  # it could never be answered: the request ends (see cancelled)
        # A server request must reach the client (its round waits for the answer); a notification may be dropped.
        self._connection.writer.line(encode_wire(frame), droppable=request_id is None)


class StdioTransport:
    """Serve one server over a pair of byte streams, one JSON-RPC message a line, in the eras the server speaks.

    ``StdioTransport(server.legacy_protocol, server.options.http)``: the server's
    :class:`.LegacyProtocol` holds all it needs (the engine, the eras, the session table, the endpoint
    path), and the HTTP options give the limits a line shares with a POST: ``max_request_body_bytes`` is the line
    limit, ``output_ceiling_bytes`` replaces a larger answer by a ``-32603`` error, and the shutdown grace
    (``limits.shutdown_grace_seconds``, 10 s by default) is how long requests still running at the end of the
    input may finish. Then ``await transport.serve(reader, writer)`` returns at the end of the input. Requests are
    bound to the endpoint path (a state sealed over stdio opens over stdio, or over HTTP at the same path and
    partition).

    A 2025-era ``initialize`` creates the connection's one session in the server's session table (a second
    ``initialize`` is refused with ``-32600``); from then on every message without a ``_meta`` protocol version
    belongs to it, the client's responses included. The session ends with the input. Idle sessions are swept only
    when another session is created: under ``soklet serve --stdio`` nothing else creates one, so the connection's
    session never expires; an engine that also serves HTTP applies its idle time and its eviction to it as to any
    session.
    """

    __slots__ = ("_ceiling", "_engine", "_grace", "_max_line", "_path")

    def __init__(self, engine: LegacyProtocol, http: HttpOptions = _DEFAULT_HTTP) -> None:
        if not isinstance(engine, LegacyProtocol):
            raise TypeError("StdioTransport takes the server's LegacyProtocol")
        if not isinstance(http, HttpOptions):
            raise TypeError("StdioTransport takes the server's HttpOptions")
        self._engine = engine
        self._path = normalize_endpoint_path(engine.endpoint_path)
        self._max_line = http.max_request_body_bytes
        self._ceiling = http.output_ceiling_bytes
        self._grace = float(http.limits.shutdown_grace_seconds)

    def __repr__(self) -> str:
        return (
            f"StdioTransport(max_line_bytes={self._max_line}, output_ceiling_bytes={self._ceiling}, "
            f"end_grace_seconds={self._grace:g})"
        )

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer the messages of ``reader`` on ``writer`` until the end of the input; then let what still runs
        finish within the end-of-input grace, cancel the rest, end the session, write what is queued and return
        (the writer stays open: it belongs to the caller). ``asyncio.CancelledError`` (the process is stopping)
        cancels what still runs at once, ends the session, writes what is queued, then propagates."""
        connection = _Connection(self._engine, self._path, self._ceiling, _Writer(writer))
        try:
            async for line in _lines(reader, self._max_line):
                if line is None:
                    connection.oversized(self._max_line)
                else:
                    await connection.receive(line)
            await connection.finish(self._grace)
        finally:
            await connection.close()


class _Connection:
    """The state of one stdio connection: its 2025-era session, the running requests and the output."""

    __slots__ = ("_ceiling", "_engine", "_path", "_session", "_tasks", "_wire", "closing", "input_ended", "writer")

    def __init__(self, engine: LegacyProtocol, path: str, ceiling: int, writer: _Writer) -> None:
        self._engine = engine
        # The 2026-07-28 rules and encoding, as a POST has them (the header checks are never run here).
        self._wire = HttpDispatch(engine.engine)
        self._path = path
        self._ceiling = ceiling
        self.writer = writer
        self._session: LegacySession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = False
        self.input_ended = False

    @property
    def session(self) -> LegacySession | None:
        """The connection's 2025-era session, once ``initialize`` made it."""
        return self._session

    async def finish(self, grace: float) -> None:
        """The input ended: the requests still running get ``grace`` seconds to finish (their answers are
        written); one that waits for the client's answer to a server request ends within a second, unanswered
        (nobody can answer it now)."""
        self.input_ended = True
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)

    async def close(self) -> None:
        """Cancel the requests still running, end the session, write what is queued."""
        self.closing = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            self._engine.sessions.remove(self._session.id)
        await self.writer.close()

    def _answer(self, result: DispatchResult, started: float) -> None:
        result = result.within(self._ceiling)
        body = result.body
        if body is not None:
            self.writer.line(body)
        record_answer(result, started, self._engine.engine.metrics, transport="stdio")

    def _refuse(self, error: McpError, started: float, request_id: RequestId | None = None) -> None:
        self._answer(DispatchResult.refused(error, request_id), started)

    def oversized(self, limit: int) -> None:
        """A line over the limit (already dropped): answered with id null."""
        error = McpError(INVALID_REQUEST, f"Message too large (over {limit} bytes)", log_reason="body-too-large")
        self._refuse(error, time.perf_counter())

    async def receive(self, line: bytes) -> None:
        """One input line: notifications, the client's responses and ``initialize`` are handled before the next
        line is read (their order matters); requests are started as tasks."""
        started = time.perf_counter()
        if not line.strip():
            return  # blank lines between messages are allowed
        try:
            message = await self._engine.engine.parse_body(line)
        except McpError as error:
            self._refuse(error, started)
            return
        if not isinstance(message, JsonObject):
            self._refuse(McpError(INVALID_REQUEST, "Invalid Request", log_reason="envelope"), started)
            return
        raw_id, method = message.get("id"), message.get("method")
        request_id = raw_id if isinstance(raw_id, JsonString | JsonNumber) else None
        engine = self._engine
        legacy = engine.is_legacy(_NO_HEADERS, message, legacy_connection=self._session is not None)
        if method is None and "id" in message and ("result" in message or "error" in message):
            # The client's answer to one of our requests: only a session has asked any.
            if legacy:
                self._answer(await self._legacy(message, len(line)), started)
            else:
                self._answer(DispatchResult(202, None, reason="response-unmatched"), started)
            return
        if not legacy and not engine.eras.modern:
            if _META_VERSION not in _meta(message):
                legacy = True  # a legacy-only server: the engine asks for initialize
            elif request_id is None:
                return  # a notification gets no answer, not even a refusal
            else:
                self._answer(engine.refuse_modern(message), started)
                return
        if request_id is None or (legacy and self._session is None):
            # Notifications (and a request without a usable id, refused at once) are answered in input order; a
            # 2025-era message before the session exists (initialize) must make it before the next line is read.
            self._answer(await self._run(message, line, legacy, None), started)
            return
        if len(self._tasks) >= MAX_INFLIGHT_PER_SESSION:
            self._refuse(busy_refusal("Server busy: too many requests in flight"), started, request_id)
            return
        task = asyncio.get_running_loop().create_task(self._task(message, line, legacy, started))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _task(self, message: JsonObject, line: bytes, legacy: bool, started: float) -> None:
        self._answer(await self._run(message, line, legacy, _Lines(self)), started)

    async def _run(self, message: JsonObject, line: bytes, legacy: bool, channel: _Lines | None) -> DispatchResult:
        if legacy:
            return await self._legacy(message, len(line), channel)
        return await self._modern(message, len(line))

    async def _legacy(self, message: JsonObject, size: int, channel: _Lines | None = None) -> DispatchResult:
        request = LegacyRequest(self._path, _NO_HEADERS, message, self._session, size)
        result = await self._engine.handle(request, channel)
        if self._session is None and result.status == 200:
            session_id = dict(result.headers).get(SESSION_HEADER)
            if session_id is not None:
                self._session = self._engine.sessions.get(session_id)
        return result

    async def _modern(self, message: JsonObject, size: int) -> DispatchResult:
        # The checks of a POST but the header ones (their one home, HttpDispatch), then the engine.
        wire = self._wire
        try:
            envelope = check_envelope(message)
        except McpError as error:
            return DispatchResult.refused(error)
        if envelope is None:
            return DispatchResult(202, None, reason="notification")
        method = envelope.method
        if method is None:
            return DispatchResult.refused(envelope_refusal(), envelope.request_id)
        params = envelope.message.get("params")
        # The line's params digest, from the canonical params (taken only if a protected state needs it).
        digest = CanonicalParams(params if isinstance(params, JsonObject) else JsonObject.empty_instance(), size)
        progress = _Progress(self.writer)
        try:
            result = await wire.answer(self._path, None, envelope, method, digest, progress, transport="pipe")
        except asyncio.CancelledError:
            progress.cancelled = True
            raise
        progress.release(result)
        return result


def _meta(message: JsonObject) -> JsonObject:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, JsonObject) else None
    return meta if isinstance(meta, JsonObject) else JsonObject.empty_instance()


async def open_pipe_streams(
    read_from: BinaryIO | None, write_to: BinaryIO
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Asyncio streams over two files of this process: ``read_from`` becomes the reader, ``write_to`` the writer
    (standard input and output for ``soklet serve --stdio``; ``os.pipe`` ends in tests).

    A pipe, socket or terminal is watched by the event loop. Any other input (a regular file, ``/dev/null``, which
    epoll refuses) is read by a worker thread (:class:`_ThreadedInput`); ``None`` (standard input closed) is an
    input that has already ended. The writer is a pipe, socket or character device watched by the loop, or a
    regular file written directly (:class:`_FileOutput`)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READ_CHUNK, loop=loop)
    if read_from is None:
        reader.feed_eof()
    elif _watchable(read_from.fileno()):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), read_from)
    else:
        _ThreadedInput(read_from.fileno(), reader, loop).start()
    protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop)
    transport: asyncio.WriteTransport
    if stat.S_ISREG(os.fstat(write_to.fileno()).st_mode):
        transport = _FileOutput(write_to.fileno())
    else:
        transport, _ = await loop.connect_write_pipe(lambda: protocol, write_to)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


class _FileOutput(asyncio.WriteTransport):
    """The write side over a regular file (``> answers.jsonl``), which the event loop cannot watch: a file takes
    every write at once, so each line is written whole where it is queued (one answer, bounded by the output
    ceiling)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        # The descriptor belongs to the caller (standard output): it stays open.
        self._closing = True


def _watchable(fd: int) -> bool:
    """Whether the event loop can watch ``fd`` for reading (a pipe, a socket, a terminal; not a regular file and
    not ``/dev/null``, which epoll refuses)."""
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
    except (OSError, ValueError):
        return False
    return True


class _ThreadedInput:
    """Feeds a :class:`asyncio.StreamReader` from a file the event loop cannot watch, on one daemon thread.

    It stands as the reader's transport, so the reader's own flow control applies: past twice the reader's limit
    buffered it calls :meth:`pause_reading` and the thread waits until the lines are taken. The thread also waits
    for each chunk to reach the reader before it reads the next, so at most one chunk is in between."""

    __slots__ = ("_fd", "_go", "_loop", "_reader", "_thread")

    def __init__(self, fd: int, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop) -> None:
        self._fd = fd
        self._reader = reader
        self._loop = loop
        self._go = threading.Event()
        self._go.set()
        self._thread = threading.Thread(target=self._run, name="soklet-stdin", daemon=True)
        reader.set_transport(self)  # type: ignore[arg-type]

    def start(self) -> None:
        """Start reading."""
        self._thread.start()

    def pause_reading(self) -> None:
        """The reader holds enough (called on the loop)."""
        self._go.clear()

    def resume_reading(self) -> None:
        """The reader was drained (called on the loop)."""
        self._go.set()

    def _run(self) -> None:
        fed = threading.Event()

        def feed(chunk: bytes) -> None:
            if chunk:
                self._reader.feed_data(chunk)
            else:
                self._reader.feed_eof()
            fed.set()

        while True:
            self._go.wait()
            try:
                chunk = os.read(self._fd, _READ_CHUNK)
            except OSError:
                chunk = b""  # an input that fails to read has ended
            fed.clear()
            try:
                self._loop.call_soon_threadsafe(feed, chunk)
            except RuntimeError:
                return  # the loop is closed: nobody reads any more
            if not chunk:
                return
            fed.wait()


async def _lines(reader: asyncio.StreamReader, limit: int) -> AsyncIterator[bytes | None]:
    """The input's lines without their newline, each at most ``limit`` bytes; ``None`` for a longer one, given as
    soon as it passes the limit (its rest is then read and dropped, never held). A last line without a newline
    counts."""
    buffer = bytearray()
    dropping = False
    while True:
        chunk = await reader.read(_READ_CHUNK)
        if not chunk:
            if buffer and not dropping:
                yield bytes(buffer)
            return
        start = 0
        while start <= len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not dropping:
                if len(buffer) + len(piece) > limit:
                    buffer.clear()
                    dropping = True
                    yield None
                else:
                    buffer += piece
            if end < 0:
                break
            if not dropping:
                line = bytes(buffer)
                buffer.clear()
                yield line
            dropping = False
            start = end + 1
