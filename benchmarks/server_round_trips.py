"""Complete input-required round trips per second over loopback HTTP, and server CPU per round trip.

Run: ``bash scripts/bench`` (installs ``requirements/bench.lock``, runs every benchmark), or
``.venv/bin/python benchmarks/server_round_trips.py [--quick] [--duration S] [--clients 1,8] [--servers ...]
[--json]`` once the ``bench`` extra is installed.

One round trip is the spec's two-leg flow on ``catalog.continue``: ``tools/call`` -> ``input_required`` (a form
elicitation keyed ``approval`` plus a ``requestState``) -> retry with ``inputResponses`` and the echoed state ->
``complete``. Each server runs as its own process on 127.0.0.1 under uvicorn with uvloop and httptools and no
access log; this process is the client. The servers:

* **soklet** -- ``soklet serve --dev-key --log-level warning`` and its demo ``catalog.continue``
  (FRAMEWORK_PROTECTED state: sealed with the binding built from the real request, opened and checked on the retry).
* **sdk** -- the official MCP Python SDK (``mcp`` 2.3.0) with the same tool, stateless 2026-07-28 JSON responses,
  its ``RequestStateBoundary`` sealing and verifying the state (``benchmarks/peers/mcp_sdk_server.py``).
* **fastmcp** -- fastmcp 4.1.6 with the same guard tool written in its own API (``ctx.request_state``, an
  ``InputRequiredResult`` returned from the tool body), stateless JSON responses, and the SDK's
  ``RequestStateBoundary`` that fastmcp installs, under the same key and TTL (``benchmarks/peers/fastmcp_server.py``).
* **bare** -- a raw ASGI app returning fixed JSON for both legs: the HTTP stack's floor
  (``benchmarks/peers/bare_asgi.py``).

The client is lean on purpose (httpx costs 2-3 ms of CPU per round trip and would hide every server's limit on two
cores): one thread per concurrent client, each with one HTTP/1.1 keep-alive socket, prebuilt request bytes (only the
id and the state are spliced in), and a parser that reads only the status line, Content-Length (or chunks) and the
body's ``requestState``. Every response is checked (leg 1 ``input_required`` with a state, leg 2 ``complete``, not
``isError`` and the tool's ``Catalog access approved.``); any other answer stops that server's run with an error.
Before it is measured, every server but the floor must also refuse a retry whose state was altered by one
character: a peer that skipped its request-state boundary would not be measured.

Server CPU per round trip is the server process's utime+stime (``/proc/PID/stat``) over the measured window divided
by the round trips completed in it. All servers are started first and measured in interleaved rounds (``--rounds``,
default 3), so that load from anything else on the machine falls on every server alike; each point reports its best
round (highest round trips/s, lowest CPU per round trip), and each ratio is also given per round (both servers
measured within the same round) as the median and range over the rounds. The "server CPU" column is the server's
CPU time over the wall time (100 % = one core busy): near 100 % the server is the limit; well below it (the bare
floor) the client is, and only the CPU per round trip of that row is meaningful. Every loop is bounded in time
(``--duration``) and count (``MAX_ROUND_TRIPS``).

Targets (lean client, 8 clients; 1 client reported beside them): soklet >= 3x the SDK's round trips per second,
>= 5x fastmcp's, and soklet's server CPU per round trip <= 4x the bare floor's.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "benchmarks" / "peers"
HOST = "127.0.0.1"
TOOL = b"catalog.continue"
PROTOCOL = b"2026-07-28"
MAX_ROUND_TRIPS = 2_000_000  # per measurement, whatever the duration
SOCKET_TIMEOUT = 10.0
START_TIMEOUT = 60.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
URL_RE = re.compile(rb"http://127\.0\.0\.1:(\d{1,5})/mcp\b")
#: The targets: soklet's round trips per second over the SDK's and over fastmcp's (at least), and soklet's server
#: CPU per round trip over the bare ASGI floor's (at most). Set at TARGET_CLIENTS concurrent clients.
TARGET_VS_SDK = 3.0
TARGET_VS_FASTMCP = 5.0
TARGET_VS_FLOOR = 4.0
TARGET_CLIENTS = 8

META = (
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"' + PROTOCOL + b'",'
    b'"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},'
    b'"io.modelcontextprotocol/clientInfo":{"name":"soklet-bench","version":"1"}}'
)
BODY_HEAD = b'{"jsonrpc":"2.0","id":'
FIRST_TAIL = b',"method":"tools/call","params":{"name":"' + TOOL + b'","arguments":{},' + META + b"}}"
RETRY_MIDDLE = (
    b',"method":"tools/call","params":{"name":"' + TOOL + b'","arguments":{},'
    b'"inputResponses":{"approval":{"action":"accept","content":{}}},"requestState":"'
)
RETRY_TAIL = b'",' + META + b"}}"
STATE_KEY = b'"requestState":"'
#: What the tool answers on an approved retry (every server, the floor included).
APPROVED = b"Catalog access approved."


class BenchError(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------- client


class Connection:
    """One keep-alive HTTP/1.1 connection speaking the two legs with prebuilt bytes."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=SOCKET_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.head = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + str(port).encode() + b"\r\n"
            b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            b"MCP-Protocol-Version: " + PROTOCOL + b"\r\nMcp-Method: tools/call\r\nMcp-Name: " + TOOL + b"\r\n"
            b"Content-Length: "
        )
        self.buffer = bytearray()

    def close(self) -> None:
        self.sock.close()

    def post(self, body: bytes) -> tuple[int, bytes]:
        self.sock.sendall(self.head + str(len(body)).encode() + b"\r\n\r\n" + body)
        return self._response()

    def _fill(self) -> None:
        chunk = self.sock.recv(262144)
        if not chunk:
            raise BenchError("the server closed the connection")
        self.buffer += chunk

    def _response(self) -> tuple[int, bytes]:
        buffer = self.buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            self._fill()
            buffer = self.buffer
        head = bytes(buffer[:end]).lower()
        del buffer[: end + 4]
        status = int(head[9:12])
        at = head.find(b"\r\ncontent-length:")
        if at >= 0:
            stop = head.find(b"\r\n", at + 17)
            length = int(head[at + 17 : stop if stop >= 0 else len(head)])
            while len(self.buffer) < length:
                self._fill()
            body = bytes(self.buffer[:length])
            del self.buffer[:length]
            return status, body
        if b"\r\ntransfer-encoding: chunked" in head:
            return status, self._chunked()
        raise BenchError(f"response without Content-Length or chunked encoding: {head[:200]!r}")

    def _chunked(self) -> bytes:
        body = bytearray()
        while True:
            while (end := self.buffer.find(b"\r\n")) < 0:
                self._fill()
            size = int(bytes(self.buffer[:end]).split(b";", 1)[0], 16)
            del self.buffer[: end + 2]
            while len(self.buffer) < size + 2:
                self._fill()
            body += self.buffer[:size]
            del self.buffer[: size + 2]
            if size == 0:
                return bytes(body)

    def first_leg(self, request_id: int) -> bytes:
        """Leg 1: the call; returns the ``requestState`` of the ``input_required`` answer."""
        status, body = self.post(BODY_HEAD + str(request_id).encode() + FIRST_TAIL)
        at = body.find(STATE_KEY)
        if status != 200 or at < 0 or b'"input_required"' not in body:
            raise BenchError(f"leg 1: HTTP {status} {body[:300]!r}")
        start = at + len(STATE_KEY)
        return body[start : body.index(b'"', start)]

    def retry(self, request_id: int, state: bytes) -> tuple[int, bytes]:
        """Leg 2: the retry with the approval and ``state``."""
        return self.post(BODY_HEAD + str(request_id).encode() + RETRY_MIDDLE + state + RETRY_TAIL)

    def round_trip(self, request_id: int) -> None:
        state = self.first_leg(request_id)
        status, body = self.retry(request_id + 1, state)
        if status != 200 or b'"resultType":"complete"' not in body or b'"isError":true' in body or APPROVED not in body:
            raise BenchError(f"leg 2: HTTP {status} {body[:300]!r}")

    def refuses_altered_state(self, request_id: int) -> bool:
        """True when a retry whose state differs by one character does not complete with the approval."""
        state = bytearray(self.first_leg(request_id))
        middle = len(state) // 2
        state[middle] = ord("A") if state[middle] != ord("A") else ord("B")
        status, body = self.retry(request_id + 1, bytes(state))
        return not (status == 200 and b'"resultType":"complete"' in body and APPROVED in body)


@dataclass
class Measurement:
    server: str
    clients: int
    round_trips: int
    seconds: float
    cpu_seconds: float
    round_no: int = 0

    @property
    def per_second(self) -> float:
        return self.round_trips / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_us_per_round_trip(self) -> float:
        return self.cpu_seconds * 1e6 / self.round_trips if self.round_trips else float("nan")

    @property
    def cpu_share(self) -> float:
        return self.cpu_seconds / self.seconds if self.seconds > 0 else 0.0


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (fields 14 and 15 of /proc/PID/stat, after the command name)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def drive(port: int, clients: int, duration: float, max_round_trips: int, pid: int, name: str) -> Measurement:
    """``clients`` threads, each looping round trips on its own connection until the time or count bound."""
    connections = [Connection(port) for _ in range(clients)]
    counts = [0] * clients
    errors: list[str] = []
    go = threading.Event()
    stop = threading.Event()
    per_client_cap = max(1, max_round_trips // clients)

    def worker(index: int) -> None:
        connection = connections[index]
        request_id = (index + 1) * 100_000_000
        done = 0
        go.wait()
        try:
            while not stop.is_set() and done < per_client_cap:
                connection.round_trip(request_id)
                request_id += 2
                done += 1
        except (OSError, BenchError, ValueError) as exc:
            errors.append(f"client {index}: {exc}")
            stop.set()
        counts[index] = done

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    cpu_before = process_cpu_seconds(pid)
    started = time.perf_counter()
    go.set()
    deadline = started + duration
    while time.perf_counter() < deadline and not stop.is_set() and any(t.is_alive() for t in threads):
        time.sleep(0.02)
    stop.set()
    for thread in threads:
        thread.join(SOCKET_TIMEOUT * 2 + 5)
    elapsed = time.perf_counter() - started
    cpu_after = process_cpu_seconds(pid)
    for connection in connections:
        connection.close()
    if errors:
        raise BenchError(f"{name}: {errors[0]}")
    if any(thread.is_alive() for thread in threads):
        raise BenchError(f"{name}: a client thread did not finish")
    return Measurement(name, clients, sum(counts), elapsed, cpu_after - cpu_before)


# --------------------------------------------------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


@dataclass
class ServerProcess:
    name: str
    command: list[str]
    port: int | None  # None: read it from the printed URL
    checks_state: bool = True  # False for the floor, which seals and checks nothing
    process: subprocess.Popen[bytes] | None = None
    output: list[bytes] = field(default_factory=list)
    _port_seen: threading.Event = field(default_factory=threading.Event)

    def start(self) -> int:
        env = dict(os.environ, PYTHONUNBUFFERED="1", NO_COLOR="1", TERM="dumb")
        self.process = subprocess.Popen(
            self.command,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        if self.port is None:
            while not self._port_seen.wait(0.05):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise BenchError(f"{self.name}: no http://127.0.0.1:PORT/mcp line; output:\n{self.tail()}")
        assert self.port is not None
        last = ""
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(f"{self.name}: exited with {self.process.returncode}; output:\n{self.tail()}")
            try:
                connection = Connection(self.port)
                try:
                    connection.round_trip(1)
                    if self.checks_state and not connection.refuses_altered_state(3):
                        raise BenchError(f"{self.name}: a retry with an altered requestState completed")
                finally:
                    connection.close()
                return self.port
            except OSError as exc:
                last = str(exc)
                time.sleep(0.1)
        raise BenchError(f"{self.name}: not answering after {START_TIMEOUT:.0f} s ({last}); output:\n{self.tail()}")

    def _drain(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, b""):
            if len(self.output) < 400:
                self.output.append(line)
            if self.port is None and (match := URL_RE.search(line)):
                self.port = int(match.group(1))
                self._port_seen.set()

    def tail(self) -> str:
        return b"".join(self.output[-20:]).decode("utf-8", "replace").strip()[-3000:]

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def soklet_server() -> ServerProcess | str:
    soklet = ROOT / ".venv" / "bin" / "soklet"
    if not (ROOT / "soklet_cli" / "serve.py").is_file() or not soklet.exists():
        return "soklet serve is not available yet (soklet_cli/serve.py or .venv/bin/soklet missing)"
    command = [str(soklet), "serve", "--host", HOST, "--port", "0", "--dev-key", "--log-level", "warning"]
    return ServerProcess("soklet", command, None)


def sdk_server() -> ServerProcess | str:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return "the MCP Python SDK is not installed: run `bash scripts/bench` (installs requirements/bench.lock)"
    port = free_port()
    return ServerProcess("sdk", [sys.executable, str(PEERS / "mcp_sdk_server.py"), "--port", str(port)], port)


def fastmcp_server() -> ServerProcess | str:
    try:
        import fastmcp  # noqa: F401
    except ImportError:
        return "fastmcp is not installed: run `bash scripts/bench` (installs requirements/bench.lock)"
    port = free_port()
    return ServerProcess("fastmcp", [sys.executable, str(PEERS / "fastmcp_server.py"), "--port", str(port)], port)


def bare_server() -> ServerProcess | str:
    port = free_port()
    command = [sys.executable, str(PEERS / "bare_asgi.py"), "--port", str(port)]
    return ServerProcess("bare", command, port, checks_state=False)


SERVERS: dict[str, Callable[[], ServerProcess | str]] = {
    "soklet": soklet_server,
    "sdk": sdk_server,
    "fastmcp": fastmcp_server,
    "bare": bare_server,
}
LABELS = {"soklet": "soklet", "sdk": "MCP SDK 2.3.0", "fastmcp": "fastmcp 4.1.6", "bare": "bare ASGI (floor)"}


# ------------------------------------------------------------------------------------------------------------ main


RATE, CPU = "round_trips_per_s", "server_cpu_us_per_round_trip"


@dataclass(frozen=True)
class Ratio:
    """One reported ratio: ``top``'s figure over ``bottom``'s, with its target if it has one."""

    key: str
    label: str
    top: str
    bottom: str
    field: str  # RATE (best: highest) or CPU (best: lowest)
    target: float | None = None
    at_least: bool = True

    def per_round(self, results: list[Measurement], clients: int) -> list[float]:
        """The ratio within each round both servers were measured in."""
        values = []
        for round_no in sorted({m.round_no for m in results}):
            here = {m.server: m for m in results if m.clients == clients and m.round_no == round_no and m.round_trips}
            top, bottom = here.get(self.top), here.get(self.bottom)
            if top is None or bottom is None:
                continue
            if self.field == RATE and bottom.per_second:
                values.append(top.per_second / bottom.per_second)
            elif self.field == CPU and bottom.cpu_us_per_round_trip:
                values.append(top.cpu_us_per_round_trip / bottom.cpu_us_per_round_trip)
        return values


RATIOS = (
    Ratio("soklet_vs_sdk_round_trips", "soklet/SDK round trips/s", "soklet", "sdk", RATE, TARGET_VS_SDK),
    Ratio(
        "soklet_vs_fastmcp_round_trips", "soklet/fastmcp round trips/s", "soklet", "fastmcp", RATE, TARGET_VS_FASTMCP
    ),
    Ratio("soklet_vs_bare_cpu", "soklet/floor CPU per rt", "soklet", "bare", CPU, TARGET_VS_FLOOR, at_least=False),
    Ratio("sdk_vs_bare_cpu", "SDK/floor CPU per rt", "sdk", "bare", CPU),
    Ratio("fastmcp_vs_bare_cpu", "fastmcp/floor CPU per rt", "fastmcp", "bare", CPU),
    Ratio("sdk_vs_fastmcp_round_trips", "SDK/fastmcp round trips/s", "sdk", "fastmcp", RATE),
    # The round trips/s ratios as server CPU: when other work holds the cores, each server gets a share of the CPU
    # rather than what it could use, and its CPU per round trip is the steadier figure.
    Ratio("sdk_vs_soklet_cpu", "SDK/soklet CPU per rt", "sdk", "soklet", CPU),
    Ratio("fastmcp_vs_soklet_cpu", "fastmcp/soklet CPU per rt", "fastmcp", "soklet", CPU),
)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start every server, then measure rounds x servers x client counts, interleaved so that noise from anything
    else on the machine spreads over all servers alike; each point keeps its best round."""
    results: list[Measurement] = []
    skipped: dict[str, str] = {}
    running: dict[str, tuple[ServerProcess, int, int]] = {}
    try:
        for name in args.servers:
            made = SERVERS[name]()
            if isinstance(made, str):
                skipped[name] = made
                print(f"-- {LABELS[name]}: SKIPPED: {made}", file=sys.stderr, flush=True)
                continue
            try:
                port = made.start()
                assert made.process is not None
                running[name] = (made, port, made.process.pid)
            except (BenchError, OSError) as exc:
                made.stop()
                skipped[name] = f"failed: {exc}"
                print(f"-- {LABELS[name]}: FAILED to start: {exc}", file=sys.stderr, flush=True)
        for name, (_, port, pid) in list(running.items()):
            try:
                drive(port, max(args.clients), args.warmup, MAX_ROUND_TRIPS, pid, name)
            except (BenchError, OSError) as exc:
                skipped[name] = f"failed: {exc}"
                print(f"-- {LABELS[name]}: FAILED during warm-up: {exc}", file=sys.stderr, flush=True)
                running.pop(name)[0].stop()
        for round_no in range(1, args.rounds + 1):
            for name, (_, port, pid) in list(running.items()):
                try:
                    for clients in args.clients:
                        measured = drive(port, clients, args.duration, MAX_ROUND_TRIPS, pid, name)
                        measured.round_no = round_no
                        results.append(measured)
                        print(
                            f"-- round {round_no}: {LABELS[name]:<18} {clients} client(s): "
                            f"{measured.per_second:8.0f} round trips/s, "
                            f"{measured.cpu_us_per_round_trip:7.0f} us server CPU per round trip",
                            file=sys.stderr,
                            flush=True,
                        )
                except (BenchError, OSError) as exc:
                    skipped[name] = f"failed: {exc}"
                    print(f"-- {LABELS[name]}: FAILED: {exc}", file=sys.stderr, flush=True)
                    running.pop(name)[0].stop()
                    results = [m for m in results if m.server != name]
    finally:
        for made, _, _ in running.values():
            made.stop()
    return report(results, skipped, args)


def report(results: list[Measurement], skipped: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    best: dict[tuple[str, int], dict[str, Any]] = {}
    for name in args.servers:
        for clients in args.clients:
            points = [m for m in results if m.server == name and m.clients == clients and m.round_trips]
            if not points:
                continue
            fastest = max(points, key=lambda m: m.per_second)
            best[(name, clients)] = {
                "server": name,
                "clients": clients,
                "round_trips_per_s": round(fastest.per_second, 1),
                "server_cpu_us_per_round_trip": round(min(m.cpu_us_per_round_trip for m in points), 1),
                "server_cpu_share": round(fastest.cpu_share, 3),
                "rounds": [
                    {"round_trips_per_s": round(m.per_second, 1), "cpu_us": round(m.cpu_us_per_round_trip, 1)}
                    for m in points
                ],
            }
    ratios: dict[str, Any] = {}
    for clients in args.clients:
        entry: dict[str, Any] = {}
        for ratio in RATIOS:
            top, bottom = best.get((ratio.top, clients)), best.get((ratio.bottom, clients))
            if top and bottom and bottom[ratio.field]:
                entry[ratio.key] = round(top[ratio.field] / bottom[ratio.field], 3)
                per_round = ratio.per_round(results, clients)
                if per_round:
                    entry[ratio.key + "_per_round"] = {
                        "median": round(statistics.median(per_round), 3),
                        "min": round(min(per_round), 3),
                        "max": round(max(per_round), 3),
                    }
        ratios[str(clients)] = entry
    return {
        "duration_s": args.duration,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "load_average_at_start": args.load_average,
        "measurements": list(best.values()),
        "ratios": ratios,
        "skipped": skipped,
    }


def render(summary: dict[str, Any]) -> str:
    lines = [
        "Input-required round trips over loopback HTTP (one round trip = call -> input_required -> retry -> complete)",
        f"{summary['duration_s']:g} s per point, best of {summary['rounds']} interleaved round(s) per point; "
        f"{summary['cpus']} CPUs, load average at start {summary['load_average_at_start']}",
        "",
        f"{'server':<20} {'clients':>7} {'round trips/s':>14} {'server CPU us/rt':>17} {'server CPU':>11}",
    ]
    for m in summary["measurements"]:
        lines.append(
            f"{LABELS[m['server']]:<20} {m['clients']:>7} {m['round_trips_per_s']:>14.0f} "
            f"{m['server_cpu_us_per_round_trip']:>17.0f} {m['server_cpu_share'] * 100:>10.0f}%"
        )
    for name, reason in summary["skipped"].items():
        lines.append(f"{LABELS[name]:<20} skipped: {reason}")
    lines.append("")
    for clients, entry in summary["ratios"].items():
        parts = []
        # The targets are set at TARGET_CLIENTS; other client counts are reported against the same figures.
        scope = "target" if int(clients) == TARGET_CLIENTS else f"{TARGET_CLIENTS}-client target"
        for ratio in RATIOS:
            if ratio.key not in entry:
                continue
            value = entry[ratio.key]
            text = f"{ratio.label} {value:.2f}x"
            if (spread := entry.get(ratio.key + "_per_round")) and summary["rounds"] > 1:
                text += f" (per round: median {spread['median']:.2f}x, {spread['min']:.2f}-{spread['max']:.2f}x)"
            if ratio.target is not None:
                met = value >= ratio.target if ratio.at_least else value <= ratio.target
                sign = ">=" if ratio.at_least else "<="
                text += f" [{scope} {sign} {ratio.target:g}x: {'met' if met else 'NOT met'}]"
            parts.append(text)
        if parts:
            lines.append(f"{clients} client(s):")
            lines.extend(f"  {part}" for part in parts)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 s per point, 1 round, 0.5 s warm-up")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each point keeps its best")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measured point (default 3)")
    parser.add_argument("--warmup", type=float, default=1.5, help="warm-up seconds per server (default 1.5)")
    parser.add_argument("--clients", default="1,8", help="comma-separated concurrent clients (default 1,8)")
    parser.add_argument(
        "--servers", default="soklet,sdk,fastmcp,bare", help="comma-separated: soklet, sdk, fastmcp, bare"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.warmup, args.rounds = 1.0, 0.5, 1
    args.rounds = min(max(args.rounds, 1), 20)
    args.load_average = Path("/proc/loadavg").read_text().split()[0]
    args.duration = min(max(args.duration, 0.2), 120.0)
    args.warmup = min(max(args.warmup, 0.1), 30.0)
    args.clients = sorted({min(max(int(c), 1), 64) for c in args.clients.split(",") if c.strip()})
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    unknown = [s for s in args.servers if s not in SERVERS]
    if unknown or not args.clients:
        parser.error(f"unknown servers {unknown}" if unknown else "no client counts")
    summary = run(args)
    print(json.dumps(summary, indent=2) if args.json else render(summary))
    failed = [name for name, reason in summary["skipped"].items() if reason.startswith("failed")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
