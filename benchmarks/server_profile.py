"""Where a server round trip's microseconds go, by layer: in process through the ASGI app, and over real HTTP.

Run: ``.venv/bin/python benchmarks/server_profile.py [--quick] [--mode in-process|http|both] [--round-trips N]
[--seconds S] [--clients N] [--top N]``. Run it from another checkout (``cd /tmp/base && PYTHONPATH=/tmp/base
/work/main/.venv/bin/python /work/main/benchmarks/server_profile.py``) to compare two commits side by side.

* **in process** -- the flow ``benchmarks/server_round_trips.py`` measures over HTTP (``catalog.continue``: call →
  ``input_required`` with a sealed state → retry with the answer and the state → complete), driven straight into
  :class:`soklet_core.mcp.McpAsgiApp` with prebuilt ASGI messages, so that no HTTP server or client is in the
  figures: the CPU time per round trip, then a cProfile of the same loop.
* **over HTTP** -- the server ``soklet serve --dev-key`` runs (:func:`soklet_core.mcp.server.run` with the demo
  registry, a private keyring file and its SQLite store, uvicorn with uvloop and httptools, metrics on, no access
  log) in this process, on its main thread; the clients run in a subprocess (``--clients`` threads, one keep-alive
  connection each), so this process's CPU is the server's. For each era -- the 2026-07-28 two-leg flow (the lean
  client of ``server_round_trips.py``) and the 2025-era flow on a session (``tools/call`` answered as SSE, the
  server's ``elicitation/create`` answered on a second connection: ``legacy_sessions.py``'s client) -- it measures
  the server CPU per completed flow over ``--seconds`` without the profiler, then again under cProfile (enabled on
  the server's loop for the window only).

Each profile's own time (a function's time, not its callees') is summed by the layer that holds the function;
the time of a builtin or C function (``len``, ``isinstance``, a dict method...) is given to the layer of the Python
function that called it. The shares are of the profiled run, whose per-call overhead inflates small functions:
read them as proportions, and the unprofiled CPU per round trip as the absolute figure.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from support.asgi_post import post as asgi_post

from soklet_apps.demo import build_registry
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer
from soklet_core.protection import ProtectionConfig
from soklet_core.protocol import PROTOCOL_VERSION

VERSION = PROTOCOL_VERSION.encode()
META = (
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"' + VERSION + b'",'
    b'"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},'
    b'"io.modelcontextprotocol/clientInfo":{"name":"soklet-profile","version":"1"}}'
)
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"mcp-protocol-version", VERSION),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"catalog.continue"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
]
STATE = re.compile(rb'"requestState":"([A-Za-z0-9_.-]{1,65536})"')
OTHER = "other (the driver, unattributed C calls)"
UVICORN = "uvicorn and httptools"
#: The C calls uvicorn makes (the socket writes, the httptools parser, uvloop's transport): the I/O floor.
UVICORN_C = "uvicorn's C calls (socket writes, httptools parser)"
#: Path fragments, most specific first: the layer a function's file belongs to.
PARTS = (
    ("soklet_core/json/", "json (parse, digest, canonical form, encoding)"),
    ("soklet_core/protection/", "protection (binding, seal, open)"),
    ("soklet_core/keys/", "keys (key lookup, base64url)"),
    ("soklet_core/mcp/server/http/", "http transport (ASGI, header checks, access log)"),
    ("soklet_core/mcp/server/legacy/", "2025-era sessions"),
    ("soklet_core/mcp/server/engine/", "engine (method table, validation, state wrapper)"),
    ("soklet_core/mcp/server/ops/", "metrics and readiness"),
    ("soklet_core/mcp/server/", "server common (JSON-RPC answers, headers)"),
    ("soklet_core/mcp/", "model (capabilities, responses, results)"),
    ("soklet_apps/", "the demo handler"),
    ("uvicorn/", UVICORN),
    ("httptools", UVICORN),
    ("asyncio", "asyncio and uvloop"),
    ("uvloop", "asyncio and uvloop"),
    ("cryptography", "cryptography (AES-GCM)"),
    ("logging/", "logging"),
)
#: Bounds of the HTTP run: the client subprocess's start and answers, and one measured window.
CLIENT_TIMEOUT = 120.0
MAX_SECONDS = 120.0
MAX_CLIENTS = 64


def first(request_id: int) -> bytes:
    """The call."""
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",' % request_id
    return head + b'"params":{"name":"catalog.continue","arguments":{},' + META + b"}}"


def retry(request_id: int, state: bytes) -> bytes:
    """The retry with the answer and the state."""
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",' % request_id
    answer = b'"inputResponses":{"approval":{"action":"accept","content":{}}},'
    return (
        head
        + b'"params":{"name":"catalog.continue","arguments":{},'
        + answer
        + b'"requestState":"'
        + state
        + b'",'
        + META
        + b"}}"
    )


class Driver:
    """Posts prebuilt bodies into one app and returns the response bodies."""

    def __init__(self) -> None:
        ring = ProtectionKeyring(ProtectionKey.generate("profile"))
        config = ProtectionConfig(keyring=ring)
        server = McpServer(build_registry(development=True), protection=config)
        self.app = server.asgi_app()

    async def post(self, body: bytes) -> bytes:
        return await asgi_post(self.app, body, HEADERS)

    async def round_trips(self, count: int) -> None:
        for index in range(count):
            answer = await self.post(first(2 * index))
            found = STATE.search(answer)
            if found is None:
                raise RuntimeError("the call was not answered input_required with a state")
            done = await self.post(retry(2 * index + 1, found.group(1)))
            if b'"resultType":"complete"' not in done or b'"isError":true' in done:
                raise RuntimeError("the retry did not complete")


def part_of(filename: str) -> str:
    """The layer that holds a function defined in ``filename``."""
    for fragment, name in PARTS:
        if fragment in filename:
            return name
    return OTHER


def by_layer(profile: cProfile.Profile) -> tuple[dict[str, float], list[tuple[float, str]]]:
    """Own time summed by layer (a builtin's time given to its callers' layers), and every function's own time."""
    stats = pstats.Stats(profile)
    own: dict[str, float] = defaultdict(float)
    rows = []
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, line, function), (_, _, self_time, _, callers) in table.items():
        rows.append((self_time, f"{filename.rsplit('/', 1)[-1]}:{line}({function})"))
        if filename != "~":
            own[part_of(filename)] += self_time
            continue
        # A builtin: split its own time among its callers as the profile recorded it per caller.
        given = 0.0
        for (caller_file, _, _), caller_stats in callers.items():
            share = caller_stats[2]
            given += share
            layer = part_of(caller_file) if caller_file != "~" else OTHER
            own[UVICORN_C if layer == UVICORN else layer] += share
        own[OTHER] += max(0.0, self_time - given)
    return own, rows


def print_profile(title: str, profile: cProfile.Profile, count: int, top: int) -> dict[str, float]:
    own, rows = by_layer(profile)
    total = sum(own.values()) or 1e-9
    print(f"\n{title}: own time by layer ({total / max(count, 1) * 1e6:.0f} us per round trip under the profiler)")
    for name, seconds in sorted(own.items(), key=lambda item: -item[1]):
        print(f"  {seconds / total:6.1%}  {seconds / max(count, 1) * 1e6:7.1f} us  {name}")
    print(f"costliest {top} functions by own time")
    for seconds, name in sorted(rows, reverse=True)[:top]:
        print(f"  {seconds / total:6.1%}  {name}")
    return {name: seconds / total for name, seconds in own.items()}


def in_process(count: int, top: int) -> None:
    driver = Driver()
    asyncio.run(driver.round_trips(200))  # warm up: caches, lazily built tables
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        asyncio.run(driver.round_trips(count))
        best = min(best, (time.process_time() - started) / count)
    print(f"in-process round trip (call + retry) through McpAsgiApp: {best * 1e6:.0f} us of CPU, best of 3 x {count}")
    profile = cProfile.Profile()
    profile.runcall(asyncio.run, driver.round_trips(count))
    print_profile("in process", profile, count, top)


# ------------------------------------------------------------------------------------------------ over HTTP


def client_main(port: int, era: str, clients: int, seconds: float) -> int:
    """The client subprocess: ``clients`` threads completing flows of ``era`` once told to go, for ``seconds``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from legacy_sessions import LegacyClient
    from server_round_trips import Connection

    url = f"http://127.0.0.1:{port}/mcp"
    flows: list[Any] = []
    for index in range(clients):
        if era == "modern":
            connection = Connection(port)
            ids = iter(range((index + 1) * 100_000_000, (index + 2) * 100_000_000, 2))
            flows.append((connection.close, lambda c=connection, i=ids: c.round_trip(next(i))))
        else:
            client = LegacyClient(url)
            flows.append((client.close, client.flow))
    counts = [0] * clients
    errors: list[str] = []
    stop = threading.Event()

    def run(index: int) -> None:
        flow = flows[index][1]
        try:
            while not stop.is_set():
                flow()
                counts[index] += 1
        except Exception as exc:  # reported to the parent, which stops the run
            errors.append(f"{era} client {index}: {type(exc).__name__}: {exc}")
            stop.set()

    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    threads = [threading.Thread(target=run, args=(index,), daemon=True) for index in range(clients)]
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join(30)
    for close, _flow in flows:
        close()
    print(f"done {sum(counts)} {errors[0] if errors else ''}".strip(), flush=True)
    return 1 if errors else 0


class HttpRun:
    """The server on this process's main thread; a controller thread drives the client subprocesses."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.port: int | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.serving = threading.Event()
        self.failure: BaseException | None = None
        self.results: list[tuple[str, float, float, cProfile.Profile | None, int]] = []

    def on_event(self, event: object) -> None:
        from soklet_core.mcp.server._serve_config import Listening, Serving

        if isinstance(event, Listening):
            self.port = event.port
        elif isinstance(event, Serving):
            self.loop = asyncio.get_running_loop()
            self.serving.set()

    def on_loop(self, action: Any) -> None:
        """Run ``action`` on the server's loop (the thread cProfile must watch) and wait for it."""
        assert self.loop is not None
        done = threading.Event()

        def call() -> None:
            action()
            done.set()

        self.loop.call_soon_threadsafe(call)
        if not done.wait(CLIENT_TIMEOUT):
            raise RuntimeError("the server's loop did not run the profiler switch")

    def window(self, era: str, seconds: float, profiled: bool) -> tuple[int, float, cProfile.Profile | None]:
        """One measured window of ``era`` flows: (flows completed, server CPU seconds, the profile)."""
        command = [sys.executable, __file__, "--client", str(self.port), era, str(self.args.clients), str(seconds)]
        client = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert client.stdin is not None
        assert client.stdout is not None
        try:
            if client.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the {era} client did not start")
            profile = cProfile.Profile() if profiled else None
            if profile is not None:
                self.on_loop(profile.enable)
            cpu = time.process_time()
            client.stdin.write("go\n")
            client.stdin.flush()
            answer = client.stdout.readline().split(maxsplit=2)
            cpu = time.process_time() - cpu
            if profile is not None:
                self.on_loop(profile.disable)
            if client.wait(CLIENT_TIMEOUT) != 0 or len(answer) < 2 or answer[0] != "done":
                raise RuntimeError(f"the {era} client failed: {' '.join(answer)}")
            return int(answer[1]), cpu, profile
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()

    def control(self) -> None:
        try:
            if not self.serving.wait(CLIENT_TIMEOUT):
                raise RuntimeError("the server did not start")
            seconds = self.args.seconds
            for era in self.args.eras:
                self.window(era, min(seconds, 2.0), profiled=False)  # warm up
                flows, cpu, _ = self.window(era, seconds, profiled=False)
                pflows, _pcpu, profile = self.window(era, seconds, profiled=True)
                self.results.append((era, flows, cpu, profile, pflows))
        except BaseException as exc:  # reported by main once the server stopped
            self.failure = exc
        finally:
            os.kill(os.getpid(), signal.SIGINT)  # the server's graceful stop

    def run(self) -> int:
        from soklet_core.files import KeyringDocument, write_keyring_file
        from soklet_core.mcp.server import ServeConfig, run
        from soklet_core.mcp.server._serve_config import KeyringFile
        from soklet_core.store import sqlite_url

        folder = Path(tempfile.mkdtemp(prefix="soklet-profile-"))
        try:
            document = KeyringDocument.new(ProtectionKey.generate("profile"))
            keyring = folder / "keyring.toml"
            write_keyring_file(keyring, document)
            config = ServeConfig(
                app=build_registry(development=True),
                keyring=KeyringFile(keyring, document=document),
                store=sqlite_url(folder / "store.sqlite3"),
                port=0,
                log_level="warning",
            )
            threading.Thread(target=self.control, daemon=True).start()
            run(config, on_event=self.on_event)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if self.failure is not None:
            raise self.failure
        print(f"\nover HTTP: soklet's server (uvicorn, uvloop, httptools) in this process, {self.args.clients} clients")
        for era, flows, cpu, profile, pflows in self.results:
            label = "2026-07-28 (call + retry)" if era == "modern" else "2025 era (call + answer on a session)"
            per_flow = cpu / max(flows, 1) * 1e6
            print(f"\n{label}: {flows} flows in {self.args.seconds:g} s, {per_flow:.0f} us of server CPU per flow")
            assert profile is not None
            print_profile(f"{label}, over HTTP", profile, pflows, self.args.top)
        return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        port, era, clients, seconds = sys.argv[2:6]
        return client_main(int(port), era, int(clients), float(seconds))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("in-process", "http", "both"), default="both", help="what to profile")
    parser.add_argument("--round-trips", type=int, default=2000, help="in-process round trips per measurement")
    parser.add_argument("--seconds", type=float, default=8.0, help="over HTTP: seconds per window (default 8)")
    parser.add_argument("--clients", type=int, default=8, help="over HTTP: concurrent clients (default 8)")
    parser.add_argument("--eras", default="modern,legacy", help="over HTTP: eras, comma-separated (modern,legacy)")
    parser.add_argument("--top", type=int, default=15, help="costliest functions to list (default 15)")
    parser.add_argument("--quick", action="store_true", help="a short smoke run (200 round trips, 1 s windows)")
    arguments = parser.parse_args()
    arguments.eras = [era for era in arguments.eras.split(",") if era in ("modern", "legacy")] or ["modern"]
    arguments.clients = max(1, min(arguments.clients, MAX_CLIENTS))
    arguments.seconds = 1.0 if arguments.quick else max(0.5, min(arguments.seconds, MAX_SECONDS))
    count = 200 if arguments.quick else max(1, min(arguments.round_trips, 100_000))
    if arguments.mode in ("in-process", "both"):
        in_process(count, arguments.top)
    if arguments.mode in ("http", "both"):
        return HttpRun(arguments).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
