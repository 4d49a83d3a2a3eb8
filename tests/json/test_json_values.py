"""The closed, immutable value model: equality and hashing by JSON meaning, construction only by factories."""

from __future__ import annotations

import copy
import pickle
from decimal import Decimal
from typing import Any

import pytest

from soklet_core.json import (
    JsonArray,
    JsonBoolean,
    JsonError,
    JsonErrorReason,
    JsonNull,
    JsonNumber,
    JsonObject,
    JsonString,
    JsonValue,
    parse,
    serialize,
)

R = JsonErrorReason


# --- numeric equality and hashing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spellings",
    [
        ["1", "1.0", "1E+0", "1e0", "10e-1", "0.1e1", "1.000"],
        ["0", "-0", "0.0", "-0.0", "0e10", "0E-10"],
        ["100", "1E+2", "1e2", "100.00", "10e1", "0.001e5"],
        ["-2.5", "-25e-1", "-2.50", "-0.25E+1"],
        ["1e10000", "10e9999", "100e9998"],
        [
            "123456789012345678901234567890123456789012345678901234567890",
            "1.23456789012345678901234567890123456789012345678901234567890e59",
        ],
    ],
)
def test_numbers_equal_by_value_with_equal_hashes(spellings: list[str]) -> None:
    values = [parse(s) for s in spellings]
    for value in values:
        assert value == values[0]
        assert hash(value) == hash(values[0])
    assert len(set(values)) == 1


def test_numbers_equal_by_value_from_factories() -> None:
    a = JsonNumber.from_value(1)
    b = JsonNumber.from_value(Decimal("1.0"))
    c = JsonNumber.from_value(Decimal("1E+0"))
    assert a == b == c
    assert hash(a) == hash(b) == hash(c)
    assert JsonNumber.from_value(1) != JsonNumber.from_value(2)
    assert JsonNumber.from_value(Decimal("0.1")) != JsonNumber.from_value(Decimal("0.10000000000000000001"))


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (b'{"a":1}', b'{"a":1.0}'),
        (b'{"a":[1, {"b": 1E+0}]}', b'{"a":[1.00, {"b": 10e-1}]}'),
        (b"[1,[2,[3]]]", b"[1.0,[2e0,[30e-1]]]"),
        (b'[{"x":100}]', b'[{"x":1E2}]'),
    ],
)
def test_numeric_equality_holds_inside_containers(left: bytes, right: bytes) -> None:
    a, b = parse(left), parse(right)
    assert a == b
    assert hash(a) == hash(b)
    assert {a: "x"}[b] == "x"


def test_object_equality_ignores_member_order() -> None:
    a = parse(b'{"a":1,"b":[true,null],"c":{"x":"y","z":2}}')
    b = parse(b'{"c":{"z":2.0,"x":"y"},"b":[true,null],"a":1}')
    assert a == b
    assert hash(a) == hash(b)
    assert list(a) != list(b)  # the held order is kept ...
    assert serialize(a) != serialize(b)  # ... and serialize shows it


def test_array_order_matters() -> None:
    assert parse(b"[1,2]") != parse(b"[2,1]")


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (b"true", b"1"),
        (b"false", b"0"),
        (b"[true]", b"[1]"),
        (b'{"a":false}', b'{"a":0}'),
        (b"null", b"0"),
        (b"null", b"false"),
        (b'""', b"null"),
        (b'"1"', b"1"),
        (b'"true"', b"true"),
        (b"[]", b"{}"),
        (b"[]", b"null"),
        (b"{}", b"null"),
        (b"[[]]", b"[]"),
    ],
)
def test_distinct_kinds_are_never_equal(left: bytes, right: bytes) -> None:
    a, b = parse(left), parse(right)
    assert a != b
    assert b != a
    assert len({a, b}) == 2
    assert len({a: 1, b: 2}) == 2


def test_booleans_are_not_numbers_in_sets_and_dicts() -> None:
    true, one = JsonBoolean.from_value(True), JsonNumber.from_value(1)
    false, zero = JsonBoolean.from_value(False), JsonNumber.from_value(0)
    assert true != one
    assert false != zero
    assert len({true, one, false, zero}) == 4
    table: dict[JsonValue, str] = {one: "one", zero: "zero"}
    assert true not in table
    assert false not in table
    with pytest.raises(KeyError):
        table[true]


def test_values_do_not_equal_plain_python() -> None:
    assert parse(b"1") != 1
    assert parse(b"true") != True  # noqa: E712
    assert parse(b'"a"') != "a"
    assert parse(b"null") is not None


# --- scale ---------------------------------------------------------------------------------------------------


def test_value_keeps_the_supplied_scale() -> None:
    parsed = parse(b"3.50")
    assert isinstance(parsed, JsonNumber)
    assert isinstance(parsed.value, Decimal)
    assert str(parsed.value) == "3.50"
    assert parsed.value.as_tuple().exponent == -2
    built = JsonNumber.from_value(Decimal("3.50"))
    assert built.value.as_tuple() == Decimal("3.50").as_tuple()
    assert serialize(built) == "3.50"
    assert serialize(parsed) == "3.50"
    assert parsed == JsonNumber.from_value(Decimal("3.5"))
    nested = parse(b'{"price": 3.50, "list": [1.10]}')
    assert nested.to_python() == {"price": Decimal("3.50"), "list": [Decimal("1.10")]}
    assert str(nested["price"].value) == "3.50"  # type: ignore[index,union-attr]
    assert serialize(nested) == '{"price":3.50,"list":[1.10]}'


# --- immutability and closed construction ----------------------------------------------------------------------


def sample_values() -> list[JsonValue]:
    return [
        parse(b'"s"'),
        parse(b"1.5"),
        parse(b"true"),
        parse(b"null"),
        parse(b'{"a":1}'),
        parse(b"[1]"),
    ]


@pytest.mark.parametrize("value", sample_values(), ids=lambda v: type(v).__name__)
def test_values_are_immutable(value: JsonValue) -> None:
    with pytest.raises(AttributeError):
        value._value = "changed"  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        value.anything = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        del value._value  # type: ignore[attr-defined]
    before = serialize(value)
    assert serialize(copy.copy(value)) == before
    assert copy.deepcopy(value) == value


def test_containers_cannot_be_mutated() -> None:
    obj = parse(b'{"a":[1]}')
    assert isinstance(obj, JsonObject)
    with pytest.raises(TypeError):
        obj["b"] = JsonNull.instance()  # type: ignore[index]
    with pytest.raises((TypeError, AttributeError)):
        obj.update({"b": 1})  # type: ignore[attr-defined]
    arr = obj["a"]
    assert isinstance(arr, JsonArray)
    with pytest.raises(TypeError):
        arr[0] = JsonNull.instance()  # type: ignore[index]
    with pytest.raises(AttributeError):
        arr.append(1)  # type: ignore[attr-defined]
    # to_python gives a copy: changing it changes nothing held.
    plain = obj.to_python()
    plain["a"].append(2)
    plain["b"] = 1
    assert serialize(obj) == '{"a":[1]}'


@pytest.mark.parametrize(
    ("cls", "args"),
    [
        (JsonString, ("x",)),
        (JsonNumber, (Decimal(1),)),
        (JsonBoolean, (True,)),
        (JsonNull, ()),
        (JsonObject, ({},)),
        (JsonArray, ([],)),
        (JsonValue, ()),
    ],
)
def test_no_public_constructor(cls: type, args: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError):
        cls(*args)


def test_the_model_is_closed_to_subclasses() -> None:
    with pytest.raises(TypeError):

        class Mine(JsonString):
            pass


@pytest.mark.parametrize("bad", [1.5, 0.0, float("nan"), True, False, "1", None, [1]])
def test_number_from_value_refuses_float_bool_and_others(bad: Any) -> None:
    with pytest.raises(TypeError):
        JsonNumber.from_value(bad)


@pytest.mark.parametrize("text", ["NaN", "-NaN", "sNaN", "Infinity", "-Infinity"])
def test_number_from_value_refuses_non_finite_decimals(text: str) -> None:
    with pytest.raises(JsonError) as info:
        JsonNumber.from_value(Decimal(text))
    assert info.value.reason is R.NON_FINITE_NUMBER


def test_from_python_refuses_floats_anywhere() -> None:
    with pytest.raises(TypeError):
        JsonValue.from_python({"a": [1, 2.5]})
    with pytest.raises(TypeError):
        JsonValue.from_python(1.0)


def test_string_from_value_refuses_lone_surrogates_and_non_str() -> None:
    for text in ("\ud800", "a\udc00", "\udbff\ud800"):
        with pytest.raises(JsonError) as info:
            JsonString.from_value(text)
        assert info.value.reason is R.LONE_SURROGATE
    with pytest.raises(TypeError):
        JsonString.from_value(b"x")  # type: ignore[arg-type]
    assert JsonString.from_value("\U0001f600").value == "\U0001f600"


def test_boolean_and_null_factories() -> None:
    assert JsonBoolean.from_value(True).value is True
    assert JsonBoolean.from_value(False).value is False
    with pytest.raises(TypeError):
        JsonBoolean.from_value(1)  # type: ignore[arg-type]
    assert JsonNull.instance() == parse(b"null")
    assert JsonNull.instance().to_python() is None


# --- builders and conversions ----------------------------------------------------------------------------------


def test_object_builder_builds_and_refuses_repeated_names() -> None:
    built = JsonObject.builder().put("b", 1).put("a", [True, None, "x"]).put("c", Decimal("2.50")).build()
    assert built == parse(b'{"a":[true,null,"x"],"b":1,"c":2.5}')
    assert list(built) == ["b", "a", "c"]
    assert serialize(built) == '{"b":1,"a":[true,null,"x"],"c":2.50}'
    with pytest.raises(JsonError) as info:
        JsonObject.builder().put("a", 1).put("a", 2)
    assert info.value.reason is R.DUPLICATE_MEMBER
    with pytest.raises(JsonError) as info:
        JsonObject.builder().put("\ud800", 1)
    assert info.value.reason is R.LONE_SURROGATE
    with pytest.raises(TypeError):
        JsonObject.builder().put("a", 1.5)


def test_builder_result_is_independent_of_the_builder() -> None:
    builder = JsonObject.builder().put("a", 1)
    first = builder.build()
    builder.put("b", 2)
    assert first == parse(b'{"a":1}')
    array_builder = JsonArray.builder().add(1).add_all(["x", None])
    arr = array_builder.build()
    array_builder.add(2)
    assert arr == parse(b'[1,"x",null]')


def test_from_python_and_to_python_round_trip() -> None:
    data = {"a": [1, Decimal("2.50"), "é", True, False, None, {"b": []}], "\U0001f600": {}}
    value = JsonValue.from_python(data)
    assert value == parse('{"a":[1,2.50,"é",true,false,null,{"b":[]}],"😀":{}}')
    back = value.to_python()
    assert back == {"a": [Decimal(1), Decimal("2.50"), "é", True, False, None, {"b": []}], "\U0001f600": {}}
    assert type(back["a"][3]) is bool
    assert str(back["a"][1]) == "2.50"
    assert JsonObject.from_mapping({"x": 1}) == parse(b'{"x":1}')
    assert JsonArray.of(1, "a", None) == parse(b'[1,"a",null]')
    assert JsonObject.empty_instance() == parse(b"{}")
    assert JsonArray.empty_instance() == parse(b"[]")
    with pytest.raises(TypeError):
        JsonValue.from_python({1: "x"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        JsonValue.from_python({"a": object()})  # type: ignore[dict-item]


def test_mapping_and_sequence_behaviour() -> None:
    obj = parse(b'{"a":1,"b":[2,3]}')
    assert isinstance(obj, JsonObject)
    assert "a" in obj
    assert "z" not in obj
    assert len(obj) == 2
    assert obj["a"] == JsonNumber.from_value(1)
    arr = obj["b"]
    assert isinstance(arr, JsonArray)
    assert len(arr) == 2
    assert list(arr) == [JsonNumber.from_value(2), JsonNumber.from_value(3)]
    assert arr[1:] == parse(b"[3]")
    with pytest.raises(KeyError):
        obj["z"]


def test_object_reads_members_as_a_mapping_does() -> None:
    """get, keys, values and items are the members dict's own (for speed): the Mapping contract must still hold."""
    obj = parse(b'{"b":1,"a":[2],"c":null}')
    assert isinstance(obj, JsonObject)
    one = JsonNumber.from_value(1)
    assert obj.get("b") == one
    assert obj.get("z") is None
    assert obj.get("z", one) is one
    assert obj.get("z", default=None) is None
    assert list(obj.keys()) == ["b", "a", "c"]
    assert list(obj.values()) == [obj["b"], obj["a"], obj["c"]]
    assert list(obj.items()) == [("b", obj["b"]), ("a", obj["a"]), ("c", obj["c"])]
    assert obj.keys() == {"a", "b", "c"}
    assert ("b", one) in obj.items()
    assert dict(obj) == dict(obj.items())
    # The views cannot reach the members dict to change it.
    view = obj.keys()
    with pytest.raises(TypeError):
        view.mapping["d"] = one  # type: ignore[index]
    assert "d" not in obj
    with pytest.raises(TypeError):
        obj.get([])  # type: ignore[arg-type]


@pytest.mark.parametrize("doc", [b'{"a":[1.50,"\xc3\xa9",true,null,{"b":{}}],"c":-0}', b"3.50", b'"\\u0000"', b"[]"])
def test_values_pickle_with_scale_and_kind(doc: bytes) -> None:
    value = parse(doc)
    copied = pickle.loads(pickle.dumps(value))
    assert copied == value
    assert type(copied) is type(value)
    assert serialize(copied) == serialize(value)


def test_large_documents_share_equal_number_tokens_and_empty_containers() -> None:
    """Over 64 KiB, equal number tokens share one JsonNumber and every {} / [] is the shared empty instance (a
    10 MiB array of one repeated number cost 345 MB as separate objects); scale and equality are unchanged."""
    doc = b"[" + b",".join([b'3.50,1,1.0,{},[],"s"'] * 20_000) + b"]"
    assert len(doc) > 64 * 1024
    items = parse(doc)
    assert isinstance(items, JsonArray)
    assert items[0] is items[6]
    assert items[1] is items[7]
    assert items[0].value == Decimal("3.50")
    assert str(items[0].value) == "3.50"  # the supplied scale is kept
    assert items[1] is not items[2]  # 1 and 1.0 are different tokens: each keeps its own spelling
    assert items[1] == items[2]
    assert str(items[2].value) == "1.0"
    assert items[3] is JsonObject.empty_instance()
    assert items[4] is JsonArray.empty_instance()
    assert serialize(items).startswith('[3.50,1,1.0,{},[],"s",3.50,')
    # Distinct tokens beyond the sharing table are parsed as always.
    distinct = parse(b"[" + b",".join(str(index).encode() for index in range(70_000)) + b"]")
    assert isinstance(distinct, JsonArray)
    assert [item.value for item in distinct[-2:]] == [Decimal(69_998), Decimal(69_999)]
