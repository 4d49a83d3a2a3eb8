"""The admin listener against a slow client, a password guesser and a loose TLS key: one deadline for a trickled
body (the MCP port's), refused authentications counted and reported in rate-limited log lines, and a TLS private
key refused as a keyring file would be. Real uvicorn on loopback, real sockets, real files."""

from __future__ import annotations

import inspect
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from soklet_core.files import KeyringFileError, KeyringFileErrorReason, read_keyring_file
from soklet_core.keys import KeyringManager, ProtectionKey
from soklet_core.mcp.server.http import limited_uvicorn_config, uvicorn_server_class
from soklet_core.mcp.server.http._runner import DEFAULT_BODY_TIMEOUT_SECONDS
from soklet_core.mcp.server.ops import AdminApp, AdminTokens, LiveKeyring
from soklet_core.mcp.server.ops._admin import check_admin_tls_key
from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.mcp.server.options import HttpLimits
from tests.server.support_admin import TOKEN, self_signed_certificate, write_keyring

#: The body deadline these listeners get: short, so a test need not wait the default 30 s.
SHORT_BODY_SECONDS = 2.0
#: How long a trickling client keeps going at most: far beyond the deadline even on a loaded machine, far below
#: the 90 s a per-read timeout held such a client for.
TRICKLE_LIMIT_SECONDS = 45.0
#: Bounds of every wait on a condition ("does not hang", never a timing).
PATIENCE_SECONDS = 60.0
WRONG = "wrongTokenGuess-0123456789abcdef"


def _wait(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


class Listener:
    """An :class:`AdminApp` on a real uvicorn (the hardened config) in a thread of this process."""

    def __init__(self, folder: Path, limits: HttpLimits, **options: float) -> None:
        path = folder / "keys.toml"
        write_keyring(path, ProtectionKey.generate("k1"))
        document = read_keyring_file(path)
        live = LiveKeyring(KeyringManager(document.keyring()), path, document=document)
        self.metrics = ServerMetrics(instance="t")
        app = AdminApp(
            live,
            AdminTokens.parse(f"ops:{TOKEN}"),
            instance="t",
            lifetime_ms=60_000,
            rounds=3,
            metrics=self.metrics,
            body_timeout_seconds=limits.body_timeout_seconds,
            **options,  # type: ignore[arg-type]
        )
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn_server_class()(limited_uvicorn_config(app, limits, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        _wait(lambda: bool(self.server.started))

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(PATIENCE_SECONDS)
        self.sock.close()

    def metric(self, reason: str) -> float:
        text = self.metrics.render()[0].decode()
        prefix = f'soklet_admin_auth_failures_total{{reason="{reason}"}} '
        found = [line.removeprefix(prefix) for line in text.splitlines() if line.startswith(prefix)]
        assert len(found) == 1, text
        return float(found[0])


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[Listener]:
    served = Listener(tmp_path, HttpLimits(body_timeout_seconds=SHORT_BODY_SECONDS))
    yield served
    served.stop()


def test_the_admin_body_deadline_is_the_mcp_ports() -> None:
    # One home: the admin app's default is the HTTP limits' default, not a number of its own.
    default = inspect.signature(AdminApp).parameters["body_timeout_seconds"].default
    assert default == HttpLimits().body_timeout_seconds == DEFAULT_BODY_TIMEOUT_SECONDS


@pytest.mark.slow
def test_a_trickled_body_gets_408_within_one_deadline(listener: Listener) -> None:
    body = b'{"id":"k1"}' + b" " * 200  # 211 bytes: at one byte per 0.25 s, 53 s to send whole
    head = (
        f"POST /v1/keyring/activate HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", listener.port), timeout=PATIENCE_SECONDS) as client:
        client.sendall(head)
        client.setblocking(False)
        answer = b""
        started = time.monotonic()
        sent = 0
        ended = False  # the listener answered or closed while the body was still trickling
        # One byte per quarter second, each well inside the deadline: only a deadline for the whole body ends it.
        while time.monotonic() - started < TRICKLE_LIMIT_SECONDS and sent < len(body):
            try:
                client.sendall(body[sent : sent + 1])
                sent += 1
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                ended = True
                break
            try:
                chunk = client.recv(65536)
            except BlockingIOError:
                time.sleep(0.25)
                continue
            except ConnectionResetError:
                ended = True
                break
            answer += chunk
            if not chunk or b"\r\n\r\n" in answer:
                ended = True
                break
        assert ended, f"the listener still read a body trickled for {TRICKLE_LIMIT_SECONDS:g} s"
        assert sent < len(body)
        client.setblocking(True)
        client.settimeout(PATIENCE_SECONDS)
        while True:  # the 408 and then the end of the connection
            try:
                chunk = client.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b'{"error":"body-timeout"}' in answer


def test_failed_logins_are_counted_and_reported_at_most_once_per_interval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An interval far longer than the test: every refusal after the first is held for the next line.
    served = Listener(tmp_path, HttpLimits(), auth_failure_log_interval_seconds=3600.0)
    try:
        with caplog.at_level(logging.WARNING, logger="soklet.admin"), httpx.Client(timeout=PATIENCE_SECONDS) as http:
            url = f"http://127.0.0.1:{served.port}/v1/keyring"
            for attempt in range(40):
                headers = {} if attempt % 4 == 0 else {"Authorization": f"Bearer {WRONG}"}
                assert http.get(url, headers=headers).status_code == 401
            assert http.get(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
            lines = [record.getMessage() for record in caplog.records if record.name == "soklet.admin"]
        assert served.metric("missing") == 10
        assert served.metric("invalid") == 30
        assert lines == ["admin API: requests refused for a missing or unknown bearer token since the last report: "
                         "1 (the last from 127.0.0.1)"]  # fmt: skip
    finally:
        served.stop()
    # The stop reports what was held: the 39 others, in one line.
    lines = [record.getMessage() for record in caplog.records if record.name == "soklet.admin"]
    assert len(lines) == 2, lines
    assert lines[1].endswith(": 39 (the last from 127.0.0.1)")
    assert all(WRONG not in line and TOKEN not in line for line in lines)


def test_held_refusals_are_reported_when_the_interval_ends(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    served = Listener(tmp_path, HttpLimits(), auth_failure_log_interval_seconds=0.5)
    try:
        with caplog.at_level(logging.WARNING, logger="soklet.admin"), httpx.Client(timeout=PATIENCE_SECONDS) as http:
            wrong = {"Authorization": f"Bearer {WRONG}"}
            for _ in range(25):
                assert http.get(f"http://127.0.0.1:{served.port}/metrics", headers=wrong).status_code == 401

            def reported() -> int:
                counts = [
                    int(record.getMessage().rsplit(": ", 1)[1].split()[0])
                    for record in caplog.records
                    if record.name == "soklet.admin"
                ]
                return sum(counts)

            # No more refusals come: the timer alone must report those still held.
            _wait(lambda: reported() == 25)
    finally:
        served.stop()


def test_a_tls_key_others_can_read_is_refused(tmp_path: Path) -> None:
    _, key = self_signed_certificate(tmp_path)
    check_admin_tls_key(key)  # 0600: accepted
    key.chmod(0o644)
    with pytest.raises(KeyringFileError) as refused:
        check_admin_tls_key(key)
    assert refused.value.reason is KeyringFileErrorReason.INSECURE_PERMISSIONS
    check_admin_tls_key(key, allow_insecure_permissions=True)


@pytest.mark.slow
def test_serve_refuses_a_tls_key_of_mode_0644(tmp_path: Path) -> None:
    cert, key = self_signed_certificate(tmp_path)
    key.chmod(0o644)
    token_file = tmp_path / "admin-token"
    token_file.write_text(f"ops:{TOKEN}\n")
    token_file.chmod(0o600)
    command = [
        sys.executable, "-m", "soklet_cli", "serve", "--dev-key", "--port", "0", "--admin-port", "0",
        "--admin-token-file", str(token_file), "--admin-tls-cert", str(cert), "--admin-tls-key", str(key),
    ]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=PATIENCE_SECONDS)
    assert run.returncode == 3, run.stderr
    assert "admin TLS key" in run.stderr
    assert "mode 0644" in run.stderr
    assert "--allow-insecure-permissions" in run.stderr
    assert "Traceback" not in run.stderr
    assert key.read_text() not in run.stderr
