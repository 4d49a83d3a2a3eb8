"""Declarations (four factories, final values) and InputRequest.from_declaration for every method."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from soklet_core.json import JsonObject, canonical_text, parse, serialize
from soklet_core.mcp import (
    ClientCapabilities,
    InputRequest,
    InputRequestDeclaration,
    InputRequirement,
    McpModelErrorReason,
)
from soklet_core.mcp.model import FormPolicyViolation, InputRequestError, InputRequestType, may_request_input

REQ, COND = InputRequirement.REQUIRED, InputRequirement.CONDITIONAL
FORM = InputRequestDeclaration.from_elicitation_form(COND)
URL = InputRequestDeclaration.from_elicitation_url(COND)
SAMPLING = InputRequestDeclaration.from_sampling(COND)
ROOTS = InputRequestDeclaration.from_roots_list(COND)

EMPTY_FORM: dict[str, Any] = {
    "message": "Approve?",
    "mode": "form",
    "requestedSchema": {"type": "object", "properties": {}},
}
SAMPLING_PARAMS: dict[str, Any] = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
    "maxTokens": 100,
}


@pytest.mark.parametrize(
    ("factory", "kind", "method", "capabilities"),
    [
        (InputRequestDeclaration.from_elicitation_form, InputRequestType.ELICITATION_FORM, "elicitation/create",
         '{"elicitation":{"form":{}}}'),
        (InputRequestDeclaration.from_elicitation_url, InputRequestType.ELICITATION_URL, "elicitation/create",
         '{"elicitation":{"url":{}}}'),
        (InputRequestDeclaration.from_sampling, InputRequestType.SAMPLING, "sampling/createMessage", '{"sampling":{}}'),
        (InputRequestDeclaration.from_roots_list, InputRequestType.ROOTS_LIST, "roots/list", '{"roots":{}}'),
    ],
)  # fmt: skip
@pytest.mark.parametrize("requirement", list(InputRequirement))
def test_declaration_factories(
    factory: Any, kind: InputRequestType, method: str, capabilities: str, requirement: InputRequirement
) -> None:
    declaration = factory(requirement)
    assert declaration.input_request_type is kind
    assert declaration.json_rpc_method == method
    assert declaration.requirement is requirement
    assert canonical_text(declaration.capabilities.to_wire()) == capabilities
    assert declaration == factory(requirement)
    assert hash(declaration) == hash(factory(requirement))
    assert may_request_input(type=kind, requirement=requirement) == declaration


def test_declarations_are_validated_final_values() -> None:
    assert InputRequestDeclaration(InputRequestType.ELICITATION_FORM, InputRequirement.CONDITIONAL) == FORM
    assert InputRequestDeclaration(InputRequestType.SAMPLING, REQ) == InputRequestDeclaration.from_sampling(REQ)
    with pytest.raises(TypeError, match="requirement must be an InputRequirement"):
        InputRequestDeclaration(InputRequestType.SAMPLING, "required")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="input_request_type must be an InputRequestType"):
        InputRequestDeclaration("sampling", REQ)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        FORM.requirement = REQ  # type: ignore[misc]
    assert InputRequestDeclaration.from_elicitation_form(REQ) != FORM
    assert copy.deepcopy(FORM) == FORM
    assert pickle.loads(pickle.dumps(FORM)) == FORM
    with pytest.raises(TypeError):
        InputRequestDeclaration.from_sampling("required")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        may_request_input(type="sampling", requirement=REQ)  # type: ignore[arg-type]


def test_empty_elicitation_satisfies_form_declaration() -> None:
    client = ClientCapabilities.from_mapping({"elicitation": {}})
    assert client.satisfies(FORM.capabilities)
    assert not client.satisfies(URL.capabilities)


def test_form_request_from_declaration_keeps_params_exactly() -> None:
    params = parse(
        '{"message":"Ship where?","mode":"form","requestedSchema":{"type":"object","properties":'
        '{"qty":{"type":"number","minimum":1.50}}}}'
    )
    assert isinstance(params, JsonObject)
    request = InputRequest.from_declaration(FORM, params)
    assert request.declaration is FORM
    assert request.json_rpc_method == "elicitation/create"
    assert request.params is params
    assert serialize(request.to_wire()) == '{"method":"elicitation/create","params":' + serialize(params) + "}"
    assert "jsonrpc" not in request.to_wire()
    assert "id" not in request.to_wire()
    assert request.capabilities == FORM.capabilities


def test_mode_may_be_omitted_for_form() -> None:
    request = InputRequest.from_declaration(
        FORM, {"message": "Hi", "requestedSchema": {"type": "object", "properties": {}}}
    )
    assert "mode" not in request.params  # type: ignore[operator]


def test_the_request_constructor_validates_and_the_request_is_immutable() -> None:
    assert InputRequest(FORM, EMPTY_FORM) == InputRequest.from_declaration(FORM, EMPTY_FORM)
    assert InputRequest(ROOTS).params is None
    with pytest.raises(InputRequestError) as caught:
        InputRequest(URL, EMPTY_FORM)
    assert caught.value.reason is McpModelErrorReason.DECLARATION_MISMATCH
    with pytest.raises(InputRequestError) as caught:
        InputRequest(SAMPLING)
    assert caught.value.reason is McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS
    with pytest.raises(TypeError, match="declaration must be an InputRequestDeclaration"):
        InputRequest("elicitation/create", EMPTY_FORM)  # type: ignore[arg-type]
    request = InputRequest.from_declaration(FORM, EMPTY_FORM)
    with pytest.raises(AttributeError):
        request.params = None  # type: ignore[misc]
    assert request == InputRequest.from_declaration(FORM, EMPTY_FORM)
    assert "elicitation-form" in repr(request)


@pytest.mark.parametrize(
    ("declaration", "params", "reason"),
    [
        (FORM, {**EMPTY_FORM, "mode": "url"}, McpModelErrorReason.DECLARATION_MISMATCH),
        (URL, EMPTY_FORM, McpModelErrorReason.DECLARATION_MISMATCH),
        (FORM, {**EMPTY_FORM, "mode": "popup"}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (FORM, {**EMPTY_FORM, "mode": 1}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (FORM, {"mode": "form", "requestedSchema": {"type": "object", "properties": {}}},
         McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (FORM, {**EMPTY_FORM, "message": 5}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (FORM, {"message": "x", "mode": "form"}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (FORM, {**EMPTY_FORM, "url": "https://a.example/x"}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (FORM, {**EMPTY_FORM, "requestedSchema": {"type": "object"}}, McpModelErrorReason.INVALID_FORM_SCHEMA),
        (URL, {"mode": "url", "message": "Go"}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (URL, {"mode": "url", "message": "Go", "url": "https://a.example/x", "requestedSchema": {}},
         McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (URL, {"mode": "url", "message": "Go", "url": "http://a.example/x"}, McpModelErrorReason.INSECURE_URL),
        (URL, {"mode": "url", "message": "Go", "url": "https://a.example/x?user=me"},
         McpModelErrorReason.URL_QUERY_OR_FRAGMENT),
        (SAMPLING, {"maxTokens": 5}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (SAMPLING, {**SAMPLING_PARAMS, "messages": []}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (SAMPLING, {**SAMPLING_PARAMS, "maxTokens": 0}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (SAMPLING, {**SAMPLING_PARAMS, "maxTokens": "10"}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (SAMPLING, {**SAMPLING_PARAMS, "maxTokens": parse("2.5")}, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (SAMPLING, {**SAMPLING_PARAMS, "messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]},
         McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (SAMPLING, {**SAMPLING_PARAMS, "messages": [{"role": "user", "content": "hello"}]},
         McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (SAMPLING, {**SAMPLING_PARAMS, "messages": [{"role": "user", "content": []}]},
         McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (SAMPLING, {**SAMPLING_PARAMS, "includeContext": "everything"},
         McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (SAMPLING, None, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (FORM, None, McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
        (ROOTS, parse("[]"), McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS),
    ],
)  # fmt: skip
def test_params_refused(declaration: InputRequestDeclaration, params: Any, reason: McpModelErrorReason) -> None:
    with pytest.raises(InputRequestError) as caught:
        InputRequest.from_declaration(declaration, params)
    assert caught.value.reason is reason


def test_form_policy_is_applied_on_construction() -> None:
    params = {**EMPTY_FORM, "requestedSchema": {"type": "object", "properties": {"password": {"type": "string"}}}}
    with pytest.raises(FormPolicyViolation):
        InputRequest.from_declaration(FORM, params)
    # a reviewed exception is explicit
    from soklet_core.mcp.model import DEFAULT_FORM_POLICY

    allowed = InputRequest.from_declaration(FORM, params, form_policy=DEFAULT_FORM_POLICY.allowing("password"))
    assert allowed.params is not None


def test_url_request_development_loopback() -> None:
    params = {"mode": "url", "message": "Go", "url": "http://localhost:8765/approve/abc"}
    with pytest.raises(InputRequestError):
        InputRequest.from_declaration(URL, params)
    assert InputRequest.from_declaration(URL, params, development=True).capabilities == URL.capabilities


def test_sampling_request_and_extra_capabilities() -> None:
    plain = InputRequest.from_declaration(SAMPLING, SAMPLING_PARAMS)
    assert canonical_text(plain.capabilities.to_wire()) == '{"sampling":{}}'
    tools = InputRequest.from_declaration(SAMPLING, {**SAMPLING_PARAMS, "tools": [], "includeContext": "thisServer"})
    assert canonical_text(tools.capabilities.to_wire()) == '{"sampling":{"context":{},"tools":{}}}'
    none_context = InputRequest.from_declaration(SAMPLING, {**SAMPLING_PARAMS, "includeContext": "none"})
    assert none_context.capabilities == SAMPLING.capabilities
    multi = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image", "data": "AA==",
                                                                                  "mimeType": "image/png"}]}],
        "maxTokens": 50,
    }  # fmt: skip
    assert InputRequest.from_declaration(SAMPLING, multi).json_rpc_method == "sampling/createMessage"
    assert not ClientCapabilities.from_mapping({"sampling": {}}).satisfies(tools.capabilities)


def test_roots_request_with_and_without_params() -> None:
    bare = InputRequest.from_declaration(ROOTS)
    assert bare.params is None
    assert serialize(bare.to_wire()) == '{"method":"roots/list"}'
    empty = InputRequest.from_declaration(ROOTS, {})
    assert serialize(empty.to_wire()) == '{"method":"roots/list","params":{}}'


def test_declaration_type_checked() -> None:
    with pytest.raises(TypeError):
        InputRequest.from_declaration("elicitation/create", EMPTY_FORM)  # type: ignore[arg-type]


def test_instance_union_check_is_method_specific() -> None:
    form = InputRequest.from_declaration(FORM, EMPTY_FORM)
    roots = InputRequest.from_declaration(ROOTS)
    elicit = parse('{"action":"accept","content":{"name":"octocat"}}')
    root_list = parse('{"roots":[{"uri":"file:///test/root","name":"Test Root"}]}')
    assert form.matches_input_response(elicit)
    assert not form.matches_input_response(root_list)
    assert roots.matches_input_response(root_list)
    assert not roots.matches_input_response(elicit)
