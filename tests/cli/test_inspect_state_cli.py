"""``soklet inspect-state`` through the real command: header, contents, every check, exit codes, no leaks; a
durable handle named for what it is; the notice when it waits on a terminal."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soklet_core.json import JsonNumber, canonical_text, parse
from soklet_core.keys import decode_base64url
from soklet_core.mcp import ClientCapabilities, HandleRepository, Identity, RequestContext, RequestStateMode
from soklet_core.protocol import PROTOCOL_VERSION, PROTOCOL_VERSION_META_KEY
from soklet_core.store import open_store

RING = "soklet-keyring.toml"
T0 = "2026-08-01T00:00:00Z"
LATER = "2026-08-01T00:05:00Z"


def write_request(
    folder: Path, name: str, request_id: object, method: str = "tools/call", meta: dict | None = None, **params: object
) -> str:
    body = {
        "name": "checkout.continue",
        "arguments": {"sku": "A-100", "qty": 3, "tags": ["a", "b"]},
        "_meta": {PROTOCOL_VERSION_META_KEY: PROTOCOL_VERSION, **(meta or {})},
        **params,
    }
    (folder / name).write_text(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}))
    return name


def sealed(soklet, *extra: str, state: str = '{"step": 100, "big": 1.' + "0" * 59 + "1}") -> str:
    (soklet.cwd / "state.json").write_text(state)
    result = soklet.run("seal-state", "--request", "call.json", "--state", "state.json", "--at", T0, *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def checks_of(result) -> dict[str, dict[str, str]]:
    return {check["check"]: check for check in json.loads(result.stdout)["checks"]}


@pytest.mark.slow
def test_without_a_key_the_header_and_the_key_it_needs(soklet) -> None:
    soklet.run("keys", "generate", "--id", "2026-08")
    write_request(soklet.cwd, "call.json", 1)
    token = sealed(soklet)
    human, as_json, stdin, broken = soklet.run_together(
        ("inspect-state", token),
        ("inspect-state", "--json", token),
        ("inspect-state", "-"),
        ("inspect-state", "--json", token[:10] + "!" + token[11:]),
    )
    assert human.returncode == 0, human.stderr
    for text in ("format version", "2026-08", "needs key '2026-08'", f"{len(token):,} bytes"):
        assert text in human.stdout
    document = json.loads(as_json.stdout)
    raw = decode_base64url(token)
    assert document["header"] == {
        "encoded_size": len(token),
        "version": 1,
        "key_id": "2026-08",
        "decoded_size": len(raw) - 2 - len("2026-08") - 12 - 16,
    }
    assert document["needs_key"] == "2026-08"
    assert stdin.returncode == 1  # nothing on stdin: an empty token has no envelope version
    assert broken.returncode == 1
    assert json.loads(broken.stdout)["header_refusal"] == "base64url"
    piped = soklet.run("inspect-state", "--json", input=token + "\n")
    assert json.loads(piped.stdout)["header"]["key_id"] == "2026-08"


@pytest.mark.slow
def test_with_a_keyring_the_contents(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", "req-1")
    token = sealed(soklet, "--round", "2", "--partition", "tenant-9")
    human, as_json, late = soklet.run_together(
        ("inspect-state", "--keyring", RING, "--at", LATER, token),
        ("inspect-state", "--keyring", RING, "--at", LATER, "--json", token),
        ("inspect-state", "--keyring", RING, "--at", "2026-08-01T00:15:00.001Z", "--json", token),
    )
    assert human.returncode == 0, human.stderr
    for text in ("tools/call", "/mcp", PROTOCOL_VERSION, "round", "2026-08-01T00:15:00.000Z", "in 10m 0s", '"req-1"'):
        assert text in human.stdout, text
    assert "not expired" in human.stdout
    assert '"step":1E+2' in human.stdout
    document = json.loads(as_json.stdout)
    sealed_part = document["sealed"]
    assert sealed_part["round"] == 2
    assert sealed_part["request_id"] == "req-1"
    assert sealed_part["expires_at"]["expired"] is False
    assert sealed_part["expires_at"]["in_ms"] == 600_000
    assert sealed_part["issued_at"]["iso"] == "2026-08-01T00:00:00.000Z"
    assert set(sealed_part["binding"]) == {"method", "path", "protocol_version", "partition_digest", "params_digest"}
    # The state is exact JSON: the 60-digit decimal survives, 100 comes back canonical.
    assert '"big":1.' + "0" * 59 + "1" in as_json.stdout
    assert '"step":1E+2' in as_json.stdout
    assert document["opens"] is True
    statuses = {check["check"]: check["status"] for check in document["checks"]}
    assert statuses["binding-method"] == "not-run"
    assert statuses["expiry"] == "passed"
    assert late.returncode == 1
    late_document = json.loads(late.stdout)
    assert late_document["refusal"] == "expired"
    assert late_document["sealed"]["expires_at"]["expired"] is True
    assert "ago" in checks_of(late)["expiry"]["detail"]


@pytest.mark.slow
def test_with_a_retry_every_check_and_each_refusal_named(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1, meta={"progressToken": "p1"})
    token = sealed(soklet)
    write_request(
        soklet.cwd, "ok.json", 2, inputResponses={"c": {"action": "accept"}}, requestState=token, meta={"baggage": "b"}
    )
    write_request(soklet.cwd, "method.json", 2, method="prompts/get")
    write_request(soklet.cwd, "params.json", 2, arguments={"sku": "A-100", "qty": 4, "tags": ["a", "c"]})
    write_request(soklet.cwd, "same-id.json", 1)
    base = ("inspect-state", "--keyring", RING, "--at", LATER, "--json")
    runs = soklet.run_together(
        (*base, "--request", "ok.json", "--path", "//mcp/", token),
        (*base, "--request", "method.json", token),
        (*base, "--request", "ok.json", "--path", "/other", token),
        (*base, "--request", "ok.json", "--protocol-version", "2025-06-18", token),
        (*base, "--request", "ok.json", "--partition", "tenant-2", token),
        (*base, "--request", "params.json", "--original-request", "call.json", token),
        (*base, "--request", "params.json", token),
        (*base, "--request", "same-id.json", token),
    )
    ok, method, path, version, partition, params, params_no_original, same_id = runs
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert all(check["status"] == "passed" for check in json.loads(ok.stdout)["checks"])
    expected = {
        "binding-method": method,
        "binding-path": path,
        "binding-protocol-version": version,
        "binding-partition": partition,
        "binding-params": params,
        "request-id": same_id,
    }
    for check, result in expected.items():
        assert result.returncode == 1, (check, result.stderr)
        document = json.loads(result.stdout)
        failed = [item["check"] for item in document["checks"] if item["status"] == "failed"]
        assert failed == [check], (check, failed)
    assert json.loads(same_id.stdout)["refusal"] == "request-id-reused"
    assert "'prompts/get'" in checks_of(method)["binding-method"]["detail"]
    assert "'/other'" in checks_of(path)["binding-path"]["detail"]
    assert "'tenant-2'" in checks_of(partition)["binding-partition"]["detail"]
    assert json.loads(params.stdout)["params_diff"] == ["/arguments/qty", "/arguments/tags/1"]
    assert "/arguments/qty" in checks_of(params)["binding-params"]["detail"]
    assert "--original-request" in checks_of(params_no_original)["binding-params"]["detail"]
    human = soklet.run("inspect-state", "--keyring", RING, "--at", LATER, "--request", "params.json", token)
    assert human.returncode == 1
    assert "FAIL" in human.stdout
    assert "binding-params" in human.stdout
    assert "refused: binding-params" in human.stdout


@pytest.mark.slow
def test_no_key_can_open_it_exits_4(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1)
    token = sealed(soklet)
    other = soklet.cwd / "other"
    other.mkdir()
    assert soklet.run("keys", "generate", "--id", "k9", "--keyring", "other/a.toml").returncode == 0
    assert soklet.run("keys", "generate", "--id", "k1", "--keyring", "other/b.toml").returncode == 0
    unknown, impostor = soklet.run_together(
        ("inspect-state", "--keyring", "other/a.toml", "--json", token),
        ("inspect-state", "--keyring", "other/b.toml", token),
    )
    assert unknown.returncode == 4
    assert json.loads(unknown.stdout)["refusal"] == "unknown-key"
    assert "no key 'k1' in the keyring" in checks_of(unknown)["key-id"]["detail"]
    assert impostor.returncode == 4
    assert "did not verify" in impostor.stdout
    # Rotate, then remove the old key: the state stops opening.
    soklet.run("keys", "generate", "--id", "k2", "--role", "active")
    assert soklet.run("inspect-state", "--keyring", RING, "--at", LATER, token).returncode == 0
    assert soklet.run("keys", "remove", "k1", "--force").returncode == 0
    assert soklet.run("inspect-state", "--keyring", RING, "--at", LATER, token).returncode == 4


@pytest.mark.slow
def test_usage_and_io_errors(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1)
    (soklet.cwd / "not-json.json").write_text("{")
    token = sealed(soklet)
    results = soklet.run_together(
        ("inspect-state", "--request", "call.json", token),
        ("inspect-state", "--keyring", RING, "--at", "soon", token),
        ("inspect-state", "--keyring", "missing.toml", token),
        ("inspect-state", "--keyring", RING, "--request", "missing.json", token),
        ("inspect-state", "--keyring", RING, "--request", "not-json.json", token),
        ("inspect-state", "--keyring", RING, "--request", "call.json", "--path", "mcp", token),
        soklet.call("inspect-state", "--keyring", RING, "--request", "-", "--original-request", "-", token, input="{}"),
        soklet.call("inspect-state", "--keyring", RING, "--request", "-", input=token),
    )
    assert [result.returncode for result in results] == [2, 2, 3, 3, 2, 2, 2, 2], [r.stderr for r in results]
    assert all("Traceback" not in result.output for result in results)
    for result in results[-2:]:
        assert result.stderr == "soklet: only one of TOKEN, --request and --original-request can read stdin (-)\n"


@pytest.mark.slow
def test_outputs_never_show_key_material_or_plaintext_envelope(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    soklet.run("keys", "generate", "--id", "k2")
    write_request(soklet.cwd, "call.json", 1)
    token = sealed(soklet)
    runs = soklet.run_together(
        ("inspect-state", "--keyring", RING, "--json", "--request", "call.json", token),
        ("inspect-state", "--keyring", RING, "--request", "call.json", token),
        ("inspect-state", "--keyring", RING, token[:-3] + "AAA"),
    )
    for result in runs:
        assert result.returncode in (1, 4)
    # The fixture scans every output for every form of every key's material; check the count it learnt.
    assert len(soklet.secrets) == 2


#: The placeholders the old --json writer substituted into its own output (issue 8 item 12).
FORMER_MARKERS = ("\x00soklet:state\x00", "\x00soklet:request-id\x00", "\x00soklet:retry-id\x00")


@pytest.mark.slow
@pytest.mark.parametrize("marker", FORMER_MARKERS, ids=["state", "request-id", "retry-id"])
def test_json_output_cannot_be_rewritten_by_its_input(soklet, marker: str) -> None:
    # Every string the input controls is set to a former marker: the sealed and the retry method, the protocol
    # version, both request ids, and strings inside the state. The document keeps its structure, and the state
    # appears exactly once, where it belongs.
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", marker, method=marker, meta={PROTOCOL_VERSION_META_KEY: marker})
    write_request(soklet.cwd, "retry.json", marker + "2", method=marker, meta={PROTOCOL_VERSION_META_KEY: marker})
    state = {"unique": "123456789.000000000001", "markers": list(FORMER_MARKERS), marker: marker}
    token = sealed(soklet, state=json.dumps(state))
    result = soklet.run("inspect-state", "--keyring", RING, "--at", LATER, "--json", "--request", "retry.json", token)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["sealed"]["state"] == state
    assert document["sealed"]["request_id"] == marker
    assert document["sealed"]["binding"]["method"] == marker
    assert document["sealed"]["binding"]["protocol_version"] == marker
    assert document["retry"]["method"] == marker
    assert document["retry"]["protocol_version"] == marker
    assert document["retry"]["request_id"] == marker + "2"
    assert result.stdout.count("123456789.000000000001") == 1
    assert result.stdout.count('"unique"') == 1
    assert document["opens"] is True


@pytest.mark.slow
def test_json_output_keeps_exact_numbers_in_request_ids(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1)
    token = sealed(soklet)
    big = "1" + "0" * 40 + ".50"
    (soklet.cwd / "retry.json").write_text((soklet.cwd / "call.json").read_text().replace('"id": 1', f'"id": {big}'))
    result = soklet.run("inspect-state", "--keyring", RING, "--at", LATER, "--json", "--request", "retry.json", token)
    assert result.returncode == 0, result.stderr
    # Canonical and exact: 42 significant digits, which no float holds.
    assert f'"request_id":{canonical_text(parse(big))}' in result.stdout
    assert canonical_text(parse(big)) == "1" + "0" * 40 + ".5"
    assert json.loads(result.stdout)["sealed"]["request_id"] == 1


#: An endpoint path that took the old normalizer's pattern hours (exponential backtracking; 28 "a" took 6 s).
SLOW_PATH = "/" + "a" * 40 + "%25"


@pytest.mark.slow
def test_a_backtracking_path_answers_promptly(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1)
    write_request(soklet.cwd, "retry.json", 2)
    token = sealed(soklet, "--path", SLOW_PATH)
    result = soklet.run(
        "inspect-state", "--keyring", RING, "--at", LATER, "--json", "--request", "retry.json", "--path", SLOW_PATH,
        token, timeout=15,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["sealed"]["binding"]["path"] == SLOW_PATH


@pytest.mark.slow
def test_lifetime_is_the_servers_maximum(soklet) -> None:
    # A state sealed for a one-hour server: a default (15-minute) inspection calls its life too long, as a default
    # server would; --lifetime 1h checks it as the one-hour server does, and --lifetime takes the one duration
    # parser's bounds.
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1)
    token = sealed(soklet, "--lifetime", "1h")
    default, hour, bare, long = soklet.run_together(
        ("inspect-state", "--keyring", RING, "--at", LATER, "--json", token),
        ("inspect-state", "--keyring", RING, "--at", LATER, "--lifetime", "1h", "--json", token),
        ("inspect-state", "--keyring", RING, "--at", LATER, "--lifetime", "60", token),
        ("inspect-state", "--keyring", RING, "--at", LATER, "--lifetime", "8785h", token),
    )
    assert default.returncode == 1
    assert json.loads(default.stdout)["refusal"] == "lifetime-exceeded"
    assert checks_of(default)["lifetime"]["detail"] == "its lifetime of 1h exceeds the 15m maximum"
    assert hour.returncode == 0, hour.stderr
    assert checks_of(hour)["expiry"]["status"] == "passed"
    assert checks_of(hour)["lifetime"]["detail"] == "lifetime 1h of at most 1h"
    assert (bare.returncode, long.returncode) == (2, 2)
    assert "no unit" in bare.stderr
    assert "at most 366 days" in long.stderr


@pytest.mark.slow
def test_a_state_issued_ahead_of_the_clock_is_explained(soklet) -> None:
    # Sealed at T0, inspected an hour earlier: the state's issued-at lies an hour ahead of the inspecting clock, so
    # a server would refuse it although it has not expired; 60 s ahead is within the clock-skew bound.
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1)
    write_request(soklet.cwd, "retry.json", 2)
    token = sealed(soklet)
    early, at_bound, human = soklet.run_together(
        (
            "inspect-state",
            "--keyring",
            RING,
            "--request",
            "retry.json",
            "--at",
            "2026-07-31T23:00:00Z",
            "--json",
            token,
        ),
        (
            "inspect-state",
            "--keyring",
            RING,
            "--request",
            "retry.json",
            "--at",
            "2026-07-31T23:59:00Z",
            "--json",
            token,
        ),
        ("inspect-state", "--keyring", RING, "--request", "retry.json", "--at", "2026-07-31T23:00:00Z", token),
    )
    assert early.returncode == 1, early.stderr
    assert json.loads(early.stdout)["refusal"] == "issued-in-future"
    assert checks_of(early)["expiry"]["status"] == "passed"
    assert checks_of(early)["issued-at"] == {
        "check": "issued-at",
        "status": "failed",
        "reason": "issued-in-future",
        "detail": "issued 2026-08-01T00:00:00.000Z, in 1h, beyond the 1m clock-skew bound",
    }
    assert at_bound.returncode == 0, at_bound.stdout
    assert checks_of(at_bound)["issued-at"]["status"] == "passed"
    assert human.returncode == 1
    assert "refused: issued-in-future" in human.stdout


def issued_handle(folder: Path) -> str:
    """A real durable application handle: issued by a HandleRepository over a SQLite store, as order.checkout's."""
    context = RequestContext(
        identity=Identity("alice"),
        partition="anonymous",
        client_capabilities=ClientCapabilities.from_mapping({"elicitation": {}}),
        protocol_version=PROTOCOL_VERSION,
        request_id=JsonNumber.from_value(1),
        method="tools/call",
        operation_name="order.checkout",
        request_state_mode=RequestStateMode.APPLICATION_PROTECTED,
    )

    async def issue() -> str:
        store = open_store(f"sqlite:///{folder / 'soklet.db'}")
        await store.open()
        try:
            return await HandleRepository(store).issue(context, {"step": "quantity"})
        finally:
            await store.close()

    return asyncio.run(issue())


@pytest.mark.slow
def test_a_durable_handle_is_recognised_and_named(soklet) -> None:
    # order.checkout hands out a durable application handle as its requestState; inspect-state used to call it
    # "envelope format version is not supported". It says what the handle is, with or without a keyring.
    soklet.run("keys", "generate", "--id", "k1")
    handle = issued_handle(soklet.cwd)
    human, as_json, keyed, piped = soklet.run_together(
        ("inspect-state", handle),
        ("inspect-state", "--json", handle),
        ("inspect-state", "--keyring", RING, "--json", handle),
        soklet.call("inspect-state", "-", input=handle + "\n"),
    )
    for result in (human, as_json, keyed, piped):
        assert result.returncode == 1, result.output
        assert "format version" not in result.output
    assert "durable application handle" in human.stdout
    assert "not a sealed state" in human.stdout
    assert "soklet handles purge-expired" in human.stdout
    assert "soklet tasks show" in human.stdout
    assert human.stdout == piped.stdout
    document = json.loads(as_json.stdout)
    assert document["kind"] == "durable-handle"
    assert document["encoded_size"] == len(handle) == 43
    assert document["exit_code"] == 1
    assert "durable application handle" in document["detail"]
    assert json.loads(keyed.stdout) == document
    assert handle not in human.stdout + as_json.stdout  # the handle is a bearer secret: never echoed
    # A sealed state is still a sealed state.
    write_request(soklet.cwd, "call.json", 1)
    sealed_json = soklet.run("inspect-state", "--json", sealed(soklet))
    assert sealed_json.returncode == 0
    assert json.loads(sealed_json.stdout)["kind"] == "sealed-state"


@pytest.mark.slow
def test_on_a_terminal_without_a_token_it_says_it_waits_for_standard_input(soklet) -> None:
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "soklet_cli", "inspect-state"],
        cwd=soklet.cwd,
        env=soklet.env,
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(terminal)
    try:
        # The notice comes on stderr before anything is read: wait for it (generous bound, polled).
        notice = b""
        deadline = time.monotonic() + 60
        while b"standard input" not in notice and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stderr], [], [], 1.0)
            if ready:
                chunk = os.read(process.stderr.fileno(), 4096)  # type: ignore[union-attr]
                if not chunk:
                    break
                notice += chunk
        text = notice.decode()
        assert "waiting for the token on standard input" in text, text
        assert "Ctrl-D" in text
        assert process.poll() is None  # still waiting for the token
        os.write(controller, b"not-a-token\n\x04")
        stdout, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
    assert process.returncode == 1
    assert b"base64url" in stdout
    # Piped or redirected input gets no notice (scripts see clean stderr).
    piped = soklet.run("inspect-state", input="not-a-token\n")
    assert piped.returncode == 1
    assert "standard input" not in piped.stderr
