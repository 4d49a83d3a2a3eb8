"""The shared store: PostgreSQL through psycopg 3 and a bounded async connection pool.

Several soklet instances behind a load balancer share one database. Every call takes a pooled connection (waiting
at most ``STORE_TIMEOUT_SECONDS``), every statement is bounded by ``statement_timeout`` and ``lock_timeout``, and
the whole call by a deadline. Every call but the schema's creation is ONE statement on an autocommit connection, so
the statement is its own transaction and costs no ``BEGIN``/``COMMIT`` round trips. A handle's compare-and-swap is
one ``WITH gone AS (DELETE ... RETURNING 1) INSERT ... SELECT ... FROM gone``: the replacement is inserted only if
the entry was deleted, atomically, and of concurrent callers the row lock lets exactly one delete the entry.

The fleet keyring (:class:`~soklet_core.store.repository.KeyringRepository`): a change is one transaction (a
conditional insert or update of the generation row, whose row lock lets exactly one of concurrent writers pass,
then the key rows, then ``pg_notify('soklet_keyring', generation)``, delivered when it commits). Followers wait on
ONE listening connection per store, outside the pool (``LISTEN soklet_keyring``), reopened with a growing pause
when lost and probed every ``_LISTEN_PROBE_SECONDS``; while it is down (or disabled: ``listen=False``, for a pooler
in transaction mode such as PgBouncer, where ``LISTEN`` does not work) they poll every ``KEYRING_POLL_SECONDS``. A
heartbeat's ``seen_at`` is the database's ``clock_timestamp()``: one clock for the whole fleet. The rotation lock is
a session advisory lock (``pg_try_advisory_lock``) on a connection of its own held for the block: PostgreSQL
releases it when that connection ends, so also when its holder is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import AsyncConnectionPool

from .errors import StoreError, StoreErrorReason
from .keyring_records import (
    KEYRING_LISTEN_RECHECK_SECONDS,
    KEYRING_POLL_SECONDS,
    MAX_FLEET_KEYS,
    MAX_HEARTBEATS,
    Heartbeat,
    RotationRecord,
    StoredKeyring,
    check_owner,
    check_wait,
    describe_holder,
    heartbeat_from_row,
    heartbeat_values,
    key_values,
    keyring_from_rows,
    read_holder,
    rotation_from_row,
)
from .records import (
    SCHEMA_VERSION,
    STORE_TIMEOUT_SECONDS,
    HandleBinding,
    HandleRecord,
    TaskQuota,
    TaskRecord,
    TaskStatus,
    check_limit,
    from_millis,
    handle_from_row,
    handle_values,
    task_from_row,
    task_values,
    to_millis,
)
from .statements import POSTGRESQL, Statements, bound_params, replace_task_params, rotation_update_params
from .traced import traced_store
from .url import StoreUrl

__all__ = [
    "KEYRING_CHANNEL",
    "LISTENER_NAME",
    "POOL_MAX_SIZE",
    "POOL_MAX_WAITING",
    "ROTATION_LOCK_NAME",
    "PostgresStore",
]

#: The most connections one store holds.
POOL_MAX_SIZE: Final = 8
#: The most calls that may wait for a connection at once; one more is refused as unavailable.
POOL_MAX_WAITING: Final = 1024
#: The bound of one whole call: a connection wait, then its statements (each bounded on its own).
_CALL_DEADLINE_SECONDS: Final = 2 * STORE_TIMEOUT_SECONDS
#: Serializes schema creation between stores opening at once (CREATE ... IF NOT EXISTS alone races in PostgreSQL).
_SCHEMA_LOCK_KEY: Final = 0x736F6B6C6574  # "soklet"
#: The session advisory lock of the fleet's one rotation.
_ROTATION_LOCK_KEY: Final = 0x736F6B6C6574_7274  # "soklet" "rt"
#: Serializes the heartbeats' inserts, so that their count never passes ``MAX_HEARTBEATS``.
_HEARTBEAT_LOCK_KEY: Final = 0x736F6B6C6574_6862  # "soklet" "hb"
#: The channel a keyring change is notified on; the payload is the new generation.
KEYRING_CHANNEL: Final = "soklet_keyring"
#: The ``application_name`` of a store's listening connection and of its rotation lock's connection.
LISTENER_NAME: Final = "soklet-keyring-listener"
ROTATION_LOCK_NAME: Final = "soklet-rotation-lock"
#: How often the listening connection is probed (a ``SELECT 1``) when no notification came: a connection lost
#: without a word (a network partition) is found within this and the statement timeout.
_LISTEN_PROBE_SECONDS: Final = 10.0
#: The first and the longest pause before the listening connection is opened again after a loss.
_LISTEN_RETRY_SECONDS: Final = 1.0
_LISTEN_RETRY_MAX_SECONDS: Final = 30.0

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


async def _dedicated(url: str, operation: str, name: str) -> _Connection:
    """A connection of its own (outside the pool), autocommit, bounded like a pooled one, named ``name`` (its
    ``application_name``: what ``pg_stat_activity`` shows an operator)."""
    try:
        async with asyncio.timeout(_CALL_DEADLINE_SECONDS):
            connection = await psycopg.AsyncConnection.connect(
                url, autocommit=True, connect_timeout=max(2, int(STORE_TIMEOUT_SECONDS)), application_name=name
            )
            try:
                await _configure(connection)
            except BaseException:
                await connection.close()
                raise
            return connection
    except (psycopg.Error, OSError, TimeoutError) as error:
        raise _translate(error, operation) from None


async def _execute(connection: _Connection, operation: str, statement: str, params: tuple[object, ...] = ()) -> Any:
    """One statement on a dedicated connection, within the call deadline; its first row (or ``None``)."""
    try:
        async with asyncio.timeout(_CALL_DEADLINE_SECONDS):
            cursor = await connection.execute(statement, params)
            return await cursor.fetchone() if cursor.description is not None else None
    except (psycopg.Error, OSError, TimeoutError) as error:
        raise _translate(error, operation) from None


@traced_store
class PostgresStore:
    """The ``DurableStore`` and ``KeyringRepository`` over a PostgreSQL database (psycopg 3, a pool of 1 to 8
    connections, plus one listening connection while a follower waits and one while the rotation lock is held).

    ``listen=False`` never opens the listening connection: followers poll (a pooler in transaction mode)."""

    backend: Final = "postgresql"

    def __init__(self, url: StoreUrl, *, listen: bool = True) -> None:
        if url.backend != "postgresql":
            raise StoreError(StoreErrorReason.BAD_URL, "PostgresStore needs a postgresql URL")
        self.url = url
        self._pool: AsyncConnectionPool[_Connection] | None = None
        self._closed = False
        self._opening = asyncio.Lock()
        self._listen = listen
        self._listener: asyncio.Task[None] | None = None
        self._listening = False
        # Set (and replaced) on every notification and every change of the listener's state.
        self._changed = asyncio.Event()

    @property
    def listening(self) -> bool:
        """Whether the listening connection is up now (a change wakes followers at once); else they poll."""
        return self._listening

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
        """Stop the listener, close the pool and its connections."""
        self._closed = True
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
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

    # -- the fleet keyring --------------------------------------------------------------------------------------

    async def read_keyring(self) -> StoredKeyring | None:
        """The fleet keyring as of its latest committed generation (one statement: one snapshot), or ``None``."""

        async def work(connection: _Connection) -> StoredKeyring | None:
            cursor = await connection.execute(_SQL.select_keyring, (MAX_FLEET_KEYS + 1,))
            return keyring_from_rows(await cursor.fetchall())

        return await self._call("read_keyring", work)

    async def keyring_generation(self) -> int:
        """The latest committed generation, 0 when no keyring was written."""

        async def work(connection: _Connection) -> int:
            cursor = await connection.execute(_SQL.select_generation)
            row = await cursor.fetchone()
            return 0 if row is None else int(row[0])

        return await self._call("keyring_generation", work)

    async def write_keyring(self, keyring: StoredKeyring, *, expected_generation: int) -> StoredKeyring | None:
        """Compare-and-swap on the generation and every key row in one transaction, which notifies
        ``soklet_keyring`` when it commits; the stored keyring, or ``None`` when the generation moved on."""
        stored = replace(keyring, generation=expected_generation + 1)
        changed = to_millis(stored.changed_at)
        rows = [key_values(key) for key in stored.keys]

        async def work(connection: _Connection) -> bool:
            if expected_generation == 0:
                cursor = await connection.execute(_SQL.insert_generation, (stored.profile, changed))
            else:
                cursor = await connection.execute(
                    _SQL.update_generation, (stored.generation, stored.profile, changed, expected_generation)
                )
            if cursor.rowcount != 1:
                return False
            await connection.execute(_SQL.delete_keys)
            async with connection.cursor() as inserting:
                await inserting.executemany(_SQL.insert_key, rows)
            # Queued with the transaction: listeners hear it once it committed, never before.
            await connection.execute("SELECT pg_notify(%s, %s)", (KEYRING_CHANNEL, str(stored.generation)))
            return True

        return stored if await self._call("write_keyring", work, transaction=True) else None

    async def wait_for_keyring_change(self, after_generation: int, timeout_seconds: float) -> int:
        """Wait for a generation newer than ``after_generation``: woken by a notification while the listening
        connection is up (read again every ``KEYRING_LISTEN_RECHECK_SECONDS`` all the same), else polled every
        ``KEYRING_POLL_SECONDS``; the latest generation read when it returns."""
        check_wait(after_generation, timeout_seconds)
        self._start_listener()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_seconds
        while True:
            changed = self._changed  # taken before the read: whatever is notified after it sets this event
            generation = await self.keyring_generation()
            remaining = deadline - loop.time()
            if generation > after_generation or remaining <= 0:
                return generation
            pause = KEYRING_LISTEN_RECHECK_SECONDS if self._listening else KEYRING_POLL_SECONDS
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, pause)):
                    await changed.wait()

    def _start_listener(self) -> None:
        if self._listen and not self._closed and (self._listener is None or self._listener.done()):
            self._listener = asyncio.get_running_loop().create_task(self._listen_forever(), name="soklet-listen")

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _set_listening(self, listening: bool) -> None:
        if listening != self._listening:
            self._listening = listening
            self._wake()  # followers read again (a change may have passed unheard) and change their pause

    async def _listen_forever(self) -> None:
        """Hold the listening connection: reopen it after a loss, with a pause that doubles up to a bound."""
        pause = _LISTEN_RETRY_SECONDS
        while not self._closed:
            try:
                connection = await _dedicated(self.url.text, "listen", LISTENER_NAME)
                try:
                    await _execute(connection, "listen", f"LISTEN {KEYRING_CHANNEL}")
                    self._set_listening(True)
                    pause = _LISTEN_RETRY_SECONDS
                    while not self._closed:
                        try:
                            async for _ in connection.notifies(timeout=_LISTEN_PROBE_SECONDS):
                                self._wake()
                        except (psycopg.Error, OSError) as error:
                            raise _translate(error, "listen") from None
                        await _execute(connection, "listen", "SELECT 1")
                finally:
                    self._set_listening(False)
                    await connection.close()
            except StoreError:
                _logger.warning("store listening connection lost: followers poll until it is back")
            await asyncio.sleep(pause)
            pause = min(2 * pause, _LISTEN_RETRY_MAX_SECONDS)

    async def beat(self, heartbeat: Heartbeat) -> Heartbeat:
        """Record ``heartbeat`` (replacing the instance's row), ``seen_at`` from the database's clock;
        ``StoreError(QUOTA)`` for a new instance when ``MAX_HEARTBEATS`` are kept."""
        params = (*heartbeat_values(heartbeat), MAX_HEARTBEATS, heartbeat.instance)

        async def work(connection: _Connection) -> int | None:
            # Beats take turns (a transaction-scoped advisory lock): two new instances cannot both pass the count.
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_HEARTBEAT_LOCK_KEY,))
            cursor = await connection.execute(_SQL.beat, params)
            row = await cursor.fetchone()
            return None if row is None else int(row[0])

        seen = await self._call("beat", work, transaction=True)
        if seen is None:
            raise StoreError(StoreErrorReason.QUOTA, f"beat: the store keeps at most {MAX_HEARTBEATS} instances")
        return replace(heartbeat, seen_at=from_millis(seen))

    async def heartbeats(self) -> list[Heartbeat]:
        """Every instance's last heartbeat, ordered by instance name."""

        async def work(connection: _Connection) -> list[Heartbeat]:
            cursor = await connection.execute(_SQL.select_heartbeats, (MAX_HEARTBEATS,))
            return [heartbeat_from_row(row) for row in await cursor.fetchall()]

        return await self._call("heartbeats", work)

    async def forget_instance(self, instance: str) -> bool:
        """Delete an instance's heartbeat row; True iff there was one."""

        async def work(connection: _Connection) -> bool:
            return (await connection.execute(_SQL.delete_heartbeat, (instance,))).rowcount == 1

        return await self._call("forget_instance", work)

    async def read_rotation(self) -> RotationRecord | None:
        """The rotation record, or ``None``."""

        async def work(connection: _Connection) -> RotationRecord | None:
            row = await (await connection.execute(_SQL.select_rotation)).fetchone()
            return None if row is None else rotation_from_row(row)

        return await self._call("read_rotation", work)

    async def write_rotation(self, record: RotationRecord, *, expected_version: int) -> RotationRecord | None:
        """Compare-and-swap on the record's version (0: none yet); the stored record or ``None``."""
        stored, statement, params = rotation_update_params(_SQL, record, expected_version)

        async def work(connection: _Connection) -> bool:
            return (await connection.execute(statement, params)).rowcount == 1

        return stored if await self._call("write_rotation", work) else None

    async def delete_rotation(self, *, expected_version: int) -> bool:
        """Delete the rotation record iff its version is ``expected_version``."""

        async def work(connection: _Connection) -> bool:
            return (await connection.execute(_SQL.delete_rotation, (expected_version,))).rowcount == 1

        return await self._call("delete_rotation", work)

    @contextlib.asynccontextmanager
    async def rotation_lock(self, owner: str) -> AsyncIterator[None]:
        """Hold the rotation lock (a session advisory lock on a connection of its own) for the block; a held lock
        is refused at once with ``StoreError(LOCKED)`` naming its holder and since when."""
        check_owner(owner)
        if self._pool is None or self._closed:
            raise StoreError(StoreErrorReason.UNAVAILABLE, "rotation_lock: the store is not open")
        connection = await _dedicated(self.url.text, "rotation_lock", ROTATION_LOCK_NAME)
        try:
            lock = (_ROTATION_LOCK_KEY,)
            taken = await _execute(connection, "rotation_lock", "SELECT pg_try_advisory_lock(%s)", lock)
            if taken is None or taken[0] is not True:

                async def holder(pooled: _Connection) -> tuple[object, ...] | None:
                    row: tuple[object, ...] | None = await (await pooled.execute(_SQL.select_lock_holder)).fetchone()
                    return row

                row = await read_holder(lambda: self._call("rotation_lock", holder))
                raise StoreError(StoreErrorReason.LOCKED, describe_holder(row))
            mark = (owner, to_millis(datetime.now(UTC)))
            await _execute(connection, "rotation_lock", _SQL.write_lock_holder, mark)
            try:
                yield
            finally:
                with contextlib.suppress(StoreError):  # the lock goes with the connection all the same
                    await _execute(connection, "rotation_lock", _SQL.delete_lock_holder, mark)
        finally:
            await connection.close()  # ends the session: PostgreSQL releases its advisory lock


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
