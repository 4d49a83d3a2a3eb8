"""Store mode for the serve tests: a fleet keyring written into a real store under a real KEK file (through
``FleetKeyring``, as ``soklet keys ... --store`` does), and real ``soklet serve --keyring-from-store`` members with
admin listeners on loopback."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from soklet_core.files.kek_source import write_kek_file
from soklet_core.keys import KeyWrapper, ProtectionKey, ProtectionKeyring
from soklet_core.store import FleetKeyring, Heartbeat, LoadedFleetKeyring, open_store
from tests.server.support import Client
from tests.server.support_admin import LABEL, TOKEN

_T = TypeVar("_T")


class FleetStore:
    """A store URL, a KEK file beside the test and the fleet keyring in that store, changed from the test."""

    def __init__(self, folder: Path, url: str) -> None:
        self.url = url
        self.kek_file = folder / "kek"
        self.kek: KeyWrapper = write_kek_file(self.kek_file)
        self.token_file = folder / "admin-token"
        self.token_file.write_text(f"{LABEL}:{TOKEN}\n")
        self.token_file.chmod(0o600)

    def _run(self, work: Callable[[FleetKeyring], Awaitable[_T]]) -> _T:
        async def session() -> _T:
            store = open_store(self.url)
            await store.open()
            try:
                return await work(FleetKeyring(store, self.kek))
            finally:
                await store.close()

        return asyncio.run(session())

    def create(self) -> None:
        """Open the store once (its schema made), with no fleet keyring in it."""

        async def nothing(_fleet: FleetKeyring) -> None:
            return None

        self._run(nothing)

    def initialize(self, key: ProtectionKey) -> LoadedFleetKeyring:
        """The fleet's first keyring (generation 1): ``key`` active."""
        return self._run(lambda fleet: fleet.initialize(ProtectionKeyring(key)))

    def stage(self, key: ProtectionKey) -> LoadedFleetKeyring:
        return self._run(lambda fleet: fleet.stage(key))

    def activate(self, key_id: str) -> LoadedFleetKeyring:
        return self._run(lambda fleet: fleet.activate(key_id))

    def load(self) -> LoadedFleetKeyring | None:
        return self._run(lambda fleet: fleet.load())

    def heartbeats(self) -> dict[str, Heartbeat]:
        """Every heartbeat in the store, by instance name."""

        async def read(fleet: FleetKeyring) -> list[Heartbeat]:
            return await fleet.store.heartbeats()

        return {beat.instance: beat for beat in self._run(read)}


class Member:
    """``soklet serve --keyring-from-store`` with an admin listener; ``facts`` is its start-up JSON document."""

    def __init__(self, folder: Path, fleet: FleetStore, name: str, *extra: str) -> None:
        self.name = name
        self.log_path = folder / f"{name}.log"
        self._stderr = self.log_path.open("w")
        command = [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--json", "--instance", name]
        command += ["--store", fleet.url, "--keyring-from-store", "--kek-file", str(fleet.kek_file)]
        command += ["--admin-port", "0", "--admin-token-file", str(fleet.token_file), *extra]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("{"):
            self.stop()
            raise AssertionError(f"soklet serve did not start: {self.log_path.read_text()[-3000:]}")
        self.facts: dict[str, Any] = json.loads(line)
        self.admin_url: str = self.facts["admin_url"]
        self.client = Client(self.facts["url"].removesuffix("/mcp"))
        self.http = httpx.Client(timeout=20)

    def snapshot(self) -> dict[str, Any]:
        """``GET /v1/keyring``."""
        reply = self.http.get(self.admin_url + "/v1/keyring", headers={"Authorization": f"Bearer {TOKEN}"})
        assert reply.status_code == 200, reply.text
        document: dict[str, Any] = reply.json()
        return document

    def ready(self) -> httpx.Response:
        """``GET /v1/ready`` without a token."""
        return self.http.get(self.admin_url + "/v1/ready")

    def admin(self, path: str, body: dict[str, str] | None = None) -> httpx.Response:
        """``POST`` an admin change."""
        return self.http.post(self.admin_url + path, json=body or {}, headers={"Authorization": f"Bearer {TOKEN}"})

    def metric(self, name: str) -> str | None:
        """The value of the unlabelled metric ``name``, or ``None`` when absent."""
        reply = self.http.get(self.admin_url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert reply.status_code == 200
        lines = [line for line in reply.text.splitlines() if line.startswith(name + " ")]
        return lines[0].rsplit(" ", 1)[1] if lines else None

    def log(self) -> str:
        self._stderr.flush()
        return self.log_path.read_text()

    def stop(self) -> str:
        """SIGTERM (exit 0 asserted when it was running); its whole stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError("soklet serve did not stop on SIGTERM") from None
            assert code == 0, self.log_path.read_text()[-3000:]
        if hasattr(self, "client"):
            self.client.close()
            self.http.close()
        if not self._stderr.closed:
            self._stderr.close()
        return self.log_path.read_text()

    def kill(self) -> None:
        """End it at once if it still runs (cleanup after a failed test)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if not self._stderr.closed:
            self._stderr.close()


def serve_fails(*arguments: str) -> subprocess.CompletedProcess[str]:
    """``soklet serve ARGS`` expected to end at start: its exit code and output (a bounded run)."""
    return subprocess.run(
        [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def wait_for(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    """Poll ``condition`` until true (a generous bound: "does not hang", not a timing)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.1)
