"""A reload that would give a live key id other bytes is refused, as the admin API's stage refuses it.

A keyring file hand-edited to other bytes under an id the live keyring holds (the file watch, SIGHUP, the admin
``/v1/keyring/reload``): the live keyring stays, one WARNING line names the id (never material), and the instance
is held not ready (``NotReady.KEYRING_FILE_REFUSED``) until a reload succeeds. A file that cannot be parsed or is
open to other users is refused the same way. In process (``LiveKeyring`` with a ``Readiness``), then through a
real ``soklet serve``: the watcher's WARNING, the unchanged fingerprint, ``soklet_keyring_file_refused`` and a flow
sealed before the edit that still completes once the file is put back (while it is refused the instance is not
ready: its MCP endpoint answers 503).
"""

from __future__ import annotations

import logging
import os
from base64 import urlsafe_b64encode
from pathlib import Path

import httpx
import pytest

from soklet_core.files import atomic_write, read_keyring_file, render_keyring_document
from soklet_core.keys import KeyInUse, KeyringManager, LocalKek, ProtectionKey
from soklet_core.mcp.server.ops import LiveKeyring
from soklet_core.mcp.server.ops._live_keyring import LiveKeyringError, LiveKeyringRefusal
from soklet_core.mcp.server.ops._readiness import NotReady, Readiness
from tests.fleet.support_served import call_tool
from tests.server.support_admin import Instance, write_keyring


def _forms(key: ProtectionKey) -> list[str]:
    """Every way a log could show the key's material."""
    raw = key.material
    return [urlsafe_b64encode(raw).decode().rstrip("="), raw.hex(), raw.hex().upper()]


def _hand_edit(path: Path, key_id: str) -> ProtectionKey:
    """Rewrite the keyring file with other bytes under ``key_id`` (its role kept); the new key."""
    document = read_keyring_file(path)
    keyring = document.keyring()
    other = ProtectionKey.generate(key_id)
    if keyring.active_key.id == key_id:
        changed = type(keyring)(other, list(keyring.verification_keys))
    else:
        changed = keyring.without(key_id).with_staged(other)
    atomic_write(path, render_keyring_document(document.with_keyring(changed)).encode())
    return other


class Held:
    """A LiveKeyring over a real keyring file, with the Readiness it reports to."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "keys.toml"
        self.k1, self.k2 = ProtectionKey.generate("k1"), ProtectionKey.generate("k2")
        write_keyring(self.path, self.k1, self.k2)
        self.original = self.path.read_bytes()
        document = read_keyring_file(self.path)
        self.readiness = Readiness()
        self.live = LiveKeyring(
            KeyringManager(document.keyring()), self.path, document=document, readiness=self.readiness
        )

    def restore(self) -> None:
        atomic_write(self.path, self.original)


@pytest.fixture
def held(tmp_path: Path) -> Held:
    return Held(tmp_path)


@pytest.mark.parametrize("edited", ["k1", "k2"])
def test_a_live_id_given_other_bytes_is_refused_and_holds_the_instance_back(
    held: Held, edited: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = held.live.snapshot()
    other = _hand_edit(held.path, edited)
    with caplog.at_level(logging.INFO), pytest.raises(LiveKeyringError) as refused:
        held.live.reload(actor="file-watch")
    assert refused.value.reason is LiveKeyringRefusal.FILE_DIVERGED
    # The live keyring stays: same fingerprint, same generation, the key's own bytes.
    assert held.live.snapshot().fingerprint == before.fingerprint
    assert held.live.manager.generation == before.generation
    live_key = held.live.manager.current().key(edited)
    assert live_key is not None
    assert live_key.same_material(held.k1 if edited == "k1" else held.k2)
    # Not ready while the file on disk is refused.
    assert held.live.file_refused
    assert held.readiness.reasons == {NotReady.KEYRING_FILE_REFUSED}
    warnings = [record for record in caplog.records if record.name == "soklet.admin"]
    assert len(warnings) == 1
    line = warnings[0].getMessage()
    assert warnings[0].levelno == logging.WARNING
    assert f"key id {edited} other bytes" in line
    assert "keyring-file-diverged" in line
    assert "file-watch" in line
    text = caplog.text
    for key in (held.k1, held.k2, other):
        assert not any(form in text for form in _forms(key))
    assert "action=reload" not in text
    # The file put back: the reload succeeds (nothing changes) and the instance is ready again.
    held.restore()
    held.live.reload(actor="sighup")
    assert not held.live.file_refused
    assert held.readiness.ready
    assert held.live.snapshot().fingerprint == before.fingerprint


def test_a_refused_file_is_cleared_by_a_reload_of_a_good_change(held: Held) -> None:
    _hand_edit(held.path, "k2")
    with pytest.raises(LiveKeyringError):
        held.live.reload(actor="admin")
    # Repaired by dropping the edited id (another change, not a restore): accepted, live, ready.
    document = read_keyring_file(held.path)
    atomic_write(held.path, render_keyring_document(document.with_keyring(document.keyring().without("k2"))).encode())
    held.live.reload(actor="file-watch")
    assert "k2" not in held.live.manager.current()
    assert held.readiness.ready
    assert not held.live.file_refused


def test_an_admin_change_on_a_diverged_file_is_refused_and_marks_it_refused(held: Held) -> None:
    _hand_edit(held.path, "k2")
    with pytest.raises(LiveKeyringError) as refused:
        held.live.stage(ProtectionKey.generate("k3"), actor="ops")
    assert refused.value.reason is LiveKeyringRefusal.FILE_DIVERGED
    assert held.readiness.reasons == {NotReady.KEYRING_FILE_REFUSED}
    held.restore()
    held.live.stage(ProtectionKey.generate("k3"), actor="ops")
    assert held.readiness.ready


def test_an_unparseable_file_is_refused_and_the_last_good_keyring_serves(held: Held) -> None:
    before = held.live.snapshot()
    atomic_write(held.path, b"this is not a keyring = [\n")
    with pytest.raises(LiveKeyringError) as refused:
        held.live.reload(actor="file-watch")
    assert refused.value.reason is LiveKeyringRefusal.FILE_REFUSED
    assert held.live.snapshot().fingerprint == before.fingerprint
    assert held.readiness.reasons == {NotReady.KEYRING_FILE_REFUSED}
    held.restore()
    held.live.reload(actor="file-watch")
    assert held.readiness.ready


def test_a_file_open_to_other_users_is_refused_until_its_mode_is_fixed(held: Held) -> None:
    os.chmod(held.path, 0o644)
    with pytest.raises(LiveKeyringError) as refused:
        held.live.reload(actor="sighup")
    assert refused.value.file_reason is not None
    assert held.readiness.reasons == {NotReady.KEYRING_FILE_REFUSED}
    os.chmod(held.path, 0o600)
    held.live.reload(actor="sighup")
    assert held.readiness.ready


def test_a_file_dropping_a_reserved_key_is_refused_until_the_reservation_ends(held: Held) -> None:
    with held.live.manager.reserve_active_key():  # k1 sealing a state
        held.live.activate("k2", actor="ops")
        document = read_keyring_file(held.path)
        dropped = document.keyring().without("k1")
        atomic_write(held.path, render_keyring_document(document.with_keyring(dropped)).encode())
        with pytest.raises(KeyInUse):
            held.live.reload(actor="file-watch")
        assert held.readiness.reasons == {NotReady.KEYRING_FILE_REFUSED}
    held.live.reload(actor="file-watch")
    assert held.readiness.ready
    assert "k1" not in held.live.manager.current()


def test_without_a_readiness_the_refusal_is_still_reported(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    write_keyring(path, ProtectionKey.generate("k1"))
    document = read_keyring_file(path)
    live = LiveKeyring(KeyringManager(document.keyring()), path, document=document)
    _hand_edit(path, "k1")
    with pytest.raises(LiveKeyringError):
        live.reload(actor="file-watch")
    assert live.file_refused


def _metric(instance: Instance, name: str) -> str | None:
    text = instance.request("GET", "/metrics").text
    return next((line.split(" ", 1)[1] for line in text.splitlines() if line.startswith(name + " ")), None)


def _first_round(http: httpx.Client, url: str) -> str:
    first = call_tool(http, url, 1, {"arguments": {}})
    state = first["result"]["requestState"]
    assert isinstance(state, str)
    return state


def _completes(http: httpx.Client, url: str, state: str, request_id: int) -> bool:
    retry = call_tool(
        http,
        url,
        request_id,
        {"arguments": {}, "inputResponses": {"approval": {"action": "accept", "content": {}}}, "requestState": state},
    )
    content = (retry.get("result") or {}).get("content") or [{}]
    return bool(content[0].get("text") == "Catalog access approved.")


@pytest.mark.slow
def test_the_file_watch_of_a_real_server_refuses_a_hand_edit(tmp_path: Path) -> None:
    k1, k2 = ProtectionKey.generate("k1"), ProtectionKey.generate("k2")
    keyring = tmp_path / "keys.toml"
    write_keyring(keyring, k1, k2)
    original = keyring.read_bytes()
    served = Instance(tmp_path, "--store", f"sqlite:///{tmp_path / 'store.db'}")
    http = httpx.Client(timeout=30)
    try:
        url = served.facts["url"]
        fingerprint = served.snapshot()["fingerprint"]
        assert _metric(served, "soklet_keyring_file_refused") == "0.0"
        sealed_before = _first_round(http, url)
        other = _hand_edit(keyring, "k1")  # the active key: what every new state is sealed with
        served.wait_for(lambda: "keyring-file-diverged" in served.log_text())
        log = served.log_text()
        line = next(line for line in log.splitlines() if "keyring-file-diverged" in line)
        assert "WARNING" in line
        assert "key id k1 other bytes" in line
        assert "file-watch" in line
        assert "action=reload" not in log
        for key in (k1, k2, other):
            assert not any(form in log for form in _forms(key))
        served.wait_for(lambda: _metric(served, "soklet_keyring_file_refused") == "1.0")
        assert served.snapshot()["fingerprint"] == fingerprint
        # Held out of traffic while the file is refused: the probe says why, the gauge says not ready.
        ready = served.request("GET", "/v1/ready", token=None)
        assert (ready.status_code, ready.json()) == (503, {"status": "not-ready", "reason": "keyring-file-refused"})
        assert _metric(served, "soklet_ready") == "0.0"
        # The admin API's reload of the same file is refused the same way (409), and changes nothing.
        reload = served.request("POST", "/v1/keyring/reload", {})
        assert (reload.status_code, reload.json()["error"]) == (409, "keyring-file-diverged")
        assert served.snapshot()["fingerprint"] == fingerprint
        # The file put back: accepted by the next poll, ready again; the state sealed before the edit opens.
        atomic_write(keyring, original)
        served.wait_for(lambda: _metric(served, "soklet_keyring_file_refused") == "0.0")
        assert served.snapshot()["fingerprint"] == fingerprint
        assert served.request("GET", "/v1/ready", token=None).json() == {"status": "ready"}
        assert _completes(http, url, sealed_before, 2)
        assert _completes(http, url, _first_round(http, url), 4)
    finally:
        http.close()
        served.stop()


def test_a_wrapped_keyring_file_is_read_with_the_kek_and_refused_without_it(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    k1, k2 = ProtectionKey.generate("k1"), ProtectionKey.generate("k2")
    write_keyring(path, k1)
    kek, _ = LocalKek.generate()
    document = read_keyring_file(path).wrapped(kek)
    atomic_write(path, render_keyring_document(document).encode())
    assert k1.material.hex() not in path.read_text()
    readiness = Readiness()
    read = read_keyring_file(path, kek=kek)
    live = LiveKeyring(KeyringManager(read.keyring()), path, document=read, readiness=readiness, kek=kek)
    # A change is written wrapped and read back with the KEK.
    live.stage(k2, actor="ops")
    assert urlsafe_b64encode(k2.material).decode().rstrip("=") not in path.read_text()
    live.reload(actor="file-watch")
    assert readiness.ready
    assert "k2" in live.manager.current()
    # Without the KEK the same file is refused: the live keyring stays, the instance is held back.
    blind = LiveKeyring(KeyringManager(read.keyring()), path, document=read, readiness=Readiness())
    with pytest.raises(LiveKeyringError) as refused:
        blind.reload(actor="file-watch")
    assert refused.value.reason is LiveKeyringRefusal.FILE_REFUSED
    assert blind.file_refused
