"""The canonical form (docs/json.md, "The canonical form"): no whitespace, members in UTF-16 code unit order,
minimal string escaping, canonical numbers. Checked through the value path (``canonical_bytes(parse(x))``) and the
document path (``canonical_bytes(x)``), which are built differently and must agree byte for byte."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest

from soklet_core.json import (
    JsonString,
    JsonValue,
    canonical_bytes,
    canonical_text,
    params_digest,
    parse,
)
from tests.json.support import oracle_canonical, oracle_load, render


def both_paths(doc: bytes) -> bytes:
    """canonical bytes through the document path, after checking that the value path agrees."""
    via_document = canonical_bytes(doc)
    via_value = canonical_bytes(parse(doc))
    assert via_document == via_value
    return via_document


# --- strings ---------------------------------------------------------------------------------------------------

CONTROL_ESCAPES = {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
}


@pytest.mark.parametrize("code", range(0x20))
def test_control_characters_are_escaped_short_or_lowercase_u00xx(code: int) -> None:
    expected = CONTROL_ESCAPES.get(code, f"\\u{code:04x}")
    assert canonical_text(JsonString.from_value(chr(code))) == f'"{expected}"'
    # From the document path, starting from an uppercase escape.
    assert both_paths(f'["\\u{code:04X}"]'.encode()) == f'["{expected}"]'.encode()
    # In a member name too.
    assert both_paths(f'{{"\\u{code:04X}":0}}'.encode()) == f'{{"{expected}":0}}'.encode()


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (b'["\\""]', b'["\\""]'),
        (b'["\\u0022"]', b'["\\""]'),
        (b'["\\\\"]', b'["\\\\"]'),
        (b'["\\u005C"]', b'["\\\\"]'),
        (b'["\\/"]', b'["/"]'),
        (b'["/"]', b'["/"]'),
        (b'["\\u007f"]', b'["\x7f"]'),
        (b'["\x7f"]', b'["\x7f"]'),
        (b'["\\u2028\\u2029"]', '["\u2028\u2029"]'.encode()),
        (b'["\\u00e9\\u20AC"]', '["é€"]'.encode()),
        ('["é€"]'.encode(), '["é€"]'.encode()),
        (b'["\\ud83d\\ude00"]', '["\U0001f600"]'.encode()),
        (b'["\\uffff"]', '["\uffff"]'.encode()),
        (b'["\\ufeff"]', '["\ufeff"]'.encode()),
        (b'["\\u0041\\u0062"]', b'["Ab"]'),
        (b'["<\\/script>&\'"]', b'["</script>&\'"]'),
        (b'{"\\/\\"":"\\u0001"}', b'{"/\\"":"\\u0001"}'),
    ],
)
def test_only_quote_backslash_and_controls_are_escaped(doc: bytes, expected: bytes) -> None:
    assert both_paths(doc) == expected


def test_non_ascii_is_raw_utf8() -> None:
    text = "é€\U0001f600\u2028\x7f/\U0010ffff"
    assert canonical_bytes(JsonString.from_value(text)) == ('"' + text + '"').encode("utf-8")


# --- member order ----------------------------------------------------------------------------------------------


def test_members_sort_by_utf16_code_units_not_code_points() -> None:
    # U+1F600 is D83D DE00 in UTF-16, which sorts before U+FF5E; by code point it would sort after.
    expected = '{"\U0001f600":2,"\uff5e":1}'.encode()
    raw = '{"\uff5e":1,"\U0001f600":2}'.encode()
    assert both_paths(raw) == expected
    assert canonical_bytes(JsonValue.from_python({"\uff5e": 1, "\U0001f600": 2})) == expected


@pytest.mark.parametrize(
    "doc",
    [
        b'{"\\uff5e":1,"\\ud83d\\ude00":2}',  # both names escaped, the document all ASCII
        b'{"\\uFF5E":1,"\\uD83D\\uDE00":2}',
        '{"\uff5e":1,"\\ud83d\\ude00":2}'.encode(),  # one raw, one escaped
        '{"\\uff5e":1,"\U0001f600":2}'.encode(),
    ],
)
def test_utf16_order_also_when_names_are_escaped(doc: bytes) -> None:
    assert canonical_bytes(doc) == '{"\U0001f600":2,"\uff5e":1}'.encode()
    assert canonical_bytes(parse(doc)) == '{"\U0001f600":2,"\uff5e":1}'.encode()


def test_escaped_supplementary_names_digest_like_raw_ones() -> None:
    escaped = b'{"\\uff5e":1,"\\ud83d\\ude00":2}'
    raw = '{"\uff5e":1,"\U0001f600":2}'.encode()
    assert params_digest(escaped).text == params_digest(raw).text
    assert params_digest(escaped).text == params_digest(parse(escaped)).text


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["b", "a", "B", "", "aa", "é"], ["", "B", "a", "aa", "b", "é"]),
        (["\ue000", "\U0001f600"], ["\U0001f600", "\ue000"]),
        (["\uffff", "\U00010000"], ["\U00010000", "\uffff"]),
        (["\U0010ffff", "\U00010000", "\ud7ff"], ["\ud7ff", "\U00010000", "\U0010ffff"]),
        (["a\uff5e", "a\U0001f600", "a"], ["a", "a\U0001f600", "a\uff5e"]),
        (["\x00", "\x1f", " "], ["\x00", "\x1f", " "]),
    ],
)
def test_member_order_table(names: list[str], expected: list[str]) -> None:
    doc = ("{" + ",".join(f'"{n}":{i}' for i, n in enumerate(names)) + "}").encode().replace(b"\x00", b"\\u0000")
    doc = doc.replace(b"\x1f", b"\\u001f")
    canonical = both_paths(doc)
    assert list(oracle_load(canonical)) == expected


def test_utf16_order_in_nested_and_large_objects() -> None:
    # Deep nesting (beyond any top-level special casing) and objects with many members.
    names = [f"k{i}" for i in range(1500)] + ["\uff5e", "\U0001f600", "\ue000", "\U00010000"]
    rng = random.Random(7)
    rng.shuffle(names)
    big = {name: i for i, name in enumerate(names)}
    tree: Any = {"a": {"b": {"c": {"d": {"e": big, "\uff5e": 1, "\U0001f600": [big]}}}}}
    doc = JsonValue.from_python(tree)
    expected = oracle_canonical(oracle_load(canonical_text(doc)))
    assert canonical_bytes(doc) == expected
    text = render(oracle_load(canonical_text(doc)), rng)
    assert canonical_bytes(text.encode()) == expected
    escaped = text.replace("\uff5e", "\\uff5e").replace("\U0001f600", "\\ud83d\\ude00")
    assert canonical_bytes(escaped.encode()) == expected


# --- numbers, whitespace, shapes -------------------------------------------------------------------------------


def test_no_whitespace_and_canonical_numbers() -> None:
    doc = b' {\n "b" : [ 100 , 1.50 , -0 , 0.0000001 , true , false , null ] ,\t"a" : { } , "c" : [ ] }\r\n'
    assert both_paths(doc) == b'{"a":{},"b":[1E+2,1.5,0,1E-7,true,false,null],"c":[]}'


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (b"true", b"true"),
        (b" false ", b"false"),
        (b"null", b"null"),
        (b'"x"', b'"x"'),
        (b"100", b"1E+2"),
        (b"[]", b"[]"),
        (b"{}", b"{}"),
        (b"[[],{},[{}]]", b"[[],{},[{}]]"),
    ],
)
def test_root_scalars_and_empty_containers(doc: bytes, expected: bytes) -> None:
    assert both_paths(doc) == expected


@pytest.mark.parametrize("depth", [0, 3, 5])
@pytest.mark.parametrize("size", [1025, 2500])
def test_large_arrays_and_objects_at_any_depth(depth: int, size: int) -> None:
    # Big containers may be encoded in slices; the bytes must not show it.
    items = [
        [Decimal(100 * i), f"s\n{i}\U0001f600", {"z": Decimal("1.50"), "\uff5e": None, "\U0001f600": i % 2 == 0}]
        for i in range(size)
    ]
    members = {f"\U0001f600{i}" if i % 7 == 0 else f"m{i}": Decimal(f"{i}.0") for i in range(size)}
    tree: Any = {"arr": items, "obj": members}
    for _ in range(depth):
        tree = {"w": [tree]}
    rng = random.Random(size + depth)
    text = render(tree, rng)
    expected = oracle_canonical(tree)
    assert canonical_bytes(text.encode()) == expected
    assert canonical_bytes(parse(text)) == expected
    assert canonical_bytes(JsonValue.from_python(tree)) == expected


def test_canonical_text_is_the_decoded_bytes_and_inputs_agree() -> None:
    doc = '{"é": [1.0, "\\u00e9"], "a": 1E2}'
    expected = '{"a":1E+2,"é":[1,"é"]}'
    assert canonical_text(doc) == expected
    assert canonical_text(doc.encode()) == expected
    assert canonical_bytes(bytearray(doc.encode())) == expected.encode()
    assert canonical_bytes(memoryview(doc.encode())) == expected.encode()
    assert canonical_text(parse(doc)) == expected
