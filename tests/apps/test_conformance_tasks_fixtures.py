"""The tasks fixtures of ``--fixtures conformance`` driven directly: a real uvicorn serving the conformance registry
with a real SQLite store on a temporary folder, and a plain HTTP client sending what the conformance suite sends.

The suite runs these fixtures too (tests/conformance); here each behaviour the suite relies on is pinned on its
own, so a failing scenario points at the fixture or at the server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soklet_apps import conformance
from soklet_core.json import JsonObject, JsonValue
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import CallToolResult, Identity, McpServer, TaskContext
from soklet_core.mcp.model import ToolRegistration
from soklet_core.protection import ProtectionConfig
from soklet_core.protocol import TASKS_EXTENSION
from soklet_core.store import open_store, sqlite_url
from tests.server.support import TASK_CAPS, Client, Reply, running, task_request, wait_for_task

KEYRING = ProtectionKeyring(ProtectionKey.generate("tasks-fixtures"))
TERMINAL = ("completed", "failed", "cancelled")
MISSING_TASKS_DATA: dict[str, Any] = {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("tasks-fixtures")
    server = McpServer(
        conformance.build_registry(),
        protection=ProtectionConfig(keyring=KEYRING),
        store=open_store(sqlite_url(folder / "soklet.db")),
    )
    with running(server) as url:
        yield url


@pytest.fixture
def client(base_url: str) -> Iterator[Client]:
    c = Client(base_url)
    yield c
    c.close()


def create(client: Client, name: str, arguments: dict[str, Any]) -> str:
    """Call a task tool with the extension declared; the task id of its ``CreateTaskResult``."""
    created = client.call(name, arguments, capabilities=TASK_CAPS).result
    assert created["resultType"] == "task", created
    assert not {"result", "error", "inputRequests", "requestState"} & set(created)
    task_id: str = created["taskId"]
    return task_id


def ack(reply: Reply) -> dict[str, Any]:
    """A ``tasks/update|cancel`` answer without its ``_meta`` (server info): the empty ack is ``resultType`` alone."""
    return {name: value for name, value in reply.result.items() if name != "_meta"}


def test_discover_advertises_the_extension_and_lists_the_fixtures_after_the_others(client: Client) -> None:
    discover = client.post("server/discover").result
    assert discover["capabilities"]["extensions"][TASKS_EXTENSION] == {}
    assert "tasks" not in discover["capabilities"]
    names = [tool["name"] for tool in client.post("tools/list").result["tools"]]
    assert names[0] == "test_simple_text"
    assert names[-7:] == [
        "greet",
        "slow_compute",
        "failing_job",
        "protocol_error_job",
        "confirm_delete",
        "multi_input",
        "test_tool_with_task",
    ]


def test_greet_is_never_a_task(client: Client) -> None:
    for capabilities in ({}, TASK_CAPS):
        reply = client.call("greet", {"name": "sep-2243"}, capabilities=capabilities).result
        assert (reply["resultType"], reply["content"][0]["text"]) == ("complete", "Hello, sep-2243!")
        assert "taskId" not in reply
    legacy = client.call(
        "greet", {"name": "legacy-hint"}, capabilities=TASK_CAPS, params={"task": {"ttl": 60000, "pollInterval": 100}}
    ).result
    assert (legacy["resultType"], legacy["content"][0]["text"]) == ("complete", "Hello, legacy-hint!")
    too_long = client.call("greet", {"name": "x" * 257}).result
    assert too_long["isError"] is True


def test_slow_compute_runs_within_the_request_without_the_extension(client: Client) -> None:
    reply = client.call("slow_compute", {"seconds": 0, "label": "capability-no-ext"}).result
    assert reply["resultType"] == "complete"
    assert reply["content"][0]["text"] == "capability-no-ext: computed after 0 s"


@pytest.mark.slow
def test_slow_compute_completes_as_a_task_with_integer_wire_fields(client: Client) -> None:
    created = client.call("slow_compute", {"seconds": 1, "label": "wire-fields"}, capabilities=TASK_CAPS).result
    assert created["resultType"] == "task"
    assert created["ttlMs"] is None or (isinstance(created["ttlMs"], int) and created["ttlMs"] > 0)
    assert isinstance(created["pollIntervalMs"], int)
    assert created["pollIntervalMs"] > 0
    assert not {"ttl", "pollInterval", "task"} & set(created)
    done = wait_for_task(client, created["taskId"], *TERMINAL)
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "wire-fields: computed after 1 s"
    assert "io.modelcontextprotocol/related-task" not in done["result"].get("_meta", {})


def test_slow_compute_60_is_cancelled_at_once(client: Client) -> None:
    task_id = create(client, "slow_compute", {"seconds": 60, "label": "lifecycle-cancel"})
    assert task_request(client, "tasks/get", task_id).result["status"] == "working"
    assert ack(task_request(client, "tasks/cancel", task_id)) == {"resultType": "complete"}
    assert wait_for_task(client, task_id, *TERMINAL)["status"] == "cancelled"
    # Cancelling a terminal task is the same empty ack.
    assert ack(task_request(client, "tasks/cancel", task_id)) == {"resultType": "complete"}


def test_failing_job_without_the_extension_is_32021_with_the_required_capability(client: Client) -> None:
    reply = client.call("failing_job", {})
    assert reply.error["code"] == -32021
    assert reply.error["data"] == MISSING_TASKS_DATA


@pytest.mark.slow
def test_failing_job_completes_with_a_tool_error(client: Client) -> None:
    done = wait_for_task(client, create(client, "failing_job", {}), *TERMINAL)
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert "error" not in done


def test_protocol_error_job_fails_with_a_json_rpc_error(client: Client) -> None:
    done = wait_for_task(client, create(client, "protocol_error_job", {}), *TERMINAL)
    assert done["status"] == "failed"
    assert done["error"]["code"] == -32603
    assert isinstance(done["error"]["message"], str)
    assert done["error"]["message"]
    assert "result" not in done


def test_confirm_delete_asks_through_the_task_and_completes_after_the_update(client: Client) -> None:
    task_id = create(client, "confirm_delete", {"filename": "mrtr-resume.txt"})
    waiting = wait_for_task(client, task_id, "input_required")
    assert waiting["status"] == "input_required"
    assert list(waiting["inputRequests"]) == ["confirm"]
    assert waiting["inputRequests"]["confirm"]["method"] == "elicitation/create"
    assert "requestState" not in waiting
    # A response for a key that is not outstanding is acked and ignored.
    ignored = task_request(client, "tasks/update", task_id, inputResponses={"unknown-key": {"ignored": True}})
    assert ack(ignored) == {"resultType": "complete"}
    assert task_request(client, "tasks/get", task_id).result["status"] == "input_required"
    answer = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    assert ack(task_request(client, "tasks/update", task_id, inputResponses=answer)) == {"resultType": "complete"}
    done = wait_for_task(client, task_id, *TERMINAL)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted mrtr-resume.txt")


def test_confirm_delete_declined_keeps_the_file(client: Client) -> None:
    task_id = create(client, "confirm_delete", {"filename": "keep.txt"})
    wait_for_task(client, task_id, "input_required")
    task_request(client, "tasks/update", task_id, inputResponses={"confirm": {"action": "decline"}})
    done = wait_for_task(client, task_id, *TERMINAL)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Kept keep.txt")


def test_multi_input_takes_a_partial_update_and_stays_input_required(client: Client) -> None:
    task_id = create(client, "multi_input", {})
    waiting = wait_for_task(client, task_id, "input_required")
    assert sorted(waiting["inputRequests"]) == ["confirm", "user_name"]
    # The suite answers each key with the same content; the fixture reads the field it asked for.
    first = {"user_name": {"action": "accept", "content": {"name": "partial-1", "confirm": True}}}
    assert ack(task_request(client, "tasks/update", task_id, inputResponses=first)) == {"resultType": "complete"}
    partial = task_request(client, "tasks/get", task_id).result
    assert partial["status"] == "input_required"
    assert list(partial["inputRequests"]) == ["confirm"]
    second = {"confirm": {"action": "accept", "content": {"name": "partial-2", "confirm": True}}}
    task_request(client, "tasks/update", task_id, inputResponses=second)
    done = wait_for_task(client, task_id, *TERMINAL)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "name: partial-1; confirmed")


def test_tool_with_task_settles_its_mrtr_round_before_the_task(client: Client) -> None:
    first = client.call("test_tool_with_task", {}, capabilities=TASK_CAPS).result
    assert first["resultType"] == "input_required"
    assert "taskId" not in first
    assert list(first["inputRequests"]) == ["user_name"]
    state = first["requestState"]
    answer = {"user_name": {"action": "accept", "content": {"name": "Alice"}}}
    # Without the sealed state the round is asked again; with a tampered one the call is refused.
    again = client.retry("test_tool_with_task", {}, None, answer, capabilities=TASK_CAPS).result
    assert again["resultType"] == "input_required"
    tampered = client.retry("test_tool_with_task", {}, state + "-TAMPERED", answer, capabilities=TASK_CAPS)
    assert "error" in tampered.body
    created = client.retry("test_tool_with_task", {}, state, answer, capabilities=TASK_CAPS).result
    assert created["resultType"] == "task"
    assert not {"requestState", "inputRequests"} & set(created)
    done = wait_for_task(client, created["taskId"], *TERMINAL)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Hello, Alice!")


def test_tool_with_task_needs_the_extension(client: Client) -> None:
    reply = client.call("test_tool_with_task", {}, capabilities={"elicitation": {}})
    assert reply.error["code"] == -32021
    assert reply.error["data"] == MISSING_TASKS_DATA


# --- the steps on their own (no server: a TaskContext built by hand) ---------------------------------------------


def step_of(name: str) -> Any:
    registration = conformance.build_registry().find_tool(name)
    assert isinstance(registration, ToolRegistration)
    assert registration.task_step is not None
    return registration.task_step


def context(tool: str, arguments: dict[str, Any], *, cancelled: bool = False) -> TaskContext:
    wire = JsonValue.from_python(arguments)
    assert isinstance(wire, JsonObject)
    return TaskContext(
        task_id="t-1",
        tool=tool,
        identity=Identity.anonymous(),
        partition="default",
        arguments=wire,
        cancel_check=lambda: cancelled,
    )


def test_slow_compute_stops_before_sleeping_once_cancel_is_requested() -> None:
    result = asyncio.run(
        step_of("slow_compute")(context("slow_compute", {"seconds": 60, "label": "x"}, cancelled=True))
    )
    assert isinstance(result, CallToolResult)
    assert result.is_error


@pytest.mark.parametrize("seconds", [-1, 301, "1", None])
def test_slow_compute_refuses_seconds_outside_its_bounds(seconds: Any) -> None:
    arguments = {} if seconds is None else {"seconds": seconds}
    result = asyncio.run(step_of("slow_compute")(context("slow_compute", arguments)))
    assert isinstance(result, CallToolResult)
    assert result.is_error


def test_without_tasks_the_registry_has_no_task_tools(tmp_path: Path) -> None:
    registry = conformance.build_registry(tasks=False)
    names = [tool.name for tool in registry.tools]
    assert "slow_compute" not in names
    assert "greet" not in names
    assert all(tool.task_step is None for tool in registry.tools)
    # Such a registry needs no store.
    assert McpServer(registry, protection=ProtectionConfig(keyring=KEYRING)).task_manager is None
