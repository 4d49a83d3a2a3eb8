"""A real ``soklet serve`` subprocess for the interoperability tests: the demo app on a free loopback port with an
ephemeral development key, its start-up facts read from ``--json`` on stdout and its log (the access log included)
kept in a file so a test can read which methods each client sent. Also the demo flows every client runs and the
text each one ends with (the Node scripts in clients/flows.mjs run the same four)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import httpx

#: Seconds the server may take to print its start-up facts, and to stop on SIGTERM.
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
#: Not an answer on the wire: open the URL elicitation's page and press its button (:func:`complete_link_page`),
#: then answer accept.
VISIT: dict[str, object] = {"visit": True}
#: (tool, flow label, arguments, the elicitation answers in order, the one text the result carries).
Flows = tuple[tuple[str, str, dict[str, object], tuple[dict[str, object], ...], str], ...]
DEMO_FLOWS: Flows = (
    ("catalog.continue", "accept", {}, ({"action": "accept", "content": {}},), "Catalog access approved."),
    ("catalog.continue", "decline", {}, ({"action": "decline"},), "Catalog access was declined."),
    ("catalog.continue", "cancel", {}, ({"action": "cancel"},), "Catalog access was cancelled."),
    (
        "deploy.approve",
        "stages=2",
        {"stages": 2},
        ({"action": "accept", "content": {"approve": True}},) * 2,
        "All 2 stages approved; deploying.",
    ),
    ("account.link", "url", {}, (VISIT,), "Account linked."),
    (
        "order.checkout",
        "handles",
        {},
        ({"action": "accept", "content": {"quantity": 3}}, {"action": "accept", "content": {"confirm": True}}),
        "Order placed: 3 items.",
    ),
)
#: The flows over stdio: account.link's page is served by the HTTP listener, which ``--stdio`` does not open.
STDIO_FLOWS = tuple(flow for flow in DEMO_FLOWS if flow[0] != "account.link")
#: The demo's tools, as tools/list names them (order.checkout: `soklet serve` always has a store).
DEMO_TOOLS = ["account.link", "catalog.continue", "deploy.approve", "order.checkout"]
_ACCESS_LINE = re.compile(r" soklet\.mcp\.access [A-Z]+ ([a-z_]+=[^\n]*)")
_CSRF_FIELD = re.compile(r'name="csrf" value="([^"]*)"')
_FIELD = re.compile(r"([a-z_]+)=(\S+)")


class Served:
    """One running ``soklet serve --port 0 --json --dev-key``: ``url`` is its MCP endpoint, ``log`` its stderr."""

    def __init__(self, process: subprocess.Popen[str], url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.log = log

    def log_text(self) -> str:
        """Everything the server has logged so far."""
        return self.log.read_text("utf-8", "replace")

    def access_log(self) -> list[dict[str, str]]:
        """Every access-log line so far, in order, as its ``key=value`` fields (method, operation, status, reason)."""
        return access_log_of(self.log_text())

    def access_methods(self) -> list[str]:
        """The ``method=`` of every access-log line so far, in order."""
        return [entry.get("method", "-") for entry in self.access_log()]

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


async def complete_link_page(url: str) -> None:
    """What a user does on the demo's link page: GET it (the form token comes in a hidden field and in a cookie),
    then POST the form with both from the page's own origin. Fails unless both steps succeed."""
    origin = "/".join(url.split("/", 3)[:3])
    async with httpx.AsyncClient(timeout=30) as client:
        page = await client.get(url)
        token = _CSRF_FIELD.search(page.text)
        cookie = page.headers.get("set-cookie", "").split(";", 1)[0]
        assert page.status_code == 200, f"the link page answered {page.status_code}"
        assert token is not None, "the link page has no form token"
        assert cookie, "the link page set no cookie"
        posted = await client.post(
            url,
            content=urlencode({"csrf": token.group(1)}),
            headers={"content-type": "application/x-www-form-urlencoded", "cookie": cookie, "origin": origin},
        )
        assert posted.status_code < 400, f"the link page refused the approval ({posted.status_code})"


def access_log_of(text: str) -> list[dict[str, str]]:
    """The access-log lines in a server's log ``text``, in order, as their ``key=value`` fields."""
    return [dict(_FIELD.findall(fields)) for fields in _ACCESS_LINE.findall(text)]


def stdio_command() -> list[str]:
    """The command a host runs to launch the demo over stdio: ``soklet serve --stdio --dev-key``."""
    return [sys.executable, "-m", "soklet_cli", "serve", "--stdio", "--dev-key"]


@contextmanager
def serving(folder: Path, *extra: str) -> Iterator[Served]:
    """``soklet serve --port 0 --json --dev-key EXTRA`` run from ``folder`` (its log in folder/server.log), stopped on
    exit. Fails with the log's tail when the server exits or says nothing within :data:`START_TIMEOUT`."""
    log = folder / "server.log"
    command = [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--json", "--dev-key", *extra]
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=sink, text=True
        )
    try:
        assert process.stdout is not None
        line = _first_line(process)
        if not line:
            raise AssertionError(f"soklet serve printed no start-up facts; its log ends:\n{log.read_text()[-3000:]}")
        served = Served(process, json.loads(line)["url"], log)
    except BaseException:
        process.kill()
        process.wait()
        raise
    try:
        yield served
    finally:
        served.stop()


def _first_line(process: subprocess.Popen[str]) -> str:
    """The first stdout line, waiting at most :data:`START_TIMEOUT` (a reader thread: a pipe read has no timeout)."""
    lines: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline() if process.stdout else ""))
    reader.daemon = True
    reader.start()
    reader.join(START_TIMEOUT)
    return lines[0] if lines else ""
