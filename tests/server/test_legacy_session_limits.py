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
from soklet_core.mcp import McpServer
from soklet_core.mcp.server.admission import BearerTokenAdmission
from soklet_core.protection import ProtectionConfig
from tests.server.support import Entries, build_test_registry, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("session-limits"))
TOKENS = {"token-a": ("alice", "tenant-a"), "token-b": ("bob", "tenant-b")}
#: A hang guard for every HTTP call, not a timing assertion.
GUARD_SECONDS = 30


class Session:
    """One 2025-era client session over raw httpx, with its bearer token (``None``: none sent)."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.token = token
        self.id: str | None = None
        self._next = 0

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
        response = httpx.post(self.url, json=message, headers=self.headers(), timeout=GUARD_SECONDS)
        if response.status_code == 200:
            self.id = response.headers["mcp-session-id"]
        return response

    def ping(self) -> httpx.Response:
        self._next += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next, "method": "ping"}
        return httpx.post(self.url, json=message, headers=self.headers(), timeout=GUARD_SECONDS)

    def delete(self, *, token: str | None = None) -> httpx.Response:
        return httpx.delete(self.url, headers=self.headers(token=token), timeout=GUARD_SECONDS)


@pytest.fixture(scope="module")
def bearer_url() -> Iterator[str]:
    server = McpServer(
        build_test_registry(Entries()),
        protection=ProtectionConfig(keyring=KEYRING),
        admission=BearerTokenAdmission(TOKENS),
    )
    with running(server) as url:
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
