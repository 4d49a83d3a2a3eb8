"""Small-request latency while 10 MiB bodies are processed, peak memory per 10 MiB body, and the cost of the params
digest taken from the bytes (issue 8, item 2).

Run: ``.venv/bin/python benchmarks/server_under_load.py [--quick] [--json]``.

Three measurements, each against a baseline taken in the same run (these machines are noisy: ratios, no targets):

* **Latency under load.** ``soklet serve --dev-key`` runs as its own process (uvicorn, uvloop, httptools, no access
  log). A small ``tools/call`` of ``catalog.continue`` is timed over a keep-alive socket, first with the server idle,
  then while ``--loaders`` threads keep posting 10 MiB bodies (alternately a valid ``tools/call`` of 1.4 million
  distinct decimals and a body refused for holding more than ``MAX_NODES`` values). Reported: median, p95 and max
  of each, and the loaded/idle ratio. With parsing on the event loop the loaded max was the whole parse of a body
  (seconds).
* **Peak RSS per 10 MiB body.** A fresh server per case; the growth of ``VmHWM`` (``/proc/PID/status``) over the
  idle ``VmRSS`` for one body, as a multiple of the body's size: a valid ``tools/call`` of distinct decimals (the
  costliest value model per byte), of one number repeated (equal tokens share one object), of rows of objects,
  and a refused one.
* **Digest from bytes.** ``params_digest(body, whole_request=True)`` on a 10 MiB body vs ``json.loads`` of the same
  bytes (the C parser alone, no value model, no hashing) and vs ``parse`` (the value model).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from soklet_core.json import DEFAULT_REQUEST_BODY_BYTES, params_digest, parse  # noqa: E402

HOST = "127.0.0.1"
START_TIMEOUT = 60.0
SOCKET_TIMEOUT = 120.0
URL_RE = re.compile(rb"http://127\.0\.0\.1:(\d{1,5})/mcp\b")
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
BODY_BYTES = DEFAULT_REQUEST_BODY_BYTES - 64


def tool_call(request_id: int, fill: str | None = None) -> bytes:
    """A ``catalog.continue`` call; with ``fill``, its ``arguments.rows`` makes the body BODY_BYTES."""
    params = {"name": "catalog.continue", "arguments": {"rows": "@ROWS@"} if fill else {}, "_meta": META}
    text = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
    if fill is None:
        return text.encode()
    head, tail = text.split('"@ROWS@"')
    count = (BODY_BYTES - len(head) - len(tail) - 2) // (len(fill) + 1)
    return (head + "[" + ",".join([fill] * count) + "]" + tail).encode()


def distinct_decimals(request_id: int) -> bytes:
    """A BODY_BYTES ``catalog.continue`` call whose ``arguments.rows`` are distinct decimals (1.0000, 1.0001, ...):
    the costliest value model per byte that sharing equal number tokens cannot shrink."""
    params = {"name": "catalog.continue", "arguments": {"rows": "@ROWS@"}, "_meta": META}
    text = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
    head, tail = (part.encode() for part in text.split('"@ROWS@"'))
    budget = BODY_BYTES - len(head) - len(tail) - 2
    items: list[bytes] = []
    size = index = 0
    while True:
        token = b"%d.%04d" % (index // 10_000 + 1, index % 10_000)
        if size + len(token) + 1 > budget:
            break
        items.append(token)
        size += len(token) + 1
        index += 1
    return head + b"[" + b",".join(items) + b"]" + tail


def too_many_values() -> bytes:
    return b"[" + b"0," * (BODY_BYTES // 2 - 1) + b"0]"


def request_bytes(port: int, body: bytes, *, close: bool) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
        "Mcp-Method: tools/call\r\nMcp-Name: catalog.continue\r\n"
        f"Content-Length: {len(body)}\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n"
    ).encode() + body


def read_response(sock: socket.socket, pending: bytearray) -> int:
    """Read one Content-Length response from ``sock``; return its status (``pending`` keeps what follows)."""
    while b"\r\n\r\n" not in pending:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("server closed the connection")
        pending += chunk
    head, _, _ = bytes(pending).partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))  # type: ignore[union-attr]
    total = len(head) + 4 + length
    while len(pending) < total:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("server closed the connection")
        pending += chunk
    status = int(head.split(b" ", 2)[1])
    del pending[:total]
    return status


def post_once(port: int, body: bytes) -> int:
    with socket.create_connection((HOST, port), timeout=SOCKET_TIMEOUT) as sock:
        sock.sendall(request_bytes(port, body, close=True))
        return read_response(sock, bytearray())


@contextmanager
def server(tree: Path = ROOT) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``soklet serve --dev-key`` on a free port, running the code of checkout ``tree``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "soklet_cli", "serve", "--dev-key", "--port", "0", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    assert process.stdout is not None
    port = None
    deadline = time.monotonic() + START_TIMEOUT
    while port is None and time.monotonic() < deadline:
        found = URL_RE.search(process.stdout.readline())
        port = int(found.group(1)) if found else None
    if port is None:
        process.kill()
        raise SystemExit("soklet serve did not start")
    threading.Thread(target=lambda: [None for _ in process.stdout or ()], daemon=True).start()
    try:
        yield process, port
    finally:
        process.terminate()
        process.wait(30)


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def small_latencies(port: int, count: int) -> list[float]:
    """``count`` small calls one after the other over one keep-alive socket; seconds each."""
    times: list[float] = []
    with socket.create_connection((HOST, port), timeout=SOCKET_TIMEOUT) as sock:
        pending = bytearray()
        for index in range(count):
            start = time.perf_counter()
            sock.sendall(request_bytes(port, tool_call(index + 1), close=False))
            if read_response(sock, pending) != 200:
                raise SystemExit("a small request was not answered 200")
            times.append(time.perf_counter() - start)
            time.sleep(0.01)
    return times


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1000,
        "max_ms": ordered[-1] * 1000,
    }


def latency_under_load(count: int, loaders: int) -> dict[str, Any]:
    bodies = [distinct_decimals(1), too_many_values()]
    with server() as (_, port):
        small_latencies(port, 20)  # warm-up
        idle = small_latencies(port, count)
        stop = threading.Event()
        processed = [0]

        def load(offset: int) -> None:
            index = offset
            while not stop.is_set():
                status = post_once(port, bodies[index % 2])
                if status not in (200, 400, 503):
                    raise SystemExit(f"a 10 MiB body got {status}")
                processed[0] += 1
                index += 1

        threads = [threading.Thread(target=load, args=(index,), daemon=True) for index in range(loaders)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)  # the first bodies are in
        loaded = small_latencies(port, count)
        stop.set()
        for thread in threads:
            thread.join(SOCKET_TIMEOUT)
    idle_summary, loaded_summary = summary(idle), summary(loaded)
    return {
        "idle": idle_summary,
        "loaded": loaded_summary,
        "large_bodies_processed": processed[0],
        "ratio": {key: loaded_summary[key] / idle_summary[key] for key in idle_summary},
    }


def peak_rss(body: bytes) -> dict[str, float]:
    with server() as (process, port):
        idle = status_kib(process.pid, "VmRSS")
        status = post_once(port, body)
        growth = status_kib(process.pid, "VmHWM") - idle
    return {"status": status, "growth_mib": growth / 1024, "multiple_of_body": growth * 1024 / len(body)}


def best_of(function: Any, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def digest_cost(rounds: int) -> dict[str, float]:
    body = tool_call(1, '{"id":123456,"name":"row-123456","price":12.5,"tags":["a","b"]}')
    loads = best_of(lambda: json.loads(body), rounds)
    digest = best_of(lambda: params_digest(body, whole_request=True), rounds)
    value = best_of(lambda: parse(body), rounds)
    return {
        "json_loads_s": loads,
        "digest_from_bytes_s": digest,
        "parse_value_model_s": value,
        "digest_over_json_loads": digest / loads,
        "parse_over_json_loads": value / loads,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--loaders", type=int, default=4, help="threads posting 10 MiB bodies (default 4)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    options = parser.parse_args()
    count, rounds = (50, 2) if options.quick else (200, 3)
    report = {
        "latency": latency_under_load(count, options.loaders),
        "peak_rss": {
            "valid_distinct_decimals": peak_rss(distinct_decimals(1)),
            "valid_repeated_number": peak_rss(tool_call(1, "1.25")),
            "valid_rows": peak_rss(tool_call(1, '{"id":123456,"name":"row-123456","price":12.5,"tags":["a","b"]}')),
            "refused_too_many_values": peak_rss(too_many_values()),
        },
        "digest": digest_cost(rounds),
    }
    if options.json:
        print(json.dumps(report, indent=2))
        return
    latency = report["latency"]
    print(f"Small tools/call latency, idle vs. while {options.loaders} clients post 10 MiB bodies:")
    for key in ("median_ms", "p95_ms", "max_ms"):
        idle, loaded, ratio = latency["idle"][key], latency["loaded"][key], latency["ratio"][key]
        print(f"  {key[:-3]:>6}: idle {idle:8.1f} ms   loaded {loaded:8.1f} ms   ratio {ratio:6.1f}x")
    print(f"  (10 MiB bodies finished meanwhile: {latency['large_bodies_processed']})")
    print("Peak RSS growth for one 10 MiB body (fresh server each):")
    for name, item in report["peak_rss"].items():
        print(
            f"  {name:>24}: HTTP {item['status']}  +{item['growth_mib']:6.0f} MiB"
            f"  = {item['multiple_of_body']:5.1f}x the body"
        )
    digest = report["digest"]
    print("10 MiB body: params digest from the bytes vs json.loads of the same bytes (best of rounds):")
    print(
        f"  json.loads {digest['json_loads_s'] * 1000:7.0f} ms   digest {digest['digest_from_bytes_s'] * 1000:7.0f} ms"
        f" ({digest['digest_over_json_loads']:.2f}x)   parse into the value model"
        f" {digest['parse_value_model_s'] * 1000:7.0f} ms ({digest['parse_over_json_loads']:.2f}x)"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
