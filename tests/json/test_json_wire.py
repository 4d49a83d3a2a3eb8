"""``encode_wire`` (msgspec) against the standard library's C encoder and ``serialize``, on generated data.

Plain data is held to ``json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))`` (what the response path
wrote before), values of the model to :func:`serialize`: the same bytes for every control character, quotes,
backslashes, ``/``, U+007F, U+2028/U+2029, supplementary characters, 80-digit integers and decimals spelled as
held; and a lone surrogate anywhere refused as the model refuses it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soklet_core.json import JsonError, JsonErrorReason, JsonValue, encode_wire, parse, serialize
from tests.json.support import decimals, keys, strings

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_STDLIB: Any = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False)

integers = st.one_of(
    st.integers(-1000, 1000),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**80, -(10**80)]),
    st.integers(-(10**90), 10**90),
)
plain_scalars = st.one_of(st.none(), st.booleans(), integers, strings)
plain_data = st.recursive(
    plain_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=4),
    ),
    max_leaves=30,
)
model_trees = st.recursive(
    st.one_of(st.none(), st.booleans(), strings, decimals(max_digits=60)),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)),
    max_leaves=20,
)


def _stdlib_bytes(data: Any) -> bytes:
    return _STDLIB.encode(data).encode("utf-8")


@pytest.mark.slow
@SETTINGS
@given(plain_data)
def test_plain_data_encodes_as_the_stdlib_c_encoder(data: Any) -> None:
    assert encode_wire(data) == _stdlib_bytes(data)


@pytest.mark.slow
@SETTINGS
@given(model_trees)
def test_model_values_encode_as_serialize_spells_them(tree: Any) -> None:
    value = JsonValue.from_python(tree)
    assert encode_wire(value) == serialize(value).encode("utf-8")
    # Inside plain data too, and held spellings survive (1.50 stays 1.50).
    assert encode_wire({"a": [value, 1]}) == b'{"a":[' + serialize(value).encode("utf-8") + b",1]}"


def test_a_parsed_value_keeps_every_spelling() -> None:
    value = parse(b'{"n":[1.50,-0,1E+2,0.0000001,12e3],"s":"\\u2028\\u0001/\\ud83d\\ude00"}')
    assert encode_wire(value) == serialize(value).encode("utf-8")
    assert encode_wire(value) == '{"n":[1.50,-0,1E+2,1E-7,1.2E+4],"s":"\u2028\\u0001/\U0001f600"}'.encode()


@pytest.mark.parametrize("data", ["\ud800", ["a", "b\udfff"], {"k": ("x", "\udc00y")}, {"\ud83d": 1}])
def test_a_lone_surrogate_is_refused(data: Any) -> None:
    with pytest.raises(JsonError) as caught:
        encode_wire(data)
    assert caught.value.reason is JsonErrorReason.LONE_SURROGATE


@pytest.mark.parametrize("data", [object(), [1, object()], {"a": {"b": object()}}])
def test_an_object_of_no_json_kind_is_refused(data: Any) -> None:
    with pytest.raises(TypeError):
        encode_wire(data)
