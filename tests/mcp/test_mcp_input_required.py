"""InputRequiredResult builder rules: >= 1 request or state, unique keys, exclusive last-call-wins setters,
the 65,536-byte application-state bound, no cache fields, and the wire shape."""

from __future__ import annotations

import pytest

from soklet_core.json import JsonNull, JsonObject, parse, serialize
from soklet_core.mcp import (
    InputRequest,
    InputRequestDeclaration,
    InputRequiredResult,
    InputRequirement,
    McpModelErrorReason,
    RequestStateMode,
)
from soklet_core.mcp.model import MAX_APPLICATION_REQUEST_STATE_BYTES, InputRequiredResultError

FORM = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
SAMPLING = InputRequestDeclaration.from_sampling(InputRequirement.CONDITIONAL)
ROOTS = InputRequestDeclaration.from_roots_list(InputRequirement.CONDITIONAL)
APPROVAL = InputRequest.from_declaration(
    FORM,
    JsonObject.builder()
    .put("message", "Approve catalog access?")
    .put("mode", "form")
    .put(
        "requestedSchema",
        JsonObject.builder().put("type", "object").put("properties", JsonObject.empty_instance()).build(),
    )
    .build(),
)
GREETING = InputRequest.from_declaration(
    SAMPLING, {"messages": [{"role": "user", "content": {"type": "text", "text": "Greet"}}], "maxTokens": 50}
)
CLIENT_ROOTS = InputRequest.from_declaration(ROOTS, {})
PHASE = JsonObject.builder().put("phase", "waiting-for-approval").build()


def test_the_constructor_validates_like_the_builder() -> None:
    both = InputRequiredResult({"a": APPROVAL, "b": GREETING}, framework_request_state=PHASE)
    assert (
        both
        == InputRequiredResult.with_input_request("a", APPROVAL)
        .with_input_request("b", GREETING)
        .framework_request_state(PHASE)
        .build()
    )
    assert list(both.input_requests) == ["a", "b"]
    assert (
        InputRequiredResult(application_request_state="h").request_state_mode is RequestStateMode.APPLICATION_PROTECTED
    )
    refusals: list[tuple[dict[str, object], McpModelErrorReason]] = [
        ({}, McpModelErrorReason.EMPTY_INPUT_REQUIRED_RESULT),
        ({"input_requests": {"": APPROVAL}}, McpModelErrorReason.INVALID_INPUT_REQUEST_KEY),
        ({"input_requests": {"\udc00": APPROVAL}}, McpModelErrorReason.INVALID_INPUT_REQUEST_KEY),
        ({"application_request_state": ""}, McpModelErrorReason.INVALID_APPLICATION_STATE),
        ({"application_request_state": "a" * 65_537}, McpModelErrorReason.APPLICATION_STATE_TOO_LARGE),
        (
            {"framework_request_state": PHASE, "application_request_state": "h"},
            McpModelErrorReason.TWO_REQUEST_STATES,
        ),
    ]
    for arguments, reason in refusals:
        with pytest.raises(InputRequiredResultError) as caught:
            InputRequiredResult(**arguments)  # type: ignore[arg-type]
        assert caught.value.reason is reason
    with pytest.raises(TypeError, match="request must be an InputRequest"):
        InputRequiredResult({"a": APPROVAL.to_wire()})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="framework_request_state must be a JsonValue"):
        InputRequiredResult(framework_request_state={"phase": 1})  # type: ignore[arg-type]


def test_spec_example_shape() -> None:
    result = InputRequiredResult.with_input_request("approval", APPROVAL).framework_request_state(PHASE).build()
    assert list(result.input_requests) == ["approval"]
    assert result.input_requests["approval"] is APPROVAL
    assert result.framework_request_state == PHASE
    assert result.application_request_state is None
    assert result.request_state_mode is RequestStateMode.FRAMEWORK_PROTECTED
    wire = result.to_wire("sealed-token")
    assert serialize(wire) == (
        '{"resultType":"input_required","inputRequests":{"approval":{"method":"elicitation/create","params":'
        '{"message":"Approve catalog access?","mode":"form","requestedSchema":{"type":"object","properties":{}}}}},'
        '"requestState":"sealed-token"}'
    )


def test_at_least_one_request_or_state() -> None:
    with pytest.raises(InputRequiredResultError) as caught:
        InputRequiredResult.builder().build()
    assert caught.value.reason is McpModelErrorReason.EMPTY_INPUT_REQUIRED_RESULT
    state_only = InputRequiredResult.builder().application_request_state("handle-1").build()
    assert state_only.input_requests == {}
    assert serialize(state_only.to_wire()) == '{"resultType":"input_required","requestState":"handle-1"}'
    framework_only = InputRequiredResult.builder().framework_request_state({"step": 2}).build()
    assert serialize(framework_only.to_wire("tok")) == '{"resultType":"input_required","requestState":"tok"}'
    requests_only = InputRequiredResult.with_input_request("approval", APPROVAL).build()
    assert requests_only.request_state_mode is RequestStateMode.NONE
    assert "requestState" not in requests_only.to_wire()


def test_keys_unique_and_ordered() -> None:
    builder = InputRequiredResult.with_input_request("user_name", APPROVAL).with_input_request("greeting", GREETING)
    with pytest.raises(InputRequiredResultError) as caught:
        builder.with_input_request("user_name", CLIENT_ROOTS)
    assert caught.value.reason is McpModelErrorReason.DUPLICATE_INPUT_REQUEST_KEY
    result = builder.with_input_request("client_roots", CLIENT_ROOTS).application_request_state("s").build()
    assert list(result.input_requests) == ["user_name", "greeting", "client_roots"]
    assert list(result.to_wire()["inputRequests"]) == ["user_name", "greeting", "client_roots"]  # type: ignore[call-overload]


@pytest.mark.parametrize("key", ["", "\ud800", 7, None])
def test_invalid_keys(key: object) -> None:
    with pytest.raises(InputRequiredResultError) as caught:
        InputRequiredResult.with_input_request(key, APPROVAL)  # type: ignore[arg-type]
    assert caught.value.reason is McpModelErrorReason.INVALID_INPUT_REQUEST_KEY


def test_keys_are_exact_member_names() -> None:
    for key in ("a b", "ключ", "😀", "x" * 1000, "$ref", "user_name"):
        result = InputRequiredResult.with_input_request(key, APPROVAL).build()
        assert list(result.input_requests) == [key]
        assert list(parse(serialize(result.to_wire()))["inputRequests"]) == [key]  # type: ignore[index]


def test_request_type_checked() -> None:
    with pytest.raises(TypeError):
        InputRequiredResult.with_input_request("k", APPROVAL.to_wire())  # type: ignore[arg-type]


def test_state_setters_exclusive_last_call_wins() -> None:
    app_last = InputRequiredResult.builder().framework_request_state(PHASE).application_request_state("h").build()
    assert app_last.application_request_state == "h"
    assert app_last.framework_request_state is None
    assert app_last.request_state_mode is RequestStateMode.APPLICATION_PROTECTED
    framework_last = InputRequiredResult.builder().application_request_state("h").framework_request_state(PHASE).build()
    assert framework_last.framework_request_state == PHASE
    assert framework_last.application_request_state is None
    same_twice = InputRequiredResult.builder().application_request_state("a").application_request_state("b").build()
    assert same_twice.application_request_state == "b"


def test_framework_state_may_be_any_json_value() -> None:
    null_state = InputRequiredResult.builder().framework_request_state(JsonNull.instance()).build()
    assert null_state.framework_request_state == JsonNull.instance()
    assert null_state.request_state_mode is RequestStateMode.FRAMEWORK_PROTECTED
    python_state = InputRequiredResult.builder().framework_request_state({"step": 1, "items": ["a"]}).build()
    assert python_state.framework_request_state == parse('{"step":1,"items":["a"]}')


def test_application_state_size_edge() -> None:
    assert MAX_APPLICATION_REQUEST_STATE_BYTES == 65_536
    at_limit = "a" * 65_536
    assert (
        InputRequiredResult.builder().application_request_state(at_limit).build().application_request_state == at_limit
    )
    with pytest.raises(InputRequiredResultError) as caught:
        InputRequiredResult.builder().application_request_state("a" * 65_537)
    assert caught.value.reason is McpModelErrorReason.APPLICATION_STATE_TOO_LARGE
    assert "aaaa" not in str(caught.value)


def test_application_state_counts_utf8_bytes() -> None:
    two_byte = "é" * 32_768  # 65,536 bytes
    InputRequiredResult.builder().application_request_state(two_byte).build()
    with pytest.raises(InputRequiredResultError):
        InputRequiredResult.builder().application_request_state(two_byte + "a")
    four_byte = "😀" * 16_384  # 65,536 bytes in 16,384 characters
    InputRequiredResult.builder().application_request_state(four_byte).build()
    with pytest.raises(InputRequiredResultError):
        InputRequiredResult.builder().application_request_state(four_byte + "😀")


@pytest.mark.parametrize("state", ["", "\udc00", 5, None, b"bytes"])
def test_application_state_must_be_nonempty_text(state: object) -> None:
    with pytest.raises(InputRequiredResultError) as caught:
        InputRequiredResult.builder().application_request_state(state)  # type: ignore[arg-type]
    assert caught.value.reason is McpModelErrorReason.INVALID_APPLICATION_STATE


def test_sealed_token_only_with_framework_state() -> None:
    framework = InputRequiredResult.with_input_request("a", APPROVAL).framework_request_state(PHASE).build()
    with pytest.raises(InputRequiredResultError) as caught:
        framework.to_wire()
    assert caught.value.reason is McpModelErrorReason.SEALED_STATE_MISMATCH
    application = InputRequiredResult.with_input_request("a", APPROVAL).application_request_state("h").build()
    with pytest.raises(InputRequiredResultError):
        application.to_wire("tok")
    assert application.to_wire()["requestState"] == parse('"h"')


def test_no_cache_fields_and_meta() -> None:
    result = InputRequiredResult.with_input_request("a", APPROVAL).application_request_state("h").build()
    meta = JsonObject.from_mapping({"io.modelcontextprotocol/serverInfo": {"name": "soklet", "version": "0.1.0"}})
    wire = result.to_wire(meta=meta)
    assert "ttlMs" not in wire
    assert "cacheScope" not in wire
    assert wire["_meta"] == meta
    assert list(wire) == ["resultType", "inputRequests", "requestState", "_meta"]
    assert not hasattr(result, "ttl_ms")
    assert not hasattr(result, "cache_hint")


def test_result_is_immutable_and_detached_from_builder() -> None:
    builder = InputRequiredResult.with_input_request("a", APPROVAL)
    result = builder.build()
    builder.with_input_request("b", GREETING)
    assert list(result.input_requests) == ["a"]
    with pytest.raises(TypeError):
        result.input_requests["c"] = CLIENT_ROOTS  # type: ignore[index]
    with pytest.raises(AttributeError):
        result.application_request_state = "x"  # type: ignore[misc]
    assert result == InputRequiredResult.with_input_request("a", APPROVAL).build()
    assert hash(result) == hash(InputRequiredResult.with_input_request("a", APPROVAL).build())
    assert "approval" not in repr(result)
    assert "'a'" in repr(result)


def test_required_capabilities_of_emitted_requests() -> None:
    result = (
        InputRequiredResult.with_input_request("user_name", APPROVAL)
        .with_input_request("greeting", GREETING)
        .with_input_request("client_roots", CLIENT_ROOTS)
        .build()
    )
    assert result.required_capabilities == (FORM.capabilities, SAMPLING.capabilities, ROOTS.capabilities)
