"""The store figures of ``/metrics``: tasks by status and live handles, read at scrape time; a failing store gives
``soklet_store_up 0`` and a scrape that still succeeds."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.store import TaskStatus, open_store
from tests.cli.store_seed import seed_handles, seed_tasks, task


def _samples(metrics: ServerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, _ = metrics.render()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def test_no_store_no_store_series() -> None:
    metrics = ServerMetrics(instance="t")
    asyncio.run(metrics.refresh_store())
    assert not [
        name for name, _ in _samples(metrics) if name.startswith(("soklet_store", "soklet_tasks", "soklet_handles"))
    ]


def test_figures_from_a_real_store(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'store.db'}"
    seed_tasks(
        url,
        [
            task("a", TaskStatus.WORKING),
            task("b", TaskStatus.WORKING, offset_s=1),
            task("c", TaskStatus.COMPLETED, offset_s=2),
        ],
    )
    seed_handles(url, live=2, expired=3)
    metrics = ServerMetrics(instance="t")
    store = open_store(url)

    async def scrape() -> None:
        await store.open()
        metrics.watch_store(store)
        await metrics.refresh_store()
        await store.close()

    asyncio.run(scrape())
    samples = _samples(metrics)
    assert samples[("soklet_store_up", ())] == 1
    assert samples[("soklet_tasks", (("status", "working"),))] == 2
    assert samples[("soklet_tasks", (("status", "completed"),))] == 1
    assert samples[("soklet_tasks", (("status", "input_required"),))] == 0
    assert samples[("soklet_handles_live", ())] == 2


def test_a_failing_store_reports_down_and_the_scrape_succeeds() -> None:
    metrics = ServerMetrics(instance="t")
    # Nothing listens on port 1 of loopback: every call fails at once.
    store = open_store("postgresql://ops:pw@127.0.0.1:1/soklet")
    metrics.watch_store(store)
    asyncio.run(metrics.refresh_store())
    samples = _samples(metrics)
    assert samples[("soklet_store_up", ())] == 0
    assert not [name for name, _ in samples if name in ("soklet_tasks", "soklet_handles_live")]
