"""The SQL both stores run, written once: the schema, every task and handle statement, the binding clause.

The two backends differ only in their parameter marker (SQLite ``?``, psycopg ``%s``) and in how they compare a
possibly-NULL principal (SQLite ``IS``; PostgreSQL ``IS NOT DISTINCT FROM``): a :class:`Statements` is the whole set
for one :class:`Dialect`. PostgreSQL also consumes and replaces a handle in one statement
(:attr:`Statements.consume_and_replace`); SQLite, which has no data-changing common table expressions, runs
:attr:`Statements.consume_handle` and :attr:`Statements.insert_handle` in one transaction.

The fleet keyring's tables (:mod:`.keyring_records`) came after the first schema: every store creates them ``IF NOT
EXISTS`` when it opens, so a store of the first schema opens and gains them. They add to the schema and change
nothing an older soklet reads, so the schema version stays 1 (it moves only for a change an older soklet could not
live with). The keyring and the rotation record are one row each (``id = 1``); a key row holds only wrapped
material.

Statements are built from constants only (table and column names, markers): no value ever reaches the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final

from .errors import StoreError, StoreErrorReason
from .keyring_records import HEARTBEAT_COLUMNS, KEY_COLUMNS, ROTATION_COLUMNS, RotationRecord
from .records import HANDLE_COLUMNS, TASK_COLUMNS, HandleBinding, TaskRecord, TaskStatus, task_values, to_millis

__all__ = [
    "POSTGRESQL",
    "SQLITE",
    "Dialect",
    "Statements",
    "bound_params",
    "replace_task_params",
    "rotation_update_params",
]

_TASKS: Final = ", ".join(TASK_COLUMNS)
_HANDLES: Final = ", ".join(HANDLE_COLUMNS)
_KEYS: Final = ", ".join(KEY_COLUMNS)
_HEARTBEATS: Final = ", ".join(HEARTBEAT_COLUMNS)
_ROTATION: Final = ", ".join(ROTATION_COLUMNS)
#: Times are integer milliseconds since the epoch (``BIGINT``: an ``INTEGER`` in SQLite, 64-bit in PostgreSQL).
_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS soklet_schema (version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS soklet_tasks (task_id TEXT PRIMARY KEY, partition TEXT NOT NULL, subject TEXT,"
    " tool TEXT NOT NULL, status TEXT NOT NULL, status_message TEXT, created_at BIGINT NOT NULL,"
    " updated_at BIGINT NOT NULL, expires_at BIGINT, document TEXT NOT NULL, version BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS soklet_handles (handle TEXT PRIMARY KEY, tenant TEXT NOT NULL, principal TEXT,"
    " partition TEXT NOT NULL, operation TEXT NOT NULL, state TEXT NOT NULL, created_at BIGINT NOT NULL,"
    " expires_at BIGINT NOT NULL)",
)
#: The fleet keyring's tables; ``{blob}`` is the dialect's byte-string type.
_KEYRING_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS soklet_keys (key_id TEXT PRIMARY KEY, role TEXT NOT NULL,"
    " created_at BIGINT NOT NULL, retired_at BIGINT, check_value TEXT NOT NULL, kek_id TEXT NOT NULL,"
    " wrapped {blob} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS soklet_keyring (id INTEGER PRIMARY KEY CHECK (id = 1), generation BIGINT NOT NULL,"
    " profile TEXT NOT NULL, changed_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS soklet_heartbeats (instance TEXT PRIMARY KEY, process_id TEXT NOT NULL,"
    " generation BIGINT NOT NULL, fingerprint TEXT, clock BIGINT NOT NULL, admin_url TEXT,"
    " max_state_lifetime_ms BIGINT NOT NULL, seen_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS soklet_rotation (id INTEGER PRIMARY KEY CHECK (id = 1), owner TEXT NOT NULL,"
    " started_at BIGINT NOT NULL, document TEXT NOT NULL, version BIGINT NOT NULL)",
    # Who holds the rotation lock and since when (the lock itself is the backend's: an advisory lock, a file lock).
    "CREATE TABLE IF NOT EXISTS soklet_rotation_lock (id INTEGER PRIMARY KEY CHECK (id = 1), owner TEXT NOT NULL,"
    " since BIGINT NOT NULL)",
)
#: What a task compare-and-swap rewrites (the id, owner, tool and creation time never change).
_MUTABLE_TASK_COLUMNS: Final = ("status", "status_message", "updated_at", "expires_at", "document", "version")
_INDEXES: Final = (
    "CREATE INDEX IF NOT EXISTS soklet_tasks_status ON soklet_tasks (status)",
    "CREATE INDEX IF NOT EXISTS soklet_tasks_expires_at ON soklet_tasks (expires_at)",
    "CREATE INDEX IF NOT EXISTS soklet_tasks_order ON soklet_tasks (created_at, task_id)",
    "CREATE INDEX IF NOT EXISTS soklet_handles_expires_at ON soklet_handles (expires_at)",
    # A partition's usage (its task quota) is counted on every creation.
    "CREATE INDEX IF NOT EXISTS soklet_tasks_partition ON soklet_tasks (partition, expires_at)",
)


@dataclass(frozen=True, slots=True)
class Dialect:
    """What one backend spells its own way: the parameter marker, the NULL-safe equality, the byte length of a
    text column, the byte-string type, and the store's clock in epoch milliseconds."""

    mark: str
    null_safe_equal: str
    byte_length: str  # a format with one {} for the column
    blob: str
    #: The database's clock now, in integer epoch milliseconds (SQLite's is the process's own clock).
    clock_millis: str


SQLITE: Final = Dialect(
    mark="?",
    null_safe_equal="IS",
    byte_length="LENGTH(CAST({} AS BLOB))",
    blob="BLOB",
    clock_millis="CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
)
POSTGRESQL: Final = Dialect(
    mark="%s",
    null_safe_equal="IS NOT DISTINCT FROM",
    byte_length="OCTET_LENGTH({})",
    blob="BYTEA",
    clock_millis="CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)",
)


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement of the stores in one dialect. Parameters, in order, are named beside each statement."""

    dialect: Dialect
    #: ``CREATE TABLE IF NOT EXISTS`` for the schema-version, task and handle tables.
    tables: tuple[str, ...] = field(init=False)
    #: ``CREATE INDEX IF NOT EXISTS``, run after the tables' shape is checked.
    indexes: tuple[str, ...] = field(init=False)
    select_schema_versions: str = field(init=False)
    insert_schema_version: str = field(init=False)  # (version,)
    #: Fails on a table whose columns are not the ones soklet reads.
    shape_checks: tuple[str, ...] = field(init=False)
    insert_task: str = field(init=False)  # task_values(record)
    select_task: str = field(init=False)  # (task_id,)
    #: The task compare-and-swap: (status, status_message, updated_at, expires_at, document, new version, task_id,
    #: expected version); one row changed iff the version had not moved on.
    replace_task: str = field(init=False)
    count_tasks: str = field(init=False)
    delete_expired_tasks: str = field(init=False)  # (now,)
    #: What one partition holds of live tasks (not expired at ``now``): (partition, now) -> (count, document bytes,
    #: the earliest expiry among them or NULL).
    partition_usage: str = field(init=False)
    document_bytes: str = field(init=False)  # (task_id,) -> the byte length of its document
    insert_handle: str = field(init=False)  # handle_values(record)
    #: The live entry of exactly one binding: (handle, tenant, principal, partition, operation, now). An anonymous
    #: principal (NULL) matches only NULL.
    peek_handle: str = field(init=False)
    consume_handle: str = field(init=False)  # the binding's parameters; one row deleted iff it consumed
    #: The binding's parameters then handle_values(replacement): the replacement is inserted from the deleted rows,
    #: so iff this statement consumed the entry (PostgreSQL only).
    consume_and_replace: str = field(init=False)
    count_live_handles: str = field(init=False)  # (now,)
    purge_expired_handles: str = field(init=False)  # (now,)
    #: The keyring and its keys in one statement (one snapshot): (limit,) -> rows of (generation, profile,
    #: changed_at, *KEY_COLUMNS), ordered by key id; no row when no keyring was written.
    select_keyring: str = field(init=False)
    select_generation: str = field(init=False)  # () -> (generation,) or no row
    #: The keyring's compare-and-swap: the first write (profile, changed_at) inserts the row with generation 1,
    #: one row iff none existed; a later one (new generation, profile, changed_at, expected generation) updates it,
    #: one row iff the generation had not moved on.
    insert_generation: str = field(init=False)
    update_generation: str = field(init=False)
    delete_keys: str = field(init=False)
    insert_key: str = field(init=False)  # key_values(key)
    #: A heartbeat upsert: heartbeat_values(beat), then (MAX_HEARTBEATS, instance); no row returned when the
    #: store already keeps that many other instances, else (seen_at,).
    beat: str = field(init=False)
    select_heartbeats: str = field(init=False)  # (limit,)
    delete_heartbeat: str = field(init=False)  # (instance,)
    select_rotation: str = field(init=False)
    #: The rotation record's compare-and-swap: the first write (owner, started_at, document) inserts version 1,
    #: one row iff none existed; a later one (owner, started_at, document, new version, expected version).
    insert_rotation: str = field(init=False)
    update_rotation: str = field(init=False)
    delete_rotation: str = field(init=False)  # (expected version,)
    #: The rotation lock's holder: (owner, since) written by whoever took the lock, read to name it in a refusal,
    #: deleted (owner, since) by it when it lets go.
    write_lock_holder: str = field(init=False)
    select_lock_holder: str = field(init=False)
    delete_lock_holder: str = field(init=False)

    def __post_init__(self) -> None:
        mark = self.dialect.mark
        bound = (
            f"handle = {mark} AND tenant = {mark} AND principal {self.dialect.null_safe_equal} {mark}"
            f" AND partition = {mark} AND operation = {mark} AND expires_at > {mark}"
        )
        handle_marks = ", ".join([mark] * len(HANDLE_COLUMNS))
        consume = f"DELETE FROM soklet_handles WHERE {bound}"
        key_marks = ", ".join([mark] * len(KEY_COLUMNS))
        beat_marks = ", ".join([mark] * (len(HEARTBEAT_COLUMNS) - 1))
        beat_updates = ", ".join(f"{name} = excluded.{name}" for name in HEARTBEAT_COLUMNS[1:])
        keyring_keys = ", ".join(f"k.{name}" for name in KEY_COLUMNS)
        built = {
            "tables": _TABLES + tuple(text.format(blob=self.dialect.blob) for text in _KEYRING_TABLES),
            "indexes": _INDEXES,
            "select_schema_versions": "SELECT version FROM soklet_schema",
            "insert_schema_version": f"INSERT INTO soklet_schema (version) VALUES ({mark})",
            "shape_checks": (
                f"SELECT {_TASKS} FROM soklet_tasks LIMIT 0",
                f"SELECT {_HANDLES} FROM soklet_handles LIMIT 0",
                f"SELECT {_KEYS} FROM soklet_keys LIMIT 0",
                "SELECT id, generation, profile, changed_at FROM soklet_keyring LIMIT 0",
                f"SELECT {_HEARTBEATS} FROM soklet_heartbeats LIMIT 0",
                f"SELECT id, {_ROTATION} FROM soklet_rotation LIMIT 0",
                "SELECT id, owner, since FROM soklet_rotation_lock LIMIT 0",
            ),
            "insert_task": f"INSERT INTO soklet_tasks ({_TASKS}) VALUES ({', '.join([mark] * len(TASK_COLUMNS))})",
            "select_task": f"SELECT {_TASKS} FROM soklet_tasks WHERE task_id = {mark}",
            "replace_task": (
                f"UPDATE soklet_tasks SET {', '.join(f'{name} = {mark}' for name in _MUTABLE_TASK_COLUMNS)}"
                f" WHERE task_id = {mark} AND version = {mark}"
            ),
            "count_tasks": "SELECT status, COUNT(*) FROM soklet_tasks GROUP BY status",
            "delete_expired_tasks": f"DELETE FROM soklet_tasks WHERE expires_at IS NOT NULL AND expires_at <= {mark}",
            "partition_usage": (
                f"SELECT COUNT(*), COALESCE(SUM({self.dialect.byte_length.format('document')}), 0), MIN(expires_at)"
                f" FROM soklet_tasks WHERE partition = {mark} AND (expires_at IS NULL OR expires_at > {mark})"
            ),
            "document_bytes": (
                f"SELECT {self.dialect.byte_length.format('document')} FROM soklet_tasks WHERE task_id = {mark}"
            ),
            "insert_handle": f"INSERT INTO soklet_handles ({_HANDLES}) VALUES ({handle_marks})",
            "peek_handle": f"SELECT {_HANDLES} FROM soklet_handles WHERE {bound}",
            "consume_handle": consume,
            "consume_and_replace": (
                f"WITH gone AS ({consume} RETURNING 1) INSERT INTO soklet_handles ({_HANDLES})"
                f" SELECT {handle_marks} FROM gone RETURNING 1"
            ),
            "count_live_handles": f"SELECT COUNT(*) FROM soklet_handles WHERE expires_at > {mark}",
            "purge_expired_handles": f"DELETE FROM soklet_handles WHERE expires_at <= {mark}",
            "select_keyring": (
                f"SELECT g.generation, g.profile, g.changed_at, {keyring_keys} FROM soklet_keyring g"
                f" LEFT JOIN soklet_keys k ON 1 = 1 WHERE g.id = 1 ORDER BY k.key_id LIMIT {mark}"
            ),
            "select_generation": "SELECT generation FROM soklet_keyring WHERE id = 1",
            "insert_generation": (
                "INSERT INTO soklet_keyring (id, generation, profile, changed_at)"
                f" VALUES (1, 1, {mark}, {mark}) ON CONFLICT (id) DO NOTHING"
            ),
            "update_generation": (
                f"UPDATE soklet_keyring SET generation = {mark}, profile = {mark}, changed_at = {mark}"
                f" WHERE id = 1 AND generation = {mark}"
            ),
            "delete_keys": "DELETE FROM soklet_keys",
            "insert_key": f"INSERT INTO soklet_keys ({_KEYS}) VALUES ({key_marks})",
            "beat": (
                f"INSERT INTO soklet_heartbeats ({_HEARTBEATS}) SELECT {beat_marks}, {self.dialect.clock_millis}"
                f" WHERE (SELECT COUNT(*) FROM soklet_heartbeats) < {mark}"
                f" OR EXISTS (SELECT 1 FROM soklet_heartbeats WHERE instance = {mark})"
                f" ON CONFLICT (instance) DO UPDATE SET {beat_updates} RETURNING seen_at"
            ),
            "select_heartbeats": f"SELECT {_HEARTBEATS} FROM soklet_heartbeats ORDER BY instance LIMIT {mark}",
            "delete_heartbeat": f"DELETE FROM soklet_heartbeats WHERE instance = {mark}",
            "select_rotation": f"SELECT {_ROTATION} FROM soklet_rotation WHERE id = 1",
            "insert_rotation": (
                f"INSERT INTO soklet_rotation (id, {_ROTATION}) VALUES (1, {mark}, {mark}, {mark}, 1)"
                " ON CONFLICT (id) DO NOTHING"
            ),
            "update_rotation": (
                f"UPDATE soklet_rotation SET owner = {mark}, started_at = {mark}, document = {mark}, version = {mark}"
                f" WHERE id = 1 AND version = {mark}"
            ),
            "delete_rotation": f"DELETE FROM soklet_rotation WHERE id = 1 AND version = {mark}",
            "write_lock_holder": (
                f"INSERT INTO soklet_rotation_lock (id, owner, since) VALUES (1, {mark}, {mark})"
                " ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, since = excluded.since"
            ),
            "select_lock_holder": "SELECT owner, since FROM soklet_rotation_lock WHERE id = 1",
            "delete_lock_holder": (
                f"DELETE FROM soklet_rotation_lock WHERE id = 1 AND owner = {mark} AND since = {mark}"
            ),
        }
        for name, text in built.items():
            object.__setattr__(self, name, text)

    def list_tasks(self, *, status: TaskStatus | None, after: str | None, limit: int) -> tuple[str, tuple[object, ...]]:
        """A page of tasks ordered by (created_at, task_id), optionally of one status, after the task ``after``:
        the statement and its parameters."""
        mark = self.dialect.mark
        clauses: list[str] = []
        params: list[object] = []
        if status is not None:
            clauses.append(f"status = {mark}")
            params.append(TaskStatus(status).value)
        if after is not None:
            clauses.append(
                f"(created_at, task_id) > (SELECT created_at, task_id FROM soklet_tasks WHERE task_id = {mark})"
            )
            params.append(after)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        statement = f"SELECT {_TASKS} FROM soklet_tasks{where} ORDER BY created_at, task_id LIMIT {mark}"
        return statement, (*params, limit)


def bound_params(handle: str, binding: HandleBinding, now: datetime) -> tuple[object, ...]:
    """The parameters of the binding clause (peek, consume): the handle, the whole binding and ``now``."""
    return (handle, binding.tenant, binding.principal, binding.partition, binding.operation, to_millis(now))


def replace_task_params(stored: TaskRecord, expected_version: int) -> tuple[object, ...]:
    """The parameters of :attr:`Statements.replace_task`: ``stored``'s mutable columns and new version, its id, and
    the version the row must still have."""
    values = dict(zip(TASK_COLUMNS, task_values(stored), strict=True))
    return (*(values[name] for name in _MUTABLE_TASK_COLUMNS), values["task_id"], expected_version)


def rotation_update_params(
    statements: Statements, record: RotationRecord, expected_version: int
) -> tuple[RotationRecord, str, tuple[object, ...]]:
    """The rotation record's compare-and-swap: the record as stored (version ``expected_version + 1``), the
    statement (an insert when ``expected_version`` is 0, else a conditional update) and its parameters."""
    if isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 0:
        raise StoreError(StoreErrorReason.INVALID_ARGUMENT, "expected_version must be a non-negative integer")
    stored = replace(record, version=expected_version + 1)
    head = (stored.owner, to_millis(stored.started_at), stored.document)
    if expected_version == 0:
        return stored, statements.insert_rotation, head
    return stored, statements.update_rotation, (*head, stored.version, expected_version)
