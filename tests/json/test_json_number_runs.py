"""Large documents hold long arrays of numbers packed (``soklet_core.json.number_runs``): the value model, the
canonical form, the digest and every refusal are what the stdlib oracle and the reference scanner say, and the
memory a parse or a digest takes stays a small multiple of the document.
"""

from __future__ import annotations

import random
import tracemalloc
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soklet_core.json import (
    MAX_NUMBER_TOKEN_CHARS,
    JsonError,
    JsonValue,
    canonical_bytes,
    params_digest,
    parse,
    serialize,
)
from soklet_core.json.canonical import load_canonical_tree
from soklet_core.json.number_runs import CHUNK_NUMBERS, PACKED_FROM_BYTES, PACKED_FROM_NUMBERS, pack_number_arrays
from soklet_core.json.scanner import locate_refusal
from tests.json.support import oracle_canonical, oracle_digest_text, oracle_load, same_tree

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOKENS = ["0", "-0", "7", "-12", "1.50", "3.25", "0.0000001", "1200", "0.5", "1" * MAX_NUMBER_TOKEN_CHARS]
#: Items that keep an array from being packed (it is decoded as it is).
BREAKERS = ["1e5", "1E-2", '"a"', "null", "[1]", " 5"]
#: Items that make the document invalid.
ERRORS = ["01", "1.", "-", "12e10000", "", "NaN", "1 2", "1" * (MAX_NUMBER_TOKEN_CHARS + 1)]
#: Strings around and between the arrays: escaped quotes, backslashes, brackets and numbers inside strings.
STRINGS = ['"plain"', '"say \\"[1,2]\\" twice"', '"a\\\\"', '"\\\\\\""', '"[' + "1," * 70 + '1]"', '"["', '"]"']


@st.composite
def number_array(draw: st.DrawFn, rng: random.Random) -> str:
    count = draw(st.sampled_from([PACKED_FROM_NUMBERS - 1, PACKED_FROM_NUMBERS, 200, 17_000]))
    items = [rng.choice(TOKENS) for _ in range(count)]
    if draw(st.integers(0, 3)) == 0:
        items[rng.randrange(count)] = rng.choice(BREAKERS)
    return "[" + ",".join(items) + "]"


@st.composite
def documents(draw: st.DrawFn) -> str:
    rng = random.Random(draw(st.integers(0, 2**32)))
    parts: list[str] = []
    for index in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["array", "nested", "string", "both"]))
        if kind == "array":
            value = draw(number_array(rng))
        elif kind == "nested":
            value = "[" + draw(number_array(rng)) + "," + draw(number_array(rng)) + "]"
        elif kind == "string":
            value = draw(st.sampled_from(STRINGS))
        else:
            value = "[" + draw(st.sampled_from(STRINGS)) + "," + draw(number_array(rng)) + "]"
        parts.append(f'"m{index}":{value}')
    parts.append('"pad":"' + "x" * PACKED_FROM_BYTES + '"')
    rng.shuffle(parts)
    text = "{" + ",".join(parts) + "}"
    if draw(st.booleans()):
        text = "[" + text + "," + draw(number_array(rng)) + "]"
    return text


def oracle_value(tree: Any) -> JsonValue:
    return JsonValue.from_python(tree)


@SETTINGS
@given(documents())
def test_packed_documents_agree_with_the_oracle(text: str) -> None:
    data = text.encode()
    tree = oracle_load(text)
    value = parse(data)
    assert same_tree(value.to_python(), tree)
    expected = oracle_value(tree)
    assert value == expected
    assert hash(value) == hash(expected)
    assert serialize(value) == serialize(expected)
    assert canonical_bytes(data) == oracle_canonical(tree)
    assert canonical_bytes(value) == oracle_canonical(tree)
    for cooperative in (False, True):
        assert params_digest(data, whole_request=False, cooperative=cooperative).text == oracle_digest_text(tree)


@SETTINGS
@given(documents(), st.data())
def test_packed_documents_refuse_as_the_scanner(text: str, data: st.DataObject) -> None:
    # An invalid token spliced after a comma of the document (in an array or not, in a string or not).
    commas = [index for index, char in enumerate(text) if char == ","]
    cut = data.draw(st.sampled_from(commas)) + 1
    broken = text[:cut] + data.draw(st.sampled_from(ERRORS)) + "," + text[cut:]
    expected = locate_refusal(broken, runs=False)
    if expected is None:
        return  # the splice landed inside a string
    for refused in (
        parse,
        canonical_bytes,
        lambda doc: params_digest(doc, whole_request=False),
        lambda doc: params_digest(doc, whole_request=False, cooperative=True),
    ):
        with pytest.raises(JsonError) as info:
            refused(broken.encode())
        assert (info.value.reason, info.value.offset) == (expected.reason, expected.offset)


def distinct_decimals(size: int) -> bytes:
    """A tools/call whose arguments.rows are distinct decimals (1.0000, 1.0001, ...): about ``size`` bytes."""
    count = size // 7
    rows = ",".join(f"{index // 10_000 + 1}.{index % 10_000:04d}" for index in range(count))
    return (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"catalog.continue",'
        '"arguments":{"rows":[' + rows + ']},"_meta":{"progressToken":1}}}'
    ).encode()


def test_packed_array_reads_like_a_tuple() -> None:
    body = distinct_decimals(PACKED_FROM_BYTES * 4)
    rows = parse(body)["params"]["arguments"]["rows"]  # type: ignore[index]
    tree = oracle_load(body)["params"]["arguments"]["rows"]
    assert len(rows) == len(tree)
    for index in (0, 1, CHUNK_NUMBERS - 1, CHUNK_NUMBERS, 3 * CHUNK_NUMBERS + 5, len(tree) - 1, -1, -len(tree)):
        assert rows[index].value.as_tuple() == tree[index].as_tuple()  # type: ignore[union-attr]
    with pytest.raises(IndexError):
        rows[len(tree)]
    assert [item.value for item in rows[5:9]] == tree[5:9]  # type: ignore[union-attr]
    assert [item.value for item in rows] == tree  # type: ignore[union-attr]


def test_arrays_in_strings_and_small_documents_are_not_packed() -> None:
    numbers = ",".join(["1.5"] * PACKED_FROM_NUMBERS)
    assert pack_number_arrays('["[' + numbers + ']"]') is None
    assert pack_number_arrays('["\\"", "[' + numbers + ']"]') is None
    assert pack_number_arrays("[" + ",".join(["1.5"] * (PACKED_FROM_NUMBERS - 1)) + "]") is None
    packed = pack_number_arrays('{"s":"\\"[","a":[' + numbers + "]}")
    assert packed is not None
    assert list(packed.arrays.values()) == [(numbers,)]


def peak_over_size(work: Any, body: bytes) -> float:
    tracemalloc.start()
    try:
        result = work(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    return peak / len(body)


@pytest.mark.parametrize(
    "work",
    [parse, lambda body: params_digest(body, whole_request=True, cooperative=True)],
    ids=["parse", "cooperative-digest"],
)
def test_distinct_decimals_take_a_small_multiple_of_the_body(work: Any) -> None:
    # Allocations traced by Python, not time: a JsonNumber and its Decimal per item was about 22 times the body
    # (the digest's tree of fenced strings about 13).
    body = distinct_decimals(2 * 1024 * 1024)
    assert peak_over_size(work, body) <= 5


def test_values_come_out_exact() -> None:
    body = ('{"a":[' + ",".join(["-0", "1.50", "0.0000001"] * 40) + '],"b":"' + "x" * PACKED_FROM_BYTES + '"}').encode()
    items = parse(body)["a"]  # type: ignore[index]
    assert [item.value.as_tuple() for item in list(items)[:3]] == [  # type: ignore[union-attr]
        Decimal("-0").as_tuple(),
        Decimal("1.50").as_tuple(),
        Decimal("0.0000001").as_tuple(),
    ]
    assert canonical_bytes(body).startswith(b'{"a":[0,1.5,1E-7,0,')


def test_packed_arrays_in_the_parts_a_digest_leaves_out() -> None:
    numbers = "[" + ",".join(f"{index}.25" for index in range(5_000)) + "]"
    text = (
        '{"jsonrpc":"2.0","id":' + "7" + ',"method":"tools/call","params":{"inputResponses":' + numbers + ","
        '"_meta":{"progressToken":' + numbers + '},"kept":' + numbers + '},"extra":' + numbers + "}"
    )
    tree = oracle_load(text)
    for cooperative in (False, True):
        digest = params_digest(text.encode(), whole_request=True, cooperative=cooperative)
        assert digest.text == oracle_digest_text(tree["params"])
        assert digest.text == params_digest(parse(text.encode()), whole_request=True).text
        tree_digest = params_digest(load_canonical_tree(text.encode(), cooperative=cooperative), whole_request=True)
        assert tree_digest.text == digest.text
