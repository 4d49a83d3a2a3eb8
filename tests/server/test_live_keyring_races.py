"""A keyring file changed by the CLI just before an admin write: the admin write applies to what is on disk.

The admin app runs on a real uvicorn in this process with no file watcher, so the live keyring has certainly not
re-read the file when the admin request arrives (the worst case of the watcher's poll interval). The CLI is the
real ``soklet`` subprocess. Also: the watcher's change test sees an edit that keeps inode, size and mtime.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from soklet_core.files import TEMP_PREFIX, TEMP_SUFFIX, atomic_write, read_keyring_file, render_keyring_document
from soklet_core.keys import KeyringManager, ProtectionKey
from soklet_core.mcp.server.http import limited_uvicorn_config, uvicorn_server_class
from soklet_core.mcp.server.ops import AdminApp, AdminTokens, LiveKeyring
from soklet_core.mcp.server.options import HttpLimits
from tests.conftest import Soklet
from tests.server.support_admin import TOKEN, Instance, file_roles, material_text, write_keyring


@dataclass
class Admin:
    url: str
    live: LiveKeyring
    path: Path
    http: httpx.Client

    def post(self, path: str, body: object) -> httpx.Response:
        return self.http.post(self.url + path, json=body, headers={"Authorization": f"Bearer {TOKEN}"})

    def snapshot_roles(self) -> dict[str, str]:
        reply = self.http.get(self.url + "/v1/keyring", headers={"Authorization": f"Bearer {TOKEN}"})
        assert reply.status_code == 200, reply.text
        return {key["id"]: key["role"] for key in reply.json()["keys"]}


@pytest.fixture
def admin(soklet: Soklet) -> Iterator[Admin]:
    path = soklet.cwd / "keys.toml"
    k1, k2 = ProtectionKey.generate("k1"), ProtectionKey.generate("k2")
    soklet.remember(k1)
    soklet.remember(k2)
    write_keyring(path, k1, k2)
    document = read_keyring_file(path)
    live = LiveKeyring(KeyringManager(document.keyring()), path, document=document)
    app = AdminApp(live, AdminTokens.parse(f"ops:{TOKEN}"), instance="t", lifetime_ms=60_000, rounds=3)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn_server_class()(limited_uvicorn_config(app, HttpLimits(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    http = httpx.Client(timeout=30)
    try:
        yield Admin(f"http://127.0.0.1:{sock.getsockname()[1]}", live, path, http)
    finally:
        http.close()
        server.should_exit = True
        thread.join(10)
        sock.close()


def _staged(soklet: Soklet, key: ProtectionKey) -> dict[str, str]:
    soklet.remember(key)
    return {"id": key.id, "material": material_text(key)}


@pytest.mark.slow
def test_a_key_staged_by_the_cli_survives_an_admin_stage(admin: Admin, soklet: Soklet) -> None:
    cli = soklet.run("keys", "stage", "--generate", "--id", "from-cli", "--keyring", str(admin.path))
    assert cli.returncode == 0, cli.stderr
    reply = admin.post("/v1/keyring/stage", _staged(soklet, ProtectionKey.generate("from-admin")))
    assert reply.status_code == 200, reply.text
    expected = {"k1": "active", "k2": "verification", "from-cli": "verification", "from-admin": "verification"}
    assert file_roles(admin.path) == expected
    # The live keyring took the file's change along with its own: what is served is what is on disk.
    assert admin.snapshot_roles() == expected


@pytest.mark.slow
def test_a_key_removed_by_the_cli_stays_removed_after_an_admin_write(admin: Admin, soklet: Soklet) -> None:
    cli = soklet.run("keys", "remove", "k2", "--force", "--keyring", str(admin.path))
    assert cli.returncode == 0, cli.stderr
    reply = admin.post("/v1/keyring/stage", _staged(soklet, ProtectionKey.generate("k3")))
    assert reply.status_code == 200, reply.text
    assert file_roles(admin.path) == {"k1": "active", "k3": "verification"}
    assert admin.snapshot_roles() == {"k1": "active", "k3": "verification"}


@pytest.mark.slow
def test_a_rotation_by_the_cli_keeps_its_new_active_key_after_an_admin_write(admin: Admin, soklet: Soklet) -> None:
    cli = soklet.run("keys", "rotate", "--id", "k9", "--keyring", str(admin.path))
    assert cli.returncode == 0, cli.stderr
    reply = admin.post("/v1/keyring/remove", {"id": "k2"})
    assert reply.status_code == 200, reply.text
    assert file_roles(admin.path) == {"k1": "verification", "k9": "active"}
    assert admin.snapshot_roles() == {"k1": "verification", "k9": "active"}
    assert admin.live.manager.current().active_key.id == "k9"


@pytest.mark.slow
def test_an_admin_change_refused_by_the_file_changes_neither(admin: Admin, soklet: Soklet) -> None:
    # The CLI removed k2: activating it through the admin API is refused by what the file holds, not applied
    # from the server's older view (which would bring k2 back).
    cli = soklet.run("keys", "remove", "k2", "--force", "--keyring", str(admin.path))
    assert cli.returncode == 0, cli.stderr
    before = admin.path.read_bytes()
    reply = admin.post("/v1/keyring/activate", {"id": "k2"})
    assert (reply.status_code, reply.json()) == (404, {"error": "unknown-key"})
    assert admin.path.read_bytes() == before
    assert admin.live.manager.current().active_key.id == "k1"


def test_the_change_test_sees_an_in_place_edit_that_keeps_inode_size_and_mtime(
    admin: Admin, soklet: Soklet, caplog: pytest.LogCaptureFixture
) -> None:
    assert not admin.live.file_changed()
    before = os.stat(admin.path)
    # Another key of the same id length and material size: the file keeps its size. Written in place (an
    # editor that rewrites the file it opened), then the times put back as they were. (Under a new id: other
    # bytes under the id k2 would be refused as diverged.)
    document = read_keyring_file(admin.path)
    replacement = ProtectionKey.generate("k5")
    soklet.remember(replacement)
    staged = document.keyring().without("k2").with_staged(replacement)
    text = render_keyring_document(document.with_keyring(staged)).encode()
    assert len(text) == before.st_size
    with open(admin.path, "r+b") as handle:
        handle.write(text)
    os.utime(admin.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(admin.path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert admin.live.file_changed()
    with caplog.at_level(logging.INFO, logger="soklet.admin.audit"):
        admin.live.reload(actor="file-watch")
    current = admin.live.manager.current().key("k5")
    assert current is not None
    assert current.same_material(replacement)
    assert "k2" not in admin.live.manager.current()
    assert not admin.live.file_changed()


def test_a_change_written_while_a_reload_reads_is_seen_by_the_next_poll(admin: Admin, soklet: Soklet) -> None:
    # What the live keyring last read is remembered with the bytes it parsed: a write that lands after that
    # read leaves the file "changed" until the next reload, whatever its stat says.
    admin.live.reload(actor="test")
    document = read_keyring_file(admin.path)
    extra = ProtectionKey.generate("k4")
    soklet.remember(extra)
    atomic_write(
        admin.path, render_keyring_document(document.with_keyring(document.keyring().with_staged(extra))).encode()
    )
    assert admin.live.file_changed()
    admin.live.reload(actor="file-watch")
    assert "k4" in admin.live.manager.current()
    assert not admin.live.file_changed()


@pytest.mark.slow
def test_a_sighup_with_an_unchanged_file_says_so(tmp_path: Path) -> None:
    write_keyring(tmp_path / "keys.toml", ProtectionKey.generate("k1"))
    leftover = tmp_path / f"{TEMP_PREFIX}kill9ccc{TEMP_SUFFIX}"
    leftover.write_bytes((tmp_path / "keys.toml").read_bytes())
    leftover.chmod(0o600)
    os.utime(leftover, (1, 1))
    served = Instance(tmp_path)
    try:
        # The server starting with the keyring removed what a killed writer left beside it.
        assert not leftover.exists()
        served.hangup()
        served.wait_for(lambda: "keyring reload (sighup): the keyring file is unchanged" in served.log_text(), 60)
        assert "generation 0 kept" in served.log_text()
        assert "actor=sighup action=reload" not in served.log_text()
    finally:
        served.stop()
