"""A stop of a real ``soklet serve`` while a 2025-era call waits: the cancellation error names the call's id, so
the client's pending request ends (an answer with id null matches nothing and the client waits on)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.support_serve import Served

pytestmark = pytest.mark.slow

#: A hang guard for every HTTP read, not a timing assertion.
GUARD_SECONDS = 30


def test_sigterm_during_a_2025_call_answers_with_the_calls_id(tmp_path: Path) -> None:
    served = Served(tmp_path, "--shutdown-grace", "1s")
    try:
        url = served.facts["url"]
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"},
        }
        with httpx.Client(timeout=GUARD_SECONDS) as http:
            opened = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
            assert opened.status_code == 200
            headers = {
                **headers,
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "MCP-Protocol-Version": "2025-11-25",
            }
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "catalog.continue"}}
            frames: list[dict[str, Any]] = []
            with http.stream("POST", url, content=json.dumps(call).encode(), headers=headers) as stream:
                assert stream.headers["content-type"] == "text/event-stream"
                for line in stream.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    frames.append(json.loads(line[len("data: ") :]))
                    if frames[-1].get("method") == "elicitation/create":
                        # The call now waits for the client's answer: the server is stopped instead.
                        served.process.send_signal(signal.SIGTERM)
        last = frames[-1]
        assert "error" in last, frames
        assert last["id"] == 7
        assert last["error"] == {"code": -32603, "message": "Server shutting down: request cancelled"}
        assert served.process.wait(GUARD_SECONDS) == 0
    finally:
        served.kill()
