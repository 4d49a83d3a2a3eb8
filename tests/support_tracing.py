"""soklet's spans recorded for one test: the SDK's in-memory exporter behind a provider of soklet's own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from soklet_core import tracing


@contextlib.contextmanager
def recorded_spans() -> Iterator[InMemorySpanExporter]:
    """Route soklet's spans to an in-memory exporter (every span ended, as it ends) until the block ends; then back
    to the global provider, which no test sets, so tracing is off again."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield exporter
    finally:
        tracing.use_provider(None)
        provider.shutdown()
