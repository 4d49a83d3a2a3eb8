"""The 2025 era over HTTP: sessions, server-to-client requests on the POST's SSE stream, DELETE, GET, refusals.

Real uvicorn on loopback, raw httpx; the test plays the 2025-era client, answering the server's
``elicitation/create`` requests by POSTing JSON-RPC responses with the session header.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from soklet_apps import demo
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer, Registry, ServerOptions
from soklet_core.mcp.server.legacy._engine import LEGACY_PROTOCOL_VERSIONS, ProtocolEras
from soklet_core.mcp.server.options import ProtocolOptions, SessionOptions
from soklet_core.protection import ProtectionConfig
from tests.server.support import VERSION, Client, Entries, build_test_registry, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("legacy-http"))
ELICITATION = {"elicitation": {}}
Answer = Callable[[dict[str, Any]], dict[str, Any]]


def make_server(entries: Entries, **options: Any) -> McpServer:
    registry = Registry.merge(demo.build_registry(), build_test_registry(entries))
    return McpServer(registry, protection=ProtectionConfig(keyring=KEYRING), **options)


class Legacy:
    """A 2025-era client over raw httpx: ``initialize`` opens the session; every later POST names it."""

    def __init__(self, base_url: str, *, version: str = "2025-11-25") -> None:
        self.url = base_url + "/mcp"
        self.version = version
        self.http = httpx.Client(timeout=20)
        self.answers = httpx.Client(timeout=20)  # its own connection: the request's stream stays open meanwhile
        self.session_id: str | None = None
        self._next = 0

    def close(self) -> None:
        self.http.close()
        self.answers.close()

    def headers(self) -> dict[str, str]:
        sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session_id is not None:
            sent["Mcp-Session-Id"] = self.session_id
            sent["MCP-Protocol-Version"] = self.version
        return sent

    def message(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next += 1
        return {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params or {}}

    def initialize(self, capabilities: dict[str, Any] | None = None) -> httpx.Response:
        params = {
            "protocolVersion": self.version,
            "capabilities": ELICITATION if capabilities is None else capabilities,
            "clientInfo": {"name": "legacy-test", "version": "1.0"},
        }
        response = self.http.post(self.url, json=self.message("initialize", params), headers=self.headers())
        if response.status_code == 200:
            self.session_id = response.headers["mcp-session-id"]
            assert self.post_raw({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        return response

    def post_raw(self, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        return self.http.post(
            self.url, content=json.dumps(body).encode(), headers={**self.headers(), **(headers or {})}
        )

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request answered without server-to-client requests (a plain JSON answer)."""
        response = self.post_raw(self.message(method, params))
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        answer: dict[str, Any] = response.json()
        return answer

    def call(self, name: str, arguments: dict[str, Any], answer: Answer) -> tuple[dict[str, Any], list[str]]:
        """``tools/call`` whose SSE stream carries server requests: each answered with ``answer(request)``.

        Returns the final JSON-RPC response and the methods of the server requests seen.
        """
        message = self.message("tools/call", {"name": name, "arguments": arguments})
        seen: list[str] = []
        with self.http.stream("POST", self.url, content=json.dumps(message).encode(), headers=self.headers()) as r:
            assert r.status_code == 200
            if r.headers["content-type"] == "application/json":
                r.read()
                return r.json(), seen
            assert r.headers["content-type"] == "text/event-stream"
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                frame = json.loads(line[len("data: ") :])
                if "method" in frame and "id" in frame:  # a server-to-client request
                    seen.append(frame["method"])
                    reply = {"jsonrpc": "2.0", "id": frame["id"], "result": answer(frame)}
                    posted = self.answers.post(self.url, content=json.dumps(reply).encode(), headers=self.headers())
                    assert posted.status_code == 202, posted.text
                elif frame.get("id") == message["id"]:
                    return frame, seen
        raise AssertionError("the stream ended without the response")


def text_of(response: dict[str, Any]) -> str:
    text: str = response["result"]["content"][0]["text"]
    return text


@pytest.fixture(scope="module")
def entries() -> Entries:
    return Entries()


@pytest.fixture(scope="module")
def server(entries: Entries) -> McpServer:
    return make_server(entries, options=ServerOptions(sessions=SessionOptions(max_sessions=64)))


@pytest.fixture(scope="module")
def base_url(server: McpServer) -> Iterator[str]:
    with running(server) as url:
        yield url


@pytest.fixture
def legacy(base_url: str) -> Iterator[Legacy]:
    client = Legacy(base_url)
    client.initialize()
    yield client
    client.close()


@pytest.mark.parametrize("version", LEGACY_PROTOCOL_VERSIONS)
def test_initialize_opens_a_session_for_each_2025_version(base_url: str, version: str) -> None:
    client = Legacy(base_url, version=version)
    try:
        response = client.initialize()
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        result = response.json()["result"]
        assert result["protocolVersion"] == version
        assert set(result["capabilities"]) == {"tools", "prompts"}  # what the demo and the test tools hold
        assert result["serverInfo"]["name"] == "soklet"
        session_id = client.session_id
        assert session_id is not None
        assert len(session_id) >= 32
        assert all(0x21 <= ord(char) <= 0x7E for char in session_id)
        assert client.request("ping") == {"jsonrpc": "2.0", "id": client._next, "result": {}}
    finally:
        client.close()


def test_an_unknown_version_is_answered_with_the_preferred_one(base_url: str) -> None:
    client = Legacy(base_url, version="2024-11-05")
    try:
        response = client.initialize()
        assert response.json()["result"]["protocolVersion"] == LEGACY_PROTOCOL_VERSIONS[0]
    finally:
        client.close()


def test_lists_come_without_the_modern_members(legacy: Legacy) -> None:
    result = legacy.request("tools/list")["result"]
    names = {tool["name"] for tool in result["tools"]}
    assert {"catalog.continue", "deploy.approve", "probe"} <= names
    assert not {"resultType", "ttlMs", "cacheScope"} & set(result)


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("accept", "Catalog access approved."),
        ("decline", "Catalog access was declined."),
        ("cancel", "Catalog access was cancelled."),
    ],
)
def test_catalog_continue_through_a_real_elicitation(legacy: Legacy, action: str, expected: str) -> None:
    requests: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        return {"action": action, "content": {}} if action == "accept" else {"action": action}

    response, seen = legacy.call("catalog.continue", {}, answer)
    assert seen == ["elicitation/create"]
    assert requests[0]["params"]["message"] == "Approve catalog access?"
    assert text_of(response) == expected
    assert not {"resultType", "requestState", "inputRequests"} & set(response["result"])


def test_deploy_approve_takes_one_elicitation_per_stage(legacy: Legacy) -> None:
    messages: list[str] = []

    def approve(request: dict[str, Any]) -> dict[str, Any]:
        messages.append(request["params"]["message"])
        return {"action": "accept", "content": {"approve": True}}

    response, seen = legacy.call("deploy.approve", {"stages": 3}, approve)
    assert text_of(response) == "All 3 stages approved; deploying."
    assert seen == ["elicitation/create"] * 3
    assert messages == [f"Approve deployment stage {n} of 3?" for n in (1, 2, 3)]


def test_a_tool_that_asks_nothing_gets_a_plain_json_answer(legacy: Legacy) -> None:
    response, seen = legacy.call("plain", {}, lambda request: {})
    assert (seen, text_of(response)) == ([], "")


def test_delete_ends_the_session(base_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="soklet.mcp.access")
    client = Legacy(base_url)
    try:
        client.initialize()
        assert client.http.delete(client.url, headers=client.headers()).status_code == 200
        gone = client.post_raw(client.message("ping"))
        assert gone.status_code == 404
        assert gone.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}}
        assert client.http.delete(client.url, headers=client.headers()).status_code == 404
        missing = client.http.delete(client.url)
        assert (missing.status_code, missing.json()["error"]["code"]) == (400, -32600)
    finally:
        client.close()
    lines = [record.getMessage() for record in caplog.records if record.name == "soklet.mcp.access"]
    for reason in ("session-ended", "session-not-found", "session-missing"):
        assert any(f"reason={reason}" in line for line in lines), (reason, lines)


def test_get_is_405_naming_post_and_delete(base_url: str, legacy: Legacy) -> None:
    response = httpx.get(legacy.url, headers=legacy.headers())
    assert (response.status_code, response.headers["allow"]) == (405, "POST, DELETE")


def test_an_unknown_session_is_404(base_url: str) -> None:
    client = Legacy(base_url)
    try:
        client.session_id = "no-such-session"
        response = client.post_raw(client.message("tools/list"))
        assert response.status_code == 404
        assert response.json()["error"] == {"code": -32001, "message": "Session not found"}
        assert response.json()["id"] is None
    finally:
        client.close()


def test_a_batch_is_refused(legacy: Legacy) -> None:
    response = legacy.post_raw([legacy.message("ping"), legacy.message("ping")])
    assert (response.status_code, response.json()["error"]["code"]) == (400, -32600)


def test_host_origin_and_body_limits_apply_to_legacy_posts(legacy: Legacy) -> None:
    assert legacy.post_raw(legacy.message("ping"), {"Host": "evil.example.com"}).status_code == 403
    assert legacy.post_raw(legacy.message("ping"), {"Origin": "https://evil.example.com"}).status_code == 403
    big = legacy.message("tools/call", {"name": "plain", "arguments": {"x": "y" * (11 * 1024 * 1024)}})
    assert legacy.post_raw(big).status_code == 413


def test_a_modern_shaped_initialize_is_still_method_not_found(base_url: str) -> None:
    client = Client(base_url)
    try:
        reply = client.post("initialize", {"protocolVersion": VERSION, "capabilities": {}})
        assert (reply.status, reply.error["code"]) == (404, -32601)
        assert "mcp-session-id" not in reply.headers
        assert client.post("tools/list").status == 200
    finally:
        client.close()


def test_a_client_that_leaves_mid_elicitation_cancels_the_request(
    base_url: str, server: McpServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="soklet.mcp.access")
    client = Legacy(base_url)
    try:
        client.initialize()
        message = client.message("tools/call", {"name": "catalog.continue", "arguments": {}})
        with client.http.stream(
            "POST", client.url, content=json.dumps(message).encode(), headers=client.headers()
        ) as r:
            for line in r.iter_lines():
                if line.startswith("data: ") and "elicitation/create" in line:
                    break  # leave without answering: the stream is closed here
        assert client.session_id is not None
        session = server.legacy_protocol.sessions.get(client.session_id)
        assert session is not None
        _wait_for(lambda: session.pending == 0 and session.in_flight == 0)
        _wait_for(lambda: any("status=499" in record.getMessage() for record in caplog.records))
        assert client.request("ping")["result"] == {}  # the session itself lives on
    finally:
        client.close()


@pytest.mark.slow
def test_a_client_that_leaves_cancels_the_running_handler(base_url: str, entries: Entries) -> None:
    client = Legacy(base_url)
    try:
        client.initialize()
        entries.cancelled.clear()
        before = entries["slow"]
        message = client.message("tools/call", {"name": "slow", "arguments": {}})
        # The handler runs for ten seconds unless cancelled; the client gives up (and closes) after five, time
        # enough for a busy machine to have started it.
        with pytest.raises(httpx.ReadTimeout):
            client.http.post(client.url, content=json.dumps(message).encode(), headers=client.headers(), timeout=5.0)
        assert entries["slow"] > before
        assert entries.cancelled.wait(60)
    finally:
        client.close()


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


def test_a_full_session_table_evicts_the_longest_idle_session(entries: Entries) -> None:
    with running(make_server(entries, options=ServerOptions(sessions=SessionOptions(max_sessions=1)))) as url:
        first, second = Legacy(url), Legacy(url)
        try:
            assert first.initialize().status_code == 200
            assert second.initialize().status_code == 200  # the idle first session made room
            assert second.request("ping")["result"] == {}
            gone = first.post_raw(first.message("ping"))
            assert (gone.status_code, gone.json()["error"]["code"]) == (404, -32001)
        finally:
            first.close()
            second.close()


def test_a_modern_only_server_refuses_a_2025_initialize(entries: Entries, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="soklet.mcp.access")
    modern = ServerOptions(protocol=ProtocolOptions(eras=ProtocolEras.MODERN))
    with running(make_server(entries, options=modern)) as url:
        client = Legacy(url)
        try:
            response = client.initialize()
            assert response.status_code == 400
            error = response.json()["error"]
            assert error["code"] == -32022
            assert error["data"] == {"supported": [VERSION], "requested": "2025-11-25"}
            assert "2026-07-28" in error["message"]
            assert "--protocol both" in error["message"]
            assert "mcp-session-id" not in response.headers
            get = httpx.get(client.url)
            assert (get.status_code, get.headers["allow"]) == (405, "POST")
            assert httpx.delete(client.url).status_code == 405
            modern = Client(url)
            try:
                assert modern.post("tools/list").status == 200
            finally:
                modern.close()
        finally:
            client.close()
    lines = [record.getMessage() for record in caplog.records if record.name == "soklet.mcp.access"]
    assert any("method=initialize" in line and "reason=legacy-client" in line for line in lines), lines


def test_a_legacy_only_server_refuses_modern_requests(entries: Entries, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="soklet.mcp.access")
    legacy = ServerOptions(protocol=ProtocolOptions(eras=ProtocolEras.LEGACY))
    with running(make_server(entries, options=legacy)) as url:
        modern = Client(url)
        try:
            reply = modern.post("tools/list")
            assert (reply.status, reply.error["code"]) == (400, -32022)
            assert reply.error["data"]["supported"] == list(LEGACY_PROTOCOL_VERSIONS)
            assert reply.error["data"]["requested"] == VERSION
        finally:
            modern.close()
        client = Legacy(url)
        try:
            assert client.initialize().status_code == 200
            assert client.request("ping")["result"] == {}
        finally:
            client.close()
    lines = [record.getMessage() for record in caplog.records if record.name == "soklet.mcp.access"]
    assert any("reason=modern-client" in line for line in lines), lines


def test_legacy_posts_are_logged_by_method_and_operation(legacy: Legacy, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="soklet.mcp.access")
    legacy.call("catalog.continue", {}, lambda request: {"action": "decline"})
    lines = [record.getMessage() for record in caplog.records if record.name == "soklet.mcp.access"]
    assert any("method=tools/call operation=catalog.continue status=200" in line for line in lines), lines
    assert any("reason=response" in line and "status=202" in line for line in lines), lines
    assert legacy.session_id is not None
    assert not any(legacy.session_id in line for line in lines)


def test_notifications_cancelled_ends_a_running_request(legacy: Legacy, entries: Entries) -> None:
    entries.cancelled.clear()
    message = legacy.message("tools/call", {"name": "slow", "arguments": {}})
    before = entries["slow"]
    with ThreadPoolExecutor(1) as pool:
        running_call = pool.submit(legacy.answers.post, legacy.url, content=json.dumps(message).encode(),
                                   headers=legacy.headers())  # fmt: skip
        _wait_for(lambda: entries["slow"] > before)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": message["id"]}}
        assert legacy.post_raw(cancel).status_code == 202
        answer = running_call.result(20)
    assert answer.status_code == 200
    assert answer.json()["error"]["code"] == -32800
    assert entries.cancelled.wait(10)


@pytest.mark.slow
def test_an_unanswered_round_ends_in_an_error_result(entries: Entries) -> None:
    quick = ServerOptions(sessions=SessionOptions(input_timeout_seconds=1))
    with running(make_server(entries, options=quick)) as url:
        client = Legacy(url)
        try:
            client.initialize()
            message = client.message("tools/call", {"name": "catalog.continue", "arguments": {}})
            body = json.dumps(message).encode()
            with client.http.stream("POST", client.url, content=body, headers=client.headers()) as r:
                frames = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
            assert frames[0]["method"] == "elicitation/create"
            result = frames[-1]["result"]
            assert result["isError"] is True
            assert "did not answer" in result["content"][0]["text"]
        finally:
            client.close()


def test_a_2025_06_18_session_gets_the_elicitation_of_its_version(base_url: str) -> None:
    client = Legacy(base_url, version="2025-06-18")
    try:
        client.initialize()
        asked: list[dict[str, Any]] = []

        def accept(request: dict[str, Any]) -> dict[str, Any]:
            asked.append(request["params"])
            return {"action": "accept", "content": {}}

        response, _seen = client.call("catalog.continue", {}, accept)
        assert text_of(response) == "Catalog access approved."
        assert "mode" not in asked[0]
    finally:
        client.close()


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: ProtocolOptions(eras="both"), TypeError),  # type: ignore[arg-type]
        (lambda: SessionOptions(max_sessions=0), ValueError),
        (lambda: SessionOptions(max_sessions=65537), ValueError),
        (lambda: SessionOptions(idle_seconds=0), ValueError),
        (lambda: SessionOptions(idle_seconds=86401), ValueError),
        (lambda: SessionOptions(input_timeout_seconds=0.5), ValueError),
        (lambda: SessionOptions(input_timeout_seconds=3601), ValueError),
    ],
)
def test_the_options_are_checked(build: Callable[[], object], error: type[Exception]) -> None:
    with pytest.raises(error):
        build()


def test_the_server_names_its_eras_and_engine() -> None:
    options = ServerOptions(
        protocol=ProtocolOptions(eras=ProtocolEras.LEGACY), sessions=SessionOptions(max_sessions=3, idle_seconds=60)
    )
    server = McpServer(Registry(), options=options)
    assert server.protocol_eras is ProtocolEras.LEGACY
    assert server.legacy_protocol.sessions.max_sessions == 3
    assert server.legacy_protocol.sessions.idle_seconds == 60
    assert McpServer(Registry()).protocol_eras is ProtocolEras.BOTH
