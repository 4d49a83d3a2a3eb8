"""The official TypeScript MCP clients against a real ``soklet serve``: ``@modelcontextprotocol/client`` 2.4.0 at its
default settings (a 2025-era ``initialize`` and session), pinned to 2026-07-28 and in ``auto`` mode, and the v1 SDK
``@modelcontextprotocol/sdk`` 1.32.2 (2025 era only). Each lists the tools and completes ``catalog.continue``
(accept, decline, cancel) and the two-stage ``deploy.approve`` through its real elicitation handler.

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

from tests.interop.support_server import DEMO_FLOWS, DEMO_TOOLS, Served, serving
from tools import conformance as installer

CLIENTS = Path(__file__).resolve().parent / "clients"
#: Seconds one client script may take for all its flows (a hung exchange fails instead of blocking the run).
SCRIPT_TIMEOUT = 120.0

#: (script, mode, package, version, the era it must speak).
CASES = [
    ("client_v2.mjs", "pinned-2026", "@modelcontextprotocol/client", "2.4.0", "modern"),
    ("client_v2.mjs", "auto", "@modelcontextprotocol/client", "2.4.0", "modern"),
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


def run_client(node_modules: Path, script: str, url: str, mode: str, server: Served) -> dict[str, Any]:
    """Run one client script with the pinned Node; its JSON report. Fails with its stderr and the server log."""
    command = [str(installer.node_binary()), str(CLIENTS / script), url, mode, str(node_modules)]
    try:
        done = subprocess.run(
            command,
            cwd=CLIENTS,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT,
            env=installer.node_env(),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{script} {mode} did not finish within {SCRIPT_TIMEOUT:.0f} s:\n{server.log_text()[-3000:]}")
        raise AssertionError from exc  # unreachable: pytest.fail raises
    if done.returncode != 0:
        pytest.fail(
            f"{script} {mode} exited {done.returncode}:\n{done.stderr[-3000:]}\n--- server log ---\n"
            f"{server.log_text()[-3000:]}",
            pytrace=False,
        )
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize(
    ("script", "mode", "package", "version", "era"), CASES, ids=[f"{case[0][:-4]}-{case[1]}" for case in CASES]
)
def test_client_completes_the_demo_flows(
    node_modules: Path, served: Served, script: str, mode: str, package: str, version: str, era: str
) -> None:
    report = run_client(node_modules, script, served.url, mode, served)
    assert (report["client"], report["clientVersion"], report["mode"]) == (package, version, mode)
    assert report["tools"] == DEMO_TOOLS
    seen = [(call["tool"], call["flow"], call["isError"], call["texts"]) for call in report["calls"]]
    assert seen == [(tool, label, False, [text]) for tool, label, _, _, text in DEMO_FLOWS]
    asked = [len(call["elicitations"]) for call in report["calls"]]
    assert asked == [len(answers) for _, _, _, answers, _ in DEMO_FLOWS]
    methods = served.access_methods()
    assert report["era"] == era
    if era == "legacy":
        # The 2025 era: one initialize opens an Mcp-Session-Id session; the rounds travel as server requests.
        assert "initialize" in methods, methods
        # Each elicitation went out as a server-to-client request and came back as a JSON-RPC response POST.
        answered = [entry for entry in served.access_log() if entry.get("reason") == "response"]
        assert len(answered) == sum(len(answers) for _, _, _, answers, _ in DEMO_FLOWS)
        assert report["sessionId"] is True
        assert report["protocolVersion"] == "2025-11-25"
    else:
        # The 2026-07-28 era: server/discover, then stateless requests; no initialize, no session.
        assert "initialize" not in methods, methods
        assert "server/discover" in methods, methods
        assert report["sessionId"] is False
        assert report["protocolVersion"] == "2026-07-28"
    assert methods.count("tools/call") >= len(DEMO_FLOWS)
