"""Human output that goes to a pipe (a CI log) is laid out wide: no table column is cut or folded at 80 columns;
``$COLUMNS`` still rules when set. Through the real command, its stdout a pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from soklet_cli.output import WIDE_OUTPUT_COLUMNS
from soklet_core.store import TaskStatus
from tests.cli.store_seed import seed_tasks, task

LONG_ID = "nightly-release-task-" + "0123456789abcdef" * 3  # 69 characters
LONG_TOOL = "deployments.production.approve-the-release-candidate"  # 52 characters


def _tasks_list(folder: Path, url: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name not in {"COLUMNS", "LINES", "SOKLET_STORE"}}
    env.update(NO_COLOR="1", **extra)
    return subprocess.run(
        [sys.executable, "-m", "soklet_cli", "tasks", "list", "--store", url],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_table_in_a_pipe_keeps_every_cell_on_its_row(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'tasks.db'}"
    seed_tasks(url, [task(LONG_ID, TaskStatus.WORKING, tool=LONG_TOOL)])
    result = _tasks_list(tmp_path, url)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if LONG_ID in line]
    assert len(rows) == 1, result.stdout  # folded at 80 columns, the id was spread over several lines
    assert LONG_TOOL in rows[0]
    assert "2026-08-01" in rows[0]
    assert max(map(len, result.stdout.splitlines())) <= WIDE_OUTPUT_COLUMNS


def test_columns_still_rules_when_set(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'tasks.db'}"
    seed_tasks(url, [task(LONG_ID, TaskStatus.WORKING, tool=LONG_TOOL)])
    result = _tasks_list(tmp_path, url, COLUMNS="90")
    assert result.returncode == 0, result.stderr
    assert max(map(len, result.stdout.splitlines())) <= 90
    assert not any(LONG_ID in line for line in result.stdout.splitlines())  # folded to fit, never cut
