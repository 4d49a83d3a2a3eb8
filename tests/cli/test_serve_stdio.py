"""``soklet serve --stdio`` as a real subprocess: both protocol eras over its standard input and output, stdout
holding JSON-RPC lines only and stderr the start-up facts and the logs."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from soklet_core.mcp.server.legacy._engine import (
    DEFAULT_INPUT_TIMEOUT_SECONDS,
    LEGACY_PROTOCOL_VERSIONS,
    MAX_INPUT_TIMEOUT_SECONDS,
)
from soklet_core.mcp.server.legacy._sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_SECONDS,
    MAX_SESSION_IDLE_SECONDS,
    MAX_SESSIONS_LIMIT,
)
from soklet_core.protection.diagnosis import duration_text

pytestmark = pytest.mark.slow

#: How long a test waits for one line before it fails (a hang guard, not a timing assertion).
LINE_GUARD_SECONDS = 30
MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"


class Served:
    """A running ``soklet serve --stdio``: lines written to its stdin, lines read from its stdout."""

    def __init__(self, *arguments: str) -> None:
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "soklet_cli", "serve", "--stdio", *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stdout: list[bytes] = []  # every line the server wrote to stdout, in order
        self.stderr = b""
        self._readers = [
            threading.Thread(target=self._read_stdout, args=(self.process.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self.process.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.stdout.append(line)
            self.lines.put(line)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        self.stderr = stream.read()

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def read(self) -> dict[str, Any]:
        line = self.lines.get(timeout=LINE_GUARD_SECONDS)
        message: dict[str, Any] = json.loads(line)
        return message

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.read()

    def finish(self) -> int:
        """Close stdin (the host's way to stop the server); the exit status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(LINE_GUARD_SECONDS)
        for reader in self._readers:
            reader.join(LINE_GUARD_SECONDS)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def serve() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for served in started:
        served.kill()


def start(started: list[Served], *arguments: str) -> Served:
    served = Served(*arguments)
    started.append(served)
    return served


def modern(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body = dict(params or {})
    body["_meta"] = {PV: MODERN, CAPS: {"elicitation": {}}}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}


def initialize(version: str) -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "t", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


def assert_protocol_only(served: Served) -> None:
    """Every stdout line is one JSON-RPC 2.0 message; the banner and the logs went to stderr."""
    assert served.stdout, "nothing was written to stdout"
    for line in served.stdout:
        assert line.endswith(b"\n")
        assert json.loads(line)["jsonrpc"] == "2.0"
    text = served.stderr.decode()
    assert "soklet serve: MCP 2026-07-28 over stdio" in text
    assert "sealing key: dev-ephemeral" in text
    assert "transport=stdio method=tools/call operation=catalog.continue status=200" in text


def test_stdio_modern_era(serve: list[Served]) -> None:
    served = start(serve)
    listed = served.request(modern(1, "tools/list"))
    assert "catalog.continue" in [tool["name"] for tool in listed["result"]["tools"]]
    first = served.request(modern(2, "tools/call", {"name": "catalog.continue", "arguments": {}}))
    state = first["result"]["requestState"]
    assert first["result"]["inputRequests"]["approval"]["method"] == "elicitation/create"
    retry = {
        "name": "catalog.continue",
        "arguments": {},
        "inputResponses": {"approval": {"action": "accept", "content": {}}},
        "requestState": state,
    }
    done = served.request(modern(3, "tools/call", retry))
    assert done["result"]["content"][0]["text"] == "Catalog access approved."
    assert served.finish() == 0
    assert_protocol_only(served)


def test_stdio_legacy_era(serve: list[Served]) -> None:
    served = start(serve)
    init = served.request(initialize("2025-06-18"))
    assert init["result"]["protocolVersion"] == "2025-06-18"
    served.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    listed = served.request({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert "catalog.continue" in [tool["name"] for tool in listed["result"]["tools"]]
    served.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "catalog.continue"}})
    asked = served.read()
    assert asked["method"] == "elicitation/create"
    assert "mode" not in asked["params"]  # 2025-06-18's form elicitation has no mode
    served.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}})
    done = served.read()
    assert done["id"] == 2
    assert done["result"]["content"][0]["text"] == "Catalog access approved."
    assert served.finish() == 0
    assert_protocol_only(served)


def test_stdio_protocol_modern_refuses_a_2025_initialize(serve: list[Served]) -> None:
    served = start(serve, "--protocol", "modern")
    refused = served.request(initialize("2025-11-25"))
    assert refused["id"] == 0
    assert refused["error"]["code"] == -32022
    assert refused["error"]["data"] == {"supported": [MODERN], "requested": "2025-11-25"}
    assert "start the server with --protocol both" in refused["error"]["message"]
    assert served.finish() == 0
    assert b"reason=legacy-client" in served.stderr


def test_stdio_refuses_the_admin_port() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "soklet_cli", "serve", "--stdio", "--admin-port", "0"],
        capture_output=True,
        timeout=LINE_GUARD_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2
    assert run.stdout == b""
    assert b"--admin-port cannot be used with --stdio" in run.stderr


def test_stdio_bounds_of_the_session_options() -> None:
    for arguments in (
        ["--max-sessions", "0"],
        ["--session-idle-timeout", "25h"],
        ["--input-timeout", "2h"],
        ["--protocol", "2025"],
    ):
        run = subprocess.run(
            [sys.executable, "-m", "soklet_cli", "serve", "--stdio", *arguments],
            capture_output=True,
            timeout=LINE_GUARD_SECONDS,
            stdin=subprocess.DEVNULL,
        )
        assert run.returncode == 2, arguments
        assert run.stdout == b""


def test_stdio_stops_cleanly_on_sigterm(serve: list[Served]) -> None:
    served = start(serve)
    init = served.request(initialize("2025-11-25"))
    assert init["result"]["protocolVersion"] == "2025-11-25"
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(LINE_GUARD_SECONDS) == 0
    for line in served.stdout:
        assert json.loads(line)["jsonrpc"] == "2.0"


def test_help_gives_an_example_and_the_bounds_of_each_new_option() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "soklet_cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=LINE_GUARD_SECONDS,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert run.returncode == 0
    text = " ".join(run.stdout.split())
    for example in (
        "soklet serve --stdio",
        "soklet serve --protocol modern",
        "--max-sessions 256 --session-idle-timeout 10m --input-timeout 2m",
    ):
        assert example in text
    assert "<modern|legacy|both>" in text
    assert f"1<=x<={MAX_SESSIONS_LIMIT}" in text
    assert f"[default: {DEFAULT_MAX_SESSIONS}]" in text
    assert f"(max {duration_text(timedelta(seconds=MAX_SESSION_IDLE_SECONDS))})" in text
    assert f"(max {duration_text(timedelta(seconds=MAX_INPUT_TIMEOUT_SECONDS))})" in text
    assert f"[default: {duration_text(timedelta(seconds=DEFAULT_SESSION_IDLE_SECONDS))}]" in text
    assert f"[default: {duration_text(timedelta(seconds=DEFAULT_INPUT_TIMEOUT_SECONDS))}]" in text
    assert ", ".join(LEGACY_PROTOCOL_VERSIONS) in text


def test_http_protocol_modern_and_session_options_reach_the_server() -> None:
    """The same options over HTTP: a modern-only server refuses a 2025-era initialize with -32022 (400)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    options = ["--protocol", "modern", "--max-sessions", "2", "--session-idle-timeout", "1m", "--input-timeout", "5s"]
    process = subprocess.Popen(
        [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--json", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert process.stdout is not None
        facts = json.loads(process.stdout.readline())
        assert facts["protocol"] == "modern"
        reply = httpx.post(
            facts["url"],
            json=initialize("2025-03-26"),
            headers={"Accept": "application/json, text/event-stream"},
            timeout=LINE_GUARD_SECONDS,
        )
        assert reply.status_code == 400
        assert reply.json()["error"]["code"] == -32022
        assert reply.json()["error"]["data"] == {"supported": [MODERN], "requested": "2025-03-26"}
        process.send_signal(signal.SIGTERM)
        assert process.wait(LINE_GUARD_SECONDS) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "soklet_cli", "serve", "--stdio", *arguments]


def _answers(stdout: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _piped_modern() -> bytes:
    return b"".join(json.dumps(modern(n, "tools/list")).encode() + b"\n" for n in range(1, 11))


def _piped_legacy() -> bytes:
    messages = [initialize("2025-11-25"), {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    messages += [{"jsonrpc": "2.0", "id": n, "method": "tools/list"} for n in range(1, 11)]
    return b"".join(json.dumps(message).encode() + b"\n" for message in messages)


def test_stdio_with_dev_null_input_exits_0() -> None:
    run = subprocess.run(_command(), stdin=subprocess.DEVNULL, capture_output=True, timeout=LINE_GUARD_SECONDS)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == b""
    assert b"PermissionError" not in run.stderr


def test_stdio_with_closed_input_exits_0() -> None:
    # The shell starts the server with descriptor 0 closed (a host that gives it no standard input at all).
    shell = "exec " + " ".join(_command()) + " <&-"
    run = subprocess.run(["sh", "-c", shell], capture_output=True, timeout=LINE_GUARD_SECONDS)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == b""
    assert b"internal error" not in run.stderr


@pytest.mark.parametrize(("piped", "expected"), [(_piped_modern(), 10), (_piped_legacy(), 11)])
def test_stdio_answers_every_request_piped_before_the_end_of_input(piped: bytes, expected: int) -> None:
    run = subprocess.run(_command(), input=piped, capture_output=True, timeout=LINE_GUARD_SECONDS)
    assert run.returncode == 0, run.stderr[-2000:]
    answers = _answers(run.stdout)
    assert len(answers) == expected
    assert all("tools" in answer["result"] for answer in answers if answer["id"] != 0)


def test_stdio_reads_and_writes_regular_files(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_piped_legacy())
    answers = tmp_path / "answers.jsonl"
    with requests.open("rb") as source, answers.open("wb") as target:
        run = subprocess.run(_command(), stdin=source, stdout=target, stderr=subprocess.PIPE, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert [answer["id"] for answer in _answers(answers.read_bytes())] == list(range(11))


def test_stdio_end_of_input_does_not_wait_for_an_answer_nobody_can_give() -> None:
    """A call that asks the client something after the input ended ends at once: with an hour of grace the
    process still exits (the guard is the hang bound)."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "catalog.continue"}}
    piped = b"".join(json.dumps(message).encode() + b"\n" for message in (initialize("2025-11-25"), call))
    run = subprocess.run(
        _command("--shutdown-grace", "1h"), input=piped, capture_output=True, timeout=LINE_GUARD_SECONDS
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert [answer["id"] for answer in _answers(run.stdout)] == [0]


def test_stdio_stops_on_sigterm_while_nobody_reads_its_stderr() -> None:
    """stderr is a pipe never read: the access log fills it; answers and the stop signal must still go through."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    process = subprocess.Popen(
        _command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        count = 3000  # some 300 KiB of access-log lines: several times a pipe's buffer
        received: list[bytes] = []
        reader = threading.Thread(target=lambda: received.extend(process.stdout or ()), daemon=True)
        reader.start()

        def write() -> None:
            with contextlib.suppress(OSError):
                for n in range(count):
                    process.stdin.write(json.dumps(modern(n, "tools/list")).encode() + b"\n")  # type: ignore[union-attr]
                    process.stdin.flush()  # type: ignore[union-attr]

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        deadline = time.monotonic() + 120
        while len(received) < count and time.monotonic() < deadline:
            time.sleep(0.1)  # polling a condition with a generous bound
        assert len(received) == count  # every answer, though stderr is full
        process.send_signal(signal.SIGTERM)
        assert process.wait(LINE_GUARD_SECONDS) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
