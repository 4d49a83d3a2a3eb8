"""What several ``soklet`` commands share: the one duration parser (``15m``, ``900s``, ``1h30m``) and its bounds.

Durations always carry a unit: a bare ``15`` is refused rather than silently taken as seconds, and only ASCII
digits count (``str.isdigit`` would take other scripts' digits too).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

import typer

__all__ = ["DURATION_HELP", "MAX_DURATION", "check_duration", "parse_duration"]

#: The longest duration any option takes: far beyond any sensible request-state lifetime or wait.
MAX_DURATION: Final = timedelta(days=366)
#: What the error messages and ``--help`` say a duration looks like.
DURATION_HELP: Final = "a duration with a unit, such as 15m, 900s, 1h or 1h30m"

_UNITS: Final = (("h", 3600), ("m", 60), ("s", 1))
_DIGITS: Final = frozenset("0123456789")
#: Digits of one part: 366 days is 8,784 hours or 527,040 minutes or 31,622,400 seconds, so 9 digits is ample.
_MAX_PART_DIGITS: Final = 9
#: Longest text looked at (three 9-digit parts and their units); anything longer is refused unread.
_MAX_TEXT: Final = 3 * (_MAX_PART_DIGITS + 1)


def parse_duration(text: str, *, maximum: timedelta = MAX_DURATION) -> timedelta:
    """``15m``, ``900s``, ``1h``, ``1h30m`` or ``1h30m15s``: positive and at most ``maximum``.

    Raises ``typer.BadParameter`` with a message that never repeats the input.
    """
    if not isinstance(text, str) or not text or len(text) > _MAX_TEXT:
        raise typer.BadParameter(DURATION_HELP)
    seconds = 0
    position = 0
    unit_index = 0
    while position < len(text):
        start = position
        while position < len(text) and text[position] in _DIGITS:
            position += 1
        digits = text[start:position]
        if not digits or len(digits) > _MAX_PART_DIGITS or position == len(text):
            raise typer.BadParameter(
                f"{DURATION_HELP} (a bare number has no unit)" if digits and position == len(text) else DURATION_HELP
            )
        unit = text[position]
        position += 1
        # Units in the order h, m, s, each at most once.
        while unit_index < len(_UNITS) and _UNITS[unit_index][0] != unit:
            unit_index += 1
        if unit_index == len(_UNITS):
            raise typer.BadParameter(DURATION_HELP)
        seconds += int(digits) * _UNITS[unit_index][1]
        unit_index += 1
    if seconds <= 0 or seconds > maximum.total_seconds():
        raise typer.BadParameter(f"the duration must be positive and at most {_spell(maximum)}")
    return timedelta(seconds=seconds)


def check_duration(value: str) -> str:
    """A Typer callback: refuse a malformed duration at parse time, keep the text."""
    parse_duration(value)
    return value


def _spell(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    if seconds % 86400 == 0:
        return f"{seconds // 86400} days"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds} s"
