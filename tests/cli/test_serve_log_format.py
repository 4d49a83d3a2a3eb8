"""``soklet serve --log-format``: a real server's stderr as JSON lines (the access log, a refused request state,
the admin audit, uvicorn's own lines), text by default, and a clean usage error for an unknown format."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soklet_core.keys import ProtectionKey
from soklet_core.protocol import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION, PROTOCOL_VERSION_META_KEY
from tests.server.support import FORM_CAPS, Client
from tests.server.support_admin import LABEL, TOKEN, Instance, material_text, write_keyring

APPROVE = {"approval": {"action": "accept", "content": {}}}


@pytest.fixture
def keyring(tmp_path: Path) -> Path:
    path = tmp_path / "keys.toml"
    write_keyring(path, ProtectionKey.generate("k1"))
    return path


@pytest.fixture
def json_instance(tmp_path: Path, keyring: Path) -> Iterator[Instance]:
    served = Instance(tmp_path, "--log-format", "json", keyring=keyring)
    try:
        yield served
    finally:
        served.stop()


def _tampered(state: str) -> str:
    """``state`` with one character of its sealed part changed: it no longer authenticates."""
    middle = len(state) // 2
    return state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]


def _lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` as a JSON object (the assertion names a line that is not one)."""
    documents: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            document = json.loads(line)
        except ValueError:
            raise AssertionError(f"not a JSON line: {line[:200]!r}") from None
        assert isinstance(document, dict), line
        assert {"time", "level", "logger", "message"} <= set(document), line
        documents.append(document)
    return documents


def _events(documents: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [document for document in documents if document.get("event") == event]


@pytest.mark.slow
def test_json_lines_for_access_refusals_and_the_admin_audit(json_instance: Instance) -> None:
    client = Client(json_instance.mcp_base)
    try:
        first = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
        state = first.state
        assert state is not None
        refused = client.retry("catalog.continue", {}, _tampered(state), APPROVE, capabilities=FORM_CAPS)
        assert refused.status == 400
    finally:
        client.close()
    material = material_text(ProtectionKey.generate("k2"))
    assert json_instance.request("POST", "/v1/keyring/stage", {"id": "k2", "material": material}).status_code == 200
    assert json_instance.request("POST", "/v1/keyring/activate", {"id": "k9"}).status_code == 404
    log = json_instance.stop()
    documents = _lines(log)

    access = _events(documents, "access")
    assert [(line["method"], line["operation"], line["status"]) for line in access] == [
        ("tools/call", "catalog.continue", 200),
        ("tools/call", "catalog.continue", 400),
    ]
    assert access[0]["transport"] == "http"
    assert isinstance(access[0]["duration_ms"], float)
    assert access[1]["reason"] == "state-authentication"
    [state_refused] = _events(documents, "state-refused")
    assert (state_refused["logger"], state_refused["level"]) == ("soklet.protection", "warning")
    assert state_refused["reason"] == "authentication"

    audit = _events(documents, "admin-audit")
    assert [(line["action"], line["key_id"], line["outcome"], line["status"]) for line in audit] == [
        ("stage", "k2", "applied", 200),
        ("activate", "k9", "refused", 404),
    ]
    assert {line["token"] for line in audit} == {LABEL}
    # uvicorn's own lines are JSON too; tracing is off: no span ids.
    assert any(line["logger"].startswith("uvicorn") for line in documents)
    assert not any("trace_id" in line for line in documents)
    for secret in (TOKEN, material, state, _tampered(state), state[20:60]):
        assert secret not in log


@pytest.mark.slow
def test_text_lines_by_default(tmp_path: Path, keyring: Path) -> None:
    served = Instance(tmp_path, keyring=keyring)
    try:
        client = Client(served.mcp_base)
        try:
            assert client.call("catalog.continue", {}, capabilities=FORM_CAPS).status == 200
        finally:
            client.close()
    finally:
        log = served.stop()
    access = [line for line in log.splitlines() if " soklet.mcp.access INFO " in line]
    assert len(access) == 1
    assert "method=tools/call operation=catalog.continue status=200 code=- duration_ms=" in access[0]
    assert not any(line.startswith("{") for line in log.splitlines())


def test_an_unknown_format_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "soklet_cli", "serve", "--log-format", "xml"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "--log-format" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stdout == ""


@pytest.mark.slow
def test_json_lines_over_stdio() -> None:
    # Over stdio the log lines go through the non-blocking writer: the same formatter, one object per line.
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"_meta": {PROTOCOL_VERSION_META_KEY: PROTOCOL_VERSION, CLIENT_CAPABILITIES_META_KEY: {}}},
    }
    done = subprocess.run(
        [sys.executable, "-m", "soklet_cli", "serve", "--stdio", "--json", "--log-format", "json"],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    facts, *logged = done.stderr.splitlines()
    assert json.loads(facts)["url"]  # the start-up facts, one JSON document
    [access] = _events(_lines("\n".join(logged)), "access")
    assert (access["transport"], access["method"], access["status"]) == ("stdio", "tools/list", 200)
