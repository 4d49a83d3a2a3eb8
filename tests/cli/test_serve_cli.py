"""``soklet serve`` as a real subprocess: the printed example works, SIGINT/SIGTERM stop it cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from soklet_cli.serve import EXAMPLE_END, EXAMPLE_START
from tests.server.support import Client

pytestmark = pytest.mark.slow


def _start(*arguments: str) -> tuple[subprocess.Popen[str], list[str]]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    process = subprocess.Popen(
        [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if line.rstrip("\n") == EXAMPLE_END or line.startswith("{"):
            break
    return process, lines


@pytest.fixture
def served() -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    process, lines = _start("--fixtures", "conformance")
    yield process, lines
    if process.poll() is None:
        process.kill()
        process.wait()


def test_printed_example_completes_catalog_continue(served: tuple[subprocess.Popen[str], list[str]]) -> None:
    process, lines = served
    assert lines[0].startswith("soklet serve: MCP 2026-07-28 at http://127.0.0.1:")
    assert any("EPHEMERAL development key" in line for line in lines)
    assert any(line.startswith("fingerprint: v2 soklet-mcp-protection-v1 ") for line in lines)
    # The block is pasted as a whole, its comment lines included: every line must be valid bash.
    script = "\n".join(lines[lines.index(EXAMPLE_START) : lines.index(EXAMPLE_END) + 1])
    assert not any(line.startswith("---") for line in lines)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, timeout=30, env=env)
    assert run.returncode == 0, run.stderr
    first, final = run.stdout.strip().splitlines()
    assert json.loads(first)["result"]["resultType"] == "input_required"
    assert json.loads(final)["result"]["content"][0]["text"] == "Catalog access approved."
    base = lines[0].rsplit(" ", 1)[1].removesuffix("/mcp")
    client = Client(base)
    tools = [tool["name"] for tool in client.post("tools/list").result["tools"]]
    assert tools[0] == "test_simple_text"
    assert "catalog.continue" in tools
    client.close()
    process.send_signal(signal.SIGINT)
    assert process.wait(15) == 0


def test_json_start_and_sigterm() -> None:
    process, lines = _start("--json", "--state-rounds", "3", "--state-lifetime", "2m")
    try:
        facts = json.loads(lines[-1])
        assert facts["development_key"] is True
        assert facts["port"] > 0
        assert facts["fingerprint"]["version"] == 2
        assert len(facts["example"]) == 4
        assert facts["active_key_id"] == "dev-ephemeral"
        assert facts["inspect"] == f"soklet inspect-state --keyring {facts['keyring_file']} TOKEN"
        assert Path(facts["keyring_file"]).is_file()
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
        assert not Path(facts["keyring_file"]).exists()
    finally:
        if process.poll() is None:
            process.kill()


def test_usage_errors() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "soklet_cli", "serve", "--keyring", "x.toml", "--dev-key"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2
    assert "exclude each other" in run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "soklet_cli", "serve", "--state-lifetime", "soon"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2
    for option, value in (
        ("--max-head-bytes", "1023"),
        ("--max-head-bytes", str(1024 * 1024 + 1)),
        ("--header-timeout", "1h1s"),
        ("--body-timeout", "30"),
        ("--keep-alive-timeout", "0s"),
        ("--max-connections", "0"),
        ("--shutdown-grace", "2h"),
    ):
        run = subprocess.run(
            [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", option, value],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert run.returncode == 2, (option, value)


def test_help_says_the_keyring_is_reloaded() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "soklet_cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert run.returncode == 0
    text = " ".join(run.stdout.split())
    assert "The keyring file is reloaded on SIGHUP" in text
    assert "--admin-port 9465 --admin-token-file" in text
