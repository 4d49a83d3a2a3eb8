"""The stdio transport in process, over real OS pipes: both eras, the line limit, bad input, and the end of input."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from soklet_apps import demo
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer, ServerOptions
from soklet_core.mcp.server.legacy._engine import LegacyProtocol, ProtocolEras
from soklet_core.mcp.server.options import MAX_TIMEOUT_SECONDS, HttpLimits, HttpOptions, ProtocolOptions
from soklet_core.mcp.server.stdio._transport import StdioTransport, open_pipe_streams
from soklet_core.protection import ProtectionConfig

VERSION = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
#: How long a test waits for one line before it fails (a hang guard, not a timing assertion).
READ_GUARD_SECONDS = 30


def _server(**options: Any) -> McpServer:
    config = ProtectionConfig(keyring=ProtectionKeyring(ProtectionKey.generate("stdio-test")))
    return McpServer(demo.build_registry(), protection=config, **options)


def _engine(eras: ProtocolEras = ProtocolEras.BOTH, **options: Any) -> LegacyProtocol:
    """The 2025-era engine of a demo server speaking ``eras`` (its session table included)."""
    return _server(options=ServerOptions(protocol=ProtocolOptions(eras=eras)), **options).legacy_protocol


class Client:
    """The host's side of the pipes: writes lines to the server's input, reads lines from its output."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, server_output: asyncio.StreamWriter
    ) -> None:
        self.reader = reader
        self.writer = writer
        #: The server's end of its output pipe (the transport never closes what it was given; the process does).
        self.server_output = server_output

    async def raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.raw(json.dumps(message).encode() + b"\n")

    async def read(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.reader.readline(), READ_GUARD_SECONDS)
        assert line.endswith(b"\n"), line
        message: dict[str, Any] = json.loads(line)
        return message

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        await self.send(message)
        return await self.read()

    def close_input(self) -> None:
        self.writer.close()


@contextlib.asynccontextmanager
async def connected(transport: StdioTransport) -> AsyncIterator[tuple[Client, asyncio.Task[None]]]:
    """The transport serving one end of two OS pipes, a :class:`Client` on the other ends."""
    to_server_read, to_server_write = os.pipe()
    to_client_read, to_client_write = os.pipe()
    files = [os.fdopen(fd, mode, buffering=0) for fd, mode in ((to_server_read, "rb"), (to_client_write, "wb"))]
    server_reader, server_writer = await open_pipe_streams(files[0], files[1])
    client_files = [os.fdopen(to_client_read, "rb", buffering=0), os.fdopen(to_server_write, "wb", buffering=0)]
    client_reader, client_writer = await open_pipe_streams(client_files[0], client_files[1])
    serving = asyncio.get_running_loop().create_task(transport.serve(server_reader, server_writer))
    client = Client(client_reader, client_writer, server_writer)
    try:
        yield client, serving
    finally:
        if not serving.done():
            client.close_input()
            await asyncio.wait_for(serving, READ_GUARD_SECONDS)
        server_writer.close()
        client_writer.close()
        await asyncio.sleep(0)


def run(
    scenario: Callable[[Client, asyncio.Task[None]], Awaitable[None]], engine: LegacyProtocol | None = None
) -> None:
    async def main() -> None:
        async with connected(StdioTransport(engine or _engine())) as (client, serving):
            await scenario(client, serving)

    asyncio.run(main())


def modern(request_id: int, method: str, params: dict[str, Any] | None = None, caps: Any = None) -> dict[str, Any]:
    body = dict(params or {})
    body["_meta"] = {PV: VERSION, CAPS: {"elicitation": {}} if caps is None else caps}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}


# ------------------------------------------------------------------------------------------------ modern era


def test_modern_tools_list_and_input_required_retry() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        listed = await client.request(modern(1, "tools/list"))
        assert listed["id"] == 1
        assert "catalog.continue" in [tool["name"] for tool in listed["result"]["tools"]]
        first = await client.request(modern(2, "tools/call", {"name": "catalog.continue", "arguments": {}}))
        result = first["result"]
        assert result["resultType"] == "input_required"
        assert result["inputRequests"]["approval"]["method"] == "elicitation/create"
        retry = modern(
            3,
            "tools/call",
            {
                "name": "catalog.continue",
                "arguments": {},
                "inputResponses": {"approval": {"action": "accept", "content": {}}},
                "requestState": result["requestState"],
            },
        )
        done = await client.request(retry)
        assert done["id"] == 3
        assert done["result"]["content"][0]["text"] == "Catalog access approved."
        assert done["result"].get("isError") is not True

    run(scenario)


def test_modern_tampered_state_refused() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        first = await client.request(modern(1, "tools/call", {"name": "catalog.continue", "arguments": {}}))
        state = first["result"]["requestState"]
        tampered = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
        params = {
            "name": "catalog.continue",
            "arguments": {},
            "inputResponses": {"approval": {"action": "accept", "content": {}}},
            "requestState": tampered,
        }
        refused = await client.request(modern(2, "tools/call", params))
        assert refused["id"] == 2
        assert refused["error"]["code"] == -32602
        assert refused["error"]["message"] == "Invalid or expired request state"

    run(scenario)


# ------------------------------------------------------------------------------------------------ bad input


def test_bad_json_and_bad_utf8_get_parse_errors_with_null_id() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        await client.raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        bad = await client.read()
        assert bad == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        await client.raw(b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"x":"\xff\xfe"}}\n')
        bad = await client.read()
        assert bad["id"] is None
        assert bad["error"]["code"] == -32700
        # The connection goes on: the next good line is answered.
        listed = await client.request(modern(3, "tools/list"))
        assert listed["id"] == 3
        assert "result" in listed

    run(scenario)


def test_oversized_line_is_refused_and_dropped_then_the_next_line_is_answered() -> None:
    limit = 4096

    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        # A line four times the limit, sent in pieces: refused once, as soon as it passes the limit.
        padding = "x" * (limit * 4)
        await client.raw(json.dumps(modern(1, "tools/list", {"pad": padding})).encode() + b"\n")
        refused = await client.read()
        assert refused["id"] is None
        assert refused["error"]["code"] == -32600
        assert "too large" in refused["error"]["message"]
        listed = await client.request(modern(2, "tools/list"))
        assert listed["id"] == 2
        assert "result" in listed

    async def main() -> None:
        server = _server(options=ServerOptions(http=HttpOptions(max_request_body_bytes=limit)))
        transport = StdioTransport(server.legacy_protocol, server.options.http)
        async with connected(transport) as (client, serving):
            await scenario(client, serving)

    asyncio.run(main())


def test_end_of_input_ends_cleanly_and_blank_lines_are_ignored() -> None:
    async def scenario(client: Client, serving: asyncio.Task[None]) -> None:
        await client.raw(b"\n  \n")
        answer = await client.request(modern(1, "tools/list"))
        assert answer["id"] == 1
        client.close_input()
        await asyncio.wait_for(serving, READ_GUARD_SECONDS)
        assert serving.exception() is None
        client.server_output.close()  # as the process ends
        assert await asyncio.wait_for(client.reader.read(), READ_GUARD_SECONDS) == b""  # nothing else was written

    run(scenario)


def test_not_an_object_is_an_invalid_request() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        answer = await client.request([1, 2])  # type: ignore[arg-type]
        assert answer["id"] is None
        assert answer["error"]["code"] == -32600

    run(scenario)


# ------------------------------------------------------------------------------------------------ 2025 era


def legacy(request_id: int | str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def initialize(version: str = "2025-11-25", capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return legacy(
        0,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {"elicitation": {}} if capabilities is None else capabilities,
            "clientInfo": {"name": "stdio-test", "version": "1"},
        },
    )


async def handshake(client: Client, version: str = "2025-11-25") -> dict[str, Any]:
    answer = await client.request(initialize(version))
    await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    result: dict[str, Any] = answer["result"]
    return result


def test_legacy_initialize_list_and_catalog_continue_through_elicitation() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        result = await handshake(client)
        assert result["protocolVersion"] == "2025-11-25"
        assert "tools" in result["capabilities"]
        assert result["serverInfo"]["name"] == "soklet"
        pong = await client.request(legacy(1, "ping"))
        assert pong == {"jsonrpc": "2.0", "id": 1, "result": {}}
        listed = await client.request(legacy(2, "tools/list"))
        assert "catalog.continue" in [tool["name"] for tool in listed["result"]["tools"]]
        assert "resultType" not in listed["result"]  # the modern-only members are dropped
        for action, text in (
            ("accept", "Catalog access approved."),
            ("decline", "Catalog access was declined."),
            ("cancel", "Catalog access was cancelled."),
        ):
            await client.send(legacy(f"call-{action}", "tools/call", {"name": "catalog.continue", "arguments": {}}))
            asked = await client.read()  # the server's own request, on the output
            assert asked["method"] == "elicitation/create"
            assert asked["params"]["message"] == "Approve catalog access?"
            answer: dict[str, Any] = {"action": action}
            if action == "accept":
                answer["content"] = {}
            await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
            done = await client.read()
            assert done["id"] == f"call-{action}"
            assert done["result"]["content"][0]["text"] == text
            assert "resultType" not in done["result"]

    run(scenario)


def test_legacy_second_initialize_is_refused_and_the_session_goes_on() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        await handshake(client, "2025-06-18")
        again = await client.request(initialize())
        assert again["id"] == 0
        assert again["error"]["code"] == -32600
        listed = await client.request(legacy(1, "tools/list"))
        assert "tools" in listed["result"]

    run(scenario)


def test_legacy_missing_capability_is_an_is_error_result() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        answer = await client.request(initialize(capabilities={}))
        assert answer["result"]["protocolVersion"] == "2025-11-25"
        called = await client.request(legacy(1, "tools/call", {"name": "catalog.continue", "arguments": {}}))
        assert called["result"]["isError"] is True
        assert "elicitation" in called["result"]["content"][0]["text"]

    run(scenario)


def test_both_eras_on_one_connection() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        await handshake(client)
        # A message with a _meta protocol version is 2026-07-28 whatever the connection did before.
        listed = await client.request(modern(1, "tools/list"))
        assert listed["result"]["resultType"] == "complete"

    run(scenario)


def test_modern_only_server_refuses_a_legacy_initialize_with_32022() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        refused = await client.request(initialize("2025-06-18"))
        error = refused["error"]
        assert error["code"] == -32022
        assert error["data"] == {"supported": [VERSION], "requested": "2025-06-18"}
        assert "--protocol both" in error["message"]
        listed = await client.request(modern(1, "tools/list"))
        assert "result" in listed

    run(scenario, _engine(ProtocolEras.MODERN))


def test_legacy_only_server_refuses_modern_requests_with_32022() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        refused = await client.request(modern(1, "tools/list"))
        assert refused["id"] == 1
        assert refused["error"]["code"] == -32022
        early = await client.request(legacy(2, "tools/list"))
        assert early["error"]["code"] == -32600  # no session yet: initialize first
        await handshake(client)
        listed = await client.request(legacy(3, "tools/list"))
        assert "tools" in listed["result"]

    run(scenario, _engine(ProtocolEras.LEGACY))


@pytest.mark.slow
def test_end_of_input_cancels_a_request_waiting_for_the_client() -> None:
    async def scenario(client: Client, serving: asyncio.Task[None]) -> None:
        await handshake(client)
        await client.send(legacy(1, "tools/call", {"name": "catalog.continue", "arguments": {}}))
        asked = await client.read()
        assert asked["method"] == "elicitation/create"
        client.close_input()  # the host goes away without answering
        await asyncio.wait_for(serving, READ_GUARD_SECONDS)
        assert serving.exception() is None
        client.server_output.close()
        assert await asyncio.wait_for(client.reader.read(), READ_GUARD_SECONDS) == b""

    engine = _engine()
    run(scenario, engine)
    assert len(engine.sessions) == 0  # the connection's session ended with it


@pytest.mark.slow
def test_requests_past_the_in_flight_bound_are_answered_busy() -> None:
    from soklet_core.mcp.server.legacy._sessions import MAX_INFLIGHT_PER_SESSION

    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        await handshake(client)
        # Each call waits for the client's answer to its elicitation: all of them stay in flight.
        asked = []
        for index in range(MAX_INFLIGHT_PER_SESSION):
            await client.send(legacy(index + 1, "tools/call", {"name": "catalog.continue", "arguments": {}}))
            asked.append(await client.read())
        assert all(item["method"] == "elicitation/create" for item in asked)
        busy = await client.request(legacy("one-more", "tools/call", {"name": "catalog.continue", "arguments": {}}))
        assert busy["id"] == "one-more"
        assert busy["error"]["code"] == -32603
        # Answering one frees its slot.
        await client.send({"jsonrpc": "2.0", "id": asked[0]["id"], "result": {"action": "decline"}})
        done = await client.read()
        assert done["id"] == 1
        assert done["result"]["content"][0]["text"] == "Catalog access was declined."
        pong = await client.request(legacy("after", "ping"))
        assert pong["result"] == {}

    run(scenario)


def test_a_large_line_under_the_limit_is_answered() -> None:
    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        # Over the inline threshold (64 KiB): parsed and rewritten in a worker thread, then dispatched.
        pad = "y" * (200 * 1024)
        first = await client.request(modern(1, "tools/call", {"name": "catalog.continue", "arguments": {"pad": pad}}))
        assert first["id"] == 1
        assert first["result"]["resultType"] == "input_required"

    run(scenario)


def test_modern_progress_notifications_come_before_the_answer() -> None:
    from soklet_apps import conformance

    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        params = {"name": "test_tool_with_progress", "arguments": {}}
        request = modern(1, "tools/call", params)
        request["params"]["_meta"]["progressToken"] = "p-1"
        await client.send(request)
        frames = []
        while True:
            message = await client.read()
            if "id" in message:
                break
            frames.append(message)
        assert message["id"] == 1
        assert "result" in message
        assert frames
        assert all(frame["method"] == "notifications/progress" for frame in frames)
        assert all(frame["params"]["progressToken"] == "p-1" for frame in frames)

    config = ProtectionConfig(keyring=ProtectionKeyring(ProtectionKey.generate("stdio-test")))
    server = McpServer(conformance.build_registry(tasks=False), protection=config)
    run(scenario, server.legacy_protocol)


def test_an_admission_policy_that_needs_a_token_refuses_every_stdio_request() -> None:
    from soklet_core.mcp.server import BearerTokenAdmission

    async def scenario(client: Client, _serving: asyncio.Task[None]) -> None:
        refused = await client.request(modern(1, "tools/call", {"name": "catalog.continue", "arguments": {}}))
        assert refused["id"] == 1
        assert refused["error"] == {"code": -32600, "message": "Unauthorized"}
        init = await client.request(initialize())
        assert init["id"] == 0
        assert init["error"]["code"] == -32600
        assert "result" not in init

    admission = BearerTokenAdmission({"a-token-stdio-cannot-send": ("someone", "team")})
    run(scenario, _server(admission=admission).legacy_protocol)


def test_a_closed_output_drops_answers_and_the_input_still_ends_cleanly(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        to_server_read, to_server_write = os.pipe()
        output_read, output_write = os.pipe()
        os.close(output_read)  # nobody will ever read the server's output
        server_reader, server_writer = await open_pipe_streams(
            os.fdopen(to_server_read, "rb", buffering=0), os.fdopen(output_write, "wb", buffering=0)
        )
        serving = asyncio.get_running_loop().create_task(StdioTransport(_engine()).serve(server_reader, server_writer))
        host = os.fdopen(to_server_write, "wb", buffering=0)
        for index in range(3):
            host.write(json.dumps(modern(index + 1, "tools/list")).encode() + b"\n")
        host.close()  # the end of the input
        await asyncio.wait_for(serving, READ_GUARD_SECONDS)
        assert serving.exception() is None
        server_writer.close()

    with caplog.at_level(logging.WARNING, logger="soklet.mcp.stdio"):
        asyncio.run(main())
    said = [record.getMessage() for record in caplog.records if record.name == "soklet.mcp.stdio"]
    assert len(said) == 1  # said once, however many answers were dropped
    assert said[0].startswith("standard output closed (")
    assert said[0].endswith("): answers are dropped")


def test_the_end_of_input_grace_is_the_shutdown_grace() -> None:
    engine = _engine()
    assert "end_grace_seconds=10" in repr(StdioTransport(engine))  # the shutdown grace by default
    longest = HttpOptions(limits=HttpLimits(shutdown_grace_seconds=MAX_TIMEOUT_SECONDS))
    assert f"end_grace_seconds={MAX_TIMEOUT_SECONDS:g}" in repr(StdioTransport(engine, longest))
    for bad in (0, MAX_TIMEOUT_SECONDS + 0.001):
        with pytest.raises(ValueError, match="shutdown_grace_seconds"):
            HttpLimits(shutdown_grace_seconds=bad)
    with pytest.raises(TypeError):
        StdioTransport(engine, 10)  # type: ignore[arg-type]
