"""Exact numbers and their canonical spelling (docs/json.md: "The canonical form")."""

from __future__ import annotations

import random
from collections.abc import Callable
from decimal import Decimal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from soklet_core.json import (
    JsonArray,
    JsonError,
    JsonErrorReason,
    JsonNumber,
    canonical_bytes,
    canonical_decimal_text,
    canonical_text,
    params_digest,
    parse,
    serialize,
)
from tests.json.support import decimals, oracle_number, rngs, spell_number

# The canonical spelling docs/json.md gives, then the cases the issue names, then more of the same rule.
CANONICAL_NUMBERS = [
    ("100", "1E+2"),
    ("120", "1.2E+2"),
    ("1.50", "1.5"),
    ("0.0", "0"),
    ("0.000001", "0.000001"),
    ("0.0000001", "1E-7"),
    ("-0", "0"),
    ("-0.0", "0"),
    ("-0e5", "0"),
    ("0e0", "0"),
    ("0.000e-3", "0"),
    ("0", "0"),
    ("1", "1"),
    ("-1", "-1"),
    ("10", "1E+1"),
    ("-100", "-1E+2"),
    ("-120", "-1.2E+2"),
    ("-1.50", "-1.5"),
    ("-0.000001", "-0.000001"),
    ("-0.0000001", "-1E-7"),
    ("1e2", "1E+2"),
    ("1E2", "1E+2"),
    ("1E+2", "1E+2"),
    ("1e+2", "1E+2"),
    ("10e1", "1E+2"),
    ("0.5e1", "5"),
    ("100.0", "1E+2"),
    ("1.0", "1"),
    ("1e0", "1"),
    ("5E-0", "5"),
    ("25e-1", "2.5"),
    ("123e-5", "0.00123"),
    ("2.50E+3", "2.5E+3"),
    ("123.456", "123.456"),
    ("1000000.5", "1000000.5"),
    ("0.10", "0.1"),
    ("0.00001234", "0.00001234"),
    ("0.000001234", "0.000001234"),
    ("0.0000001234", "1.234E-7"),
    ("1.5e-7", "1.5E-7"),
    ("1e-7", "1E-7"),
    ("1e-6", "0.000001"),
    ("12345678901234567890", "1.234567890123456789E+19"),
    ("1e1000", "1E+1000"),
    ("1e-1000", "1E-1000"),
]


@pytest.mark.parametrize(("token", "expected"), CANONICAL_NUMBERS)
def test_canonical_number_spelling(token: str, expected: str) -> None:
    # Through the document path (its own string fast path for plain tokens) ...
    assert canonical_bytes(f"[{token}]".encode()) == f"[{expected}]".encode()
    assert canonical_bytes(token.encode()) == expected.encode()
    # ... through the value model ...
    value = parse(token)
    assert canonical_text(value) == expected
    assert canonical_text(JsonArray.of(Decimal(token))) == f"[{expected}]"
    # ... and through the public helper.
    assert canonical_decimal_text(Decimal(token)) == expected
    # Our independent oracle agrees with the table.
    assert oracle_number(Decimal(token)) == expected


@pytest.mark.parametrize(("token", "expected"), CANONICAL_NUMBERS)
def test_canonical_number_is_a_fixpoint(token: str, expected: str) -> None:
    assert canonical_bytes(expected.encode()) == expected.encode()
    assert parse(expected) == parse(token)


LONG_EXACT = [
    "123456789012345678901234567890123456789012345678901234567890123",
    "-987654321098765432109876543210987654321098765432109876543210987654321",
    "100000000000000000000000000000000000000000000000000000000000000000001",
    "0.123456789012345678901234567890123456789012345678901234567890123",
    "3.14159265358979323846264338327950288419716939937510582097494459230781640628620899",
    "-2.7182818284590452353602874713526624977572470936999595749669676277e-40",
    "9999999999999999999999999999999999999999999999999999999999999.9999999999",
    "1.000000000000000000000000000000000000000000000000000000000000001e+5000",
]


@pytest.mark.parametrize("token", LONG_EXACT)
def test_numbers_of_60_plus_digits_are_kept_exact(token: str) -> None:
    value = parse(token)
    assert isinstance(value, JsonNumber)
    assert value.value.as_tuple() == Decimal(token).as_tuple()  # digits and scale, no rounding
    assert len(value.value.as_tuple().digits) > 60
    canonical = canonical_text(value)
    assert canonical == oracle_number(Decimal(token))
    assert canonical_bytes(token.encode()).decode() == canonical
    assert canonical_bytes(f'{{"n": {token}}}'.encode()) == f'{{"n":{canonical}}}'.encode()
    # The canonical text is the exact value: Decimal comparison is exact whatever the context precision.
    assert Decimal(canonical) == Decimal(token)


def test_long_numbers_differing_in_the_last_digit_stay_different() -> None:
    left = "1234567890123456789012345678901234567890123456789012345678901"
    right = left[:-1] + "2"
    assert parse(left) != parse(right)
    assert canonical_bytes(left.encode()) != canonical_bytes(right.encode())
    assert params_digest(f"[{left}]").text != params_digest(f"[{right}]").text
    # Beyond Python's default 28-digit context, too, and after the decimal point.
    assert parse("0." + left) != parse("0." + right)
    assert parse(f"{left}e-30") != parse(f"{right}e-30")


def test_serialize_keeps_the_spelled_scale() -> None:
    assert serialize(parse(b"3.50")) == "3.50"
    assert serialize(parse(b"[1.0, 100, 0.00, -0]")) == "[1.0,100,0.00,-0]"
    assert serialize(JsonNumber.from_value(Decimal("3.50"))) == "3.50"
    assert canonical_text(parse(b"3.50")) == "3.5"


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(decimals(max_digits=90))
@example(Decimal("1E+10000"))
@example(Decimal("-1.0000000000000000000000000000001E-10000"))
@example(Decimal("0E-50"))
@example(Decimal("1234567890123456789012345678901234567890"))
def test_canonical_decimal_text_matches_the_to_scientific_string_oracle(value: Decimal) -> None:
    assert canonical_decimal_text(value) == oracle_number(value)
    number = JsonNumber.from_value(value)
    assert canonical_text(number) == oracle_number(value)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(decimals(max_digits=90), rngs)
@example(Decimal("0.0000001"), random.Random(0))
@example(Decimal("-100"), random.Random(1))
def test_every_spelling_of_a_number_canonicalizes_alike(value: Decimal, rng: random.Random) -> None:
    token = spell_number(value, rng)
    expected = oracle_number(value)
    assert canonical_bytes(token.encode()) == expected.encode()
    assert canonical_bytes(f'[{token},{{"k":{token}}}]'.encode()) == f'[{expected},{{"k":{expected}}}]'.encode()
    parsed = parse(token)
    assert parsed == JsonNumber.from_value(value)
    assert hash(parsed) == hash(JsonNumber.from_value(value))
    assert isinstance(parsed, JsonNumber)
    assert parsed.value.as_tuple() == Decimal(token).as_tuple()


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(10**300), max_value=10**300))
def test_integers_canonicalize_exactly(number: int) -> None:
    expected = oracle_number(Decimal(number))
    assert canonical_bytes(str(number).encode()) == expected.encode()
    assert canonical_text(JsonNumber.from_value(number)) == expected
    assert parse(str(number)) == JsonNumber.from_value(number)


def _outcome(fn: Callable[[bytes], object], doc: bytes) -> tuple[JsonErrorReason, int | None] | None:
    try:
        fn(doc)
    except JsonError as error:
        return error.reason, error.offset
    return None


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.from_regex(r"-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,5})?", fullmatch=True),
    st.one_of(
        st.integers(9_985, 10_012),
        st.integers(-10_012, -9_985),
        st.integers(-(10**30), 10**30),
        st.integers(-50, 50),
    ),
)
@example("12", 10_000)
@example("0.0001", -9_997)
@example("0", 10_001)
@example("1", 10**20)
def test_exponent_limit_applies_to_the_token_and_to_the_canonical_form(mantissa: str, exponent: int) -> None:
    token = f"{mantissa}e{exponent}"
    zero = Decimal(mantissa) == 0
    canonical_exponent = 0 if zero else Decimal(mantissa).adjusted() + exponent
    allowed = abs(exponent) <= 10_000 and abs(canonical_exponent) <= 10_000
    doc = f'["x",{token}]'.encode()
    expected = None if allowed else (JsonErrorReason.EXPONENT_OUT_OF_RANGE, 5)
    for fn in (parse, canonical_bytes, params_digest):
        assert _outcome(fn, doc) == expected, fn.__name__
    if allowed:
        assert canonical_bytes(doc) == f'["x",{oracle_number(Decimal(token))}]'.encode()
