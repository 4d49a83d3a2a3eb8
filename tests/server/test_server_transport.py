"""The HTTP side: validation order, statuses, Origin/Host, limits at their edges, SSE, cancellation, logging."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from soklet_apps import conformance
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer, Registry, ServerOptions
from soklet_core.mcp.server.options import HttpOptions
from soklet_core.protection import ProtectionConfig
from tests.server.support import CAPS, FORM_CAPS, PV, VERSION, Client, Entries, build_test_registry, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("transport"))
BODY_LIMIT = 4096
CEILING = 8192


@pytest.fixture(scope="module")
def entries() -> Entries:
    return Entries()


@pytest.fixture(scope="module")
def base_url(entries: Entries) -> Iterator[str]:
    registry = Registry.merge(conformance.build_registry(tasks=False), build_test_registry(entries))
    server = McpServer(
        registry,
        protection=ProtectionConfig(keyring=KEYRING),
        options=ServerOptions(
            http=HttpOptions(
                max_request_body_bytes=BODY_LIMIT,
                output_ceiling_bytes=CEILING,
                allowed_origins=("https://app.example.com",),
                allowed_hosts=("mcp.example.com",),
            )
        ),
    )
    with running(server) as url:
        yield url


@pytest.fixture
def client(base_url: str) -> Iterator[Client]:
    c = Client(base_url)
    yield c
    c.close()


def test_validation_order(client: Client) -> None:
    missing_header = client.post("server/discover", headers={"MCP-Protocol-Version": None})
    assert (missing_header.status, missing_header.error["code"]) == (400, -32020)
    bare = {"jsonrpc": "2.0", "id": 101, "method": "server/discover", "params": {}}
    no_meta = client.post("server/discover", raw=json.dumps(bare).encode())
    assert (no_meta.status, no_meta.error["code"], no_meta.body["id"]) == (400, -32602, 101)
    for meta in ({PV: VERSION}, {CAPS: {}}):
        body = {"jsonrpc": "2.0", "id": 102, "method": "server/discover", "params": {"_meta": meta}}
        reply = client.post("server/discover", raw=json.dumps(body).encode())
        assert (reply.status, reply.error["code"]) == (400, -32602)
    mismatch = client.post("server/discover", version="v999.0.0", headers={"MCP-Protocol-Version": VERSION})
    assert (mismatch.status, mismatch.error["code"]) == (400, -32020)
    unsupported = client.post("server/discover", version="v999.0.0")
    assert (unsupported.status, unsupported.error["code"]) == (400, -32022)
    assert unsupported.error["data"] == {"supported": [VERSION], "requested": "v999.0.0"}
    for method in ("initialize", "ping", "logging/setLevel", "resources/subscribe", "unknown/method", "tasks/list"):
        reply = client.post(method)
        assert (reply.status, reply.error["code"]) == (404, -32601), method
    wrong_method_header = client.post("tools/list", headers={"Mcp-Method": "TOOLS/LIST"})
    assert (wrong_method_header.status, wrong_method_header.error["code"]) == (400, -32020)
    no_name = client.call("test_simple_text", headers={"Mcp-Name": None})
    assert (no_name.status, no_name.error["code"]) == (400, -32020)
    wrong_name = client.call("test_simple_text", headers={"Mcp-Name": "other"})
    assert wrong_name.error["code"] == -32020
    # header names in any case (httpx refuses to send the whitespace-padded values the suite also sends)
    cased = client.call("test_simple_text", headers={"mcp-name": "test_simple_text", "MCP-METHOD": "tools/call"})
    assert cased.status == 200
    unknown_tool = client.call("no_such_tool", {})
    assert unknown_tool.error["code"] == -32602


def test_discover_lists_and_caching(client: Client) -> None:
    discover = client.post("server/discover").result
    assert discover["supportedVersions"] == [VERSION]
    assert set(discover["capabilities"]) == {"tools", "prompts", "resources", "completions"}
    assert discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "soklet"
    for method, member in (
        ("tools/list", "tools"),
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ):
        result = client.post(method).result
        assert result["resultType"] == "complete"
        assert isinstance(result[member], list)
        assert result["ttlMs"] >= 0
        assert result["cacheScope"] in ("public", "private")
    tools = [tool["name"] for tool in client.post("tools/list").result["tools"]]
    assert tools[0] == "test_simple_text"
    assert tools == [tool["name"] for tool in client.post("tools/list").result["tools"]]
    assert client.post("resources/list").result["resources"][0]["uri"] == "test://static-text"
    read = client.post("resources/read", {"uri": "test://static-text"}).result
    assert read["cacheScope"] in ("public", "private")
    assert read["contents"][0]["text"]
    templated = client.post("resources/read", {"uri": "test://template/123/data"}).result
    assert "123" in templated["contents"][0]["text"]
    missing = client.post("resources/read", {"uri": "test://nonexistent"})
    assert missing.error["code"] == -32602
    assert missing.error["data"] == {"uri": "test://nonexistent"}


def test_input_required_only_where_allowed_and_custom_headers(client: Client) -> None:
    assert client.post("tools/list").result["resultType"] == "complete"
    no_header = client.call("test_custom_header_params", {"region": "eu"})
    assert no_header.error["code"] == -32020
    ok = client.call("test_custom_header_params", {"region": "eu"}, headers={"Mcp-Param-Region": "eu"})
    assert ok.status == 200
    encoded = client.call(
        "test_custom_header_params", {"region": "été"}, headers={"Mcp-Param-Region": "=?base64?w6l0w6k=?="}
    )
    assert encoded.status == 200


def test_notification_get_and_unknown_path(base_url: str, client: Client) -> None:
    notification = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    reply = httpx.post(base_url + "/mcp", json=notification)
    assert reply.status_code == 202
    assert reply.content == b""
    assert httpx.get(base_url + "/mcp").status_code == 405
    assert httpx.delete(base_url + "/mcp").status_code == 400  # both eras: DELETE ends a session, named or 400
    assert httpx.post(base_url + "/elsewhere", json=notification).status_code == 404
    parse_error = client.post("tools/list", raw=b"{not json")
    assert (parse_error.status, parse_error.error["code"]) == (400, -32700)


def test_origin_and_host_allow_lists(client: Client) -> None:
    for origin in ("http://localhost:3000", "http://127.0.0.1", "http://[::1]:9", "https://app.example.com"):
        assert client.post("server/discover", headers={"Origin": origin}).status == 200, origin
    for origin in ("http://evil.example.com", "null", "https://app.example.com.evil.net", "http://user@localhost"):
        assert client.post("server/discover", headers={"Origin": origin}).status == 403, origin
    assert client.post("server/discover", headers={"Host": "evil.example.com"}).status == 403
    assert client.post("server/discover", headers={"Host": "mcp.example.com"}).status == 200
    assert client.post("server/discover", headers={"Host": "localhost:1"}).status == 200


def _padded(size: int) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {"_meta": {PV: VERSION, CAPS: {}}},
        }
    ).encode()
    return body + b" " * (size - len(body))


def test_body_limit_at_its_edge(client: Client) -> None:
    at_limit = client.post("tools/list", raw=_padded(BODY_LIMIT))
    assert at_limit.status == 200
    over = client.post("tools/list", raw=_padded(BODY_LIMIT + 1))
    assert over.status == 413
    assert over.error["code"] == -32600

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is found while reading
        data = _padded(BODY_LIMIT + 1)
        yield data[:1000]
        yield data[1000:]

    streamed = httpx.post(
        client.url,
        content=chunks(),
        headers={"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list", "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413


def test_server_body_limit_configuration_edges() -> None:
    registry = conformance.build_registry(tasks=False)
    protection = ProtectionConfig(keyring=KEYRING)
    largest = ServerOptions(http=HttpOptions(max_request_body_bytes=16 * 1024 * 1024))
    assert McpServer(registry, protection=protection, options=largest) is not None
    with pytest.raises(ValueError, match="body limit"):
        HttpOptions(max_request_body_bytes=16 * 1024 * 1024 + 1)
    with pytest.raises(ValueError, match="protection config"):
        McpServer(registry, options=largest)


def test_output_ceiling_at_its_edge(client: Client) -> None:
    envelope = len(json.dumps(client.call("plain", {"size": 0}).body, separators=(",", ":")).encode())
    fits = client.call("plain", {"size": CEILING - envelope})
    assert fits.status == 200
    assert len(fits.text) == CEILING - envelope
    over = client.call("plain", {"size": CEILING - envelope + 1})
    assert over.status == 200
    assert over.error == {"code": -32603, "message": "Response too large"}


def test_progress_streams_as_sse(client: Client) -> None:
    reply = client.call("test_tool_with_progress", {}, meta={"progressToken": "progress-test-1"})
    assert reply.headers["content-type"] == "text/event-stream"
    assert reply.headers["x-accel-buffering"] == "no"
    progress = [frame["params"] for frame in reply.frames if frame.get("method") == "notifications/progress"]
    assert [item["progress"] for item in progress] == [0, 50, 100]
    assert {item["progressToken"] for item in progress} == {"progress-test-1"}
    assert reply.result["resultType"] == "complete"
    plain = client.call("test_tool_with_progress", {})
    assert plain.headers["content-type"] == "application/json"
    assert plain.frames == []


@pytest.mark.slow
@pytest.mark.parametrize(("name", "signal"), [("slow", "cancelled"), ("slow.sync", "sync_cancelled")])
def test_disconnect_cancels_the_handler(client: Client, entries: Entries, name: str, signal: str) -> None:
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            client.url,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": name, "arguments": {}, "_meta": {PV: VERSION, CAPS: {}}},
            },
            headers={"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call", "Mcp-Name": name},
            timeout=2.0,  # the handler has started by then on a busy machine too, and runs for 4 s or more
        )
    assert getattr(entries, signal).wait(60)  # async: task cancelled; sync: the cooperative flag turned true


def test_access_log_names_the_operation_and_no_secrets(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="soklet.mcp.access")
    first = client.call("probe", {"secret-argument": "hunter2"}, capabilities=FORM_CAPS)
    client.retry("probe", {"secret-argument": "hunter2"}, first.state + "x", {}, capabilities=FORM_CAPS)
    client.call("no-such-tool-named-hunter2", {})
    # The access line of the last call may be written just after its answer: wait for it (a generous bound).
    deadline = time.monotonic() + 60
    while sum(record.name == "soklet.mcp.access" for record in caplog.records) < 3:
        assert time.monotonic() < deadline, "the access lines were not written"
        time.sleep(0.02)
    lines = [record.getMessage() for record in caplog.records if record.name == "soklet.mcp.access"]
    assert any("method=tools/call operation=probe status=200" in line for line in lines)
    assert any("status=400 code=-32602" in line and "reason=state-" in line for line in lines)
    assert any("operation=- status=400" in line and "reason=unknown-tool" in line for line in lines)
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert "hunter2" not in text
    assert first.state not in text
    assert first.state[:20] not in text


def test_graceful_shutdown_lets_in_flight_requests_finish(entries: Entries) -> None:
    registry = build_test_registry(entries)
    servers: list[Any] = []
    server = McpServer(registry, protection=ProtectionConfig(keyring=KEYRING))
    with running(server, on_start=servers) as url:
        client = Client(url)
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(client.call, "pause", {})
            deadline = time.monotonic() + 60
            while entries["pause"] == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            servers[0].should_exit = True  # what SIGINT/SIGTERM do
            reply = pending.result(60)
        assert reply.status == 200
        assert reply.text == "paused"
        client.close()
