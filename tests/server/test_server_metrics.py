"""A server built with ServerMetrics, served by real uvicorn on loopback: the rendered counters follow real flows."""

from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer
from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.protection import ProtectionConfig
from tests.server.support import FORM_CAPS, Client, Entries, build_test_registry, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("metrics-key"))
ACCEPT = {"action": "accept", "content": {}}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def build(metrics: ServerMetrics | None) -> McpServer:
    return McpServer(build_test_registry(Entries()), protection=ProtectionConfig(keyring=KEYRING), metrics=metrics)


def parsed(metrics: ServerMetrics) -> Samples:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def get(samples: Samples, metric: str, **labels: str) -> float | None:
    return samples.get((metric, frozenset(labels.items())))


def test_counters_follow_input_required_retry_tamper_and_seal_refusal() -> None:
    metrics = ServerMetrics(instance="metrics-test")
    server = build(metrics)
    assert server.metrics is metrics
    started = time.time()
    with running(server) as url:
        client = Client(url)
        first = client.call("probe", {}, capabilities=FORM_CAPS)
        assert first.result["resultType"] == "input_required"
        done = client.retry("probe", {}, first.state, {"done": ACCEPT}, capabilities=FORM_CAPS)
        assert done.text.startswith("done after 1 rounds")
        second = client.call("probe", {}, capabilities=FORM_CAPS)
        assert second.state is not None
        tampered = second.state[:-2] + ("A" if second.state[-2] != "A" else "B") + second.state[-1]
        refused = client.retry("probe", {}, tampered, {"done": ACCEPT}, capabilities=FORM_CAPS)
        assert refused.status == 400
        too_big = client.call("big.state", {"size": 60_000}, capabilities=FORM_CAPS)
        assert too_big.error["code"] == -32603
        # Raw client text that must never become a label value.
        unknown_tool = client.call("zz-unregistered-tool-name", {})
        assert unknown_tool.status == 400
        weird = client.post("zz/weird-method-string", {})
        assert weird.status == 404
        assert client.http.post(url + "/zz-not-the-path", content=b"{}").status_code == 404
        notification = client.http.post(
            client.url,
            content=json.dumps({"jsonrpc": "2.0", "method": "zz/notified"}).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
        )
        assert notification.status_code == 202
        client.close()
    finished = time.time()
    # build() made the metrics read the server's live keyring at every render.
    samples = parsed(metrics)
    requests = "soklet_mcp_requests_total"
    assert get(samples, requests, method="tools/call", outcome="ok") == 3  # first, done, second
    assert get(samples, requests, method="tools/call", outcome="state_refused") == 1
    assert get(samples, requests, method="tools/call", outcome="error") == 1
    assert get(samples, requests, method="tools/call", outcome="refused") == 1  # the unregistered tool
    assert get(samples, requests, method="other", outcome="refused") == 2  # weird method, wrong path
    assert get(samples, requests, method="other", outcome="accepted") == 1
    assert get(samples, "soklet_input_required_total", method="tools/call") == 2
    assert get(samples, "soklet_state_seals_total", outcome="sealed", reason="none") == 2
    assert get(samples, "soklet_state_seals_total", outcome="refused", reason="too-large") == 1
    assert get(samples, "soklet_state_opens_total", outcome="opened", reason="none") == 1
    assert get(samples, "soklet_state_opens_total", outcome="refused", reason="authentication") == 1
    assert get(samples, "soklet_keyring_generation") == 0
    fingerprint = KEYRING.fingerprint()
    info = {"version": "2", "profile": fingerprint.profile, "value": fingerprint.value}
    assert get(samples, "soklet_keyring_fingerprint_info", **info) == 1
    for use in ("sealed", "opened"):
        last = get(samples, f"soklet_key_last_{use}_timestamp_seconds", key_id="metrics-key")
        assert last is not None, use
        assert started - 0.01 <= last <= finished + 0.01, (use, last)  # epoch ms, truncated

    body = metrics.render()[0]
    for raw in (b"zz-unregistered", b"weird-method", b"zz-not-the-path", b"zz/notified", tampered.encode()[:20]):
        assert raw not in body
    assert KEYRING.active_key.check_value_text.encode() not in body


def test_a_server_without_metrics_serves_as_before() -> None:
    server = build(None)
    assert server.metrics is None
    assert server.engine.metrics is None
    with running(server) as url:
        client = Client(url)
        first = client.call("probe", {}, capabilities=FORM_CAPS)
        done = client.retry("probe", {}, first.state, {"done": ACCEPT}, capabilities=FORM_CAPS)
        assert done.text.startswith("done after 1 rounds")
        client.close()


def test_metrics_takes_only_server_metrics() -> None:
    with pytest.raises(TypeError, match="metrics takes a ServerMetrics"):
        McpServer(build_test_registry(Entries()), protection=ProtectionConfig(keyring=KEYRING), metrics="metrics")  # type: ignore[arg-type]


def test_render_follows_the_live_keyring_after_a_change() -> None:
    metrics = ServerMetrics(instance="metrics-test")
    server = build(metrics)
    manager = server.protection_keyring_manager
    assert manager is not None
    assert get(parsed(metrics), "soklet_keyring_generation") == 0
    manager.stage_verification_key(ProtectionKey.generate("metrics-next"))
    samples = parsed(metrics)
    assert get(samples, "soklet_keyring_generation") == 1
    fingerprint = manager.current().fingerprint()
    info = {"version": "2", "profile": fingerprint.profile, "value": fingerprint.value}
    assert get(samples, "soklet_keyring_fingerprint_info", **info) == 1
    assert len([name for name, _ in samples if name == "soklet_keyring_fingerprint_info"]) == 1
