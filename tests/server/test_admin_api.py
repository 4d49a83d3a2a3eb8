"""The admin listener of a real ``soklet serve``: snapshot, auth, stage/activate/remove persisted, reload, refusals."""

from __future__ import annotations

import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from soklet_core.files import MAX_INSTANCE_NAME_CHARS
from soklet_core.keys import ProtectionKey
from soklet_core.mcp.server.ops._live_keyring import DEFAULT_POLL_INTERVAL_SECONDS
from soklet_core.protection import EnvelopeHeader
from tests.server.support import FORM_CAPS, Client
from tests.server.support_admin import (
    LABEL,
    TOKEN,
    Instance,
    file_roles,
    material_text,
    role_of,
    self_signed_certificate,
    write_keyring,
)

pytestmark = pytest.mark.slow

SNAPSHOT_MEMBERS = {
    "instance",
    "profile",
    "generation",
    "active",
    "verification",
    "keys",
    "max_state_lifetime_ms",
    "max_state_rounds",
    "fingerprint",
    "process_id",
}
KEY_MEMBERS = {"id", "role", "check_value", "created", "last_sealed_ms", "last_opened_ms", "reservations"}


@pytest.fixture
def keys() -> tuple[ProtectionKey, ProtectionKey]:
    return ProtectionKey.generate("k1"), ProtectionKey.generate("k2")


@pytest.fixture
def instance(tmp_path: Path, keys: tuple[ProtectionKey, ProtectionKey]) -> Iterator[Instance]:
    write_keyring(tmp_path / "keys.toml", keys[0])
    served = Instance(tmp_path, "--instance", "web-1", "--state-lifetime", "2m", "--state-rounds", "4")
    yield served
    served.stop()


def _sealing_key_id(instance: Instance) -> str:
    client = Client(instance.mcp_base)
    try:
        first = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
        assert first.state is not None
        return EnvelopeHeader.read(first.state).key_id
    finally:
        client.close()


def test_snapshot_has_exactly_the_documented_members(instance: Instance) -> None:
    assert instance.facts["admin_port"] > 0
    assert instance.facts["admin_port"] != instance.facts["port"]
    _sealing_key_id(instance)  # one seal, so last use is filled in
    snapshot = instance.snapshot()
    assert set(snapshot) == SNAPSHOT_MEMBERS
    assert snapshot["instance"] == "web-1"
    assert len(snapshot["process_id"]) == 22
    assert snapshot["profile"] == "soklet-mcp-protection-v1"
    assert (snapshot["generation"], snapshot["active"], snapshot["verification"]) == (0, "k1", [])
    assert snapshot["max_state_lifetime_ms"] == 120_000
    assert snapshot["max_state_rounds"] == 4
    assert snapshot["fingerprint"]["version"] == 2
    assert snapshot["fingerprint"] == instance.facts["fingerprint"]
    [key] = snapshot["keys"]
    assert set(key) == KEY_MEMBERS
    assert key["role"] == "active"
    assert key["created"].endswith("+00:00")
    assert isinstance(key["last_sealed_ms"], int)
    assert key["last_opened_ms"] is None
    assert key["reservations"] == 0
    # The probes answer without a token and say a status only: instance and generation are the snapshot's.
    assert instance.request("GET", "/v1/health", token=None).json() == {"status": "ok"}
    assert instance.request("GET", "/v1/ready", token=None).json() == {"status": "ready"}
    metrics = instance.request("GET", "/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    assert "soklet_keyring_generation 0.0" in metrics.text


def test_missing_or_wrong_token_is_401_and_changes_nothing(
    instance: Instance, keys: tuple[ProtectionKey, ProtectionKey]
) -> None:
    before = instance.keyring.read_bytes()
    stage = {"id": "k2", "material": material_text(keys[1])}
    attempts = [
        ("GET", "/v1/keyring", None),
        ("GET", "/metrics", None),
        ("POST", "/v1/keyring/stage", stage),
        ("POST", "/v1/keyring/activate", {"id": "k1"}),
        ("POST", "/v1/keyring/reload", None),
        ("GET", "/no/such/path", None),
    ]
    for token in (None, "wrong-token-0123456789", TOKEN[:-1], TOKEN + "x", f"{LABEL}:{TOKEN}"):
        for method, path, body in attempts:
            reply = instance.request(method, path, body, token=token)
            assert reply.status_code == 401, (method, path)
            assert reply.headers["www-authenticate"] == "Bearer"
            assert reply.json() == {"error": "unauthorized"}
    basic = instance.http.get(instance.admin_url + "/v1/keyring", headers={"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401
    assert instance.snapshot()["generation"] == 0
    assert instance.keyring.read_bytes() == before
    log = instance.stop()
    assert TOKEN not in log
    assert TOKEN not in instance.stdout_text


def test_stage_activate_remove_persist_and_the_mcp_port_seals_with_the_new_key(
    instance: Instance, keys: tuple[ProtectionKey, ProtectionKey]
) -> None:
    old, new = keys
    assert _sealing_key_id(instance) == "k1"
    staged = instance.request("POST", "/v1/keyring/stage", {"id": "k2", "material": material_text(new)})
    assert staged.status_code == 200, staged.text
    assert (staged.json()["generation"], staged.json()["verification"]) == (1, ["k2"])
    assert file_roles(instance.keyring) == {"k1": "active", "k2": "verification"}
    again = instance.request("POST", "/v1/keyring/stage", {"id": "k2", "material": material_text(new)})
    assert again.json()["generation"] == 1  # an identical re-stage changes nothing
    activated = instance.request("POST", "/v1/keyring/activate", {"id": "k2"})
    assert activated.status_code == 200
    assert (activated.json()["active"], activated.json()["generation"]) == ("k2", 2)
    assert file_roles(instance.keyring) == {"k1": "verification", "k2": "active"}
    assert _sealing_key_id(instance) == "k2"
    refused = instance.request("POST", "/v1/keyring/remove", {"id": "k2"})
    assert (refused.status_code, refused.json()) == (409, {"error": "active-key-removal"})
    removed = instance.request("POST", "/v1/keyring/remove", {"id": "k1"})
    assert removed.status_code == 200
    assert [key["id"] for key in removed.json()["keys"]] == ["k2"]
    assert file_roles(instance.keyring) == {"k2": "active"}
    assert instance.request("POST", "/v1/keyring/remove", {"id": "k1"}).status_code == 404
    log = instance.stop()
    audit = [line for line in log.splitlines() if "soklet.admin.audit" in line]
    assert len(audit) == 3
    assert "actor=ops action=activate key=k2 generation=2 fingerprint=v2:" in audit[1]
    for secret in (material_text(old), material_text(new), TOKEN):
        assert secret not in log
        assert secret not in instance.stdout_text


def test_refusals_are_bounded_and_change_nothing(instance: Instance, keys: tuple[ProtectionKey, ProtectionKey]) -> None:
    before = instance.keyring.read_bytes()
    other_bytes = ProtectionKey.generate("k1")
    cases: list[tuple[str, object, int, str]] = [
        ("/v1/keyring/activate", {"id": "nope"}, 404, "unknown-key"),
        ("/v1/keyring/remove", {"id": "nope"}, 404, "unknown-key"),
        ("/v1/keyring/remove", {"id": "k1"}, 409, "active-key-removal"),
        ("/v1/keyring/stage", {"id": "k1", "material": material_text(other_bytes)}, 409, "conflicting-material"),
        ("/v1/keyring/stage", {"id": "k3", "material": "not base64!"}, 400, "malformed-material"),
        ("/v1/keyring/stage", {"id": "k3", "material": material_text(keys[1])[:20]}, 400, "material-too-short"),
        ("/v1/keyring/stage", {"id": "bad id", "material": material_text(keys[1])}, 400, "invalid-key-id"),
        ("/v1/keyring/stage", {"id": "k3"}, 400, "malformed-body"),
        ("/v1/keyring/activate", {"id": "k1", "extra": 1}, 400, "malformed-body"),
        ("/v1/keyring/activate", {"id": 7}, 400, "malformed-body"),
        ("/v1/keyring/activate", [], 400, "malformed-body"),
        ("/v1/keyring/activate", b'{"id": "k1",}', 400, "malformed-json"),
        ("/v1/keyring/activate", b'{"id": "k1", "id": "k1"}', 400, "malformed-json"),
        ("/v1/keyring/reload", b'{"x": 1}', 400, "malformed-body"),
    ]
    for path, body, status, reason in cases:
        reply = instance.request("POST", path, body)
        assert (reply.status_code, reply.json()) == (status, {"error": reason}), (path, body)
    assert instance.request("GET", "/v1/keyring/stage").status_code == 405
    assert instance.request("POST", "/v1/keyring").headers["allow"] == "GET"
    assert instance.request("GET", "/v2/keyring").status_code == 404
    assert instance.snapshot()["generation"] == 0
    assert instance.keyring.read_bytes() == before


def test_sighup_refuses_a_bad_file_then_applies_a_good_one(
    instance: Instance, keys: tuple[ProtectionKey, ProtectionKey]
) -> None:
    good = instance.keyring.read_bytes()
    instance.keyring.write_bytes(b'format = "soklet-keyring/v1"\n[[keys]\nid = broken\n')
    instance.hangup()
    instance.wait_for(lambda: "keyring reload (sighup) refused" in instance.log_text())
    snapshot = instance.snapshot()
    assert (snapshot["generation"], snapshot["active"]) == (0, "k1")
    # The running keyring stays, and the instance is held out of traffic while its file is refused.
    ready = instance.request("GET", "/v1/ready", token=None)
    assert (ready.status_code, ready.json()) == (503, {"status": "not-ready", "reason": "keyring-file-refused"})
    refusals = instance.log_text().count("refused")
    time.sleep(2 * DEFAULT_POLL_INTERVAL_SECONDS + 0.5)
    assert instance.log_text().count("refused") == refusals  # logged once per bad file, not once per poll
    instance.keyring.write_bytes(good)
    write_keyring(instance.keyring, keys[1], keys[0])
    instance.hangup()
    instance.wait_for(lambda: instance.snapshot()["active"] == "k2")
    assert instance.snapshot()["generation"] == 1
    assert instance.request("GET", "/v1/ready", token=None).json() == {"status": "ready"}
    assert _sealing_key_id(instance) == "k2"
    assert "actor=sighup action=reload" in instance.log_text() or "actor=file-watch action=reload" in (
        instance.log_text()
    )


def test_a_file_edit_is_picked_up_by_polling(instance: Instance, keys: tuple[ProtectionKey, ProtectionKey]) -> None:
    write_keyring(instance.keyring, keys[0], keys[1])
    instance.wait_for(lambda: instance.snapshot()["verification"] == ["k2"])
    assert role_of(instance.snapshot(), "k2") == "verification"
    assert "actor=file-watch action=reload" in instance.log_text()


def test_fingerprint_version_1_mode(tmp_path: Path, keys: tuple[ProtectionKey, ProtectionKey]) -> None:
    write_keyring(tmp_path / "keys.toml", keys[0])
    served = Instance(tmp_path, "--fingerprint-version", "1", "--instance", "n" * MAX_INSTANCE_NAME_CHARS)
    try:
        assert served.snapshot()["instance"] == "n" * MAX_INSTANCE_NAME_CHARS
        assert served.snapshot()["fingerprint"]["version"] == 1
        assert served.facts["fingerprint"]["version"] == 1
    finally:
        served.stop()


def _serve_fails(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "soklet_cli", "serve", "--dev-key", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_start_refusals_exit_2(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    no_token = _serve_fails("--port", "0", "--admin-port", "0")
    assert no_token.returncode == 2
    assert "needs a token source" in no_token.stderr
    same_port = _serve_fails("--port", "18765", "--admin-port", "18765", "--admin-token-file", str(token_file))
    assert same_port.returncode == 2
    exposed = _serve_fails("--port", "0", "--admin-port", "0", "--admin-host", "0.0.0.0", "--admin-token-env", "T")
    assert exposed.returncode == 2
    assert "TLS" in exposed.stderr
    long_name = _serve_fails("--port", "0", "--instance", "n" * (MAX_INSTANCE_NAME_CHARS + 1))
    assert long_name.returncode == 2
    bad_env = _serve_fails("--port", "0", "--admin-port", "0", "--admin-token-env", "NOT-A-NAME")
    assert bad_env.returncode == 2
    assert "environment variable name" in bad_env.stderr
    orphan = _serve_fails("--port", "0", "--admin-token-file", str(token_file))
    assert orphan.returncode == 2
    short = tmp_path / "short"
    short.write_text("ops:abc\n")
    short.chmod(0o600)
    bad = _serve_fails("--port", "0", "--admin-port", "0", "--admin-token-file", str(short))
    assert bad.returncode == 2
    assert "abc" not in bad.stderr
    token_file.chmod(0o644)
    loose = _serve_fails("--port", "0", "--admin-port", "0", "--admin-token-file", str(token_file))
    assert loose.returncode == 3  # an insecure token file is a file problem, as for keyring files
    assert TOKEN not in loose.stderr + loose.stdout


def test_tls_admin_listener_and_a_clean_stop(tmp_path: Path, keys: tuple[ProtectionKey, ProtectionKey]) -> None:
    write_keyring(tmp_path / "keys.toml", keys[0])
    cert, key = self_signed_certificate(tmp_path)
    served = Instance(tmp_path, "--admin-tls-cert", str(cert), "--admin-tls-key", str(key))
    try:
        assert served.admin_url.startswith("https://127.0.0.1:")
        with httpx.Client(verify=ssl.create_default_context(cafile=str(cert)), timeout=20) as client:
            reply = client.get(served.admin_url + "/v1/keyring", headers={"Authorization": f"Bearer {TOKEN}"})
        assert reply.status_code == 200
        assert reply.json()["active"] == "k1"
        with pytest.raises(httpx.HTTPError):
            httpx.get(served.admin_url.replace("https", "http") + "/v1/health", timeout=5)
    finally:
        served.stop()
    assert served.process.returncode == 0  # SIGTERM stops both listeners cleanly
    cert.write_text("not a certificate\n")
    broken = _serve_fails(
        "--port", "0", "--admin-port", "0", "--admin-token-file", str(served.token_file),
        "--admin-tls-cert", str(cert), "--admin-tls-key", str(key),
    )  # fmt: skip
    assert broken.returncode == 3
    assert "admin TLS" in broken.stderr
