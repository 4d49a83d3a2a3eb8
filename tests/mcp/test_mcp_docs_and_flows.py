"""docs/mcp-model.md runs as written, and model-level multi-round flows behave as the spec and the conformance
catalogue expect (the transport will add admission, capability errors and sealing around the same calls)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from soklet_core.json import JsonObject, JsonValue, parse, serialize
from soklet_core.mcp import (
    CallToolResult,
    ClientCapabilities,
    GetPromptResult,
    Identity,
    InputRequiredResult,
    InputResponses,
    RequestContext,
    RequestStateMode,
    StartTask,
    TaskSupport,
)
from soklet_core.mcp.model import InputResponseError, ToolRegistration
from tests.mcp.support import build_registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp-model.md"
DEFAULT_CAPS = '{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}'


@pytest.fixture(scope="module")
def doc_namespace() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 8
    namespace: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    return namespace


def context(
    registration: ToolRegistration | None = None,
    *,
    request_id: int = 1,
    caps: str = DEFAULT_CAPS,
    responses: dict[str, Any] | None = None,
    state: JsonValue | None = None,
    name: str = "x",
) -> RequestContext:
    mode = registration.request_state_mode if registration is not None else RequestStateMode.NONE
    return RequestContext(
        identity=Identity.anonymous(),
        partition="anonymous",
        client_capabilities=ClientCapabilities.from_json(parse(caps)),
        protocol_version="2026-07-28",
        request_id=JsonValue.from_python(request_id),  # type: ignore[arg-type]
        method="tools/call",
        operation_name=registration.name if registration is not None else name,
        input_responses=InputResponses.from_responses(responses or {}),
        request_state_mode=mode if state is not None else RequestStateMode.NONE,
        framework_request_state=state,
    )


def call(registration: ToolRegistration, ctx: RequestContext) -> CallToolResult | InputRequiredResult:
    result = registration.handler(ctx, JsonObject.empty_instance())
    assert isinstance(result, CallToolResult | InputRequiredResult)
    if isinstance(result, InputRequiredResult):
        registration.check_emission(result)
        assert ctx.client_capabilities.missing(result.required_capabilities) is None
    return result


# --- the spec's catalog.continue, from the documentation ------------------------------------------------------


def test_doc_runs(doc_namespace: dict[str, Any]) -> None:
    assert isinstance(doc_namespace["catalog_continue"], ToolRegistration)


@pytest.mark.parametrize(
    ("answer", "text", "is_error"),
    [
        ('{"action":"accept","content":{}}', "Catalog access approved.", False),
        ('{"action":"accept"}', "Catalog access approved.", False),
        ('{"action":"decline"}', "Catalog access was declined.", False),
        ('{"action":"cancel"}', "Catalog access was cancelled.", False),
    ],
)
def test_catalog_continue_endings(doc_namespace: dict[str, Any], answer: str, text: str, is_error: bool) -> None:
    tool = doc_namespace["catalog_continue"]
    asked = call(tool, context(tool))
    assert isinstance(asked, InputRequiredResult)
    assert asked.framework_request_state == parse('{"phase":"waiting-for-approval"}')
    done = call(
        tool, context(tool, request_id=2, responses={"approval": parse(answer)}, state=asked.framework_request_state)
    )
    assert isinstance(done, CallToolResult)
    assert done.is_error is is_error
    assert serialize(done.to_wire()["content"]) == f'[{{"type":"text","text":"{text}"}}]'


def test_catalog_continue_rerequests_a_missing_answer(doc_namespace: dict[str, Any]) -> None:
    tool = doc_namespace["catalog_continue"]
    state = parse('{"phase":"waiting-for-approval"}')
    again = call(tool, context(tool, request_id=2, responses={"other": parse('{"action":"accept"}')}, state=state))
    assert isinstance(again, InputRequiredResult)
    assert list(again.input_requests) == ["approval"]
    assert again.framework_request_state == state


def test_catalog_continue_asks_again_after_a_wrong_shaped_accept(doc_namespace: dict[str, Any]) -> None:
    tool = doc_namespace["catalog_continue"]
    state = parse('{"phase":"waiting-for-approval"}')
    answer = parse('{"action":"accept","content":{"approved":true}}')
    again = call(tool, context(tool, request_id=2, responses={"approval": answer}, state=state))
    assert isinstance(again, InputRequiredResult)
    assert list(again.input_requests) == ["approval"]
    assert again.framework_request_state == state


def test_catalog_continue_refuses_a_wrong_phase(doc_namespace: dict[str, Any]) -> None:
    tool = doc_namespace["catalog_continue"]
    wrong = call(
        tool, context(tool, responses={"approval": parse('{"action":"accept"}')}, state=parse('{"phase":"done"}'))
    )
    assert isinstance(wrong, CallToolResult)
    assert wrong.is_error


def test_form_capability_gap_is_reported_for_a_url_only_client(doc_namespace: dict[str, Any]) -> None:
    tool = doc_namespace["catalog_continue"]
    asked = tool.handler(context(tool), JsonObject.empty_instance())
    gap = ClientCapabilities.from_mapping({"elicitation": {"url": {}}}).missing(asked.required_capabilities)
    assert gap is not None
    assert serialize(gap.to_wire()) == '{"elicitation":{"form":{}}}'


# --- conformance MRTR fixtures at model level ------------------------------------------------------------------

REGISTRY = build_registry()


def fixture(name: str) -> ToolRegistration:
    registration = REGISTRY.find_tool(name)
    assert registration is not None
    return registration


def test_basic_elicitation_and_extra_keys() -> None:
    tool = fixture("test_input_required_result_elicitation")
    asked = call(tool, context(tool))
    assert isinstance(asked, InputRequiredResult)
    assert serialize(asked.to_wire()["inputRequests"]["user_name"]["method"]) == '"elicitation/create"'  # type: ignore[index]
    answered = {
        "user_name": parse('{"action":"accept","content":{"name":"octocat"}}'),
        "unknown_extra_key": parse('{"action":"accept","content":{"x":"y"}}'),
        "another_unexpected": parse('{"action":"cancel"}'),
    }
    done = call(tool, context(tool, request_id=2, responses=answered))
    assert isinstance(done, CallToolResult)
    assert done.content[0].to_wire()["text"] == parse('"Hello, octocat!"')


def test_missing_input_response_rerequests() -> None:
    tool = fixture("test_input_required_result_elicitation")
    again = call(tool, context(tool, responses={"wrong_key": parse('{"action":"accept","content":{"data":"wrong"}}')}))
    assert isinstance(again, InputRequiredResult)
    assert list(again.input_requests) == ["user_name"]


def test_validate_input_non_object_is_outside_the_union() -> None:
    with pytest.raises(InputResponseError):
        InputResponses.from_responses({"user_name": parse("12345")})


def test_capability_check_uses_this_requests_capabilities() -> None:
    tool = fixture("test_input_required_result_capabilities")
    asked = call(tool, context(tool, caps='{"sampling":{}}'))
    assert isinstance(asked, InputRequiredResult)
    methods = [request.json_rpc_method for request in asked.input_requests.values()]
    assert methods == ["sampling/createMessage"]
    with_form = call(tool, context(tool))
    assert isinstance(with_form, InputRequiredResult)
    assert [r.json_rpc_method for r in with_form.input_requests.values()] == ["elicitation/create"]


def test_multiple_inputs_and_multi_round() -> None:
    tool = fixture("test_input_required_result_multiple_inputs")
    asked = call(tool, context(tool))
    assert isinstance(asked, InputRequiredResult)
    assert [r.json_rpc_method for r in asked.input_requests.values()] == [
        "elicitation/create", "sampling/createMessage", "roots/list"
    ]  # fmt: skip
    answers = {
        "user_name": parse('{"action":"accept","content":{"name":"n"}}'),
        "greeting": parse('{"role":"assistant","content":{"type":"text","text":"hi"},"model":"test-model",'
                          '"stopReason":"endTurn"}'),
        "client_roots": parse('{"roots":[{"uri":"file:///test/root","name":"Test Root"}]}'),
    }  # fmt: skip
    for key, value in answers.items():
        assert asked.input_requests[key].matches_input_response(value)
    assert isinstance(call(tool, context(tool, responses=answers, state=asked.framework_request_state)), CallToolResult)

    rounds = fixture("test_input_required_result_multi_round")
    first = call(rounds, context(rounds))
    assert isinstance(first, InputRequiredResult)
    second = call(rounds, context(rounds, state=first.framework_request_state))
    assert isinstance(second, InputRequiredResult)
    assert second.framework_request_state != first.framework_request_state
    assert isinstance(call(rounds, context(rounds, state=second.framework_request_state)), CallToolResult)


def test_prompt_mrtr() -> None:
    registration = REGISTRY.find_prompt("test_input_required_result_prompt")
    assert registration is not None
    arguments = registration.check_arguments(None)
    asked = registration.handler(context(name="test_input_required_result_prompt"), arguments)
    assert isinstance(asked, InputRequiredResult)
    assert list(asked.input_requests) == ["user_context"]
    done = registration.handler(
        context(responses={"user_context": parse('{"action":"accept","content":{"context":"tests"}}')}), arguments
    )
    assert isinstance(done, GetPromptResult)
    assert len(done.messages) == 1


def test_required_capability_is_known_before_execution() -> None:
    tool = fixture("test_missing_capability")
    gap = ClientCapabilities.empty().missing(tool.required_capabilities)
    assert gap is not None
    assert serialize(gap.to_wire()) == '{"sampling":{}}'
    assert ClientCapabilities.from_json(parse(DEFAULT_CAPS)).missing(tool.required_capabilities) is None


def test_every_fixture_result_has_a_result_type() -> None:
    for registration in REGISTRY.tools:
        result = registration.handler(context(registration), JsonObject.empty_instance())
        if isinstance(result, StartTask):
            # A task tool's handler starts a task: the server answers it with a CreateTaskResult.
            assert registration.task_support is not TaskSupport.NONE
            continue
        assert isinstance(result, CallToolResult | InputRequiredResult)
        wire = result.to_wire() if isinstance(result, CallToolResult) or result.framework_request_state is None else (
            result.to_wire("token"))  # fmt: skip
        assert "resultType" in wire
