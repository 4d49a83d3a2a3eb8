"""2025-era sessions against one client: DELETE is admitted like every request of the session, and one peer or
partition that floods ``initialize`` evicts its own sessions, never everyone else's.

Real uvicorn on loopback and raw httpx, as a 2025-era client talks; bearer-token admission with two partitions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer, ServerOptions
from soklet_core.mcp.server.admission import BearerTokenAdmission
from soklet_core.mcp.server.options import SessionOptions
from soklet_core.protection import ProtectionConfig
from tests.server.support import Entries, build_test_registry, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("session-limits"))
TOKENS = {"token-a": ("alice", "tenant-a"), "token-b": ("bob", "tenant-b")}
#: A hang guard for every HTTP call, not a timing assertion.
GUARD_SECONDS = 30
#: The session table of the servers here; the floods go well past it.
MAX_SESSIONS = 64
FLOOD = 3 * MAX_SESSIONS


class Session:
    """One 2025-era client session over raw httpx, with its bearer token (``None``: none sent), from the loopback
    address ``source`` (the whole 127/8 reaches a server on 127.0.0.1: each address is another peer)."""

    def __init__(self, url: str, token: str | None, *, source: str = "127.0.0.1") -> None:
        self.url = url
        self.token = token
        self.id: str | None = None
        self._next = 0
        self.http = httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=GUARD_SECONDS)

    def headers(self, *, token: str | None = None, session: bool = True) -> dict[str, str]:
        sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        used = token if token is not None else self.token
        if used is not None:
            sent["Authorization"] = f"Bearer {used}"
        if session and self.id is not None:
            sent["Mcp-Session-Id"] = self.id
            sent["MCP-Protocol-Version"] = "2025-11-25"
        return sent

    def initialize(self) -> httpx.Response:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        response = self.http.post(self.url, json=message, headers=self.headers(session=False))
        if response.status_code == 200:
            self.id = response.headers["mcp-session-id"]
        return response

    def ping(self) -> httpx.Response:
        self._next += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next, "method": "ping"}
        return self.http.post(self.url, json=message, headers=self.headers())

    def delete(self, *, token: str | None = None) -> httpx.Response:
        return self.http.delete(self.url, headers=self.headers(token=token))


LIMITED = ServerOptions(sessions=SessionOptions(max_sessions=MAX_SESSIONS))


def make_server(**options: Any) -> McpServer:
    return McpServer(build_test_registry(Entries()), protection=ProtectionConfig(keyring=KEYRING), **options)


@pytest.fixture(scope="module")
def bearer_url() -> Iterator[str]:
    with running(make_server(admission=BearerTokenAdmission(TOKENS), options=LIMITED)) as url:
        yield url + "/mcp"


def test_delete_with_another_partitions_token_does_not_end_the_session(bearer_url: str) -> None:
    alice = Session(bearer_url, "token-a")
    assert alice.initialize().status_code == 200
    foreign = alice.delete(token="token-b")
    assert foreign.status_code == 404
    assert foreign.json()["error"] == {"code": -32001, "message": "Session not found"}
    assert alice.ping().status_code == 200  # the session lives on
    assert alice.delete().status_code == 200
    assert alice.ping().status_code == 404


def test_delete_without_admission_is_401_and_the_session_lives_on(bearer_url: str) -> None:
    alice = Session(bearer_url, "token-a")
    assert alice.initialize().status_code == 200
    anonymous = httpx.delete(
        bearer_url, headers={"Mcp-Session-Id": alice.id or "", "MCP-Protocol-Version": "2025-11-25"}, timeout=30
    )
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == "Bearer"
    wrong = alice.delete(token="not-a-token")
    assert wrong.status_code == 401
    assert alice.ping().status_code == 200
    assert alice.delete().status_code == 200


def test_a_partition_that_floods_initialize_does_not_lock_out_another(bearer_url: str) -> None:
    bob = Session(bearer_url, "token-b")
    assert bob.initialize().status_code == 200
    alice = Session(bearer_url, "token-a")
    first = Session(bearer_url, "token-a")
    assert first.initialize().status_code == 200
    for _ in range(FLOOD):
        assert alice.initialize().status_code == 200  # the flooder is never refused: its own oldest make room
    assert alice.ping().status_code == 200
    assert first.ping().status_code == 404  # evicted by its own partition's flood
    assert bob.ping().status_code == 200  # the other partition's session keeps working
    newcomer = Session(bearer_url, "token-b")
    assert newcomer.initialize().status_code == 200
    assert newcomer.ping().status_code == 200
    assert bob.ping().status_code == 200


def test_an_anonymous_peer_that_floods_initialize_does_not_lock_out_another() -> None:
    with running(make_server(options=LIMITED)) as base:
        url = base + "/mcp"
        other = Session(url, None, source="127.0.0.2")
        assert other.initialize().status_code == 200
        flooder = Session(url, None, source="127.0.0.1")
        for _ in range(FLOOD):
            assert flooder.initialize().status_code == 200
        assert flooder.ping().status_code == 200
        assert other.ping().status_code == 200
        newcomer = Session(url, None, source="127.0.0.3")
        assert newcomer.initialize().status_code == 200
        assert newcomer.ping().status_code == 200
        assert other.ping().status_code == 200
