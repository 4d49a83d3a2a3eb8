"""Real ``soklet serve`` processes with admin listeners for the fleet rotation tests, a fleet file naming them,
a minimal MCP client for the demo's multi-round ``catalog.continue`` flow, and a loopback relay a test waits on
(a client has had its answer) instead of sleeping."""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

TOKEN = "fleetRotateToken-5b1e8f27c94a06d3"
PROTOCOL_VERSION = "2026-07-28"
TOOL = "catalog.continue"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}


class Served:
    """One ``soklet serve --admin-port 0`` with its own keyring file; ``url`` is the MCP endpoint,
    ``admin_url`` the admin base URL. It reports ``name`` as its instance name, or, when not ``named``, the
    default one (``--instance`` not given)."""

    def __init__(self, folder: Path, name: str, keyring: Path, *extra: str, named: bool = True) -> None:
        self.name = name
        self.keyring = keyring
        self.log = (folder / f"{name}.log").open("w")
        command = [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--json", "--keyring", str(keyring)]
        command += ["--admin-port", "0", "--admin-token-file", str(folder / "token")]
        command += [*(["--instance", name] if named else []), *extra]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.log, text=True)
        assert self.process.stdout is not None
        facts = json.loads(self.process.stdout.readline())
        self.url: str = facts["url"]
        self.admin_url: str = facts["admin_url"]

    def snapshot(self) -> dict[str, Any]:
        """``GET /v1/keyring``."""
        answer = httpx.get(self.admin_url + "/v1/keyring", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        answer.raise_for_status()
        document: dict[str, Any] = answer.json()
        return document

    def stage(self, key_id: str, material: str) -> int:
        """``POST /v1/keyring/stage``; the status."""
        answer = httpx.post(
            self.admin_url + "/v1/keyring/stage",
            headers={"Authorization": f"Bearer {TOKEN}"},
            json={"id": key_id, "material": material},
            timeout=10,
        )
        return answer.status_code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def soklet(folder: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m soklet_cli ARGS`` in ``folder``."""
    return subprocess.run(
        [sys.executable, "-m", "soklet_cli", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def start_fleet(folder: Path, names: Sequence[str], *extra: str) -> dict[str, Served]:
    """``names`` serving copies of one fresh keyring (active key ``2026-08``), each file its own, and a fleet
    file ``fleet.toml`` naming their admin listeners with the token file ``token``."""
    token = folder / "token"
    token.write_text(f"ops:{TOKEN}\n")
    token.chmod(0o600)
    base = folder / "base.toml"
    assert soklet(folder, "keys", "generate", "--id", "2026-08", "--keyring", str(base)).returncode == 0
    served: dict[str, Served] = {}
    try:
        for name in names:
            shutil.copy2(base, folder / f"{name}.toml")
            served[name] = Served(folder, name, folder / f"{name}.toml", *extra)
    except BaseException:
        stop_all(served)
        raise
    lines = ['[defaults]\nadmin_token_file = "token"\n']
    for instance in served.values():
        lines.append(f'[[instances]]\nname = "{instance.name}"\nurl = "{instance.admin_url}"\n')
    (folder / "fleet.toml").write_text("\n".join(lines))
    return served


class Relay:
    """A loopback TCP relay to ``127.0.0.1:port`` that counts the connections it carried to their end: a test
    waits on :meth:`wait_for` until a client (such as ``soklet fleet check``) has read an answer, whatever the
    machine's load, instead of sleeping and hoping it did. ``url`` is the relay's ``http://`` base URL."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._carried = 0
        self._condition = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 60) -> bool:
        """Whether ``count`` connections were carried to their end within ``timeout`` seconds."""
        with self._condition:
            return self._condition.wait_for(lambda: self._carried >= count, timeout)

    def close(self) -> None:
        """Stop accepting (connections under way finish on their own)."""
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._carry, args=(client,), daemon=True).start()

    def _carry(self, client: socket.socket) -> None:
        with client, socket.create_connection(("127.0.0.1", self._port)) as upstream:
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()
        with self._condition:
            self._carried += 1
            self._condition.notify_all()


class ShiftedClockRelay(Relay):
    """A :class:`Relay` that moves the ``Date`` header of each answer by ``shift`` seconds: the instance behind it
    looks, to a client measuring clocks, as if its clock were ``shift`` seconds ahead (negative: behind). The
    instance itself is real and unchanged."""

    def __init__(self, port: int, shift: float) -> None:
        self._shift = shift
        super().__init__(port)

    def _carry(self, client: socket.socket) -> None:
        with client, socket.create_connection(("127.0.0.1", self._port)) as upstream:
            back = threading.Thread(target=self._pump_shifted, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()
        with self._condition:
            self._carried += 1
            self._condition.notify_all()

    def _pump_shifted(self, source: socket.socket, sink: socket.socket) -> None:
        head = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in head and (data := source.recv(65536)):
                head += data
            end = head.find(b"\r\n\r\n")
            if end >= 0:
                lines = head[:end].split(b"\r\n")
                for index, line in enumerate(lines):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"date":
                        moment = email.utils.parsedate_to_datetime(value.strip().decode("ascii"))
                        shifted = moment + datetime.timedelta(seconds=self._shift)
                        lines[index] = b"date: " + email.utils.format_datetime(shifted, usegmt=True).encode("ascii")
                head = b"\r\n".join(lines) + head[end:]
            sink.sendall(head)
        _pump(source, sink)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    # Until the source's end of stream, then the sink's: the far side then closes in its turn.
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def stop_all(served: dict[str, Served]) -> None:
    """Stop every instance."""
    for instance in served.values():
        instance.stop()


def call_tool(client: httpx.Client, url: str, request_id: int, params: dict[str, Any]) -> dict[str, Any]:
    """One ``tools/call`` of :data:`TOOL`; the JSON-RPC answer."""
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": TOOL, **params, "_meta": META},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": TOOL,
    }
    answer = client.post(url, json=body, headers=headers)
    document: dict[str, Any] = answer.json()
    return document


def multi_round(
    client: httpx.Client, first_url: str, retry_url: str, request_id: int, pause: float = 0.0
) -> str | None:
    """The demo's two-round flow: the first call on ``first_url`` answers ``input_required`` with a
    ``requestState``, the retry with the approval on ``retry_url`` after ``pause`` seconds (a person answering)
    completes. ``None`` when it did, else what went wrong (no secret: the state is never repeated)."""
    first = call_tool(client, first_url, request_id, {"arguments": {}})
    result = first.get("result") or {}
    if result.get("resultType") != "input_required" or not isinstance(result.get("requestState"), str):
        return f"first round: {json.dumps(first.get('error') or result.get('resultType'))}"
    if pause:
        time.sleep(pause)
    retry = call_tool(
        client,
        retry_url,
        request_id + 1,
        {
            "arguments": {},
            "inputResponses": {"approval": {"action": "accept", "content": {}}},
            "requestState": result["requestState"],
        },
    )
    final = retry.get("result") or {}
    content = final.get("content") or [{}]
    if content[0].get("text") != "Catalog access approved.":
        return f"retry: {json.dumps(retry.get('error') or final.get('resultType'))}"
    return None
