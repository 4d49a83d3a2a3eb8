"""Durable stores: task records and durable application handles, kept in SQLite (embedded) or PostgreSQL (shared).

One repository interface (:class:`DurableStore`) with two backends; :func:`open_store` picks one by URL scheme.
The PostgreSQL backend, ``soklet_core.store.postgres.PostgresStore``, is imported only when a URL asks for it.
"""

from __future__ import annotations

from .errors import StoreError, StoreErrorReason
from .records import (
    MAX_HANDLE_STATE_BYTES,
    MAX_KEY_CHARS,
    MAX_LIST_LIMIT,
    MAX_QUOTA_VALUE,
    MAX_STATUS_MESSAGE_CHARS,
    MAX_TASK_DOCUMENT_BYTES,
    SCHEMA_VERSION,
    STORE_TIMEOUT_SECONDS,
    HandleBinding,
    HandleRecord,
    TaskQuota,
    TaskRecord,
    TaskStatus,
)
from .repository import DurableStore
from .sqlite import SqliteStore
from .url import MAX_STORE_URL_CHARS, StoreUrl, default_data_dir, default_store_url, sqlite_url

__all__ = [
    "MAX_HANDLE_STATE_BYTES",
    "MAX_KEY_CHARS",
    "MAX_LIST_LIMIT",
    "MAX_QUOTA_VALUE",
    "MAX_STATUS_MESSAGE_CHARS",
    "MAX_STORE_URL_CHARS",
    "MAX_TASK_DOCUMENT_BYTES",
    "SCHEMA_VERSION",
    "STORE_TIMEOUT_SECONDS",
    "DurableStore",
    "HandleBinding",
    "HandleRecord",
    "SqliteStore",
    "StoreError",
    "StoreErrorReason",
    "StoreUrl",
    "TaskQuota",
    "TaskRecord",
    "TaskStatus",
    "default_data_dir",
    "default_store_url",
    "open_store",
    "sqlite_url",
]


def open_store(url: StoreUrl | str) -> DurableStore:
    """The store for ``url`` (a :class:`StoreUrl` or its text), constructed but not connected: await ``open()``."""
    parsed = url if isinstance(url, StoreUrl) else StoreUrl.parse(url)
    if parsed.backend == "sqlite":
        return SqliteStore(parsed)
    # Imported here so that a process that never uses PostgreSQL does not load its driver (about 0.1 s).
    from .postgres import PostgresStore

    return PostgresStore(parsed)
