"""One POST handed straight to an ASGI app (no HTTP server, no client): what the in-process benchmarks time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping
from typing import Any

from soklet_core.protocol import DEFAULT_ENDPOINT_PATH


async def post(
    app: Any, body: bytes, headers: list[tuple[bytes, bytes]], *, at_entry: Callable[[], None] | None = None
) -> bytes:
    """The response body of ``body`` posted to ``app`` at the endpoint path; any status but 200 raises.

    ``at_entry`` runs just before the app is called (a benchmark counting the frames below it)."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": DEFAULT_ENDPOINT_PATH,
        "raw_path": DEFAULT_ENDPOINT_PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [*headers, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    delivered = False
    chunks: list[bytes] = []

    async def receive() -> MutableMapping[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            raise RuntimeError(f"status {message['status']}")
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    if at_entry is not None:
        at_entry()
    await app(scope, receive, send)
    return b"".join(chunks)
