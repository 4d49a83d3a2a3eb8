"""``POST /v1/keyring/stage`` refuses an id that looks like key material (the core's rule), never echoing it."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx

from soklet_core.files import read_keyring_file
from soklet_core.keys import KeyringManager, ProtectionKey
from soklet_core.mcp.server.http import limited_uvicorn_config, uvicorn_server_class
from soklet_core.mcp.server.ops import AdminApp, AdminTokens, LiveKeyring
from soklet_core.mcp.server.options import HttpLimits
from tests.server.support_admin import TOKEN, file_roles, material_text, write_keyring

PASTED = "hJ3kQ9vZx2Lw7Rt5mN8bY1cF4gP6sD0aE-uW_qK3oIl"


def test_stage_refuses_a_material_shaped_id_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    write_keyring(path, ProtectionKey.generate("k1"))
    document = read_keyring_file(path)
    live = LiveKeyring(KeyringManager(document.keyring()), path, document=document)
    app = AdminApp(live, AdminTokens.parse(f"ops:{TOKEN}"), instance="t", lifetime_ms=60_000, rounds=3)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    server = uvicorn_server_class()(limited_uvicorn_config(app, HttpLimits(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/keyring/stage"
        material = material_text(ProtectionKey.generate("any"))
        reply = httpx.post(
            url, json={"id": PASTED, "material": material}, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )
        assert (reply.status_code, reply.json()) == (400, {"error": "key-id-looks-like-material"})
        assert PASTED[:16] not in reply.text
        assert file_roles(path) == {"k1": "active"}
        assert live.manager.generation == 0
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
