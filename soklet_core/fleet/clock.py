"""Clock offsets of fleet members, measured from the ``Date`` header of their admin answers, and the skew between
them.

A state's expiry is judged on the clock of the instance that opens it, not the one that sealed it, so a member
whose clock is behind keeps states alive longer than their lifetime says. The measure needs nothing from the
instance but its HTTP answer:

* the request leaves at local time ``sent`` and its answer's headers arrive at local time ``received``;
* the answer's ``Date`` (RFC 9110) has whole seconds, truncated, and a server may cache it for up to a second
  (uvicorn formats it once a second), so at some local moment in ``[sent, received]`` the member's clock read
  ``date <= local + offset < date + R`` with ``R`` = :data:`DATE_RESOLUTION_MS` (2 s);
* hence ``offset`` lies in ``[date - received, date + R - sent]``: :class:`ClockReading` keeps that interval.
  Its middle is the estimate and its half width (half the round trip, plus 1 s for the header) the
  uncertainty.

Between two members the skew is the difference of their offsets. :class:`ClockSkew` gives the estimate (between
middles), the smallest skew the readings prove (``lower_ms``: the intervals' gap, 0 when they overlap) and the
largest they allow (``upper_ms``). ``fleet check --max-skew`` fails only on a proven skew (a slow answer on a busy
host is no evidence of a wrong clock); a rotation's wait adds the largest allowed one (what cannot be excluded
must be waited for).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, Final

__all__ = [
    "DATE_RESOLUTION_MS",
    "DEFAULT_MAX_SKEW_SECONDS",
    "MAX_DATE_HEADER_CHARS",
    "ClockReading",
    "ClockSkew",
    "fleet_skew",
    "reading_from_date",
]

#: How far an HTTP ``Date`` header may be behind the clock it was read from: whole seconds (truncated), and a
#: header a server caches for up to a second (uvicorn formats it once a second).
DATE_RESOLUTION_MS: Final = 2000
#: ``fleet check --max-skew``'s default: a skew proven above it fails the check (kind ``clock-skew``).
DEFAULT_MAX_SKEW_SECONDS: Final = 5
#: Longest ``Date`` header looked at (an IMF-fixdate is 29 characters).
MAX_DATE_HEADER_CHARS: Final = 64


@dataclass(frozen=True, slots=True)
class ClockReading:
    """A member's clock offset (its clock minus the local one) as the interval ``[low_ms, high_ms]`` one answer
    proves it lies in."""

    low_ms: float
    high_ms: float

    def __post_init__(self) -> None:
        if not self.low_ms <= self.high_ms:
            raise ValueError("a clock reading's interval is empty")

    @property
    def offset_ms(self) -> float:
        """The estimate: the interval's middle."""
        return (self.low_ms + self.high_ms) / 2

    @property
    def uncertainty_ms(self) -> float:
        """Half the interval's width: half the round trip plus half of :data:`DATE_RESOLUTION_MS`."""
        return (self.high_ms - self.low_ms) / 2

    def to_json(self) -> dict[str, Any]:
        """The reading as a JSON-ready document (milliseconds, rounded)."""
        return {"offset_ms": round(self.offset_ms), "uncertainty_ms": round(self.uncertainty_ms)}


def reading_from_date(date: str | None, sent_ms: float, received_ms: float) -> ClockReading | None:
    """The offset interval from an answer's ``Date`` header and the local Unix times (ms) the request left and
    the answer arrived; ``None`` when there is no usable header (absent, too long, not a date)."""
    if date is None or len(date) > MAX_DATE_HEADER_CHARS or received_ms < sent_ms:
        return None
    try:
        moment = parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    member_ms = moment.timestamp() * 1000
    return ClockReading(member_ms - received_ms, member_ms + DATE_RESOLUTION_MS - sent_ms)


@dataclass(frozen=True, slots=True)
class ClockSkew:
    """The largest skew between members: the estimate, the proven lower bound and the allowed upper bound (ms),
    the members with the earliest and the latest clock (``None`` with fewer than two readings), and how many
    members gave a reading."""

    skew_ms: float = 0.0
    lower_ms: float = 0.0
    upper_ms: float = 0.0
    behind: str | None = None
    ahead: str | None = None
    measured: int = 0

    def to_json(self) -> dict[str, Any]:
        """The skew as a JSON-ready document (milliseconds, rounded)."""
        return {
            "skew_ms": round(self.skew_ms),
            "lower_ms": round(self.lower_ms),
            "upper_ms": round(self.upper_ms),
            "behind": self.behind,
            "ahead": self.ahead,
            "measured": self.measured,
        }


def fleet_skew(clocks: Sequence[tuple[str, ClockReading]]) -> ClockSkew:
    """The largest skew between the named readings (a member without one is left out)."""
    if len(clocks) < 2:
        return ClockSkew(measured=len(clocks))
    behind = min(clocks, key=lambda pair: pair[1].offset_ms)
    ahead = max(clocks, key=lambda pair: pair[1].offset_ms)
    highest_low = max(reading.low_ms for _, reading in clocks)
    lowest_high = min(reading.high_ms for _, reading in clocks)
    upper = max(reading.high_ms for _, reading in clocks) - min(reading.low_ms for _, reading in clocks)
    return ClockSkew(
        skew_ms=ahead[1].offset_ms - behind[1].offset_ms,
        lower_ms=max(highest_low - lowest_high, 0.0),
        upper_ms=upper,
        behind=behind[0],
        ahead=ahead[0],
        measured=len(clocks),
    )
