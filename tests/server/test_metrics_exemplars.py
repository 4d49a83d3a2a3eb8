"""Refusal exemplars: with tracing on, a refused state open (a real sealer's refusal), a refused seal, an admission
refusal and a refused request are counted with the current trace's id, shown in the OpenMetrics exposition; with
tracing off, none. The scrape's ``Accept`` picks the format."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from soklet_core import tracing
from soklet_core.json import JsonObject
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp.server.ops._metrics import (
    METRICS_CONTENT_TYPE,
    OPENMETRICS_CONTENT_TYPE,
    ServerMetrics,
    exposition_for,
)
from soklet_core.protection import ProtectionConfig, RequestStateProtectionException, RequestStateSealer
from soklet_core.protection.binding import bind_request

PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


@pytest.fixture
def traced() -> Iterator[None]:
    """An SDK provider for soklet's spans (no exporter needed: the spans' ids are what counts)."""
    provider = TracerProvider()
    tracing.use_provider(provider)
    try:
        yield
    finally:
        tracing.use_provider(None)
        provider.shutdown()


def _registry(metrics: ServerMetrics) -> CollectorRegistry:
    registry: CollectorRegistry = metrics._registry  # the server's own registry, as the admin listener renders it
    return registry


def _exemplars(metrics: ServerMetrics, family: str) -> dict[frozenset[tuple[str, str]], dict[str, str] | None]:
    """Each sample of ``family``'s counter (``_total``) by its labels: its exemplar's labels, or ``None``."""
    text = generate_latest(_registry(metrics)).decode()
    found: dict[frozenset[tuple[str, str]], dict[str, str] | None] = {}
    for parsed in text_string_to_metric_families(text):
        if parsed.name != family:
            continue
        for sample in parsed.samples:
            if sample.name == f"{family}_total":
                found[frozenset(sample.labels.items())] = None if sample.exemplar is None else sample.exemplar.labels
    return found


def _refused_open(metrics: ServerMetrics) -> None:
    """Open a state under a key the keyring does not hold: the sealer refuses it, and the refusal is counted as the
    engine counts it."""
    sealing = RequestStateSealer(ProtectionConfig(keyring=ProtectionKeyring(ProtectionKey.generate("k-old"))))
    opening = RequestStateSealer(ProtectionConfig(keyring=ProtectionKeyring(ProtectionKey.generate("k-new"))))
    bound = bind_request(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}', path="/mcp", partition="p1")
    token = sealing.seal(JsonObject.from_mapping({"step": 1}), bound)
    with pytest.raises(RequestStateProtectionException) as caught:
        opening.open(token, bound)
    metrics.open("refused", caught.value.reason.value, token=token)


def test_a_refused_open_carries_the_current_trace(traced: None) -> None:
    metrics = ServerMetrics(instance="a")
    with tracing.span("request"):
        ids = tracing.current_trace_ids()
        assert ids is not None
        _refused_open(metrics)
        metrics.open("opened")
    opens = _exemplars(metrics, "soklet_state_opens")
    assert opens[frozenset({("outcome", "refused"), ("reason", "unknown-key")})] == {"trace_id": ids.trace_id}
    assert opens[frozenset({("outcome", "opened"), ("reason", "none")})] is None  # a success carries none


def test_every_refusal_counter_carries_it(traced: None) -> None:
    metrics = ServerMetrics(instance="a")
    with tracing.span("request"):
        ids = tracing.current_trace_ids()
        assert ids is not None
        metrics.seal("refused", "too-large")
        metrics.seal("sealed")
        metrics.admission_refused("expired")
        metrics.request("tools/call", "state_refused")
        metrics.request("tools/call", "ok")
    expected = {"trace_id": ids.trace_id}
    seals = _exemplars(metrics, "soklet_state_seals")
    assert seals[frozenset({("outcome", "refused"), ("reason", "too-large")})] == expected
    assert seals[frozenset({("outcome", "sealed"), ("reason", "none")})] is None
    assert _exemplars(metrics, "soklet_admission_refusals")[frozenset({("reason", "expired")})] == expected
    requests = _exemplars(metrics, "soklet_mcp_requests")
    assert requests[frozenset({("method", "tools/call"), ("outcome", "state_refused")})] == expected
    assert requests[frozenset({("method", "tools/call"), ("outcome", "ok")})] is None


def test_a_request_counted_after_its_span_names_the_trace_it_is_given(traced: None) -> None:
    metrics = ServerMetrics(instance="a")
    with tracing.span("request"):
        ids = tracing.current_trace_ids()
    assert ids is not None
    metrics.request("tools/call", "unauthorized", trace=ids)
    requests = _exemplars(metrics, "soklet_mcp_requests")
    assert requests[frozenset({("method", "tools/call"), ("outcome", "unauthorized")})] == {"trace_id": ids.trace_id}


def test_no_exemplar_while_tracing_is_off() -> None:
    tracing.use_provider(NoOpTracerProvider())
    try:
        assert tracing.current_trace_ids() is None
        metrics = ServerMetrics(instance="a")
        _refused_open(metrics)
        metrics.seal("refused", "too-large")
        metrics.admission_refused("expired")
        metrics.request("tools/call", "refused")
    finally:
        tracing.use_provider(None)
    for family in ("soklet_state_opens", "soklet_state_seals", "soklet_admission_refusals", "soklet_mcp_requests"):
        counted = _exemplars(metrics, family)
        assert counted, family
        assert all(exemplar is None for exemplar in counted.values()), family
    body, _ = metrics.render(PROMETHEUS_ACCEPT)
    assert b"trace_id" not in body


def test_the_scrape_chooses_the_format(traced: None) -> None:
    metrics = ServerMetrics(instance="a")
    with tracing.span("request"):
        ids = tracing.current_trace_ids()
        assert ids is not None
        _refused_open(metrics)
    body, content_type = metrics.render(PROMETHEUS_ACCEPT.encode("ascii"))
    assert content_type == OPENMETRICS_CONTENT_TYPE
    assert body.endswith(b"# EOF\n")
    assert f'# {{trace_id="{ids.trace_id}"}}'.encode() in body
    for accept in (None, b"", "text/plain", "*/*", "application/openmetrics-text;q=0", "x" * 5000):
        classic, classic_type = metrics.render(accept)
        assert classic_type == METRICS_CONTENT_TYPE
        assert b"trace_id" not in classic
        assert b"# EOF" not in classic


def test_the_content_type_never_echoes_the_accept_value() -> None:
    _, content_type = exposition_for("application/openmetrics-text; version=9.9.9; escaping=<evil>")
    assert content_type == OPENMETRICS_CONTENT_TYPE
    late = "text/plain," * 200 + "application/openmetrics-text"  # past the part of the value that is read
    assert exposition_for(late)[1] == METRICS_CONTENT_TYPE
