"""What ``soklet serve`` runs, run from Python: a library user's script hands ``run`` a ``ServeConfig`` (a keyring
file and an admin listener, on loopback) and gets the MCP endpoint, the admin probes, the file watch and a clean
stop on SIGTERM, with the start-up facts reported as typed events."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from soklet_core.keys import ProtectionKey
from soklet_core.mcp.server import AdminListener, KeyringFile, ServeConfig, ServeError
from soklet_core.mcp.server._serve_config import ServeErrorReason
from soklet_core.mcp.server.ops import read_admin_tokens
from soklet_core.store import sqlite_url
from tests.server.support import Client
from tests.server.support_admin import LABEL, TOKEN, write_keyring

#: The library user's script: the demo app served with a keyring file and an admin listener, every event printed
#: as one JSON line.
_CHILD = """
import json, sys
from pathlib import Path

from soklet_apps import demo
from soklet_core.mcp.server import AdminListener, KeyringFile, ServeConfig, run
from soklet_core.mcp.server.ops import read_admin_tokens
from soklet_core.store import sqlite_url

folder = Path(sys.argv[1])


def report(event):
    facts = {name: getattr(event, name) for name in ("url", "port", "active_key_id") if hasattr(event, name)}
    print(json.dumps({"event": type(event).__name__, **facts}), flush=True)


run(
    ServeConfig(
        app=demo.build_registry(),
        keyring=KeyringFile(folder / "keys.toml"),
        store=sqlite_url(folder / "store.db"),
        port=0,
        admin=AdminListener(read_admin_tokens(token_file=folder / "admin-token", token_env=None), port=0),
        instance="library-1",
    ),
    on_event=report,
)
"""


#: The first key: kept for verification when the file is edited (the same id with other bytes would be refused).
_FIRST = ProtectionKey.generate("k1")


def _wait_for(predicate: Callable[[], bool], seconds: float = 60.0) -> None:
    """Poll ``predicate`` until true (a generous bound: "it happens", not a timing)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, dict[str, Any]], Path]]:
    write_keyring(tmp_path / "keys.toml", _FIRST)
    token_file = tmp_path / "admin-token"
    token_file.write_text(f"{LABEL}:{TOKEN}\n")
    token_file.chmod(0o600)
    log = (tmp_path / "child.log").open("w")
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path)], stdout=subprocess.PIPE, stderr=log, text=True
    )
    assert child.stdout is not None
    events: dict[str, dict[str, Any]] = {}
    try:
        while "Serving" not in events:
            line = child.stdout.readline()
            assert line, f"the script ended before serving: {(tmp_path / 'child.log').read_text()[-2000:]}"
            event = json.loads(line)
            events[event["event"]] = event
        yield child, events, tmp_path
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(30)
        log.close()


def test_a_library_user_runs_what_soklet_serve_runs(
    served: tuple[subprocess.Popen[str], dict[str, dict[str, Any]], Path],
) -> None:
    child, events, folder = served
    # The start-up facts come as typed events, in order, before serving starts.
    assert list(events) == ["Listening", "AdminListening", "KeyringLoaded", "Serving"]
    assert events["KeyringLoaded"]["active_key_id"] == "k1"
    url: str = events["Listening"]["url"]
    assert url.startswith("http://127.0.0.1:")
    assert url.endswith("/mcp")
    admin_url: str = events["AdminListening"]["url"]
    # The MCP endpoint answers: the demo's first call asks for input, with a sealed state.
    client = Client(url.removesuffix("/mcp"))
    try:
        reply = client.call("catalog.continue", {}, capabilities={"elicitation": {}})
    finally:
        client.close()
    assert reply.status == 200
    assert reply.body["result"]["resultType"] == "input_required"
    assert reply.body["result"]["requestState"]
    with httpx.Client(timeout=20) as http:
        ready = http.get(f"{admin_url}/v1/ready")
        assert ready.status_code == 200, ready.text
        auth = {"Authorization": f"Bearer {TOKEN}"}

        def active() -> str:
            snapshot = http.get(f"{admin_url}/v1/keyring", headers=auth)
            assert snapshot.status_code == 200, snapshot.text
            return str(snapshot.json()["active"])

        assert active() == "k1"
        # The keyring file is watched: an edit (k2 active, k1 kept for verification) is applied on its own.
        write_keyring(folder / "keys.toml", ProtectionKey.generate("k2"), _FIRST)
        _wait_for(lambda: active() == "k2")
    child.send_signal(signal.SIGTERM)
    assert child.wait(60) == 0
    assert child.stdout is not None
    rest = [json.loads(line)["event"] for line in child.stdout.read().splitlines()]
    assert "ShuttingDown" in rest


def test_the_config_refuses_what_cannot_run(tmp_path: Path) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(f"{LABEL}:{TOKEN}\n")
    token_file.chmod(0o600)
    tokens = read_admin_tokens(token_file=token_file, token_env=None)
    keyring = KeyringFile(tmp_path / "keys.toml")
    store = sqlite_url(tmp_path / "store.db")
    with pytest.raises(ServeError) as on_port:
        ServeConfig(app="m:r", keyring=keyring, store=store, port=9000, admin=AdminListener(tokens, port=9000))
    assert on_port.value.reason is ServeErrorReason.ADMIN_ON_MCP_PORT
    with pytest.raises(ServeError) as with_stdio:
        ServeConfig(app="m:r", keyring=keyring, store=store, stdio=True, admin=AdminListener(tokens))
    assert with_stdio.value.reason is ServeErrorReason.ADMIN_WITH_STDIO
    with pytest.raises(ServeError) as no_tls:
        AdminListener(tokens, host="10.0.0.1")
    assert no_tls.value.reason is ServeErrorReason.ADMIN_NEEDS_TLS
    # Allowed explicitly, and on loopback, it is made.
    assert AdminListener(tokens, host="10.0.0.1", allow_insecure=True).host == "10.0.0.1"
