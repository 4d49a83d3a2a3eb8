"""The embedded store: one SQLite file (WAL, ``synchronous=FULL``), every call on the store's own threads.

The event loop never touches SQLite. Reads run on a small pool of reader threads, one connection each. Every write
goes to the store's one writer thread and its own connection, through a bounded queue: the writer takes every
write queued so far (at most :data:`SQLITE_MAX_BATCH`), runs them in one ``BEGIN IMMEDIATE`` transaction with a
``SAVEPOINT`` per call (a failed call rolls back only its own changes and gets its own error) and commits once:
concurrent writers share one fsync (group commit). No caller hears of its write before that ``COMMIT`` returned,
and a failed ``COMMIT`` fails every call of the batch, so durability is that of one transaction per call. The write
lock is taken up front and waited for at most ``STORE_TIMEOUT_SECONDS`` (``busy_timeout``), so a compare-and-swap
reads and writes under one lock, across stores and processes alike.

A file removed or replaced under a running store (``rm``, a restore that renamed another file over it) would take
every later write with it while SQLite kept answering from the unlinked inode. The store remembers the device and
inode of the file it opened (:class:`_FileGuard`) and compares them with what the path names now: after every
committed batch in the writer thread (before any caller hears of it) and before every read in a reader thread,
one ``stat`` each. From the first mismatch on, the store is lost until the process restarts: every call fails
``StoreError(UNAVAILABLE)``, and one ERROR line names the file.

The fleet keyring (:class:`~soklet_core.store.repository.KeyringRepository`): a change is one write of the writer
(its compare-and-swap on the generation and the key rows in one ``BEGIN IMMEDIATE`` transaction); followers poll
the generation every ``KEYRING_POLL_SECONDS`` (SQLite has no notifications). A heartbeat's ``seen_at`` is SQLite's
clock, which is this process's clock: on one host every instance reads the same clock. The rotation lock is an
exclusive ``flock`` on ``<file>.rotation-lock`` beside the database (0600), taken without waiting and released by
the OS when its holder exits or dies, plus a row naming the holder and since when.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import queue
import sqlite3
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

from soklet_core.files import KeyringFileError
from soklet_core.files.secret_file import check_folders, is_mode_secure, is_trusted_owner

from .errors import StoreError, StoreErrorReason
from .keyring_records import (
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
from .statements import SQLITE, Statements, bound_params, replace_task_params, rotation_update_params
from .traced import traced_store
from .url import StoreUrl

__all__ = ["SQLITE_MAX_BATCH", "SQLITE_MAX_QUEUED_WRITES", "SQLITE_READERS", "SQLITE_USAGE_ENTRIES", "SqliteStore"]

#: How many reader threads (and so read connections) one SQLite store runs; writes have one thread of their own.
SQLITE_READERS: Final = 3
#: The most writes the writer commits in one transaction.
SQLITE_MAX_BATCH: Final = 64
#: The most writes that may wait for the writer at once; one more is refused as unavailable.
SQLITE_MAX_QUEUED_WRITES: Final = 1024

#: The most partitions whose task usage the writer remembers at once; past it the memory starts afresh.
SQLITE_USAGE_ENTRIES: Final = 4096

#: The pause between two tries to switch a fresh file to WAL (on a worker thread, never the event loop).
_WAL_RETRY_SECONDS: Final = 0.01

_logger = logging.getLogger("soklet.store")
_T = TypeVar("_T")

_SQL: Final = Statements(SQLITE)


def _translate(error: sqlite3.Error, operation: str) -> StoreError:
    """A driver exception as a StoreError; the driver's message is dropped (it can quote stored data)."""
    _logger.warning("store %s failed: sqlite3.%s", operation, type(error).__name__)
    if isinstance(error, sqlite3.IntegrityError):
        return StoreError(StoreErrorReason.CONFLICT, operation)
    return StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: sqlite3.{type(error).__name__}")


def _connect(path: Path) -> sqlite3.Connection:
    """A connection with the store's pragmas: bounded lock waits, WAL, an fsync on every commit."""
    # check_same_thread=False lets close() end a reader's connection after its thread stopped; each connection
    # is used by one thread only.
    connection = sqlite3.connect(path, timeout=STORE_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(STORE_TIMEOUT_SECONDS * 1000)}")
        _use_wal(connection)
        connection.execute("PRAGMA synchronous = FULL")
    except sqlite3.Error:
        connection.close()
        raise
    return connection


def _use_wal(connection: sqlite3.Connection) -> None:
    """Switch the file to WAL (it stays so). While other connections switch a fresh file at once, SQLite may answer
    busy at once, without its busy handler: try again, briefly, within the store's timeout."""
    deadline = time.monotonic() + STORE_TIMEOUT_SECONDS
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(_WAL_RETRY_SECONDS)


class _FileGuard:
    """The identity (device, inode) of the store's file as opened, checked against what its path names now."""

    __slots__ = ("_identity", "_lock", "_lost", "_path")

    def __init__(self, path: Path, identity: tuple[int, int]) -> None:
        self._path = path
        self._identity = identity
        self._lock = threading.Lock()
        self._lost = False

    @property
    def lost(self) -> bool:
        """Whether the file was found removed or replaced (for good: only a restart opens the new file)."""
        return self._lost

    def check(self, operation: str) -> None:
        """Raise ``StoreError(UNAVAILABLE)`` when the file is no longer the one opened. One ``stat`` of the path
        (constant work, on the store's own threads only)."""
        if not self._lost:
            try:
                status = os.stat(self._path)
            except FileNotFoundError:
                self._lose("removed")
            except OSError as error:  # the folder unreadable for a moment: this call fails, the store is not lost
                raise StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: {type(error).__name__}") from None
            else:
                if (status.st_dev, status.st_ino) != self._identity:
                    self._lose("replaced")
        if self._lost:
            raise StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: the store file was removed or replaced")

    def _lose(self, how: str) -> None:
        with self._lock:
            if self._lost:
                return
            self._lost = True
        _logger.error(
            "store file %s was %s while in use: every write is refused until soklet is restarted", self._path, how
        )


#: The suffix of the rotation lock's file beside the database.
_ROTATION_LOCK_SUFFIX: Final = ".rotation-lock"
#: The files SQLite keeps beside the database (write-ahead log, shared memory): they hold its data too.
_COMPANIONS: Final = ("-wal", "-shm")


def _insecure(detail: str) -> StoreError:
    return StoreError(StoreErrorReason.INSECURE, detail)


def _check_secret(status: os.stat_result, name: str) -> None:
    """The keyring files' rules for one of the store's files (its status read from an opened descriptor or the
    path): a regular file, this user's or root's, owner-only."""
    if not stat.S_ISREG(status.st_mode):
        raise _insecure(f"{name} is not a regular file")
    if not is_trusted_owner(status.st_uid):
        raise _insecure(f"{name} belongs to uid {status.st_uid}")
    if not is_mode_secure(status.st_mode):
        raise _insecure(f"{name} has mode {stat.S_IMODE(status.st_mode):04o}; chmod 600 it")


#: Serializes the creation of a store's file within the process (see :func:`_file_identity`).
_CREATING: Final = threading.Lock()


def _file_identity(path: Path) -> tuple[int, int]:
    """Create the store's file owner-only if absent (before SQLite opens it: its -wal and -shm files take the same
    mode), refuse it (``StoreError(INSECURE)``) when another user could read or change it, as a keyring file is
    refused (:mod:`soklet_core.files.secret_file`), and return its (device, inode).

    An existing file is only ``lstat``-ed, never opened: closing any descriptor of a file drops every POSIX lock
    this process holds on it, so opening it here would silently release the locks of another store (or SQLite
    connection) of this process on the same file, and concurrent writers would then corrupt it. A new file is
    created exclusively under a process-wide lock, so no SQLite connection of this process holds it yet.
    """
    try:
        check_folders(path)
    except KeyringFileError as error:
        raise _insecure(error.detail or error.reason.value) from None
    with _CREATING:
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            status = _create(path)
    _check_secret(status, str(path))
    for suffix in _COMPANIONS:
        companion = Path(f"{path}{suffix}")
        try:
            _check_secret(os.lstat(companion), str(companion))
        except FileNotFoundError:
            continue
    return status.st_dev, status.st_ino


def _create(path: Path) -> os.stat_result:
    """Create ``path`` owner-only and empty; the status of what the path names when another process won."""
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return os.lstat(path)
    try:
        return os.fstat(descriptor)
    finally:
        os.close(descriptor)


class _Usage:
    """What each partition holds of live tasks (count, document bytes), as the writer thread last counted it, so a
    creation under a quota does not re-read every document of its partition (SQLite reads a text's whole content to
    measure it). Used by the writer thread only.

    An entry is exact while nothing else changed the file: the writer adds its own inserts and document size
    changes, a purge or a lost batch forgets everything, a commit by another connection (``PRAGMA data_version``
    moves) forgets everything, and an entry is counted again once its earliest expiry has passed."""

    __slots__ = ("_entries", "_version")

    def __init__(self) -> None:
        # partition -> [tasks, bytes, earliest expiry in epoch ms or -1 for none]
        self._entries: dict[str, list[int]] = {}
        self._version: object = None

    def clear(self) -> None:
        """Forget every count (the next creation in each partition counts again)."""
        self._entries.clear()

    def counted(self, connection: sqlite3.Connection, partition: str, now: int) -> tuple[int, int]:
        """The partition's (tasks, bytes) not expired at ``now``: remembered, or counted now."""
        version = connection.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self._entries.clear()
            self._version = version
        entry = self._entries.get(partition)
        if entry is None or 0 <= entry[2] <= now:
            count, size, earliest = connection.execute(_SQL.partition_usage, (partition, now)).fetchone()
            if len(self._entries) >= SQLITE_USAGE_ENTRIES:
                self._entries.clear()
            entry = [int(count), int(size), -1 if earliest is None else int(earliest)]
            self._entries[partition] = entry
        return entry[0], entry[1]

    def added(self, partition: str, size: int, expires: int | None) -> None:
        """One task of ``size`` document bytes stored in ``partition`` (expiring at ``expires``)."""
        entry = self._entries.get(partition)
        if entry is None:
            return
        entry[0] += 1
        entry[1] += size
        if expires is not None and (entry[2] < 0 or expires < entry[2]):
            entry[2] = expires

    def tracks(self, partition: str) -> bool:
        """Whether ``partition`` has a remembered count (a document size change must then be added to it)."""
        return partition in self._entries

    def resized(self, partition: str, delta: int) -> None:
        """A document of ``partition`` grew (or shrank) by ``delta`` bytes."""
        entry = self._entries.get(partition)
        if entry is not None:
            entry[1] += delta


def _byte_length(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


class _Write:
    """One queued write: its work, and where its outcome goes (a future of the caller's event loop)."""

    __slots__ = ("future", "loop", "operation", "outcome", "work")

    def __init__(
        self,
        operation: str,
        work: Callable[[sqlite3.Connection], Any],
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
    ) -> None:
        self.operation = operation
        self.work = work
        self.loop = loop
        self.future = future
        self.outcome: tuple[bool, Any] = (False, None)


def _settle(writes: list[_Write]) -> None:
    """On the callers' loop: hand each write its outcome (a caller that stopped waiting is skipped)."""
    for write in writes:
        if write.future.done():
            continue
        succeeded, value = write.outcome
        if succeeded:
            write.future.set_result(value)
        else:
            write.future.set_exception(value)


class _Writer:
    """The store's one writer thread: takes queued writes in batches and commits each batch once."""

    def __init__(self, path: Path, guard: _FileGuard, usage: _Usage) -> None:
        self._path = path
        self._guard = guard
        self._usage = usage
        self._queue: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        # Guards `_stopping` together with the queue, so that no write is queued behind the stop mark.
        self._lock = threading.Lock()
        self._stopping = False
        self._connection: sqlite3.Connection | None = None
        self._thread = threading.Thread(target=self._serve, name="soklet-sqlite-writer", daemon=True)
        self._thread.start()

    def submit(self, operation: str, work: Callable[[sqlite3.Connection], _T]) -> asyncio.Future[_T]:
        """Queue ``work``; the future resolves on the running loop once its batch committed (or failed)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        with self._lock:
            if self._stopping:
                raise StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: the store is not open")
            if self._queue.qsize() >= SQLITE_MAX_QUEUED_WRITES:
                raise StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: too many writes waiting")
            self._queue.put(_Write(operation, work, loop, future))
        return future

    def stop(self) -> None:
        """Let the writer finish what was queued, then end it and its connection (blocks: call off the loop)."""
        with self._lock:
            if not self._stopping:
                self._stopping = True
                self._queue.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            stop = False
            while len(batch) < SQLITE_MAX_BATCH:
                try:
                    following = self._queue.get_nowait()
                except queue.Empty:
                    break
                if following is None:
                    stop = True
                    break
                batch.append(following)
            try:
                self._commit(batch)
            except Exception as error:  # never leave a caller waiting on a writer that died
                _logger.warning("store writer failed: %s", type(error).__name__)
                self._fail(batch, sqlite3.OperationalError(type(error).__name__))
            if stop:
                break
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _commit(self, batch: list[_Write]) -> None:
        if self._guard.lost:
            self._refuse(batch)
            return
        try:
            if self._connection is None:
                self._connection = _connect(self._path)
            connection = self._connection
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            self._fail(batch, error)
            return
        try:
            if len(batch) == 1:
                self._run_alone(connection, batch[0])
            else:
                self._run_batch(connection, batch)
            if connection.in_transaction:
                connection.execute("COMMIT")
        except sqlite3.Error as error:
            # The batch's transaction was lost (I/O error, a failed COMMIT): none of its writes is durable.
            if connection.in_transaction:
                try:
                    connection.execute("ROLLBACK")
                except sqlite3.Error:
                    _logger.warning("store rollback failed after a failed commit")
            self._fail(batch, error)
            return
        try:
            # Committed to the file the store opened: no caller hears of it unless that file is still the store's.
            self._guard.check("commit")
        except StoreError:
            self._refuse(batch)
            return
        self._hand_back(batch)

    def _refuse(self, batch: list[_Write]) -> None:
        """Fail every write of ``batch``: the store's file is gone, what it commits would be lost."""
        self._usage.clear()  # counted with writes that now never happened
        for write in batch:
            write.outcome = (False, StoreError(StoreErrorReason.UNAVAILABLE, f"{write.operation}: the store is lost"))
        self._hand_back(batch)

    @staticmethod
    def _run_alone(connection: sqlite3.Connection, write: _Write) -> None:
        """One write: the transaction is its own, so a failure rolls it back whole."""
        try:
            write.outcome = (True, write.work(connection))
            return
        except sqlite3.Error as error:
            write.outcome = (False, _translate(error, write.operation))
        except Exception as error:  # the caller's own error (StoreError), handed back
            write.outcome = (False, error)
        if connection.in_transaction:
            connection.execute("ROLLBACK")

    @staticmethod
    def _run_batch(connection: sqlite3.Connection, batch: list[_Write]) -> None:
        """Several writes: a savepoint each, so a failed write rolls back only its own changes."""
        for write in batch:
            connection.execute("SAVEPOINT soklet_write")
            try:
                write.outcome = (True, write.work(connection))
            except sqlite3.Error as error:
                write.outcome = (False, _translate(error, write.operation))
            except Exception as error:  # the caller's own error (StoreError), handed back
                write.outcome = (False, error)
            else:
                connection.execute("RELEASE soklet_write")
                continue
            if not connection.in_transaction:
                # SQLite ended the whole transaction (a full disk, an I/O error): the earlier writes are lost too.
                raise sqlite3.OperationalError("the batch's transaction was rolled back")
            connection.execute("ROLLBACK TO soklet_write")
            connection.execute("RELEASE soklet_write")

    def _fail(self, batch: list[_Write], error: sqlite3.Error) -> None:
        self._usage.clear()  # the batch's writes were rolled back: their counts with them
        for write in batch:
            write.outcome = (False, _translate(error, write.operation))
        self._hand_back(batch)

    @staticmethod
    def _hand_back(batch: list[_Write]) -> None:
        """One wake-up per event loop for the whole batch."""
        by_loop: dict[asyncio.AbstractEventLoop, list[_Write]] = {}
        for write in batch:
            by_loop.setdefault(write.loop, []).append(write)
        for loop, writes in by_loop.items():
            # A loop that closed while its write ran has nobody waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, writes)


@traced_store
class SqliteStore:
    """The ``DurableStore`` over one SQLite file (created 0600 in a folder made 0700 when absent).

    The file and its folders are held to the keyring files' rules when the store opens: a database (or its -wal or
    -shm file) that group or others may access, that another user owns, or below a folder another user could
    change, is refused with ``StoreError(INSECURE)``."""

    backend: Final = "sqlite"

    def __init__(self, url: StoreUrl) -> None:
        if url.backend != "sqlite":
            raise StoreError(StoreErrorReason.BAD_URL, "SqliteStore needs a sqlite URL")
        self.url = url
        self._path: Path = url.sqlite_path
        self._readers: ThreadPoolExecutor | None = None
        self._writer: _Writer | None = None
        self._guard: _FileGuard | None = None
        self._usage = _Usage()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._opening = asyncio.Lock()

    def __repr__(self) -> str:
        return f"SqliteStore({self.url.redacted!r})"

    # -- plumbing -----------------------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This reader thread's connection, opened on its first call."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = _connect(self._path)
            with self._lock:
                self._connections.append(connection)
            self._local.connection = connection
        return connection

    async def _run(self, operation: str, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run the read ``work`` with a reader thread's connection; driver errors become StoreError."""
        readers = self._readers
        if readers is None or self._closed:
            raise StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: the store is not open")

        guard = self._guard

        def call() -> _T:
            if guard is not None:
                guard.check(operation)  # never an answer read from a file that is no longer the store
            try:
                return work(self._connection())
            except sqlite3.Error as error:
                raise _translate(error, operation) from None

        return await asyncio.get_running_loop().run_in_executor(readers, call)

    async def _write(self, operation: str, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` on the writer in a ``BEGIN IMMEDIATE`` transaction, committed before returning."""
        writer = self._writer
        if writer is None or self._closed:
            raise StoreError(StoreErrorReason.UNAVAILABLE, f"{operation}: the store is not open")
        return await writer.submit(operation, work)

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Make the folder (0700) and file (0600) if absent, start the threads, create the schema if absent."""
        # Requests that all open the store on first use wait for one opening.
        async with self._opening:
            await self._open()

    async def _open(self) -> None:
        if self._writer is not None:
            return
        if self._closed:
            raise StoreError(StoreErrorReason.UNAVAILABLE, "open: the store was closed")
        try:
            identity = await asyncio.to_thread(self._create_file)
        except OSError as error:
            _logger.warning("store open failed: %s", type(error).__name__)
            raise StoreError(StoreErrorReason.UNAVAILABLE, f"open: {type(error).__name__}") from None
        self._guard = _FileGuard(self._path, identity)
        self._readers = ThreadPoolExecutor(max_workers=SQLITE_READERS, thread_name_prefix="soklet-sqlite")
        self._usage.clear()
        self._writer = _Writer(self._path, self._guard, self._usage)
        try:
            await self._write("open", _create_schema)
        except BaseException:
            # Not closed for good: a later open() may try again (the file may be fixed, the lock released).
            await self._release()
            raise

    @property
    def file_lost(self) -> bool:
        """Whether the store's file was found removed or replaced while open (for good: only a restart opens the
        new file). A readiness probe tells this from an outage: a lost file needs a restart, an outage does not."""
        guard = self._guard
        return guard is not None and guard.lost

    def _create_file(self) -> tuple[int, int]:
        self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return _file_identity(self._path)

    async def check(self) -> None:
        """Raise ``StoreError(UNAVAILABLE)`` unless the store is open, its file is still the one it opened, and a
        reader answers a trivial query within ``STORE_TIMEOUT_SECONDS``."""
        await self._run("check", _probe)

    async def close(self) -> None:
        """Finish the queued writes, stop the threads and close every connection."""
        self._closed = True
        await self._release()

    async def _release(self) -> None:
        readers, self._readers = self._readers, None
        writer, self._writer = self._writer, None
        if writer is not None:
            await asyncio.to_thread(writer.stop)
        if readers is not None:
            await asyncio.to_thread(readers.shutdown, True)
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()

    # -- tasks --------------------------------------------------------------------------------------------------

    async def insert_task(self, record: TaskRecord, *, quota: TaskQuota | None = None) -> None:
        """Store a new task; ``StoreError(CONFLICT)`` when its id exists, ``StoreError(QUOTA)`` past ``quota``."""
        values = task_values(record)
        partition, now = record.partition, to_millis(record.created_at)
        expires = None if record.expires_at is None else to_millis(record.expires_at)

        def work(connection: sqlite3.Connection) -> None:
            if quota is not None:
                # Counted under the writer's lock, in the insert's transaction: no other write comes between.
                count, size = self._usage.counted(connection, partition, now)
                if not quota.admits(count, size, record.document):
                    raise StoreError(StoreErrorReason.QUOTA, "insert_task")
            connection.execute(_SQL.insert_task, values)
            self._usage.added(partition, _byte_length(record.document), expires)

        await self._write("insert_task", work)

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task ``task_id``, or ``None``."""

        def work(connection: sqlite3.Connection) -> TaskRecord | None:
            row = connection.execute(_SQL.select_task, (task_id,)).fetchone()
            return None if row is None else task_from_row(row)

        return await self._run("get_task", work)

    async def replace_task(self, record: TaskRecord, *, expected_version: int) -> TaskRecord | None:
        """Compare-and-swap on ``version``; the stored record, or ``None`` when the version moved on."""
        stored = replace(record, version=expected_version + 1)
        params = replace_task_params(stored, expected_version)

        def work(connection: sqlite3.Connection) -> bool:
            before = None
            if self._usage.tracks(record.partition):  # one row's document, to keep the partition's count exact
                row = connection.execute(_SQL.document_bytes, (record.task_id,)).fetchone()
                before = None if row is None else int(row[0])
            cursor = connection.execute(_SQL.replace_task, params)
            if cursor.rowcount != 1:
                return False
            if before is not None:
                self._usage.resized(record.partition, _byte_length(record.document) - before)
            return True

        return stored if await self._write("replace_task", work) else None

    async def list_tasks(
        self, *, status: TaskStatus | None = None, limit: int = 100, after: str | None = None
    ) -> list[TaskRecord]:
        """Up to ``limit`` tasks ordered by (created_at, task_id), optionally of one status, after ``after``."""
        check_limit(limit)
        statement, params = _SQL.list_tasks(status=status, after=after, limit=limit)

        def work(connection: sqlite3.Connection) -> list[TaskRecord]:
            rows = connection.execute(statement, params).fetchall()
            return [task_from_row(row) for row in rows]

        return await self._run("list_tasks", work)

    async def count_tasks(self) -> dict[TaskStatus, int]:
        """The number of tasks in every status."""

        def work(connection: sqlite3.Connection) -> dict[TaskStatus, int]:
            counts = dict.fromkeys(TaskStatus, 0)
            for status, count in connection.execute(_SQL.count_tasks):
                if status in TaskStatus.__members__.values():
                    counts[TaskStatus(status)] = int(count)
            return counts

        return await self._run("count_tasks", work)

    async def delete_expired_tasks(self, now: datetime) -> int:
        """Delete the tasks that expired at or before ``now``."""
        millis = to_millis(now)

        def work(connection: sqlite3.Connection) -> int:
            deleted: int = connection.execute(_SQL.delete_expired_tasks, (millis,)).rowcount
            if deleted:
                self._usage.clear()
            return deleted

        return await self._write("delete_expired_tasks", work)

    # -- handles ------------------------------------------------------------------------------------------------

    async def insert_handle(self, record: HandleRecord) -> None:
        """Store a new handle; ``StoreError(CONFLICT)`` when it exists."""
        values = handle_values(record)

        def work(connection: sqlite3.Connection) -> None:
            connection.execute(_SQL.insert_handle, values)

        await self._write("insert_handle", work)

    async def peek_handle(self, handle: str, binding: HandleBinding, now: datetime) -> HandleRecord | None:
        """The live entry for exactly this binding, without consuming it."""
        params = bound_params(handle, binding, now)

        def work(connection: sqlite3.Connection) -> HandleRecord | None:
            row = connection.execute(_SQL.peek_handle, params).fetchone()
            return None if row is None else handle_from_row(row)

        return await self._run("peek_handle", work)

    async def consume_and_replace(
        self, handle: str, binding: HandleBinding, now: datetime, replacement: HandleRecord | None
    ) -> bool:
        """Delete the live entry for exactly this binding and insert ``replacement``, in one transaction."""
        params = bound_params(handle, binding, now)
        values = None if replacement is None else handle_values(replacement)

        def work(connection: sqlite3.Connection) -> bool:
            consumed = connection.execute(_SQL.consume_handle, params).rowcount == 1
            if consumed and values is not None:
                connection.execute(_SQL.insert_handle, values)
            return consumed

        return await self._write("consume_and_replace", work)

    async def count_live_handles(self, now: datetime) -> int:
        """The number of handles that expire after ``now``."""
        millis = to_millis(now)

        def work(connection: sqlite3.Connection) -> int:
            row = connection.execute(_SQL.count_live_handles, (millis,)).fetchone()
            return int(row[0])

        return await self._run("count_live_handles", work)

    async def purge_expired_handles(self, now: datetime) -> int:
        """Delete the handles that expired at or before ``now``."""
        millis = to_millis(now)

        def work(connection: sqlite3.Connection) -> int:
            return connection.execute(_SQL.purge_expired_handles, (millis,)).rowcount

        return await self._write("purge_expired_handles", work)

    # -- the fleet keyring --------------------------------------------------------------------------------------

    async def read_keyring(self) -> StoredKeyring | None:
        """The fleet keyring as of its latest committed generation (one statement: one snapshot), or ``None``."""

        def work(connection: sqlite3.Connection) -> StoredKeyring | None:
            rows = connection.execute(_SQL.select_keyring, (MAX_FLEET_KEYS + 1,)).fetchall()
            return keyring_from_rows(rows)

        return await self._run("read_keyring", work)

    async def keyring_generation(self) -> int:
        """The latest committed generation, 0 when no keyring was written."""

        def work(connection: sqlite3.Connection) -> int:
            row = connection.execute(_SQL.select_generation).fetchone()
            return 0 if row is None else int(row[0])

        return await self._run("keyring_generation", work)

    async def write_keyring(self, keyring: StoredKeyring, *, expected_generation: int) -> StoredKeyring | None:
        """Compare-and-swap on the generation and every key row, in one ``BEGIN IMMEDIATE`` transaction of the
        writer; the stored keyring, or ``None`` when the generation moved on."""
        stored = replace(keyring, generation=expected_generation + 1)
        changed = to_millis(stored.changed_at)
        rows = [key_values(key) for key in stored.keys]

        def work(connection: sqlite3.Connection) -> bool:
            if expected_generation == 0:
                cursor = connection.execute(_SQL.insert_generation, (stored.profile, changed))
            else:
                cursor = connection.execute(
                    _SQL.update_generation, (stored.generation, stored.profile, changed, expected_generation)
                )
            if cursor.rowcount != 1:
                return False
            connection.execute(_SQL.delete_keys)
            connection.executemany(_SQL.insert_key, rows)
            return True

        return stored if await self._write("write_keyring", work) else None

    async def wait_for_keyring_change(self, after_generation: int, timeout_seconds: float) -> int:
        """Poll the generation every ``KEYRING_POLL_SECONDS`` until it passes ``after_generation`` or
        ``timeout_seconds`` passed; the latest generation read."""
        check_wait(after_generation, timeout_seconds)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_seconds
        while True:
            generation = await self.keyring_generation()
            remaining = deadline - loop.time()
            if generation > after_generation or remaining <= 0:
                return generation
            await asyncio.sleep(min(remaining, KEYRING_POLL_SECONDS))

    async def beat(self, heartbeat: Heartbeat) -> Heartbeat:
        """Record ``heartbeat`` (replacing the instance's row), ``seen_at`` from the store's clock (SQLite's, that
        is this process's); ``StoreError(QUOTA)`` for a new instance when ``MAX_HEARTBEATS`` are kept."""
        params = (*heartbeat_values(heartbeat), MAX_HEARTBEATS, heartbeat.instance)

        def work(connection: sqlite3.Connection) -> int | None:
            row = connection.execute(_SQL.beat, params).fetchone()
            return None if row is None else int(row[0])

        seen = await self._write("beat", work)
        if seen is None:
            raise StoreError(StoreErrorReason.QUOTA, f"beat: the store keeps at most {MAX_HEARTBEATS} instances")
        return replace(heartbeat, seen_at=from_millis(seen))

    async def heartbeats(self) -> list[Heartbeat]:
        """Every instance's last heartbeat, ordered by instance name."""

        def work(connection: sqlite3.Connection) -> list[Heartbeat]:
            rows = connection.execute(_SQL.select_heartbeats, (MAX_HEARTBEATS,)).fetchall()
            return [heartbeat_from_row(row) for row in rows]

        return await self._run("heartbeats", work)

    async def forget_instance(self, instance: str) -> bool:
        """Delete an instance's heartbeat row; True iff there was one."""

        def work(connection: sqlite3.Connection) -> bool:
            return connection.execute(_SQL.delete_heartbeat, (instance,)).rowcount == 1

        return await self._write("forget_instance", work)

    async def read_rotation(self) -> RotationRecord | None:
        """The rotation record, or ``None``."""

        def work(connection: sqlite3.Connection) -> RotationRecord | None:
            row = connection.execute(_SQL.select_rotation).fetchone()
            return None if row is None else rotation_from_row(row)

        return await self._run("read_rotation", work)

    async def write_rotation(self, record: RotationRecord, *, expected_version: int) -> RotationRecord | None:
        """Compare-and-swap on the record's version (0: none yet); the stored record or ``None``."""
        stored, statement, params = rotation_update_params(_SQL, record, expected_version)

        def work(connection: sqlite3.Connection) -> bool:
            return connection.execute(statement, params).rowcount == 1

        return stored if await self._write("write_rotation", work) else None

    async def delete_rotation(self, *, expected_version: int) -> bool:
        """Delete the rotation record iff its version is ``expected_version``."""

        def work(connection: sqlite3.Connection) -> bool:
            return connection.execute(_SQL.delete_rotation, (expected_version,)).rowcount == 1

        return await self._write("delete_rotation", work)

    @contextlib.asynccontextmanager
    async def rotation_lock(self, owner: str) -> AsyncIterator[None]:
        """Hold the rotation lock (an exclusive ``flock`` on the file beside the database) for the block; a held
        lock is refused at once with ``StoreError(LOCKED)`` naming its holder and since when."""
        check_owner(owner)
        if self._writer is None or self._closed:
            raise StoreError(StoreErrorReason.UNAVAILABLE, "rotation_lock: the store is not open")
        descriptor = await asyncio.to_thread(self._take_rotation_lock)
        if descriptor is None:
            holder = await read_holder(lambda: self._run("rotation_lock", _lock_holder))
            raise StoreError(StoreErrorReason.LOCKED, describe_holder(holder))
        try:
            since = to_millis(datetime.now(UTC))

            def take(connection: sqlite3.Connection) -> None:
                connection.execute(_SQL.write_lock_holder, (owner, since))

            def let_go(connection: sqlite3.Connection) -> None:
                connection.execute(_SQL.delete_lock_holder, (owner, since))

            await self._write("rotation_lock", take)
            try:
                yield
            finally:
                with contextlib.suppress(StoreError):  # the lock goes with the descriptor all the same
                    await self._write("rotation_lock", let_go)
        finally:
            os.close(descriptor)

    def _take_rotation_lock(self) -> int | None:
        """The descriptor holding the lock file's exclusive lock, or ``None`` when another holder has it."""
        path = Path(f"{self._path}{_ROTATION_LOCK_SUFFIX}")
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise StoreError(StoreErrorReason.UNAVAILABLE, f"rotation_lock: {type(error).__name__}") from None
        try:
            _check_secret(os.fstat(descriptor), str(path))
            # flock, not fcntl's record locks: those are per process, and two holders in one process would both win.
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return None
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor


def _lock_holder(connection: sqlite3.Connection) -> tuple[object, ...] | None:
    row: tuple[object, ...] | None = connection.execute(_SQL.select_lock_holder).fetchone()
    return row


def _probe(connection: sqlite3.Connection) -> None:
    connection.execute("SELECT 1").fetchone()


def _create_schema(connection: sqlite3.Connection) -> None:
    for statement in _SQL.tables:
        connection.execute(statement)
    # Before the indexes, whose columns a table of another shape may lack.
    try:
        for statement in _SQL.shape_checks:
            connection.execute(statement)
    except sqlite3.OperationalError:
        raise StoreError(StoreErrorReason.SCHEMA, "a soklet table has other columns") from None
    for statement in _SQL.indexes:
        connection.execute(statement)
    versions = [int(row[0]) for row in connection.execute(_SQL.select_schema_versions)]
    if not versions:
        connection.execute(_SQL.insert_schema_version, (SCHEMA_VERSION,))
    elif max(versions) > SCHEMA_VERSION:
        raise StoreError(StoreErrorReason.SCHEMA, f"schema version {max(versions)} is newer than {SCHEMA_VERSION}")
