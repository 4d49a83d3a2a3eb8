"""Nothing but JsonError escapes, and the fast parser agrees with the reference scanner.

``soklet_core.json.scanner.locate_refusal`` is the documented oracle for *where* and *why* a document is
refused. The fast path (C ``json`` plus whole-buffer checks) must refuse exactly the documents the scanner
refuses, with the same reason and byte offset, and accept all the others.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from soklet_core.json import JsonError, JsonErrorReason, canonical_bytes, params_digest, parse
from soklet_core.json.scanner import locate_refusal
from tests.json.support import render, rngs, trees

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

#: Fragments that provoke every refusal class when spliced into a valid document.
SNIPPETS = [
    '"',
    "\\",
    "\\\\",
    "\\u",
    "\\ud800",
    "\\udc00",
    "\\uDBFF",
    "\\ud83d\\ude00",
    "\\u0061",
    "\\u00e9",
    "\\/",
    "\\x",
    "0",
    "01",
    "-",
    "+",
    ".",
    "e",
    "E+",
    "1e",
    "9" * 30,
    "e10001",
    "e-9999",
    "12e10000",
    "e1000000000000000000000",
    "e-99999999999999999999",
    "NaN",
    "Infinity",
    "-Infinity",
    ",",
    ":",
    "[",
    "]",
    "{",
    "}",
    "[[[[",
    '{"a":1}',
    '"a":1,',
    '"a"',
    "null",
    "tru",
    "true",
    "\x00",
    "\x1f",
    "\n",
    "\x7f",
    " ",
    "é",
    "\U0001f600",
    "\u2028",
    "\ufeff",
]

BYTE_SNIPPETS = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xc0\xaf", b"\xef\xbb\xbf", b"\xf4\x90\x80\x80"]


def mutate_text(text: str, rng: random.Random) -> str:
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        op = rng.random()
        at = rng.randrange(len(text) + 1)
        if op < 0.5:
            text = text[:at] + rng.choice(SNIPPETS) + text[at:]
        elif op < 0.7 and text:
            end = min(len(text), at + rng.randrange(1, 4))
            text = text[:at] + text[end:]
        elif op < 0.85 and text:
            end = min(len(text), at + rng.randrange(1, 8))
            text = text[:at] + text[at:end] + text[at:]  # duplicate a slice (repeated members, values)
        else:
            text = text[:at]  # truncate
    return text


@st.composite
def candidate_texts(draw: st.DrawFn) -> str:
    """Valid documents, mutated ones, and short runs of JSON-ish characters."""
    rng = draw(rngs)
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return draw(st.text(st.sampled_from('[]{}",:0123456789-+.eEtrufalsn \\u\n\t'), max_size=30))
    text = render(draw(trees()), rng)
    if choice <= 2:
        return text
    return mutate_text(text, rng)


def outcome(fn: Callable[[Any], object], data: Any) -> tuple[JsonErrorReason, int | None] | None:
    try:
        fn(data)
    except JsonError as error:
        return error.reason, error.offset
    return None


def expected_outcome(text: str) -> tuple[JsonErrorReason, int | None] | None:
    refusal = locate_refusal(text)
    return None if refusal is None else (refusal.reason, refusal.offset)


def _in_scanner_domain(text: str) -> bool:
    # The scanner works on decoded text; a leading BOM is refused before it runs (on bytes and on str).
    return not text.startswith("\ufeff")


@pytest.mark.slow
@SETTINGS
@given(candidate_texts())
@example('["\\ud800\\\\\\udc00"]')  # high, escaped backslash, low: both halves lone
@example('{"\\ud83d\\\\\\ude00":1}')
@example('["\\ud800"]')
@example('{"a":1,"\\u0061":2}')
@example("[" * 300 + "]" * 300)
@example("[1e10001]")
@example("[12e10000]")
@example("[1e1000000000000000000]")  # an exponent no decimal context can hold
def test_fast_parse_refuses_exactly_when_the_scanner_does(text: str) -> None:
    if not _in_scanner_domain(text):
        return
    expected = expected_outcome(text)
    assert outcome(parse, text) == expected
    assert outcome(parse, text.encode("utf-8")) == expected


@pytest.mark.slow
@SETTINGS
@given(candidate_texts())
@example('["\\ud800\\\\\\udc00"]')
@example('{"\\uff5e":1,"\\ud83d\\ude00":2,"\\ud83d\\ude00":3}')
@example("[1e1000000000000000000]")
def test_canonical_path_refuses_exactly_when_the_scanner_does(text: str) -> None:
    if not _in_scanner_domain(text):
        return
    expected = expected_outcome(text)
    assert outcome(canonical_bytes, text.encode("utf-8")) == expected
    digest = outcome(params_digest, text.encode("utf-8"))
    if expected is None:
        # A valid document digests, unless it is not params at all.
        assert digest is None or digest == (JsonErrorReason.PARAMS_NOT_STRUCTURED, None)
    else:
        assert digest == expected


# --- nothing but JsonError escapes -----------------------------------------------------------------------------


def assert_only_json_errors(fn: Callable[..., object], data: bytes | str, **kwargs: Any) -> None:
    length = len(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else len(data)
    caught: JsonError | None = None
    try:
        fn(data, **kwargs)
    except JsonError as error:
        caught = error
    if caught is None:
        return
    assert isinstance(caught.reason, JsonErrorReason)
    positionless = caught.reason in (JsonErrorReason.PARAMS_NOT_STRUCTURED, JsonErrorReason.CANONICAL_TOO_LARGE)
    if not positionless:
        assert isinstance(caught.offset, int)
    if caught.offset is not None:
        assert 0 <= caught.offset <= length
    assert str(caught).startswith(caught.reason.value)


@st.composite
def candidate_bytes(draw: st.DrawFn) -> bytes:
    """Arbitrary bytes, and valid documents with byte-level damage (bad UTF-8, surrogates, BOMs)."""
    choice = draw(st.integers(0, 4))
    if choice == 0:
        return draw(st.binary(max_size=64))
    rng = draw(rngs)
    data = mutate_text(render(draw(trees()), rng), rng).encode("utf-8")
    for _ in range(draw(st.integers(0, 2))):
        at = rng.randrange(len(data) + 1)
        data = data[:at] + rng.choice(BYTE_SNIPPETS) + data[at:]
    return data


@pytest.mark.slow
@SETTINGS
@given(candidate_bytes())
@example(b'["\\ud800\\\\\\udc00"]')
@example(b"\xef\xbb\xbf")
@example(b"")
@example(b"[1e1000000000000000000]")
def test_parse_and_canonical_bytes_raise_only_json_error(data: bytes) -> None:
    assert_only_json_errors(parse, data)
    assert_only_json_errors(canonical_bytes, data)
    assert_only_json_errors(parse, data, max_bytes=max(1, len(data) // 2))


@pytest.mark.slow
@SETTINGS
@given(candidate_bytes())
@example(b'["\\ud800\\\\\\udc00"]')
@example(b'{"a":-1E-1000000000000000000,"b":0e99999999999999999999}')
@example(b"[0e99999999999999999999]")
def test_params_digest_raises_only_json_error(data: bytes) -> None:
    assert_only_json_errors(params_digest, data)
    assert_only_json_errors(params_digest, data, whole_request=False)
    assert_only_json_errors(params_digest, data, max_bytes=max(1, len(data) // 2))


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(candidate_bytes())
@example(b"[1]")
@example(b'"x"')
def test_params_digest_of_a_declared_request_raises_only_json_error(data: bytes) -> None:
    assert_only_json_errors(params_digest, data, whole_request=True)


@settings(max_examples=150, deadline=None)
@given(st.text(st.one_of(st.characters(), st.sampled_from(list('\ud800\udfff[]{}":,\\'))), max_size=40))
@example('["\ud800"]')
@example("\udfff")
def test_any_str_input_raises_only_json_error(text: str) -> None:
    assert_only_json_errors(parse, text)
    assert_only_json_errors(canonical_bytes, text)
    assert_only_json_errors(params_digest, text)
