"""Spans of MCP requests, in process: a real uvicorn on loopback, the OpenTelemetry SDK's in-memory exporter.

One SERVER span per request with its parent from ``_meta.traceparent`` (else the ``traceparent`` header), children
for admission, state open, handler and state seal; a refused retry's span carries the closed reason and nothing of
the token; malformed trace context starts a new trace and is never echoed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from soklet_apps import demo
from soklet_core import tracing
from soklet_core.files import read_keyring_file
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer
from soklet_core.mcp.server.ops import AdminApp, AdminTokens, LiveKeyring
from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.protection import ProtectionConfig
from tests.server.support import FORM_CAPS, Client, running
from tests.server.support_admin import LABEL, TOKEN, material_text, write_keyring
from tests.support_tracing import recorded_spans

KEY = ProtectionKey.generate("span-key")
ACCEPT = {"action": "accept", "content": {}}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    with recorded_spans() as recorded:
        yield recorded


@pytest.fixture(scope="module")
def base_url(exporter: InMemorySpanExporter) -> Iterator[str]:
    server = McpServer(demo.build_registry(), protection=ProtectionConfig(keyring=ProtectionKeyring(KEY)))
    with running(server) as url:
        yield url


@pytest.fixture
def client(base_url: str, exporter: InMemorySpanExporter) -> Iterator[Client]:
    exporter.clear()
    c = Client(base_url)
    yield c
    c.close()


def servers(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.kind is SpanKind.SERVER]


def children(exporter: InMemorySpanExporter, parent: ReadableSpan, name: str) -> list[ReadableSpan]:
    parent_id = parent.context.span_id
    return [
        s
        for s in exporter.get_finished_spans()
        if s.parent is not None and s.parent.span_id == parent_id and s.name == name
    ]


def everything(exporter: InMemorySpanExporter) -> str:
    """Every name, attribute, status description, event and link of every span, as one text."""
    parts: list[str] = []
    for span in exporter.get_finished_spans():
        parts.append(span.name)
        parts.append(json.dumps(dict(span.attributes or {}), sort_keys=True, default=str))
        parts.append(span.status.description or "")
        parts.extend(event.name + json.dumps(dict(event.attributes or {}), default=str) for event in span.events)
    return "\n".join(parts)


def test_two_rounds_share_the_clients_trace(client: Client, exporter: InMemorySpanExporter) -> None:
    meta = {"traceparent": TRACEPARENT}
    first = client.call("catalog.continue", {}, capabilities=FORM_CAPS, meta=meta)
    done = client.retry("catalog.continue", {}, first.state, {"approval": ACCEPT}, capabilities=FORM_CAPS, meta=meta)
    assert done.text == "Catalog access approved."
    round_one, round_two = servers(exporter)
    for span in (round_one, round_two):
        assert format(span.context.trace_id, "032x") == TRACE_ID
        assert span.parent is not None
        assert format(span.parent.span_id, "016x") == CLIENT_SPAN
        assert span.name == "tools/call catalog.continue"
        attributes = dict(span.attributes or {})
        assert attributes["mcp.method.name"] == "tools/call"
        assert attributes["gen_ai.tool.name"] == "catalog.continue"
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["mcp.protocol.version"] == "2026-07-28"
        assert attributes["soklet.era"] == "2026-07-28"
        assert attributes["network.transport"] == "tcp"
        assert attributes["http.response.status_code"] == 200
        assert len(children(exporter, span, "soklet.admission")) == 1
        assert len(children(exporter, span, "soklet.handler")) == 1
    assert dict(round_one.attributes or {})["soklet.outcome"] == "input_required"
    assert "soklet.request_state.round" not in dict(round_one.attributes or {})
    (seal,) = children(exporter, round_one, "soklet.state.seal")
    assert dict(seal.attributes or {}) == {
        "soklet.outcome": "sealed",
        "soklet.request_state.round": 1,
        "soklet.key_id": "span-key",
    }
    assert dict(round_two.attributes or {})["soklet.outcome"] == "complete"
    assert dict(round_two.attributes or {})["soklet.request_state.round"] == 1
    (opened,) = children(exporter, round_two, "soklet.state.open")
    assert dict(opened.attributes or {}) == {
        "soklet.outcome": "opened",
        "soklet.key_id": "span-key",
        "soklet.request_state.round": 1,
    }
    assert opened.status.status_code is StatusCode.UNSET
    (handler,) = children(exporter, round_two, "soklet.handler")
    assert dict(handler.attributes or {}) == {"soklet.operation": "catalog.continue", "soklet.outcome": "complete"}


def test_a_refused_retry_says_why_and_nothing_of_the_state(client: Client, exporter: InMemorySpanExporter) -> None:
    first = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
    state = first.state
    assert state is not None
    middle = len(state) // 2
    tampered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
    exporter.clear()
    refused = client.retry("catalog.continue", {}, tampered, {"approval": ACCEPT}, capabilities=FORM_CAPS)
    assert refused.status == 400
    (span,) = servers(exporter)
    attributes = dict(span.attributes or {})
    assert attributes["soklet.outcome"] == "refused"
    assert attributes["rpc.response.status_code"] == "-32602"
    assert span.status.status_code is StatusCode.ERROR
    (opened,) = children(exporter, span, "soklet.state.open")
    assert dict(opened.attributes or {})["soklet.reason"] == "authentication"
    assert "soklet.key_id" not in dict(opened.attributes or {})  # the id in a forged token is the client's text
    assert opened.status.status_code is StatusCode.ERROR
    assert not children(exporter, span, "soklet.handler")
    text = everything(exporter)
    for token in (state, tampered):
        for start in range(0, len(token) - 16, 8):
            assert token[start : start + 16] not in text
    material = material_text(KEY)
    assert material not in text
    assert material[:16] not in text


def test_a_binding_refusal_names_the_key_that_authenticated(client: Client, exporter: InMemorySpanExporter) -> None:
    first = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
    exporter.clear()
    # Another tool's params: the state authenticates, then its binding refuses it.
    refused = client.retry("catalog.continue", {"other": 1}, first.state, {"approval": ACCEPT}, capabilities=FORM_CAPS)
    assert refused.status == 400
    (span,) = servers(exporter)
    (opened,) = children(exporter, span, "soklet.state.open")
    assert dict(opened.attributes or {})["soklet.reason"] == "binding-params"
    assert dict(opened.attributes or {})["soklet.key_id"] == "span-key"


def test_the_header_is_the_parent_without_meta(client: Client, exporter: InMemorySpanExporter) -> None:
    client.call("catalog.continue", {}, capabilities=FORM_CAPS, headers={"traceparent": TRACEPARENT})
    (span,) = servers(exporter)
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None
    assert format(span.parent.span_id, "016x") == CLIENT_SPAN
    assert not span.links


def test_meta_wins_and_the_header_becomes_a_link(client: Client, exporter: InMemorySpanExporter) -> None:
    header = f"00-{'1' * 32}-{'2' * 16}-01"
    client.call(
        "catalog.continue",
        {},
        capabilities=FORM_CAPS,
        meta={"traceparent": TRACEPARENT},
        headers={"traceparent": header},
    )
    (span,) = servers(exporter)
    assert format(span.context.trace_id, "032x") == TRACE_ID
    (link,) = span.links
    assert format(link.context.trace_id, "032x") == "1" * 32
    assert format(link.context.span_id, "016x") == "2" * 16


@pytest.mark.parametrize(
    "value",
    [
        f"00-{TRACE_ID.upper()}-{CLIENT_SPAN}-01",  # upper-case hex
        f"00-{'0' * 32}-{CLIENT_SPAN}-01",  # all-zero trace id
        f"00-{TRACE_ID}-{'0' * 16}-01",  # all-zero span id
        f"ff-{TRACE_ID}-{CLIENT_SPAN}-01",  # the forbidden version
        f"00-{TRACE_ID}-{CLIENT_SPAN}-01-extra",  # version 00 is exactly 55 characters
        f"01-{TRACE_ID}-{CLIENT_SPAN}-01" + "-" + "x" * 73,  # 129 characters: over the bound
        "secret-looking-garbage-" + "z" * 40,
    ],
)
def test_malformed_trace_context_starts_a_new_trace(client: Client, exporter: InMemorySpanExporter, value: str) -> None:
    client.call("catalog.continue", {}, capabilities=FORM_CAPS, meta={"traceparent": value})
    (span,) = servers(exporter)
    assert span.parent is None
    assert format(span.context.trace_id, "032x") not in (TRACE_ID, "0" * 32)
    assert value not in everything(exporter)


def test_a_later_version_with_more_fields_is_read(client: Client, exporter: InMemorySpanExporter) -> None:
    value = f"01-{TRACE_ID}-{CLIENT_SPAN}-01" + "-" + "x" * 72  # 128 characters: at the bound
    assert len(value) == tracing.MAX_TRACEPARENT_CHARS
    client.call("catalog.continue", {}, capabilities=FORM_CAPS, meta={"traceparent": value})
    (span,) = servers(exporter)
    assert format(span.context.trace_id, "032x") == TRACE_ID


def test_unknown_method_is_not_named(client: Client, exporter: InMemorySpanExporter) -> None:
    reply = client.post("attacker/chosen-method-name", {})
    assert reply.status == 404
    (span,) = servers(exporter)
    assert span.name == "mcp"
    assert "attacker" not in everything(exporter)
    assert dict(span.attributes or {})["soklet.reason"] == "method-not-found"


def test_the_access_log_names_the_server_span(
    client: Client, exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="soklet.mcp.access"):
        client.call("catalog.continue", {}, capabilities=FORM_CAPS, meta={"traceparent": TRACEPARENT})
    (span,) = servers(exporter)
    records = [r for r in caplog.records if r.name == "soklet.mcp.access"]
    assert records
    ids = records[-1].soklet_trace
    assert ids == tracing.TraceIds(TRACE_ID, format(span.context.span_id, "016x"))


def test_nothing_is_made_with_tracing_off(base_url: str, exporter: InMemorySpanExporter) -> None:
    tracing.use_provider(None)
    try:
        assert tracing.tracer() is None
        exporter.clear()
        c = Client(base_url)
        first = c.call("catalog.continue", {}, capabilities=FORM_CAPS, meta={"traceparent": TRACEPARENT})
        c.retry("catalog.continue", {}, first.state, {"approval": ACCEPT}, capabilities=FORM_CAPS)
        c.close()
        assert exporter.get_finished_spans() == ()
    finally:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracing.use_provider(provider)


def test_a_refused_retry_is_an_exemplar_of_its_trace(exporter: InMemorySpanExporter, tmp_path: Path) -> None:
    # A real server counting into its metrics, scraped through the real admin app as Prometheus scrapes it.
    metrics = ServerMetrics(instance="spans")
    keyring = tmp_path / "keys.toml"
    write_keyring(keyring, KEY)
    document = read_keyring_file(keyring)
    server = McpServer(demo.build_registry(), protection=ProtectionConfig(keyring=document.keyring()), metrics=metrics)
    manager = server.protection_keyring_manager
    assert manager is not None
    admin = AdminApp(
        LiveKeyring(manager, keyring, document=document),
        AdminTokens.parse(f"{LABEL}:{TOKEN}"),
        instance="spans",
        lifetime_ms=60_000,
        rounds=3,
        metrics=metrics,
    )
    with running(server) as url:
        c = Client(url)
        first = c.call("catalog.continue", {}, capabilities=FORM_CAPS)
        assert first.state is not None
        exporter.clear()
        c.retry("catalog.continue", {}, first.state[:-4] + "AAAA", {"approval": ACCEPT}, capabilities=FORM_CAPS)
        c.close()
    (span,) = servers(exporter)
    trace_id = format(span.context.trace_id, "032x")

    async def scrape(accept: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=admin)
        async with httpx.AsyncClient(transport=transport, base_url="http://admin") as client:
            return await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}", "Accept": accept})

    scraped = asyncio.run(scrape("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"))
    assert scraped.headers["content-type"].startswith("application/openmetrics-text")
    exemplars = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.exemplar
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
        if sample.exemplar is not None
    }
    named = {key: exemplar.labels["trace_id"] for key, exemplar in exemplars.items()}
    assert trace_id in named.values()
    assert any(name.startswith("soklet_mcp_requests") and value == trace_id for (name, _), value in named.items())
    assert any("open" in name and value == trace_id for (name, _), value in named.items())
    plain = asyncio.run(scrape("text/plain"))
    assert plain.headers["content-type"].startswith("text/plain")
    assert trace_id not in plain.text
