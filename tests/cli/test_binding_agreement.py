"""The server and ``soklet inspect-state --request`` bind a retry identically (issue 10): a real ``soklet serve``
seals a state for a ``catalog.continue`` call whose ``_meta`` names its version only as
``io.modelcontextprotocol/protocolVersion``, and inspect-state, given the retry and the server's keyring, runs
every opening check to the same verdict the server reaches.

The version the state is bound to is the one the server validated. An unprefixed ``protocolVersion`` member is an
ordinary ``_meta`` member: a decoy one holding another version must not move either binding (a CLI that read it
would refuse a retry the server accepts), and a retry that names another version in the prefixed member is refused
by both.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from soklet_apps import demo
from soklet_core.files import read_keyring_file
from soklet_core.mcp import McpServer, ServerOptions
from soklet_core.mcp.server.options import ProtocolOptions
from soklet_core.protection import ProtectionConfig
from soklet_core.protocol import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION, PROTOCOL_VERSION_META_KEY
from tests.conftest import Result, Soklet
from tests.server.support import running

pytestmark = pytest.mark.slow

RING = "soklet-keyring.toml"
TOOL = demo.catalog_continue.name
#: A protocol version other than the one soklet speaks (an earlier MCP revision).
OTHER_VERSION = "2025-11-25"
#: Seconds a started ``soklet serve`` may take to print its start-up facts, and to stop.
START_SECONDS = 60
#: The answer the demo tool's form asks for.
APPROVAL = {"approval": {"action": "accept", "content": {}}}


@dataclass(frozen=True)
class Served:
    """A running ``soklet serve``: its MCP endpoint URL and process."""

    url: str
    process: subprocess.Popen[str]


@pytest.fixture
def served(soklet: Soklet) -> Iterator[Served]:
    """``soklet serve --keyring soklet-keyring.toml`` (a fresh key k1) on a free port; stopped, and its output
    scanned for key material, after the test."""
    assert soklet.run("keys", "generate", "--id", "k1").returncode == 0
    arguments = ("serve", "--port", "0", "--keyring", RING, "--json")
    process = subprocess.Popen(
        [sys.executable, "-m", "soklet_cli", *arguments],
        cwd=soklet.cwd,
        env=soklet.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first_line = process.stdout.readline()
        assert first_line.startswith("{"), first_line
        yield Served(json.loads(first_line)["url"], process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=START_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        soklet.results.append(Result(arguments, process.returncode, stdout, stderr))
        soklet.assert_no_leak()


def request(request_id: int, *, version: str, meta: dict[str, Any], **params: Any) -> dict[str, Any]:
    """A ``tools/call`` of the demo tool whose ``_meta`` names ``version`` only in the prefixed member (plus
    ``meta``)."""
    full_meta = {PROTOCOL_VERSION_META_KEY: version, CLIENT_CAPABILITIES_META_KEY: {"elicitation": {}}, **meta}
    body = {"name": TOOL, "arguments": {}, **params, "_meta": full_meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


def post(url: str, body: bytes, *, version: str) -> dict[str, Any]:
    """POST one request as a client speaking ``version``; the JSON-RPC answer (the last frame of a stream)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
        "Mcp-Method": "tools/call",
        "Mcp-Name": TOOL,
    }
    response = httpx.post(url, content=body, headers=headers, timeout=30)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        frames = [line.removeprefix("data: ") for line in response.text.splitlines() if line.startswith("data: ")]
        answer: dict[str, Any] = json.loads(frames[-1])
    else:
        assert response.content, response.status_code
        answer = response.json()
    return answer


def sealed_by_server(url: str, meta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The first call: the server answers input_required with a sealed state. The token and the request."""
    first = request(1, version=PROTOCOL_VERSION, meta=meta)
    answer = post(url, json.dumps(first).encode(), version=PROTOCOL_VERSION)
    assert answer["result"]["resultType"] == "input_required", answer
    token: str = answer["result"]["requestState"]
    return token, first


def write_retry(folder: Path, name: str, token: str, *, version: str, meta: dict[str, Any]) -> bytes:
    """The retry with the answer and the state, written to ``name``; the exact bytes a client sends."""
    retry = request(2, version=version, meta=meta, inputResponses=APPROVAL, requestState=token)
    body = json.dumps(retry).encode()
    (folder / name).write_bytes(body)
    return body


def inspected(soklet: Soklet, token: str, retry: str, *extra: str) -> tuple[Result, dict[str, Any]]:
    result = soklet.run("inspect-state", "--keyring", RING, "--request", retry, *extra, "--json", token)
    assert result.stdout.startswith("{"), result.stderr
    return result, json.loads(result.stdout)


#: The ``_meta`` extras of the emitting request and its retry: none, and a decoy unprefixed member.
EXTRAS = {"prefixed-only": {}, "decoy-unprefixed": {"protocolVersion": OTHER_VERSION}}


@pytest.mark.parametrize("extra", EXTRAS.values(), ids=EXTRAS.keys())
def test_a_retry_the_server_accepts_passes_every_check_of_inspect_state(
    soklet: Soklet, served: Served, extra: dict[str, Any]
) -> None:
    token, _first = sealed_by_server(served.url, extra)
    body = write_retry(soklet.cwd, "retry.json", token, version=PROTOCOL_VERSION, meta=extra)
    result, document = inspected(soklet, token, "retry.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert {check["check"]: check["status"] for check in document["checks"]} == {
        check["check"]: "passed" for check in document["checks"]
    }
    sealed, retry = document["sealed"]["binding"], document["retry"]
    assert sealed["protocol_version"] == retry["protocol_version"] == PROTOCOL_VERSION
    assert (retry["method"], retry["path"], retry["params_digest"]) == (
        sealed["method"],
        sealed["path"],
        sealed["params_digest"],
    )
    # The server opens the same state for the same bytes.
    answer = post(served.url, body, version=PROTOCOL_VERSION)
    assert answer["result"]["resultType"] == "complete", answer
    assert answer["result"]["content"][0]["text"] == "Catalog access approved."


@pytest.mark.parametrize("extra", EXTRAS.values(), ids=EXTRAS.keys())
def test_a_retry_in_another_version_fails_the_version_check_and_the_server_refuses_it(
    soklet: Soklet, served: Served, extra: dict[str, Any]
) -> None:
    token, _first = sealed_by_server(served.url, extra)
    body = write_retry(soklet.cwd, "other.json", token, version=OTHER_VERSION, meta=extra)
    result, document = inspected(soklet, token, "other.json")
    assert result.returncode == 1, result.stdout + result.stderr
    statuses = {check["check"]: check["status"] for check in document["checks"]}
    assert statuses["binding-protocol-version"] == "failed"
    assert document["refusal"] == "binding-protocol-version"
    assert document["retry"]["protocol_version"] == OTHER_VERSION
    # The version member is also part of the stable params, so their digest differs too; the version is checked
    # first, so it is the refusal.
    assert statuses["binding-method"] == statuses["binding-path"] == "passed"
    # soklet serve speaks one version: it refuses the retry before it opens the state.
    answer = post(served.url, body, version=OTHER_VERSION)
    assert "result" not in answer, answer
    assert answer["error"]["data"]["requested"] == OTHER_VERSION


@pytest.fixture
def two_versions(soklet: Soklet) -> Iterator[str]:
    """The demo tools on a server (real uvicorn, in this process) that accepts soklet's version and
    :data:`OTHER_VERSION`, sealing with a fresh keyring file's key; its endpoint URL."""
    assert soklet.run("keys", "generate", "--id", "k1").returncode == 0
    keyring = read_keyring_file(soklet.cwd / RING).keyring()
    server = McpServer(
        demo.build_registry(),
        protection=ProtectionConfig(keyring=keyring),
        options=ServerOptions(protocol=ProtocolOptions(supported_versions=(PROTOCOL_VERSION, OTHER_VERSION))),
    )
    with running(server) as base:
        yield base + server.path


@pytest.mark.parametrize(
    ("sealed_in", "retried_in"),
    [(OTHER_VERSION, OTHER_VERSION), (PROTOCOL_VERSION, OTHER_VERSION), (OTHER_VERSION, PROTOCOL_VERSION)],
)
def test_a_server_that_validates_either_version_and_inspect_state_reach_the_same_verdict(
    soklet: Soklet, two_versions: str, sealed_in: str, retried_in: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Here the server validates the version and opens the state, so a refusal is the binding's own.
    first = request(1, version=sealed_in, meta={})
    answer = post(two_versions, json.dumps(first).encode(), version=sealed_in)
    token = answer["result"]["requestState"]
    body = write_retry(soklet.cwd, "retry.json", token, version=retried_in, meta={})
    result, document = inspected(soklet, token, "retry.json")
    assert document["sealed"]["binding"]["protocol_version"] == sealed_in
    assert document["retry"]["protocol_version"] == retried_in
    with caplog.at_level("WARNING", logger="soklet"):
        answer = post(two_versions, body, version=retried_in)
    if sealed_in == retried_in:
        assert result.returncode == 0, result.stdout + result.stderr
        assert {check["status"] for check in document["checks"]} == {"passed"}
        assert answer["result"]["resultType"] == "complete", answer
    else:
        assert result.returncode == 1, result.stdout + result.stderr
        assert document["refusal"] == "binding-protocol-version"
        assert "result" not in answer, answer
        # The wire error names no reason; the operator's log line does, and it is the same check.
        assert answer["error"]["message"] == "Invalid or expired request state"
        assert any("binding-protocol-version" in record.getMessage() for record in caplog.records)
