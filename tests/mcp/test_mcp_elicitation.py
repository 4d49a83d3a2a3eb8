"""form_request / url_request helpers and expect_accept, the accept-content check for the retry."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from soklet_core.json import JsonObject, JsonValue, parse, serialize
from soklet_core.mcp import InputRequestDeclaration, InputRequirement, McpModelErrorReason, form_request, url_request
from soklet_core.mcp.model import (
    AcceptOutcomeKind,
    FieldRule,
    FormPolicyViolation,
    InputRequestError,
    boolean_field,
    choice_field,
    exact_field,
    expect_accept,
    mint_url_handle,
    number_field,
    string_list_field,
    text_field,
    url_with_handle,
)

K = AcceptOutcomeKind
FORM = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
URL = InputRequestDeclaration.from_elicitation_url(InputRequirement.REQUIRED)


def test_form_request() -> None:
    request = form_request(FORM, "Ship where?", {"type": "object", "properties": {"city": {"type": "string"}}})
    assert serialize(request.to_wire()) == (
        '{"method":"elicitation/create","params":{"mode":"form","message":"Ship where?",'
        '"requestedSchema":{"type":"object","properties":{"city":{"type":"string"}}}}}'
    )
    exact = parse('{"type":"object","properties":{"qty":{"type":"number","maximum":10.50}}}')
    kept = form_request(FORM, "How many?", exact)
    assert kept.params is not None
    assert kept.params["requestedSchema"] is exact
    with pytest.raises(FormPolicyViolation):
        form_request(FORM, "Log in", {"type": "object", "properties": {"password": {"type": "string"}}})
    with pytest.raises(InputRequestError) as caught:
        form_request(URL, "x", {"type": "object", "properties": {}})
    assert caught.value.reason is McpModelErrorReason.DECLARATION_MISMATCH


def test_url_request() -> None:
    url = url_with_handle("https://approve.example.com/mcp/approve", mint_url_handle())
    request = url_request(URL, "Approve in your browser.", url)
    assert request.params == JsonObject.from_mapping({"mode": "url", "message": "Approve in your browser.", "url": url})
    with pytest.raises(InputRequestError) as caught:
        url_request(URL, "x", "https://approve.example.com/a?user=alice")
    assert caught.value.reason is McpModelErrorReason.URL_QUERY_OR_FRAGMENT
    with pytest.raises(InputRequestError):
        url_request(URL, "x", "http://localhost:8765/a")
    assert url_request(URL, "x", "http://localhost:8765/a", development=True).params is not None
    with pytest.raises(InputRequestError) as caught:
        url_request(FORM, "x", url)
    assert caught.value.reason is McpModelErrorReason.DECLARATION_MISMATCH


# --- expect_accept ---------------------------------------------------------------------------------------------


def answer(text: str) -> JsonValue:
    return parse(text)


def test_endings() -> None:
    assert expect_accept(None).kind is K.MISSING
    assert expect_accept(answer('{"action":"decline"}')).kind is K.DECLINED
    assert expect_accept(answer('{"action":"cancel"}')).kind is K.CANCELLED
    assert expect_accept(answer('{"action":"decline"}')).is_normal_ending
    assert not expect_accept(answer('{"action":"accept"}')).is_normal_ending
    for malformed in ("12345", '{"action":"maybe"}', '{"roots":[]}', '{"action":"accept","content":{"a":null}}'):
        assert expect_accept(answer(malformed)).kind is K.MALFORMED


def test_spec_approval_accepts_only_empty_content() -> None:
    for ok in ('{"action":"accept"}', '{"action":"accept","content":{}}'):
        outcome = expect_accept(answer(ok), {})
        assert outcome.ok
        assert outcome.content == JsonObject.empty_instance()
    extra = expect_accept(answer('{"action":"accept","content":{"approved":true}}'), {})
    assert extra.kind is K.UNEXPECTED_FIELDS
    assert extra.unexpected_fields == ("approved",)
    assert "approved" not in repr(extra)
    assert extra.content is None


FIELDS: dict[str, FieldRule] = {
    "city": text_field(min_length=1, max_length=8),
    "qty": number_field(minimum=1, maximum=10, integer=True),
    "price": number_field(minimum=Decimal("0.50")),
    "gift": boolean_field(),
    "plan": choice_field("basic", "pro"),
    "confirm": exact_field("I agree"),
    "tags": string_list_field(min_items=1, max_items=2, choices=["a", "b", "c"], max_item_length=1),
    "note": text_field(max_length=5, required=False),
    "code": text_field(pattern=r"[A-Z]{3}", required=False),
}
GOOD: dict[str, Any] = {
    "city": "Paris",
    "qty": 3,
    "price": parse("3.50"),
    "gift": False,
    "plan": "pro",
    "confirm": "I agree",
    "tags": ["a", "b"],
}


def accept(content: dict[str, Any]) -> JsonValue:
    return JsonValue.from_python({"action": "accept", "content": content})


def test_accepted_content_is_exact_and_only_expected() -> None:
    outcome = expect_accept(accept({**GOOD, "note": "hi"}), FIELDS)
    assert outcome.ok
    assert outcome.field_name is None
    assert outcome.content is not None
    assert list(outcome.content) == ["city", "qty", "price", "gift", "plan", "confirm", "tags", "note"]
    assert str(outcome.value("price")) == "3.50"
    assert outcome.value("qty") == 3
    assert outcome.value("gift") is False
    assert outcome.value("tags") == ("a", "b")
    assert outcome.value("code") is None
    assert expect_accept(answer('{"action":"decline"}')).value("city") is None


@pytest.mark.parametrize(
    ("change", "kind", "field_name"),
    [
        ({"city": ""}, K.WRONG_LENGTH, "city"),
        ({"city": "Paris-Nord"}, K.WRONG_LENGTH, "city"),
        ({"city": 7}, K.WRONG_TYPE, "city"),
        ({"qty": parse("2.5")}, K.WRONG_TYPE, "qty"),
        ({"qty": 11}, K.WRONG_VALUE, "qty"),
        ({"qty": 0}, K.WRONG_VALUE, "qty"),
        ({"qty": "3"}, K.WRONG_TYPE, "qty"),
        ({"price": parse("0.49")}, K.WRONG_VALUE, "price"),
        ({"gift": "false"}, K.WRONG_TYPE, "gift"),
        ({"plan": "enterprise"}, K.WRONG_VALUE, "plan"),
        ({"plan": True}, K.WRONG_TYPE, "plan"),
        ({"confirm": "i agree"}, K.WRONG_VALUE, "confirm"),
        ({"confirm": True}, K.WRONG_TYPE, "confirm"),
        ({"tags": []}, K.WRONG_LENGTH, "tags"),
        ({"tags": ["a", "b", "c"]}, K.WRONG_LENGTH, "tags"),
        ({"tags": ["d"]}, K.WRONG_VALUE, "tags"),
        ({"tags": ["a", "a"]}, K.WRONG_VALUE, "tags"),
        ({"tags": "a"}, K.WRONG_TYPE, "tags"),
        ({"note": "too long"}, K.WRONG_LENGTH, "note"),
        ({"code": "abc"}, K.WRONG_VALUE, "code"),
        ({"code": "ABCD"}, K.WRONG_VALUE, "code"),
    ],
)
def test_each_rule_refuses_precisely(change: dict[str, Any], kind: AcceptOutcomeKind, field_name: str) -> None:
    outcome = expect_accept(accept({**GOOD, **change}), FIELDS)
    assert outcome.kind is kind
    assert outcome.field_name == field_name
    assert outcome.content is None
    assert not outcome.ok


def test_missing_required_field() -> None:
    content = dict(GOOD)
    del content["plan"]
    outcome = expect_accept(accept(content), FIELDS)
    assert outcome.kind is K.MISSING_FIELD
    assert outcome.field_name == "plan"


def test_unexpected_fields_and_allow_extra() -> None:
    content = {**GOOD, "admin": True, "role": "root"}
    refused = expect_accept(accept(content), FIELDS)
    assert refused.kind is K.UNEXPECTED_FIELDS
    assert refused.unexpected_fields == ("admin", "role")
    allowed = expect_accept(accept(content), FIELDS, allow_extra=True)
    assert allowed.ok
    assert allowed.content is not None
    assert "admin" not in allowed.content
    assert allowed.unexpected_fields == ("admin", "role")


def test_exact_field_uses_json_equality() -> None:
    assert expect_accept(accept({"n": parse("1.0")}), {"n": exact_field(1)}).ok
    assert expect_accept(accept({"n": True}), {"n": exact_field(1)}).kind is K.WRONG_TYPE
    assert expect_accept(accept({"l": ["x"]}), {"l": exact_field(["x"])}).ok


def test_rule_arguments_checked() -> None:
    for bad in ({"min_length": -1}, {"max_length": True}):
        with pytest.raises(ValueError, match="must be an int >= 0"):
            text_field(**bad)
    with pytest.raises(ValueError, match="max_items must be an int >= 0"):
        string_list_field(max_items=-2)
    assert isinstance(text_field(), FieldRule)


def test_unique_can_be_relaxed() -> None:
    assert expect_accept(accept({"t": ["a", "a"]}), {"t": string_list_field(unique=False)}).ok
