"""The stores' SQL is written once: the two dialects differ only in their parameter marker and NULL-safe equality."""

from __future__ import annotations

from soklet_core.store import TaskStatus
from soklet_core.store.records import HANDLE_COLUMNS, TASK_COLUMNS
from soklet_core.store.statements import POSTGRESQL, SQLITE, Statements

TEXTS = (
    "select_schema_versions",
    "insert_schema_version",
    "insert_task",
    "select_task",
    "replace_task",
    "count_tasks",
    "delete_expired_tasks",
    "insert_handle",
    "peek_handle",
    "consume_handle",
    "consume_and_replace",
    "count_live_handles",
    "purge_expired_handles",
)


def as_postgresql(sqlite_text: str) -> str:
    return sqlite_text.replace(" IS ?", " IS NOT DISTINCT FROM ?").replace("?", "%s")


def test_the_dialects_differ_only_in_markers_and_null_safe_equality() -> None:
    lite, postgres = Statements(SQLITE), Statements(POSTGRESQL)
    for name in TEXTS:
        assert as_postgresql(getattr(lite, name)) == getattr(postgres, name), name
    # A partition's usage counts bytes, which each backend spells its own way.
    assert as_postgresql(lite.partition_usage).replace("LENGTH(CAST(document AS BLOB))", "OCTET_LENGTH(document)") == (
        postgres.partition_usage
    )
    # The wrapped keys' column is of each backend's byte-string type.
    assert [text.replace(" BLOB ", " BYTEA ") for text in lite.tables] == list(postgres.tables)
    assert lite.indexes == postgres.indexes
    assert lite.shape_checks == postgres.shape_checks
    for status in (None, TaskStatus.WORKING):
        for after in (None, "task-1"):
            lite_page = lite.list_tasks(status=status, after=after, limit=5)
            postgres_page = postgres.list_tasks(status=status, after=after, limit=5)
            assert as_postgresql(lite_page[0]) == postgres_page[0]
            assert lite_page[1] == postgres_page[1]


def test_parameter_counts_match_the_records() -> None:
    lite = Statements(SQLITE)
    assert lite.insert_task.count("?") == len(TASK_COLUMNS)
    assert lite.insert_handle.count("?") == len(HANDLE_COLUMNS)
    assert lite.replace_task.count("?") == 8
    assert lite.peek_handle.count("?") == lite.consume_handle.count("?") == 6
    assert lite.consume_and_replace.count("?") == 6 + len(HANDLE_COLUMNS)
    # An anonymous principal (NULL) matches only NULL: never a plain `principal = ?`.
    assert "principal IS ?" in lite.peek_handle
    assert "principal IS NOT DISTINCT FROM %s" in Statements(POSTGRESQL).consume_handle
    assert lite.partition_usage.count("?") == 2
    statement, params = lite.list_tasks(status=TaskStatus.FAILED, after="x", limit=7)
    assert params == ("failed", "x", 7)
    assert statement.count("?") == 3
