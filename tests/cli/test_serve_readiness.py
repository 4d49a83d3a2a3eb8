"""``soklet serve --expect-fingerprint``: a real server whose keyring file differs from the expected fingerprint is
not ready (the MCP endpoint answers 503 with ``Retry-After``, ``/v1/ready`` says why) until a reload gives it that
keyring; the probes answer without a token. Real subprocesses, real files, loopback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from soklet_core.keys import ProtectionKey, ProtectionKeyring
from tests.server.support import FORM_CAPS, Client
from tests.server.support_admin import Instance, write_keyring

pytestmark = pytest.mark.slow


@pytest.fixture
def keys() -> tuple[ProtectionKey, ProtectionKey]:
    return ProtectionKey.generate("k1"), ProtectionKey.generate("k2")


@pytest.fixture
def instances() -> Iterator[list[Instance]]:
    started: list[Instance] = []
    yield started
    for instance in started:
        instance.stop()


def _store(folder: Path) -> tuple[str, str]:
    """A store of the test's own (never the data folder's, which other runs share)."""
    return "--store", f"sqlite://{folder / 'store' / 'soklet.db'}"


def _ready(instance: Instance) -> httpx.Response:
    return httpx.get(instance.admin_url + "/v1/ready", timeout=20)  # a probe carries no token


def test_a_keyring_other_than_the_expected_one_is_kept_out_of_traffic_until_a_reload_mends_it(
    tmp_path: Path, keys: tuple[ProtectionKey, ProtectionKey], instances: list[Instance]
) -> None:
    expected = ProtectionKeyring(keys[1], [keys[0]]).fingerprint()
    write_keyring(tmp_path / "keys.toml", keys[0])
    instance = Instance(tmp_path, "--expect-fingerprint", f"v2:{expected.value}", *_store(tmp_path))
    instances.append(instance)
    assert instance.facts["expect_fingerprint"] == expected.to_json()
    not_ready = _ready(instance)
    assert (not_ready.status_code, not_ready.json()) == (
        503,
        {"status": "not-ready", "reason": "fingerprint-mismatch"},
    )
    assert not_ready.headers["retry-after"] == "1"
    client = Client(instance.mcp_base)
    try:
        refused = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
        assert (refused.status, refused.headers["retry-after"], refused.error["code"]) == (503, "1", -32603)
        # The operator puts the expected keyring in place; the reload (SIGHUP) makes the instance ready.
        write_keyring(tmp_path / "keys.toml", keys[1], keys[0])
        instance.hangup()
        instance.wait_for(lambda: _ready(instance).status_code == 200)
        assert _ready(instance).json() == {"status": "ready"}
        served = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
        assert served.result["resultType"] == "input_required"
    finally:
        client.close()
    log = instance.stop()
    assert "not ready (fingerprint-mismatch)" in log
    assert "ready: the MCP endpoint serves requests again" in log


def test_the_expected_fingerprint_at_start_is_ready_at_once(
    tmp_path: Path, keys: tuple[ProtectionKey, ProtectionKey], instances: list[Instance]
) -> None:
    write_keyring(tmp_path / "keys.toml", keys[0])
    fingerprint = ProtectionKeyring(keys[0]).fingerprint().value
    instance = Instance(tmp_path, "--expect-fingerprint", fingerprint, *_store(tmp_path))
    instances.append(instance)
    assert _ready(instance).json() == {"status": "ready"}
    assert httpx.get(instance.admin_url + "/v1/health", timeout=20).json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("value", "problem"),
    [("v1:" + "A" * 43, "v2"), ("not-a-fingerprint", "43 base64url"), ("v2:" + "A" * 44, "43 base64url")],
)
def test_a_malformed_or_v1_expected_fingerprint_is_a_usage_error(tmp_path: Path, value: str, problem: str) -> None:
    write_keyring(tmp_path / "keys.toml", ProtectionKey.generate("k1"))
    command = [sys.executable, "-m", "soklet_cli", "serve", "--keyring", str(tmp_path / "keys.toml")]
    command += ["--port", "0", "--expect-fingerprint", value]
    completed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert completed.returncode == 2, completed.stderr
    assert problem in completed.stderr
