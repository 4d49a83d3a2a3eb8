"""The engine as a library caller drives it: build a ``Call``, get an ``Outcome``; no HTTP, no header, no bytes in.

Each outcome kind (complete, input required with a sealed state that opens on the retry, task created with a real
SQLite store) and each refusal kind the engine itself produces, from the call's values alone.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from soklet_core.json import JsonNumber, JsonObject, ParamsDigest
from soklet_core.json.limits import INLINE_BODY_BYTES
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import (
    CallToolResult,
    ClientCapabilities,
    InputRequest,
    InputRequestDeclaration,
    InputRequiredResult,
    InputRequirement,
    McpError,
    Registry,
    RequestContext,
    RequestStateMode,
    TaskContext,
    task_tool,
    tool,
)
from soklet_core.mcp.model import TaskFailed, methods
from soklet_core.mcp.server.durable._tasks import TaskError, TaskErrorReason, TaskManager
from soklet_core.mcp.server.engine import (
    MAX_CONCURRENT_LARGE_BODIES,
    AnonymousAdmission,
    Call,
    CanonicalParams,
    Complete,
    DigestSource,
    EncodedResult,
    Engine,
    InputRequired,
    Outcome,
    RefusalKind,
    Refused,
    TaskCreated,
)
from soklet_core.mcp.server.engine._engine import task_refusal
from soklet_core.protection import ProtectionConfig, RequestStateSealer
from soklet_core.protocol import PROTOCOL_VERSION
from soklet_core.store import DurableStore, StoreError, StoreErrorReason, open_store

FORM = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
FORM_CAPS: Mapping[str, Any] = {"elicitation": {"form": {}}}
TASKS_CAPS: Mapping[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
ADMISSION = AnonymousAdmission().admit(None)  # type: ignore[arg-type]
SEALER = RequestStateSealer(ProtectionConfig(keyring=ProtectionKeyring(ProtectionKey.generate("engine-key"))))


def approval() -> InputRequest:
    return InputRequest(
        FORM, {"message": "Go on?", "mode": "form", "requestedSchema": {"type": "object", "properties": {}}}
    )


@tool(
    name="ask",
    description="Asks once with a framework state, then answers with the state it was given back.",
    input_schema={"type": "object"},
    input_request_declarations=[FORM],
    request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    blocking=False,
)
def ask(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
    if context.framework_request_state is None:
        return InputRequiredResult.with_input_request("approval", approval()).framework_request_state({"n": 1}).build()
    return CallToolResult.from_text(f"state {context.framework_request_state.to_python()}")


@tool(name="plain", description="Answers at once.", input_schema={"type": "object"}, blocking=False)
def plain(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    return CallToolResult.from_text("plain")


@tool(name="boom", description="Fails.", input_schema={"type": "object"}, blocking=False)
def boom(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    raise RuntimeError("secret detail")


@tool(name="own.error", description="Answers its own error.", input_schema={"type": "object"}, blocking=False)
def own_error(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    raise McpError(-32000, "Not today")


@tool(name="wrong.type", description="Answers a string.", input_schema={"type": "object"}, blocking=False)
def wrong_type(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    return "not a result"  # type: ignore[return-value]


@tool(name="store.down", description="Its store is out of reach.", input_schema={"type": "object"}, blocking=False)
def store_down(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    raise StoreError(StoreErrorReason.UNAVAILABLE, "store out of reach")


@task_tool(name="echo", description="Echo as a task.", input_schema={"type": "object"})
async def echo(context: TaskContext) -> CallToolResult:
    return CallToolResult.from_text("echo")


REGISTRY = Registry(ask, plain, boom, own_error, wrong_type, store_down)


class CountedDigest:
    """A digest source over the params value that counts how often the engine takes it, and may hold the taking
    thread at a gate (to keep every worker busy)."""

    def __init__(self, params: JsonObject, *, size: int = 0, gate: threading.Event | None = None) -> None:
        self._source = CanonicalParams(params, size)
        self._gate = gate
        self.taken = 0

    @property
    def size(self) -> int:
        return self._source.size

    def take(self) -> ParamsDigest:
        self.taken += 1
        if self._gate is not None:
            self._gate.wait(60)
        return self._source.take()


def make_call(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    caps: Mapping[str, Any] = FORM_CAPS,
    digest: DigestSource | None = None,
    request_id: int = 1,
) -> Call:
    value = JsonObject.from_mapping(dict(params or {}))
    return Call(
        method=method,
        request_id=JsonNumber.from_value(request_id),
        protocol_version=PROTOCOL_VERSION,
        params=value,
        meta=JsonObject.empty_instance(),
        capabilities=ClientCapabilities.from_json(JsonObject.from_mapping(dict(caps))),
        admission=ADMISSION,
        endpoint_path="/mcp",
        digest=digest if digest is not None else CanonicalParams(value),
    )


def run(engine: Engine, call: Call) -> Outcome:
    return asyncio.run(engine.call(call, None))


def refused(outcome: Outcome) -> tuple[RefusalKind, int, str]:
    assert isinstance(outcome, Refused), outcome
    return outcome.kind, outcome.error.code, outcome.error.log_reason


ENGINE = Engine(registry=REGISTRY, sealer=SEALER)


# ------------------------------------------------------------------------------------------------ outcomes


def test_a_list_is_complete_with_its_pre_encoded_result() -> None:
    outcome = run(ENGINE, make_call(methods.TOOLS_LIST))
    assert isinstance(outcome, Complete)
    assert isinstance(outcome.result, EncodedResult)
    names = [item["name"] for item in outcome.result.to_wire().to_python()["tools"]]  # type: ignore[index]
    assert names == ["ask", "plain", "boom", "own.error", "wrong.type", "store.down"]


def test_a_tool_call_is_complete_with_the_handler_result_as_a_value() -> None:
    outcome = run(ENGINE, make_call(methods.TOOLS_CALL, {"name": "plain"}))
    assert isinstance(outcome, Complete)
    assert isinstance(outcome.result, CallToolResult)
    assert outcome.operation == "plain"


def test_input_required_carries_a_sealed_state_that_opens_on_the_retry() -> None:
    first = run(ENGINE, make_call(methods.TOOLS_CALL, {"name": "ask"}))
    assert isinstance(first, InputRequired)
    assert first.operation == "ask"
    assert first.sealed_state is not None
    retry = {
        "name": "ask",
        "inputResponses": {"approval": {"action": "accept", "content": {}}},
        "requestState": first.sealed_state,
    }
    digest = CountedDigest(JsonObject.from_mapping(retry))
    second = run(ENGINE, make_call(methods.TOOLS_CALL, retry, digest=digest, request_id=2))
    assert isinstance(second, Complete), second
    assert isinstance(second.result, CallToolResult)
    assert second.result.to_wire().to_python()["content"][0]["text"] == "state {'n': Decimal('1')}"  # type: ignore[index]
    assert digest.taken == 1  # one digest for the open; no state emitted, nothing sealed


def test_a_task_tool_with_the_extension_creates_a_task_in_the_store(sqlite_store_url: str) -> None:
    async def scenario() -> Outcome:
        store: DurableStore = open_store(sqlite_store_url)
        registry = Registry(echo)
        manager = TaskManager(store, registry=registry)
        await manager.open()
        try:
            engine = Engine(registry=registry, tasks=manager)
            caps = {**TASKS_CAPS}
            return await engine.call(make_call(methods.TOOLS_CALL, {"name": "echo"}, caps=caps), None)
        finally:
            await manager.close()
            await store.close()

    outcome = asyncio.run(scenario())
    assert isinstance(outcome, TaskCreated), outcome
    created = outcome.result.to_wire().to_python()
    assert created["resultType"] == "task", created  # type: ignore[index]
    assert outcome.operation == "echo"


# ------------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (make_call("tools/nope"), (RefusalKind.METHOD_NOT_FOUND, -32601, "method-not-found")),
        (make_call(methods.TOOLS_CALL, {"name": 5}), (RefusalKind.INVALID_PARAMS, -32602, "name-missing")),
        (
            make_call(methods.TOOLS_CALL, {"name": "plain", "arguments": 5}),
            (RefusalKind.INVALID_PARAMS, -32602, "arguments"),
        ),
        (make_call(methods.TOOLS_CALL, {"name": "nope"}), (RefusalKind.UNKNOWN_OPERATION, -32602, "unknown-tool")),
        (
            make_call(methods.TOOLS_CALL, {"name": "ask", "inputResponses": 5}),
            (RefusalKind.INPUT_RESPONSES, -32602, "input-responses"),
        ),
        (
            make_call(methods.TOOLS_CALL, {"name": "ask", "requestState": "not-a-state"}),
            (RefusalKind.STATE_REFUSED, -32602, "state-"),
        ),
        (
            make_call(methods.TOOLS_CALL, {"name": "ask"}, caps={}),
            (RefusalKind.MISSING_CAPABILITY, -32021, "missing-capability"),
        ),
        (
            make_call(methods.TASKS_GET, {"taskId": "t"}, caps={}),
            (RefusalKind.MISSING_CAPABILITY, -32021, "missing-capability"),
        ),
        (
            make_call(methods.TASKS_GET, {"taskId": "t"}, caps=TASKS_CAPS),
            (RefusalKind.TASK_NOT_FOUND, -32602, "task-not-found"),
        ),
        (make_call(methods.TOOLS_CALL, {"name": "boom"}), (RefusalKind.HANDLER_FAILED, -32603, "handler-failed")),
        (make_call(methods.TOOLS_CALL, {"name": "own.error"}), (RefusalKind.APPLICATION, -32000, "error")),
        (
            make_call(methods.TOOLS_CALL, {"name": "wrong.type"}),
            (RefusalKind.INTERNAL, -32603, "handler-result-type"),
        ),
        (
            make_call(methods.TOOLS_CALL, {"name": "store.down"}),
            (RefusalKind.STORE_UNAVAILABLE, -32603, "store-unavailable"),
        ),
    ],
    ids=lambda value: value.method if isinstance(value, Call) else str(value[0].value),
)
def test_each_refusal_kind_of_the_engine(call: Call, expected: tuple[RefusalKind, int, str]) -> None:
    kind, code, reason = refused(run(ENGINE, call))
    assert (kind, code) == expected[:2]
    assert reason.startswith(expected[2]) if expected[0] is RefusalKind.STATE_REFUSED else reason == expected[2]


def test_a_digest_over_the_inline_size_waits_for_a_worker_then_is_refused_busy() -> None:
    engine = Engine(registry=REGISTRY, sealer=SEALER, large_body_wait_seconds=0.3)
    gate = threading.Event()
    params = JsonObject.from_mapping({"name": "ask"})

    async def scenario() -> tuple[list[Outcome], Outcome]:
        digests = [CountedDigest(params, size=INLINE_BODY_BYTES + 1, gate=gate) for _ in range(3)]
        calls = [make_call(methods.TOOLS_CALL, {"name": "ask"}, digest=digest) for digest in digests]
        held = [asyncio.create_task(engine.call(call, None)) for call in calls[:MAX_CONCURRENT_LARGE_BODIES]]
        try:
            deadline = time.monotonic() + 60
            while not all(digest.taken for digest in digests[:-1]) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # until every worker holds a gated digest
            refusal = await engine.call(calls[-1], None)
        finally:
            gate.set()
        return list(await asyncio.gather(*held)), refusal

    admitted, refusal = asyncio.run(scenario())
    assert all(isinstance(outcome, InputRequired) for outcome in admitted)
    assert refused(refusal) == (RefusalKind.BUSY, -32603, "busy")
    assert isinstance(refusal, Refused)
    assert refusal.error.http_status == 503
    assert refusal.error.headers == (("retry-after", "1"),)


@pytest.mark.parametrize(
    ("reason", "kind", "code", "message"),
    [
        (TaskErrorReason.NOT_FOUND, RefusalKind.TASK_NOT_FOUND, -32602, "Failed to retrieve task: Task not found"),
        (TaskErrorReason.EXPIRED, RefusalKind.TASK_REFUSED, -32602, "Failed to retrieve task: Task has expired"),
        (
            TaskErrorReason.INPUT_RESPONSES,
            RefusalKind.INPUT_RESPONSES,
            -32602,
            "Invalid params: an input response is malformed",
        ),
        (TaskErrorReason.STORED_QUOTA, RefusalKind.TASK_REFUSED, -32603, "Too many stored tasks"),
        (TaskErrorReason.LIVE_LIMIT, RefusalKind.TASK_REFUSED, -32603, "Too many tasks"),
        (TaskErrorReason.STEP_UNFINISHED, RefusalKind.TASK_REFUSED, -32603, "The task's step did not finish"),
        (TaskErrorReason.CONTENTION, RefusalKind.TASK_REFUSED, -32603, "Internal error"),
    ],
)
def test_a_task_managers_domain_error_has_one_wire_answer(
    reason: TaskErrorReason, kind: RefusalKind, code: int, message: str
) -> None:
    refusal = task_refusal(TaskError(reason))
    assert (refusal.kind, refusal.error.code, refusal.error.message) == (kind, code, message)


def test_a_tools_own_task_failure_is_its_answer() -> None:
    failure = TaskFailed(-32050, "Quota exceeded")
    refusal = task_refusal(TaskError(TaskErrorReason.TOOL_FAILED, failure))
    assert (refusal.kind, refusal.error.code, refusal.error.message) == (
        RefusalKind.APPLICATION,
        -32050,
        "Quota exceeded",
    )
    assert refusal.error.http_status == 200
