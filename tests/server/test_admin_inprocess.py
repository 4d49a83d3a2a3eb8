"""The admin app on a real uvicorn in this process: reservations (409), body and token limits, file divergence,
last use, and the manager's reload rule."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from soklet_core.files import KeyringFileError, KeyringFileErrorReason, read_keyring_file
from soklet_core.keys import KeyInUse, KeyringManager, ProtectionKey, ProtectionKeyring
from soklet_core.mcp.server.http import limited_uvicorn_config, uvicorn_server_class
from soklet_core.mcp.server.ops import MAX_ADMIN_BODY_BYTES, AdminApp, AdminTokenError, AdminTokens, LiveKeyring
from soklet_core.mcp.server.ops._admin import (
    MAX_ADMIN_TOKEN_CHARS,
    MAX_ADMIN_TOKEN_FILE_BYTES,
    MAX_ADMIN_TOKENS,
    MIN_ADMIN_TOKEN_CHARS,
)
from soklet_core.mcp.server.options import HttpLimits
from soklet_core.protection import EnvelopeProtector
from tests.server.support_admin import TOKEN, file_roles, write_keyring


@dataclass
class Admin:
    url: str
    live: LiveKeyring
    path: Path
    http: httpx.Client

    def post(self, path: str, body: object) -> httpx.Response:
        content = body if isinstance(body, bytes) else httpx.Request("POST", "/", json=body).content
        return self.http.post(self.url + path, content=content, headers={"Authorization": f"Bearer {TOKEN}"})


@pytest.fixture
def keys() -> tuple[ProtectionKey, ProtectionKey]:
    return ProtectionKey.generate("k1"), ProtectionKey.generate("k2")


@pytest.fixture
def admin(tmp_path: Path, keys: tuple[ProtectionKey, ProtectionKey]) -> Iterator[Admin]:
    path = tmp_path / "keys.toml"
    write_keyring(path, keys[0], keys[1])
    document = read_keyring_file(path)
    live = LiveKeyring(KeyringManager(document.keyring()), path, document=document)
    app = AdminApp(live, AdminTokens.parse(f"ops:{TOKEN}"), instance="t", lifetime_ms=60_000, rounds=3)
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
    http = httpx.Client(timeout=20)
    try:
        yield Admin(f"http://127.0.0.1:{sock.getsockname()[1]}", live, path, http)
    finally:
        http.close()
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_removing_a_key_in_use_is_409_until_its_reservation_ends(admin: Admin) -> None:
    reservation = admin.live.manager.reserve_active_key()
    with reservation:  # k1 is active: this seal is "in flight"
        assert admin.post("/v1/keyring/activate", {"id": "k2"}).status_code == 200
        before = admin.path.read_bytes()
        refused = admin.post("/v1/keyring/remove", {"id": "k1"})
        assert (refused.status_code, refused.json()) == (409, {"error": "key-in-use"})
        assert refused.json() == {"error": "key-in-use"}
        assert admin.path.read_bytes() == before
        snapshot = admin.http.get(admin.url + "/v1/keyring", headers={"Authorization": f"Bearer {TOKEN}"}).json()
        assert next(key for key in snapshot["keys"] if key["id"] == "k1")["reservations"] == 1
    removed = admin.post("/v1/keyring/remove", {"id": "k1"})
    assert removed.status_code == 200
    assert file_roles(admin.path) == {"k2": "active"}


def test_a_file_with_other_bytes_under_a_live_id_is_refused_and_nothing_changes(
    admin: Admin, keys: tuple[ProtectionKey, ProtectionKey]
) -> None:
    write_keyring(admin.path, ProtectionKey.generate("k1"), keys[1])  # edited, not reloaded
    before = admin.path.read_bytes()
    refused = admin.post("/v1/keyring/activate", {"id": "k2"})
    assert (refused.status_code, refused.json()) == (409, {"error": "keyring-file-diverged"})
    assert admin.path.read_bytes() == before
    assert admin.live.manager.current().active_key.id == "k1"
    assert admin.live.manager.generation == 0


def test_a_missing_file_refuses_the_change(admin: Admin) -> None:
    admin.path.unlink()
    refused = admin.post("/v1/keyring/activate", {"id": "k2"})
    assert (refused.status_code, refused.json()) == (409, {"error": "keyring-file-refused"})
    assert admin.live.manager.current().active_key.id == "k1"
    reload = admin.post("/v1/keyring/reload", b"")
    assert reload.status_code == 409


def test_body_limit_edge(admin: Admin) -> None:
    at_limit = b"{" + b" " * (MAX_ADMIN_BODY_BYTES - 2) + b"}"
    assert len(at_limit) == MAX_ADMIN_BODY_BYTES
    reply = admin.post("/v1/keyring/activate", at_limit)
    assert (reply.status_code, reply.json()) == (400, {"error": "malformed-body"})  # read whole, then parsed
    over = admin.post("/v1/keyring/activate", at_limit + b" ")
    assert (over.status_code, over.json()) == (413, {"error": "body-too-large"})


def test_stage_without_a_file_changes_memory_only(keys: tuple[ProtectionKey, ProtectionKey]) -> None:
    manager = KeyringManager(ProtectionKeyring(keys[0]))
    live = LiveKeyring(manager)
    snapshot = live.stage(keys[1], actor="t")
    assert snapshot.verification_key_ids == ("k2",)
    assert live.created("k2") is None


def test_last_use_is_recorded_per_key(keys: tuple[ProtectionKey, ProtectionKey]) -> None:
    manager = KeyringManager(ProtectionKeyring(keys[0], [keys[1]]))
    protector = EnvelopeProtector(manager)
    assert manager.snapshot().use("k1").last_sealed_ms is None
    token = protector.seal(b"state")
    protector.open(token)
    used = manager.snapshot().use("k1")
    assert used.last_sealed_ms is not None
    assert used.last_opened_ms is not None
    assert manager.snapshot().use("k2").last_sealed_ms is None
    manager.activate_staged_key("k2")
    manager.remove_verification_key("k1")
    assert manager.snapshot().use("k1").last_sealed_ms is None  # forgotten with the key


def test_replace_keyring_keeps_the_reservation_rule(keys: tuple[ProtectionKey, ProtectionKey]) -> None:
    manager = KeyringManager(ProtectionKeyring(keys[0]))
    only_new = ProtectionKeyring(keys[1])
    with manager.reserve_active_key():
        with pytest.raises(KeyInUse):
            manager.replace_keyring(only_new)
        assert manager.generation == 0
    assert manager.replace_keyring(ProtectionKeyring(keys[0])).generation == 0  # equal
    assert manager.replace_keyring(only_new).generation == 1


def test_token_limits() -> None:
    assert AdminTokens.parse("a" * MIN_ADMIN_TOKEN_CHARS).tokens[0].label == "admin"
    assert AdminTokens.parse("a" * MAX_ADMIN_TOKEN_CHARS).label_for(b"Bearer " + b"a" * MAX_ADMIN_TOKEN_CHARS)
    for text in ("a" * (MIN_ADMIN_TOKEN_CHARS - 1), "a" * (MAX_ADMIN_TOKEN_CHARS + 1), "", "x:" + "a" * 20 + " b"):
        with pytest.raises(AdminTokenError) as caught:
            AdminTokens.parse(text)
        assert "aaaa" not in str(caught.value)
    lines = "\n".join(f"t{index}:{'b' * 20}{index}" for index in range(MAX_ADMIN_TOKENS))
    tokens = AdminTokens.parse(lines)
    assert tokens.label_for(f"Bearer {'b' * 20}{MAX_ADMIN_TOKENS - 1}".encode()) == f"t{MAX_ADMIN_TOKENS - 1}"
    assert tokens.label_for(b"bearer  " + b"b" * 20 + b"0") == "t0"
    assert tokens.label_for(b"Basic " + b"b" * 20 + b"0") is None
    with pytest.raises(AdminTokenError):
        AdminTokens.parse(lines + f"\nextra:{'c' * 20}")
    with pytest.raises(AdminTokenError):
        AdminTokens.parse(f"{'a' * 20}\n{'b' * 20}")  # two bare tokens
    with pytest.raises(AdminTokenError):
        AdminTokens.parse(f"x:{'a' * 20}\nx:{'b' * 20}")  # a label twice


def test_token_file_limits(tmp_path: Path) -> None:
    path = tmp_path / "token"
    body = f"ops:{TOKEN}\n"
    path.write_text(body + "#" * (MAX_ADMIN_TOKEN_FILE_BYTES - len(body)))
    path.chmod(0o600)
    assert AdminTokens.from_file(path).tokens[0].label == "ops"
    path.write_text(body + "#" * (MAX_ADMIN_TOKEN_FILE_BYTES - len(body) + 1))
    with pytest.raises(KeyringFileError) as caught:
        AdminTokens.from_file(path)
    assert caught.value.reason is KeyringFileErrorReason.TOO_LARGE
    path.chmod(0o644)
    with pytest.raises(KeyringFileError) as insecure:
        AdminTokens.from_file(path)
    assert insecure.value.reason is KeyringFileErrorReason.INSECURE_PERMISSIONS
    assert AdminTokens.from_env("T", {"T": TOKEN}).label_for(f"Bearer {TOKEN}".encode()) == "admin"
    assert "adminTest" not in repr(AdminTokens.parse(TOKEN))


def test_a_reload_that_drops_a_reserved_key_is_refused(admin: Admin, keys: tuple[ProtectionKey, ProtectionKey]) -> None:
    with admin.live.manager.reserve_active_key():  # k1, in flight
        write_keyring(admin.path, keys[1])  # k1 gone from the file
        refused = admin.post("/v1/keyring/reload", b"")
        assert (refused.status_code, refused.json()) == (409, {"error": "key-in-use"})
        assert admin.live.manager.current().active_key.id == "k1"
        assert admin.live.manager.generation == 0
    applied = admin.post("/v1/keyring/reload", b"{}")
    assert applied.status_code == 200
    assert (applied.json()["active"], applied.json()["generation"]) == ("k2", 1)
    assert admin.live.created("k1") is None
