"""Shows the conformance summary in pytest's own output: every run a test records is printed in the terminal summary
(scenarios scored, pass/fail counts, each failing check, the verdict), so `bash scripts/test` shows it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

#: The results folders of the runs to show, in the order they were recorded.
SHOWN_RUNS = pytest.StashKey[list[Path]]()


@pytest.fixture(scope="session")
def show_conformance_summary(request: pytest.FixtureRequest) -> Callable[[Path], None]:
    """Record a run's results folder: its summary.txt is printed at the end of the test session."""
    return request.config.stash.setdefault(SHOWN_RUNS, []).append


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    for run_dir in config.stash.get(SHOWN_RUNS, []):
        terminalreporter.write_sep("=", "MCP conformance summary")
        brief = run_dir / "summary.txt"
        try:
            text = brief.read_text("utf-8", "replace")
        except OSError as exc:
            text = f"no summary at {brief}: {exc.strerror}"
        for line in text.splitlines():
            terminalreporter.write_line(line)
