"""What tracing costs a round trip: off, on with nothing sampled, on with every span sampled and batched.

Run: ``.venv/bin/python benchmarks/tracing_cost.py [--round-trips N] [--rounds R] [--json]``.

The demo's ``catalog.continue`` round trip (call -> ``input_required`` with a sealed state -> retry -> complete)
posted straight into the ASGI app, as ``engine_path.py`` does, in one process under three settings taken in turn
within each round (so the machine's load falls on all three alike), best of ``--rounds``:

* ``off``: no tracer provider (what every server runs without the ``tracing`` extra and ``OTEL_*`` variables);
* ``unsampled``: an SDK provider whose sampler drops everything (spans are made but not recorded);
* ``sampled``: an SDK provider recording every span, a batch processor and an exporter that drops the batches
  (the export thread's CPU counts: it is process time; the network is left out).

Printed: CPU per round trip for each, the ratios to ``off``, and the spans one round trip makes. Whether ``off``
costs anything against the commit before tracing is measured by running ``engine_path.py`` side by side in two
checkouts (``docs/benchmarks.md``, "Traces").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from engine_path import demo_app, round_trip
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from soklet_core import tracing


class _Dropped(SpanExporter):
    """Takes every batch and keeps nothing (the cost of a real exporter minus its network)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _providers() -> dict[str, TracerProvider | None]:
    sampled = TracerProvider()
    sampled.add_span_processor(BatchSpanProcessor(_Dropped(), max_queue_size=1 << 20))
    return {"off": None, "unsampled": TracerProvider(sampler=ALWAYS_OFF), "sampled": sampled}


def cpu_per_round_trip(count: int, rounds: int) -> dict[str, float]:
    """Best CPU seconds per round trip of each setting, the settings interleaved within every round."""
    app = demo_app()
    providers = _providers()
    best = dict.fromkeys(providers, float("inf"))

    async def loop() -> None:
        for index in range(count):
            await round_trip(app, index)

    try:
        for provider in providers.values():  # warm-up of each
            tracing.use_provider(provider)
            asyncio.run(loop())
        for _ in range(rounds):
            for name, provider in providers.items():
                tracing.use_provider(provider)
                started = time.process_time()
                asyncio.run(loop())
                if provider is not None:
                    provider.force_flush()  # the batches of this run are exported in its time
                best[name] = min(best[name], (time.process_time() - started) / count)
    finally:
        tracing.use_provider(None)
        for provider in providers.values():
            if provider is not None:
                provider.shutdown()
    return best


def spans_per_round_trip() -> dict[str, int]:
    """The spans one round trip makes, by name."""
    app = demo_app()
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing.use_provider(provider)
    try:
        asyncio.run(round_trip(app, 0))
    finally:
        tracing.use_provider(None)
        provider.shutdown()
    names: dict[str, int] = {}
    for span in memory.get_finished_spans():
        names[span.name] = names.get(span.name, 0) + 1
    return names


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--round-trips", type=int, default=2000, help="round trips per run (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each setting; the best counts (default 3)")
    parser.add_argument("--quick", action="store_true", help="200 round trips, 1 round (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    options = parser.parse_args(argv)
    count, rounds = (200, 1) if options.quick else (options.round_trips, options.rounds)
    cpu = cpu_per_round_trip(count, rounds)
    report: dict[str, Any] = {
        "cpu_us_per_round_trip": {name: round(value * 1e6, 1) for name, value in cpu.items()},
        "ratio_to_off": {name: round(value / cpu["off"], 3) for name, value in cpu.items()},
        "spans_per_round_trip": spans_per_round_trip(),
    }
    if options.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{'setting':<10} {'us/round trip':>14} {'x off':>7}")
    for name, value in report["cpu_us_per_round_trip"].items():
        print(f"{name:<10} {value:>14.1f} {report['ratio_to_off'][name]:>7.3f}")
    spans = report["spans_per_round_trip"]
    print(f"spans per round trip: {sum(spans.values())} ({', '.join(f'{k} {v}' for k, v in sorted(spans.items()))})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
