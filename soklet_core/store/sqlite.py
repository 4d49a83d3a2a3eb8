"""The embedded store: one SQLite file (WAL, ``synchronous=FULL``), every call on the store's own worker threads.

Each worker thread keeps one connection; the event loop never touches SQLite. Writes take the database's write
lock up front (``BEGIN IMMEDIATE``) and wait for it at most ``STORE_TIMEOUT_SECONDS`` (``busy_timeout``), so a
compare-and-swap reads and writes under one lock, across threads and processes alike.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Final, TypeVar

from .errors import StoreError, StoreErrorReason
from .records import (
    HANDLE_COLUMNS,
    SCHEMA_VERSION,
    STORE_TIMEOUT_SECONDS,
    TASK_COLUMNS,
    HandleBinding,
    HandleRecord,
    TaskRecord,
    TaskStatus,
    check_limit,
    handle_from_row,
    handle_values,
    task_from_row,
    task_values,
    to_millis,
)
from .url import StoreUrl

__all__ = ["SQLITE_WORKERS", "SqliteStore"]

#: How many worker threads (and so connections) one SQLite store runs.
SQLITE_WORKERS: Final = 4

_logger = logging.getLogger("soklet.store")
_T = TypeVar("_T")

_TASKS: Final = ", ".join(TASK_COLUMNS)
_HANDLES: Final = ", ".join(HANDLE_COLUMNS)
_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS soklet_schema (version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS soklet_tasks (task_id TEXT PRIMARY KEY, partition TEXT NOT NULL, subject TEXT,"
    " tool TEXT NOT NULL, status TEXT NOT NULL, status_message TEXT, created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL, expires_at INTEGER, document TEXT NOT NULL, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS soklet_handles (handle TEXT PRIMARY KEY, tenant TEXT NOT NULL, principal TEXT,"
    " partition TEXT NOT NULL, operation TEXT NOT NULL, state TEXT NOT NULL, created_at INTEGER NOT NULL,"
    " expires_at INTEGER NOT NULL)",
)
_INDEXES: Final = (
    "CREATE INDEX IF NOT EXISTS soklet_tasks_status ON soklet_tasks (status)",
    "CREATE INDEX IF NOT EXISTS soklet_tasks_expires_at ON soklet_tasks (expires_at)",
    "CREATE INDEX IF NOT EXISTS soklet_tasks_order ON soklet_tasks (created_at, task_id)",
    "CREATE INDEX IF NOT EXISTS soklet_handles_expires_at ON soklet_handles (expires_at)",
)
# The exact binding: `IS` so that an anonymous principal (NULL) matches only NULL.
_BOUND: Final = "handle = ? AND tenant = ? AND principal IS ? AND partition = ? AND operation = ? AND expires_at > ?"


def _bound(handle: str, binding: HandleBinding, now: datetime) -> tuple[object, ...]:
    return (handle, binding.tenant, binding.principal, binding.partition, binding.operation, to_millis(now))


def _translate(error: sqlite3.Error, operation: str) -> StoreError:
    """A driver exception as a StoreError; the driver's message is dropped (it can quote stored data)."""
    _logger.warning("store %s failed: sqlite3.%s", operation, type(error).__name__)
    if isinstance(error, sqlite3.IntegrityError):
        return StoreError(StoreErrorReason.CONFLICT, operation)
    return StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: sqlite3.{type(error).__name__}")


class SqliteStore:
    """The ``DurableStore`` over one SQLite file (created 0600 in a folder made 0700 when absent)."""

    backend: Final = "sqlite"

    def __init__(self, url: StoreUrl) -> None:
        if url.backend != "sqlite":
            raise StoreError(StoreErrorReason.BAD_URL, "SqliteStore needs a sqlite URL")
        self.url = url
        self._path: Path = url.sqlite_path
        self._executor: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._opening = asyncio.Lock()

    def __repr__(self) -> str:
        return f"SqliteStore({self.url.redacted!r})"

    # -- plumbing -----------------------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This worker thread's connection, opened on its first call."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            # Only this thread uses the connection; check_same_thread=False lets close() end it after the
            # workers have stopped.
            connection = sqlite3.connect(
                self._path, timeout=STORE_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
            )
            try:
                connection.execute(f"PRAGMA busy_timeout = {int(STORE_TIMEOUT_SECONDS * 1000)}")
                connection.execute("PRAGMA journal_mode = WAL")
                connection.execute("PRAGMA synchronous = FULL")
            except sqlite3.Error:
                connection.close()
                raise
            with self._lock:
                self._connections.append(connection)
            self._local.connection = connection
        return connection

    async def _run(self, operation: str, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` with a worker thread's connection; driver errors become StoreError."""
        executor = self._executor
        if executor is None or self._closed:
            raise StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: the store is not open")

        def call() -> _T:
            try:
                return work(self._connection())
            except sqlite3.Error as error:
                raise _translate(error, operation) from None

        return await asyncio.get_running_loop().run_in_executor(executor, call)

    async def _write(self, operation: str, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction, committed before returning."""

        def transaction(connection: sqlite3.Connection) -> _T:
            connection.execute("BEGIN IMMEDIATE")
            try:
                result = work(connection)
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            return result

        return await self._run(operation, transaction)

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Make the folder (0700) and file (0600) if absent, start the workers, create the schema if absent."""
        # Requests that all open the store on first use wait for one opening.
        async with self._opening:
            await self._open()

    async def _open(self) -> None:
        if self._executor is not None:
            return
        if self._closed:
            raise StoreError(StoreErrorReason.UNAVAILABLE, "open: the store was closed")
        try:
            await asyncio.to_thread(self._create_file)
        except OSError as error:
            _logger.warning("store open failed: %s", type(error).__name__)
            raise StoreError(StoreErrorReason.UNAVAILABLE, f"open: {type(error).__name__}") from None
        self._executor = ThreadPoolExecutor(max_workers=SQLITE_WORKERS, thread_name_prefix="soklet-sqlite")
        try:
            await self._write("open", _create_schema)
        except BaseException:
            # Not closed for good: a later open() may try again (the file may be fixed, the lock released).
            await self._release()
            raise

    def _create_file(self) -> None:
        self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Created here, owner-only, before SQLite opens it (its -wal and -shm files take the same mode).
        descriptor = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.close(descriptor)

    async def close(self) -> None:
        """Stop the workers and close every connection."""
        self._closed = True
        await self._release()

    async def _release(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, True)
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()

    # -- tasks --------------------------------------------------------------------------------------------------

    async def insert_task(self, record: TaskRecord) -> None:
        """Store a new task; ``StoreError(CONFLICT)`` when its id exists."""
        values = task_values(record)
        marks = ", ".join("?" * len(TASK_COLUMNS))

        def work(connection: sqlite3.Connection) -> None:
            connection.execute(f"INSERT INTO soklet_tasks ({_TASKS}) VALUES ({marks})", values)  # noqa: S608

        await self._write("insert_task", work)

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task ``task_id``, or ``None``."""

        def work(connection: sqlite3.Connection) -> TaskRecord | None:
            row = connection.execute(
                f"SELECT {_TASKS} FROM soklet_tasks WHERE task_id = ?",  # noqa: S608
                (task_id,),
            ).fetchone()
            return None if row is None else task_from_row(row)

        return await self._run("get_task", work)

    async def replace_task(self, record: TaskRecord, *, expected_version: int) -> TaskRecord | None:
        """Compare-and-swap on ``version``; the stored record, or ``None`` when the version moved on."""
        stored = replace(record, version=expected_version + 1)
        values = task_values(stored)

        def work(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(
                "UPDATE soklet_tasks SET status = ?, status_message = ?, updated_at = ?, expires_at = ?,"
                " document = ?, version = ? WHERE task_id = ? AND version = ?",
                (values[4], values[5], values[7], values[8], values[9], values[10], values[0], expected_version),
            )
            return cursor.rowcount == 1

        return stored if await self._write("replace_task", work) else None

    async def list_tasks(
        self, *, status: TaskStatus | None = None, limit: int = 100, after: str | None = None
    ) -> list[TaskRecord]:
        """Up to ``limit`` tasks ordered by (created_at, task_id), optionally of one status, after ``after``."""
        check_limit(limit)
        clauses: list[str] = []
        params: list[object] = []
        if status is not None:
            clauses.append("status = ?")
            params.append(TaskStatus(status).value)
        if after is not None:
            clauses.append("(created_at, task_id) > (SELECT created_at, task_id FROM soklet_tasks WHERE task_id = ?)")
            params.append(after)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        params.append(limit)

        def work(connection: sqlite3.Connection) -> list[TaskRecord]:
            rows = connection.execute(
                f"SELECT {_TASKS} FROM soklet_tasks{where} ORDER BY created_at, task_id LIMIT ?",  # noqa: S608
                params,
            ).fetchall()
            return [task_from_row(row) for row in rows]

        return await self._run("list_tasks", work)

    async def count_tasks(self) -> dict[TaskStatus, int]:
        """The number of tasks in every status."""

        def work(connection: sqlite3.Connection) -> dict[TaskStatus, int]:
            counts = dict.fromkeys(TaskStatus, 0)
            for status, count in connection.execute("SELECT status, COUNT(*) FROM soklet_tasks GROUP BY status"):
                if status in TaskStatus.__members__.values():
                    counts[TaskStatus(status)] = int(count)
            return counts

        return await self._run("count_tasks", work)

    async def delete_expired_tasks(self, now: datetime) -> int:
        """Delete the tasks that expired at or before ``now``."""
        millis = to_millis(now)

        def work(connection: sqlite3.Connection) -> int:
            return connection.execute(
                "DELETE FROM soklet_tasks WHERE expires_at IS NOT NULL AND expires_at <= ?", (millis,)
            ).rowcount

        return await self._write("delete_expired_tasks", work)

    # -- handles ------------------------------------------------------------------------------------------------

    async def insert_handle(self, record: HandleRecord) -> None:
        """Store a new handle; ``StoreError(CONFLICT)`` when it exists."""
        values = handle_values(record)

        def work(connection: sqlite3.Connection) -> None:
            _insert_handle(connection, values)

        await self._write("insert_handle", work)

    async def peek_handle(self, handle: str, binding: HandleBinding, now: datetime) -> HandleRecord | None:
        """The live entry for exactly this binding, without consuming it."""
        params = _bound(handle, binding, now)

        def work(connection: sqlite3.Connection) -> HandleRecord | None:
            row = connection.execute(
                f"SELECT {_HANDLES} FROM soklet_handles WHERE {_BOUND}",  # noqa: S608
                params,
            ).fetchone()
            return None if row is None else handle_from_row(row)

        return await self._run("peek_handle", work)

    async def consume_and_replace(
        self, handle: str, binding: HandleBinding, now: datetime, replacement: HandleRecord | None
    ) -> bool:
        """Delete the live entry for exactly this binding and insert ``replacement``, in one transaction."""
        params = _bound(handle, binding, now)
        values = None if replacement is None else handle_values(replacement)

        def work(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(f"DELETE FROM soklet_handles WHERE {_BOUND}", params)  # noqa: S608
            consumed = cursor.rowcount == 1
            if consumed and values is not None:
                _insert_handle(connection, values)
            return consumed

        return await self._write("consume_and_replace", work)

    async def count_live_handles(self, now: datetime) -> int:
        """The number of handles that expire after ``now``."""
        millis = to_millis(now)

        def work(connection: sqlite3.Connection) -> int:
            row = connection.execute("SELECT COUNT(*) FROM soklet_handles WHERE expires_at > ?", (millis,)).fetchone()
            return int(row[0])

        return await self._run("count_live_handles", work)

    async def purge_expired_handles(self, now: datetime) -> int:
        """Delete the handles that expired at or before ``now``."""
        millis = to_millis(now)

        def work(connection: sqlite3.Connection) -> int:
            return connection.execute("DELETE FROM soklet_handles WHERE expires_at <= ?", (millis,)).rowcount

        return await self._write("purge_expired_handles", work)


def _insert_handle(connection: sqlite3.Connection, values: tuple[object, ...]) -> None:
    marks = ", ".join("?" * len(HANDLE_COLUMNS))
    connection.execute(f"INSERT INTO soklet_handles ({_HANDLES}) VALUES ({marks})", values)  # noqa: S608


def _create_schema(connection: sqlite3.Connection) -> None:
    for statement in _TABLES:
        connection.execute(statement)
    # Before the indexes, whose columns a table of another shape may lack.
    _check_shape(connection)
    for statement in _INDEXES:
        connection.execute(statement)
    versions = [int(row[0]) for row in connection.execute("SELECT version FROM soklet_schema")]
    if not versions:
        connection.execute("INSERT INTO soklet_schema (version) VALUES (?)", (SCHEMA_VERSION,))
    elif max(versions) > SCHEMA_VERSION:
        raise StoreError(StoreErrorReason.SCHEMA, f"schema version {max(versions)} is newer than {SCHEMA_VERSION}")


def _check_shape(connection: sqlite3.Connection) -> None:
    """Refuse tables of another shape (a column missing) as SCHEMA rather than failing on first use."""
    try:
        connection.execute(f"SELECT {_TASKS} FROM soklet_tasks LIMIT 0")  # noqa: S608
        connection.execute(f"SELECT {_HANDLES} FROM soklet_handles LIMIT 0")  # noqa: S608
    except sqlite3.OperationalError:
        raise StoreError(StoreErrorReason.SCHEMA, "a soklet table has other columns") from None
