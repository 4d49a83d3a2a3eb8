"""A real ``soklet serve --store`` subprocess and a tasks-extension client over it, for the store tests."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soklet_core.keys import ProtectionKey
from soklet_core.protocol import TASKS_EXTENSION
from tests.server.support import Client, Reply
from tests.server.support_admin import write_keyring

#: What every task request declares: form elicitation and the tasks extension.
TASK_CAPS: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
#: The answer that confirms ``confirm_delete``.
CONFIRM = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def shared_keyring(folder: Path) -> Path:
    """A keyring file (0600) in ``folder``, for instances that must open each other's sealed states."""
    path = folder / "keys.toml"
    if not path.exists():
        write_keyring(path, ProtectionKey.generate("k1"))
    return path


class Served:
    """``soklet serve --port 0 --json ARGS`` with stderr in a file; ``facts`` is its start-up JSON document."""

    def __init__(self, folder: Path, *arguments: str, env: dict[str, str] | None = None, name: str = "serve") -> None:
        self.log = folder / f"{name}.log"
        self._stderr = self.log.open("w")
        command = [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--json", *arguments]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("{"):
            self.stop()
            raise AssertionError(f"soklet serve did not start: {self.log.read_text()[-3000:]}")
        self.facts: dict[str, Any] = json.loads(line)
        self.client = Client(self.facts["url"].removesuffix("/mcp"))

    def call_task(self, tool: str, arguments: dict[str, Any]) -> str:
        """Create a task with ``tools/call``; its id."""
        reply = self.client.call(tool, arguments, capabilities=TASK_CAPS)
        result = reply.result
        assert result["resultType"] == "task", result
        task_id: str = result["taskId"]
        return task_id

    def tasks(self, method: str, task_id: str, **params: Any) -> Reply:
        """``tasks/get``, ``tasks/update`` or ``tasks/cancel`` of ``task_id`` (Mcp-Name is the task id)."""
        return self.client.post(
            method, {"taskId": task_id, **params}, capabilities=TASK_CAPS, headers={"Mcp-Name": task_id}
        )

    def get(self, task_id: str) -> dict[str, Any]:
        """The DetailedTask ``tasks/get`` answers."""
        return self.tasks("tasks/get", task_id).result

    def wait_for_status(self, task_id: str, status: str, seconds: float = 30.0) -> dict[str, Any]:
        """Poll ``tasks/get`` until the task is in ``status`` (a generous bound: "does not hang", not a timing)."""
        return wait_until(lambda: self.get(task_id), lambda task: task["status"] == status, seconds)

    def stop(self) -> str:
        """SIGTERM; returns stderr. The exit status is asserted 0 (a requested stop is a normal ending)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError("soklet serve did not stop on SIGTERM") from None
            assert code == 0, self.log.read_text()[-3000:]
        if hasattr(self, "client"):
            self.client.close()
        self._stderr.close()
        return self.log.read_text()

    def kill(self) -> None:
        """End it at once if it still runs (cleanup after a failed test)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if not self._stderr.closed:
            self._stderr.close()


def wait_until(
    read: Callable[[], dict[str, Any]], done: Callable[[dict[str, Any]], bool], seconds: float
) -> dict[str, Any]:
    """``read()`` again until ``done`` holds; the last reading."""
    deadline = time.monotonic() + seconds
    while True:
        value = read()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached; last reading: {value}")
        time.sleep(0.1)
