"""A store-mode fleet under load for the scenario test: members at fixed loopback addresses (so a restarted member
comes back where a load balancer expects it), clients that route around a member that is not ready or not there
(as a load balancer would: 503 or a refused connection sends the request to the next member), and a watch of the
store's generation."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.cli.support_store_keyring import FleetStore, Member
from tests.fleet.support_served import META, PROTOCOL_VERSION, TOOL

#: How long a client keeps looking for a member that answers one request before it gives the flow up as unserved
#: (a generous bound: a member restarts in a few seconds even on a busy machine).
ROUTE_SECONDS = 60.0
#: The longest a late client waits before its retry (its state lives longer: see the test's lifetime).
LATE_SECONDS = 1.5
#: Seconds a client waits between two flows: the load stays continuous without taking every CPU cycle of a
#: two-core machine from the members it loads.
THINK_SECONDS = 0.1
#: Seconds between two reads of the store's generation by the watch.
WATCH_SECONDS = 0.1
#: The members' request-state lifetime: the rotation's wait is this plus the skew, a few seconds; a late client's
#: retry (at most LATE_SECONDS, plus rerouting) comes well within it.
STATE_LIFETIME = "5s"


def free_port() -> int:
    """A loopback port free now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Slot:
    """One member's fixed place in the fleet: its name, its MCP and admin ports, and the process serving there now
    (replaced on a restart)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.port = free_port()
        self.admin_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.member: Member | None = None
        self.starts = 0

    def start(self, folder: Path, fleet: FleetStore) -> Member:
        """Start (or restart) ``soklet serve --keyring-from-store`` here; each start logs to a folder of its own."""
        self.starts += 1
        logs = folder / f"{self.name}-{self.starts}"
        logs.mkdir()
        ports = ("--port", str(self.port), "--admin-port", str(self.admin_port))
        self.member = Member(logs, fleet, self.name, *ports, "--state-lifetime", STATE_LIFETIME)
        return self.member


@dataclass
class Tally:
    """What the clients saw: flows completed and failed (with what went wrong: no state is ever repeated),
    requests routed elsewhere (503 or no listener), flows no member served within :data:`ROUTE_SECONDS`, and flows
    whose retry came after the store's generation changed since their first round."""

    completed: int = 0
    failures: list[str] = field(default_factory=list)
    rerouted: int = 0
    not_ready: int = 0
    unserved: int = 0
    straddled: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, count in counts.items():
                setattr(self, name, getattr(self, name) + count)

    def fail(self, problem: str) -> None:
        with self.lock:
            self.failures.append(problem)


class GenerationWatch:
    """The store's newest generation, read every :data:`WATCH_SECONDS` on a thread of its own."""

    def __init__(self, url: str) -> None:
        self.generation = 0
        self._url = url
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._watch()), daemon=True)
        self._thread.start()

    async def _watch(self) -> None:
        from soklet_core.store import open_store

        store = open_store(self._url)
        await store.open()
        try:
            while not self._stop.is_set():
                generation = await store.keyring_generation()
                if generation != self.generation:
                    with self._changed:
                        self.generation = generation
                        self._changed.notify_all()
                await asyncio.sleep(WATCH_SECONDS)
        finally:
            await store.close()

    def wait_past(self, generation: int, seconds: float) -> None:
        """Until the generation is past ``generation``, at most ``seconds``."""
        with self._changed:
            self._changed.wait_for(lambda: self.generation > generation, seconds)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _call(client: httpx.Client, url: str, request_id: int, params: dict[str, Any]) -> httpx.Response:
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
    return client.post(url, json=body, headers=headers)


def _routed(
    client: httpx.Client,
    slots: Sequence[Slot],
    order: Sequence[int],
    request_id: int,
    params: dict[str, Any],
    tally: Tally,
) -> tuple[int, dict[str, Any]] | None:
    """Send the request to the first member of ``order`` that serves it (a 503 or a member that is not there sends
    it to the next, round and round, as a load balancer would); that member's index and its JSON-RPC answer, or
    ``None`` when none served it within :data:`ROUTE_SECONDS`."""
    deadline = time.monotonic() + ROUTE_SECONDS
    while time.monotonic() < deadline:
        for index in order:
            try:
                answer = _call(client, slots[index].url, request_id, params)
            except httpx.TransportError:
                tally.add(rerouted=1)
                continue
            if answer.status_code == 503:
                tally.add(rerouted=1, not_ready=1)
                continue
            document: dict[str, Any] = answer.json()
            return index, document
        time.sleep(0.05)
    return None


def flow(
    client: httpx.Client,
    slots: Sequence[Slot],
    turn: int,
    request_id: int,
    tally: Tally,
    watch: GenerationWatch,
    *,
    late: bool,
) -> None:
    """The demo's two-round ``catalog.continue`` flow: the first round on member ``turn`` (or the next that
    serves), the retry, with the approval, on another member (never the first round's); a late client answers
    after the store's generation changed, or after :data:`LATE_SECONDS`."""
    count = len(slots)
    generation = watch.generation
    first = _routed(
        client, slots, [(turn + step) % count for step in range(count)], request_id, {"arguments": {}}, tally
    )
    if first is None:
        tally.add(unserved=1)
        return
    served, answer = first
    result = answer.get("result") or {}
    if result.get("resultType") != "input_required" or not isinstance(result.get("requestState"), str):
        tally.fail(
            f"first round on {slots[served].name}: {json.dumps(answer.get('error') or result.get('resultType'))}"
        )
        return
    if late:
        watch.wait_past(generation, LATE_SECONDS)
    # Another member, never the one that sealed the state: every continuation crosses members.
    others = [(served + 1 + (turn % (count - 1)) + step) % count for step in range(count)]
    order = [index for index in others if index != served]
    params = {
        "arguments": {},
        "inputResponses": {"approval": {"action": "accept", "content": {}}},
        "requestState": result["requestState"],
    }
    retry = _routed(client, slots, order, request_id + 1, params, tally)
    if retry is None:
        tally.add(unserved=1)
        return
    opened, final = retry
    content = (final.get("result") or {}).get("content") or [{}]
    if content[0].get("text") != "Catalog access approved.":
        problem = json.dumps(final.get("error") or (final.get("result") or {}).get("resultType"))
        tally.fail(f"retry on {slots[opened].name} of a state from {slots[served].name}: {problem}")
        return
    tally.add(completed=1, straddled=int(watch.generation > generation))


class Load:
    """``clients`` threads running :func:`flow` until :meth:`stop`; every other client is late."""

    def __init__(self, slots: Sequence[Slot], watch: GenerationWatch, clients: int) -> None:
        self.tally = Tally()
        self._stop = threading.Event()
        self._per_client = [0] * clients
        self._threads = [
            threading.Thread(target=self._client, args=(index, slots, watch), daemon=True) for index in range(clients)
        ]
        for thread in self._threads:
            thread.start()

    def _client(self, index: int, slots: Sequence[Slot], watch: GenerationWatch) -> None:
        request_id = index * 1_000_000
        turn = index
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                request_id += 2
                turn += 1
                before = self.tally.completed
                flow(client, slots, turn, request_id, self.tally, watch, late=index % 2 == 1)
                if self.tally.completed > before:
                    self._per_client[index] += 1
                self._stop.wait(THINK_SECONDS)

    def each_completed(self, count: int) -> bool:
        """Whether every client completed at least ``count`` flows."""
        return min(self._per_client) >= count

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(ROUTE_SECONDS * 3)
