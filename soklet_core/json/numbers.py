"""Exact JSON numbers: token checks and the canonical spelling.

The canonical spelling is the decimal "to-scientific-string" (Java ``BigDecimal.toString``) of the exact value
with trailing zeros stripped and zero spelled ``0``: ``100`` → ``1E+2``, ``1.50`` → ``1.5``, ``0.0000001`` →
``1E-7``. Nothing here uses a decimal context, because contexts round (Python's default keeps 28 digits).
"""

from __future__ import annotations

from decimal import Decimal

from .errors import JsonError, JsonErrorReason
from .limits import MAX_EXPONENT_MAGNITUDE, MAX_NUMBER_TOKEN_CHARS

__all__ = ["canonical_decimal_text", "canonical_number_text", "decimal_from_token"]


def _token_exponent(token: str) -> int:
    cut = max(token.find("e"), token.find("E"))
    return int(token[cut + 1 :]) if cut >= 0 else 0


def decimal_from_token(token: str) -> Decimal:
    """The exact value of a JSON number token that the grammar already accepted, after the limit checks.

    Raises :class:`JsonError` (``NUMBER_TOO_LONG`` or ``EXPONENT_OUT_OF_RANGE``, no offset).
    """
    if len(token) > MAX_NUMBER_TOKEN_CHARS:
        raise JsonError(JsonErrorReason.NUMBER_TOO_LONG)
    if abs(_token_exponent(token)) > MAX_EXPONENT_MAGNITUDE:
        raise JsonError(JsonErrorReason.EXPONENT_OUT_OF_RANGE)
    value = Decimal(token)
    if value and abs(value.adjusted()) > MAX_EXPONENT_MAGNITUDE:
        # The token's exponent passed, but the canonical spelling's would not ("12e10000" is 1.2E+10001).
        raise JsonError(JsonErrorReason.EXPONENT_OUT_OF_RANGE)
    return value


def canonical_decimal_text(value: Decimal) -> str:
    """The canonical spelling of a finite decimal. The caller has checked the limits."""
    if not value:
        return "0"
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    end = len(digits)
    while digits[end - 1] == 0:
        end -= 1
    return str(Decimal((sign, digits[:end], exponent + len(digits) - end)))


def _strip_integer(text: str) -> str:
    """Canonical spelling of a plain integer text (optional '-', no leading zeros)."""
    if text[-1] != "0":
        return text
    stripped = text.rstrip("0")
    if stripped in ("", "-"):
        return "0"
    zeros = len(text) - len(stripped)
    negative = stripped[0] == "-"
    digits = stripped[1:] if negative else stripped
    sign = "-" if negative else ""
    if len(digits) == 1:
        return f"{sign}{digits}E+{zeros}"
    return f"{sign}{digits[0]}.{digits[1:]}E+{zeros + len(digits) - 1}"


def canonical_number_text(token: str) -> str:
    """Canonical spelling of a number token that the JSON grammar accepted, checking every number limit.

    Common shapes (integers, plain decimals) take a string-only path; anything with an exponent, and the rare
    plain decimal that would need one, goes through the exact decimal path.
    """
    if len(token) > MAX_NUMBER_TOKEN_CHARS:
        raise JsonError(JsonErrorReason.NUMBER_TOO_LONG)
    if "e" in token or "E" in token:
        return canonical_decimal_text(decimal_from_token(token))
    point = token.find(".")
    if point < 0:
        return _strip_integer(token)
    whole = token[:point]
    fraction = token[point + 1 :].rstrip("0")
    if not fraction:
        return _strip_integer(whole)
    if whole in ("0", "-0"):
        # 0.000001 stays plain; one more leading zero switches to scientific (adjusted exponent < -6).
        if len(fraction) - len(fraction.lstrip("0")) > 5:
            return canonical_decimal_text(Decimal(token))
    return f"{whole}.{fraction}"
