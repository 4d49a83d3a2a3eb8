"""Mounts: a plain ASGI app under a path prefix, behind the endpoint's Host/Origin and drain checks."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from soklet_core.mcp import McpServer, Registry, ServerOptions
from soklet_core.mcp.server.http._transport import MAX_MOUNTS, Message, Receive, Scope, Send
from soklet_core.mcp.server.options import HttpOptions
from tests.server.support import Client, running


class Page:
    """A tiny ASGI app that answers with what it was handed (path, method, body) and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += 1
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        answer = json.dumps({"path": scope["path"], "method": scope["method"], "body": body.decode()}).encode()
        await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})


@pytest.fixture(scope="module")
def page() -> Page:
    return Page()


@pytest.fixture(scope="module")
def base_url(page: Page) -> Iterator[str]:
    options = ServerOptions(http=HttpOptions(allowed_origins=("https://app.example.com",)))
    server = McpServer(Registry(), mounts={"/link/": page}, options=options)
    with running(server) as url:
        yield url


def test_requests_under_the_prefix_reach_the_mounted_app(base_url: str, page: Page) -> None:
    before = page.calls
    got = httpx.get(f"{base_url}/link/abc?x=1")
    assert got.status_code == 201
    assert got.json() == {"path": "/link/abc", "method": "GET", "body": ""}
    posted = httpx.post(f"{base_url}/link/approve", content=b"handle=abc", headers={"Origin": "http://localhost:1"})
    assert (posted.status_code, posted.json()["method"], posted.json()["body"]) == (201, "POST", "handle=abc")
    assert page.calls == before + 2


def test_the_checks_come_first(base_url: str, page: Page) -> None:
    before = page.calls
    assert httpx.get(f"{base_url}/link/abc", headers={"Host": "evil.example.com"}).status_code == 403
    assert httpx.get(f"{base_url}/link/abc", headers={"Origin": "https://evil.example.com"}).status_code == 403
    assert httpx.get(f"{base_url}/link/abc", headers={"Origin": "null"}).status_code == 403
    allowed = httpx.get(f"{base_url}/link/abc", headers={"Origin": "https://app.example.com"})
    assert allowed.status_code == 201
    assert page.calls == before + 1


def test_other_paths_and_the_endpoint_are_unchanged(base_url: str, page: Page) -> None:
    before = page.calls
    for path in ("/link", "/lin/x", "/other/", "/"):
        got = httpx.get(base_url + path)
        assert got.status_code == 404, path
        assert got.json()["error"]["code"] == -32600
    assert page.calls == before
    client = Client(base_url)
    try:
        assert client.post("tools/list").result["tools"] == []
    finally:
        client.close()


def test_the_access_log_names_the_mount(base_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="soklet.mcp.access")
    httpx.get(f"{base_url}/link/secret-handle-value")
    lines = [record.getMessage() for record in caplog.records if record.name == "soklet.mcp.access"]
    assert any("status=201" in line and "reason=mount" in line for line in lines), lines
    assert not any("secret-handle-value" in line for line in lines)


def _call(app: Any, path: str) -> list[Message]:
    """One GET through the ASGI app itself, after a drain began (the drain needs the app's event loop)."""
    sent: list[Message] = []

    async def main() -> None:
        app.begin_drain()

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": path, "headers": [(b"host", b"localhost")]}
        await app(scope, receive, send)

    asyncio.run(main())
    return sent


def test_a_draining_server_refuses_mounted_requests() -> None:
    page = Page()
    app = McpServer(Registry(), mounts={"/link/": page}).asgi_app()
    sent = _call(app, "/link/x")
    assert sent[0]["status"] == 503
    assert page.calls == 0


@pytest.mark.parametrize(
    ("mounts", "error"),
    [
        ({"/link": Page()}, ValueError),
        ({"link/": Page()}, ValueError),
        ({"/": Page()}, ValueError),
        ({"//link/": Page()}, ValueError),
        ({"/a/../link/": Page()}, ValueError),
        ({"/mcp/": Page()}, ValueError),
        ({"/mcp/link/": Page()}, ValueError),
        ({"/link/": Page(), "/link/deeper/": Page()}, ValueError),
        ({f"/m{n}/": Page() for n in range(MAX_MOUNTS + 1)}, ValueError),
        ({"/link/": "not an app"}, TypeError),
        ([("/link/", Page())], TypeError),
    ],
)
def test_mount_prefixes_are_checked(mounts: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        McpServer(Registry(), mounts=mounts)


def test_a_prefix_beside_the_endpoint_is_allowed() -> None:
    options = ServerOptions(http=HttpOptions(path="/api/mcp"))
    server = McpServer(Registry(), options=options, mounts={"/api/link/": Page(), "/mcpx/": Page()})
    assert server.path == "/api/mcp"
