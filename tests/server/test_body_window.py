"""The body read's deadline and shutdown-grace cut, driven straight into the ASGI app on a real event loop.

The deadline and the grace are armed only once the read has waited a loop turn: a body that is all there when the
request starts costs no timer; a body that waits still gets its deadline (408) or the grace's cut (503); a
cancellation from outside during the read stays the caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import pytest

from soklet_core.json import JsonObject
from soklet_core.mcp import CallToolResult, McpServer, Registry, RequestContext, ServerOptions, tool
from soklet_core.mcp.server.options import HttpLimits, HttpOptions
from soklet_core.protocol import DEFAULT_ENDPOINT_PATH, PROTOCOL_VERSION

WAIT_BOUND_SECONDS = 60.0


@tool(name="echo", description="Answers ok.", input_schema={"type": "object"}, blocking=False)
def echo(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    return CallToolResult.from_text("ok")


BODY = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},'
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"' + PROTOCOL_VERSION.encode() + b'",'
    b'"io.modelcontextprotocol/clientCapabilities":{}}}}'
)
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"mcp-protocol-version", PROTOCOL_VERSION.encode()),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"echo"),
    (b"content-type", b"application/json"),
]


class TimerCountingLoop(asyncio.SelectorEventLoop):
    """A real selector loop that counts the timers scheduled on it."""

    def __init__(self) -> None:
        super().__init__()
        self.timers = 0

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> asyncio.TimerHandle:
        self.timers += 1
        return super().call_at(when, callback, *args, context=context)


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": DEFAULT_ENDPOINT_PATH,
        "raw_path": DEFAULT_ENDPOINT_PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [*HEADERS, (b"content-length", str(len(BODY)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


class Exchange:
    """One request: the body given at once or after ``held`` is set; the response's status and body kept."""

    def __init__(self, *, at_once: bool) -> None:
        self.held = asyncio.Event()
        if at_once:
            self.held.set()
        self.reading = asyncio.Event()
        self.status: int | None = None
        self.body = b""
        self._given = False

    async def receive(self) -> MutableMapping[str, Any]:
        if not self._given:
            self.reading.set()
            await self.held.wait()
            self._given = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")


def _app(limits: HttpLimits | None = None) -> Any:
    options = ServerOptions() if limits is None else ServerOptions(http=HttpOptions(limits=limits))
    return McpServer(Registry(echo), options=options).asgi_app()


def _run(coroutine_factory: Any) -> TimerCountingLoop:
    loop = TimerCountingLoop()
    try:
        loop.run_until_complete(asyncio.wait_for(coroutine_factory(), WAIT_BOUND_SECONDS))
    finally:
        loop.close()
    return loop


def test_a_body_all_there_arms_no_timer() -> None:
    app = _app()
    exchange = Exchange(at_once=True)
    armed: list[int] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, TimerCountingLoop)
        before = loop.timers  # the test's own bound is a timer
        await app(_scope(), exchange.receive, exchange.send)
        armed.append(loop.timers - before)

    _run(scenario)
    assert exchange.status == 200
    assert b'"text":"ok"' in exchange.body
    assert armed == [0]


def test_a_waiting_body_gets_its_deadline() -> None:
    limits = HttpLimits(body_timeout_seconds=0.2)
    app = _app(limits)
    exchange_box: list[Exchange] = []

    async def scenario() -> None:
        exchange = Exchange(at_once=False)  # the body never comes
        exchange_box.append(exchange)
        await app(_scope(), exchange.receive, exchange.send)

    loop = _run(scenario)
    assert exchange_box[0].status == 408
    assert loop.timers >= 1


def test_a_waiting_body_is_cut_by_the_end_of_the_grace() -> None:
    app = _app(HttpLimits(shutdown_grace_seconds=0.2))
    exchange_box: list[Exchange] = []

    async def scenario() -> None:
        exchange = Exchange(at_once=False)
        exchange_box.append(exchange)
        request = asyncio.create_task(app(_scope(), exchange.receive, exchange.send))
        await exchange.reading.wait()
        app.begin_drain()
        await request

    _run(scenario)
    assert exchange_box[0].status == 503


def test_a_cancellation_from_outside_during_the_read_stays_the_callers() -> None:
    app = _app()

    async def scenario() -> None:
        exchange = Exchange(at_once=False)
        request = asyncio.create_task(app(_scope(), exchange.receive, exchange.send))
        await exchange.reading.wait()
        await asyncio.sleep(0)  # the window is armed on this turn
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        assert exchange.status is None  # nothing answered: the server cancelled the request

    _run(scenario)
