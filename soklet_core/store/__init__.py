"""Durable stores: task records, durable application handles and a fleet's keyring (wrapped keys, a generation,
heartbeats, the rotation record), kept in SQLite (embedded) or PostgreSQL (shared).

Two repository interfaces (:class:`DurableStore`, :class:`KeyringRepository`) with two backends that implement
both; :func:`open_store` picks one by URL scheme.
The PostgreSQL backend, ``soklet_core.store.postgres.PostgresStore``, is imported only when a URL asks for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soklet_core.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .errors import StoreError, StoreErrorReason
    from .fleet_keyring import MAX_KEYRING_WRITE_ATTEMPTS, FleetKeyring, LoadedFleetKeyring
    from .keyring_records import (
        KEYRING_LISTEN_RECHECK_SECONDS,
        KEYRING_POLL_SECONDS,
        MAX_ADMIN_URL_CHARS,
        MAX_CHECK_VALUE_CHARS,
        MAX_FLEET_KEYS,
        MAX_HEARTBEATS,
        MAX_KEYRING_WAIT_SECONDS,
        MAX_ROTATION_DOCUMENT_BYTES,
        Heartbeat,
        RotationRecord,
        StoredKey,
        StoredKeyring,
        StoredKeyRole,
    )
    from .postgres import PostgresStore
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
    from .repository import DurableStore, KeyringRepository
    from .sqlite import SqliteStore
    from .url import MAX_STORE_URL_CHARS, StoreUrl, default_data_dir, default_store_url, sqlite_url

__all__ = [
    "KEYRING_LISTEN_RECHECK_SECONDS",
    "KEYRING_POLL_SECONDS",
    "MAX_ADMIN_URL_CHARS",
    "MAX_CHECK_VALUE_CHARS",
    "MAX_FLEET_KEYS",
    "MAX_HANDLE_STATE_BYTES",
    "MAX_HEARTBEATS",
    "MAX_KEYRING_WAIT_SECONDS",
    "MAX_KEYRING_WRITE_ATTEMPTS",
    "MAX_KEY_CHARS",
    "MAX_LIST_LIMIT",
    "MAX_QUOTA_VALUE",
    "MAX_ROTATION_DOCUMENT_BYTES",
    "MAX_STATUS_MESSAGE_CHARS",
    "MAX_STORE_URL_CHARS",
    "MAX_TASK_DOCUMENT_BYTES",
    "SCHEMA_VERSION",
    "STORE_TIMEOUT_SECONDS",
    "DurableStore",
    "FleetKeyring",
    "HandleBinding",
    "HandleRecord",
    "Heartbeat",
    "KeyringRepository",
    "LoadedFleetKeyring",
    "RotationRecord",
    "SqliteStore",
    "StoreError",
    "StoreErrorReason",
    "StoreUrl",
    "StoredKey",
    "StoredKeyRole",
    "StoredKeyring",
    "TaskQuota",
    "TaskRecord",
    "TaskStatus",
    "default_data_dir",
    "default_store_url",
    "open_store",
    "sqlite_url",
]

# Each name is imported from its module on first use (PEP 562), so that importing one module of this package (or a
# command that needs one name) does not load the whole package and what it builds on.
_EXPORTS: dict[str, str] = {
    "StoreError": ".errors",
    "StoreErrorReason": ".errors",
    "MAX_KEYRING_WRITE_ATTEMPTS": ".fleet_keyring",
    "FleetKeyring": ".fleet_keyring",
    "LoadedFleetKeyring": ".fleet_keyring",
    "KEYRING_LISTEN_RECHECK_SECONDS": ".keyring_records",
    "KEYRING_POLL_SECONDS": ".keyring_records",
    "MAX_ADMIN_URL_CHARS": ".keyring_records",
    "MAX_CHECK_VALUE_CHARS": ".keyring_records",
    "MAX_FLEET_KEYS": ".keyring_records",
    "MAX_HEARTBEATS": ".keyring_records",
    "MAX_KEYRING_WAIT_SECONDS": ".keyring_records",
    "MAX_ROTATION_DOCUMENT_BYTES": ".keyring_records",
    "Heartbeat": ".keyring_records",
    "RotationRecord": ".keyring_records",
    "StoredKey": ".keyring_records",
    "StoredKeyring": ".keyring_records",
    "StoredKeyRole": ".keyring_records",
    "MAX_HANDLE_STATE_BYTES": ".records",
    "MAX_KEY_CHARS": ".records",
    "MAX_LIST_LIMIT": ".records",
    "MAX_QUOTA_VALUE": ".records",
    "MAX_STATUS_MESSAGE_CHARS": ".records",
    "MAX_TASK_DOCUMENT_BYTES": ".records",
    "SCHEMA_VERSION": ".records",
    "STORE_TIMEOUT_SECONDS": ".records",
    "HandleBinding": ".records",
    "HandleRecord": ".records",
    "TaskQuota": ".records",
    "TaskRecord": ".records",
    "TaskStatus": ".records",
    "DurableStore": ".repository",
    "KeyringRepository": ".repository",
    "SqliteStore": ".sqlite",
    "MAX_STORE_URL_CHARS": ".url",
    "StoreUrl": ".url",
    "default_data_dir": ".url",
    "default_store_url": ".url",
    "sqlite_url": ".url",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)


def open_store(url: StoreUrl | str) -> SqliteStore | PostgresStore:
    """The store for ``url`` (a :class:`StoreUrl` or its text), constructed but not connected: await ``open()``.
    Either backend is both a :class:`DurableStore` and a :class:`KeyringRepository`."""
    from .sqlite import SqliteStore
    from .url import StoreUrl

    parsed = url if isinstance(url, StoreUrl) else StoreUrl.parse(url)
    if parsed.backend == "sqlite":
        return SqliteStore(parsed)
    # Imported here so that a process that never uses PostgreSQL does not load its driver (about 0.1 s).
    from .postgres import PostgresStore

    return PostgresStore(parsed)
