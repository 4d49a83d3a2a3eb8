"""Tasks as spans, through a real server over uvicorn and a real SQLite store (and a task manager driven directly
for the orphan sweep): a step run's span names the tool, the attempt and the outcome, a failed step its closed
reason; each manager operation has its span; a step the sweep starts is a trace of its own; no span holds a task
id, an argument or a token."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from soklet_core import tracing
from soklet_core.json import JsonObject
from soklet_core.mcp import (
    BearerTokenAdmission,
    CallToolResult,
    ClientCapabilities,
    Identity,
    InputRequest,
    McpServer,
    Registry,
    StartTask,
    TaskContext,
    TaskSupport,
    task_tool,
)
from soklet_core.mcp.model import TaskFailed, TaskInputRequired
from soklet_core.mcp.server.admission import Admission, BearerTokenEntry
from soklet_core.mcp.server.durable._task_spans import ATTEMPT, STEP_SPAN
from soklet_core.mcp.server.durable._tasks import TaskManager
from soklet_core.store import DurableStore, TaskStatus, open_store
from tests.server.support import FORM, OBJECT, TASKS, TASKS_FORM, Client, running, task_request, wait_for_task
from tests.support_tracing import recorded_spans

TOKEN = "alice-token-Qm93xZ"
#: An argument no span may carry.
SECRET = "sk-live-Rt5Wq8Lp2Xv7"
#: How long a span may take to end after the client saw its task settle (the step ends its span after the write).
SPAN_SECONDS = 10.0


@task_tool(name="echo", description="Echo the text argument.", input_schema=OBJECT)
async def echo(context: TaskContext) -> CallToolResult:
    text = context.arguments.get("text")
    return CallToolResult.from_text(f"echo {text.to_python() if text is not None else ''}")


@task_tool(name="protocol.error", description="A failed task.", input_schema=OBJECT)
async def protocol_error(context: TaskContext) -> TaskFailed:
    return TaskFailed(-32000, "The job failed")


@task_tool(name="boom", description="A step that raises.", input_schema=OBJECT)
async def boom(context: TaskContext) -> CallToolResult:
    raise RuntimeError(SECRET)


@task_tool(
    name="ask",
    description="Asks once, then answers.",
    input_schema=OBJECT,
    input_request_declarations=[FORM],
    task_support=TaskSupport.REQUIRED,
)
async def ask(context: TaskContext) -> CallToolResult | TaskInputRequired:
    if context.round == 1:
        form = {"message": "Ok?", "mode": "form", "requestedSchema": {"type": "object", "properties": {}}}
        return TaskInputRequired({"first": InputRequest(FORM, form)})
    return CallToolResult.from_text("answered")


@task_tool(name="slow", description="Runs until cancelled.", input_schema=OBJECT)
async def slow(context: TaskContext) -> CallToolResult:
    await asyncio.sleep(120)
    return CallToolResult.from_text("late")


STALLS: list[int] = []


@task_tool(name="stall.once", description="Stalls on its first run, finishes on the next.", input_schema=OBJECT)
async def stall_once(context: TaskContext) -> CallToolResult:
    STALLS.append(1)
    if len(STALLS) == 1:
        await asyncio.sleep(120)  # cut off by the manager's close
    return CallToolResult.from_text("done")


REGISTRY = Registry(echo, protocol_error, boom, ask, slow, stall_once)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """soklet's spans routed to an in-memory exporter for the test (and back to the global provider after)."""
    with recorded_spans() as recorded:
        yield recorded


@pytest.fixture
def client(sqlite_store_url: str) -> Iterator[Client]:
    store: DurableStore = open_store(sqlite_store_url)
    server = McpServer(REGISTRY, store=store, admission=BearerTokenAdmission({TOKEN: BearerTokenEntry("alice", "p1")}))
    try:
        with running(server) as base:
            yield Client(base, token=TOKEN)
    finally:
        with contextlib.suppress(Exception):
            asyncio.run(store.close())


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _steps(exporter: InMemorySpanExporter, tool: str, count: int = 1) -> list[ReadableSpan]:
    """The first ``count`` finished step spans of ``tool`` (waiting a little: a step ends its span after its write)."""
    deadline = time.monotonic() + SPAN_SECONDS
    while True:
        found = [
            span
            for span in exporter.get_finished_spans()
            if span.name == STEP_SPAN and _attributes(span).get(tracing.OPERATION) == tool
        ]
        if len(found) >= count:
            return found[:count]
        assert time.monotonic() < deadline, f"no {count} step span(s) of {tool}"
        time.sleep(0.02)


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def _assert_clean(exporter: InMemorySpanExporter, *forbidden: str) -> None:
    """No span's name, attributes, status or events hold any of ``forbidden`` (nor the secret or the token)."""
    for span in exporter.get_finished_spans():
        texts = [span.name, str(span.status.description), json.dumps(_attributes(span), default=str)]
        texts += [f"{event.name} {dict(event.attributes or {})}" for event in span.events]
        for value in (*forbidden, SECRET, TOKEN):
            assert not [text for text in texts if value in text], (span.name, value)


def test_a_step_span_names_the_tool_the_attempt_and_the_outcome(client: Client, exporter: InMemorySpanExporter) -> None:
    task_id = client.call("echo", {"text": SECRET}, capabilities=TASKS).result["taskId"]
    wait_for_task(client, task_id, "completed")
    (step,) = _steps(exporter, "echo")
    assert _attributes(step) == {tracing.OPERATION: "echo", ATTEMPT: 1, tracing.OUTCOME: "completed"}
    assert step.status.status_code is StatusCode.UNSET
    (create,) = _named(exporter, "soklet.task.create")
    assert _attributes(create) == {tracing.OPERATION: "echo", tracing.OUTCOME: "created"}
    # Started by the request: the step belongs to the creation's trace, a child of its span.
    assert step.context.trace_id == create.context.trace_id
    assert step.parent is not None
    assert step.parent.span_id == create.context.span_id
    gets = _named(exporter, "soklet.task.get")
    assert gets
    assert all(_attributes(get)[tracing.OPERATION] == "echo" for get in gets)
    assert _attributes(gets[-1])[tracing.OUTCOME] == "completed"
    # The step's store calls are its children.
    writes = [span for span in exporter.get_finished_spans() if span.name == "soklet.store replace_task"]
    assert any(write.parent is not None and write.parent.span_id == step.context.span_id for write in writes)
    _assert_clean(exporter, task_id)


def test_a_failed_step_carries_its_reason(client: Client, exporter: InMemorySpanExporter) -> None:
    failed = client.call("protocol.error", {}, capabilities=TASKS).result["taskId"]
    raised = client.call("boom", {}, capabilities=TASKS).result["taskId"]
    wait_for_task(client, failed, "failed")
    wait_for_task(client, raised, "failed")
    (tool_failed,) = _steps(exporter, "protocol.error")
    (step_failed,) = _steps(exporter, "boom")
    for span, reason in ((tool_failed, "tool-failed"), (step_failed, "step-failed")):
        attributes = _attributes(span)
        assert attributes[tracing.OUTCOME] == "failed"
        assert attributes[tracing.REASON] == reason
        assert attributes[ATTEMPT] == 1
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == reason
        assert not span.events  # the exception is never recorded: its text is the step's
    _assert_clean(exporter, failed, raised)


def test_each_round_is_a_step_span_and_an_update_has_its_own(client: Client, exporter: InMemorySpanExporter) -> None:
    task_id = client.call("ask", {}, capabilities=TASKS_FORM).result["taskId"]
    wait_for_task(client, task_id, "input_required")
    task_request(client, "tasks/update", task_id, inputResponses={"first": {"action": "accept", "content": {}}})
    wait_for_task(client, task_id, "completed")
    first, second = _steps(exporter, "ask", 2)
    assert _attributes(first)[tracing.OUTCOME] == "input_required"
    assert _attributes(second)[tracing.OUTCOME] == "completed"
    assert _attributes(second)[ATTEMPT] == 1  # attempts count within a round
    (update,) = _named(exporter, "soklet.task.update")
    assert _attributes(update) == {tracing.OPERATION: "ask", tracing.OUTCOME: "updated"}
    assert second.parent is not None
    assert second.parent.span_id == update.context.span_id
    _assert_clean(exporter, task_id)


def test_a_cancelled_step_and_a_refused_get(client: Client, exporter: InMemorySpanExporter) -> None:
    task_id = client.call("slow", {}, capabilities=TASKS).result["taskId"]
    assert task_request(client, "tasks/cancel", task_id).status == 200
    (step,) = _steps(exporter, "slow")
    assert _attributes(step)[tracing.OUTCOME] == "cancelled"
    assert step.status.status_code is StatusCode.UNSET
    (cancel,) = _named(exporter, "soklet.task.cancel")
    assert _attributes(cancel) == {tracing.OPERATION: "slow", tracing.OUTCOME: "cancelled"}
    unknown = "unknown-task-Hx73"
    assert task_request(client, "tasks/get", unknown).status == 400
    refused = _named(exporter, "soklet.task.get")[-1]
    assert _attributes(refused) == {tracing.OUTCOME: "refused", tracing.REASON: "not-found", "error.type": "not-found"}
    assert refused.status.status_code is StatusCode.ERROR
    _assert_clean(exporter, task_id, unknown)


def test_an_inline_run_is_one_span(client: Client, exporter: InMemorySpanExporter) -> None:
    assert client.call("echo", {"text": SECRET}).status == 200
    (inline,) = _named(exporter, "soklet.task.run_inline")
    assert _attributes(inline) == {tracing.OPERATION: "echo", tracing.OUTCOME: "completed"}
    _assert_clean(exporter)


def test_a_step_the_sweep_starts_is_a_trace_of_its_own(sqlite_store_url: str, exporter: InMemorySpanExporter) -> None:
    STALLS.clear()

    async def scenario() -> str:
        store = open_store(sqlite_store_url)
        first = TaskManager(store, registry=REGISTRY)
        second = TaskManager(store, registry=REGISTRY)
        try:
            with tracing.span("request"):
                created = await first.create(
                    tool=stall_once,
                    admission=Admission(Identity("someone"), "p-1"),
                    arguments=JsonObject.empty_instance(),
                    capabilities=ClientCapabilities.from_mapping(TASKS),
                    start=StartTask(),
                )
            while not STALLS:
                await asyncio.sleep(0.01)
            await first.close()  # the running step is stopped and its lease given back
            with tracing.span("sweeper"):
                assert await second.sweep_orphans() == 1
            task_id: str = json.loads(created)["taskId"]
            deadline = time.monotonic() + SPAN_SECONDS
            while (record := await store.get_task(task_id)) is None or record.status is not TaskStatus.COMPLETED:
                assert time.monotonic() < deadline, "the swept step did not complete"
                await asyncio.sleep(0.02)
            await second.close()
            return task_id
        finally:
            await store.close()

    task_id = asyncio.run(scenario())
    stopped, swept = _steps(exporter, "stall.once", 2)
    (request,) = _named(exporter, "request")
    (sweeper,) = _named(exporter, "sweeper")
    assert _attributes(stopped)[tracing.OUTCOME] == "stopped"
    assert stopped.context.trace_id == request.context.trace_id
    assert _attributes(swept)[tracing.OUTCOME] == "completed"
    assert _attributes(swept)[ATTEMPT] == 1  # the stopped run's attempt was given back with its lease
    assert swept.parent is None
    assert swept.context.trace_id not in {request.context.trace_id, sweeper.context.trace_id}
    _assert_clean(exporter, task_id)
