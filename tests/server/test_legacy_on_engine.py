"""The 2025 era and stdio run on the engine: each round is a :class:`~soklet_core.mcp.server.engine.Call`, the
client's message is parsed once, no HTTP header is made up (the header checks never run) and the engine's answer is
never parsed back.

Real uvicorn on loopback with raw httpx playing the 2025-era client (it answers the server's ``elicitation/create``
by POSTing its JSON-RPC response with the session header), and the stdio transport over real OS pipes. Wrappers
that call the real functions count (counters, not mocks): ``soklet_core.json.parse`` wherever a server module
imported it, ``Engine.call`` by the type of value it receives, and the HTTP header checks
(``HttpDispatch._routing_headers``, the one home of the ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` rules).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import soklet_core.json
from soklet_apps import demo
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer
from soklet_core.mcp.server.engine import Engine
from soklet_core.mcp.server.http._dispatch import HttpDispatch
from soklet_core.mcp.server.stdio import StdioTransport, open_pipe_streams
from soklet_core.protection import ProtectionConfig
from tests.server.support import CAPS, PV, VERSION, Client, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("legacy-on-engine"))
ACCEPT = {"action": "accept", "content": {}}
APPROVED = "Catalog access approved."
#: The server's modules: a parse there is the server reading JSON (the protection layer's own reading of a state's
#: plaintext is not counted: it is the same on both eras).
SERVER_MODULES = "soklet_core.mcp.server"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts ``parse`` calls made by the server's modules, the calls the engine receives (by the type of value)
    and the runs of the HTTP header checks."""
    counts: Counter[str] = Counter()
    original_parse = soklet_core.json.parse

    def counting_parse(*args: Any, **kwargs: Any) -> Any:
        counts["parse"] += 1
        return original_parse(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith(SERVER_MODULES) and getattr(module, "parse", None) is original_parse:
            monkeypatch.setattr(module, "parse", counting_parse)
    original_call = Engine.call

    async def counting_call(self: Engine, call: Any, progress: Any = None) -> Any:
        counts["call:" + type(call).__name__] += 1
        return await original_call(self, call, progress)

    monkeypatch.setattr(Engine, "call", counting_call)
    original_headers = HttpDispatch._routing_headers

    def counting_headers(self: HttpDispatch, *args: Any) -> None:
        counts["header-checks"] += 1
        original_headers(self, *args)

    monkeypatch.setattr(HttpDispatch, "_routing_headers", counting_headers)
    return counts


def _server() -> McpServer:
    return McpServer(demo.build_registry(), protection=ProtectionConfig(keyring=KEYRING))


class Session:
    """A 2025-era client over raw httpx: the call's SSE stream on one connection, the answers on another."""

    def __init__(self, url: str) -> None:
        self.url = url + "/mcp"
        self.stream = httpx.Client(timeout=30)
        self.answers = httpx.Client(timeout=30)
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "on-engine", "version": "1"},
            },
        }
        response = self.stream.post(self.url, json=initialize, headers={"accept": "application/json"})
        assert response.status_code == 200
        self.headers = {
            "mcp-session-id": response.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
            "accept": "application/json, text/event-stream",
        }
        notified = self.answers.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )
        assert notified.status_code == 202

    def close(self) -> None:
        self.stream.close()
        self.answers.close()

    def call(self, request_id: int, before_answer: Callable[[], None] = lambda: None) -> tuple[dict[str, Any], int]:
        """``catalog.continue`` answered through its elicitation: (the result, server requests seen)."""
        sent = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "catalog.continue"}}
        asked = 0
        with self.stream.stream("POST", self.url, json=sent, headers=self.headers) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                message = json.loads(line[len("data: ") :])
                if message.get("method") == "elicitation/create":
                    asked += 1
                    before_answer()
                    answer = {"jsonrpc": "2.0", "id": message["id"], "result": ACCEPT}
                    assert self.answers.post(self.url, json=answer, headers=self.headers).status_code == 202
                elif message.get("id") == request_id:
                    result: dict[str, Any] = message["result"]
                    return result, asked
        raise AssertionError("the stream ended without the answer")


def test_a_2025_round_is_one_call_and_one_parse_of_the_client_message(counted: Counter[str]) -> None:
    with running(_server()) as url:
        session = Session(url)
        try:
            session.call(2)  # warm: nothing lazy is counted below
            counted.clear()
            seen: dict[str, int] = {}
            result, asked = session.call(3, lambda: seen.update(counted))
        finally:
            session.close()
    assert result["content"][0]["text"] == APPROVED
    assert "resultType" not in result
    assert asked == 1
    # Round one: the client's tools/call parsed once, one Call to the engine, no header checked, nothing parsed back.
    assert seen == {"parse": 1, "call:Call": 1}
    # Round two: the client's answer parsed once, one more Call; the complete result is not parsed either.
    assert counted == Counter({"parse": 2, "call:Call": 2})


def test_the_2026_path_over_http_checks_its_headers(counted: Counter[str]) -> None:
    """The control: the counters see the 2026-07-28 path over HTTP (one parse, one Call, the header checks)."""
    with running(_server()) as url:
        client = Client(url)
        try:
            client.call("catalog.continue", {}, capabilities={"elicitation": {}})  # warm
            counted.clear()
            reply = client.call("catalog.continue", {}, capabilities={"elicitation": {}})
        finally:
            client.close()
    assert reply.result["resultType"] == "input_required"
    assert counted == Counter({"parse": 1, "call:Call": 1, "header-checks": 1})


def test_a_2026_line_on_stdio_is_one_parse_and_one_call_without_header_checks(counted: Counter[str]) -> None:
    server = _server()
    line = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "catalog.continue", "arguments": {}, "_meta": {PV: VERSION, CAPS: {"elicitation": {}}}},
    }

    async def main() -> dict[str, Any]:
        to_server_read, to_server_write = os.pipe()
        to_client_read, to_client_write = os.pipe()
        reader, writer = await open_pipe_streams(
            os.fdopen(to_server_read, "rb", buffering=0), os.fdopen(to_client_write, "wb", buffering=0)
        )
        serving = asyncio.get_running_loop().create_task(
            StdioTransport(server.legacy_protocol, server.options.http).serve(reader, writer)
        )
        host = os.fdopen(to_server_write, "wb", buffering=0)
        host.write(json.dumps(line).encode() + b"\n")
        host.close()  # the end of the input: the answer is written, then serve returns
        await asyncio.wait_for(serving, 30)
        writer.close()
        with os.fdopen(to_client_read, "rb") as output:
            answer: dict[str, Any] = json.loads(output.readline())
        return answer

    answer = asyncio.run(main())
    assert answer["id"] == 1
    assert answer["result"]["resultType"] == "input_required"
    assert counted == Counter({"parse": 1, "call:Call": 1})
