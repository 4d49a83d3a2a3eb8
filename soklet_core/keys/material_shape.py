"""The one rule for text that looks like pasted key material, so that soklet never takes it as a name or echoes it.

Key material travels as base64url (43 characters for 32 bytes); a mistaken paste puts it where an id or a field
name belongs. Names people choose are words and numbers between separators (``2026-08``, ``prod-2026-09-01.2``,
``eu_west_primary``); random base64 or hex text changes between uppercase letters, lowercase letters and digits
at about two of every three characters. The rule below looks for such a run; it never echoes the text it judges.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Final

__all__ = [
    "MATERIAL_HEX_RUN_CHARS",
    "MATERIAL_LONG_RUN_CHARS",
    "MATERIAL_RUN_CHARS",
    "looks_like_key_material",
    "printable_name",
]

#: A run needs at least this many letters and digits before it can look like base64 or base64url material.
MATERIAL_RUN_CHARS: Final = 16
#: From this many letters and digits a run needs fewer class changes (1 in 4): a whole pasted key is that long.
MATERIAL_LONG_RUN_CHARS: Final = 40
#: A run whose letters and digits are all hexadecimal, mixing both, looks like hex material from this length.
MATERIAL_HEX_RUN_CHARS: Final = 32
# Within a run, material-like when changes of class (upper/lower/digit) between neighbours reach 2 in 5:
# random base64 text averages 0.62, hex 0.47, words with separators (prod-2026-09-01) about 0.1 to 0.3.
_CHANGE_NUMERATOR: Final = 2
_CHANGE_DENOMINATOR: Final = 5
# Characters of the base64, base64url and hex alphabets that are not letters or digits: they neither end a
# run nor count in it, so a key split by its own "-" or "_" is still one run.
_JOINERS: Final = frozenset("+/=-_")
_HEX: Final = frozenset("0123456789abcdefABCDEF")


def _klass(char: str) -> int:
    if "A" <= char <= "Z":
        return 0
    if "a" <= char <= "z":
        return 1
    return 2


def _run_looks_like_material(run: str) -> bool:
    if len(run) >= MATERIAL_HEX_RUN_CHARS and all(char in _HEX for char in run):
        has_digit = any(char.isdigit() for char in run)
        if has_digit and not run.isdigit():
            return True
    if len(run) < MATERIAL_RUN_CHARS:
        return False
    changes = sum(1 for left, right in pairwise(run) if _klass(left) != _klass(right))
    if len(run) >= MATERIAL_LONG_RUN_CHARS:
        return changes * 4 >= len(run) - 1
    return changes * _CHANGE_DENOMINATOR >= (len(run) - 1) * _CHANGE_NUMERATOR


def looks_like_key_material(text: str) -> bool:
    """Whether ``text`` holds something shaped like key material.

    A run is a stretch of ASCII letters and digits, joined across ``+ / = - _`` (the other characters of the
    base64 alphabets) and ended by anything else (``.``, ``:``, a space, ...). ``text`` looks like material when
    one run has at least ``MATERIAL_RUN_CHARS`` (16) letters and digits and at least 2 in 5 neighbouring pairs
    change between uppercase, lowercase and digit (1 in 4 from ``MATERIAL_LONG_RUN_CHARS``, 40, on), or when
    one run is at least ``MATERIAL_HEX_RUN_CHARS`` (32) hexadecimal digits mixing letters and digits.

    >>> looks_like_key_material("prod-2026-09-01.2")
    False
    >>> looks_like_key_material("q3Rk7Yb0LmZs9Xc2Vn4Hp8Wd")
    True
    """
    run: list[str] = []
    for char in text:
        if char.isascii() and char.isalnum():
            run.append(char)
        elif char in _JOINERS:
            continue
        else:
            if _run_looks_like_material("".join(run)):
                return True
            run = []
    return _run_looks_like_material("".join(run))


def printable_name(text: str, *, what: str = "a name") -> str:
    """``text`` itself, or a fixed stand-in (``<a name that looks like key material>``) when it looks like it."""
    return f"<{what} that looks like key material>" if looks_like_key_material(text) else text
