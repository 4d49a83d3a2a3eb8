"""Exact JSON numbers: token checks and the canonical spelling.

The canonical spelling is the decimal "to-scientific-string" (Java ``BigDecimal.toString``) of the exact value
with trailing zeros stripped and zero spelled ``0``: ``100`` → ``1E+2``, ``1.50`` → ``1.5``, ``0.0000001`` →
``1E-7``. Python's default decimal context keeps 28 digits and would round; every operation here runs in
:data:`EXACT`, a context wide enough that nothing is ever rounded.
"""

from __future__ import annotations

import decimal
import re
from decimal import Decimal
from typing import Final

from .errors import JsonError, JsonErrorReason
from .limits import MAX_EXPONENT_MAGNITUDE, MAX_NUMBER_TOKEN_CHARS

__all__ = [
    "CANONICAL_SPELLING",
    "CANONICAL_TOKEN",
    "EXACT",
    "PLAIN_NUMBER_ITEM",
    "canonical_decimal_text",
    "canonical_number_text",
    "check_decimal",
    "decimal_from_token",
]

#: A token the JSON grammar accepted is already in canonical spelling exactly when it is 0, or has no exponent
#: part, does not end in 0 and is not 0.0000001 or smaller (a seventh zero switches to 1E-7); the bounded run keeps
#: it within the 1,024-character limit (anything longer is respelled, so checked). The pattern's text, for larger
#: patterns, and the pattern.
CANONICAL_SPELLING: Final = rf"(?:0|-?(?!0\.000000)[0-9.]{{0,{MAX_NUMBER_TOKEN_CHARS - 2}}}[1-9])"
CANONICAL_TOKEN: Final = re.compile(CANONICAL_SPELLING)

#: A number token without an exponent part, within the 1,024-character limit (the length look-ahead is bounded),
#: that no number character follows: an item the reference scanner's runs and number_runs' packed chunks take as
#: it stands. Its own end is fixed by the last look-ahead, so a repeat of it never splits a token two ways.
PLAIN_NUMBER_ITEM: Final = rf"(?![-0-9.]{{{MAX_NUMBER_TOKEN_CHARS + 1}}})-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?![0-9.eE+-])"

#: A context that never rounds, clamps or traps inexactness: for normalizing exact values.
EXACT: Final = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])


def _token_exponent(token: str) -> int:
    cut = token.find("e")
    if cut < 0:
        cut = token.find("E")
    return int(token[cut + 1 :]) if cut >= 0 else 0


def _check_token(token: str) -> None:
    if len(token) > MAX_NUMBER_TOKEN_CHARS:
        raise JsonError(JsonErrorReason.NUMBER_TOO_LONG)
    if abs(_token_exponent(token)) > MAX_EXPONENT_MAGNITUDE:
        raise JsonError(JsonErrorReason.EXPONENT_OUT_OF_RANGE)


def _check_adjusted(value: Decimal) -> None:
    if value and abs(value.adjusted()) > MAX_EXPONENT_MAGNITUDE:
        raise JsonError(JsonErrorReason.EXPONENT_OUT_OF_RANGE)


def decimal_from_token(token: str) -> Decimal:
    """The exact value of a number token that the JSON grammar accepted, after every number limit check.

    Raises :class:`JsonError` (``NUMBER_TOO_LONG`` or ``EXPONENT_OUT_OF_RANGE``, no offset): the token over
    1,024 characters, its own exponent beyond ±10,000, or its canonical exponent beyond that ("12e10000" is
    1.2E+10001).
    """
    # The token's own limits first: Decimal() itself refuses exponents past its range.
    _check_token(token)
    value = Decimal(token)
    _check_adjusted(value)
    return value


def check_decimal(value: Decimal) -> str:
    """The spelling of a finite decimal (``str``, what serialize writes), after every number limit check.

    The same checks as :func:`decimal_from_token` of that spelling, without parsing it back.
    """
    if not value.is_finite():
        raise JsonError(JsonErrorReason.NON_FINITE_NUMBER)
    text = str(value)
    _check_token(text)
    _check_adjusted(value)
    return text


def canonical_decimal_text(value: Decimal) -> str:
    """The canonical spelling of a finite decimal."""
    text = str(value)
    # str() is already the to-scientific-string of the held coefficient and exponent; without an exponent part
    # and with a last digit other than 0 the coefficient has no trailing zeros, so normalizing changes nothing.
    if text[-1] != "0" and "E" not in text:
        return text
    if not value:
        return "0"
    return str(value.normalize(EXACT))


def canonical_number_text(token: str) -> str:
    """Canonical spelling of a number token that the JSON grammar accepted, checking every number limit."""
    if "e" in token or "E" in token or len(token) > MAX_NUMBER_TOKEN_CHARS:
        return canonical_decimal_text(decimal_from_token(token))
    # A token without an exponent part (prices, counts, timestamps: what a digest respells most) is respelled as
    # text. Within the length limit its exponents are within theirs, so there is nothing to refuse.
    sign = "-" if token[0] == "-" else ""
    whole, _, fraction = (token[1:] if sign else token).partition(".")
    fraction = fraction.rstrip("0")
    if fraction:
        if whole != "0":
            return sign + whole + "." + fraction
        if not fraction.startswith("000000"):
            return sign + "0." + fraction
        # 0.0000001 and smaller switch to an exponent.
        return canonical_decimal_text(Decimal(token))
    digits = whole.rstrip("0")
    if not digits:
        return "0"
    if len(digits) == len(whole):
        return sign + whole
    # Trailing zeros of an integer become a positive exponent: 1200 is 1.2E+3.
    point = "." if len(digits) > 1 else ""
    return f"{sign}{digits[0]}{point}{digits[1:]}E+{len(whole) - 1}"
