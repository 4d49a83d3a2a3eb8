"""``soklet fleet check --store URL``: a store-mode fleet judged from the store alone.

The members are the instances whose heartbeats the store holds (no fleet file, no admin token); the target is the
store's current fleet generation, so ``--wait`` proves the fleet applied the keyring meant, not only that the
members are equal now. The verdict is the core's (:func:`~soklet_core.fleet.store_rotation.judge_store_fleet`).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any, Final, cast

import typer
from rich.table import Table

from soklet_core.fleet.store_rotation import (
    StoreFleetReport,
    StoreFleetStatus,
    fleet_members,
    judge_store_fleet,
)
from soklet_core.store import DurableStore, KeyringRepository, StoreUrl

from .exit_codes import ExitCode
from .output import console, emit_json, error_console
from .store_option import run_on_store, shown_store, store_facts

__all__ = ["STORE_WAIT_INTERVAL_SECONDS", "check_store"]

#: Seconds between two reads of the store under ``--wait``.
STORE_WAIT_INTERVAL_SECONDS: Final = 1.0
#: Under ``--wait``, a progress line on stderr when the verdict changes, else at most one per this many seconds.
_PROGRESS_SECONDS: Final = 10.0


async def _judge(repository: KeyringRepository, max_skew_ms: int) -> StoreFleetReport:
    generation = await repository.keyring_generation()
    members = fleet_members(await repository.heartbeats(), now=datetime.now(UTC))
    return judge_store_fleet(members, generation=generation, max_skew_ms=max_skew_ms)


def _summary(report: StoreFleetReport) -> str:
    live = sum(member.live for member in report.members)
    gone = len(report.members) - live
    tail = f" ({gone} gone)" if gone else ""
    if report.status is StoreFleetStatus.CONVERGED:
        return f"converged: {live} live member(s) at generation {report.generation}{tail}"
    if report.status is StoreFleetStatus.BEHIND:
        return f"behind: {', '.join(report.behind)} not at the store's generation {report.generation}{tail}"
    if report.status is StoreFleetStatus.DIVERGED:
        return f"diverged: live members at generation {report.generation} report different fingerprints{tail}"
    if report.status is StoreFleetStatus.CLOCK_SKEW:
        return f"clock-skew: members' clocks are {report.skew_ms} ms apart{tail}"
    return f"no-member: no instance heartbeats in this store{tail}"


def check_store(url: StoreUrl, *, wait_seconds: float | None, max_skew_ms: int, as_json: bool) -> None:
    """Judge the fleet once, or until converged or ``wait_seconds`` pass; print it and exit 0 (converged) or 1."""
    checks = 0
    started = time.monotonic()

    async def work(store: DurableStore) -> StoreFleetReport:
        nonlocal checks
        # open_store's backends are both a DurableStore and a KeyringRepository.
        repository = cast(KeyringRepository, store)
        deadline = None if wait_seconds is None else time.monotonic() + wait_seconds
        last, last_at = "", float("-inf")
        while True:
            checks += 1
            report = await _judge(repository, max_skew_ms)
            if report.status is StoreFleetStatus.CONVERGED or deadline is None or time.monotonic() >= deadline:
                return report
            summary = _summary(report)
            if summary != last or time.monotonic() - last_at >= _PROGRESS_SECONDS:
                left = max(deadline - time.monotonic(), 0)
                error_console.print(f"soklet: check {checks}: {summary}; {left:.0f} s left", markup=False)
                last, last_at = summary, time.monotonic()
            await asyncio.sleep(min(STORE_WAIT_INTERVAL_SECONDS, max(deadline - time.monotonic(), 0)))

    report = run_on_store(url, work)
    converged = report.status is StoreFleetStatus.CONVERGED
    if as_json:
        document: dict[str, Any] = {
            **store_facts(url),
            "status": report.status.value,
            "generation": report.generation,
        }
        if converged:
            document["fingerprint"] = report.fingerprint
        document.update(
            largest_skew_ms=report.skew_ms,
            max_skew_ms=max_skew_ms,
            behind=list(report.behind),
            checks=checks,
            elapsed_ms=round((time.monotonic() - started) * 1000),
            members=[member.to_json() for member in report.members],
        )
        emit_json(document)
    else:
        table = Table(title=f"store {shown_store(url)}, generation {report.generation}", title_justify="left")
        for column in ("instance", "status", "generation", "fingerprint", "clock offset", "last beat"):
            table.add_column(column)
        for member in report.members:
            table.add_row(
                member.instance,
                "live" if member.live else "gone",
                str(member.generation),
                (member.fingerprint or "-")[:16],
                f"{member.offset_ms:+d} ms",
                f"{member.age_seconds:.1f} s ago",
            )
        console.print(table)
        console.print(f"largest clock skew {report.skew_ms} ms (at most {max_skew_ms} ms)", markup=False)
        if converged:
            console.print(f"{_summary(report)}; fingerprint v2 {report.fingerprint}", markup=False)
    if not converged:
        # A CI log shows stderr: what failed is said there, with --json too.
        error_console.print(f"soklet: {_summary(report)}", markup=False)
    raise typer.Exit(int(ExitCode.OK if converged else ExitCode.REFUSED))
