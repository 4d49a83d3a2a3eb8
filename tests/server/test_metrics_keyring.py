"""The keyring and readiness metrics: ``soklet_key_info``, ``soklet_keyring_file_refused``, ``soklet_ready``,
``soklet_not_ready``, ``soklet_fleet_generation``, and open refusals of a retired key id (``retired-key``) told
apart from ids never held (``unknown-key``). In process with real keyrings, then through a real ``soklet serve``
whose key is removed by the admin API while a state sealed under it is still out."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from soklet_core.keys import KeyringManager, KeyringSnapshot, ProtectionKey, ProtectionKeyring
from soklet_core.mcp.server.ops._metrics import MAX_REMEMBERED_REMOVED_KEYS, RETIRED_KEY_REASON, ServerMetrics
from soklet_core.mcp.server.ops._readiness import NotReady, Readiness
from soklet_core.protection import EnvelopeProtector
from tests.fleet.support_served import call_tool
from tests.server.support_admin import Instance, material_text, write_keyring

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parsed(metrics: ServerMetrics) -> Samples:
    body, _ = metrics.render()
    return parse(body.decode())


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def get(samples: Samples, metric: str, **labels: str) -> float | None:
    return samples.get((metric, frozenset(labels.items())))


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


def snapshot(*ids: str) -> KeyringSnapshot:
    """A snapshot of a keyring holding ``ids`` (the first one active)."""
    keys = [ProtectionKey.generate(key_id) for key_id in ids]
    return KeyringSnapshot.of(ProtectionKeyring(keys[0], keys[1:]))


def token_under(key_id: str) -> str:
    """A well-formed token sealed under a key named ``key_id`` (its bytes known to nobody else)."""
    manager = KeyringManager(ProtectionKeyring(ProtectionKey.generate(key_id)))
    return EnvelopeProtector(manager).seal(b"{}")


def refused(samples: Samples, reason: str) -> float:
    return get(samples, "soklet_state_opens_total", outcome="refused", reason=reason) or 0.0


def test_key_info_names_each_key_held_and_its_role() -> None:
    metrics = ServerMetrics(instance="t")
    metrics.observe_keyring(snapshot("k2", "k1", "k0"))
    samples = parsed(metrics)
    info = {dict(labels)["key_id"]: dict(labels)["role"] for name, labels in samples if name == "soklet_key_info"}
    assert info == {"k2": "active", "k1": "verification", "k0": "verification"}
    metrics.observe_keyring(snapshot("k3", "k2"))
    info = {
        dict(labels)["key_id"]: dict(labels)["role"] for name, labels in parsed(metrics) if name == "soklet_key_info"
    }
    assert info == {"k3": "active", "k2": "verification"}


def test_an_unknown_key_refusal_of_a_removed_id_is_counted_as_retired() -> None:
    metrics = ServerMetrics(instance="t")
    metrics.observe_keyring(snapshot("k2", "k1"))
    metrics.observe_keyring(snapshot("k2"))
    assert metrics.removed_key_ids == {"k1"}
    metrics.open("refused", "unknown-key", token=token_under("k1"))
    metrics.open("refused", "unknown-key", token=token_under("never-held"))
    metrics.open("refused", "unknown-key", token="not a token")
    metrics.open("refused", "unknown-key")  # no token given: as before
    samples = parsed(metrics)
    assert refused(samples, RETIRED_KEY_REASON) == 1
    assert refused(samples, "unknown-key") == 3


def test_a_removed_id_staged_again_is_no_longer_retired() -> None:
    metrics = ServerMetrics(instance="t")
    metrics.observe_keyring(snapshot("k2", "k1"))
    metrics.observe_keyring(snapshot("k2"))
    metrics.observe_keyring(snapshot("k2", "k1"))
    assert metrics.removed_key_ids == frozenset()
    metrics.open("refused", "unknown-key", token=token_under("k1"))
    assert refused(parsed(metrics), "unknown-key") == 1


def test_the_memory_of_removed_ids_is_bounded_and_forgets_the_oldest() -> None:
    metrics = ServerMetrics(instance="t")
    count = MAX_REMEMBERED_REMOVED_KEYS + 1
    for index in range(count):
        metrics.observe_keyring(snapshot("active", f"old-{index:03d}"))
        metrics.observe_keyring(snapshot("active"))
        # Up to the limit every removed id is remembered.
        assert len(metrics.removed_key_ids) == min(index + 1, MAX_REMEMBERED_REMOVED_KEYS)
    assert "old-000" not in metrics.removed_key_ids  # the limit + 1st removal forgot the oldest
    assert f"old-{count - 1:03d}" in metrics.removed_key_ids
    metrics.open("refused", "unknown-key", token=token_under("old-000"))
    metrics.open("refused", "unknown-key", token=token_under("old-001"))
    samples = parsed(metrics)
    assert (refused(samples, "unknown-key"), refused(samples, RETIRED_KEY_REASON)) == (1, 1)


def test_readiness_is_published_once_watched() -> None:
    metrics = ServerMetrics(instance="t")
    assert {"soklet_ready", "soklet_not_ready", "soklet_keyring_file_refused"}.isdisjoint(names(parsed(metrics)))
    readiness = Readiness()
    metrics.watch_readiness(readiness)
    samples = parsed(metrics)
    assert get(samples, "soklet_ready") == 1
    assert get(samples, "soklet_keyring_file_refused") == 0
    assert {dict(labels)["reason"] for name, labels in samples if name == "soklet_not_ready"} == {
        reason.value for reason in NotReady
    }
    readiness.set(NotReady.KEYRING_FILE_REFUSED)
    samples = parsed(metrics)
    assert get(samples, "soklet_ready") == 0
    assert get(samples, "soklet_keyring_file_refused") == 1
    assert get(samples, "soklet_not_ready", reason="keyring-file-refused") == 1
    assert get(samples, "soklet_not_ready", reason="generation-behind") == 0
    readiness.clear(NotReady.KEYRING_FILE_REFUSED)
    readiness.set(NotReady.GENERATION_BEHIND)
    samples = parsed(metrics)
    assert (get(samples, "soklet_ready"), get(samples, "soklet_keyring_file_refused")) == (0, 0)


def test_the_fleet_generation_is_absent_until_a_store_mode_server_sets_it() -> None:
    metrics = ServerMetrics(instance="t")
    assert "soklet_fleet_generation" not in names(parsed(metrics))
    metrics.fleet_generation(0)
    assert get(parsed(metrics), "soklet_fleet_generation") == 0
    metrics.fleet_generation(41)
    assert get(parsed(metrics), "soklet_fleet_generation") == 41
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="generation"):
            metrics.fleet_generation(bad)  # type: ignore[arg-type]


def _metrics(instance: Instance) -> Samples:
    return parse(instance.request("GET", "/metrics").text)


@pytest.mark.slow
def test_a_real_server_counts_a_token_of_a_removed_key_as_retired(tmp_path: Path) -> None:
    k1, k2 = ProtectionKey.generate("k1"), ProtectionKey.generate("k2")
    write_keyring(tmp_path / "keys.toml", k1)
    served = Instance(tmp_path, "--store", f"sqlite:///{tmp_path / 'store.db'}")
    http = httpx.Client(timeout=30)
    try:
        url = served.facts["url"]
        samples = _metrics(served)
        assert get(samples, "soklet_key_info", key_id="k1", role="active") == 1
        first = call_tool(http, url, 1, {"arguments": {}})
        sealed_under_k1 = first["result"]["requestState"]
        # Rotate k1 out through the admin API: k2 staged, activated, k1 removed.
        assert served.request("POST", "/v1/keyring/stage", {"id": "k2", "material": material_text(k2)}).is_success
        assert served.request("POST", "/v1/keyring/activate", {"id": "k2"}).is_success
        samples = _metrics(served)
        assert get(samples, "soklet_key_info", key_id="k2", role="active") == 1
        assert get(samples, "soklet_key_info", key_id="k1", role="verification") == 1
        assert served.request("POST", "/v1/keyring/remove", {"id": "k1"}).is_success
        # No scrape between the removal and the refusal: the live keyring's change reached the metrics itself.
        retry = {
            "arguments": {},
            "inputResponses": {"approval": {"action": "accept", "content": {}}},
            "requestState": sealed_under_k1,
        }
        assert "error" in call_tool(http, url, 2, retry)
        forged = {**retry, "requestState": token_under("k9")}
        assert "error" in call_tool(http, url, 3, forged)
        samples = _metrics(served)
        assert refused(samples, RETIRED_KEY_REASON) == 1
        assert refused(samples, "unknown-key") == 1
        assert get(samples, "soklet_key_info", key_id="k1", role="verification") is None
        assert get(samples, "soklet_keyring_file_refused") == 0
        assert get(samples, "soklet_ready") == 1
        assert "soklet_fleet_generation" not in names(samples)  # file mode
    finally:
        http.close()
        served.stop()
