"""Every production JSON limit at its edge: the limit passes, limit + 1 is refused (reason and byte offset).

Each edge is checked through the three entry points, because they parse with different hook sets: ``parse``
(builds the value model), ``canonical_bytes(bytes)`` and ``params_digest(bytes)`` (both parse straight into
canonical-ready data).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from soklet_core.json import (
    DEFAULT_REQUEST_BODY_BYTES,
    MAX_CANONICAL_PARAMS_BYTES,
    MAX_DEPTH,
    MAX_EXPONENT_MAGNITUDE,
    MAX_NODES,
    MAX_NUMBER_TOKEN_CHARS,
    MAX_REQUEST_BODY_BYTES,
    RESPONSE_OUTPUT_CEILING_BYTES,
    JsonArray,
    JsonError,
    JsonErrorReason,
    JsonNumber,
    JsonValue,
    canonical_bytes,
    params_digest,
    parse,
    serialize,
)
from tests.json.support import MIB, digest_text_of, oracle_number

R = JsonErrorReason

PATHS = [
    pytest.param(parse, id="parse"),
    pytest.param(canonical_bytes, id="canonical_bytes"),
    pytest.param(params_digest, id="params_digest"),
]


def refusal(fn: Callable[[Any], object], doc: bytes | str) -> tuple[JsonErrorReason, int | None]:
    with pytest.raises(JsonError) as info:
        fn(doc)
    return info.value.reason, info.value.offset


def test_limit_constants_match_design() -> None:
    assert MAX_NUMBER_TOKEN_CHARS == 1_024
    assert MAX_EXPONENT_MAGNITUDE == 10_000
    assert MAX_DEPTH == 256
    assert MAX_CANONICAL_PARAMS_BYTES == 32 * MIB
    assert DEFAULT_REQUEST_BODY_BYTES == 10 * MIB
    assert MAX_REQUEST_BODY_BYTES == 16 * MIB
    assert RESPONSE_OUTPUT_CEILING_BYTES == 4 * MIB
    assert isinstance(MAX_NODES, int)
    assert MAX_NODES > 1_000_000


# --- number token length ---------------------------------------------------------------------------------------


def number_token(shape: str, length: int) -> str:
    """A valid JSON number token of exactly ``length`` characters."""
    tokens = {
        "integer": "1" * length,
        "negative-integer": "-" + "7" * (length - 1),
        "trailing-zeros": "1" + "0" * (length - 1),
        "fraction": "0." + "5" * (length - 2),
        "negative-fraction": "-3." + "25" * ((length - 3) // 2) + "1" * ((length - 3) % 2),
        "exponent": "1." + "3" * (length - 8) + "e+9999",
    }
    token = tokens[shape]
    assert len(token) == length
    return token


SHAPES = ["integer", "negative-integer", "trailing-zeros", "fraction", "negative-fraction", "exponent"]


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize("shape", SHAPES)
def test_number_of_1024_characters_passes(fn: Callable[[bytes], object], shape: str) -> None:
    token = number_token(shape, MAX_NUMBER_TOKEN_CHARS)
    doc = f"[{token}]".encode()
    result = fn(doc)
    expected_canonical = f"[{oracle_number(Decimal(token))}]".encode()
    if fn is parse:
        assert isinstance(result, JsonArray)
        number = result[0]
        assert isinstance(number, JsonNumber)
        assert number.value.as_tuple() == Decimal(token).as_tuple()
    elif fn is canonical_bytes:
        assert result == expected_canonical
    else:
        assert result.canonical_size == len(expected_canonical)  # type: ignore[attr-defined]
        assert result.text == digest_text_of(expected_canonical)  # type: ignore[attr-defined]


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize("shape", SHAPES)
def test_number_of_1025_characters_is_refused(fn: Callable[[bytes], object], shape: str) -> None:
    token = number_token(shape, MAX_NUMBER_TOKEN_CHARS + 1)
    assert refusal(fn, f"[{token}]".encode()) == (R.NUMBER_TOO_LONG, 1)


@pytest.mark.parametrize("fn", PATHS)
def test_number_too_long_offset_is_a_byte_offset(fn: Callable[[bytes], object]) -> None:
    token = "9" * (MAX_NUMBER_TOKEN_CHARS + 1)
    doc = f'{{"é€": "\U0001f600", "n": {token}}}'.encode()
    assert refusal(fn, doc) == (R.NUMBER_TOO_LONG, doc.index(b"999"))


def test_number_too_long_at_the_root() -> None:
    token = "1" * (MAX_NUMBER_TOKEN_CHARS + 1)
    assert refusal(parse, token) == (R.NUMBER_TOO_LONG, 0)
    assert refusal(canonical_bytes, token) == (R.NUMBER_TOO_LONG, 0)
    assert canonical_bytes(token[:-1]) == oracle_number(Decimal(token[:-1])).encode()


# --- exponent magnitude ----------------------------------------------------------------------------------------

EXPONENT_PASSES = [
    "1e10000",
    "1E+10000",
    "1e-10000",
    "-1E-10000",
    "1e010000",
    "1e+0000000000010000",
    "12e9999",  # canonical 1.2E+10000
    "0.0001e-9996",  # canonical 1E-10000
    "123.4e9998",  # canonical 1.234E+10000
    "0e10000",
    "-0E-10000",
]

EXPONENT_REFUSALS = [
    "1e10001",
    "1E+10001",
    "1e-10001",
    "-1e-10001",
    "1e+0000000000010001",
    "0e10001",  # the token's own exponent is out of range even though the value is 0
    "12e10000",  # token exponent passes; canonical 1.2E+10001 does not (the preflight)
    "10e10000",  # canonical 1E+10001
    "0.0001e-9997",  # canonical 1E-10001
    "1234.5e9998",  # canonical 1.2345E+10001
    # exponents far beyond what a decimal context can hold: still the same refusal, never a crash
    "1e1000000000000000000",
    "-1E-1000000000000000000",
    "0e99999999999999999999",
    "1e" + "9" * 1000,
]


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize("token", EXPONENT_PASSES)
def test_exponent_at_the_limit_passes(fn: Callable[[bytes], object], token: str) -> None:
    doc = f"[{token}]".encode()
    result = fn(doc)
    expected = f"[{oracle_number(Decimal(token))}]".encode()
    if fn is parse:
        assert isinstance(result, JsonArray)
        assert result[0] == JsonNumber.from_value(Decimal(token))
        assert canonical_bytes(result) == expected
    elif fn is canonical_bytes:
        assert result == expected
    else:
        assert result.text == digest_text_of(expected)  # type: ignore[attr-defined]


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize("token", EXPONENT_REFUSALS, ids=lambda t: t if len(t) < 40 else f"{t[:6]}...{len(t)}-chars")
def test_exponent_beyond_the_limit_is_refused(fn: Callable[[bytes], object], token: str) -> None:
    assert refusal(fn, f'["x", {token}]'.encode()) == (R.EXPONENT_OUT_OF_RANGE, 6)


def test_canonical_preflight_examples_from_the_issue() -> None:
    # "12e10000" is refused: canonical 1.2E+10001.
    for fn in (parse, canonical_bytes):
        assert refusal(fn, b"12e10000") == (R.EXPONENT_OUT_OF_RANGE, 0)
        assert refusal(fn, b"0.0001e-9997") == (R.EXPONENT_OUT_OF_RANGE, 0)
    assert refusal(params_digest, b'{"a": 12e10000}') == (R.EXPONENT_OUT_OF_RANGE, 6)
    assert refusal(params_digest, b'{"a": 0.0001e-9997}') == (R.EXPONENT_OUT_OF_RANGE, 6)


def test_value_model_number_exponent_edge() -> None:
    assert JsonNumber.from_value(Decimal("1E+10000")).value == Decimal("1E+10000")
    assert JsonNumber.from_value(Decimal("-1E-10000")).value == Decimal("-1E-10000")
    for text in ("1E+10001", "1E-10001", "1.2E+10001"):
        with pytest.raises(JsonError) as info:
            JsonNumber.from_value(Decimal(text))
        assert info.value.reason is R.EXPONENT_OUT_OF_RANGE


def test_value_model_number_length_edge() -> None:
    assert JsonNumber.from_value(Decimal("7" * MAX_NUMBER_TOKEN_CHARS)).value == Decimal("7" * 1024)
    with pytest.raises(JsonError) as info:
        JsonNumber.from_value(Decimal("7" * (MAX_NUMBER_TOKEN_CHARS + 1)))
    assert info.value.reason is R.NUMBER_TOO_LONG


@pytest.mark.parametrize("text", ["0E+10001", "0E+10005", "-0E-10001", "0E-10020"])
def test_every_number_the_model_accepts_serializes_to_a_document_parse_accepts(text: str) -> None:
    """A value the model holds must survive serialize → parse; otherwise it cannot be sent or sealed.

    Either ``from_value`` refuses such a zero (its exponent is beyond ±10,000) or ``serialize`` spells it so
    that ``parse`` accepts it; both satisfy this test.
    """
    refused: JsonErrorReason | None = None
    try:
        number = JsonNumber.from_value(Decimal(text))
    except JsonError as error:
        refused = error.reason
    if refused is not None:
        assert refused in (R.EXPONENT_OUT_OF_RANGE, R.NUMBER_TOO_LONG)
    else:
        assert parse(serialize(number)) == number


# --- nesting depth ---------------------------------------------------------------------------------------------


def nested(kind: str, depth: int, inner: str = "0") -> tuple[str, int]:
    """A document with ``depth`` nested containers, and the byte offset of the last opener."""
    openers = {"array": ["["], "object": ['{"k":'], "mixed": ["[", '{"é":']}[kind]
    closers = {"[": "]", '{"k":': "}", '{"é":': "}"}
    parts = [openers[i % len(openers)] for i in range(depth)]
    text = "".join(parts) + inner + "".join(closers[p] for p in reversed(parts))
    last = len("".join(parts[:-1]).encode())
    return text, last


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize("kind", ["array", "object", "mixed"])
@pytest.mark.parametrize("inner", ["0", "[]", "{}", '"s"'])
def test_depth_256_passes(fn: Callable[[bytes], object], kind: str, inner: str) -> None:
    if inner in ("[]", "{}"):
        text, _ = nested(kind, MAX_DEPTH - 1, inner)  # the empty container is the 256th level
    else:
        text, _ = nested(kind, MAX_DEPTH, inner)
    result = fn(text.encode())
    if fn is parse:
        assert isinstance(result, JsonValue)
        assert parse(serialize(result)) == result
        assert canonical_bytes(result) == canonical_bytes(text.encode())


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize("kind", ["array", "object", "mixed"])
def test_depth_257_is_refused(fn: Callable[[bytes], object], kind: str) -> None:
    text, last = nested(kind, MAX_DEPTH + 1)
    assert refusal(fn, text.encode()) == (R.DEPTH_EXCEEDED, last)


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize("inner", ["[]", "{}"])
def test_depth_257_with_an_empty_innermost_container_is_refused(fn: Callable[[bytes], object], inner: str) -> None:
    text, _ = nested("array", MAX_DEPTH, inner)
    assert refusal(fn, text.encode()) == (R.DEPTH_EXCEEDED, MAX_DEPTH)


@pytest.mark.parametrize("fn", PATHS)
def test_very_deep_document_is_refused_without_recursion_error(fn: Callable[[bytes], object]) -> None:
    assert refusal(fn, b"[" * 200_000 + b"]" * 200_000) == (R.DEPTH_EXCEEDED, MAX_DEPTH)
    assert refusal(fn, b'{"a":' * 100_000) == (R.DEPTH_EXCEEDED, 5 * MAX_DEPTH)


def test_value_model_depth_edge() -> None:
    deep: Any = 0
    for _ in range(MAX_DEPTH):
        deep = [deep]
    value = JsonValue.from_python(deep)
    assert canonical_bytes(value) == b"[" * MAX_DEPTH + b"0" + b"]" * MAX_DEPTH
    assert serialize(value) == "[" * MAX_DEPTH + "0" + "]" * MAX_DEPTH
    with pytest.raises(JsonError) as info:
        JsonValue.from_python([deep])
    assert info.value.reason is R.DEPTH_EXCEEDED
    with pytest.raises(JsonError) as info:
        JsonValue.from_python({"k": deep})
    assert info.value.reason is R.DEPTH_EXCEEDED


# --- node count ------------------------------------------------------------------------------------------------


def flat_array(nodes: int) -> bytes:
    """``[null,null,...]`` holding ``nodes`` values in all (the root array is one of them)."""
    return b"[" + b"null," * (nodes - 2) + b"null]"


@pytest.fixture(scope="module")
def max_nodes_document() -> bytes:
    return flat_array(MAX_NODES)


@pytest.fixture(scope="module")
def too_many_nodes_document() -> bytes:
    return flat_array(MAX_NODES + 1)


@pytest.mark.parametrize("fn", PATHS)
def test_max_nodes_passes(fn: Callable[[bytes], object], max_nodes_document: bytes) -> None:
    result = fn(max_nodes_document)
    if fn is parse:
        assert isinstance(result, JsonArray)
        assert len(result) == MAX_NODES - 1
    elif fn is canonical_bytes:
        assert result == max_nodes_document  # already canonical
    else:
        assert result.canonical_size == len(max_nodes_document)  # type: ignore[attr-defined]
        assert result.digest == hashlib.sha256(max_nodes_document).digest()  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.parametrize("fn", PATHS)
def test_max_nodes_plus_one_is_refused(fn: Callable[[bytes], object], too_many_nodes_document: bytes) -> None:
    last_value = len(too_many_nodes_document) - len(b"null]")
    assert refusal(fn, too_many_nodes_document) == (R.TOO_MANY_NODES, last_value)


@pytest.mark.slow
def test_member_names_are_not_nodes() -> None:
    # {"a": [null × (MAX_NODES - 2)]}: object + array + nulls = MAX_NODES values; the name "a" is not one.
    doc = b'{"a":' + flat_array(MAX_NODES - 1) + b"}"
    value = parse(doc)
    assert len(value["a"]) == MAX_NODES - 2  # type: ignore[index,arg-type]


# --- input size (max_bytes) ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [pytest.param(parse, id="parse"), pytest.param(params_digest, id="params_digest")])
def test_max_bytes_edge(fn: Callable[..., object]) -> None:
    doc = b'{"a": [1, 2, 3], "b": "\xc3\xa9"}'
    fn(doc, max_bytes=len(doc))
    fn(doc.decode(), max_bytes=len(doc))  # str input counts UTF-8 bytes, not characters
    with pytest.raises(JsonError) as info:
        fn(doc, max_bytes=len(doc) - 1)
    assert (info.value.reason, info.value.offset) == (R.INPUT_TOO_LARGE, len(doc) - 1)
    with pytest.raises(JsonError) as info:
        fn(doc.decode(), max_bytes=len(doc) - 1)
    assert (info.value.reason, info.value.offset) == (R.INPUT_TOO_LARGE, len(doc) - 1)


# --- the 32 MiB canonical allowance of the params digest -------------------------------------------------------

_NUMBERS = 200_000  # each "1e-6" (4 bytes) canonicalizes to "0.000001" (8 bytes): +800,000 bytes in all
_CHUNK = "x" * 8_192


def growing_params(canonical_size: int) -> tuple[bytes, bytes]:
    """A params document and its expected canonical bytes, whose canonical size is exactly ``canonical_size``.

    The canonical form is longer than the input, so the input itself stays under the allowance.
    """
    head_in = b'{"n":[' + b",".join([b"1e-6"] * _NUMBERS) + b'],"p":['
    head_out = b'{"n":[' + b",".join([b"0.000001"] * _NUMBERS) + b'],"p":['
    tail = b"]}"
    fixed = len(head_out) + len(tail)
    room = canonical_size - fixed
    chunk = b'"' + _CHUNK.encode() + b'",'
    count, rest = divmod(room, len(chunk))
    # The last string absorbs the remainder: '"' + rest_x + '"'.
    if rest < 2:
        count -= 1
        rest += len(chunk)
    strings = chunk * count + b'"' + b"x" * (rest - 2) + b'"'
    doc = head_in + strings + tail
    canonical = head_out + strings + tail
    assert len(canonical) == canonical_size
    return doc, canonical


@pytest.mark.slow
def test_canonical_allowance_exactly_32_mib_passes() -> None:
    doc, canonical = growing_params(MAX_CANONICAL_PARAMS_BYTES)
    assert len(doc) < MAX_CANONICAL_PARAMS_BYTES
    digest = params_digest(doc)
    assert digest.canonical_size == MAX_CANONICAL_PARAMS_BYTES
    assert digest.digest == hashlib.sha256(canonical).digest()


@pytest.mark.slow
def test_canonical_allowance_plus_one_byte_is_refused() -> None:
    doc, _ = growing_params(MAX_CANONICAL_PARAMS_BYTES + 1)
    assert len(doc) < MAX_CANONICAL_PARAMS_BYTES  # the input is small enough; only its canonical form is not
    with pytest.raises(JsonError) as info:
        params_digest(doc)
    assert info.value.reason is R.CANONICAL_TOO_LARGE
    with pytest.raises(JsonError) as info:
        params_digest(doc, whole_request=False)
    assert info.value.reason is R.CANONICAL_TOO_LARGE


@pytest.mark.slow
def test_canonical_allowance_applies_to_parsed_values_too() -> None:
    doc, _ = growing_params(MAX_CANONICAL_PARAMS_BYTES + 1)
    value = parse(doc)
    with pytest.raises(JsonError) as info:
        params_digest(value)
    assert info.value.reason is R.CANONICAL_TOO_LARGE
