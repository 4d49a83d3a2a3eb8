"""InputResponses: exact values, unexpected keys preserved, closed typed lookup with precise failures."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from soklet_core.json import JsonArray, JsonNumber, JsonObject, JsonString, parse, serialize
from soklet_core.mcp import InputResponses, McpModelErrorReason
from soklet_core.mcp.model import ElicitationAction, ElicitationResponse, InputResponseError

ACCEPT = parse('{"action":"accept","content":{"name":"octocat","price":3.50}}')
ROOTS = parse('{"roots":[{"uri":"file:///test/root","name":"Test Root"}]}')


def responses(**values: Any) -> InputResponses:
    return InputResponses.from_responses(values)


def test_factories() -> None:
    assert InputResponses() == InputResponses.empty()
    assert len(InputResponses.empty()) == 0
    assert InputResponses.empty().find("x") is None
    built = InputResponses({"approval": ACCEPT, "roots": ROOTS})
    assert built == InputResponses.from_responses({"approval": ACCEPT, "roots": ROOTS})
    assert hash(built) == hash(InputResponses.from_responses({"roots": ROOTS, "approval": ACCEPT}))
    from_python = InputResponses.from_responses({"approval": {"action": "accept", "content": {"n": Decimal("3.50")}}})
    assert serialize(from_python.find("approval")) == '{"action":"accept","content":{"n":3.50}}'  # type: ignore[arg-type]


def test_find_is_exact_and_identity_preserving() -> None:
    found = responses(approval=ACCEPT).find("approval")
    assert found is ACCEPT
    assert serialize(found) == '{"action":"accept","content":{"name":"octocat","price":3.50}}'
    price = found["content"]["price"]  # type: ignore[index]
    assert isinstance(price, JsonNumber)
    assert str(price.value) == "3.50"


def test_unexpected_keys_preserved_in_order() -> None:
    value = InputResponses.from_responses(
        {"unknown_extra_key": ROOTS, "user_name": ACCEPT, "another_unexpected": parse('{"action":"cancel"}')}
    )
    assert list(value.as_map()) == ["unknown_extra_key", "user_name", "another_unexpected"]
    assert value.keys() == {"unknown_extra_key", "user_name", "another_unexpected"}
    assert "user_name" in value
    assert "missing" not in value
    assert list(value) == ["unknown_extra_key", "user_name", "another_unexpected"]


def test_as_map_is_immutable() -> None:
    mapping = responses(a=ACCEPT).as_map()
    with pytest.raises(TypeError):
        mapping["b"] = ROOTS  # type: ignore[index]
    source = {"a": ACCEPT}
    value = InputResponses.from_responses(source)
    source["b"] = ROOTS
    assert list(value.as_map()) == ["a"]


@pytest.mark.parametrize(
    "bad",
    [parse("12345"), parse("null"), parse('{"action":"accept","content":{"x":null}}'), parse('{"roots":[1]}'), {}],
)
def test_values_outside_the_union_refused(bad: Any) -> None:
    with pytest.raises(InputResponseError) as caught:
        InputResponses.from_responses({"user_name": bad})
    assert caught.value.reason is McpModelErrorReason.INVALID_INPUT_RESPONSE
    assert "user_name" not in str(caught.value)


def test_keys_must_be_text() -> None:
    with pytest.raises(TypeError):
        InputResponses({1: ROOTS})  # type: ignore[dict-item]


# --- typed lookup ----------------------------------------------------------------------------------------------

ELICIT_ALL = parse('{"action":"accept","content":{"s":"x","n":3.50,"i":42,"f":1.0,"b":true,"l":["a","b"]}}')


def test_typed_lookup_conversions() -> None:
    value = responses(r=ELICIT_ALL, roots=ROOTS)
    as_dict = value.find("r", dict)
    assert as_dict == {
        "action": "accept",
        "content": {"s": "x", "n": Decimal("3.50"), "i": Decimal(42), "f": Decimal("1.0"), "b": True, "l": ["a", "b"]},
    }
    assert str(as_dict["content"]["n"]) == "3.50"
    parsed = value.find("r", ElicitationResponse)
    assert parsed is not None
    assert parsed.action is ElicitationAction.ACCEPT
    assert value.find("r", JsonObject) is ELICIT_ALL
    assert value.find("missing", str) is None
    assert value.find("missing", ElicitationResponse) is None
    assert value.find("roots", dict) == {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}


def test_typed_lookup_of_content_fields() -> None:
    value = responses(r=ELICIT_ALL, declined=parse('{"action":"decline"}'), roots=ROOTS)
    content = ELICIT_ALL["content"]  # type: ignore[index]
    assert value.find_content("r", "s", str) == "x"
    assert value.find_content("r", "n", Decimal) == Decimal("3.50")
    assert str(value.find_content("r", "n", Decimal)) == "3.50"
    assert value.find_content("r", "i", int) == 42
    assert value.find_content("r", "f", int) == 1
    assert value.find_content("r", "b", bool) is True
    assert value.find_content("r", "l", list[str]) == ["a", "b"]
    assert value.find_content("r", "l", JsonArray) is content["l"]
    assert value.find_content("r", "s") is content["s"]
    assert value.find_content("r", "s", JsonString) is content["s"]
    assert value.find_content("r", "absent", str) is None
    assert value.find_content("declined", "s", str) is None
    assert value.find_content("nobody", "s", str) is None
    with pytest.raises(InputResponseError):
        value.find_content("roots", "s", str)


@pytest.mark.parametrize(
    ("name", "target", "found"),
    [
        ("s", int, "string"),
        ("s", bool, "string"),
        ("n", int, "number"),
        ("n", str, "number"),
        ("b", int, "boolean"),
        ("b", Decimal, "boolean"),
        ("l", str, "array"),
        ("s", list[str], "string"),
        ("s", dict, "string"),
        ("s", JsonNumber, "string"),
    ],
)
def test_typed_lookup_failures_are_precise(name: str, target: Any, found: str) -> None:
    value = responses(r=ELICIT_ALL)
    with pytest.raises(InputResponseError) as caught:
        value.find_content("r", name, target)
    assert caught.value.reason is McpModelErrorReason.CONVERSION_FAILED
    assert caught.value.subject == name
    assert f"found {found}" in str(caught.value)
    assert '"x"' not in str(caught.value)


def test_typed_lookup_failure_on_a_whole_response() -> None:
    value = responses(r=ACCEPT, roots=ROOTS)
    for target in (str, int, bool, Decimal, list[str]):
        with pytest.raises(InputResponseError) as caught:
            value.find("r", target)
        assert caught.value.reason is McpModelErrorReason.CONVERSION_FAILED
        assert "octocat" not in str(caught.value)
    with pytest.raises(InputResponseError) as caught:
        value.find("roots", ElicitationResponse)
    assert caught.value.reason is McpModelErrorReason.CONVERSION_FAILED


@pytest.mark.parametrize("target", [float, bytes, list[int], tuple, set, object])
def test_unsupported_targets(target: Any) -> None:
    with pytest.raises(InputResponseError) as caught:
        responses(r=ACCEPT).find("r", target)
    assert caught.value.reason is McpModelErrorReason.UNSUPPORTED_TARGET_TYPE


@pytest.mark.parametrize(
    ("number", "expected"),
    [("1E+30", 10**30), ("-7.000", -7), ("0.0", 0), ("12345678901234567890123456789012345678901234567890",
     12345678901234567890123456789012345678901234567890), ("1.5", None), ("1E-30", None), ("-0.5", None)],
)  # fmt: skip
def test_int_conversion_is_exact(number: str, expected: int | None) -> None:
    value = responses(r=parse('{"action":"accept","content":{"k":' + number + "}}"))
    if expected is None:
        with pytest.raises(InputResponseError) as caught:
            value.find_content("r", "k", int)
        assert "wanted int, found number" in str(caught.value)
    else:
        converted = value.find_content("r", "k", int)
        assert converted == expected
        assert type(converted) is int


def test_repr_hides_client_data() -> None:
    text = repr(responses(secret_key_name=ACCEPT))
    assert "octocat" not in text
    assert "secret_key_name" not in text
    assert "1 responses" in text
