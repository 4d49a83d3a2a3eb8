"""The shared store: PostgreSQL through psycopg 3 and a bounded async connection pool.

Several soklet instances behind a load balancer share one database. Every call takes a pooled connection (waiting
at most ``STORE_TIMEOUT_SECONDS``), every statement is bounded by ``statement_timeout`` and ``lock_timeout``, and
the whole call by a deadline. Every call but the schema's creation is ONE statement on an autocommit connection, so
the statement is its own transaction and costs no ``BEGIN``/``COMMIT`` round trips. A handle's compare-and-swap is
one ``WITH gone AS (DELETE ... RETURNING 1) INSERT ... SELECT ... FROM gone``: the replacement is inserted only if
the entry was deleted, atomically, and of concurrent callers the row lock lets exactly one delete the entry.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, Final, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import AsyncConnectionPool

from .errors import StoreError, StoreErrorReason
from .records import (
    SCHEMA_VERSION,
    STORE_TIMEOUT_SECONDS,
    HandleBinding,
    HandleRecord,
    TaskQuota,
    TaskRecord,
    TaskStatus,
    check_limit,
    handle_from_row,
    handle_values,
    task_from_row,
    task_values,
    to_millis,
)
from .statements import POSTGRESQL, Statements, bound_params, replace_task_params
from .url import StoreUrl

__all__ = ["POOL_MAX_SIZE", "POOL_MAX_WAITING", "PostgresStore"]

#: The most connections one store holds.
POOL_MAX_SIZE: Final = 8
#: The most calls that may wait for a connection at once; one more is refused as unavailable.
POOL_MAX_WAITING: Final = 1024
#: The bound of one whole call: a connection wait, then its statements (each bounded on its own).
_CALL_DEADLINE_SECONDS: Final = 2 * STORE_TIMEOUT_SECONDS
#: Serializes schema creation between stores opening at once (CREATE ... IF NOT EXISTS alone races in PostgreSQL).
_SCHEMA_LOCK_KEY: Final = 0x736F6B6C6574  # "soklet"

_logger = logging.getLogger("soklet.store")
_T = TypeVar("_T")
_Connection = psycopg.AsyncConnection[tuple[Any, ...]]

_SQL: Final = Statements(POSTGRESQL)
_TIMEOUT_MS: Final = int(STORE_TIMEOUT_SECONDS * 1000)


def _translate(error: BaseException, operation: str) -> StoreError:
    """A driver exception as a StoreError; the driver's message is dropped (it can quote data or the URL)."""
    _logger.warning("store %s failed: %s", operation, type(error).__name__)
    if isinstance(error, psycopg.errors.UniqueViolation):
        return StoreError(StoreErrorReason.CONFLICT, operation)
    if isinstance(error, psycopg.errors.UndefinedColumn | psycopg.errors.UndefinedTable):
        return StoreError(StoreErrorReason.SCHEMA, f"{operation}: {type(error).__name__}")
    return StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: {type(error).__name__}")


def _partition_lock(partition: str) -> int:
    """The advisory lock key of a partition's task creations: 63 bits of its SHA-256, tagged apart from the
    schema lock's key space by the digest's domain."""
    digest = hashlib.sha256(b"soklet task quota\x00" + partition.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


async def _configure(connection: _Connection) -> None:
    # Every statement and lock wait of a pooled connection is bounded.
    await connection.execute(f"SET statement_timeout = {_TIMEOUT_MS}")
    await connection.execute(f"SET lock_timeout = {_TIMEOUT_MS}")


class PostgresStore:
    """The ``DurableStore`` over a PostgreSQL database (psycopg 3, a pool of 1 to 8 connections)."""

    backend: Final = "postgresql"

    def __init__(self, url: StoreUrl) -> None:
        if url.backend != "postgresql":
            raise StoreError(StoreErrorReason.BAD_URL, "PostgresStore needs a postgresql URL")
        self.url = url
        self._pool: AsyncConnectionPool[_Connection] | None = None
        self._closed = False
        self._opening = asyncio.Lock()

    def __repr__(self) -> str:
        return f"PostgresStore({self.url.redacted!r})"

    # -- plumbing -----------------------------------------------------------------------------------------------

    async def _call(
        self, operation: str, work: Callable[[_Connection], Awaitable[_T]], *, transaction: bool = False
    ) -> _T:
        """Run ``work`` on a pooled connection within the call deadline: one statement (autocommit: its own
        transaction), or with ``transaction`` several statements in one explicit transaction."""
        pool = self._pool
        if pool is None or self._closed:
            raise StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: the store is not open")
        try:
            async with asyncio.timeout(_CALL_DEADLINE_SECONDS):
                # getconn/putconn rather than pool.connection(): its `async with connection` only commits, and an
                # autocommit connection has nothing to commit. putconn rolls back a connection left in a
                # transaction and discards one left mid-statement (a cancelled call).
                connection = await pool.getconn()
                try:
                    if not transaction:
                        return await work(connection)
                    async with connection.transaction():
                        return await work(connection)
                finally:
                    await pool.putconn(connection)
        except StoreError:
            raise
        except (psycopg.Error, OSError, TimeoutError) as error:
            raise _translate(error, operation) from None

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Start the pool (waiting at most ``STORE_TIMEOUT_SECONDS`` for a first connection), create the schema."""
        # Requests that all open the store on first use wait for one opening.
        async with self._opening:
            await self._open()

    async def _open(self) -> None:
        if self._pool is not None:
            return
        if self._closed:
            raise StoreError(StoreErrorReason.UNAVAILABLE, "open: the store was closed")
        pool: AsyncConnectionPool[_Connection] = AsyncConnectionPool(
            self.url.text,
            kwargs={"autocommit": True, "connect_timeout": max(2, int(STORE_TIMEOUT_SECONDS))},
            min_size=1,
            max_size=POOL_MAX_SIZE,
            max_waiting=POOL_MAX_WAITING,
            timeout=STORE_TIMEOUT_SECONDS,
            configure=_configure,
            open=False,
            name="soklet-store",
        )
        try:
            await pool.open(wait=True, timeout=STORE_TIMEOUT_SECONDS)
        except (psycopg.Error, OSError, TimeoutError) as error:
            await pool.close()
            raise _translate(error, "open") from None
        self._pool = pool
        try:
            await self._call("open", _create_schema, transaction=True)
        except BaseException:
            # Not closed for good: a later open() may try again (the database may be back).
            self._pool = None
            await pool.close()
            raise

    async def check(self) -> None:
        """Raise ``StoreError(UNAVAILABLE)`` unless a pooled connection answers a trivial query within the call
        deadline."""

        async def work(connection: _Connection) -> None:
            await connection.execute("SELECT 1")

        await self._call("check", work)

    async def close(self) -> None:
        """Close the pool and its connections."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    # -- tasks --------------------------------------------------------------------------------------------------

    async def insert_task(self, record: TaskRecord, *, quota: TaskQuota | None = None) -> None:
        """Store a new task; ``StoreError(CONFLICT)`` when its id exists, ``StoreError(QUOTA)`` past ``quota``."""
        values = task_values(record)
        if quota is None:

            async def work(connection: _Connection) -> None:
                await connection.execute(_SQL.insert_task, values)

            await self._call("insert_task", work)
            return
        usage = (record.partition, to_millis(record.created_at))
        lock = _partition_lock(record.partition)

        async def counted(connection: _Connection) -> None:
            # Creations in one partition take turns (a transaction-scoped advisory lock), so two instances cannot
            # both pass the count; other partitions never wait for it.
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
            cursor = await connection.execute(_SQL.partition_usage, usage)
            row = await cursor.fetchone()
            count, size = (0, 0) if row is None else (int(row[0]), int(row[1]))  # PostgreSQL reads sizes cheaply
            if not quota.admits(count, size, record.document):
                raise StoreError(StoreErrorReason.QUOTA, "insert_task")
            await connection.execute(_SQL.insert_task, values)

        await self._call("insert_task", counted, transaction=True)

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task ``task_id``, or ``None``."""

        async def work(connection: _Connection) -> TaskRecord | None:
            cursor = await connection.execute(_SQL.select_task, (task_id,))
            row = await cursor.fetchone()
            return None if row is None else task_from_row(row)

        return await self._call("get_task", work)

    async def replace_task(self, record: TaskRecord, *, expected_version: int) -> TaskRecord | None:
        """Compare-and-swap on ``version`` (a conditional UPDATE); the stored record, or ``None``."""
        stored = replace(record, version=expected_version + 1)
        params = replace_task_params(stored, expected_version)

        async def work(connection: _Connection) -> bool:
            cursor = await connection.execute(_SQL.replace_task, params)
            return cursor.rowcount == 1

        return stored if await self._call("replace_task", work) else None

    async def list_tasks(
        self, *, status: TaskStatus | None = None, limit: int = 100, after: str | None = None
    ) -> list[TaskRecord]:
        """Up to ``limit`` tasks ordered by (created_at, task_id), optionally of one status, after ``after``."""
        check_limit(limit)
        statement, params = _SQL.list_tasks(status=status, after=after, limit=limit)

        async def work(connection: _Connection) -> list[TaskRecord]:
            cursor = await connection.execute(statement, params)
            return [task_from_row(row) for row in await cursor.fetchall()]

        return await self._call("list_tasks", work)

    async def count_tasks(self) -> dict[TaskStatus, int]:
        """The number of tasks in every status."""

        async def work(connection: _Connection) -> dict[TaskStatus, int]:
            counts = dict.fromkeys(TaskStatus, 0)
            cursor = await connection.execute(_SQL.count_tasks)
            for status, count in await cursor.fetchall():
                if status in TaskStatus.__members__.values():
                    counts[TaskStatus(status)] = int(count)
            return counts

        return await self._call("count_tasks", work)

    async def delete_expired_tasks(self, now: datetime) -> int:
        """Delete the tasks that expired at or before ``now``."""
        millis = to_millis(now)

        async def work(connection: _Connection) -> int:
            cursor = await connection.execute(_SQL.delete_expired_tasks, (millis,))
            return cursor.rowcount

        return await self._call("delete_expired_tasks", work)

    # -- handles ------------------------------------------------------------------------------------------------

    async def insert_handle(self, record: HandleRecord) -> None:
        """Store a new handle; ``StoreError(CONFLICT)`` when it exists."""
        values = handle_values(record)

        async def work(connection: _Connection) -> None:
            await connection.execute(_SQL.insert_handle, values)

        await self._call("insert_handle", work)

    async def peek_handle(self, handle: str, binding: HandleBinding, now: datetime) -> HandleRecord | None:
        """The live entry for exactly this binding, without consuming it."""
        params = bound_params(handle, binding, now)

        async def work(connection: _Connection) -> HandleRecord | None:
            cursor = await connection.execute(_SQL.peek_handle, params)
            row = await cursor.fetchone()
            return None if row is None else handle_from_row(row)

        return await self._call("peek_handle", work)

    async def consume_and_replace(
        self, handle: str, binding: HandleBinding, now: datetime, replacement: HandleRecord | None
    ) -> bool:
        """Delete the live entry for exactly this binding and insert ``replacement`` in the same statement (so in
        one transaction): the replacement is inserted only if the entry was deleted."""
        params = bound_params(handle, binding, now)
        values = None if replacement is None else params + handle_values(replacement)

        async def work(connection: _Connection) -> bool:
            if values is None:
                return (await connection.execute(_SQL.consume_handle, params)).rowcount == 1
            cursor = await connection.execute(_SQL.consume_and_replace, values)
            return await cursor.fetchone() is not None

        return await self._call("consume_and_replace", work)

    async def count_live_handles(self, now: datetime) -> int:
        """The number of handles that expire after ``now``."""
        millis = to_millis(now)

        async def work(connection: _Connection) -> int:
            cursor = await connection.execute(_SQL.count_live_handles, (millis,))
            row = await cursor.fetchone()
            return 0 if row is None else int(row[0])

        return await self._call("count_live_handles", work)

    async def purge_expired_handles(self, now: datetime) -> int:
        """Delete the handles that expired at or before ``now``."""
        millis = to_millis(now)

        async def work(connection: _Connection) -> int:
            cursor = await connection.execute(_SQL.purge_expired_handles, (millis,))
            return cursor.rowcount

        return await self._call("purge_expired_handles", work)


async def _create_schema(connection: _Connection) -> None:
    await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
    for statement in _SQL.tables:
        await connection.execute(statement)
    # Before the indexes, whose columns a table of another shape may lack.
    try:
        for statement in _SQL.shape_checks:
            await connection.execute(statement)
    except psycopg.errors.UndefinedColumn:
        raise StoreError(StoreErrorReason.SCHEMA, "a soklet table has other columns") from None
    for statement in _SQL.indexes:
        await connection.execute(statement)
    cursor = await connection.execute(_SQL.select_schema_versions)
    versions = [int(row[0]) for row in await cursor.fetchall()]
    if not versions:
        await connection.execute(_SQL.insert_schema_version, (SCHEMA_VERSION,))
    elif max(versions) > SCHEMA_VERSION:
        raise StoreError(StoreErrorReason.SCHEMA, f"schema version {max(versions)} is newer than {SCHEMA_VERSION}")
