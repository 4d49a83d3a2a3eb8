"""ServerMetrics: every method, bounded labels, its own registry, secret-free keyring metrics."""

from __future__ import annotations

from pathlib import Path

import prometheus_client
from prometheus_client.parser import text_string_to_metric_families

from soklet_core import __version__
from soklet_core.keys import KeyringSnapshot, ProtectionKey, ProtectionKeyring
from soklet_core.keys.snapshot import KeyUse
from soklet_core.mcp.server.ops._metrics import (
    METRICS_CONTENT_TYPE,
    REQUEST_OUTCOMES,
    ServerMetrics,
    request_outcome,
)

ACTIVE = ProtectionKey.generate("k-active")
STAGED = ProtectionKey.generate("k-staged")


def samples(metrics: ServerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    body, _ = metrics.render()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def value(metrics: ServerMetrics, metric: str, **labels: str) -> float | None:
    return samples(metrics).get((metric, frozenset(labels.items())))


def test_render_is_prometheus_text_with_server_info() -> None:
    metrics = ServerMetrics(instance="eu-1")
    body, content_type = metrics.render()
    assert content_type == METRICS_CONTENT_TYPE
    assert content_type.startswith("text/plain; version=0.0.4")
    assert value(metrics, "soklet_server_info", name="eu-1", version=__version__) == 1
    assert body.endswith(b"\n")


def test_each_server_has_its_own_registry_and_never_the_global_one() -> None:
    first, second = ServerMetrics(instance="a"), ServerMetrics(instance="b")
    first.request("tools/call", "ok")
    assert value(first, "soklet_mcp_requests_total", method="tools/call", outcome="ok") == 1
    assert value(second, "soklet_mcp_requests_total", method="tools/call", outcome="ok") is None
    assert b"soklet_" not in prometheus_client.generate_latest(prometheus_client.REGISTRY)


def test_request_counts_by_method_and_outcome_and_bounds_both() -> None:
    metrics = ServerMetrics(instance="a")
    for _ in range(3):
        metrics.request("tools/call", "ok")
    metrics.request("tools/list", "refused")
    metrics.request(None, "refused")
    metrics.request("x/<script>", "not-an-outcome")
    assert value(metrics, "soklet_mcp_requests_total", method="tools/call", outcome="ok") == 3
    assert value(metrics, "soklet_mcp_requests_total", method="tools/list", outcome="refused") == 1
    assert value(metrics, "soklet_mcp_requests_total", method="other", outcome="refused") == 1
    assert value(metrics, "soklet_mcp_requests_total", method="other", outcome="other") == 1
    assert b"script" not in metrics.render()[0]
    assert b"not-an-outcome" not in metrics.render()[0]


def test_request_outcome_maps_status_code_and_reason_to_the_closed_set() -> None:
    cases = {
        (200, None, None): "ok",
        (200, -32603, "handler-failed"): "error",
        (202, None, "notification"): "accepted",
        (400, -32602, "state-expired"): "state_refused",
        (404, -32602, "state-unknown-key"): "state_refused",
        (400, -32602, "handle-rejected"): "state_refused",
        (401, -32600, "admission-missing"): "unauthorized",
        (400, -32602, "params-not-object"): "refused",
        (413, -32600, "body-too-large"): "refused",
        (499, None, "client-disconnected"): "disconnected",
        (503, -32603, "busy"): "unavailable",
        (500, None, None): "server_error",
        (302, None, None): "other",
    }
    for (status, code, reason), expected in cases.items():
        assert request_outcome(status, code, reason) == expected, (status, code, reason)
        assert expected in REQUEST_OUTCOMES | {"other"}


def test_input_required_counts_by_method_and_bounds_it() -> None:
    metrics = ServerMetrics(instance="a")
    metrics.input_required("tools/call")
    metrics.input_required("tools/call")
    metrics.input_required("prompts/get")
    metrics.input_required("evil\nmethod")
    assert value(metrics, "soklet_input_required_total", method="tools/call") == 2
    assert value(metrics, "soklet_input_required_total", method="prompts/get") == 1
    assert value(metrics, "soklet_input_required_total", method="other") == 1
    assert b"evil" not in metrics.render()[0]


def test_seal_and_open_count_by_outcome_and_reason_from_the_protection_enum() -> None:
    metrics = ServerMetrics(instance="a")
    assert value(metrics, "soklet_state_seals_total", outcome="sealed", reason="none") == 0
    assert value(metrics, "soklet_state_opens_total", outcome="opened", reason="none") == 0
    metrics.seal("sealed")
    metrics.seal("refused", "too-large")
    metrics.seal("refused", "last-round")
    metrics.open("opened")
    metrics.open("opened")
    metrics.open("refused", "authentication")
    metrics.open("refused", "raw attacker text")
    metrics.open("weird", None)
    assert value(metrics, "soklet_state_seals_total", outcome="sealed", reason="none") == 1
    assert value(metrics, "soklet_state_seals_total", outcome="refused", reason="too-large") == 1
    assert value(metrics, "soklet_state_seals_total", outcome="refused", reason="last-round") == 1
    assert value(metrics, "soklet_state_opens_total", outcome="opened", reason="none") == 2
    assert value(metrics, "soklet_state_opens_total", outcome="refused", reason="authentication") == 1
    assert value(metrics, "soklet_state_opens_total", outcome="refused", reason="other") == 1
    assert value(metrics, "soklet_state_opens_total", outcome="other", reason="none") == 1
    assert b"attacker" not in metrics.render()[0]


def test_observe_keyring_publishes_generation_fingerprint_and_last_use() -> None:
    metrics = ServerMetrics(instance="a")
    keyring = ProtectionKeyring(ACTIVE).with_staged(STAGED)
    snapshot = KeyringSnapshot.of(keyring, 7)
    metrics.observe_keyring(
        snapshot,
        last_sealed_ms={"k-active": 1_700_000_000_500, "k-staged": None, "not-in-keyring": 5},
        last_opened_ms={"k-active": 1_700_000_001_000, "k-staged": 1_700_000_002_000},
    )
    fingerprint = snapshot.fingerprint
    assert value(metrics, "soklet_keyring_generation") == 7
    info = {"version": "2", "profile": fingerprint.profile, "value": fingerprint.value}
    assert value(metrics, "soklet_keyring_fingerprint_info", **info) == 1
    assert value(metrics, "soklet_key_last_sealed_timestamp_seconds", key_id="k-active") == 1_700_000_000.5
    assert value(metrics, "soklet_key_last_sealed_timestamp_seconds", key_id="k-staged") is None
    assert value(metrics, "soklet_key_last_opened_timestamp_seconds", key_id="k-staged") == 1_700_000_002
    body = metrics.render()[0]
    assert b"not-in-keyring" not in body
    for key in (ACTIVE, STAGED):
        assert key.check_value_text.encode() not in body


def test_observe_keyring_replaces_the_previous_view() -> None:
    metrics = ServerMetrics(instance="a")
    before = ProtectionKeyring(ACTIVE).with_staged(STAGED)
    metrics.observe_keyring(KeyringSnapshot.of(before, 1), last_opened_ms={"k-active": 1000, "k-staged": 2000})
    after = before.with_activated("k-staged").without("k-active")
    metrics.observe_keyring(KeyringSnapshot.of(after, 3), last_opened_ms={"k-staged": 4000})
    found = samples(metrics)
    fingerprints = [labels for (name, labels) in found if name == "soklet_keyring_fingerprint_info"]
    assert fingerprints == [
        frozenset({("version", "2"), ("profile", after.fingerprint().profile), ("value", after.fingerprint().value)})
    ]
    assert value(metrics, "soklet_keyring_generation") == 3
    assert value(metrics, "soklet_key_last_opened_timestamp_seconds", key_id="k-active") is None
    assert value(metrics, "soklet_key_last_opened_timestamp_seconds", key_id="k-staged") == 4


def test_observe_keyring_with_no_use_maps_has_no_last_use_series() -> None:
    metrics = ServerMetrics(instance="a")
    metrics.observe_keyring(KeyringSnapshot.of(ProtectionKeyring(ACTIVE), 0))
    names = {name for name, _ in samples(metrics)}
    assert "soklet_key_last_sealed_timestamp_seconds" not in names
    assert "soklet_keyring_fingerprint_info" in names


def test_repr_names_nothing() -> None:
    assert repr(ServerMetrics(instance="secret-ish-name")) == "ServerMetrics()"


def test_watch_keyring_reads_the_source_at_every_render() -> None:
    metrics = ServerMetrics(instance="a")
    keyrings = [ProtectionKeyring(ACTIVE)]
    metrics.watch_keyring(lambda: KeyringSnapshot.of(keyrings[-1], len(keyrings) - 1))
    assert value(metrics, "soklet_keyring_generation") == 0
    keyrings.append(keyrings[-1].with_staged(STAGED))
    assert value(metrics, "soklet_keyring_generation") == 1
    fingerprint = keyrings[-1].fingerprint()
    info = {"version": "2", "profile": fingerprint.profile, "value": fingerprint.value}
    assert value(metrics, "soklet_keyring_fingerprint_info", **info) == 1


def test_every_metric_and_outcome_is_documented_in_fleet_md() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "fleet.md").read_text()
    metrics = ServerMetrics(instance="a")
    metrics.observe_keyring(
        KeyringSnapshot.of(ProtectionKeyring(ACTIVE), 0),
        last_sealed_ms={"k-active": 1},
        last_opened_ms={"k-active": 1},
    )
    families = {family.name for family in text_string_to_metric_families(metrics.render()[0].decode())}
    for family in families:
        if family.endswith("_created"):
            continue
        suffix = "_total" if f"`{family}_total`" in doc else ""
        assert f"`{family}{suffix}`" in doc, family
    for outcome in REQUEST_OUTCOMES:
        assert f"`{outcome}`" in doc, outcome


def test_observe_keyring_reads_last_use_from_the_snapshot_when_not_given() -> None:
    metrics = ServerMetrics(instance="a")
    keyring = ProtectionKeyring(ACTIVE).with_staged(STAGED)
    uses = (KeyUse("k-active", 3_000, 4_000), KeyUse("k-staged", None, None), KeyUse("gone", 1, 1))
    metrics.observe_keyring(KeyringSnapshot.of(keyring, 2, key_use=uses))
    assert value(metrics, "soklet_key_last_sealed_timestamp_seconds", key_id="k-active") == 3
    assert value(metrics, "soklet_key_last_opened_timestamp_seconds", key_id="k-active") == 4
    assert value(metrics, "soklet_key_last_sealed_timestamp_seconds", key_id="k-staged") is None
    assert b"gone" not in metrics.render()[0]
    # Explicit mappings win over the snapshot's record.
    metrics.observe_keyring(KeyringSnapshot.of(keyring, 2, key_use=uses), last_sealed_ms={"k-staged": 9_000})
    assert value(metrics, "soklet_key_last_sealed_timestamp_seconds", key_id="k-staged") == 9
    assert value(metrics, "soklet_key_last_sealed_timestamp_seconds", key_id="k-active") is None
    assert value(metrics, "soklet_key_last_opened_timestamp_seconds", key_id="k-active") == 4
