"""Each fast path of the JSON layer against its reference, on generated input.

The fast paths: number tokens respelled as text (against the exact ``Decimal`` route), the one-pass test for an
already-canonical token, the whole-buffer depth check (against a walk of the decoded tree), the digest of a
request body (against the reference scanner for refusals and the independent oracle for digests), with defects
planted where the digest does not hash: the envelope, the excluded members, ``_meta``; and numbers built in code
(in-bound ints unchecked, decimals checked without parsing their spelling back) against the token rule.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from soklet_core.json import (
    MAX_DEPTH,
    MAX_EXPONENT_MAGNITUDE,
    MAX_NUMBER_TOKEN_CHARS,
    JsonError,
    JsonErrorReason,
    JsonNumber,
    params_digest,
    parse,
    stable_params,
)
from soklet_core.json.codec import structure_within_limits
from soklet_core.json.numbers import (
    CANONICAL_TOKEN,
    canonical_decimal_text,
    canonical_number_text,
    check_decimal,
    decimal_from_token,
)
from soklet_core.json.scanner import locate_refusal
from tests.json.support import (
    decimals,
    oracle_digest_text,
    oracle_load,
    params_trees,
    render,
    rngs,
    spell_number,
    spell_string,
)

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except JsonError as error:
        return error.reason, error.offset


# --- number tokens -----------------------------------------------------------------------------------------------


@st.composite
def plain_tokens(draw: st.DrawFn) -> str:
    """Exponent-free tokens: up to 60 digits each side, trailing and leading zeros, the length limit's edge."""
    whole = draw(st.from_regex(r"[1-9][0-9]{0,59}", fullmatch=True)) + "0" * draw(st.sampled_from([0, 0, 1, 3, 12]))
    token = ("-" if draw(st.booleans()) else "") + draw(st.sampled_from(["0", whole]))
    if draw(st.booleans()):
        token += "." + "0" * draw(st.integers(0, 9)) + draw(st.from_regex(r"[0-9]{1,60}", fullmatch=True))
    length = draw(st.sampled_from([0, 0, 0, MAX_NUMBER_TOKEN_CHARS, MAX_NUMBER_TOKEN_CHARS + 1]))
    if length > len(token) + 1:
        token += ("" if "." in token else ".") + "0" * length
        token = token[:length]
    return token


exponent_tokens = st.builds(
    lambda digits, point, exponent: (
        digits[0] + (("." + digits[1:]) if point and len(digits) > 1 else digits[1:]) + "e" + str(exponent)
    ),
    st.from_regex(r"[1-9][0-9]{0,59}", fullmatch=True),
    st.booleans(),
    st.one_of(
        st.integers(-MAX_EXPONENT_MAGNITUDE - 70, MAX_EXPONENT_MAGNITUDE + 70),
        st.sampled_from([-MAX_EXPONENT_MAGNITUDE, MAX_EXPONENT_MAGNITUDE, -MAX_EXPONENT_MAGNITUDE - 1]),
    ),
)


def _reference_number(token: str) -> Any:
    return _outcome(lambda: canonical_decimal_text(decimal_from_token(token)))


@SETTINGS
@given(st.one_of(plain_tokens(), exponent_tokens, st.builds(spell_number, decimals(max_digits=60), rngs)))
@example("0")
@example("-0.000")
@example("0.0000001")
@example("-0.000001")
@example("1764480000000")
@example("1" * MAX_NUMBER_TOKEN_CHARS)
@example("1" * (MAX_NUMBER_TOKEN_CHARS + 1))
@example("9" * 60 + "0" * 30)
def test_number_respelled_as_text_matches_the_decimal_route(token: str) -> None:
    assert _outcome(canonical_number_text, token) == _reference_number(token)


@SETTINGS
@given(st.one_of(plain_tokens(), exponent_tokens, st.builds(spell_number, decimals(max_digits=60), rngs)))
@example("0.000001")
@example("-0.0000010")
@example("1" * (MAX_NUMBER_TOKEN_CHARS - 1) + "2")
def test_a_token_passed_as_canonical_is_canonical(token: str) -> None:
    """The encoder output keeps a token the one-pass test calls canonical: it must be its own canonical form."""
    if CANONICAL_TOKEN.fullmatch(token) is not None:
        assert _reference_number(token) == token


# --- depth -------------------------------------------------------------------------------------------------------


def _depth(node: Any) -> int:
    if isinstance(node, dict):
        return 1 + max(map(_depth, node.values()), default=0)
    if isinstance(node, list):
        return 1 + max(map(_depth, node), default=0)
    return 0


_NOISE = ["[", "]", "{", "}", ",", '"', "\\", "[[[[", "]]]]", '\\"', "\\\\", '\\"[', "\\\\]"]


@st.composite
def nested_documents(draw: st.DrawFn) -> str:
    """Wide documents (many containers) holding one chain near the depth limit and strings full of brackets."""
    rng = draw(rngs)
    chain = draw(st.one_of(st.integers(0, 12), st.integers(MAX_DEPTH - 10, MAX_DEPTH + 10)))

    def noise() -> str:
        return "".join(rng.choice(_NOISE) for _ in range(rng.randrange(0, 12)))

    def branch(depth: int) -> Any:
        if depth == 0:
            return rng.choice([noise(), 1, None, [], {}])
        if rng.random() < 0.5:
            return [branch(depth - 1) for _ in range(rng.randrange(1, 3))]
        return {noise(): branch(depth - 1) for _ in range(rng.randrange(1, 3))}

    rows = [branch(rng.randrange(0, 6)) for _ in range(draw(st.integers(0, 120)))]
    deep: Any = noise()
    for level in range(chain):
        deep = [deep] if level % 2 else {noise(): deep}
    rows.insert(rng.randrange(len(rows) + 1), deep)
    return render(rows, rng)


@pytest.mark.slow
@SETTINGS
@given(nested_documents())
@example("[" * MAX_DEPTH + "]" * MAX_DEPTH)
@example("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
@example('["' + "[" * 600 + '"]')
@example('["\\\\"' + ",[]" * 300 + "]")
def test_structure_check_agrees_with_a_walk_of_the_decoded_tree(text: str) -> None:
    raw = text.encode("utf-8")
    assert structure_within_limits(raw) is (_depth(json.loads(text)) <= MAX_DEPTH)


# --- the digest of a request body ---------------------------------------------------------------------------------

#: Defects the strict parser refuses, each spelled as a JSON value.
DEFECTS = {
    "duplicate": '{"a":1,"\\u0061":2}',
    "duplicate-supplementary": '{"\\ud800\\udc00":1,"\U00010000":2}',
    "escaped-lone-high": '"x\\ud800"',
    "escaped-lone-low": '"\\udc00"',
    "pair-then-lone": '"\\ud83d\\ude00\\ud83d"',
    "raw-lone": '"\ud800"',
    "exponent": "1e10001",
    "canonical-exponent": "12e10000",
    "long-number": "1" * (MAX_NUMBER_TOKEN_CHARS + 1),
}
PLACES = ["envelope", "id", "params", "requestState", "inputResponses", "meta-progressToken", "meta-kept"]


def _request_text(params: dict[str, Any], rng: random.Random, defect: str | None, place: str) -> tuple[str, bool]:
    """A request whose params are ``params``, with ``defect`` planted at ``place``; and whether it was planted."""
    bad = DEFECTS[defect] if defect is not None else "0"
    inner = render(params, rng).rstrip()[:-1].rstrip()
    member = {
        "params": '"x":' + bad,
        "requestState": '"requestState":' + bad,
        "inputResponses": '"inputResponses":{"q":' + bad + "}",
        "meta-progressToken": '"_meta":{"progressToken":' + bad + "}",
        "meta-kept": '"_meta":{"kept":' + bad + "}",
    }.get(place)
    name = {"params": "x", "requestState": "requestState", "inputResponses": "inputResponses"}.get(place, "_meta")
    if member is not None and name in params:
        member = None  # the document would repeat the member itself
    if member is not None:
        inner += ("" if inner.endswith("{") else ",") + member
    request_id = bad if place == "id" else spell_number(Decimal(7), rng)
    extra = ',"extra":' + bad if place == "envelope" else ""
    text = '{"jsonrpc":"2.0","id":' + request_id + ',"method":"tools/call"' + extra + ',"params":' + inner + "}}"
    return text, defect is not None and (member is not None or place in ("id", "envelope"))


@pytest.mark.slow
@SETTINGS
@given(params_trees(), rngs, st.sampled_from([None, *DEFECTS]), st.sampled_from(PLACES))
@example({"\uffff": 1, "\U00010000": 2}, random.Random(0), None, "params")
@example({"\uffff": [Decimal("1" * 60)]}, random.Random(0), "duplicate-supplementary", "requestState")
@example({}, random.Random(0), "exponent", "meta-progressToken")
def test_request_digest_refuses_what_the_scanner_refuses_and_hashes_what_the_oracle_hashes(
    params: dict[str, Any], rng: random.Random, defect: str | None, place: str
) -> None:
    text, planted = _request_text(params, rng, defect, place)
    refusal = locate_refusal(text)
    assert (refusal is not None) is planted
    digest = _outcome(lambda: params_digest(text).text)
    if refusal is not None:
        assert digest == (refusal.reason, refusal.offset)
        # The value path refuses the same, and bytes input too (a raw lone surrogate is not UTF-8 there).
        assert _outcome(parse, text) == digest
        if defect != "raw-lone":
            assert _outcome(lambda: params_digest(text.encode("utf-8"), cooperative=True).text) == digest
        return
    value = parse(text)
    assert params_digest(value).text == digest
    assert params_digest(stable_params(value), whole_request=False).text == digest
    assert params_digest(text.encode("utf-8"), cooperative=True).text == digest
    assert digest == oracle_digest_text(oracle_load(text)["params"])


@pytest.mark.parametrize("name", ["\uffff", "\U0010ffff", "\ud7ff", "\ue000", "a"])
def test_a_supplementary_name_sorts_by_utf16_on_every_path(name: str) -> None:
    # U+10000 is after U+FFFF in code points but before it in UTF-16 code units (its first unit is 0xD800), so
    # the two orders disagree exactly here; raw and escaped spellings must sort alike.
    text = '{"' + name + '":1,"\U00010000":2,"\\ud800\\udc01":3}'
    escaped = spell_string(name, random.Random(1), ascii_only=True)
    other = "{" + escaped + ':1,"\\ud800\\udc00":2,"\U00010001":3}'
    assert params_digest(text) == params_digest(parse(text))
    assert params_digest(other) == params_digest(parse(other))
    assert params_digest(text) == params_digest(other)


# --- numbers built in code ----------------------------------------------------------------------------------------


def _reference_value(value: Decimal | int) -> Any:
    """The rule for a number built in code: its held spelling must be a token the parser accepts."""
    number = Decimal(value)
    if not number.is_finite():
        return JsonErrorReason.NON_FINITE_NUMBER
    try:
        decimal_from_token(str(number))
    except JsonError as error:
        return error.reason
    return str(number)


def _built(value: Decimal | int) -> Any:
    try:
        return str(JsonNumber.from_value(value).value)
    except JsonError as error:
        return error.reason


@SETTINGS
@given(
    st.one_of(
        decimals(max_digits=60),
        st.builds(
            lambda d, e: Decimal((0, tuple(map(int, d)), e)),
            st.from_regex(r"[1-9][0-9]{0,60}", fullmatch=True),
            st.integers(-MAX_EXPONENT_MAGNITUDE - 70, MAX_EXPONENT_MAGNITUDE + 70),
        ),
        st.integers(-(10**70), 10**70),
        st.sampled_from(
            [
                10 ** (MAX_NUMBER_TOKEN_CHARS - 1) - 1,
                10 ** (MAX_NUMBER_TOKEN_CHARS - 1),
                10**MAX_NUMBER_TOKEN_CHARS,
                -(10 ** (MAX_NUMBER_TOKEN_CHARS - 1)) + 1,
                -(10 ** (MAX_NUMBER_TOKEN_CHARS - 1)),
                Decimal("NaN"),
                Decimal("-Infinity"),
            ]
        ),
    )
)
def test_numbers_built_in_code_follow_the_token_rule(value: Decimal | int) -> None:
    """In-bound ints skip the check and decimals are checked without parsing their spelling back: same answers."""
    expected = _reference_value(value)
    assert _built(value) == expected
    checked = _outcome(check_decimal, Decimal(value))
    assert checked == (expected if isinstance(expected, str) else (expected, None))
