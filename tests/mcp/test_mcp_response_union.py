"""The protocol union of input responses: elicitation, sampling and roots results, and nothing else."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soklet_core.json import JsonNumber, JsonObject, JsonValue, parse
from soklet_core.mcp import InputResponses, McpModelErrorReason
from soklet_core.mcp.model import (
    ElicitationAction,
    ElicitationResponse,
    InputResponseError,
    input_response_methods,
    matches_input_response,
)

ELICIT, SAMPLE, ROOTS = "elicitation/create", "sampling/createMessage", "roots/list"

VALID: list[tuple[str, str]] = [
    ('{"action":"accept","content":{"name":"octocat"}}', ELICIT),
    ('{"action":"accept"}', ELICIT),
    ('{"action":"accept","content":{}}', ELICIT),
    ('{"action":"decline"}', ELICIT),
    ('{"action":"cancel"}', ELICIT),
    ('{"action":"accept","content":{"a":"x","b":3.50,"c":-1E+3,"d":true,"e":false,"f":[],"g":["x","y"]}}', ELICIT),
    ('{"action":"accept","content":{"ok":true},"_meta":{"k":1}}', ELICIT),
    ('{"action":"accept","futureMember":1}', ELICIT),
    ('{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"test-model","stopReason":"endTurn"}',
     SAMPLE),
    ('{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"m"}', SAMPLE),
    ('{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}],'
     '"model":"m"}', SAMPLE),
    ('{"role":"assistant","content":{"type":"audio","data":"AA==","mimeType":"audio/wav"},"model":"m"}', SAMPLE),
    ('{"role":"assistant","content":{"type":"tool_use","id":"1","name":"t","input":{}},"model":"m","stopReason":"toolUse"}',
     SAMPLE),
    ('{"role":"assistant","content":{"type":"tool_result","toolUseId":"1","content":[]},"model":"m"}', SAMPLE),
    ('{"roots":[{"uri":"file:///test/root","name":"Test Root"}]}', ROOTS),
    ('{"roots":[]}', ROOTS),
    ('{"roots":[{"uri":"file:///a"},{"uri":"file:///b","_meta":{}}]}', ROOTS),
]  # fmt: skip

INVALID: list[str] = [
    "12345",
    "null",
    '"accept"',
    "[]",
    "{}",
    '{"action":"ok"}',
    '{"action":"ACCEPT"}',
    '{"action":1}',
    '{"action":"decline","content":{}}',
    '{"action":"cancel","content":{"a":"b"}}',
    '{"action":"accept","content":null}',
    '{"action":"accept","content":[]}',
    '{"action":"accept","content":"x"}',
    '{"action":"accept","content":{"a":null}}',
    '{"action":"accept","content":{"a":{"b":"c"}}}',
    '{"action":"accept","content":{"a":[1,2]}}',
    '{"action":"accept","content":{"a":["x",null]}}',
    '{"action":"accept","content":{"a":[["x"]]}}',
    '{"action":"accept","_meta":[]}',
    '{"role":"user","content":{"type":"text","text":"x"},"model":"m"}',
    '{"role":"assistant","content":{"type":"text","text":"x"}}',
    '{"role":"assistant","content":{"type":"text","text":"x"},"model":7}',
    '{"role":"assistant","content":{"type":"text"},"model":"m"}',
    '{"role":"assistant","content":{"type":"video","data":"x"},"model":"m"}',
    '{"role":"assistant","content":[],"model":"m"}',
    '{"role":"assistant","content":"Paris","model":"m"}',
    '{"role":"assistant","content":{"type":"text","text":"x"},"model":"m","stopReason":1}',
    '{"role":"assistant","content":{"type":"image","data":"AA=="},"model":"m"}',
    '{"role":"assistant","content":{"type":"tool_use","id":"1","name":"t","input":[]},"model":"m"}',
    '{"roots":{}}',
    '{"roots":[{"uri":"https://example.com"}]}',
    '{"roots":[{"name":"x"}]}',
    '{"roots":[{"uri":"file:///a","name":3}]}',
    '{"roots":["file:///a"]}',
    '{"roots":null}',
]


@pytest.mark.parametrize(("text", "method"), VALID)
def test_valid_responses(text: str, method: str) -> None:
    value = parse(text)
    assert matches_input_response(value)
    assert matches_input_response(value, method)
    assert input_response_methods(value) == {method}
    for other in {ELICIT, SAMPLE, ROOTS} - {method}:
        assert not matches_input_response(value, other)


@pytest.mark.parametrize("text", INVALID)
def test_invalid_responses(text: str) -> None:
    value = parse(text)
    assert not matches_input_response(value)
    assert input_response_methods(value) == frozenset()
    for method in (ELICIT, SAMPLE, ROOTS):
        assert not matches_input_response(value, method)


def test_unknown_method_matches_nothing() -> None:
    assert not matches_input_response(parse('{"action":"accept"}'), "tools/call")


def test_number_content_is_exact() -> None:
    value = parse('{"action":"accept","content":{"price":3.50,"big":123456789012345678901234567890.000000001}}')
    response = ElicitationResponse.from_json(value)
    assert response.content is not None
    price = response.content["price"]
    assert isinstance(price, JsonNumber)
    assert str(price.value) == "3.50"
    big = response.content["big"]
    assert isinstance(big, JsonNumber)
    assert big.value == Decimal("123456789012345678901234567890.000000001")


def test_elicitation_response_parsing() -> None:
    accepted = ElicitationResponse.from_json(parse('{"action":"accept","content":{"x":"secret-ish"}}'))
    assert accepted.accepted
    assert accepted.action is ElicitationAction.ACCEPT
    assert "secret-ish" not in repr(accepted)
    declined = ElicitationResponse.from_json(parse('{"action":"decline"}'))
    assert declined.declined
    assert declined.content is None
    assert ElicitationResponse.from_json(parse('{"action":"cancel"}')).cancelled
    with pytest.raises(InputResponseError):
        ElicitationResponse.from_json(parse('{"action":"maybe"}'))
    content = parse('{"x":"secret-ish"}')
    assert isinstance(content, JsonObject)
    assert ElicitationResponse(ElicitationAction.ACCEPT, content) == accepted
    assert ElicitationResponse(ElicitationAction.DECLINE) == declined
    refused = [
        (ElicitationAction.DECLINE, content),
        (ElicitationAction.ACCEPT, parse('{"x":null}')),
        (ElicitationAction.ACCEPT, parse('["x"]')),
    ]
    for action, bad in refused:
        with pytest.raises(InputResponseError) as caught:
            ElicitationResponse(action, bad)  # type: ignore[arg-type]
        assert caught.value.reason is McpModelErrorReason.INVALID_INPUT_RESPONSE
    with pytest.raises(TypeError, match="action must be an ElicitationAction"):
        ElicitationResponse("accept", content)  # type: ignore[arg-type]


# --- properties ------------------------------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
_number = st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(lambda d: abs(d.adjusted()) < 50)
_content_value = st.one_of(
    _text.map(lambda s: JsonValue.from_python(s)),
    _number.map(lambda d: JsonNumber.from_value(d)),
    st.booleans().map(JsonValue.from_python),
    st.lists(_text, max_size=4).map(JsonValue.from_python),
)
_bad_content_value = st.one_of(
    st.just(JsonValue.from_python(None)),
    st.dictionaries(_text, _text, max_size=2).map(JsonValue.from_python),
    st.lists(st.one_of(st.integers(), st.none(), st.booleans()), min_size=1, max_size=3).map(JsonValue.from_python),
)


@given(st.dictionaries(_text, _content_value, max_size=6))
@settings(max_examples=150, deadline=None)
def test_any_union_content_is_accepted(content: dict[str, JsonValue]) -> None:
    response = JsonObject.builder().put("action", "accept").put("content", JsonObject.from_mapping(content)).build()
    assert matches_input_response(response, ELICIT)
    parsed = ElicitationResponse.from_json(response)
    assert parsed.content == JsonObject.from_mapping(content)


@given(st.dictionaries(_text, _content_value, max_size=4), _text, _bad_content_value)
@settings(max_examples=150, deadline=None)
def test_one_bad_value_spoils_the_content(content: dict[str, JsonValue], name: str, bad: JsonValue) -> None:
    content = {**content, name: bad}
    response = JsonObject.builder().put("action", "accept").put("content", JsonObject.from_mapping(content)).build()
    assert not matches_input_response(response)


@given(st.sampled_from(["decline", "cancel"]), st.dictionaries(_text, _content_value, max_size=3))
@settings(max_examples=50, deadline=None)
def test_content_only_with_accept(action: str, content: dict[str, Any]) -> None:
    response = JsonObject.builder().put("action", action).put("content", JsonObject.from_mapping(content)).build()
    assert not matches_input_response(response)
    bare = JsonObject.builder().put("action", action).build()
    assert matches_input_response(bare, ELICIT)


@pytest.mark.parametrize("text", [text for text, _ in VALID] + INVALID)
def test_from_wire_agrees_with_from_responses(text: str) -> None:
    # The dispatcher's one-pass reading of params.inputResponses against the checked builder path.
    responses = parse('{"k":' + text + ',"other":{"action":"cancel"}}')
    assert isinstance(responses, JsonObject)
    try:
        expected = InputResponses.from_responses(responses)
    except InputResponseError:
        with pytest.raises(InputResponseError):
            InputResponses.from_wire(responses)
        return
    read = InputResponses.from_wire(responses)
    assert read == expected
    assert read.find("k") == expected.find("k")
    assert list(read) == list(expected)


@given(st.sampled_from([text for text, _ in VALID] + INVALID), st.sampled_from([ELICIT, SAMPLE, ROOTS, "x/y"]))
def test_matches_input_response_agrees_with_the_methods_found(text: str, method: str) -> None:
    value = parse(text)
    found = input_response_methods(value)
    assert matches_input_response(value) == bool(found)
    assert matches_input_response(value, method) == (method in found)
