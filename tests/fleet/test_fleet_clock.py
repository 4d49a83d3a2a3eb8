"""Clock offsets from an answer's ``Date`` header and the skew between members (soklet_core.fleet.clock)."""

from __future__ import annotations

import pytest

from soklet_core.fleet import (
    DATE_RESOLUTION_MS,
    MAX_DATE_HEADER_CHARS,
    ClockReading,
    fleet_skew,
    reading_from_date,
)

# 2026-12-03T15:53:47Z in Unix milliseconds, and the same moment as an IMF-fixdate.
MOMENT_MS = 1_796_313_227_000
DATE = "Thu, 03 Dec 2026 15:53:47 GMT"


def test_a_reading_is_the_interval_one_answer_proves() -> None:
    # Sent 200 ms before the member's second began and received 100 ms into it (local clock 1 s behind).
    reading = reading_from_date(DATE, MOMENT_MS - 1200, MOMENT_MS - 900)
    assert reading is not None
    assert reading.low_ms == pytest.approx(900)
    assert reading.high_ms == pytest.approx(1200 + DATE_RESOLUTION_MS)
    assert reading.offset_ms == pytest.approx(1050 + DATE_RESOLUTION_MS / 2)
    # Half the round trip (150 ms) plus half the header's resolution.
    assert reading.uncertainty_ms == pytest.approx(150 + DATE_RESOLUTION_MS / 2)
    assert reading.to_json() == {"offset_ms": 2050, "uncertainty_ms": 1150}


@pytest.mark.parametrize("date", [None, "", "yesterday", "Thu, 99 Dec 2026 15:53:47 GMT"])
def test_no_usable_header_is_no_reading(date: str | None) -> None:
    assert reading_from_date(date, MOMENT_MS, MOMENT_MS) is None


def test_the_header_length_limit() -> None:
    at_limit = DATE + " " * (MAX_DATE_HEADER_CHARS - len(DATE))
    assert reading_from_date(at_limit, MOMENT_MS, MOMENT_MS) is not None
    assert reading_from_date(at_limit + " ", MOMENT_MS, MOMENT_MS) is None


def test_an_empty_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        ClockReading(low_ms=2, high_ms=1)
    assert reading_from_date(DATE, MOMENT_MS, MOMENT_MS - 1) is None


def test_skew_between_members() -> None:
    assert fleet_skew([]).measured == 0
    single = fleet_skew([("a", ClockReading(0, 1000))])
    assert (single.skew_ms, single.behind, single.measured) == (0.0, None, 1)
    # Overlapping intervals prove nothing: lower bound 0; the upper bound is the widest span.
    overlapping = fleet_skew([("a", ClockReading(0, 1000)), ("b", ClockReading(500, 1500))])
    assert (overlapping.skew_ms, overlapping.lower_ms, overlapping.upper_ms) == (500, 0, 1500)
    assert (overlapping.behind, overlapping.ahead) == ("a", "b")
    # b is 30 s ahead: at least the gap between the intervals, at most the widest span.
    apart = fleet_skew([("a", ClockReading(0, 1000)), ("b", ClockReading(30_000, 31_000)), ("c", ClockReading(0, 800))])
    assert (apart.lower_ms, apart.upper_ms, apart.ahead, apart.measured) == (29_200, 31_000, "b", 3)
    assert apart.to_json()["lower_ms"] == 29_200
