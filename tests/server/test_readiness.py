"""Readiness: the MCP endpoint answers 503 with ``Retry-After`` (JSON-RPC -32603) while the instance is held back,
before it reads a body, in both eras; the admin probes answer without a token with a status and a bounded reason
only; ``--expect-fingerprint``'s check; a SQLite store's lost file is told from an outage. Real uvicorn on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from soklet_core.keys import KeyringManager, ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer
from soklet_core.mcp.server.http import limited_uvicorn_config, uvicorn_server_class
from soklet_core.mcp.server.ops import AdminApp, AdminTokens, LiveKeyring
from soklet_core.mcp.server.ops._readiness import RETRY_AFTER_SECONDS, ExpectedFingerprint, NotReady, Readiness
from soklet_core.mcp.server.options import HttpLimits
from soklet_core.protection import ProtectionConfig
from soklet_core.store import SqliteStore, StoreUrl, sqlite_url
from tests.server.support import FORM_CAPS, Client, Entries, build_test_registry, running
from tests.server.support_admin import TOKEN

LEGACY_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def test_the_first_reason_in_the_enums_order_is_reported_and_observers_hear_changes() -> None:
    readiness = Readiness(NotReady.FINGERPRINT_MISMATCH)
    heard: list[NotReady | None] = []
    readiness.add_observer(heard.append)
    assert (readiness.ready, readiness.reason) == (False, NotReady.FINGERPRINT_MISMATCH)
    readiness.set(NotReady.GENERATION_BEHIND)
    assert readiness.reason is NotReady.GENERATION_BEHIND
    readiness.set(NotReady.GENERATION_BEHIND)  # already held: no news
    readiness.clear(NotReady.GENERATION_BEHIND)
    readiness.clear(NotReady.FINGERPRINT_MISMATCH)
    assert readiness.ready
    assert readiness.reason is None
    assert heard == [NotReady.GENERATION_BEHIND, NotReady.FINGERPRINT_MISMATCH, None]


def test_a_held_back_instance_is_one_warning_and_a_routine_follow_one_info_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    readiness = Readiness()
    with caplog.at_level(logging.INFO, logger="soklet.ready"):
        readiness.set(NotReady.GENERATION_BEHIND)
        readiness.clear(NotReady.GENERATION_BEHIND)
        readiness.set(NotReady.KEYRING_FILE_REFUSED)
        readiness.set(NotReady.STORE_FILE_LOST)  # not the first reason: no new line
        readiness.clear(NotReady.KEYRING_FILE_REFUSED)
    lines = [(record.levelno, record.getMessage().split(":")[0]) for record in caplog.records]
    assert lines == [
        (logging.INFO, "not ready (generation-behind)"),
        (logging.INFO, "ready"),
        (logging.WARNING, "not ready (keyring-file-refused)"),
        (logging.WARNING, "not ready (store-file-lost)"),
    ]


def test_an_expected_fingerprint_holds_the_instance_back_until_the_keyring_has_it() -> None:
    first, second = ProtectionKey.generate("k1"), ProtectionKey.generate("k2")
    expected = ProtectionKeyring(second, [first]).fingerprint()
    readiness = Readiness()
    expectation = ExpectedFingerprint(readiness, expected)
    assert not expectation.check(ProtectionKeyring(first))
    assert readiness.reason is NotReady.FINGERPRINT_MISMATCH
    # The same ids with other bytes: v2 tells them apart.
    assert not expectation.check(ProtectionKeyring(ProtectionKey.generate("k2"), [first]))
    assert expectation.check(ProtectionKeyring(second, [first]))
    assert readiness.ready
    with pytest.raises(ValueError, match="v2"):
        ExpectedFingerprint(readiness, ProtectionKeyring(first).fingerprint(version=1))


@pytest.fixture
def held() -> Iterator[tuple[str, Readiness, Entries]]:
    entries = Entries()
    readiness = Readiness(NotReady.GENERATION_BEHIND)
    keyring = ProtectionKeyring(ProtectionKey.generate("k1"))
    server = McpServer(build_test_registry(entries), protection=ProtectionConfig(keyring=keyring), readiness=readiness)
    with running(server) as base:
        yield base, readiness, entries


def _assert_not_ready(status: int, headers: httpx.Headers, body: dict[str, object]) -> None:
    assert status == 503, body
    assert headers["retry-after"] == str(RETRY_AFTER_SECONDS)
    error = body["error"]
    assert isinstance(error, dict)
    assert error["code"] == -32603
    assert "generation" not in json.dumps(body)  # the reason is the operator's, not the client's


def test_a_not_ready_server_answers_every_request_503_and_runs_nothing(held: tuple[str, Readiness, Entries]) -> None:
    base, readiness, entries = held
    client = Client(base)
    try:
        modern = client.call("probe", {}, capabilities=FORM_CAPS)
        _assert_not_ready(modern.status, modern.headers, modern.body)
        # A 2025-era initialize (no _meta, no session) gets the same answer.
        legacy = client.http.post(
            client.url,
            json=LEGACY_INITIALIZE,
            headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
        )
        _assert_not_ready(legacy.status_code, legacy.headers, legacy.json())
        # Before the body: one declared over the body limit is not even looked at.
        large = client.http.post(
            client.url, content=b"{}", headers={"Content-Type": "application/json", "Content-Length": "2"}
        )
        _assert_not_ready(large.status_code, large.headers, large.json())
        assert entries["probe"] == 0
        readiness.clear(NotReady.GENERATION_BEHIND)
        served = client.call("probe", {}, capabilities=FORM_CAPS)
        assert served.status == 200
        assert served.result["resultType"] == "input_required"
        assert entries["probe"] == 1
    finally:
        client.close()


def test_the_host_and_origin_checks_still_come_first(held: tuple[str, Readiness, Entries]) -> None:
    base, _readiness, _entries = held
    with httpx.Client(timeout=20) as http:
        foreign = http.post(base + "/mcp", content=b"{}", headers={"Origin": "https://evil.example"})
        assert foreign.status_code == 403
        wrong_path = http.post(base + "/elsewhere", content=b"{}")
        assert wrong_path.status_code == 404


@contextlib.contextmanager
def _admin(readiness: Readiness | None, store: SqliteStore | None = None) -> Iterator[str]:
    keyring = ProtectionKeyring(ProtectionKey.generate("k1"))
    live = LiveKeyring(KeyringManager(keyring))
    app = AdminApp(
        live,
        AdminTokens.parse(f"ops:{TOKEN}"),
        instance="web-1",
        lifetime_ms=60_000,
        rounds=3,
        store=store,
        readiness=readiness,
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn_server_class()(limited_uvicorn_config(app, HttpLimits(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_the_probes_need_no_token_and_say_only_a_status_and_a_reason() -> None:
    readiness = Readiness(NotReady.KEYRING_NOT_LOADED)
    with _admin(readiness) as url, httpx.Client(timeout=20) as http:
        ready = http.get(url + "/v1/ready")
        assert (ready.status_code, ready.json()) == (503, {"status": "not-ready", "reason": "keyring-not-loaded"})
        assert ready.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
        # Liveness: a process held back for its keyring is alive, and says nothing more.
        health = http.get(url + "/v1/health")
        assert (health.status_code, health.json()) == (200, {"status": "ok"})
        readiness.clear(NotReady.KEYRING_NOT_LOADED)
        assert (http.get(url + "/v1/ready").status_code, http.get(url + "/v1/ready").json()) == (
            200,
            {"status": "ready"},
        )
        # With a token the probes say the same: instance and generation are the snapshot's (token needed).
        authorized = {"Authorization": f"Bearer {TOKEN}"}
        assert http.get(url + "/v1/health", headers=authorized).json() == {"status": "ok"}
        snapshot = http.get(url + "/v1/keyring", headers=authorized).json()
        assert (snapshot["instance"], snapshot["generation"]) == ("web-1", 0)
        # Nothing else answers without a token, and a probe takes GET only.
        for method, path in [("GET", "/v1/keyring"), ("GET", "/metrics"), ("POST", "/v1/keyring/reload")]:
            assert http.request(method, url + path).status_code == 401, path
        assert http.post(url + "/v1/ready").status_code == 401


def test_a_lost_sqlite_file_holds_the_instance_back_and_an_outage_alone_does_not(tmp_path: Path) -> None:
    database = tmp_path / "store" / "soklet.db"
    store = SqliteStore(StoreUrl.parse(sqlite_url(database).text))
    readiness = Readiness()
    with _admin(readiness, store) as url, httpx.Client(timeout=20) as http:
        # Not opened yet: the store does not answer (an outage), which is not a reason.
        assert http.get(url + "/v1/ready").json() == {"status": "ready"}
        asyncio.run(store.open())  # its reads run on its own threads, whichever loop asks
        assert http.get(url + "/v1/ready").json() == {"status": "ready"}
        database.unlink()
        ready = http.get(url + "/v1/ready")
        assert (ready.status_code, ready.json()) == (503, {"status": "not-ready", "reason": "store-file-lost"})
        health = http.get(url + "/v1/health")
        assert (health.status_code, health.json()) == (503, {"status": "failing", "reason": "store-file-lost"})
        assert readiness.reason is NotReady.STORE_FILE_LOST
    asyncio.run(store.close())
