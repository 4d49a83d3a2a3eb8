"""Refusals on both backends: records out of bounds, schemas soklet did not write, and driver errors reported
without the data they quote."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest

from soklet_core.store import (
    MAX_KEY_CHARS,
    MAX_STATUS_MESSAGE_CHARS,
    HandleBinding,
    StoreError,
    StoreErrorReason,
    StoreUrl,
    open_store,
)
from tests.store.support import BINDING, NOW, handle, task


def _raw(url: str, *statements: str) -> None:
    """Run ``statements`` on the store's database without soklet."""
    parsed = StoreUrl.parse(url)
    if parsed.backend == "sqlite":
        parsed.sqlite_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with sqlite3.connect(parsed.sqlite_path) as connection:
            for statement in statements:
                connection.execute(statement)
        connection.close()
        parsed.sqlite_path.chmod(0o600)  # owner-only, or the store refuses it before reading its schema
    else:
        with psycopg.connect(url, autocommit=True) as pg:
            for statement in statements:
                pg.execute(statement.encode())


def _open(url: str) -> None:
    async def main() -> None:
        store = open_store(url)
        try:
            await store.open()
        finally:
            await store.close()

    asyncio.run(main())


def test_a_newer_schema_is_refused_and_a_failed_open_may_be_retried(store_url: str) -> None:
    _open(store_url)
    _raw(store_url, "UPDATE soklet_schema SET version = 99")

    async def main() -> None:
        store = open_store(store_url)
        try:
            with pytest.raises(StoreError) as caught:
                await store.open()
            assert caught.value.reason is StoreErrorReason.SCHEMA
            _raw(store_url, "UPDATE soklet_schema SET version = 1")
            # Opened at once by many first requests: one opening, every caller served.
            await asyncio.gather(*(store.open() for _ in range(8)))
            assert await store.get_task("task-1") is None
        finally:
            await store.close()

    asyncio.run(main())


def test_a_table_of_another_shape_is_refused(store_url: str) -> None:
    _raw(store_url, "CREATE TABLE soklet_tasks (task_id TEXT PRIMARY KEY, body TEXT)")
    with pytest.raises(StoreError) as caught:
        _open(store_url)
    assert caught.value.reason is StoreErrorReason.SCHEMA


def test_a_conflict_reports_neither_the_id_nor_the_data(store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    secret_id = "task-id-that-must-not-leak"
    caplog.set_level(logging.DEBUG, logger="soklet")

    async def main() -> StoreError:
        store = open_store(store_url)
        await store.open()
        try:
            await store.insert_task(task(secret_id))
            with pytest.raises(StoreError) as caught:
                await store.insert_task(task(secret_id))
            return caught.value
        finally:
            await store.close()

    error = asyncio.run(main())
    assert error.reason is StoreErrorReason.CONFLICT
    assert secret_id not in str(error)
    assert secret_id not in caplog.text
    assert "insert_task" in caplog.text


def test_records_are_checked_as_they_are_made() -> None:
    long_key = "k" * (MAX_KEY_CHARS + 1)
    attempts = [
        lambda: task(""),
        lambda: task(long_key),
        lambda: replace(task(), subject=""),
        lambda: replace(task(), status="working"),
        lambda: replace(task(), status_message="m" * (MAX_STATUS_MESSAGE_CHARS + 1)),
        lambda: replace(task(), created_at=datetime(2026, 8, 1)),
        lambda: replace(task(), version=-1),
        lambda: replace(task(), version=True),
        lambda: replace(task(), document=""),
        lambda: HandleBinding(tenant="", principal=None, partition="p", operation="o"),
        lambda: HandleBinding(tenant="t", principal="", partition="p", operation="o"),
        lambda: replace(BINDING, operation=long_key),
        lambda: replace(handle(), handle=""),
        lambda: replace(handle(), binding="not a binding"),
        lambda: replace(handle(), state=""),
    ]
    for attempt in attempts:
        with pytest.raises(StoreError) as caught:
            attempt()
        assert caught.value.reason is StoreErrorReason.INVALID_ARGUMENT
    # Times are kept in UTC to the millisecond, as a store gives them back.
    record = replace(task(), created_at=NOW.replace(microsecond=123456))
    assert record.created_at.microsecond == 123000
    # A time in another zone is the same moment in UTC; one already in store form is taken as it is.
    elsewhere = datetime(2026, 8, 1, 17, 0, 0, 456789, tzinfo=timezone(timedelta(hours=5)))
    moved = replace(task(), created_at=elsewhere, updated_at=NOW)
    assert moved.created_at == datetime(2026, 8, 1, 12, 0, 0, 456000, tzinfo=UTC)
    assert moved.created_at.tzinfo is UTC
    assert moved.updated_at is NOW


def test_reprs_hold_no_task_id_document_handle_or_state() -> None:
    record = task("task-id-7d1f", document='{"secret":"user-data-9a0b"}')
    entry = handle("handle-3c2e")
    assert "task-id-7d1f" not in repr(record)
    assert "user-data-9a0b" not in repr(record)
    assert "handle-3c2e" not in repr(entry)
    assert entry.state not in repr(entry)
    assert "slow.report" in repr(record)  # the rest stays readable
