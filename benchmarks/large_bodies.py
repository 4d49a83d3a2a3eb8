"""Large bodies in a real server: peak memory of a 10 MiB body of distinct decimals, worker CPU of a refused one.

Run: ``.venv/bin/python benchmarks/large_bodies.py [--quick] [--tree PATH ...] [--json]``.

``soklet serve --dev-key`` runs as its own process, started from this checkout and from each ``--tree`` (another
checkout, e.g. ``git worktree add /tmp/base HEAD~3``: its server runs its own code), so two commits are compared in
the same run on the same machine.

* **Peak memory**: a fresh server per sample; the growth of ``VmHWM`` over the idle ``VmRSS``
  (``/proc/PID/status``) for one valid ``tools/call`` of ``catalog.continue`` whose ``arguments.rows`` are
  1.4 million distinct decimals (10 MiB; the costliest value model per byte), as a multiple of the body.
* **Refusal CPU**: a body of more than ``MAX_NODES`` values (``[0,0,...]``, 10 MiB) posted to one server, one at
  a time; the server process's CPU time (``utime + stime``, ``/proc/PID/stat``) from just before the post to its
  400 answer: the worker thread's parse and refusal plus the HTTP read. Baseline in the same run: ``json.loads``
  of the same bytes in this process (the C parser alone), for the machine's speed at the time.

Median and range over the samples (the machine is shared: ratios move, medians less).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.server_under_load import (  # noqa: E402
    distinct_decimals,
    post_once,
    server,
    status_kib,
    too_many_values,
)

TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_multiple(tree: Path, body: bytes) -> float:
    with server(tree) as (process, port):
        idle = status_kib(process.pid, "VmRSS")
        status = post_once(port, body)
        if status != 200:
            raise SystemExit(f"the valid body got {status}")
        growth = status_kib(process.pid, "VmHWM") - idle
    return growth * 1024 / len(body)


def refusal_cpu(tree: Path, body: bytes, samples: int) -> list[float]:
    times: list[float] = []
    with server(tree) as (process, port):
        for _ in range(samples):
            before = process_cpu(process.pid)
            status = post_once(port, body)
            if status != 400:
                raise SystemExit(f"the too-many-values body got {status}")
            times.append(process_cpu(process.pid) - before)
    return times


def loads_cpu(body: bytes, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        json.loads(body)
        best = min(best, time.process_time() - start)
    return best


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--tree", action="append", type=Path, default=[], help="another checkout to compare")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    options = parser.parse_args()
    samples = 2 if options.quick else 5
    valid, refused = distinct_decimals(1), too_many_values()
    report: dict[str, Any] = {"body_bytes": {"valid": len(valid), "refused": len(refused)}, "trees": {}}
    loads: list[float] = []
    trees = [ROOT, *(path.resolve() for path in options.tree)]
    results: dict[Path, dict[str, list[float]]] = {tree: {"peak": [], "cpu": []} for tree in trees}
    # Interleaved, so that a busy spell of the machine touches every tree alike.
    for _ in range(samples):
        for tree in trees:
            results[tree]["peak"].append(peak_multiple(tree, valid))
            results[tree]["cpu"].extend(refusal_cpu(tree, refused, 1))
        loads.append(loads_cpu(refused, 1))
    loads_median = statistics.median(loads)
    report["json_loads_refused_body_cpu_s"] = spread(loads)
    for tree in trees:
        cpu = results[tree]["cpu"]
        report["trees"][str(tree)] = {
            "peak_over_body": spread(results[tree]["peak"]),
            "refusal_cpu_s": spread(cpu),
            "refusal_over_json_loads": statistics.median(cpu) / loads_median,
        }
    if options.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{samples} samples per tree; json.loads of the refused body {loads_median * 1000:.0f} ms CPU (median)")
    for tree, item in report["trees"].items():
        peak, cpu = item["peak_over_body"], item["refusal_cpu_s"]
        print(f"{tree}:")
        print(
            f"  peak memory, 10 MiB distinct decimals: {peak['median']:5.1f}x the body"
            f" ({peak['min']:.1f}-{peak['max']:.1f})"
        )
        print(
            f"  refused too-many-values body, server CPU: {cpu['median']:5.2f} s ({cpu['min']:.2f}-{cpu['max']:.2f})"
            f" = {item['refusal_over_json_loads']:.1f}x json.loads"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
