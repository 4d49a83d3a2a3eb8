"""Properties of the codec, the canonical form and the params digest, over generated documents.

Generated trees hold unicode names (supplementary characters included), strings with every kind of escape,
decimals of up to 70 digits with wide exponents, and nesting. Each tree is rendered as a document with random
whitespace, member order, number spelling (``100`` / ``1E2`` / ``100.0`` / ``10e1``) and string escaping; the
independent oracle in ``tests.json.support`` says what the canonical bytes and the digest must be.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from soklet_core.json import JsonValue, canonical_bytes, params_digest, parse, serialize, stable_params
from tests.json.support import (
    ascii_rng,
    containers,
    oracle_canonical,
    oracle_digest_text,
    oracle_load,
    oracle_stable,
    params_trees,
    render,
    rngs,
    same_tree,
    trees,
)

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@pytest.mark.slow
@SETTINGS
@given(trees(), rngs)
@example({"\uff5e": None, "\U0001f600": None}, random.Random(0))
def test_parse_matches_an_exact_reference_loader(tree: Any, rng: random.Random) -> None:
    text = render(tree, rng)
    value = parse(text)
    assert same_tree(value.to_python(), oracle_load(text))  # same members in the same order, same scales
    assert parse(text.encode()) == value


@pytest.mark.slow
@SETTINGS
@given(trees(), rngs)
def test_parse_serialize_round_trip(tree: Any, rng: random.Random) -> None:
    value = parse(render(tree, rng))
    text = serialize(value)
    again = parse(text)
    assert again == value
    assert hash(again) == hash(value)
    assert serialize(again) == text  # exact text equality: order and number spelling kept
    assert same_tree(again.to_python(), value.to_python())


@SETTINGS
@given(trees())
def test_values_built_from_python_round_trip(tree: Any) -> None:
    value = JsonValue.from_python(tree)
    again = parse(serialize(value))
    assert again == value
    assert serialize(again) == serialize(value)


@pytest.mark.slow
@SETTINGS
@given(trees(), rngs)
@example({"\uff5e": 1, "\U0001f600": 2}, random.Random(0))
@example({"\uff5e": 1, "\U0001f600": 2}, ascii_rng())
def test_canonical_form_matches_the_oracle_on_both_paths(tree: Any, rng: random.Random) -> None:
    text = render(tree, rng)
    expected = oracle_canonical(tree)
    assert canonical_bytes(text.encode()) == expected
    assert canonical_bytes(text) == expected
    assert canonical_bytes(parse(text)) == expected  # the two paths agree


@SETTINGS
@given(trees(), rngs)
@example({"\ue000": None, "\U0001f600": None}, ascii_rng())
def test_canonicalization_is_idempotent(tree: Any, rng: random.Random) -> None:
    once = canonical_bytes(render(tree, rng).encode())
    assert canonical_bytes(once) == once
    assert canonical_bytes(parse(once)) == once
    assert parse(once) == parse(render(tree, rng))


@SETTINGS
@given(trees(), rngs, rngs)
@example({"\ue000": None, "\U00010000": None}, ascii_rng(), random.Random(0))
def test_two_spellings_of_one_tree_are_equal_values_with_one_canonical_form(
    tree: Any, rng1: random.Random, rng2: random.Random
) -> None:
    first, second = render(tree, rng1), render(tree, rng2)
    a, b = parse(first), parse(second)
    assert a == b
    assert hash(a) == hash(b)
    assert canonical_bytes(first.encode()) == canonical_bytes(second.encode())


@pytest.mark.slow
@SETTINGS
@given(params_trees(), rngs, rngs)
@example({"\uff5e": 1, "\U0001f600": 2}, ascii_rng(), random.Random(0))
def test_digest_ignores_order_whitespace_spelling_and_exclusions(
    params: dict[str, Any], rng1: random.Random, rng2: random.Random
) -> None:
    expected = oracle_digest_text(params)
    first = render(params, rng1)
    assert params_digest(first).text == expected
    assert params_digest(parse(first)).text == expected
    # Another spelling, wrapped in a request, with the excluded members given other values or dropped.
    other = dict(params)
    for name in ("requestState", "inputResponses"):
        if rng2.random() < 0.5:
            other[name] = rng2.choice(["changed", 1, None, {"x": []}])
        else:
            other.pop(name, None)
    if isinstance(other.get("_meta"), dict):
        meta = dict(other["_meta"])
        for name in ("progressToken", "traceparent", "tracestate", "baggage"):
            if rng2.random() < 0.5:
                meta[name] = "changed"
            else:
                meta.pop(name, None)
        other["_meta"] = meta
    wrapped = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":' + render(other, rng2) + "}"
    assert params_digest(wrapped).text == expected
    assert params_digest(parse(wrapped)).text == expected


@st.composite
def mutated_params(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A params tree and a copy with one change somewhere in its stable part."""
    params = draw(params_trees())
    changed = _copy(params)
    kind = draw(st.sampled_from(["value", "add", "remove", "rename", "add-meta", "meta-member"]))
    stable_names = [n for n in changed if n not in ("requestState", "inputResponses", "_meta")]
    if kind == "add-meta" and "_meta" not in changed:
        changed["_meta"] = {}
    elif kind == "meta-member" or (kind == "add-meta" and "_meta" in changed):
        meta = changed.get("_meta")
        if not isinstance(meta, dict):
            meta = changed["_meta"] = {}
        name = draw(st.text(min_size=1, max_size=4).filter(lambda n: n not in meta))
        meta[name] = draw(trees(3))
    elif kind == "remove" and stable_names:
        del changed[draw(st.sampled_from(stable_names))]
    elif kind == "rename" and stable_names:
        old = draw(st.sampled_from(stable_names))
        new = draw(st.text(min_size=1, max_size=4).filter(lambda n: n not in changed))
        changed[new] = changed.pop(old)
    elif kind == "value" and stable_names:
        name = draw(st.sampled_from(stable_names))
        changed[name] = draw(trees(5))
    else:
        name = draw(st.text(min_size=1, max_size=4).filter(lambda n: n not in changed))
        changed[name] = draw(trees(3))
    return params, changed


def _copy(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _copy(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_copy(v) for v in tree]
    return tree


@pytest.mark.slow
@SETTINGS
@given(mutated_params(), rngs)
@example(({"\uff5e": 1, "\U0001f600": 2}, {"\uff5e": 2, "\U0001f600": 1}), ascii_rng())
def test_digest_changes_on_any_other_change(pair: tuple[dict[str, Any], dict[str, Any]], rng: random.Random) -> None:
    before, after = pair
    # A changed value may happen to equal the old one (e.g. 1 → 1.0); the oracle tells us when it does.
    moved = oracle_canonical(oracle_stable(before)) != oracle_canonical(oracle_stable(after))
    same = params_digest(render(before, rng)).text == params_digest(render(after, rng)).text
    assert same is not moved
    assert params_digest(render(after, rng)).text == oracle_digest_text(after)


@pytest.mark.slow
@SETTINGS
@given(containers, rngs)
@example([{"\ue000": None, "\U0001f600": None}], ascii_rng())
def test_array_or_object_params_digest_like_the_oracle(tree: Any, rng: random.Random) -> None:
    text = render(tree, rng)
    is_request = isinstance(tree, dict) and "jsonrpc" in tree and "method" in tree
    if is_request:
        return
    assert params_digest(text).text == oracle_digest_text(tree)
    assert params_digest(text, whole_request=False).text == oracle_digest_text(tree)
    assert params_digest(parse(text)).canonical_size == len(oracle_canonical(oracle_stable(tree)))


@pytest.mark.slow
@SETTINGS
@given(params_trees(), rngs)
@example({"\uffff": 1, "\U00010000": 2, "requestState": 3, "_meta": {"baggage": 1}}, ascii_rng())
def test_stable_params_is_what_the_digest_hashes(params: dict[str, Any], rng: random.Random) -> None:
    text = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":' + render(params, rng) + "}"
    stable = stable_params(parse(text))
    assert canonical_bytes(stable) == oracle_canonical(oracle_stable(params))
    assert params_digest(stable, whole_request=False) == params_digest(text, whole_request=True)
