"""The msgspec path of the params digest against the exact path, on generated input.

The reference is the exact path itself: the document parsed by :func:`load_canonical_tree` and digested from that
tree, which never goes near msgspec; a refusal is compared with its reason *and* byte offset. Generated requests
carry 60-digit numbers, exponents and number tokens at their limits, ``-0``, supplementary-plane member names
(whose UTF-16 order differs from code-point order), escaped quotes and colons in member names, and defects
planted anywhere, including where the digest does not hash (the envelope, the excluded members, ``_meta``):
duplicate members at any depth, lone surrogates escaped and raw, over-long numbers, over-deep nesting. A second
test holds the msgspec path to taking most valid documents itself, so agreement is not won by always falling back.
"""

from __future__ import annotations

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
    JsonArray,
    JsonError,
    JsonErrorReason,
    JsonNumber,
    JsonObject,
    JsonValue,
    canonical_bytes,
    params_digest,
    parse,
)
from soklet_core.json.canonical import canonical_chunks, load_canonical_tree, tree_from_value
from soklet_core.json.msgspec_canonical import (
    DIGEST_DOCUMENT_BYTES,
    SMALL_DOCUMENT_BYTES,
    encode_canonical,
    encode_value,
    load_canonical_data,
)
from tests.json.support import oracle_canonical, oracle_load, params_trees, render, rngs, spell_number, spell_string

SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

_LIMIT = MAX_NUMBER_TOKEN_CHARS
_EXP = MAX_EXPONENT_MAGNITUDE

#: Number tokens at the edges of the number rules (each a valid JSON token; some refused by soklet's limits).
EDGE_NUMBERS = [
    "0",
    "-0",
    "-0.0",
    "0e0",
    "-0E-5",
    "1.0E+2",
    "100",
    "-120",
    "1764480000000",
    "0.0000001",
    "-0.000001",
    "9" * 60,
    "9" * 60 + "0" * 30,
    "-" + "1" * 59 + "0",
    "1" * 30 + "." + "5" * 30,
    f"1e{_EXP}",
    f"1e-{_EXP}",
    f"1e{_EXP + 1}",
    f"1e-{_EXP + 1}",
    f"12e{_EXP}",
    f"0.12e-{_EXP - 1}",
    f"1E+{_EXP}0",
    "1" * _LIMIT,
    "1" * (_LIMIT + 1),
    "1" * (_LIMIT - 1) + "0",
    "1" + "0" * _LIMIT,
    "-" + "1" * (_LIMIT - 1),
    "-" + "1" * _LIMIT,
    "0." + "1" * (_LIMIT - 2),
    "0." + "1" * (_LIMIT - 1),
    "1" * (_LIMIT - 6) + "e+100",
    "1" * 5000,
]

#: Defects the exact path refuses, each spelled as a JSON value (some are values it accepts, as a control).
DEFECTS = {
    "duplicate": '{"a":1,"\\u0061":2}',
    "duplicate-deep": '[{"x":[{"b":1,"c":2,"b":3}]}]',
    "duplicate-colon-name": '{"a:b":1,"a\\u003ab":2}',
    "duplicate-colon-value": '{"k":"1:2:3","k":"4"}',
    "duplicate-hides-colons": '{"k":{"u":"http://x"},"k":{"u:v":1,"w":2}}',
    "duplicate-escaped-colon": '{"k":1,"k":"\\u003a"}',
    "duplicate-supplementary": '{"\\ud800\\udc00":1,"\U00010000":2}',
    "escaped-colon-names": '{"\\u003a":1,"\\u003A\\u003a":2}',
    "escaped-quote-names": '{"a\\"":1,"a\\\\":2,"\\"":3}',
    "escaped-lone-high": '"x\\ud800"',
    "escaped-high-high": '"\\ud800\\ud800"',
    "escaped-high-then-letter": '"\\ud83d\\u0041"',
    "escaped-lone-low": '"\\udc00"',
    "pair-then-lone": '"\\ud83d\\ude00\\ud83d"',
    "raw-lone": '"\ud800"',
    "control-character": '"a\x01b"',
    "deep-ok": "[" * (MAX_DEPTH - 4) + "]" * (MAX_DEPTH - 4),
    "too-deep": "[" * MAX_DEPTH + "]" * MAX_DEPTH,
    "non-finite": "NaN",
    "leading-zero": "01",
    **{f"number-{index}": token for index, token in enumerate(EDGE_NUMBERS)},
}
#: Bytes that are not UTF-8, planted through a private-use marker character (see :func:`_encoded`).
BAD_BYTES = {
    "\U000f0000": b'"\xc0\xaf"',  # overlong "/"
    "\U000f0001": b'"\xf4\x90\x80\x80"',  # past U+10FFFF
    "\U000f0002": b'"\xe2\x82"',  # truncated sequence
    "\U000f0003": b'"\x80"',  # lone continuation byte
    "\U000f0004": b"\xff",  # outside any string
    "\U000f0005": b'"\xed\xbf\xbf"',  # an encoded low surrogate
}
DEFECTS.update({f"bad-utf8-{index}": marker for index, marker in enumerate(BAD_BYTES)})
PLACES = ["envelope", "id", "params", "requestState", "inputResponses", "meta-progressToken", "meta-kept"]


def reference(data: bytes, whole_request: bool | None = None) -> Any:
    """The exact path's answer: the digest text, or the refusal's reason and offset."""
    try:
        return params_digest(load_canonical_tree(data), whole_request=whole_request).text
    except JsonError as error:
        return error.reason, error.offset


def answer(data: bytes | str, whole_request: bool | None = None) -> Any:
    """What ``params_digest`` answers (through msgspec first, when not cooperative)."""
    try:
        return params_digest(data, whole_request=whole_request).text
    except JsonError as error:
        return error.reason, error.offset


def request_text(params: dict[str, Any], rng: random.Random, defect: str | None, place: str) -> str:
    """A request whose params are ``params``, with ``defect`` planted at ``place``."""
    bad = DEFECTS[defect] if defect is not None else spell_number(Decimal(rng.randrange(-50, 50)), rng)
    inner = render(params, rng).rstrip()[:-1].rstrip()
    member = {
        "params": '"x":' + bad,
        "requestState": '"requestState":' + bad,
        "inputResponses": '"inputResponses":{"q":' + bad + "}",
        "meta-progressToken": '"_meta":{"progressToken":' + bad + "}",
        "meta-kept": '"_meta":{"kept":' + bad + "}",
    }.get(place)
    name = {"params": "x", "requestState": "requestState", "inputResponses": "inputResponses"}.get(place, "_meta")
    if member is not None and name not in params:
        inner += ("" if inner.endswith("{") else ",") + member
    request_id = bad if place == "id" else spell_number(Decimal(7), rng)
    extra = ',"extra":' + bad if place == "envelope" else ""
    return '{"jsonrpc":"2.0","id":' + request_id + ',"method":"tools/call"' + extra + ',"params":' + inner + "}}"


def encoded_text(text: str) -> bytes:
    # A raw lone surrogate cannot be UTF-8; it travels as the three bytes the codec refuses (ED A0 80).
    data = text.encode("utf-8", "surrogatepass")
    for marker, bad in BAD_BYTES.items():
        data = data.replace(marker.encode("utf-8"), bad)
    return data


@pytest.mark.slow
@SETTINGS
@given(params_trees(), rngs, st.sampled_from([None, None, *DEFECTS]), st.sampled_from(PLACES))
@example({"\uffff": 1, "\U00010000": 2}, random.Random(0), None, "params")
@example({"a": "12:30"}, random.Random(0), "duplicate-colon-value", "meta-kept")
@example({}, random.Random(0), "duplicate-deep", "requestState")
@example({}, random.Random(0), "escaped-colon-names", "params")
@example({}, random.Random(0), "number-21", "id")
def test_the_msgspec_digest_answers_what_the_exact_path_answers(
    params: dict[str, Any], rng: random.Random, defect: str | None, place: str
) -> None:
    data = encoded_text(request_text(params, rng, defect, place))
    if len(data) > SMALL_DOCUMENT_BYTES:
        return
    expected = reference(data)
    assert answer(data) == expected
    assert answer(bytearray(data)) == expected
    # Without the request envelope: the same params digested as bare params.
    assert answer(data, whole_request=False) == reference(data, whole_request=False)


@pytest.mark.slow
@SETTINGS
@given(
    st.one_of(
        st.sampled_from(list(DEFECTS.values())),
        st.builds(lambda token: "[" + token + "]", st.sampled_from(EDGE_NUMBERS)),
        st.builds(lambda token: '{"a":' + token + "}", st.sampled_from(EDGE_NUMBERS)),
        st.builds(render, st.one_of(st.none(), st.booleans(), st.text(max_size=5)), rngs),
        st.builds(
            lambda value, rng: spell_number(value, rng), st.decimals(allow_nan=False, allow_infinity=False), rngs
        ),
    ),
    st.sampled_from([None, True, False]),
)
@example('{"jsonrpc":"2.0","method":"x","params":5}', None)
@example('{"jsonrpc":"2.0","method":"x","params":"s"}', None)
@example('{"jsonrpc":"2.0","method":"x","params":null,"id":' + "1" * (_LIMIT + 1) + "}", None)
@example('{"jsonrpc":"2.0","method":"x"}', None)
@example("1" * (_LIMIT + 1), None)
def test_bare_values_and_unstructured_params_answer_alike(text: str, whole_request: bool | None) -> None:
    data = encoded_text(text)
    assert answer(data, whole_request) == reference(data, whole_request)


@pytest.mark.slow
@SETTINGS
@given(params_trees(), rngs)
@example({"a": [Decimal("-0"), Decimal("1.0E+2"), Decimal("9" * 60)]}, random.Random(0))
def test_valid_documents_mostly_take_the_msgspec_path_and_encode_canonically(
    params: dict[str, Any], rng: random.Random
) -> None:
    text = render(params, rng)
    raw = text.encode("utf-8")
    loaded = load_canonical_data(raw)
    names_need_utf16 = any(ord(char) > 0xFFFF for char in _names(oracle_load(text)))
    if loaded is None:
        # Only a document the msgspec path cannot prove (supplementary names, an escaped colon) may fall back.
        assert names_need_utf16 or b"\\u003a" in raw.lower()
        return
    assert encode_canonical(loaded) == oracle_canonical(oracle_load(text))


def _names(tree: Any) -> str:
    if isinstance(tree, dict):
        return "".join(tree) + "".join(map(_names, tree.values()))
    if isinstance(tree, list):
        return "".join(map(_names, tree))
    return ""


@pytest.mark.parametrize(
    "text", ['{"a":1,"a":1}', '{"k":1,"k":"\\u003a"}', '[{"x":{"a":"1:2"},"x":2}]', '{"\\u003a":1,":":2}']
)
def test_duplicates_are_refused_with_the_exact_offset(text: str) -> None:
    data = text.encode("utf-8")
    assert load_canonical_data(data) is None
    outcome = answer(data)
    assert outcome == reference(data)
    assert outcome[0] is JsonErrorReason.DUPLICATE_MEMBER


@pytest.mark.parametrize("bad", list(BAD_BYTES.values()))
@pytest.mark.parametrize("shape", [b"[1,%s]", b'{"a":%s}', b'{"jsonrpc":"2.0","method":"m","id":%s,"params":{}}'])
def test_bytes_that_are_not_utf8_are_refused_as_the_exact_path_refuses(bad: bytes, shape: bytes) -> None:
    data = shape % bad
    assert load_canonical_data(data) is None
    outcome = answer(data)
    assert outcome == reference(data)
    assert outcome[0] in (JsonErrorReason.INVALID_UTF8, JsonErrorReason.LONE_SURROGATE)


@pytest.mark.parametrize("rows", [10, 3000, pytest.param(60_000, marks=pytest.mark.slow)])
def test_larger_documents_take_the_msgspec_path_and_agree(rows: int) -> None:
    row = '{"a":"x:y","b":100,"c":1.50,"d":-12e3,"e":"\\u00e9\\ud83d\\ude00"},'
    valid = ('{"rows":[' + row * rows + '{}],"_meta":{"progressToken":1}}').encode("utf-8")
    assert load_canonical_data(valid) is not None
    assert answer(valid) == reference(valid)
    # A duplicate at the very end, after every row: refused with the exact path's offset.
    repeated = valid[:-1] + b',"rows":1}'
    assert load_canonical_data(repeated) is None
    outcome = answer(repeated)
    assert outcome == reference(repeated)
    assert outcome[0] is JsonErrorReason.DUPLICATE_MEMBER


@pytest.mark.slow
def test_past_the_largest_body_and_when_cooperative_the_exact_path_answers() -> None:
    row = b'{"a":[100,1.50,"x"]},'
    data = b'{"rows":[' + row * (DIGEST_DOCUMENT_BYTES // len(row) + 1) + b"{}]}"
    assert len(data) > DIGEST_DOCUMENT_BYTES
    digest = params_digest(data)
    assert digest == params_digest(load_canonical_tree(data))
    small = b'{"rows":[' + row * 40 + b"{}]}"
    assert params_digest(small, cooperative=True) == params_digest(small)


def test_str_input_with_a_lone_surrogate_is_refused_as_the_exact_path_refuses() -> None:
    text = '{"a":"\ud800"}'
    assert answer(text) == (JsonErrorReason.LONE_SURROGATE, 6)


def test_max_bytes_below_the_document_is_refused_as_too_large() -> None:
    assert answer_with_max(b'{"a":1}', 6) == (JsonErrorReason.INPUT_TOO_LARGE, 6)
    assert answer_with_max(b'{"a":1}', 7) == reference(b'{"a":1}')


def answer_with_max(data: bytes, max_bytes: int) -> Any:
    try:
        return params_digest(data, max_bytes=max_bytes).text
    except JsonError as error:
        return error.reason, error.offset


def test_the_supplementary_name_order_is_utf16_on_the_small_path() -> None:
    text = '{"\uffff":1,"\U00010000":2,"\\ud800\\udc01":3,"a":"\U0001f600"}'
    assert answer(text) == reference(text.encode("utf-8"))
    # Supplementary characters in string values only: the msgspec path keeps the document.
    assert load_canonical_data('{"b":"\U0001f600","a":"\\ud83d\\ude00"}'.encode()) is not None


def test_escaped_names_keep_their_canonical_escapes() -> None:
    text = spell_string('a"\\/\x01\u2028', random.Random(3), ascii_only=True)
    data = ("{" + text + ":1}").encode("utf-8")
    loaded = load_canonical_data(data)
    assert loaded is not None
    assert encode_canonical(loaded) == oracle_canonical(oracle_load(data))


# --- values of the model ----------------------------------------------------------------------------------------


def _exact_value_bytes(value: JsonValue) -> Any:
    try:
        return b"".join(canonical_chunks(tree_from_value(value)))
    except JsonError as error:
        return error.reason, error.offset


def _value_bytes(value: JsonValue) -> Any:
    try:
        return canonical_bytes(value)
    except JsonError as error:
        return error.reason, error.offset


@pytest.mark.slow
@SETTINGS
@given(params_trees(), rngs)
@example({"a": [Decimal("-0"), Decimal("1.0E+2"), Decimal("9" * 60), Decimal("1E-7")]}, random.Random(0))
@example({"\uffff": 1, "\U00010000": {"\U0010ffff": 2, "\ue000": 3}}, random.Random(0))
def test_a_value_is_written_as_the_exact_path_writes_it(params: dict[str, Any], rng: random.Random) -> None:
    value = parse(render(params, rng))
    expected = _exact_value_bytes(value)
    assert _value_bytes(value) == expected
    assert expected == oracle_canonical(oracle_load(render(params, rng)))
    if not any(ord(char) > 0xFFFF for char in _names(params)):
        assert encode_value(value) == expected


def _nested(depth: int, leaf: JsonValue) -> JsonValue:
    value = leaf
    for level in range(depth):
        value = JsonArray.of(value) if level % 2 else JsonObject.builder().put("k", value).build()
    return value


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 3 * MAX_DEPTH, 5000])
def test_values_nested_past_the_depth_limit_are_refused_as_the_exact_path_refuses(depth: int) -> None:
    # Values built apart can nest deeper than any parse allows.
    value = _nested(depth, JsonNumber.from_value(Decimal("1.50")))
    expected = _exact_value_bytes(value)
    assert _value_bytes(value) == expected
    assert (expected[0] is JsonErrorReason.DEPTH_EXCEEDED) is (depth > MAX_DEPTH)
