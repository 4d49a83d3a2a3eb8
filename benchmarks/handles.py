"""Durable handle consume-and-replace per second: soklet's ``HandleRepository`` against the raw store doing the same
transaction, on SQLite and on PostgreSQL, with 1 and 8 concurrent workers.

Run: ``.venv/bin/python benchmarks/handles.py [--quick] [--duration S] [--rounds N] [--backends sqlite,postgresql]
[--json]``. PostgreSQL is a throwaway cluster started from the PostgreSQL server binaries (``tools/postgres.py``;
``bash scripts/postgres`` installs them); the SQLite files live in a private temporary folder.

Every worker owns one workflow chain: it holds a live handle and, in a loop, consumes it and stores the next state
under a fresh handle, so every operation is one committed write transaction and never contends on a row. The
contenders, each on a database of its own with the same schema (created by soklet's store), rounds interleaved
(the order alternating), best round kept; the figure is **wall-clock operations per second** (the work is bound by
the database's commits, not by the measuring process's CPU):

* **soklet** — ``HandleRepository.consume_and_replace(context, state)``: the handle's shape checked, its SHA-256
  taken as the store key, a fresh 256-bit handle minted, the next state serialized from the JSON value model, then
  the store's transaction (SQLite: the store's writer thread, ``BEGIN IMMEDIATE``, concurrent calls committed
  together; PostgreSQL: the store's pool of at most 8 connections, one ``WITH gone AS (DELETE ... RETURNING 1)
  INSERT ... SELECT ... FROM gone`` statement). Workers are asyncio tasks on one event loop, as in the server; each
  operation also builds the ``RequestContext`` the engine would hand the tool.
* **raw** — the same transaction written directly, no soklet: SQLite through ``sqlite3`` from one thread per worker
  (a connection each, the same pragmas: WAL, ``synchronous=FULL``, ``busy_timeout``), PostgreSQL through
  ``psycopg`` with one async connection per worker (autocommit, the store's one statement); the next state is
  pre-serialized text and the fresh handle ``secrets.token_urlsafe(32)`` used as the key itself (no digest).

Target (issue 13): soklet ≥ 0.8 × raw, for both backends and both worker counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tools/ (the throwaway PostgreSQL cluster) is not an installed package

from soklet_core.json import JsonNumber, JsonValue, serialize  # noqa: E402
from soklet_core.mcp import ClientCapabilities, HandleRepository, Identity, RequestContext, RequestStateMode  # noqa: E402
from soklet_core.mcp.server.durable import DEFAULT_HANDLE_LIFETIME, HANDLE_BYTES  # noqa: E402
from soklet_core.store import STORE_TIMEOUT_SECONDS, DurableStore, open_store, sqlite_url  # noqa: E402
from soklet_core.store.statements import POSTGRESQL, SQLITE, Statements  # noqa: E402
from tools.postgres import PostgresCluster  # noqa: E402

OPERATION = "order.checkout"
PARTITION = "bench"
TENANT = "default"
STATE = JsonValue.from_python({"step": "confirm", "quantity": 3, "sku": "A-100-BLUE", "note": "deliver to the dock"})
STATE_TEXT = serialize(STATE)
CAPABILITIES = ClientCapabilities.from_mapping({"elicitation": {}})
REQUEST_ID = JsonNumber.from_value(1)
LIFETIME_MS = int(DEFAULT_HANDLE_LIFETIME / timedelta(milliseconds=1))


def principal(worker: int) -> str:
    return f"user-{worker}"


def context(worker: int, handle: str | None) -> RequestContext:
    """The context the engine hands ``order.checkout`` on a retry carrying ``handle``."""
    return RequestContext(
        identity=Identity(principal(worker)),
        partition=PARTITION,
        client_capabilities=CAPABILITIES,
        protocol_version="2026-07-28",
        request_id=REQUEST_ID,
        method="tools/call",
        operation_name=OPERATION,
        request_state_mode=RequestStateMode.APPLICATION_PROTECTED,
        application_request_state=handle,
    )


@dataclass(frozen=True, slots=True)
class Measurement:
    """One window: operations done and the wall time they took."""

    operations: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.operations / self.seconds


# --- soklet ------------------------------------------------------------------------------------------------------


async def soklet_window(store: DurableStore, workers: int, duration: float) -> Measurement:
    handles = HandleRepository(store)
    heads = [await handles.issue(context(worker, None), STATE) for worker in range(workers)]
    start = asyncio.Event()

    async def run(worker: int, deadline: float) -> int:
        await start.wait()
        handle: str | None = heads[worker]
        done = 0
        while time.perf_counter() < deadline:
            handle = await handles.consume_and_replace(context(worker, handle), STATE)
            done += 1
        return done

    began = time.perf_counter()
    tasks = [asyncio.create_task(run(worker, began + duration)) for worker in range(workers)]
    start.set()
    counts = await asyncio.gather(*tasks)
    return Measurement(sum(counts), time.perf_counter() - began)


# --- raw SQLite --------------------------------------------------------------------------------------------------

# The store's own statement texts (soklet_core/store/statements.py), so that the floor is the same transaction.
_SQLITE_DELETE = Statements(SQLITE).consume_handle
_SQLITE_INSERT = Statements(SQLITE).insert_handle


def sqlite_connection(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=STORE_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
    connection.execute(f"PRAGMA busy_timeout = {int(STORE_TIMEOUT_SECONDS * 1000)}")
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    return connection


def raw_row(handle: str, worker: int, now_ms: int) -> tuple[object, ...]:
    return (handle, TENANT, principal(worker), PARTITION, OPERATION, STATE_TEXT, now_ms, now_ms + LIFETIME_MS)


def sqlite_consume(connection: sqlite3.Connection, handle: str, worker: int) -> str:
    """One consume-and-replace transaction; the fresh handle."""
    fresh = secrets.token_urlsafe(HANDLE_BYTES)
    now_ms = int(time.time() * 1000)
    connection.execute("BEGIN IMMEDIATE")
    try:
        deleted = connection.execute(
            _SQLITE_DELETE, (handle, TENANT, principal(worker), PARTITION, OPERATION, now_ms)
        ).rowcount
        if deleted != 1:
            raise RuntimeError("raw sqlite: the handle was not live")
        connection.execute(_SQLITE_INSERT, raw_row(fresh, worker, now_ms))
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    return fresh


async def raw_sqlite_async_window(path: Path, workers: int, duration: float) -> Measurement:
    """The raw transaction issued from asyncio tasks through ``asyncio.to_thread`` (sqlite3 blocks, so an asyncio
    server cannot call it on its event loop): the floor with the unavoidable thread hop, shown for reference."""
    local = threading.local()
    opened: list[sqlite3.Connection] = []

    def connection() -> sqlite3.Connection:
        found: sqlite3.Connection | None = getattr(local, "connection", None)
        if found is None:
            found = local.connection = sqlite_connection(path)
            opened.append(found)
        return found

    def consume(handle: str, worker: int) -> str:
        return sqlite_consume(connection(), handle, worker)

    def insert(worker: int) -> str:
        handle = secrets.token_urlsafe(HANDLE_BYTES)
        connection().execute(_SQLITE_INSERT, raw_row(handle, worker, int(time.time() * 1000)))
        return handle

    heads = [await asyncio.to_thread(insert, worker) for worker in range(workers)]
    start = asyncio.Event()

    async def run(worker: int, deadline: float) -> int:
        await start.wait()
        handle, done = heads[worker], 0
        while time.perf_counter() < deadline:
            handle = await asyncio.to_thread(consume, handle, worker)
            done += 1
        return done

    began = time.perf_counter()
    tasks = [asyncio.create_task(run(worker, began + duration)) for worker in range(workers)]
    start.set()
    counts = await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - began
    for each in opened:
        each.close()
    return Measurement(sum(counts), elapsed)


def raw_sqlite_window(path: Path, workers: int, duration: float) -> Measurement:
    connections = [sqlite_connection(path) for _ in range(workers)]
    heads = []
    now_ms = int(time.time() * 1000)
    for worker, connection in enumerate(connections):
        handle = secrets.token_urlsafe(HANDLE_BYTES)
        connection.execute(_SQLITE_INSERT, raw_row(handle, worker, now_ms))
        heads.append(handle)
    counts = [0] * workers
    failures: list[BaseException] = []
    gate = threading.Barrier(workers + 1)
    deadline = [0.0]

    def run(worker: int) -> None:
        handle = heads[worker]
        gate.wait()
        try:
            while time.perf_counter() < deadline[0]:
                handle = sqlite_consume(connections[worker], handle, worker)
                counts[worker] += 1
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=run, args=(worker,)) for worker in range(workers)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    deadline[0] = began + duration
    gate.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    for connection in connections:
        connection.close()
    if failures:
        raise failures[0]
    return Measurement(sum(counts), elapsed)


# --- raw PostgreSQL ----------------------------------------------------------------------------------------------

_PG_INSERT = Statements(POSTGRESQL).insert_handle
# The store's statement: one autocommit statement is one transaction; the fresh row is inserted iff one was deleted.
_PG_CONSUME_AND_REPLACE = Statements(POSTGRESQL).consume_and_replace


async def raw_postgres_window(url: str, workers: int, duration: float) -> Measurement:
    connections = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(workers)]
    heads = []
    now_ms = int(time.time() * 1000)
    for worker, connection in enumerate(connections):
        handle = secrets.token_urlsafe(HANDLE_BYTES)
        await connection.execute(_PG_INSERT, raw_row(handle, worker, now_ms))
        heads.append(handle)
    start = asyncio.Event()

    async def run(worker: int, deadline: float) -> int:
        await start.wait()
        connection, handle, done = connections[worker], heads[worker], 0
        while time.perf_counter() < deadline:
            fresh = secrets.token_urlsafe(HANDLE_BYTES)
            now = int(time.time() * 1000)
            cursor = await connection.execute(
                _PG_CONSUME_AND_REPLACE,
                (handle, TENANT, principal(worker), PARTITION, OPERATION, now, *raw_row(fresh, worker, now)),
            )
            if await cursor.fetchone() is None:
                raise RuntimeError("raw postgresql: the handle was not live")
            handle, done = fresh, done + 1
        return done

    try:
        began = time.perf_counter()
        tasks = [asyncio.create_task(run(worker, began + duration)) for worker in range(workers)]
        start.set()
        counts = await asyncio.gather(*tasks)
        return Measurement(sum(counts), time.perf_counter() - began)
    finally:
        for connection in connections:
            await connection.close()


# --- the run -----------------------------------------------------------------------------------------------------


async def prepared(url: str) -> DurableStore:
    """An opened soklet store on ``url`` (its schema created)."""
    store = open_store(url)
    await store.open()
    return store


async def measure_backend(
    backend: str, urls: dict[str, str], workers: int, duration: float, rounds: int
) -> dict[str, Measurement]:
    """The best window of each contender on ``backend``, after one unscored warm-up window each (the pool fills,
    the files and caches are hot), rounds interleaved with the order alternating."""
    store = await prepared(urls["soklet"])
    for name in urls:
        if name != "soklet":
            await (await prepared(urls[name])).close()  # the raw contenders' schema, created the same way
    contenders: dict[str, Callable[[float], Awaitable[Measurement]]] = {
        "soklet": lambda seconds: soklet_window(store, workers, seconds)
    }
    if backend == "sqlite":
        raw_path, async_path = (Path(urls[name].removeprefix("sqlite://")) for name in ("raw", "raw-async"))
        contenders["raw"] = lambda seconds: asyncio.to_thread(raw_sqlite_window, raw_path, workers, seconds)
        contenders["raw-async"] = lambda seconds: raw_sqlite_async_window(async_path, workers, seconds)
    else:
        contenders["raw"] = lambda seconds: raw_postgres_window(urls["raw"], workers, seconds)
    best: dict[str, Measurement] = {}
    try:
        for run in contenders.values():
            await run(min(duration, 1.0))
        names = list(contenders)
        for round_number in range(rounds):
            for name in names if round_number % 2 == 0 else reversed(names):
                measured = await contenders[name](duration)
                if name not in best or measured.per_second > best[name].per_second:
                    best[name] = measured
    finally:
        await store.close()
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="short windows, one round (a smoke run)")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measurement (default 3)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the best is kept (default 5)")
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated (default both)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    duration, rounds = (0.5, 1) if args.quick else (args.duration, args.rounds)
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    if not set(backends) <= {"sqlite", "postgresql"}:
        parser.error("--backends takes sqlite and/or postgresql")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="soklet-bench-") as folder:
        cluster = PostgresCluster() if "postgresql" in backends else None
        if cluster is not None:
            cluster.start()
        try:
            for backend in backends:
                for workers in (1, 8):
                    name = f"{backend}{workers}"
                    kinds = ("soklet", "raw", "raw-async") if backend == "sqlite" else ("soklet", "raw")
                    if backend == "sqlite":
                        urls = {kind: sqlite_url(Path(folder) / f"{name}-{kind}.db").text for kind in kinds}
                    else:
                        assert cluster is not None
                        urls = {
                            kind: cluster.create_database(f"bench_{name}_{kind.replace('-', '_')}") for kind in kinds
                        }
                    best = asyncio.run(measure_backend(backend, urls, workers, duration, rounds))
                    row: dict[str, Any] = {"backend": backend, "workers": workers}
                    for kind, measured in best.items():
                        row[f"{kind}_per_second"] = measured.per_second
                    row["ratio"] = best["soklet"].per_second / best["raw"].per_second
                    if "raw-async" in best:
                        row["ratio_to_raw_async"] = best["soklet"].per_second / best["raw-async"].per_second
                    rows.append(row)
        finally:
            if cluster is not None:
                cluster.stop()
    if args.json:
        print(json.dumps({"results": rows, "target_ratio": 0.8}, indent=2))
        return 0
    print(f"{'backend':<11} {'workers':>7} {'soklet/s':>10} {'raw/s':>10} {'soklet/raw':>11} {'raw-async/s':>12}")
    for row in rows:
        async_rate = f"{row['raw-async_per_second']:>12.0f}" if "raw-async_per_second" in row else f"{'-':>12}"
        print(
            f"{row['backend']:<11} {row['workers']:>7} {row['soklet_per_second']:>10.0f} "
            f"{row['raw_per_second']:>10.0f} {row['ratio']:>10.2f}x {async_rate}"
        )
    print(f"target: soklet/raw >= 0.80 ({datetime.now(UTC):%Y-%m-%d})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
