"""The server's HTTP edge on real sockets against real uvicorn: head size, header/body/keep-alive timeouts, the
connection cap, memory under unfinished heads, strict Host/Origin, and the shutdown drain of ``soklet serve``."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soklet_apps import conformance
from soklet_cli.serve import EXAMPLE_END
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer, ServerOptions
from soklet_core.mcp.server.http import DEFAULT_MAX_HEAD_BYTES, parse_authority, parse_origin
from soklet_core.mcp.server.http._runner import MAX_HEAD_BYTES_CEILING, MAX_TIMEOUT_SECONDS, MIN_HEAD_BYTES
from soklet_core.mcp.server.http._transport import MalformedAuthority
from soklet_core.mcp.server.options import HttpLimits, HttpOptions
from soklet_core.protection import ProtectionConfig
from tests.server.support import CAPS, PV, VERSION, Client, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("edge"))

HEAD_LIMIT = 4096
HERE = Path(__file__).resolve().parent


# --- raw HTTP ----------------------------------------------------------------------------------------------------


def _body(method: str = "tools/list") -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"_meta": {PV: VERSION, CAPS: {}}}}
    ).encode()


def _head(host_lines: list[str], extra: list[str], length: int, method: str = "tools/list") -> bytes:
    lines = ["POST /mcp HTTP/1.1", *host_lines]
    lines += ["Content-Type: application/json", f"MCP-Protocol-Version: {VERSION}", f"Mcp-Method: {method}"]
    lines += [*extra, f"Content-Length: {length}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response: status, lower-cased headers and the Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a full response head: {data[:200]!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(status_line.split(" ")[1]), headers, rest[:length]


def _closed(sock: socket.socket, within: float) -> bool:
    """Whether the peer closes the connection within ``within`` seconds (a generous "does not hang" bound)."""
    sock.settimeout(within)
    try:
        return sock.recv(65536) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _exchange(port: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
    with _connect(port) as sock:
        sock.sendall(data)
        return _read_response(sock)


def _server(**limits: Any) -> McpServer:
    return McpServer(
        conformance.build_registry(tasks=False),
        protection=ProtectionConfig(keyring=KEYRING),
        options=ServerOptions(
            http=HttpOptions(
                allowed_hosts=("mcp.example.com", "api.example.com:8443"),
                allowed_origins=("https://app.example.com",),
                limits=HttpLimits(**limits),
            )
        ),
    )


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    limits = {
        "max_head_bytes": HEAD_LIMIT,
        "header_timeout_seconds": 1.0,
        "body_timeout_seconds": 1.0,
        "keep_alive_timeout_seconds": 1.0,
    }
    with running(_server(**limits)) as url:
        yield int(url.rsplit(":", 1)[1])


# --- limits ------------------------------------------------------------------------------------------------------


def test_limits_are_validated_at_their_edges() -> None:
    assert HttpLimits().max_head_bytes == DEFAULT_MAX_HEAD_BYTES == 64 * 1024
    HttpLimits(max_head_bytes=MIN_HEAD_BYTES, header_timeout_seconds=MAX_TIMEOUT_SECONDS, max_connections=1)
    HttpLimits(max_head_bytes=MAX_HEAD_BYTES_CEILING)
    for bad in (
        {"max_head_bytes": MIN_HEAD_BYTES - 1},
        {"max_head_bytes": MAX_HEAD_BYTES_CEILING + 1},
        {"header_timeout_seconds": 0},
        {"body_timeout_seconds": MAX_TIMEOUT_SECONDS + 1},
        {"keep_alive_timeout_seconds": True},
        {"max_connections": 0},
        {"shutdown_grace_seconds": -1.0},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            HttpLimits(**bad)
    assert HttpLimits(shutdown_grace_seconds=2.5).uvicorn_shutdown_timeout_seconds == 8


def _head_of_size(port: int, size: int) -> bytes:
    body = _body()
    bare = _head([f"Host: 127.0.0.1:{port}"], ["X-Pad: "], len(body))
    pad = size - len(bare)
    assert pad > 0
    return _head([f"Host: 127.0.0.1:{port}"], ["X-Pad: " + "a" * pad], len(body))


def test_head_size_at_its_edge(port: int) -> None:
    at_limit = _head_of_size(port, HEAD_LIMIT)
    assert len(at_limit) == HEAD_LIMIT
    status, _, reply = _exchange(port, at_limit + _body())
    assert status == 200, reply
    over = _head_of_size(port, HEAD_LIMIT + 1)
    with _connect(port) as sock:
        sock.sendall(over + _body())
        status, headers, reply = _read_response(sock)
        assert status == 431
        assert headers["content-type"] == "application/json"
        assert json.loads(reply)["error"]["code"] == -32600
        assert _closed(sock, 5)


def test_unfinished_head_is_refused_at_the_limit(port: int) -> None:
    with _connect(port) as sock:
        # A header value that never ends: refused once the limit is passed, not buffered on.
        sock.sendall(b"POST /mcp HTTP/1.1\r\nX-Long: " + b"a" * HEAD_LIMIT)
        status, _, _ = _read_response(sock)
        assert status == 431
        assert _closed(sock, 5)


@pytest.mark.slow
def test_slow_head_and_idle_connection_are_closed(port: int) -> None:
    with _connect(port) as idle, _connect(port) as slow:
        slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert _closed(slow, 5)
        assert _closed(idle, 5)


@pytest.mark.slow
def test_stalled_body_gets_408_and_the_connection_closes(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(_head([f"Host: 127.0.0.1:{port}"], [], 1000) + b"{" * 50)
        status, headers, reply = _read_response(sock)
        assert status == 408
        assert headers["connection"] == "close"
        assert json.loads(reply)["error"] == {"code": -32600, "message": "Request body timeout"}
        assert _closed(sock, 5)


@pytest.mark.slow
def test_keep_alive_timeout_closes_an_idle_connection(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(_head([f"Host: 127.0.0.1:{port}"], [], len(_body())) + _body())
        assert _read_response(sock)[0] == 200
        sock.sendall(_head([f"Host: 127.0.0.1:{port}"], [], len(_body())) + _body())  # still kept alive
        assert _read_response(sock)[0] == 200
        assert _closed(sock, 4)  # 1 s keep-alive (uvicorn's own default is 5 s)


def test_connection_cap_at_its_edge() -> None:
    with running(_server(max_connections=4, header_timeout_seconds=60.0)) as url:
        port = int(url.rsplit(":", 1)[1])
        held = [_connect(port) for _ in range(3)]
        try:
            # The fourth (the cap) is served.
            assert _exchange(port, _head([f"Host: 127.0.0.1:{port}"], [], len(_body())) + _body())[0] == 200
            held.append(_connect(port))
            with _connect(port) as over:
                status, headers, reply = _read_response(over)
                assert status == 503
                assert headers["connection"] == "close"
                assert json.loads(reply)["error"]["message"] == "Too many connections"
                assert _closed(over, 5)
            held.pop().close()
            deadline = time.monotonic() + 60
            while True:  # the freed slot is reusable once the server has seen the close
                status = _exchange(port, _head([f"Host: 127.0.0.1:{port}"], [], len(_body())) + _body())[0]
                if status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert status == 200
        finally:
            for sock in held:
                sock.close()


# --- Host and Origin ---------------------------------------------------------------------------------------------

HOSTS_OK = ["localhost", "localhost:65535", "127.0.0.1:1", "[::1]:8080", "[0:0:0:0:0:0:0:1]", "LOCALHOST"]
HOSTS_MALFORMED = [
    "[::1]evil.com",
    "[::1]:",
    "a b",
    "host:port:x",
    "localhost:1:2",
    "localhost:abc",
    "localhost:65536",
    "localhost:123456",
    "localhost:\xd9\xa3",  # an Arabic-Indic digit, as latin-1 text
    "[fe80::1%25eth0]",
    "[v1.x]",
    "[::1",
    "",
    ":80",
    "evil.com/path",
    "user@localhost",
    "local%zzhost",
]
HOSTS_FORBIDDEN = ["evil.com", "evil.com:80", "api.example.com", "api.example.com:8444", "localhost.evil.com"]
HOSTS_ALLOWED_CONFIGURED = ["mcp.example.com", "mcp.example.com:443", "api.example.com:8443"]
ORIGINS_OK = ["http://localhost:3000", "http://127.0.0.1", "https://[::1]:9", "https://app.example.com"]
ORIGINS_FORBIDDEN = [
    "http://[::1]evil.com",
    "http://user@localhost",
    "http://localhost/",
    "http://localhost/path",
    "http://localhost?x",
    "null",
    "http://localhost:99999",
    "ftp://localhost",
    "https://app.example.com:443",
    "https://app.example.com.evil.net",
    "http://evil.example.com",
    "localhost",
    "http//localhost",
    "1http://localhost",
]


def _status(port: int, hosts: list[str], origins: list[str] = ()) -> int:  # type: ignore[assignment]
    extra = [f"Origin: {origin}" for origin in origins]
    return _exchange(port, _head([f"Host: {host}" for host in hosts], extra, len(_body())) + _body())[0]


@pytest.mark.parametrize("host", HOSTS_OK + HOSTS_ALLOWED_CONFIGURED)
def test_good_host_is_served(port: int, host: str) -> None:
    assert _status(port, [host]) == 200


@pytest.mark.parametrize("host", HOSTS_MALFORMED)
def test_malformed_host_is_400(port: int, host: str) -> None:
    assert _status(port, [host]) == 400


@pytest.mark.parametrize("host", HOSTS_FORBIDDEN)
def test_well_formed_but_not_allowed_host_is_403(port: int, host: str) -> None:
    assert _status(port, [host]) == 403


def test_surrounding_whitespace_is_not_part_of_the_value(port: int) -> None:
    assert _status(port, ["localhost \t"]) == 200
    assert _status(port, ["localhost"], ["http://localhost:3000\t "]) == 200
    assert _status(port, ["local host"]) == 400


def test_host_count(port: int) -> None:
    assert _status(port, []) == 400
    assert _status(port, ["localhost", "localhost"]) == 400
    assert _status(port, ["localhost", "evil.com"]) == 400


@pytest.mark.parametrize("origin", ORIGINS_OK)
def test_good_origin_is_served(port: int, origin: str) -> None:
    assert _status(port, ["localhost"], [origin]) == 200


@pytest.mark.parametrize("origin", ORIGINS_FORBIDDEN)
def test_bad_origin_is_403(port: int, origin: str) -> None:
    assert _status(port, ["localhost"], [origin]) == 403


def test_origin_count(port: int) -> None:
    assert _status(port, ["localhost"], ["http://localhost", "http://localhost"]) == 400


def test_parsers_directly() -> None:
    assert parse_authority("LocalHost:0080") == ("localhost", 80)
    assert parse_authority("[0::1]") == ("[::1]", None)
    assert parse_authority("a%2Db.example") == ("a%2db.example", None)
    assert parse_origin("HTTPS://App.Example.com:8443") == ("https", "app.example.com", 8443)
    for text in HOSTS_MALFORMED:
        with pytest.raises(MalformedAuthority):
            parse_authority(text)
    config = ProtectionConfig(keyring=KEYRING)
    with pytest.raises(ValueError, match="allowed hosts"):
        McpServer(
            conformance.build_registry(tasks=False),
            protection=config,
            options=ServerOptions(http=HttpOptions(allowed_hosts=("[::1]x",))),
        )
    with pytest.raises(ValueError, match="allowed origins"):
        McpServer(
            conformance.build_registry(tasks=False),
            protection=config,
            options=ServerOptions(http=HttpOptions(allowed_origins=("https://app.example.com/",))),
        )


def test_parser_time_is_linear_on_long_input() -> None:
    # A hand-written loop: a long hostile value costs one pass (no backtracking).
    text = "a" * 200_000 + "!"
    started = time.perf_counter()
    assert parse_authority(text)[0].startswith("a")
    with pytest.raises(MalformedAuthority):
        parse_authority("a" * 200_000 + " ")
    assert time.perf_counter() - started < 5


# --- soklet serve as a subprocess: memory, shutdown, keys ----------------------------------------------------------


def _serve(*arguments: str) -> tuple[subprocess.Popen[str], list[str]]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    # The demo's banner ends with its example; an --app's (no example) with the line naming the inspect command.
    last = "inspect a token: " if "--app" in arguments else EXAMPLE_END
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if lines[-1].startswith(last):
            break
    return process, lines


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.terminate()  # a stop, not a kill: the server deletes its development keyring folder
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _port_of(lines: list[str]) -> int:
    return int(lines[0].rsplit(":", 1)[1].removesuffix("/mcp"))


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_unfinished_huge_heads_keep_memory_bounded(processes: list[subprocess.Popen[str]]) -> None:
    process, lines = _serve()
    processes.append(process)
    port = _port_of(lines)
    client = Client(f"http://127.0.0.1:{port}")
    assert client.post("tools/list").status == 200
    before = _rss_kib(process.pid)
    chunk = b"a" * (1024 * 1024)
    sent = threading.Semaphore(0)
    release = threading.Event()

    def flood() -> None:
        with _connect(port) as sock:
            try:
                sock.sendall(b"POST /mcp HTTP/1.1\r\nX-Long: ")
                for _ in range(16):  # 16 MiB of one header value that never ends
                    sock.sendall(chunk)
            except OSError:
                pass  # refused and closed by the server: what should happen
            finally:
                sent.release()
            release.wait(30)  # held open while the server's memory is measured

    threads = [threading.Thread(target=flood) for _ in range(8)]
    for thread in threads:
        thread.start()
    for _ in threads:
        assert sent.acquire(timeout=60)
    grown_mib = (_rss_kib(process.pid) - before) / 1024
    release.set()
    for thread in threads:
        thread.join(60)
    assert grown_mib < 64, f"RSS grew by {grown_mib:.0f} MiB"
    assert client.post("tools/list").status == 200
    client.close()


def _call(port: int, name: str, **meta: Any) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": name, "arguments": {}, "_meta": {PV: VERSION, CAPS: {}, **meta}},
        }
    ).encode()
    head = _head(["Host: 127.0.0.1"], [f"Mcp-Name: {name}"], len(body), method="tools/call")
    return head + body


@pytest.mark.slow
def test_shutdown_answers_json_rpc_503s_and_logs_no_traceback(processes: list[subprocess.Popen[str]]) -> None:
    process, lines = _serve("--app", "support_app:registry", "--shutdown-grace", "1s")
    processes.append(process)
    port = _port_of(lines)
    assert _exchange(port, _call(port, "quick"))[0] == 200
    running_request = _connect(port)
    running_request.sendall(_call(port, "sleepy"))
    streaming = _connect(port)
    streaming.sendall(_call(port, "sleepy.progress", progressToken="p1"))
    committed = b""
    while b"notifications/progress" not in committed:  # the answer is committed as SSE with the progress frame
        chunk = streaming.recv(65536)
        assert chunk
        committed += chunk
    assert b"content-type: text/event-stream" in committed
    late = _connect(port)
    whole = _call(port, "quick")
    late.sendall(whole[:-5])  # the head and most of the body: this request has not started
    stalled = _connect(port)
    stalled.sendall(whole[:-5])  # never finished: the end of the grace cuts its body read
    time.sleep(0.3)  # let the server take both in (no assertion depends on it being enough)
    process.send_signal(signal.SIGTERM)
    assert process.stderr is not None
    log: list[str] = []
    for line in process.stderr:  # the drain starts before uvicorn says it is shutting down
        log.append(line)
        if "Shutting down" in line:
            break
    late.sendall(whole[-5:])
    status, headers, reply = _read_response(late)
    assert status == 503
    assert headers["content-type"] == "application/json"
    assert json.loads(reply)["error"]["code"] == -32603
    status, headers, reply = _read_response(running_request)  # cancelled after the 1 s grace
    assert status == 503
    assert json.loads(reply)["error"] == {"code": -32603, "message": "Server shutting down: request cancelled"}
    status, _, reply = _read_response(stalled)
    assert status == 503
    assert json.loads(reply)["error"]["code"] == -32603
    streamed = b""
    streaming.settimeout(10)
    while chunk := streaming.recv(65536):  # the server ends the stream and closes the connection
        streamed += chunk
    assert b'"message":"Server shutting down: request cancelled"' in streamed
    assert process.wait(15) == 0
    log.append(process.stderr.read())
    text = "".join(log)
    assert "Traceback" not in text
    assert "Internal Server Error" not in text
    for sock in (running_request, late, stalled, streaming):
        sock.close()


@pytest.mark.slow
def test_dev_key_tokens_can_be_inspected_and_the_key_is_logged(processes: list[subprocess.Popen[str]]) -> None:
    process, lines = _serve()
    processes.append(process)
    path = Path(next(line for line in lines if line.startswith("dev keyring file")).rsplit(": ", 1)[1])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert "sealing key: dev-ephemeral" in lines
    hint = next(line for line in lines if line.startswith("inspect a token: "))
    assert hint == f"inspect a token: soklet inspect-state --keyring {path} TOKEN"
    client = Client(f"http://127.0.0.1:{_port_of(lines)}")
    state = client.call("catalog.continue", {}, capabilities={"elicitation": {}}).state
    client.close()
    assert state
    run = subprocess.run(
        [sys.executable, "-m", "soklet_cli", "inspect-state", "--keyring", str(path), "--json", state],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    facts = json.loads(run.stdout)
    assert (facts["opens"], facts["header"]["key_id"]) == (True, "dev-ephemeral")
    process.send_signal(signal.SIGTERM)
    assert process.wait(15) == 0
    assert process.stderr is not None
    log = process.stderr.read()
    assert "sealing with key dev-ephemeral, fingerprint v2 " in log
    assert "keyring reloaded on SIGHUP and when the file changes" in log
    assert not path.parent.exists()


# --- docs/server.md ----------------------------------------------------------------------------------------------


def test_limits_table_matches_the_constants() -> None:
    from soklet_core.json import DEFAULT_REQUEST_BODY_BYTES, MAX_REQUEST_BODY_BYTES, RESPONSE_OUTPUT_CEILING_BYTES
    from soklet_core.mcp.server.http import _runner as http_runner
    from soklet_core.protection import MAX_ENDPOINT_PATH_CHARS

    doc = (HERE.parents[1] / "docs" / "server.md").read_text()
    table = doc[doc.index("## Limits and timeouts") :]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    expected = {
        "DEFAULT_REQUEST_BODY_BYTES": (DEFAULT_REQUEST_BODY_BYTES, "10 MiB", 10 * 1024 * 1024),
        "MAX_REQUEST_BODY_BYTES": (MAX_REQUEST_BODY_BYTES, "16 MiB", 16 * 1024 * 1024),
        "RESPONSE_OUTPUT_CEILING_BYTES": (RESPONSE_OUTPUT_CEILING_BYTES, "4 MiB", 4 * 1024 * 1024),
        "MAX_ENDPOINT_PATH_CHARS": (MAX_ENDPOINT_PATH_CHARS, f"{MAX_ENDPOINT_PATH_CHARS:,} characters", 2048),
        "DEFAULT_MAX_HEAD_BYTES": (http_runner.DEFAULT_MAX_HEAD_BYTES, "64 KiB", 64 * 1024),
        "DEFAULT_HEADER_TIMEOUT_SECONDS": (http_runner.DEFAULT_HEADER_TIMEOUT_SECONDS, "10 s", 10),
        "DEFAULT_BODY_TIMEOUT_SECONDS": (http_runner.DEFAULT_BODY_TIMEOUT_SECONDS, "30 s", 30),
        "DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS": (http_runner.DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS, "5 s", 5),
        "DEFAULT_MAX_CONNECTIONS": (http_runner.DEFAULT_MAX_CONNECTIONS, "512", 512),
        "DEFAULT_SHUTDOWN_GRACE_SECONDS": (http_runner.DEFAULT_SHUTDOWN_GRACE_SECONDS, "10 s", 10),
        "SHUTDOWN_MARGIN_SECONDS": (http_runner.SHUTDOWN_MARGIN_SECONDS, "5 s", 5),
    }
    for name, (value, spelled, meant) in expected.items():
        row = next(line for line in rows if f"`{name}`" in line)
        assert value == meant, name
        assert spelled in row, name
    options = ("--max-head-bytes", "--header-timeout", "--body-timeout", "--keep-alive-timeout", "--max-connections")
    for option in (*options, "--shutdown-grace"):
        assert option in table
