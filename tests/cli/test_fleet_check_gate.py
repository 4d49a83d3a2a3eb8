"""``soklet fleet check`` as a CI gate and a clock check: --wait's note without a target, progress and failures
on stderr beside --json on stdout, the converged fingerprint at the top level, and each member's clock offset
with the largest skew (--max-skew). Real ``soklet serve`` instances on loopback, a real ``soklet`` subprocess;
a clock is shifted by a relay that moves the real instance's Date header."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.support_served import TOKEN, Served, ShiftedClockRelay, soklet, start_fleet, stop_all

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """a and b: one keyring in two copies (fleet file fleet.toml); d: a keyring of its own whose key 2026-08
    holds other bytes."""
    folder = tmp_path_factory.mktemp("gate")
    served = start_fleet(folder, ("a", "b"))
    try:
        other = folder / "other.toml"
        assert soklet(folder, "keys", "generate", "--id", "2026-08", "--keyring", str(other)).returncode == 0
        shutil.copy2(other, folder / "d.toml")
        served["d"] = Served(folder, "d", folder / "d.toml")
        yield served
    finally:
        stop_all(served)


@pytest.fixture
def folder(fleet: dict[str, Served]) -> Path:
    return fleet["a"].keyring.parent


def test_wait_without_a_target_says_it_proves_equal_now(folder: Path, fleet: dict[str, Served]) -> None:
    result = soklet(folder, "fleet", "check", "--fleet", "fleet.toml", "--wait", "1m", "--json")
    assert result.returncode == 0, result.stderr
    assert "can only prove that the instances are equal now" in result.stderr
    document = json.loads(result.stdout)
    # The converged result carries the fleet fingerprint at its top level.
    assert document["status"] == "converged"
    assert document["fingerprint"] == fleet["a"].snapshot()["fingerprint"]
    value = document["fingerprint"]["value"]
    expected = soklet(folder, "fleet", "check", "--fleet", "fleet.toml", "--wait", "1m", "--expect", value)
    assert expected.returncode == 0, expected.stderr
    assert "equal now" not in expected.stderr
    # Without --wait there is nothing to say.
    assert "equal now" not in soklet(folder, "fleet", "check", "--fleet", "fleet.toml").stderr


def test_a_failed_wait_shows_progress_and_what_diverged_on_stderr(folder: Path, fleet: dict[str, Served]) -> None:
    urls = [fleet["a"].admin_url, fleet["d"].admin_url]
    result = soklet(folder, "fleet", "check", "--token-file", "token", "--wait", "2s", "--json", *urls)
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert (document["status"], document["fingerprint"]) == ("diverged", None)
    assert "soklet: check 1: diverged: 2 instances do not hold the same keyring" in result.stderr
    assert "key 2026-08: the same id with other bytes" in result.stderr
    assert TOKEN not in result.stdout + result.stderr
    # Without --json (a CI log, not a terminal): progress on stderr, the table with the differences on stdout.
    plain = soklet(folder, "fleet", "check", "--token-file", "token", "--wait", "2s", *urls)
    assert plain.returncode == 1
    assert "soklet: check 1: diverged" in plain.stderr
    assert "key 2026-08: the same id with other bytes" in plain.stdout


def test_each_clock_offset_and_the_skew_are_reported(folder: Path, fleet: dict[str, Served]) -> None:
    result = soklet(folder, "fleet", "check", "--fleet", "fleet.toml", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    for instance in document["instances"]:
        # At least the Date header's uncertainty (whole seconds, cached for up to one).
        assert instance["clock"]["uncertainty_ms"] >= 1000
    skew = document["clock_skew"]
    # One host, one clock: the check passed (exit 0), so no skew above 5 s was proven.
    assert skew["lower_ms"] <= 5000
    assert (skew["max_skew_ms"], skew["measured"]) == (5000, 2)
    table = soklet(folder, "fleet", "check", "--fleet", "fleet.toml")
    assert "clock skew: " in table.stdout
    assert "at most 5 s allowed" in table.stdout


def test_a_member_whose_clock_is_off_fails_with_clock_skew(folder: Path, fleet: dict[str, Served]) -> None:
    relay = ShiftedClockRelay(int(fleet["b"].admin_url.rsplit(":", 1)[1]), 30)
    try:
        urls = [fleet["a"].admin_url, relay.url]
        result = soklet(folder, "fleet", "check", "--token-file", "token", "--json", *urls)
        assert result.returncode == 1, result.stderr
        document = json.loads(result.stdout)
        assert document["status"] == "diverged"
        assert [difference["kind"] for difference in document["differences"]] == ["clock-skew"]
        skew = document["clock_skew"]
        assert 25_000 < skew["lower_ms"] <= skew["skew_ms"] <= skew["upper_ms"]
        assert skew["ahead"] == relay.url.removeprefix("http://")
        assert "clocks differ by more than the largest skew allowed" in result.stderr
        # A larger allowance passes, and the skew is still reported.
        allowed = soklet(folder, "fleet", "check", "--token-file", "token", "--max-skew", "1m", *urls)
        assert allowed.returncode == 0, allowed.stdout + allowed.stderr
        # Date headers count whole seconds, so each clock reading is uncertain by up to a second: the estimate of
        # a 30 s shift lies between 29 and 31 s (plus the time the reads took).
        line = next(line for line in allowed.stdout.splitlines() if line.startswith("clock skew: "))
        assert 28.5 <= float(line.removeprefix("clock skew: ").split(" s ", 1)[0]) <= 31.5, line
    finally:
        relay.close()


@pytest.mark.parametrize("value", ["0s", "61m", "5", "1.0001s", "later"])
def test_max_skew_is_a_bounded_duration(folder: Path, value: str) -> None:
    result = soklet(folder, "fleet", "check", "--fleet", "fleet.toml", "--max-skew", value)
    assert result.returncode == 2
    assert "--max-skew is a duration" in result.stderr


def test_max_skew_at_its_limit(folder: Path) -> None:
    assert soklet(folder, "fleet", "check", "--fleet", "fleet.toml", "--max-skew", "1h").returncode == 0
    assert soklet(folder, "fleet", "check", "--fleet", "fleet.toml", "--max-skew", "1h0m0.001s").returncode == 2
