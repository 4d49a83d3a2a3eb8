"""What the 2025-era path costs: ``catalog.continue`` completed on a 2025-era session against the 2026-07-28 retry.

Run: ``.venv/bin/python benchmarks/legacy_sessions.py [--quick] [--duration S] [--clients N] [--json]`` (or
``bash scripts/bench``, which runs every benchmark).

Both flows run against one ``soklet serve --dev-key`` process on 127.0.0.1, in interleaved rounds (``--rounds``),
so load from anything else on the machine falls on both alike; each reports its best round.

* **modern** -- the 2026-07-28 two-leg flow: ``tools/call`` -> ``input_required`` with a sealed ``requestState``
  -> the client's retry with ``inputResponses`` and the state -> ``complete``. Two POSTs.
* **legacy** -- the same tool on a 2025-11-25 session (one ``initialize`` per client, before the clock starts):
  ``tools/call`` answered as SSE, the server's ``elicitation/create`` read from the stream, the client's answer
  POSTed with the session header (202), the result read as the stream's last frame. Inside the server this is the
  same two dispatches as the modern flow (the state is sealed and opened as on a retry) plus the session, the
  server-to-client request and the stream.

The figure that matters is **server CPU per completed flow** (the server process's utime+stime over the window,
divided by the flows completed in it): it leaves out the client, which here is httpx and costs more than the
server. The ratio legacy/modern is what a 2025-era client costs the server over a 2026-07-28 one. Wall-clock flows
per second are printed beside it for reference only. Every answer is checked ("Catalog access approved."); any
other stops the run with an error. Bounded in time (``--duration``) and count (``MAX_FLOWS``).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
from server_round_trips import BenchError, process_cpu_seconds, soklet_server

MAX_FLOWS = 200_000
TIMEOUT = 10.0
MODERN_VERSION = "2026-07-28"
LEGACY_VERSION = "2025-11-25"
APPROVED = "Catalog access approved."
_ACCEPT = {"action": "accept", "content": {}}
_CAPABILITIES = {"elicitation": {"form": {}}}


@dataclass
class Measurement:
    """One flow kind over one window."""

    name: str
    clients: int
    flows: int
    seconds: float
    cpu_seconds: float

    @property
    def per_second(self) -> float:
        return self.flows / self.seconds if self.seconds else 0.0

    @property
    def cpu_us_per_flow(self) -> float:
        return self.cpu_seconds / self.flows * 1e6 if self.flows else float("inf")


class ModernClient:
    """The 2026-07-28 flow over one keep-alive connection."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=TIMEOUT)
        self.next_id = 1

    def _post(self, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": _CAPABILITIES,
        }
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": {**params, "_meta": meta}}
        headers = {
            "mcp-protocol-version": MODERN_VERSION,
            "mcp-method": "tools/call",
            "mcp-name": "catalog.continue",
            "accept": "application/json, text/event-stream",
        }
        response = self.http.post(self.url, json=body, headers=headers)
        if response.status_code != 200:
            raise BenchError(f"modern: HTTP {response.status_code}")
        result: dict[str, Any] = response.json()["result"]
        return result

    def flow(self) -> None:
        first = self._post({"name": "catalog.continue", "arguments": {}})
        state = first.get("requestState")
        if first.get("resultType") != "input_required" or not isinstance(state, str):
            raise BenchError("modern: the first leg was not input_required with a state")
        second = self._post(
            {
                "name": "catalog.continue",
                "arguments": {},
                "inputResponses": {"approval": _ACCEPT},
                "requestState": state,
            }
        )
        if second.get("content", [{}])[0].get("text") != APPROVED:
            raise BenchError("modern: the retry did not complete")

    def close(self) -> None:
        self.http.close()


class LegacyClient:
    """The 2025-era flow: one session, the call's SSE stream on one connection, the answers on another."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stream_http = httpx.Client(timeout=TIMEOUT)
        self.answer_http = httpx.Client(timeout=TIMEOUT)
        self.next_id = 1
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY_VERSION,
                "capabilities": _CAPABILITIES,
                "clientInfo": {"name": "soklet-bench", "version": "1"},
            },
        }
        response = self.stream_http.post(self.url, json=initialize, headers={"accept": "application/json"})
        session = response.headers.get("mcp-session-id")
        if response.status_code != 200 or session is None:
            raise BenchError(f"legacy: initialize answered HTTP {response.status_code} without a session")
        self.headers = {
            "mcp-session-id": session,
            "mcp-protocol-version": LEGACY_VERSION,
            "accept": "application/json, text/event-stream",
        }
        notified = self.answer_http.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )
        if notified.status_code != 202:
            raise BenchError(f"legacy: notifications/initialized answered HTTP {notified.status_code}")

    def flow(self) -> None:
        self.next_id += 1
        call = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": "catalog.continue", "arguments": {}},
        }
        result: dict[str, Any] | None = None
        with self.stream_http.stream("POST", self.url, json=call, headers=self.headers) as response:
            if response.status_code != 200:
                raise BenchError(f"legacy: HTTP {response.status_code}")
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                message = json.loads(line[6:])
                if message.get("method") == "elicitation/create":
                    answer = {"jsonrpc": "2.0", "id": message["id"], "result": _ACCEPT}
                    posted = self.answer_http.post(self.url, json=answer, headers=self.headers)
                    if posted.status_code != 202:
                        raise BenchError(f"legacy: the answer got HTTP {posted.status_code}")
                elif message.get("id") == self.next_id:
                    result = message.get("result")
                    break
        if result is None or result.get("content", [{}])[0].get("text") != APPROVED:
            raise BenchError("legacy: the call did not complete")

    def close(self) -> None:
        self.stream_http.close()
        self.answer_http.close()


def drive(kind: str, url: str, clients: int, duration: float, pid: int) -> Measurement:
    """``clients`` threads, each completing flows of ``kind`` until the time or count bound."""
    make = ModernClient if kind == "modern" else LegacyClient
    workers = [make(url) for _ in range(clients)]
    counts = [0] * clients
    errors: list[str] = []
    go, stop = threading.Event(), threading.Event()

    def run(index: int) -> None:
        go.wait()
        try:
            while not stop.is_set() and counts[index] < MAX_FLOWS // clients:
                workers[index].flow()
                counts[index] += 1
        except (httpx.HTTPError, BenchError, KeyError, ValueError) as exc:
            errors.append(f"{kind} client {index}: {exc}")
            stop.set()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    cpu_before = process_cpu_seconds(pid)
    started = time.perf_counter()
    go.set()
    while time.perf_counter() < started + duration and not stop.is_set():
        time.sleep(0.02)
    stop.set()
    for thread in threads:
        thread.join(TIMEOUT * 2 + 5)
    elapsed = time.perf_counter() - started
    cpu_after = process_cpu_seconds(pid)
    for worker in workers:
        worker.close()
    if errors:
        raise BenchError(errors[0])
    return Measurement(kind, clients, sum(counts), elapsed, cpu_after - cpu_before)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="short windows, one round (a smoke run)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measurement (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best is kept (default 3)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients per flow kind (default 4)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    duration, rounds = (1.0, 1) if args.quick else (args.duration, args.rounds)
    server = soklet_server()
    if isinstance(server, str):
        print(server, file=sys.stderr)
        return 2
    try:
        port = server.start()
        assert server.process is not None
        url = f"http://127.0.0.1:{port}/mcp"
        best: dict[str, Measurement] = {}
        for _ in range(rounds):
            for kind in ("modern", "legacy"):
                measured = drive(kind, url, args.clients, duration, server.process.pid)
                if kind not in best or measured.cpu_us_per_flow < best[kind].cpu_us_per_flow:
                    best[kind] = measured
    except BenchError as exc:
        print(f"legacy_sessions: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop()
    modern, legacy = best["modern"], best["legacy"]
    ratio = legacy.cpu_us_per_flow / modern.cpu_us_per_flow
    if args.json:
        rows = [
            {
                "flow": m.name,
                "clients": m.clients,
                "flows": m.flows,
                "per_second": m.per_second,
                "server_cpu_us_per_flow": m.cpu_us_per_flow,
            }
            for m in (modern, legacy)
        ]
        print(json.dumps({"results": rows, "legacy_over_modern_cpu": ratio}, indent=2))
        return 0
    print(f"{'flow':<8} {'clients':>7} {'flows':>7} {'flows/s':>9} {'server CPU/flow':>16}")
    for m in (modern, legacy):
        print(f"{m.name:<8} {m.clients:>7} {m.flows:>7} {m.per_second:>9.0f} {m.cpu_us_per_flow:>13.0f} µs")
    print(f"legacy / modern server CPU per flow: {ratio:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
