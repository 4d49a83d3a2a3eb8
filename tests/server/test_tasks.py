"""The tasks extension over real uvicorn and a real store: creation, tasks/get, tasks/update, tasks/cancel, the
refusals, and a restart between tasks/update and tasks/get (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import string
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from soklet_core.json import JsonObject
from soklet_core.mcp import (
    BearerTokenAdmission,
    CallToolResult,
    ClientCapabilities,
    Identity,
    InputRequest,
    InputRequiredResult,
    McpServer,
    Registry,
    RequestContext,
    ServerOptions,
    StartTask,
    TaskContext,
    TaskSupport,
    task_tool,
    tool,
)
from soklet_core.mcp.model import TaskFailed, TaskInputRequired, ToolRegistration
from soklet_core.mcp.server.admission import Admission, BearerTokenEntry
from soklet_core.mcp.server.durable._tasks import TaskManager, new_task_id
from soklet_core.mcp.server.options import TaskOptions
from soklet_core.store import DurableStore, open_store
from tests.server.support import FORM, OBJECT, TASKS, TASKS_FORM, Client, running, task_request, wait_for_task

URL_SAFE = string.ascii_letters + string.digits + "-_"
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _form(message: str) -> InputRequest:
    return InputRequest(
        FORM,
        {
            "message": message,
            "mode": "form",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        },
    )


@task_tool(name="echo", description="Echo the text argument.", input_schema=OBJECT)
async def echo(context: TaskContext) -> CallToolResult:
    text = context.arguments.get("text")
    return CallToolResult.from_text(f"echo {text.to_python() if text is not None else ''}")


@task_tool(name="tool.error", description="A tool error.", input_schema=OBJECT, task_support=TaskSupport.REQUIRED)
def tool_error(context: TaskContext) -> CallToolResult:
    return CallToolResult.error_text("it went wrong")


@task_tool(name="protocol.error", description="A failed task.", input_schema=OBJECT)
async def protocol_error(context: TaskContext) -> TaskFailed:
    return TaskFailed(-32000, "The job failed")


@task_tool(name="boom", description="A step that raises.", input_schema=OBJECT)
async def boom(context: TaskContext) -> CallToolResult:
    raise RuntimeError("secret detail")


@task_tool(
    name="ask",
    description="Asks two questions, then answers.",
    input_schema=OBJECT,
    input_request_declarations=[FORM],
    task_support=TaskSupport.REQUIRED,
)
async def ask(context: TaskContext) -> CallToolResult | TaskInputRequired:
    if context.round == 1:
        return TaskInputRequired({"first": _form("First?"), "second": _form("Second?")}, state={"asked": 2})
    answers = sorted(context.input_responses.keys())
    state = context.state.to_python() if context.state is not None else None
    return CallToolResult.from_text(f"round {context.round} state {state} answers {answers}")


@task_tool(name="reuse", description="Re-uses a key.", input_schema=OBJECT, input_request_declarations=[FORM])
async def reuse(context: TaskContext) -> TaskInputRequired:
    return TaskInputRequired({"same": _form("Again?")})


@task_tool(name="slow", description="Runs until cancelled.", input_schema=OBJECT)
async def slow(context: TaskContext) -> CallToolResult:
    await asyncio.sleep(120)
    return CallToolResult.from_text("late")


def _mrtr_then_task(context: RequestContext, arguments: JsonObject) -> InputRequiredResult | StartTask:
    name = context.input_responses.find_content("who", "name")
    if name is None:
        request = InputRequest(
            FORM,
            {
                "message": "Name?",
                "mode": "form",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
        )
        return InputRequiredResult({"who": request})
    return StartTask(state={"name": name.to_python()}, status_message="Starting.")


async def _greet_step(context: TaskContext) -> CallToolResult:
    assert isinstance(context.state, JsonObject)
    return CallToolResult.from_text(f"Hello, {context.state['name'].to_python()}")


MRTR = ToolRegistration(
    _mrtr_then_task,
    name="mrtr.task",
    description="An MRTR round, then a task.",
    input_schema=OBJECT,
    input_request_declarations=[FORM],
    task_support=TaskSupport.REQUIRED,
    task_step=_greet_step,
)


RUNS: list[int] = []


@task_tool(name="resumable", description="Stalls on its first run, finishes on the next.", input_schema=OBJECT)
async def resumable(context: TaskContext) -> CallToolResult:
    RUNS.append(len(RUNS) + 1)
    if len(RUNS) == 1:
        await asyncio.sleep(120)  # cut off by the server's stop
    return CallToolResult.from_text(f"run {len(RUNS)}")


@task_tool(name="crashable", description="Stalls in a process that is about to be killed.", input_schema=OBJECT)
async def crashable(context: TaskContext) -> CallToolResult:
    if os.environ.get("SOKLET_TEST_STALL") == "1":
        await asyncio.sleep(120)
    return CallToolResult.from_text("finished elsewhere")


@tool(name="not.a.task", description="Answers StartTask without task support.", input_schema=OBJECT)
def not_a_task(context: RequestContext, arguments: JsonObject) -> StartTask:
    return StartTask()


REGISTRY = Registry(echo, tool_error, protocol_error, boom, ask, reuse, slow, MRTR, resumable, crashable, not_a_task)
TOKENS = {"alice-token": BearerTokenEntry("alice", "p1"), "bob-token": BearerTokenEntry("bob", "p1")}


@contextlib.contextmanager
def serving(url: str, **options: Any) -> Iterator[tuple[str, McpServer]]:
    store: DurableStore = open_store(url)
    server = McpServer(REGISTRY, store=store, admission=BearerTokenAdmission(TOKENS), **options)
    try:
        with running(server) as base:
            yield base, server
    finally:
        with contextlib.suppress(Exception):
            asyncio.run(store.close())


@pytest.fixture
def base(sqlite_store_url: str) -> Iterator[str]:
    with serving(sqlite_store_url) as (url, _store):
        yield url


def _client(base: str, token: str = "alice-token") -> Client:
    return Client(base, token=token)


def test_discover_advertises_the_extension(base: str) -> None:
    result = _client(base).post("server/discover").result
    assert result["capabilities"]["extensions"] == {"io.modelcontextprotocol/tasks": {}}
    assert "tasks" not in result["capabilities"]


def test_task_tools_need_a_store() -> None:
    with pytest.raises(ValueError, match="store"):
        McpServer(REGISTRY)


def test_a_task_is_created_stored_and_completed(base: str) -> None:
    client = _client(base)
    created = client.call("echo", {"text": "hi"}, capabilities=TASKS, params={"task": {"ttl": 5}}).result
    assert created["resultType"] == "task"
    assert set(created) == {
        "resultType",
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
        "_meta",
    }
    assert created["status"] == "working"
    assert created["ttlMs"] == 3_600_000
    assert created["pollIntervalMs"] == 500
    assert ISO.fullmatch(created["createdAt"])
    assert ISO.fullmatch(created["lastUpdatedAt"])
    assert len(created["taskId"]) >= 43
    # Durable creation: an immediate tasks/get resolves.
    first = task_request(client, "tasks/get", created["taskId"])
    assert first.status == 200
    assert first.result["resultType"] == "complete"
    done = wait_for_task(client, created["taskId"], "completed")
    assert done["result"]["content"] == [{"type": "text", "text": "echo hi"}]
    assert "_meta" not in done["result"]
    assert "requestState" not in done


def test_optional_without_the_extension_runs_inline(base: str) -> None:
    reply = _client(base).call("echo", {"text": "now"})
    assert reply.status == 200
    assert reply.text == "echo now"
    assert reply.result["resultType"] == "complete"


def test_required_without_the_extension_is_missing_capability(base: str) -> None:
    reply = _client(base).call("tool.error", {})
    assert reply.status == 400
    assert reply.error["code"] == -32021
    assert reply.error["data"] == {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


def test_tool_error_completes_and_protocol_error_fails(base: str) -> None:
    client = _client(base)
    task = client.call("tool.error", {}, capabilities=TASKS).result["taskId"]
    done = wait_for_task(client, task, "completed", "failed")
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    task = client.call("protocol.error", {}, capabilities=TASKS).result["taskId"]
    failed = wait_for_task(client, task, "completed", "failed")
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": -32000, "message": "The job failed"}
    assert "result" not in failed
    task = client.call("boom", {}, capabilities=TASKS).result["taskId"]
    failed = wait_for_task(client, task, "completed", "failed")
    assert failed["error"] == {"code": -32603, "message": "Internal error"}
    assert failed["statusMessage"] == "Internal error"


def test_input_through_the_task_with_a_partial_update(base: str) -> None:
    client = _client(base)
    task = client.call("ask", {}, capabilities=TASKS_FORM).result["taskId"]
    waiting = wait_for_task(client, task, "input_required")
    assert set(waiting["inputRequests"]) == {"first", "second"}
    assert waiting["inputRequests"]["first"]["method"] == "elicitation/create"
    accept = {"action": "accept", "content": {"ok": True}}
    ack = task_request(client, "tasks/update", task, inputResponses={"first": accept, "never-issued": accept})
    assert ack.status == 200
    assert set(ack.result) == {"resultType", "_meta"}
    assert ack.result["resultType"] == "complete"
    still = task_request(client, "tasks/get", task).result
    assert still["status"] == "input_required"
    assert set(still["inputRequests"]) == {"second"}
    assert "requestState" not in still
    # A repeated answer to an answered key is ignored.
    assert task_request(client, "tasks/update", task, inputResponses={"first": accept}).status == 200
    task_request(client, "tasks/update", task, inputResponses={"second": accept})
    done = wait_for_task(client, task, "completed")
    assert done["result"]["content"][0]["text"] == "round 2 state {'asked': Decimal('2')} answers ['first', 'second']"
    # Updating a terminal task is acked and changes nothing.
    late = task_request(client, "tasks/update", task, inputResponses={"second": accept})
    assert late.result["resultType"] == "complete"


def test_an_update_outside_the_protocol_union_is_refused(base: str) -> None:
    client = _client(base)
    task = client.call("ask", {}, capabilities=TASKS_FORM).result["taskId"]
    wait_for_task(client, task, "input_required")
    reply = task_request(client, "tasks/update", task, inputResponses={"first": {"roots": []}})
    assert reply.status == 400
    assert reply.error["code"] == -32602


def test_a_step_without_the_capability_it_asks_for_fails(base: str) -> None:
    client = _client(base)
    task = client.call("ask", {}, capabilities=TASKS).result["taskId"]
    failed = wait_for_task(client, task, "failed")
    assert failed["error"]["code"] == -32021
    assert failed["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}


def test_a_reused_key_fails_the_task(base: str) -> None:
    client = _client(base)
    task = client.call("reuse", {}, capabilities=TASKS_FORM).result["taskId"]
    wait_for_task(client, task, "input_required")
    task_request(client, "tasks/update", task, inputResponses={"same": {"action": "decline"}})
    failed = wait_for_task(client, task, "failed")
    assert failed["error"] == {"code": -32603, "message": "Internal error"}


def test_cancel_is_immediate_and_idempotent(base: str) -> None:
    client = _client(base)
    task = client.call("slow", {}, capabilities=TASKS).result["taskId"]
    ack = task_request(client, "tasks/cancel", task)
    assert ack.status == 200
    assert set(ack.result) == {"resultType", "_meta"}
    assert task_request(client, "tasks/get", task).result["status"] == "cancelled"
    again = task_request(client, "tasks/cancel", task)
    assert again.status == 200
    assert again.result["resultType"] == "complete"


def test_mrtr_rounds_settle_before_the_task(base: str) -> None:
    client = _client(base)
    first = client.call("mrtr.task", {}, capabilities=TASKS_FORM).result
    assert first["resultType"] == "input_required"
    assert "taskId" not in first
    answer = {"who": {"action": "accept", "content": {"name": "Alice"}}}
    created = client.retry("mrtr.task", {}, None, answer, capabilities=TASKS_FORM).result
    assert created["resultType"] == "task"
    assert created["statusMessage"] == "Starting."
    assert "requestState" not in created
    assert "inputRequests" not in created
    done = wait_for_task(client, created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "Hello, Alice"


def test_refusals(base: str) -> None:
    client = _client(base)
    task = client.call("slow", {}, capabilities=TASKS).result["taskId"]
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        reply = task_request(client, method, task, capabilities={})
        assert reply.status == 400, method
        assert reply.error["code"] == -32021
        assert reply.error["data"] == {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    mismatch = client.post("tasks/get", {"taskId": task}, capabilities=TASKS, headers={"Mcp-Name": "other"})
    assert mismatch.status == 400
    assert mismatch.error["code"] == -32020
    wrong_method = client.call("echo", {}, capabilities=TASKS, headers={"Mcp-Method": "tasks/get"})
    assert wrong_method.status == 400
    assert wrong_method.error["code"] == -32020
    unknown = task_request(client, "tasks/get", "x" * 43)
    assert unknown.status == 400
    assert unknown.error == {
        "code": -32602,
        "message": "Failed to retrieve task: Task not found",
    }
    # Another caller's task: the same answer, byte for byte in the error.
    bob = _client(base, "bob-token")
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        assert task_request(bob, method, task).error == unknown.error
    for method in ("tasks/result", "tasks/list"):
        reply = task_request(client, method, task)
        assert reply.status == 404
        assert reply.error["code"] == -32601
    not_task = client.call("not.a.task", {}, capabilities=TASKS)
    assert not_task.error["code"] == -32603
    task_request(client, "tasks/cancel", task)


def _restart_flow(url: str) -> None:
    with serving(url) as (base, _store):
        client = _client(base)
        task = client.call("ask", {}, capabilities=TASKS_FORM).result["taskId"]
        wait_for_task(client, task, "input_required")
        accept = {"action": "accept", "content": {"ok": True}}
        task_request(client, "tasks/update", task, inputResponses={"first": accept})
    with serving(url) as (base, _store):
        client = _client(base)
        waiting = task_request(client, "tasks/get", task).result
        assert waiting["status"] == "input_required"
        assert set(waiting["inputRequests"]) == {"second"}
        task_request(client, "tasks/update", task, inputResponses={"second": accept})
    with serving(url) as (base, _store):
        client = _client(base)
        done = wait_for_task(client, task, "completed")
        assert done["result"]["content"][0]["text"].startswith("round 2")


@pytest.mark.slow
def test_a_restart_between_update_and_get_loses_nothing(store_url: str) -> None:
    _restart_flow(store_url)


def test_a_step_cut_off_by_a_stop_is_run_again_by_the_next_server(store_url: str) -> None:
    RUNS.clear()
    with serving(store_url) as (base, _server):
        client = _client(base)
        task = client.call("resumable", {}, capabilities=TASKS).result["taskId"]
        deadline = time.monotonic() + 60
        while not RUNS:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    # The stop cancelled the step and gave its lease back: the next server runs it at once, not after the lease.
    with serving(store_url) as (base, _server):
        done = wait_for_task(_client(base), task, "completed", "failed")
        assert done["result"]["content"][0]["text"] == "run 2"


def test_figures_count_tasks_by_status(sqlite_store_url: str) -> None:
    with serving(sqlite_store_url) as (base, server):
        client = _client(base)
        wait_for_task(client, client.call("echo", {}, capabilities=TASKS).result["taskId"], "completed")
        task_request(client, "tasks/cancel", client.call("slow", {}, capabilities=TASKS).result["taskId"])
        manager = server.task_manager
        assert manager is not None
        figures = asyncio.run(manager.figures())
    assert figures["completed"] == 1
    assert figures["cancelled"] == 1
    assert figures["working"] == 0


def test_a_server_without_a_store_has_no_tasks() -> None:
    server = McpServer(Registry(not_a_task))
    with running(server) as base:
        client = Client(base)
        assert "extensions" not in client.post("server/discover").result["capabilities"]
        reply = task_request(client, "tasks/get", "x" * 43)
        assert reply.status == 400
        assert reply.error == {"code": -32602, "message": "Failed to retrieve task: Task not found"}


def test_a_2025_era_session_runs_optional_tools_inline_and_refuses_required_ones(sqlite_store_url: str) -> None:
    with serving(sqlite_store_url) as (base, _server):
        http = httpx.Client(timeout=20)
        head = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": "Bearer alice-token",
        }
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tasks": {}},
            "clientInfo": {"name": "t", "version": "1"},
        }
        opened = http.post(
            base + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=head
        )
        assert opened.status_code == 200
        head |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        http.post(base + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=head)

        def call(name: str) -> dict[str, Any]:
            body = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": name, "arguments": {"text": "x"}},
            }
            answer: dict[str, Any] = http.post(base + "/mcp", json=body, headers=head).json()
            return answer

        assert call("echo")["result"]["content"][0]["text"] == "echo x"
        # The 2025 era tells a tools/call's missing capability as a tool error naming it.
        refused = call("tool.error")["result"]
        assert refused["isError"] is True
        assert "io.modelcontextprotocol/tasks" in refused["content"][0]["text"]
        http.close()


def test_inline_runs_answer_a_failed_step_as_its_error(base: str) -> None:
    client = _client(base)
    failed = client.call("protocol.error", {})
    assert failed.status == 200
    assert failed.error == {"code": -32000, "message": "The job failed"}
    raised = client.call("boom", {})
    assert raised.error == {"code": -32603, "message": "Internal error"}
    # A step that asks for input cannot do so without a task.
    asked = client.call("reuse", {}, capabilities={"elicitation": {}})
    assert asked.error == {"code": -32603, "message": "Internal error"}


def test_an_expired_task_is_not_found_and_its_owner_is_told_why(sqlite_store_url: str) -> None:
    with serving(sqlite_store_url, options=ServerOptions(tasks=TaskOptions(ttl_ms=1))) as (base, _server):
        client = _client(base)
        created = client.call("slow", {}, capabilities=TASKS).result
        assert created["ttlMs"] == 1
        time.sleep(0.01)
        expired = task_request(client, "tasks/get", created["taskId"])
        assert expired.status == 400
        assert expired.error == {"code": -32602, "message": "Failed to retrieve task: Task has expired"}
        other = task_request(_client(base, "bob-token"), "tasks/get", created["taskId"])
        assert other.error == {"code": -32602, "message": "Failed to retrieve task: Task not found"}


def test_unlimited_ttl_is_null(sqlite_store_url: str) -> None:
    unlimited = ServerOptions(tasks=TaskOptions(ttl_ms=None, poll_interval_ms=2000))
    with serving(sqlite_store_url, options=unlimited) as (base, _server):
        client = _client(base)
        created = client.call("echo", {}, capabilities=TASKS).result
        assert created["ttlMs"] is None
        assert created["pollIntervalMs"] == 2000
        assert wait_for_task(client, created["taskId"], "completed")["ttlMs"] is None


def test_one_caller_has_a_bounded_number_of_live_tasks(sqlite_store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from soklet_core.mcp.server.durable import _tasks as task_module

    monkeypatch.setattr(task_module, "MAX_LIVE_TASKS_PER_CALLER", 2)
    with serving(sqlite_store_url) as (base, _server):
        alice = _client(base)
        first = alice.call("slow", {}, capabilities=TASKS).result["taskId"]
        alice.call("slow", {}, capabilities=TASKS)
        refused = alice.call("slow", {}, capabilities=TASKS)
        assert refused.error == {"code": -32603, "message": "Too many tasks"}
        # Another caller is not affected; a task that ended frees a place.
        assert _client(base, "bob-token").call("slow", {}, capabilities=TASKS).result["resultType"] == "task"
        task_request(alice, "tasks/cancel", first)
        assert alice.call("slow", {}, capabilities=TASKS).result["resultType"] == "task"


_CHILD = """
import sys
from soklet_core.mcp import BearerTokenAdmission, McpServer
from soklet_core.mcp.server.http import uvicorn_config, uvicorn_server_class
from soklet_core.store import open_store
from tests.server.test_tasks import REGISTRY, TOKENS
server = McpServer(REGISTRY, store=open_store(sys.argv[1]), admission=BearerTokenAdmission(TOKENS))
uvicorn_server_class()(uvicorn_config(server, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")).run()
"""


@pytest.mark.slow
def test_a_step_of_a_killed_process_is_run_again_once_its_lease_ends(sqlite_store_url: str) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "SOKLET_TEST_STALL": "1"}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, sqlite_store_url, str(port)],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = Client(f"http://127.0.0.1:{port}", token="alice-token")
        deadline = time.monotonic() + 30
        while True:
            try:
                created = client.call("crashable", {}, capabilities=TASKS)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the child server did not start"
                time.sleep(0.1)
        task = created.result["taskId"]
        assert task_request(client, "tasks/get", task).result["status"] == "working"
    finally:
        child.kill()  # no shutdown: the lease is not given back
        child.wait(10)
    with serving(sqlite_store_url) as (base, _server):
        done = wait_for_task(_client(base), task, "completed", "failed")
        assert done["result"]["content"][0]["text"] == "finished elsewhere"


@pytest.mark.slow
def test_two_servers_on_one_store_serve_one_task_interchangeably(store_url: str) -> None:
    accept = {"action": "accept", "content": {"ok": True}}
    with serving(store_url) as (first_base, _first), serving(store_url) as (second_base, _second):
        first, second = _client(first_base), _client(second_base)
        task = first.call("ask", {}, capabilities=TASKS_FORM).result["taskId"]
        assert set(wait_for_task(second, task, "input_required")["inputRequests"]) == {"first", "second"}
        task_request(second, "tasks/update", task, inputResponses={"first": accept})
        assert set(task_request(first, "tasks/get", task).result["inputRequests"]) == {"second"}
        task_request(first, "tasks/update", task, inputResponses={"second": accept})
        done = wait_for_task(second, task, "completed")
        assert done["result"]["content"][0]["text"].startswith("round 2")
        assert wait_for_task(first, task, "completed") == done


def test_the_manager_purges_expired_tasks_before_every_nth_creation(store_url: str) -> None:
    async def scenario() -> tuple[int, list[str], list[str]]:
        store = open_store(store_url)
        await store.open()
        manager = TaskManager(store, registry=Registry(echo), options=TaskOptions(ttl_ms=1), purge_every=3)
        owner = Admission(Identity("alice"), "p-alice")
        capabilities = ClientCapabilities.from_mapping(TASKS)

        async def create() -> None:
            await manager.create(
                tool=echo,
                admission=owner,
                arguments=JsonObject.empty_instance(),
                capabilities=capabilities,
                start=StartTask(),
            )

        try:
            await create()
            await create()
            await asyncio.sleep(0.05)  # both are past their 1 ms time to live
            expired = [record.task_id for record in await store.list_tasks()]
            await create()  # the third creation purges first
            kept = [record.task_id for record in await store.list_tasks()]
            purged_on_demand = await manager.purge_expired()
            return purged_on_demand, expired, kept
        finally:
            await manager.close()
            await store.close()

    purged_on_demand, expired, kept = asyncio.run(scenario())
    assert len(expired) == 2
    assert len(kept) == 1
    assert kept[0] not in expired
    assert purged_on_demand in (0, 1)  # the third task may have expired meanwhile too
    with pytest.raises(ValueError, match="purge_every"):
        TaskManager(open_store(store_url), registry=Registry(echo), purge_every=0)


def test_a_new_task_id_never_begins_with_a_dash() -> None:
    # One draw in 64 would: 10,000 draws without one cannot happen by chance (about e**-156).
    ids = [new_task_id() for _ in range(10_000)]
    assert not any(task_id.startswith("-") for task_id in ids)
    assert {len(task_id) for task_id in ids} == {43}
    assert all(set(task_id) <= set(URL_SAFE) for task_id in ids)
    assert len(set(ids)) == len(ids)
