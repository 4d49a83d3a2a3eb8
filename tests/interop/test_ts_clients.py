"""The official TypeScript MCP clients against a real ``soklet serve``: ``@modelcontextprotocol/client`` 2.4.0 at its
default settings (a 2025-era ``initialize`` and session), pinned to 2026-07-28 and in ``auto`` mode, and the v1 SDK
``@modelcontextprotocol/sdk`` 1.32.2 (2025 era only), over Streamable HTTP and launching ``soklet serve --stdio`` by
command. Each lists the tools and completes ``catalog.continue`` (accept, decline, cancel) and the two-stage
``deploy.approve`` through its real elicitation handler. A client of an era the server was told not to speak
(``--protocol modern|legacy``) is refused with a sentence that says what to do.

The clients are pinned in conformance/package.json with Node 22 and installed by the conformance runner's one
installer (``tools.conformance.ensure_installed``: ``npm ci`` into .cache/conformance when the lock changed); a
failed install fails these tests, never skips them. The scripts (clients/*.mjs) run with that pinned Node and print
one JSON report; the server's access log tells which era each client spoke."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.support_server import (
    DEMO_FLOWS,
    DEMO_TOOLS,
    STDIO_FLOWS,
    Flows,
    Served,
    access_log_of,
    serving,
    stdio_command,
)
from tools import conformance as installer

pytestmark = pytest.mark.slow

CLIENTS = Path(__file__).resolve().parent / "clients"
#: Seconds one client script may take for all its flows (a hung exchange fails instead of blocking the run).
SCRIPT_TIMEOUT = 120.0

#: (script, mode, package, version, the era it must speak).
CASES = [
    ("client_v2.mjs", "default", "@modelcontextprotocol/client", "2.4.0", "legacy"),
    ("client_v2.mjs", "pinned-2026", "@modelcontextprotocol/client", "2.4.0", "modern"),
    ("client_v2.mjs", "auto", "@modelcontextprotocol/client", "2.4.0", "modern"),
    ("client_v1.mjs", "default", "@modelcontextprotocol/sdk", "1.32.2", "legacy"),
]


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The install folder's node_modules, installed now when missing or stale; an install failure fails loudly."""
    try:
        folder = installer.ensure_installed()
    except installer.RunError as exc:
        pytest.fail(f"could not install the pinned Node 22 and TypeScript MCP clients: {exc}", pytrace=False)
    return folder / "node_modules"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path) as server:
        yield server


def run_script(
    node_modules: Path, script: str, server: str, mode: str, served: Served | None, cwd: Path = CLIENTS
) -> subprocess.CompletedProcess[str]:
    """Run one client script with the pinned Node, bounded by :data:`SCRIPT_TIMEOUT`; ``server`` is the URL, or for
    a stdio mode the JSON command line that launches the server (in ``cwd``)."""
    command = [str(installer.node_binary()), str(CLIENTS / script), server, mode, str(node_modules)]
    try:
        return subprocess.run(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT,
            env=installer.node_env(),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        log = served.log_text()[-3000:] if served is not None else ""
        pytest.fail(f"{script} {mode} did not finish within {SCRIPT_TIMEOUT:.0f} s:\n{log}")
        raise AssertionError from exc  # unreachable: pytest.fail raises


def run_client(node_modules: Path, script: str, url: str, mode: str, server: Served) -> dict[str, Any]:
    """Run one client script; its JSON report. Fails with its stderr and the server log when it fails."""
    done = run_script(node_modules, script, url, mode, server)
    if done.returncode != 0:
        pytest.fail(
            f"{script} {mode} exited {done.returncode}:\n{done.stderr[-3000:]}\n--- server log ---\n"
            f"{server.log_text()[-3000:]}",
            pytrace=False,
        )
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def assert_flows(report: dict[str, Any], package: str, version: str, mode: str, flows: Flows = DEMO_FLOWS) -> None:
    """The report names the pinned client and shows the demo's tools and every flow's expected text."""
    assert (report["client"], report["clientVersion"], report["mode"]) == (package, version, mode)
    assert report["tools"] == DEMO_TOOLS
    seen = [(call["tool"], call["flow"], call["isError"], call["texts"]) for call in report["calls"]]
    assert seen == [(tool, label, False, [text]) for tool, label, _, _, text in flows]
    asked = [len(call["elicitations"]) for call in report["calls"]]
    assert asked == [len(answers) for _, _, _, answers, _ in flows]


def assert_era(era: str, log: list[dict[str, str]], *, probed_here: bool = True, flows: Flows = DEMO_FLOWS) -> None:
    """The access log shows the era: 2025 opens with initialize and gets the elicitation answers as JSON-RPC
    responses (the rounds travel as server-to-client requests); 2026-07-28 has no initialize, and server/discover
    when the client probed this server (``probed_here``)."""
    methods = [entry.get("method", "-") for entry in log]
    if era == "legacy":
        assert "initialize" in methods, methods
        answered = [entry for entry in log if entry.get("reason") == "response"]
        assert len(answered) == sum(len(answers) for _, _, _, answers, _ in flows), log
    else:
        assert "initialize" not in methods, methods
        assert "server/discover" in methods or not probed_here, methods
    assert methods.count("tools/call") >= len(flows), methods


@pytest.mark.parametrize(
    ("script", "mode", "package", "version", "era"), CASES, ids=[f"{case[0][:-4]}-{case[1]}" for case in CASES]
)
def test_client_completes_the_demo_flows(
    node_modules: Path, served: Served, script: str, mode: str, package: str, version: str, era: str
) -> None:
    report = run_client(node_modules, script, served.url, mode, served)
    assert_flows(report, package, version, mode)
    assert report["era"] == era
    assert_era(era, served.access_log())
    # A 2025-era client holds an Mcp-Session-Id session at 2025-11-25; a 2026-07-28 client holds none.
    assert report["sessionId"] is (era == "legacy")
    assert report["protocolVersion"] == ("2025-11-25" if era == "legacy" else "2026-07-28")


#: (script, mode, package, version, era) launching ``soklet serve --stdio`` as a desktop host does.
STDIO_CASES = [
    ("client_v1.mjs", "stdio", "@modelcontextprotocol/sdk", "1.32.2", "legacy"),
    ("client_v2.mjs", "stdio-default", "@modelcontextprotocol/client", "2.4.0", "legacy"),
    ("client_v2.mjs", "stdio-pinned-2026", "@modelcontextprotocol/client", "2.4.0", "modern"),
]


@pytest.mark.parametrize(
    ("script", "mode", "package", "version", "era"),
    STDIO_CASES,
    ids=[f"{case[0][:-4]}-{case[1]}" for case in STDIO_CASES],
)
def test_client_over_stdio_completes_the_demo_flows(
    node_modules: Path, tmp_path: Path, script: str, mode: str, package: str, version: str, era: str
) -> None:
    done = run_script(node_modules, script, json.dumps(stdio_command()), mode, None, cwd=tmp_path)
    if done.returncode != 0:
        pytest.fail(f"{script} {mode} exited {done.returncode}:\n{done.stderr[-3000:]}", pytrace=False)
    report: dict[str, Any] = json.loads(done.stdout)
    assert_flows(report, package, version, mode, STDIO_FLOWS)
    assert report["era"] == era
    assert report["sessionId"] is False  # stdio has no Mcp-Session-Id: the connection is the session
    # The server's stderr passes through the script's. Over stdio the 2.4.0 client probes with server/discover on a
    # short-lived sibling process whose stderr it discards, so the discover is not in this log.
    assert_era(era, access_log_of(done.stderr), probed_here=False, flows=STDIO_FLOWS)


#: (script, mode, the server's --protocol, the access log's reason, the start of the sentence the client shows): a
#: client of the era the server does not speak. The v1 SDK and the 2.4.0 client's 2025-era connect show the JSON-RPC
#: error as it came (-32022 and the message); the pinned 2.4.0 client shows the message in its own ProtocolError.
REFUSALS = [
    ("client_v1.mjs", "default", "modern", "legacy-client", "This server speaks MCP 2026-07-28 only"),
    ("client_v2.mjs", "default", "modern", "legacy-client", "This server speaks MCP 2026-07-28 only"),
    ("client_v2.mjs", "pinned-2026", "legacy", "modern-client", "This server speaks the 2025-era MCP protocol only"),
]


@pytest.mark.parametrize(
    ("script", "mode", "protocol", "reason", "sentence"),
    REFUSALS,
    ids=[f"{case[0][:-4]}-{case[1]}" for case in REFUSALS],
)
def test_client_of_the_other_era_is_refused_clearly(
    node_modules: Path, tmp_path: Path, script: str, mode: str, protocol: str, reason: str, sentence: str
) -> None:
    with serving(tmp_path, "--protocol", protocol) as server:
        done = run_script(node_modules, script, server.url, mode, server)
        log = server.access_log()
    assert done.returncode != 0, done.stdout
    # What a person reads in the client's error: which protocol the server speaks and what to do about it.
    assert sentence in done.stderr, done.stderr[-3000:]
    assert "--protocol both" in done.stderr, done.stderr[-3000:]
    if reason == "legacy-client":
        assert "-32022" in done.stderr, done.stderr[-3000:]
    assert any(entry.get("reason") == reason for entry in log), log
