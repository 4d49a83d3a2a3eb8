"""Fleet keyring propagation: a change committed to the store until every ``soklet serve --keyring-from-store``
instance applied it, and the time of one whole store rotation.

Run: ``.venv/bin/python benchmarks/fleet_propagation.py [--quick] [--instances 5] [--changes 20]
[--backends postgresql,sqlite] [--json]``. PostgreSQL is a throwaway cluster started from the PostgreSQL server
binaries (``tools/postgres.py``; ``bash scripts/postgres`` installs them); SQLite is a file in a temporary folder.

For each backend, ``--instances`` real ``soklet serve --keyring-from-store`` processes follow one store (PostgreSQL:
``LISTEN/NOTIFY`` with a poll as the fallback; SQLite: a poll every ``KEYRING_POLL_SECONDS``). Measured, one change
at a time (``FleetKeyring.stage`` of a new key, ``--changes`` of them):

* **propagation** -- from the start of the change (read, wrap, compare-and-swap commit) until the last instance
  applied it: the moment each instance writes its ``action=follow ... generation=N`` audit line, which it writes
  right after it swapped the new keyring in (read passively from its stderr: no polling load on the instances).
  Every instance's admin snapshot (``GET /v1/keyring``) is then checked to report that generation;
* **baseline** -- in the same change, the store's own wait (``wait_for_keyring_change``) in this process: the
  bare notification (PostgreSQL) or poll (SQLite) round trip, without any instance. The change comes at a random
  moment of the waiter's poll period, as it does for the instances;
* **rotation** -- one whole ``StoreRotator`` run (stage, every member applied it, activate, applied, wait, remove,
  applied) with the instances' state lifetime at ``--lifetime``; reported with and without the wait. Its baseline
  is three heartbeat periods (``HEARTBEAT_SECONDS``): each "every member applied it" step reads the heartbeats.

Medians and worst over the changes; ratios against the baselines measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tools/ (the throwaway PostgreSQL cluster) is not an installed package

from soklet_core.files.kek_source import write_kek_file  # noqa: E402
from soklet_core.fleet.store_rotation import StoreRotator  # noqa: E402
from soklet_core.keys import ProtectionKey, ProtectionKeyring  # noqa: E402
from soklet_core.mcp.server.ops._store_keyring import HEARTBEAT_SECONDS  # noqa: E402
from soklet_core.store import FleetKeyring, open_store, sqlite_url  # noqa: E402
from soklet_core.store.keyring_records import KEYRING_POLL_SECONDS, MAX_FLEET_KEYS  # noqa: E402
from tools.postgres import PostgresCluster  # noqa: E402

TOKEN: Final = "benchPropagationToken-8d2f61c0a94e37b5"
#: Seconds to wait for an instance to start, or for every instance to apply one change (a bound, not a figure).
TIMEOUT_SECONDS: Final = 120.0
#: A pause between two changes, so that one change's work never overlaps the next one's measurement.
SETTLE_SECONDS: Final = 0.3
#: The most changes one run makes: each stages a key and the keyring holds at most MAX_FLEET_KEYS.
MAX_CHANGES: Final = MAX_FLEET_KEYS - 4


class Instance:
    """One ``soklet serve --keyring-from-store`` whose stderr is read on a thread: the moment it applied each
    generation (its audit line)."""

    def __init__(self, folder: Path, url: str, name: str, lifetime: str) -> None:
        command = [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--json", "--instance", name]
        command += ["--store", url, "--keyring-from-store", "--kek-file", str(folder / "kek")]
        command += ["--admin-port", "0", "--admin-token-file", str(folder / "token"), "--state-lifetime", lifetime]
        self.name = name
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
        )
        self.applied: dict[int, float] = {}
        self._condition = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("{"):
            self.stop()
            raise RuntimeError(f"soklet serve {name} did not start")
        self.admin_url: str = json.loads(line)["admin_url"]

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            now = time.perf_counter()
            if "action=follow" in line and " generation=" in line:
                generation = int(line.split(" generation=", 1)[1].split()[0])
                with self._condition:
                    self.applied.setdefault(generation, now)
                    self._condition.notify_all()

    def applied_at(self, generation: int) -> float:
        """When this instance applied ``generation`` (a follow of it or of a later one)."""
        with self._condition:
            found = self._condition.wait_for(lambda: max(self.applied, default=0) >= generation, TIMEOUT_SECONDS)
            if not found:
                raise RuntimeError(f"{self.name} did not apply generation {generation}")
            return min(moment for seen, moment in self.applied.items() if seen >= generation)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class Result:
    """One backend's figures (seconds)."""

    backend: str
    instances: int
    propagation: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    commit: list[float] = field(default_factory=list)
    rotation: float = 0.0
    rotation_wait: float = 0.0

    def summary(self) -> dict[str, Any]:
        median = statistics.median(self.propagation)
        base = statistics.median(self.baseline)
        without_wait = self.rotation - self.rotation_wait
        return {
            "backend": self.backend,
            "instances": self.instances,
            "changes": len(self.propagation),
            "propagation_median_ms": round(median * 1000, 1),
            "propagation_worst_ms": round(max(self.propagation) * 1000, 1),
            "baseline_median_ms": round(base * 1000, 1),
            "baseline_worst_ms": round(max(self.baseline) * 1000, 1),
            "commit_median_ms": round(statistics.median(self.commit) * 1000, 1),
            "ratio_median": round(median / base, 2),
            "rotation_s": round(self.rotation, 2),
            "rotation_wait_s": round(self.rotation_wait, 2),
            "rotation_without_wait_s": round(without_wait, 2),
            "rotation_ratio": round(without_wait / (3 * HEARTBEAT_SECONDS), 2),
        }


async def _measure(backend: str, url: str, folder: Path, instances: int, changes: int, lifetime: str) -> Result:
    kek = write_kek_file(folder / "kek")
    token = folder / "token"
    token.write_text(f"bench:{TOKEN}\n")
    token.chmod(0o600)
    # One store object both changes the keyring and waits for the change (PostgreSQL: its listening connection
    # hears the commit's NOTIFY from the server like any other; SQLite: its readers poll). Not a second store on
    # the same SQLite file: opening one checks the file through a descriptor of its own, whose close drops the
    # POSIX locks SQLite holds for the first one in this process.
    store = open_store(url)
    await store.open()
    fleet = FleetKeyring(store, kek)
    result = Result(backend, instances)
    started: list[Instance] = []
    try:
        await fleet.initialize(ProtectionKeyring(ProtectionKey.generate("base")))
        for index in range(instances):
            started.append(await asyncio.to_thread(Instance, folder, url, f"bench-{index + 1}", lifetime))
        async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            for index in range(changes):
                generation = await store.keyring_generation()
                wake = asyncio.create_task(store.wait_for_keyring_change(generation, TIMEOUT_SECONDS))
                # The waiter is listening before the change, which comes at a random moment of its poll period.
                await asyncio.sleep(0.05 + random.random() * KEYRING_POLL_SECONDS)
                begin = time.perf_counter()
                loaded = await fleet.stage(ProtectionKey.generate(f"p{index:02d}"))
                committed = time.perf_counter()
                woken = await wake
                base = time.perf_counter()
                if woken < loaded.generation:
                    raise RuntimeError("the store's wait returned before the change")
                moments = await asyncio.gather(
                    *(asyncio.to_thread(instance.applied_at, loaded.generation) for instance in started)
                )
                result.commit.append(committed - begin)
                result.baseline.append(base - begin)
                result.propagation.append(max(moments) - begin)
                for instance in started:
                    snapshot = (await client.get(instance.admin_url + "/v1/keyring")).json()
                    if snapshot["generation"] < loaded.generation:
                        raise RuntimeError(f"{instance.name}'s snapshot does not report generation {loaded.generation}")
                await asyncio.sleep(SETTLE_SECONDS)
        result.rotation, result.rotation_wait = await _rotate(fleet)
    finally:
        for instance in started:
            instance.stop()
        await store.close()
    return result


async def _rotate(fleet: FleetKeyring) -> tuple[float, float]:
    """One whole store rotation: its duration and that of its wait step (seconds)."""
    marks: dict[str, float] = {}

    def emit(event: dict[str, Any]) -> None:
        if event.get("event") == "step" and event.get("step") == "wait":
            marks["wait"] = time.perf_counter()
        if event.get("event") == "done" and event.get("step") == "wait":
            marks["waited"] = time.perf_counter()

    owner = "benchmark"
    begin = time.perf_counter()
    async with fleet.store.rotation_lock(owner):
        await StoreRotator(fleet, owner=owner, emit=emit).start(ProtectionKey.generate("rotated"))
    return time.perf_counter() - begin, marks["waited"] - marks["wait"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="5 changes, 3 instances (a smoke run)")
    parser.add_argument("--instances", type=int, default=5, help="instances following the store (default 5)")
    parser.add_argument("--changes", type=int, default=20, help=f"changes measured, at most {MAX_CHANGES}")
    parser.add_argument("--backends", default="postgresql,sqlite", help="comma-separated (default both)")
    parser.add_argument("--lifetime", default="5s", help="the instances' state lifetime: the rotation's wait")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    instances, changes = (3, 5) if args.quick else (args.instances, args.changes)
    if not 1 <= changes <= MAX_CHANGES or instances < 1:
        parser.error(f"--changes takes 1 to {MAX_CHANGES}, --instances at least 1")
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    if not backends or not set(backends) <= {"sqlite", "postgresql"}:
        parser.error("--backends takes postgresql and/or sqlite")
    load = os.getloadavg()[0]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="soklet-bench-") as temporary:
        cluster = PostgresCluster() if "postgresql" in backends else None
        if cluster is not None:
            cluster.start()
        try:
            for backend in backends:
                folder = Path(temporary) / backend
                folder.mkdir(mode=0o700)
                if backend == "sqlite":
                    url = sqlite_url(folder / "store" / "soklet.db").text
                else:
                    assert cluster is not None
                    url = cluster.create_database("bench_propagation")
                result = asyncio.run(_measure(backend, url, folder, instances, changes, args.lifetime))
                results.append(result.summary())
        finally:
            if cluster is not None:
                cluster.stop()
    facts = {
        "cpus": os.cpu_count(),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "poll_seconds": KEYRING_POLL_SECONDS,
        "heartbeat_seconds": HEARTBEAT_SECONDS,
        "lifetime": args.lifetime,
    }
    if args.json:
        print(json.dumps({"facts": facts, "results": results}, indent=2))
        return 0
    print(
        f"fleet keyring propagation: {instances} instances, {changes} changes each "
        f"({facts['cpus']} CPUs, load {facts['load_before']} before, {facts['load_after']} after)"
    )
    print(f"  {'backend':<11} {'median':>9} {'worst':>9} {'baseline':>9} {'ratio':>7} {'commit':>8}")
    for row in results:
        print(
            f"  {row['backend']:<11} {row['propagation_median_ms']:>7.1f}ms {row['propagation_worst_ms']:>7.1f}ms "
            f"{row['baseline_median_ms']:>7.1f}ms {row['ratio_median']:>6.2f}x {row['commit_median_ms']:>6.1f}ms"
        )
    print(
        "  baseline: the store's own wait in this process"
        f" (PostgreSQL: NOTIFY; SQLite: a {KEYRING_POLL_SECONDS:g} s poll)"
    )
    print(f"one store rotation, lifetime {args.lifetime} ({HEARTBEAT_SECONDS:g} s heartbeats)")
    print(f"  {'backend':<11} {'whole':>8} {'wait':>8} {'without':>8} {'ratio':>7}")
    for row in results:
        print(
            f"  {row['backend']:<11} {row['rotation_s']:>7.2f}s {row['rotation_wait_s']:>7.2f}s "
            f"{row['rotation_without_wait_s']:>7.2f}s {row['rotation_ratio']:>6.2f}x"
        )
    print("  ratio: the rotation without its wait against three heartbeat periods (its three 'applied' steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
