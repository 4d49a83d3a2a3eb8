"""Independent oracles and hypothesis strategies for the JSON core tests.

Nothing here imports ``soklet_core``: the oracles are written from docs/json.md ("The canonical form", "The stable
params digest") so that the tests compare the implementation with a second, naive reading of the rules rather than
with itself.

A *tree* is plain Python data: ``dict`` (str keys), ``list``, ``str``, ``Decimal``, ``bool`` or ``None``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

MIB = 1024 * 1024

# ---------------------------------------------------------------------------------------------------------------
# Oracles
# ---------------------------------------------------------------------------------------------------------------


def oracle_number(value: Decimal) -> str:
    """Canonical spelling per docs/json.md: exact value, trailing zeros stripped, zero is ``0``, then the
    decimal to-scientific-string (Java ``BigDecimal.toString``). Written from the definition, digit by digit."""
    assert value.is_finite()
    sign, digit_tuple, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    if not digits:
        return "0"
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped
    adjusted = exponent + len(digits) - 1
    prefix = "-" if sign else ""
    if exponent <= 0 and adjusted >= -6:
        if exponent == 0:
            return prefix + digits
        point = len(digits) + exponent
        if point > 0:
            return prefix + digits[:point] + "." + digits[point:]
        return prefix + "0." + "0" * (-point) + digits
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{prefix}{mantissa}E{'+' if adjusted >= 0 else '-'}{abs(adjusted)}"


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def oracle_string(text: str) -> str:
    """Canonical string: escape only ``"``, ``\\`` and U+0000-U+001F; everything else raw."""
    out = ['"']
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def utf16_units(name: str) -> list[int]:
    """The UTF-16 code units of ``name``, computed by hand (no codec)."""
    units: list[int] = []
    for char in name:
        code = ord(char)
        if code >= 0x10000:
            code -= 0x10000
            units += [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
        else:
            units.append(code)
    return units


def oracle_canonical_text(tree: Any) -> str:
    if tree is None:
        return "null"
    if tree is True:
        return "true"
    if tree is False:
        return "false"
    if isinstance(tree, int):
        tree = Decimal(tree)
    if isinstance(tree, Decimal):
        return oracle_number(tree)
    if isinstance(tree, str):
        return oracle_string(tree)
    if isinstance(tree, list):
        return "[" + ",".join(oracle_canonical_text(item) for item in tree) + "]"
    assert isinstance(tree, dict)
    names = sorted(tree, key=utf16_units)
    return "{" + ",".join(oracle_string(n) + ":" + oracle_canonical_text(tree[n]) for n in names) + "}"


def oracle_canonical(tree: Any) -> bytes:
    return oracle_canonical_text(tree).encode("utf-8")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    assert len(result) == len(pairs), "oracle_load used on a document with a duplicate member"
    return result


def _no_constants(name: str) -> Any:
    raise AssertionError(f"oracle_load used on a document with {name}")


def oracle_load(text: str | bytes) -> Any:
    """Exact tree of a document that is known to be valid (stdlib json with Decimal hooks)."""
    return json.loads(
        text,
        parse_float=Decimal,
        parse_int=Decimal,
        parse_constant=_no_constants,
        object_pairs_hook=_no_duplicates,
    )


EXCLUDED_PARAMS = ("inputResponses", "requestState")
EXCLUDED_META = ("progressToken", "traceparent", "tracestate", "baggage")


def oracle_stable(params: Any) -> Any:
    """The stable params per docs/json.md: top-level inputResponses/requestState and four _meta members removed."""
    if isinstance(params, list):
        return params
    assert isinstance(params, dict)
    stable = {k: v for k, v in params.items() if k not in EXCLUDED_PARAMS}
    if isinstance(stable.get("_meta"), dict):
        stable["_meta"] = {k: v for k, v in stable["_meta"].items() if k not in EXCLUDED_META}
    return stable


def digest_text_of(canonical: bytes) -> str:
    """base64url (no padding) SHA-256 of canonical bytes, computed here with hashlib."""
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode("ascii")


def oracle_digest_text(params: Any) -> str:
    return digest_text_of(oracle_canonical(oracle_stable(params)))


def same_tree(left: Any, right: Any) -> bool:
    """Exact equality: same types, same member order, Decimals with the same digits *and* scale."""
    if type(left) is not type(right):
        return False
    if isinstance(left, Decimal):
        return left.as_tuple() == right.as_tuple()
    if isinstance(left, dict):
        return list(left) == list(right) and all(same_tree(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(same_tree(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


# ---------------------------------------------------------------------------------------------------------------
# Rendering a tree as a document, with random (meaning-preserving) spelling choices
# ---------------------------------------------------------------------------------------------------------------

_WHITESPACE = ["", "", "", " ", "\n", "\t", "\r\n  ", "  "]
_CONTROL_SHORT = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _u(code: int, rng: random.Random) -> str:
    text = f"{code:04x}"
    return "\\u" + (text.upper() if rng.random() < 0.5 else text)


def spell_string(text: str, rng: random.Random, *, ascii_only: bool = False) -> str:
    """A JSON string literal for ``text``; escapes are chosen at random but always correct.

    With ``ascii_only`` every non-ASCII character is escaped (supplementary ones as surrogate pairs).
    """
    rate = rng.choice([0.0, 0.0, 0.3, 1.0])
    out = ['"']
    for char in text:
        code = ord(char)
        if ascii_only and code > 0x7F:
            if code >= 0x10000:
                code -= 0x10000
                out.append(_u(0xD800 + (code >> 10), rng) + _u(0xDC00 + (code & 0x3FF), rng))
            else:
                out.append(_u(code, rng))
        elif char == '"':
            out.append('\\"' if rng.random() < 0.7 else _u(code, rng))
        elif char == "\\":
            out.append("\\\\" if rng.random() < 0.7 else _u(code, rng))
        elif code < 0x20:
            short = _CONTROL_SHORT.get(char)
            out.append(short if short and rng.random() < 0.7 else _u(code, rng))
        elif rng.random() < rate:
            if char == "/" and rng.random() < 0.5:
                out.append("\\/")
            elif code >= 0x10000:
                code -= 0x10000
                out.append(_u(0xD800 + (code >> 10), rng) + _u(0xDC00 + (code & 0x3FF), rng))
            else:
                out.append(_u(code, rng))
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _exponent_text(exponent: int, rng: random.Random) -> str:
    letter = rng.choice("eE")
    sign = "-" if exponent < 0 else rng.choice(["", "+"])
    zeros = "0" * rng.choice([0, 0, 0, 1, 3])
    return f"{letter}{sign}{zeros}{abs(exponent)}"


def spell_number(value: Decimal, rng: random.Random) -> str:
    """A JSON number token with exactly ``value``'s numeric value (not necessarily its scale)."""
    sign, digit_tuple, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    if not digits:
        zero = rng.choice(["0", "0.0", "0.000", "0e0", "0E+7", "0.00e-3"])
        return ("-" if sign or rng.random() < 0.3 else "") + zero
    pad = rng.choice([0, 0, 0, 1, 2, 5])
    digits += "0" * pad
    exponent -= pad
    adjusted = exponent + len(digits) - 1
    form = rng.choice(["plain", "plain", "exp", "point-exp"])
    if form == "plain" and -40 <= exponent <= 40:
        if exponent >= 0:
            body = digits + "0" * exponent
        else:
            point = len(digits) + exponent
            body = digits[:point] + "." + digits[point:] if point > 0 else "0." + "0" * (-point) + digits
    elif form == "point-exp" and len(digits) > 1:
        body = digits[0] + "." + digits[1:] + _exponent_text(adjusted, rng)
    else:
        body = digits + _exponent_text(exponent, rng)
    return ("-" if sign else "") + body


def render(tree: Any, rng: random.Random, *, shuffle: bool = True, ascii_only: bool | None = None) -> str:
    """A valid JSON document for ``tree`` with random whitespace, member order and spellings.

    One document in four (unless ``ascii_only`` says) is pure ASCII, every non-ASCII character escaped.
    """
    if ascii_only is None:
        ascii_only = rng.random() < 0.25

    def ws() -> str:
        return rng.choice(_WHITESPACE)

    def go(node: Any) -> str:
        if node is None:
            return "null"
        if node is True:
            return "true"
        if node is False:
            return "false"
        if isinstance(node, int):
            node = Decimal(node)
        if isinstance(node, Decimal):
            return spell_number(node, rng)
        if isinstance(node, str):
            return spell_string(node, rng, ascii_only=ascii_only)
        if isinstance(node, list):
            if not node:
                return "[" + ws() + "]"
            return "[" + ",".join(ws() + go(item) + ws() for item in node) + "]"
        items = list(node.items())
        if shuffle:
            rng.shuffle(items)
        if not items:
            return "{" + ws() + "}"
        return (
            "{"
            + ",".join(
                ws() + spell_string(k, rng, ascii_only=ascii_only) + ws() + ":" + ws() + go(v) + ws() for k, v in items
            )
            + "}"
        )

    return ws() + go(tree) + ws()


# ---------------------------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------------------------

#: Names chosen to stress UTF-16 ordering, escaping and the digest exclusions.
TRICKY_KEYS = [
    "",
    "a",
    "A",
    "aa",
    "b",
    "é",
    "\u00ff",
    "\ue000",
    "\uff5e",
    "\uffff",
    "\U0001f600",
    "\U00010000",
    "\U0010ffff",
    "a\U0001f600",
    "a\uff5e",
    "\x00",
    "\x1f",
    '"',
    "\\",
    "/",
    "\u2028",
    "_meta",
    "progressToken",
    "requestState",
    "inputResponses",
]

#: Any Unicode scalar value (no surrogates).
scalar_chars = st.characters(codec="utf-8")
keys = st.one_of(st.sampled_from(TRICKY_KEYS), st.text(scalar_chars, max_size=6))
strings = st.one_of(
    st.text(scalar_chars, max_size=12),
    st.text(st.sampled_from('"\\/\x00\x01\x08\x09\x0a\x0c\x0d\x1f\x7f\u2028\u2029é€\U0001f600 a'), max_size=8),
)


@st.composite
def decimals(draw: st.DrawFn, *, max_digits: int = 70) -> Decimal:
    """Exact decimals with many digits and a wide (but in-limit) exponent range; keeps its own scale."""
    digits = draw(st.text("0123456789", min_size=1, max_size=max_digits)).lstrip("0") or "0"
    small = st.integers(-30, 30)
    exponent = draw(st.one_of(small, small, small, st.integers(-9_900, 9_900)))
    sign = draw(st.integers(0, 1))
    return Decimal((sign, tuple(int(d) for d in digits), exponent))


scalars = st.one_of(st.none(), st.booleans(), strings, decimals())


def trees(max_leaves: int = 25) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=5),
            st.dictionaries(keys, children, max_size=5),
        ),
        max_leaves=max_leaves,
    )


containers = st.one_of(
    st.lists(trees(15), max_size=5),
    st.dictionaries(keys, trees(15), max_size=6),
)

meta_trees = st.dictionaries(
    st.one_of(st.sampled_from([*EXCLUDED_META, "keep", "requestState", "inputResponses"]), keys),
    trees(4),
    max_size=5,
)


@st.composite
def params_trees(draw: st.DrawFn) -> dict[str, Any]:
    """Params objects that often hold the excluded members (and look-alikes that must stay)."""
    params = draw(st.dictionaries(keys, trees(10), max_size=5))
    for name in EXCLUDED_PARAMS:
        if draw(st.booleans()):
            params[name] = draw(trees(6))
    if draw(st.booleans()):
        params["_meta"] = draw(st.one_of(meta_trees, meta_trees, trees(3)))
    return params


def ascii_rng() -> random.Random:
    """A generator whose first choice makes :func:`render` produce a pure-ASCII document (for @example)."""
    rng = random.Random(1)
    assert random.Random(1).random() < 0.25
    return rng


#: Real ``random.Random`` instances seeded by hypothesis: every spelling choice is cheap and reproducible.
rngs = st.randoms(use_true_random=True)
