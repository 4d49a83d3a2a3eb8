"""``soklet seal-state`` through the real command: tokens a server would emit, opened by the core library."""

from __future__ import annotations

import json
import stat
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from soklet_core.files import read_keyring_file
from soklet_core.json import canonical_text
from soklet_core.protection import (
    EnvelopeHeader,
    ProtectionConfig,
    Reason,
    RequestStateProtectionException,
    RequestStateSealer,
    bind_request,
)
from soklet_core.protocol import PROTOCOL_VERSION_META_KEY

RING = "soklet-keyring.toml"
T0 = 1_785_542_400_000  # 2026-08-01T00:00:00Z


def write_request(folder: Path, name: str, request_id: object, **params: object) -> Path:
    body = {"name": "checkout.continue", "arguments": {"sku": "A-100", "qty": 3}, **params}
    path = folder / name
    path.write_text(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}))
    return path


def sealer_from_file(folder: Path, now: int) -> RequestStateSealer:
    keyring = read_keyring_file(folder / RING).keyring()
    return RequestStateSealer(ProtectionConfig(keyring=keyring), clock=lambda: now)


def test_seal_state_prints_a_token_the_server_opens(soklet) -> None:
    assert soklet.run("keys", "generate", "--id", "k1").returncode == 0
    assert stat.S_IMODE((soklet.cwd / RING).stat().st_mode) == 0o600
    write_request(soklet.cwd, "call.json", 1)
    retry = write_request(soklet.cwd, "retry.json", 2, inputResponses={"ok": {"action": "accept"}})
    (soklet.cwd / "state.json").write_text('{"step": 100, "total": 1.50, "big": ' + "9" * 60 + ', "who": "Zoë"}')
    plain, as_json = soklet.run_together(
        ("seal-state", "--request", "call.json", "--state", "state.json", "--at", "2026-08-01T00:00:00Z"),
        ("seal-state", "--request", "call.json", "--state", "state.json", "--at", str(T0), "--json"),
    )
    assert plain.returncode == 0, plain.stderr
    token = plain.stdout.strip()
    assert "\n" not in token
    assert token.isascii()
    sealer = sealer_from_file(soklet.cwd, T0 + 60_000)
    bound_retry = bind_request(retry.read_bytes(), path="/mcp", partition="anonymous")
    opened = sealer.open(token, bound_retry)
    assert canonical_text(opened.state) == '{"big":' + "9" * 60 + ',"step":1E+2,"total":1.5,"who":"Zoë"}'
    contents = sealer.diagnose(token).contents
    assert contents is not None
    assert (contents.round, contents.issued_at_ms, contents.expires_at_ms) == (1, T0, T0 + 900_000)
    assert contents.request_id.value == Decimal(1)
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["key_id"] == "k1"
    assert document["round"] == 1
    assert document["issued_at"] == {"ms": T0, "iso": "2026-08-01T00:00:00.000Z"}
    assert document["expires_at"]["ms"] == T0 + 900_000
    assert document["binding"]["path"] == "/mcp"
    assert document["encoded_size"] == len(document["token"])
    # A fresh nonce each time: a second seal of the same inputs is another token that opens the same way.
    assert document["token"] != token
    assert sealer.open(document["token"], bound_retry).state == opened.state


@pytest.mark.slow
def test_seal_state_options_round_path_partition_lifetime(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    call = write_request(soklet.cwd, "call.json", "a-1", _meta={PROTOCOL_VERSION_META_KEY: "2025-11-25"})
    write_request(soklet.cwd, "retry.json", "a-2", _meta={PROTOCOL_VERSION_META_KEY: "2025-11-25", "progressToken": 7})
    result = soklet.run(
        "seal-state",
        "--request",
        "call.json",
        "--state",
        "-",
        "--path",
        "//api/./mcp/",
        "--partition",
        "tenant-7",
        "--round",
        "4",
        "--lifetime",
        "1h",
        "--at",
        str(T0),
        input='{"n": 2}',
    )
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip()
    sealer = sealer_from_file(soklet.cwd, T0)
    contents = sealer.diagnose(token).contents
    assert contents is not None
    assert contents.round == 4
    assert contents.expires_at_ms == T0 + 3_600_000
    assert contents.binding.path == "/api/mcp"
    assert contents.binding.protocol_version == "2025-11-25"
    assert contents.request_id.value == "a-1"
    expected = bind_request(call.read_bytes(), path="/api/mcp", partition="tenant-7")
    assert contents.binding == expected.binding
    retry = bind_request((soklet.cwd / "retry.json").read_bytes(), path="/api/mcp/", partition="tenant-7")
    # A 15-minute server refuses the longer life (lifetime-exceeded); a server with the same lifetime opens it.
    with pytest.raises(RequestStateProtectionException) as caught:
        sealer.open(token, retry)
    assert caught.value.reason is Reason.LIFETIME_EXCEEDED
    keyring = read_keyring_file(soklet.cwd / RING).keyring()
    hour = ProtectionConfig(keyring=keyring, maximum_request_state_lifetime=timedelta(hours=1))
    assert RequestStateSealer(hour, clock=lambda: T0).open(token, retry).state.to_python() == {"n": 2}


@pytest.mark.slow
def test_seal_state_refusals(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1)
    (soklet.cwd / "state.json").write_text('{"a": 1}')
    (soklet.cwd / "big.json").write_text(json.dumps("x" * 60_000))
    (soklet.cwd / "bad.json").write_text('{"a": 1, "a": 2}')
    (soklet.cwd / "noid.json").write_text('{"jsonrpc": "2.0", "method": "tools/call"}')
    base = ("seal-state", "--request", "call.json", "--state")
    results = soklet.run_together(
        (*base, "state.json", "--round", "11"),
        (*base, "big.json"),
        (*base, "bad.json"),
        ("seal-state", "--request", "noid.json", "--state", "state.json"),
        (*base, "state.json", "--keyring", "missing.toml"),
        (*base, "state.json", "--at", "yesterday"),
        ("seal-state", "--request", "-", "--state", "-"),
        (*base, "state.json", "--round", "0"),
        (*base, "missing-state.json"),
        (*base, "state.json", "--path", "mcp"),
    )
    codes = [result.returncode for result in results]
    assert codes == [1, 1, 1, 1, 3, 2, 2, 2, 3, 2], [result.stderr for result in results]
    assert "exceeds --max-rounds" in results[0].stderr
    assert "too-large" in results[1].stderr
    assert "duplicate-member" in results[2].stderr
    assert "invalid-request-id" in results[3].stderr
    assert all("Traceback" not in result.output for result in results)


@pytest.mark.slow
def test_seal_state_uses_the_active_key_after_rotation(soklet) -> None:
    soklet.run("keys", "generate", "--id", "old")
    soklet.run("keys", "generate", "--id", "new", "--role", "active")
    write_request(soklet.cwd, "call.json", 1)
    (soklet.cwd / "state.json").write_text("[1, 2]")
    result = soklet.run("seal-state", "--request", "call.json", "--state", "state.json")
    assert result.returncode == 0, result.stderr
    assert EnvelopeHeader.read(result.stdout.strip()).key_id == "new"


@pytest.mark.slow
@pytest.mark.parametrize("a_count", [28, 40])
def test_a_backtracking_path_answers_promptly(soklet, a_count: int) -> None:
    # The old endpoint-path pattern backtracked exponentially on such a path (28 "a" took 6 s, 40 took hours).
    path = "/" + "a" * a_count + "%25"
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1)
    (soklet.cwd / "state.json").write_text("{}")
    result = soklet.run("seal-state", "--request", "call.json", "--state", "state.json", "--path", path, timeout=15)
    assert result.returncode == 0, result.stderr
    contents = sealer_from_file(soklet.cwd, T0).diagnose(result.stdout.strip()).contents
    assert contents is not None
    assert contents.binding.path == path
