"""``soklet fleet check`` over many admin endpoints on loopback: wall time, and the cost per instance.

Run: ``.venv/bin/python benchmarks/fleet_check.py [--instances 100] [--real 16] [--repeat 5] [--json]``.

The endpoints are all real admin listeners (``soklet_core.mcp.server.ops._admin.AdminApp`` on uvicorn, each over its own
copy of one keyring file), never a stub: ``--real`` of them are whole ``soklet serve --admin-port 0`` processes;
the rest are served by one more process holding that many admin listeners on one event loop (a two-core machine
cannot run 100 server processes). Each is listed in a fleet file with its own name and URL.

Measured, in one run and interleaved so that other load falls on every size alike:

* **command** -- ``soklet fleet check --fleet FILE --json`` as a subprocess: what a CI job waits for, Python's
  start and imports included;
* **check** -- the check itself in this process (``read_snapshots`` + ``compare_fleet``, concurrent reads): the
  part that grows with the fleet.

for a baseline of one instance, and for ``--instances``; each point is the median of ``--repeat`` runs. The cost
per instance is ``(T(N) - T(1)) / (N - 1)``. Target (issue 9): the command <= 2 s wall for 100 instances, and a
flat cost per instance.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from soklet_core.files import MAX_FLEET_INSTANCES
from soklet_core.protocol import DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME, DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS

TOKEN: Final = "benchFleetToken-5c1e9a7f30b2d846"
#: Fleet sizes measured between the baseline (1) and --instances, to show whether the cost per instance is flat.
MIDDLE_SIZES: Final = (10, 50)
#: Seconds to wait for every listener to come up.
START_TIMEOUT: Final = 120.0


def _host(folder: Path, count: int) -> None:
    """Serve ``count`` admin listeners in this process (one event loop), each over its own keyring copy; print
    their ports as one JSON line, then serve until SIGTERM."""
    from soklet_core.files import read_keyring_file
    from soklet_core.keys import KeyringManager
    from soklet_core.mcp.server.http import limited_uvicorn_config, uvicorn_server_class
    from soklet_core.mcp.server.ops import AdminApp, AdminTokens, LiveKeyring
    from soklet_core.mcp.server.options import HttpLimits

    async def main() -> None:
        servers = []
        ports = []
        for index in range(count):
            path = folder / f"hosted-{index}.toml"
            shutil.copy2(folder / "base.toml", path)
            document = read_keyring_file(path)
            live = LiveKeyring(KeyringManager(document.keyring()), path, document=document)
            app = AdminApp(
                live,
                AdminTokens.parse(f"ops:{TOKEN}"),
                instance=f"hosted-{index}",
                lifetime_ms=DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME // timedelta(milliseconds=1),
                rounds=DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS,
            )
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(128)
            server = uvicorn_server_class()(limited_uvicorn_config(app, HttpLimits(), log_level="warning"))
            # One loop serves them all: uvicorn's own signal capture (one handler per server, each replacing the
            # last) would stop only one of them; this process stops them all on SIGTERM below.
            server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
            servers.append((server, sock))
            ports.append(sock.getsockname()[1])
        tasks = [asyncio.create_task(server.serve(sockets=[sock])) for server, sock in servers]
        while not all(server.started for server, _ in servers):
            await asyncio.sleep(0.05)
        sys.stdout.write(json.dumps({"ports": ports}) + "\n")
        sys.stdout.flush()
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        for server, _ in servers:
            server.should_exit = True
        await asyncio.gather(*tasks)

    asyncio.run(main())


def _soklet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "soklet_cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def _start(folder: Path, instances: int, real: int) -> tuple[list[subprocess.Popen[str]], list[tuple[str, str]]]:
    processes: list[subprocess.Popen[str]] = []
    endpoints: list[tuple[str, str]] = []
    for index in range(real):
        path = folder / f"real-{index}.toml"
        shutil.copy2(folder / "base.toml", path)
        command = [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--json", "--keyring", str(path)]
        command += ["--admin-port", "0", "--admin-token-file", "token", "--instance", f"real-{index}"]
        command += ["--log-level", "warning"]
        process = subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        processes.append(process)
    for index, process in enumerate(processes):
        assert process.stdout is not None
        facts = json.loads(process.stdout.readline())
        endpoints.append((f"real-{index}", facts["admin_url"]))
    hosted = instances - real
    if hosted > 0:
        command = [sys.executable, __file__, "--host", str(hosted), "--folder", str(folder)]
        host = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        processes.append(host)
        assert host.stdout is not None
        ports = json.loads(host.stdout.readline())["ports"]
        endpoints += [(f"hosted-{index}", f"http://127.0.0.1:{port}") for index, port in enumerate(ports)]
    return processes, endpoints


def _fleet_file(folder: Path, name: str, endpoints: list[tuple[str, str]]) -> Path:
    path = folder / name
    tables = "".join(f'[[instances]]\nname = "{label}"\nurl = "{url}"\n\n' for label, url in endpoints)
    path.write_text(f'[defaults]\nadmin_token_file = "token"\ntimeout = 10\n\n{tables}')
    return path


def _time_command(folder: Path, fleet: Path, size: int) -> float:
    started = time.perf_counter()
    result = _soklet("fleet", "check", "--fleet", str(fleet), "--json", cwd=folder)
    elapsed = time.perf_counter() - started
    document = json.loads(result.stdout)
    if result.returncode != 0 or document["status"] != "converged" or len(document["instances"]) != size:
        raise SystemExit(f"fleet check did not converge over {size} instances: {result.stderr.strip()}")
    return elapsed


def _time_check(endpoints: list[tuple[str, str]]) -> float:
    from soklet_core.fleet import AdminTarget, FleetStatus, compare_fleet, read_snapshots

    targets = [AdminTarget(label, url, TOKEN, timeout=10) for label, url in endpoints]
    started = time.perf_counter()
    report = compare_fleet(asyncio.run(read_snapshots(targets)))
    elapsed = time.perf_counter() - started
    if report.status is not FleetStatus.CONVERGED:
        raise SystemExit(f"the in-process check did not converge: {report.status}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=100, help="admin endpoints in the fleet (default 100)")
    parser.add_argument("--real", type=int, default=16, help="how many are whole soklet serve processes")
    parser.add_argument("--repeat", type=int, default=5, help="runs per point (median reported)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quick", action="store_true", help="a short smoke run (10 instances, 2 real, 1 run)")
    parser.add_argument("--host", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.quick:
        options.instances, options.real, options.repeat = 10, 2, 1
    if options.host is not None:
        _host(options.folder, options.host)
        return
    if not 1 <= options.real <= options.instances <= MAX_FLEET_INSTANCES:
        parser.error(f"need 1 <= --real <= --instances <= {MAX_FLEET_INSTANCES}")
    with tempfile.TemporaryDirectory(prefix="soklet-fleet-bench-") as name:
        folder = Path(name)
        (folder / "token").write_text(f"ops:{TOKEN}\n")
        (folder / "token").chmod(0o600)
        generated = _soklet("keys", "generate", "--id", "2026-08", "--keyring", "base.toml", cwd=folder)
        staged = _soklet("keys", "stage", "--generate", "--id", "2026-09", "--keyring", "base.toml", cwd=folder)
        if generated.returncode or staged.returncode:
            raise SystemExit("could not write the benchmark keyring")
        started = time.perf_counter()
        processes, endpoints = _start(folder, options.instances, options.real)
        startup = time.perf_counter() - started
        try:
            sizes = sorted({1, *(size for size in MIDDLE_SIZES if size < options.instances), options.instances})
            fleets = {size: _fleet_file(folder, f"fleet-{size}.toml", endpoints[:size]) for size in sizes}
            command: dict[int, list[float]] = {size: [] for size in sizes}
            check: dict[int, list[float]] = {size: [] for size in sizes}
            for size in sizes:  # warm-up: imports cached, connections' first accept paid
                _time_command(folder, fleets[size], size)
                _time_check(endpoints[:size])
            for _ in range(options.repeat):
                for size in sizes:
                    command[size].append(_time_command(folder, fleets[size], size))
                    check[size].append(_time_check(endpoints[:size]))
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
    _report(options, startup, command, check)


def _report(
    options: argparse.Namespace, startup: float, command: dict[int, list[float]], check: dict[int, list[float]]
) -> None:
    n = options.instances
    median: dict[str, dict[int, float]] = {
        "command": {size: statistics.median(values) for size, values in command.items()},
        "check": {size: statistics.median(values) for size, values in check.items()},
    }
    # The cost of each instance beyond the first, at every size: flat if these agree.
    per_added = {
        what: {size: (value - values[1]) / (size - 1) for size, value in values.items() if size > 1}
        for what, values in median.items()
    }
    result: dict[str, Any] = {
        "instances": n,
        "real_soklet_serve": options.real,
        "hosted_admin_listeners": n - options.real,
        "repeat": options.repeat,
        "cpus": os.cpu_count(),
        "startup_s": round(startup, 2),
        "command_wall_s": {str(size): round(value, 3) for size, value in median["command"].items()},
        "check_wall_s": {str(size): round(value, 4) for size, value in median["check"].items()},
        "command_ms_per_added_instance": {str(k): round(v * 1000, 2) for k, v in per_added["command"].items()},
        "check_ms_per_added_instance": {str(k): round(v * 1000, 2) for k, v in per_added["check"].items()},
        "target_met": median["command"][n] <= 2.0,
    }
    if options.json:
        sys.stdout.write(json.dumps(result) + "\n")
        return
    print(f"fleet check over {n} admin endpoints: {options.real} real soklet serve, {n - options.real} hosted")
    print(f"  (medians of {options.repeat}; {os.cpu_count()} CPUs; startup of the endpoints {startup:.1f} s)")
    print(f"  {'instances':>9}  {'command wall':>12}  {'per added':>10}  {'check in-process':>16}  {'per added':>10}")
    for size in median["command"]:
        added_command = f"{per_added['command'][size] * 1000:.2f} ms" if size > 1 else "-"
        added_check = f"{per_added['check'][size] * 1000:.2f} ms" if size > 1 else "-"
        print(
            f"  {size:>9}  {median['command'][size] * 1000:>9.0f} ms  {added_command:>10}  "
            f"{median['check'][size] * 1000:>13.1f} ms  {added_check:>10}"
        )
    print(f"  target <= 2 s wall for {n}: {'met' if result['target_met'] else 'NOT met'}")


if __name__ == "__main__":
    main()
