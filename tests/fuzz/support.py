"""Shared pieces of the fuzzing step: the ``soklet`` console script, hypothesis settings, raw HTTP on sockets,
and the server's memory from ``/proc``."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings

#: The installed console script, next to the interpreter running the tests.
SOKLET = str(Path(sys.executable).parent / "soklet")

#: Fixed, reproducible runs: no example database, no shrinking (a hung server would make each shrink step cost a
#: full timeout), derandomized generation. Each test sets its own ``max_examples`` to stay in its time budget.
FUZZ_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)


def soklet_env() -> dict[str, str]:
    """The test process's environment without ``$SOKLET_KEYRING``, the console script's folder first on PATH."""
    env = {name: value for name, value in os.environ.items() if name != "SOKLET_KEYRING"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(COLUMNS="120", NO_COLOR="1")
    return env


def _status_kib(pid: int, field: str) -> int:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except FileNotFoundError:
        return 0  # exited meanwhile
    for line in lines:
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return found
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except FileNotFoundError:
            continue
        for child in map(int, children):
            found += [child, *_descendants(child)]
    return found


def peak_rss_bytes(pid: int) -> int:
    """The peak resident set size (``VmHWM``) of process ``pid`` plus those of its live descendants (work moved
    to a worker process still counts): an upper bound of the tree's peak."""
    return sum(_status_kib(each, "VmHWM") for each in [pid, *_descendants(pid)]) * 1024


def current_rss_bytes(pid: int) -> int:
    """The current resident set size (``VmRSS``) of process ``pid`` and its live descendants."""
    return sum(_status_kib(each, "VmRSS") for each in [pid, *_descendants(pid)]) * 1024


@dataclass(frozen=True, slots=True)
class Response:
    """One HTTP response as read from the socket."""

    status: int
    reason: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    def header(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None


class Closed(Exception):
    """The server closed (or reset) the connection before a complete response."""


#: A response head larger than this is itself a failure (the server's answers are small).
MAX_RESPONSE_HEAD = 64 * 1024
#: A response body larger than this is a failure (the response output ceiling is 4 MiB).
MAX_RESPONSE_BODY = 5 * 1024 * 1024


class _Reader:
    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.buffer = b""

    def _more(self) -> bool:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no complete response in time")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError) as error:
            raise Closed("reset") from error
        if not chunk:
            return False
        self.buffer += chunk
        return True

    def until(self, marker: bytes, limit: int) -> bytes:
        while marker not in self.buffer:
            if len(self.buffer) > limit:
                raise AssertionError("response head or chunk line too long")
            if not self._more():
                raise Closed("eof")
        head, _, self.buffer = self.buffer.partition(marker)
        return head

    def exactly(self, count: int) -> bytes:
        while len(self.buffer) < count:
            if not self._more():
                raise Closed("eof in body")
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def rest(self) -> bytes:
        while self._more():
            if len(self.buffer) > MAX_RESPONSE_BODY:
                raise AssertionError("response body too long")
        data, self.buffer = self.buffer, b""
        return data


def read_response(sock: socket.socket, deadline: float, *, head_request: bool = False) -> Response:
    """Read one final response (1xx interim responses skipped); :class:`Closed` if the server closed first."""
    reader = _Reader(sock, deadline)
    while True:
        head = reader.until(b"\r\n\r\n", MAX_RESPONSE_HEAD)
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        code, _, reason = rest.partition(b" ")
        assert version == b"HTTP/1.1", f"bad status line {lines[0][:100]!r}"
        assert len(code) == 3, f"bad status line {lines[0][:100]!r}"
        assert code.isdigit(), f"bad status line {lines[0][:100]!r}"
        headers = []
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            assert colon, f"bad response header {line[:100]!r}"
            assert name, f"bad response header {line[:100]!r}"
            assert name == name.strip(), f"bad response header {line[:100]!r}"
            headers.append((name, value.strip()))
        status = int(code)
        if 100 <= status < 200:
            continue
        response = Response(status, reason, tuple(headers), b"")
        if head_request or status in (204, 304):
            return response
        length = response.header(b"content-length")
        if length is not None:
            assert length.isdigit(), f"bad content-length {length!r}"
            assert int(length) <= MAX_RESPONSE_BODY, f"bad content-length {length!r}"
            return Response(status, reason, tuple(headers), reader.exactly(int(length)))
        if (response.header(b"transfer-encoding") or b"").lower() == b"chunked":
            body = b""
            while True:
                size_line = reader.until(b"\r\n", 1024)
                size = int(size_line.split(b";")[0], 16)
                if size == 0:
                    reader.until(b"\r\n", 64 * 1024)
                    return Response(status, reason, tuple(headers), body)
                body += reader.exactly(size)
                reader.exactly(2)
                assert len(body) <= MAX_RESPONSE_BODY, "response body too long"
        return Response(status, reason, tuple(headers), reader.rest())


def exchange(
    address: tuple[str, int], data: bytes, *, timeout: float, head_request: bool = False, pause_after: float = 0
) -> Response:
    """Send ``data`` on a new connection and read the response within ``timeout`` seconds. A server that stops
    reading (and answers early, or closes) is fine: send errors are ignored and the answer is still read."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, TimeoutError):
            sock.sendall(data)
        if pause_after:
            time.sleep(pause_after)
        return read_response(sock, deadline, head_request=head_request)


def jsonrpc_shape_problem(body: bytes) -> str | None:
    """None if ``body`` is one JSON-RPC 2.0 response (a result, or an error with an int code and a str message)
    or a list of them; otherwise what is wrong."""
    try:
        value: Any = json.loads(body)
    except ValueError:
        return "not JSON"
    for message in value if isinstance(value, list) else [value]:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return "not a JSON-RPC message"
        if ("result" in message) == ("error" in message):
            return "neither result nor error (or both)"
        if "error" in message:
            error = message["error"]
            if not isinstance(error, dict):
                return "error is not an object"
            code, text = error.get("code"), error.get("message")
            if not isinstance(code, int) or isinstance(code, bool) or not isinstance(text, str):
                return "error without an int code and a str message"
    return None
