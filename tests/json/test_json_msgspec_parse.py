"""The msgspec parse (documents up to 64 KiB) against the exact parse, on generated input.

The reference is the exact path itself (the C ``json`` module with hooks, and the reference scanner for a
refusal), called directly; ``parse`` must give the same value, with the same member order and the same held
number spellings (``serialize`` writes both alike), or the same refusal reason and byte offset. The documents are
those of the digest's differential tests (``test_json_msgspec_canonical``): every defect planted anywhere, plus
``-0`` where it is and is not a token.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_json_msgspec_canonical import DEFECTS, EDGE_NUMBERS, PLACES, encoded_text, request_text

from soklet_core.json import MAX_DEPTH, JsonError, JsonErrorReason, JsonValue, parse, serialize
from soklet_core.json.codec import _VALUE_DECODER, _wrap, decode_text, load_raw
from soklet_core.json.msgspec_parse import SMALL_DOCUMENT_BYTES, parse_small
from tests.json.support import params_trees, render, rngs

SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def exact(data: bytes) -> Any:
    """The exact parse: the value as ``serialize`` writes it and its kind, or the refusal's reason and offset."""
    try:
        return _shown(_wrap(load_raw(*decode_text(data), _VALUE_DECODER)))
    except JsonError as error:
        return error.reason, error.offset


def _shown(value: JsonValue) -> Any:
    return type(value), serialize(value), value


def answer(data: bytes) -> Any:
    try:
        return _shown(parse(data))
    except JsonError as error:
        return error.reason, error.offset


@pytest.mark.slow
@SETTINGS
@given(params_trees(), rngs, st.sampled_from([None, None, *DEFECTS]), st.sampled_from(PLACES))
@example({"v": "2026-07-28", "n": Decimal("-0")}, random.Random(0), None, "params")
@example({}, random.Random(0), "duplicate-escaped-colon", "meta-kept")
def test_parse_answers_what_the_exact_parse_answers(
    params: dict[str, Any], rng: random.Random, defect: str | None, place: str
) -> None:
    data = encoded_text(request_text(params, rng, defect, place))
    if len(data) > SMALL_DOCUMENT_BYTES:
        return
    assert answer(data) == exact(data)


@SETTINGS
@given(
    st.one_of(
        st.sampled_from(list(DEFECTS.values())),
        st.builds(lambda token: "[" + token + "]", st.sampled_from(EDGE_NUMBERS)),
        st.builds(lambda token: '{"a":' + token + "}", st.sampled_from(EDGE_NUMBERS)),
        st.sampled_from(EDGE_NUMBERS),
        st.sampled_from(["-0", " -0 ", "[-0]", '["-0"]', "[-0.0,-0e1,-0E-1]", '{"d":"2026-07-28"}', "[ 1 ]\n"]),
    )
)
def test_bare_values_parse_alike(text: str) -> None:
    data = encoded_text(text)
    assert answer(data) == exact(data)


@pytest.mark.slow
@SETTINGS
@given(params_trees(), rngs)
def test_valid_documents_mostly_take_the_msgspec_path(params: dict[str, Any], rng: random.Random) -> None:
    data = render(params, rng).encode("utf-8")
    value = parse_small(data)
    if value is None:
        # Only a document the msgspec path cannot prove may fall back: "-0" somewhere, an escaped colon.
        assert b"-0" in data or b"\\u003a" in data.lower()
        return
    assert _shown(value) == exact(data)


@pytest.mark.parametrize("text", ["[-0]", '{"a":-0}', "-0", '{"a":1,"a":2}', '{"k":1,"k":"\\u003a"}'])
def test_what_the_msgspec_path_cannot_prove_goes_to_the_exact_path(text: str) -> None:
    data = text.encode()
    assert parse_small(data) is None
    outcome = answer(data)
    assert outcome == exact(data)
    if "-0" in text:
        assert outcome[1].endswith("-0") or "-0]" in outcome[1] or "-0}" in outcome[1]
    else:
        assert outcome[0] is JsonErrorReason.DUPLICATE_MEMBER


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 900, 1200])
def test_nesting_at_the_depth_limit_parses_as_the_exact_parse(depth: int) -> None:
    data = ("[" * depth + "]" * depth).encode()
    outcome = answer(data)
    assert outcome == exact(data)
    assert (outcome[0] is JsonErrorReason.DEPTH_EXCEEDED) is (depth > MAX_DEPTH)
