"""Spans over stdio, from a real ``soklet serve --stdio`` subprocess exporting with ``OTEL_TRACES_EXPORTER=console``
(the SDK's console exporter, on standard error: standard output holds the protocol alone).

A 2026-07-28 line takes its parent from ``_meta.traceparent`` as a POST does; a request inside a 2025-era session
is a server span of era ``2025`` with the engine's spans below it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

GUARD_SECONDS = 60
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"


def _run(lines: list[dict[str, Any]]) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    piped = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    command = [sys.executable, "-m", "soklet_cli", "serve", "--stdio"]
    return subprocess.run(command, input=piped, capture_output=True, env=env, timeout=GUARD_SECONDS)


def _spans(stderr: bytes) -> list[dict[str, Any]]:
    """The span objects the console exporter wrote among the log lines."""
    text = stderr.decode()
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict) and "context" in value and "name" in value:
            found.append(value)
        index = text.find("{", end)
    return found


def test_a_modern_line_is_a_server_span_of_the_clients_trace() -> None:
    meta = {PV: "2026-07-28", CAPS: {"elicitation": {}}, "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "catalog.continue", "_meta": meta}}
    run = _run([call])
    assert run.returncode == 0, run.stderr[-2000:]
    answer = json.loads(run.stdout.splitlines()[0])
    assert answer["result"]["resultType"] == "input_required"
    assert all(line.startswith(b"{") for line in run.stdout.splitlines())  # stdout: the protocol only
    spans = _spans(run.stderr)
    (server,) = [span for span in spans if span["kind"] == "SpanKind.SERVER"]
    assert server["name"] == "tools/call catalog.continue"
    assert server["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert server["parent_id"] == f"0x{CLIENT_SPAN}"
    assert server["attributes"]["network.transport"] == "pipe"
    assert server["attributes"]["soklet.era"] == "2026-07-28"
    assert server["attributes"]["soklet.outcome"] == "input_required"
    names = {span["name"] for span in spans if span.get("parent_id") == server["context"]["span_id"]}
    assert {"soklet.admission", "soklet.handler", "soklet.state.seal"} <= names
    state = answer["result"]["requestState"]
    assert state[:16] not in run.stderr.decode()


def test_a_request_in_a_2025_session_is_a_server_span_of_that_era() -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    listed = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"_meta": {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"}},
    }
    run = _run([initialize, initialized, listed])
    assert run.returncode == 0, run.stderr[-2000:]
    spans = _spans(run.stderr)
    servers = {span["name"]: span for span in spans if span["kind"] == "SpanKind.SERVER"}
    assert set(servers) == {"initialize", "tools/list"}
    for span in servers.values():
        assert span["attributes"]["soklet.era"] == "2025"
        assert span["attributes"]["network.transport"] == "pipe"
    assert servers["tools/list"]["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert servers["tools/list"]["attributes"]["soklet.outcome"] == "complete"
