"""Store calls as spans, on real SQLite and PostgreSQL stores (the ``store_url`` fixture): one CLIENT span per call
with its database attributes, a refused call's closed reason, nothing at all while tracing is off, and never a
record's content, an id or a binding in a span."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider, SpanKind, StatusCode

from soklet_core import tracing
from soklet_core.store import (
    DurableStore,
    HandleBinding,
    KeyringRepository,
    StoreError,
    StoreErrorReason,
    TaskStatus,
    open_store,
)
from soklet_core.store.traced import DB_OPERATION, DB_SYSTEM, TRACED_OPERATIONS
from tests.store.support import NOW, handle, run, task
from tests.support_tracing import recorded_spans

#: What a record may hold that no span may: a token-like document, ids, a binding's names.
SECRET = "sk-live-7Hq2ZxV9pL3mN8wR4tY6"
TASK_ID = "task-Zq81vX0kLw"
HANDLE = "handle-Jm43pQ9sRt"
BINDING = HandleBinding(tenant="tenant-Ux7", principal="principal-Kd5", partition="partition-Wy2", operation="op.Vb8")


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """soklet's spans routed to an in-memory exporter for the test (and back to the global provider after)."""
    with recorded_spans() as recorded:
        yield recorded


def _backend(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgresql"


def _named(spans: tuple[ReadableSpan, ...], operation: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == f"soklet.store {operation}"]


def _texts(span: ReadableSpan) -> list[str]:
    """Every text a span carries: name, attribute keys and values, status, events."""
    texts = [span.name, str(span.status.description)]
    texts += [f"{key}={value}" for key, value in (span.attributes or {}).items()]
    for event in span.events:
        texts.append(event.name)
        texts += [f"{key}={value}" for key, value in (event.attributes or {}).items()]
    return texts


def test_every_public_operation_of_both_interfaces_is_traced() -> None:
    def public(interface: type) -> set[str]:
        return {name for name, member in vars(interface).items() if not name.startswith("_") and callable(member)}

    assert set(TRACED_OPERATIONS) == public(DurableStore) | public(KeyringRepository)


def test_each_call_is_one_client_span_with_its_db_attributes(store_url: str, exporter: InMemorySpanExporter) -> None:
    async def steps(store: DurableStore) -> None:
        record = task()
        await store.insert_task(record)
        await store.get_task("task-1")
        await store.replace_task(replace(record, status=TaskStatus.COMPLETED), expected_version=0)
        await store.list_tasks()
        await store.count_tasks()
        await store.insert_handle(handle())
        await store.peek_handle("h-1", handle().binding, NOW)
        await store.consume_and_replace("h-1", handle().binding, NOW, None)
        await store.count_live_handles(NOW)
        await store.purge_expired_handles(NOW)
        await store.delete_expired_tasks(NOW)
        await store.check()

    run(store_url, steps)
    called = [
        "open",
        "insert_task",
        "get_task",
        "replace_task",
        "list_tasks",
        "count_tasks",
        "insert_handle",
        "peek_handle",
        "consume_and_replace",
        "count_live_handles",
        "purge_expired_handles",
        "delete_expired_tasks",
        "check",
        "close",
    ]
    spans = exporter.get_finished_spans()
    assert [span.name for span in spans] == [f"soklet.store {operation}" for operation in called]
    for span, operation in zip(spans, called, strict=True):
        assert span.kind is SpanKind.CLIENT
        assert dict(span.attributes or {}) == {DB_SYSTEM: _backend(store_url), DB_OPERATION: operation}
        assert span.status.status_code is StatusCode.UNSET
        assert span.parent is None  # no span was current: each call is a trace of its own here


def test_a_call_within_a_span_is_its_child(sqlite_store_url: str, exporter: InMemorySpanExporter) -> None:
    async def steps(store: DurableStore) -> None:
        with tracing.span("outer"):
            await store.get_task("absent")

    run(sqlite_store_url, steps)
    (outer,) = [span for span in exporter.get_finished_spans() if span.name == "outer"]
    (read,) = _named(exporter.get_finished_spans(), "get_task")
    assert read.parent is not None
    assert read.parent.span_id == outer.context.span_id


def test_a_conflict_carries_its_reason(store_url: str, exporter: InMemorySpanExporter) -> None:
    async def steps(store: DurableStore) -> None:
        await store.insert_task(task())
        with pytest.raises(StoreError):
            await store.insert_task(task())

    run(store_url, steps)
    first, second = _named(exporter.get_finished_spans(), "insert_task")
    assert first.status.status_code is StatusCode.UNSET
    assert second.status.status_code is StatusCode.ERROR
    assert second.status.description == "conflict"
    attributes = dict(second.attributes or {})
    assert attributes[tracing.REASON] == "conflict"
    assert attributes[tracing.OUTCOME] == "refused"
    assert attributes["error.type"] == "conflict"
    assert not second.events  # no exception recorded: its text could quote data


def test_an_unavailable_store_carries_its_reason(store_url: str, exporter: InMemorySpanExporter) -> None:
    async def steps() -> None:
        store = open_store(store_url)  # never opened: every call is refused as unavailable
        with pytest.raises(StoreError) as caught:
            await store.get_task("task-1")
        assert caught.value.reason is StoreErrorReason.UNAVAILABLE

    asyncio.run(steps())
    (span,) = _named(exporter.get_finished_spans(), "get_task")
    assert dict(span.attributes or {})[tracing.REASON] == "unavailable"
    assert dict(span.attributes or {})[DB_SYSTEM] == _backend(store_url)
    assert span.status.status_code is StatusCode.ERROR


def test_a_keyring_wait_is_one_span_however_often_it_reads(
    sqlite_store_url: str, exporter: InMemorySpanExporter
) -> None:
    async def steps(store: DurableStore) -> None:
        repository: KeyringRepository = store  # type: ignore[assignment]
        await repository.wait_for_keyring_change(0, 0)

    run(sqlite_store_url, steps)
    names = [span.name for span in exporter.get_finished_spans()]
    assert "soklet.store wait_for_keyring_change" in names
    assert "soklet.store keyring_generation" not in names  # its reads are the wait's own


def test_the_rotation_lock_span_covers_the_taking_and_a_refusal_says_locked(
    store_url: str, exporter: InMemorySpanExporter
) -> None:
    async def steps(store: DurableStore) -> None:
        repository: KeyringRepository = store  # type: ignore[assignment]
        async with repository.rotation_lock("first-holder"):
            await store.get_task("absent")  # the holder's work: not inside the lock's span
            with pytest.raises(StoreError) as caught:
                async with repository.rotation_lock("second-holder"):
                    pass
            assert caught.value.reason is StoreErrorReason.LOCKED

    run(store_url, steps)
    spans = exporter.get_finished_spans()
    taken, refused = _named(spans, "rotation_lock")
    (read,) = _named(spans, "get_task")
    assert taken.status.status_code is StatusCode.UNSET
    assert read.parent is None
    assert dict(refused.attributes or {})[tracing.REASON] == "locked"
    assert refused.status.status_code is StatusCode.ERROR
    assert not any("holder" in text for span in spans for text in _texts(span))


def test_no_span_while_tracing_is_off(store_url: str, exporter: InMemorySpanExporter) -> None:
    tracing.use_provider(NoOpTracerProvider())
    assert tracing.tracer() is None

    async def steps(store: DurableStore) -> None:
        await store.insert_task(task())
        with pytest.raises(StoreError):
            await store.insert_task(task())
        await store.get_task("task-1")

    run(store_url, steps)
    assert exporter.get_finished_spans() == ()


def test_no_record_content_id_or_binding_in_any_span(store_url: str, exporter: InMemorySpanExporter) -> None:
    document = f'{{"token":"{SECRET}"}}'
    record = replace(task(TASK_ID, document=document), partition=BINDING.partition, subject=BINDING.principal)
    entry = handle(HANDLE, binding=BINDING, state=f'{{"secret":"{SECRET}"}}')

    async def steps(store: DurableStore) -> None:
        await store.insert_task(record)
        with pytest.raises(StoreError):
            await store.insert_task(record)
        await store.get_task(TASK_ID)
        await store.replace_task(replace(record, document=document + " "), expected_version=0)
        await store.insert_handle(entry)
        with pytest.raises(StoreError):
            await store.insert_handle(entry)
        await store.peek_handle(HANDLE, BINDING, NOW)
        await store.consume_and_replace(HANDLE, BINDING, NOW, handle(HANDLE + "2", binding=BINDING, state=document))
        await store.delete_expired_tasks(NOW + timedelta(days=1))

    run(store_url, steps)
    spans = exporter.get_finished_spans()
    assert len(spans) == 11
    forbidden = [SECRET, TASK_ID, HANDLE, BINDING.tenant, BINDING.principal, BINDING.partition, BINDING.operation]
    for span in spans:
        for text in _texts(span):
            assert not [value for value in forbidden if value in text], (span.name, text)
