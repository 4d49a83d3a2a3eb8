"""Counts in CLI output agree with their nouns for a fleet of one: the rotation's plan and the fleet check's
summary say "1 instance", never "1 instances" (one real ``soklet serve`` with its admin listener)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.support_served import Served, soklet, start_fleet, stop_all

pytestmark = pytest.mark.slow


@pytest.fixture
def one(tmp_path: Path) -> Iterator[dict[str, Served]]:
    served = start_fleet(tmp_path, ("solo",))
    yield served
    stop_all(served)


def test_a_fleet_of_one_is_one_instance(tmp_path: Path, one: dict[str, Served]) -> None:
    plan = soklet(tmp_path, "keys", "rotate", "--fleet", "fleet.toml", "--generate", "--id", "2026-09", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert "plan (dry run: nothing changes): rotate 1 instance (solo)" in plan.stdout
    check = soklet(tmp_path, "fleet", "check", "--fleet", "fleet.toml")
    assert check.returncode == 0, check.stderr
    assert "converged: 1 instance;" in check.stdout
    assert "1 instances" not in plan.stdout + check.stdout
