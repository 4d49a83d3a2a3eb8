"""Each refusal class: its reason and its exact byte offset, through every entry point.

Offsets are byte offsets into the UTF-8 input (also for ``str`` input), pointing where the problem starts:
the opening quote of a repeated member name, the backslash of a bad escape, the first byte of a bad UTF-8
sequence, the first character of a bad number token, the first character after the document.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest

from soklet_core.json import (
    JsonArray,
    JsonError,
    JsonErrorReason,
    JsonObject,
    JsonString,
    canonical_bytes,
    params_digest,
    parse,
)

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


# (document, reason, byte offset)
REFUSALS: dict[str, tuple[bytes, JsonErrorReason, int]] = {
    # duplicate members: offset of the repeated name's opening quote
    "dup": (b'{"a":1,"a":2}', R.DUPLICATE_MEMBER, 7),
    "dup-escaped": (b'{"a":1,"\\u0061":2}', R.DUPLICATE_MEMBER, 7),
    "dup-escaped-first": (b'{"\\u0061":1, "a":2}', R.DUPLICATE_MEMBER, 13),
    "dup-solidus-escape": (b'{"a/b":1,"a\\/b":2}', R.DUPLICATE_MEMBER, 9),
    "dup-nested": (b'{"a":{"b":1,"b":2}}', R.DUPLICATE_MEMBER, 12),
    "dup-later": (b'{"a":1,"b":2,"a":3}', R.DUPLICATE_MEMBER, 13),
    "dup-in-array-item": (b'[{"x":0},{"x":0,"x":1}]', R.DUPLICATE_MEMBER, 16),
    "dup-multibyte": ('{"é":1,"é":2}'.encode(), R.DUPLICATE_MEMBER, 8),
    "dup-escaped-vs-raw-nonascii": (b'{"\\u00e9":1,"\xc3\xa9":2}', R.DUPLICATE_MEMBER, 12),
    "dup-surrogate-pair-vs-raw": (b'{"\xf0\x9f\x98\x80":1,"\\ud83d\\ude00":2}', R.DUPLICATE_MEMBER, 10),
    # byte order mark
    "bom": (b"\xef\xbb\xbf{}", R.BYTE_ORDER_MARK, 0),
    "bom-only": (b"\xef\xbb\xbf", R.BYTE_ORDER_MARK, 0),
    "bom-before-number": (b"\xef\xbb\xbf1", R.BYTE_ORDER_MARK, 0),
    # invalid UTF-8: offset of the first byte of the bad sequence
    "utf8-ff": (b"[\xff]", R.INVALID_UTF8, 1),
    "utf8-truncated": (b'["\xc3"]', R.INVALID_UTF8, 2),
    "utf8-truncated-at-end": (b'"\xe2\x82', R.INVALID_UTF8, 1),
    "utf8-overlong": (b'["\xc0\xaf"]', R.INVALID_UTF8, 2),
    "utf8-stray-continuation": (b'["ab\x80"]', R.INVALID_UTF8, 4),
    "utf8-above-10ffff": (b'["\xf4\x90\x80\x80"]', R.INVALID_UTF8, 2),
    "utf8-after-multibyte": (b'["\xc3\xa9\xe2\x82\xac\xff"]', R.INVALID_UTF8, 7),
    # raw (UTF-8 encoded) lone surrogates
    "raw-high-surrogate": (b'["\xed\xa0\x80"]', R.LONE_SURROGATE, 2),
    "raw-low-surrogate": (b'["\xed\xbf\xbf"]', R.LONE_SURROGATE, 2),
    "raw-cesu-pair": (b'["\xed\xa0\xbd\xed\xb8\x80"]', R.LONE_SURROGATE, 2),
    "raw-surrogate-after-text": (b'["x\xc3\xa9\xed\xb0\x80"]', R.LONE_SURROGATE, 5),
    "raw-surrogate-in-key": (b'{"\xed\xa0\x80":1}', R.LONE_SURROGATE, 2),
    # escaped lone surrogates: offset of the backslash of the offending escape
    "esc-high-alone": (b'["\\ud800"]', R.LONE_SURROGATE, 2),
    "esc-low-alone": (b'["\\udc00"]', R.LONE_SURROGATE, 2),
    "esc-low-upper": (b'["\\uDFFF"]', R.LONE_SURROGATE, 2),
    "esc-high-then-nonlow": (b'["\\ud800\\u0041"]', R.LONE_SURROGATE, 2),
    "esc-high-then-high": (b'["\\ud800\\ud800"]', R.LONE_SURROGATE, 2),
    "esc-high-then-text": (b'["\\udbffx"]', R.LONE_SURROGATE, 2),
    "esc-low-then-high": (b'["\\udc00\\ud800"]', R.LONE_SURROGATE, 2),
    "esc-after-text": (b'["ab\\ud800"]', R.LONE_SURROGATE, 4),
    "esc-after-valid-pair": (b'["\\ud83d\\ude00\\ud800"]', R.LONE_SURROGATE, 14),
    "esc-after-escaped-backslash": (b'["\\\\\\ud800"]', R.LONE_SURROGATE, 4),
    "esc-high-alone-in-key": (b'{"\\ud800":1}', R.LONE_SURROGATE, 2),
    "esc-low-alone-in-key": (b'{"k\\udc00":1}', R.LONE_SURROGATE, 3),
    "esc-high-then-nonlow-in-key": (b'{"\\ud800\\u0041":1}', R.LONE_SURROGATE, 2),
    # high, escaped backslash, low: both halves are lone (the backslash escape sits between them)
    "esc-high-backslash-low": (b'["\\ud800\\\\\\udc00"]', R.LONE_SURROGATE, 2),
    "esc-high-backslash-low-pair-lookalike": (b'["\\ud83d\\\\\\ude00"]', R.LONE_SURROGATE, 2),
    "esc-high-backslash-low-in-key": (b'{"\\ud800\\\\\\udc00":1}', R.LONE_SURROGATE, 2),
    # non-finite numbers
    "nan": (b"[NaN]", R.NON_FINITE_NUMBER, 1),
    "infinity": (b"[Infinity]", R.NON_FINITE_NUMBER, 1),
    "minus-infinity": (b"[-Infinity]", R.NON_FINITE_NUMBER, 1),
    "nan-member": (b'{"a":NaN}', R.NON_FINITE_NUMBER, 5),
    "nan-root": (b"NaN", R.NON_FINITE_NUMBER, 0),
    # number syntax: offset of the token's first character
    "leading-zero": (b"[01]", R.INVALID_NUMBER, 1),
    "leading-zeros": (b"[00]", R.INVALID_NUMBER, 1),
    "negative-leading-zero": (b"[-01]", R.INVALID_NUMBER, 1),
    "leading-zero-fraction": (b"[00.5]", R.INVALID_NUMBER, 1),
    "plus": (b"[+1]", R.INVALID_NUMBER, 1),
    "dot-first": (b"[.5]", R.INVALID_NUMBER, 1),
    "dot-last": (b"[1.]", R.INVALID_NUMBER, 1),
    "dot-then-exponent": (b"[1.e5]", R.INVALID_NUMBER, 1),
    "exponent-empty": (b"[1e]", R.INVALID_NUMBER, 1),
    "exponent-sign-only": (b"[1e+]", R.INVALID_NUMBER, 1),
    "minus-alone": (b"[-]", R.INVALID_NUMBER, 1),
    "minus-alone-root": (b"-", R.INVALID_NUMBER, 0),
    "double-minus": (b"[--1]", R.INVALID_NUMBER, 1),
    "leading-zero-after-text": ('["é€", 01]'.encode(), R.INVALID_NUMBER, 10),
    # trailing content: the first byte after the document (and its whitespace)
    "trailing-word": (b"[1] x", R.TRAILING_CONTENT, 4),
    "trailing-second-doc": (b"{} {}", R.TRAILING_CONTENT, 3),
    "trailing-second-number": (b"1 2", R.TRAILING_CONTENT, 2),
    "trailing-second-string": (b'"a""b"', R.TRAILING_CONTENT, 3),
    "trailing-bracket": (b"[1]]", R.TRAILING_CONTENT, 3),
    "trailing-nul": (b"[1]\x00", R.TRAILING_CONTENT, 3),
    "trailing-after-multibyte": ('["é"]\n€'.encode(), R.TRAILING_CONTENT, 7),
    # unescaped control characters in strings
    "control-nul": (b'["\x00"]', R.CONTROL_CHARACTER, 2),
    "control-1f": (b'["a\x1f"]', R.CONTROL_CHARACTER, 3),
    "control-newline": (b'["\n"]', R.CONTROL_CHARACTER, 2),
    "control-tab": (b'["a\tb"]', R.CONTROL_CHARACTER, 3),
    "control-in-key": (b'{"\x01":1}', R.CONTROL_CHARACTER, 2),
    "control-after-multibyte": (b'["\xc3\xa9\x01"]', R.CONTROL_CHARACTER, 4),
    # empty input: where a value was expected
    "empty": (b"", R.EMPTY_INPUT, 0),
    "whitespace-only": (b" \n\t\r", R.EMPTY_INPUT, 4),
    # unterminated strings: the end of input
    "unterminated": (b'["abc', R.UNTERMINATED_STRING, 5),
    "unterminated-quote-only": (b'"', R.UNTERMINATED_STRING, 1),
    "unterminated-key": (b'{"a', R.UNTERMINATED_STRING, 3),
    "unterminated-after-backslash": (b'["a\\', R.UNTERMINATED_STRING, 4),
    "unterminated-multibyte": ('["é€'.encode(), R.UNTERMINATED_STRING, 7),
    # invalid escapes: the backslash
    "escape-x": (b'["\\x"]', R.INVALID_ESCAPE, 2),
    "escape-short-u": (b'["\\u12"]', R.INVALID_ESCAPE, 2),
    "escape-bad-hex": (b'["\\u12G4"]', R.INVALID_ESCAPE, 2),
    "escape-capital-u": (b'["a\\U0041"]', R.INVALID_ESCAPE, 3),
    "escape-quote-single": (b'["\\\'"]', R.INVALID_ESCAPE, 2),
    "escape-in-key": (b'{"\\a":1}', R.INVALID_ESCAPE, 2),
    # structure
    "trailing-comma-array": (b"[1,]", R.UNEXPECTED_CHARACTER, 3),
    "trailing-comma-object": (b'{"a":1,}', R.UNEXPECTED_CHARACTER, 7),
    "missing-comma": (b"[1 2]", R.UNEXPECTED_CHARACTER, 3),
    "missing-colon": (b'{"a" 1}', R.UNEXPECTED_CHARACTER, 5),
    "bare-key": (b"{a:1}", R.UNEXPECTED_CHARACTER, 1),
    "closer-first": (b"]", R.UNEXPECTED_CHARACTER, 0),
    "wrong-closer": (b"[1}", R.UNEXPECTED_CHARACTER, 2),
    "bom-not-at-start": (b" \xef\xbb\xbf{}", R.UNEXPECTED_CHARACTER, 1),
    "open-array": (b"[", R.UNEXPECTED_END, 1),
    "open-object-after-value": (b'{"a":1', R.UNEXPECTED_END, 6),
    "open-after-comma": (b"[1, ", R.UNEXPECTED_END, 4),
}


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize(("doc", "reason", "offset"), list(REFUSALS.values()), ids=list(REFUSALS))
def test_refusal_reason_and_byte_offset(
    fn: Callable[[bytes], object], doc: bytes, reason: JsonErrorReason, offset: int
) -> None:
    assert refusal(fn, doc) == (reason, offset)


_TEXT_REFUSALS = {name: row for name, row in REFUSALS.items() if not name.startswith(("utf8-", "raw-"))}


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize(("doc", "reason", "offset"), list(_TEXT_REFUSALS.values()), ids=list(_TEXT_REFUSALS))
def test_str_input_refusals_report_byte_offsets(
    fn: Callable[[str], object], doc: bytes, reason: JsonErrorReason, offset: int
) -> None:
    assert refusal(fn, doc.decode("utf-8")) == (reason, offset)


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_buffer_inputs_are_refused_alike(fn: Callable[[Any], object], kind: type) -> None:
    assert refusal(fn, kind('{"é":1,"é":2}'.encode())) == (R.DUPLICATE_MEMBER, 8)


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ('["\ud800"]', 2),
        ('["é\udfff"]', 4),
        ('{"\U0001f600": "\udbff"}', 10),
        ("[\ud800]", 1),
    ],
)
def test_str_input_with_a_lone_surrogate_is_refused(fn: Callable[[str], object], text: str, offset: int) -> None:
    assert refusal(fn, text) == (R.LONE_SURROGATE, offset)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (b'["\\ud83d\\ude00"]', "\U0001f600"),
        (b'["\\uD83D\\uDE00"]', "\U0001f600"),
        (b'["\\ud800\\udc00"]', "\U00010000"),
        (b'["\\udbff\\udfff"]', "\U0010ffff"),
        (b'["a\\ud83d\\ude00b"]', "a\U0001f600b"),
        (b'["\\\\ud800"]', "\\ud800"),  # an escaped backslash followed by the letters "ud800"
        (b'["\\\\\\\\ud800"]', "\\\\ud800"),
        (b'["\xef\xbb\xbf"]', "\ufeff"),  # U+FEFF inside a string is ordinary text
        (b'["\x7f"]', "\x7f"),  # DEL is not a control character for JSON
        (b'["\xed\x9f\xbf"]', "\ud7ff"),  # the last scalar value before the surrogates
        (b'["\xee\x80\x80"]', "\ue000"),  # the first one after them
    ],
)
def test_valid_strings_near_the_refusals_are_accepted(doc: bytes, expected: str) -> None:
    value = parse(doc)
    assert isinstance(value, JsonArray)
    assert value[0] == JsonString.from_value(expected)
    assert canonical_bytes(doc) == canonical_bytes(value)
    params_digest(doc)


def test_valid_escaped_pair_in_a_key_is_accepted() -> None:
    value = parse(b'{"\\ud83d\\ude00":1,"a":2}')
    assert isinstance(value, JsonObject)
    assert list(value) == ["\U0001f600", "a"]


@pytest.mark.parametrize(
    "doc",
    [b'{"a":1,"A":2}', b'{"a":1,"a ":2}', b'{"\\u0061":1,"b":2}', b'[{"a":1},{"a":1}]', b'{"a":{"a":1}}'],
)
def test_distinct_or_separately_scoped_names_are_not_duplicates(doc: bytes) -> None:
    parse(doc)
    canonical_bytes(doc)
    params_digest(doc)


def test_trailing_whitespace_is_not_trailing_content() -> None:
    assert canonical_bytes(b" \t\r\n[1] \n\t\r") == b"[1]"
    assert parse(b"[1] \n\t\r") == parse(b"[1]")


# --- the error type itself -------------------------------------------------------------------------------------


def test_json_error_carries_reason_offset_and_a_bounded_message() -> None:
    secret = "s3cr3t-value-do-not-echo"
    with pytest.raises(JsonError) as info:
        parse(f'{{"{secret}":1,"{secret}":2}}')
    error = info.value
    assert isinstance(error, ValueError)
    assert error.reason is R.DUPLICATE_MEMBER
    assert isinstance(error.offset, int)
    message = str(error)
    assert secret not in message
    assert "duplicate-member" in message
    assert f"byte {error.offset}" in message
    assert "\n" not in message


def test_json_error_pickles() -> None:
    with pytest.raises(JsonError) as info:
        parse(b"[01]")
    copy = pickle.loads(pickle.dumps(info.value))
    assert (copy.reason, copy.offset, str(copy)) == (R.INVALID_NUMBER, 1, str(info.value))


def test_every_reason_has_a_fixed_description() -> None:
    for reason in JsonErrorReason:
        assert reason.description
        assert isinstance(reason.value, str)
        assert reason.value == reason.value.lower()
