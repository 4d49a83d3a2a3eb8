"""The reference scanner's runs: long arrays of plain items taken a run at a time give the same result as the walk
one value at a time, and a document refused for too many values is not walked value by value.

``locate_refusal(text, runs=False)`` is the plain walk (every value one loop pass); the default takes runs.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from soklet_core.json import MAX_DEPTH, MAX_NODES, MAX_NUMBER_TOKEN_CHARS, JsonErrorReason, scanner
from soklet_core.json.scanner import RUN_VALUES, locate_refusal

SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Array items a run takes, items it must leave to the walk, and near misses of both.
ITEMS = [
    "0",
    "-0",
    "7",
    "-12",
    "1.5",
    "3.50",
    "0.0000001",
    "1" * MAX_NUMBER_TOKEN_CHARS,
    "1" * (MAX_NUMBER_TOKEN_CHARS + 1),
    "-" + "1" * (MAX_NUMBER_TOKEN_CHARS - 1),
    "-" + "1" * MAX_NUMBER_TOKEN_CHARS,
    "0." + "5" * (MAX_NUMBER_TOKEN_CHARS - 2),
    "0." + "5" * (MAX_NUMBER_TOKEN_CHARS - 1),
    "01",
    "1.",
    ".5",
    "-",
    "+1",
    "1e5",
    "1E+2",
    "12e10000",
    "1.5.5",
    "1-",
    "NaN",
    "Infinity",
    "-Infinity",
    '""',
    '"a"',
    '"a,b"',
    '"a\\"b"',
    '"\\u0041"',
    '"\\ud800"',
    '"\x01"',
    '"\ud800"',
    '"unterminated',
    "true",
    "false",
    "null",
    "nul",
    "truex",
    "[]",
    "[ ]",
    "{}",
    "{ \n}",
    "[1]",
    '{"a":1}',
    '{"a":1,"a":2}',
    "",
    "]",
    ":",
]
SEPARATORS = [",", " , ", "\n,\t", ",,", " ", ""]


def assert_same(text: str) -> None:
    fast, plain = locate_refusal(text), locate_refusal(text, runs=False)
    assert (fast and (fast.reason, fast.offset)) == (plain and (plain.reason, plain.offset))


@st.composite
def documents(draw: st.DrawFn) -> str:
    items = draw(st.lists(st.sampled_from(ITEMS), min_size=1, max_size=12))
    separators = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(items), max_size=len(items)))
    body = "".join(item + separator for item, separator in zip(items, separators, strict=True))
    if draw(st.booleans()):
        body = body.rstrip(",")
    depth = draw(st.sampled_from([1, 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1]))
    wrapper = draw(st.sampled_from(["array", "member"]))
    inner = "[" + body + "]"
    if wrapper == "member":
        inner = '{"k":' + inner + "}"
    return "[" * (depth - 1) + inner + "]" * (depth - 1) + draw(st.sampled_from(["", " ", "]", "0"]))


@SETTINGS
@given(documents())
@example("[0,0,0]")
@example("[" * (MAX_DEPTH - 1) + "[[],0]" + "]" * (MAX_DEPTH - 1))
@example("[" * (MAX_DEPTH - 1) + "[0,{}]" + "]" * (MAX_DEPTH - 1))
@example("[" * MAX_DEPTH + "[],0" + "]" * MAX_DEPTH)
@example("[1,2,]")
@example("[1 , 2 ,3 ]")
def test_runs_agree_with_the_plain_walk(text: str) -> None:
    assert_same(text)


def zeros(values: int) -> str:
    """``[0,0,...]`` holding ``values`` values in all (the root array is one of them)."""
    return "[" + "0," * (values - 2) + "0]"


def count_walked_numbers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    walk = scanner._scan_number

    def counted(text: str, pos: int) -> int:
        calls[0] += 1
        return walk(text, pos)

    monkeypatch.setattr(scanner, "_scan_number", counted)
    return calls


def test_max_nodes_passes_in_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_walked_numbers(monkeypatch)
    assert locate_refusal(zeros(MAX_NODES)) is None
    assert calls[0] <= RUN_VALUES + 1


def test_too_many_values_is_not_walked_value_by_value(monkeypatch: pytest.MonkeyPatch) -> None:
    # The refusal's reason and offset are the last value's (offsets are bytes; this text is ASCII), found while
    # at most the last RUN_VALUES values before the limit are walked one at a time, not MAX_NODES of them.
    calls = count_walked_numbers(monkeypatch)
    text = zeros(MAX_NODES + 1)
    refusal = locate_refusal(text)
    assert refusal is not None
    assert (refusal.reason, refusal.offset) == (JsonErrorReason.TOO_MANY_NODES, len(text) - len("0]"))
    assert calls[0] <= RUN_VALUES + 1


@pytest.mark.slow
def test_too_many_values_agrees_with_the_plain_walk() -> None:
    # Values of every kind a run takes, spaced, past the limit; then a late problem the limit hides.
    unit = '0,-1.5, "a" ,true,[],{ },'
    text = "[" + unit * ((MAX_NODES + len(unit)) // 6) + "1e99999]"
    assert_same(text)
    refusal = locate_refusal(text)
    assert refusal is not None
    assert refusal.reason is JsonErrorReason.TOO_MANY_NODES
