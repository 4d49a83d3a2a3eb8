"""``soklet handles purge-expired`` on real stores: counts before and after, JSON, exit codes, nothing secret shown."""

from __future__ import annotations

import json

import pytest

from tests.cli.store_seed import PASSWORD, seed_handles
from tests.conftest import Soklet


@pytest.mark.slow
def test_purge_expired_counts_and_json(soklet: Soklet, store_url: str) -> None:
    seed_handles(store_url, live=3, expired=2)
    result = soklet.run("handles", "purge-expired", "--store", store_url, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["live_before"] == 3
    assert document["purged"] == 2
    assert document["live_after"] == 3
    assert document["backend"] in ("sqlite", "postgresql")
    assert "handle-0" not in result.output  # handles are never printed
    again = soklet.run("handles", "purge-expired", "--store", store_url)
    assert again.returncode == 0, again.stderr
    lines = dict(line.split(None, 1) for line in again.stdout.replace("live ", "live_").splitlines())
    assert lines["live_before"] == "3"
    assert lines["purged"] == "0 expired"
    assert lines["live_after"] == "3"
    assert PASSWORD not in again.output


def test_purge_refuses_a_missing_sqlite_file(soklet: Soklet) -> None:
    missing = soklet.cwd / "nothing-here.db"
    result = soklet.run("handles", "purge-expired", "--store", f"sqlite://{missing}")
    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "no such database file" in result.stderr
    assert not missing.exists()  # an operator command never creates a store


def test_purge_reads_the_store_from_the_environment(soklet: Soklet) -> None:
    url = f"sqlite://{soklet.cwd / 'env.db'}"
    seed_handles(url, live=0, expired=1)
    result = soklet.run("handles", "purge-expired", "--json", env={"SOKLET_STORE": url})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["purged"] == 1
