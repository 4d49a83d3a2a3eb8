"""The demo's durable ``order.checkout`` over real uvicorn on loopback, with bearer-token admission (alice and bob
in ``tenant-a``, alice again in ``tenant-b``), on both store backends: the workflow resumed through fresh servers
over the same store, two principals interleaved, crossed handles refused without consuming anything, accepted
handles rotated, every refusal the same bytes on the wire, 32 concurrent retries with one handle."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from soklet_apps import demo
from soklet_core.json import JsonObject
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import (
    BearerTokenAdmission,
    CallToolResult,
    HandleRepository,
    McpServer,
    Registry,
    RequestContext,
    RequestStateMode,
    tool,
)
from soklet_core.mcp.server.durable import HANDLE_REJECTED_REASON
from soklet_core.mcp.server.http import uvicorn_config, uvicorn_server_class
from soklet_core.protection import ProtectionConfig
from soklet_core.store import DurableStore, open_store
from tests.server.support import CAPS, FORM_CAPS, PV, VERSION, Client, Reply

KEYRING = ProtectionKeyring(ProtectionKey.generate("workflow-key"))
TOKENS = {
    "token-alice": ("alice", "tenant-a"),
    "token-bob": ("bob", "tenant-a"),
    "token-alice-b": ("alice", "tenant-b"),
}
TOOL = "order.checkout"


def peek_tool(store: DurableStore) -> Registry:
    """A second APPLICATION_PROTECTED tool over the same store: a checkout handle presented here is another
    operation's."""

    handles = HandleRepository(store)

    @tool(name="order.peek", description="Shows a checkout step.", input_schema={"type": "object"},
          input_request_declarations=[demo.FORM],
          request_state_mode=RequestStateMode.APPLICATION_PROTECTED)  # fmt: skip
    async def order_peek(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        state = await handles.resume(context)
        return CallToolResult.from_text(f"step: {state}")

    return Registry(order_peek)


@contextlib.contextmanager
def serving(store_url: str) -> Iterator[str]:
    """A fresh store object, demo registry and McpServer on ``store_url``, served by uvicorn on a free loopback port
    in a thread whose event loop also opens and closes the store; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    port = sock.getsockname()[1]
    started = threading.Event()
    servers: list[Any] = []
    failures: list[BaseException] = []

    async def main() -> None:
        store = open_store(store_url)
        await store.open()
        try:
            registry = Registry.merge(demo.build_registry(store=store), peek_tool(store))
            server = McpServer(
                registry, protection=ProtectionConfig(keyring=KEYRING), admission=BearerTokenAdmission(TOKENS)
            )
            userver = uvicorn_server_class()(uvicorn_config(server, log_level="warning"))
            servers.append(userver)
            started.set()
            await userver.serve(sockets=[sock])
        finally:
            await store.close()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as error:  # reported to the test thread
            failures.append(error)
        finally:
            started.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(20)
    assert not failures, failures
    userver = servers[0]
    for _ in range(2000):
        if userver.started:
            break
        threading.Event().wait(0.01)
    assert userver.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        userver.should_exit = True
        thread.join(20)
        sock.close()
    assert not thread.is_alive()
    assert not failures, failures


@contextlib.contextmanager
def clients(base_url: str, *tokens: str) -> Iterator[list[Client]]:
    made = [Client(base_url, token=token) for token in tokens]
    try:
        yield made
    finally:
        for client in made:
            client.close()


def start(client: Client) -> str:
    reply = client.call(TOOL, {}, capabilities=FORM_CAPS)
    assert reply.status == 200, reply.body
    assert reply.result["resultType"] == "input_required"
    assert list(reply.result["inputRequests"]) == ["quantity"]
    assert reply.state is not None
    return reply.state


def accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def answer(client: Client, handle: str | None, key: str, content: dict[str, Any], name: str = TOOL) -> Reply:
    return client.retry(name, {}, handle, {key: accept(content)}, capabilities=FORM_CAPS)


def asked(reply: Reply, key: str, previous: str) -> str:
    """The fresh handle of an input-required answer asking ``key``; it is never the handle just presented."""
    assert reply.status == 200, reply.body
    assert reply.result["resultType"] == "input_required", reply.result
    assert list(reply.result["inputRequests"]) == [key]
    assert reply.state is not None
    assert reply.state != previous
    return reply.state


def assert_refused(reply: Reply) -> None:
    assert reply.status == 400, reply.body
    assert reply.error == {"code": -32602, "message": "Invalid or expired request state"}


@pytest.mark.slow
def test_checkout_resumes_through_fresh_servers_and_rotates(store_url: str) -> None:
    with serving(store_url) as base, clients(base, "token-alice") as (alice,):
        first = start(alice)
    with serving(store_url) as base, clients(base, "token-alice") as (alice,):
        second = asked(answer(alice, first, "quantity", {"quantity": 3}), "confirm", first)
        again = alice.retry(TOOL, {}, second, {}, capabilities=FORM_CAPS)  # no answer: asked again, rotated
        asked(again, "confirm", second)
        assert "3 items" in again.result["inputRequests"]["confirm"]["params"]["message"]
    with serving(store_url) as base, clients(base, "token-alice") as (alice,):
        # The answer without the confirmation above asked again under a rotated handle: `second` is spent.
        assert_refused(answer(alice, second, "confirm", {"confirm": True}))
        assert_refused(answer(alice, first, "quantity", {"quantity": 3}))  # the first accepted handle, replayed
        third = start(alice)
        fourth = asked(answer(alice, third, "quantity", {"quantity": 2}), "confirm", third)
        done = answer(alice, fourth, "confirm", {"confirm": True})
        assert done.status == 200
        assert done.text == "Order placed: 2 items."
        assert "requestState" not in done.result
        assert_refused(answer(alice, fourth, "confirm", {"confirm": True}))  # the final answer consumed it


@pytest.mark.slow
def test_two_principals_interleaved_crossed_handles_consume_nothing(store_url: str) -> None:
    with serving(store_url) as base, clients(base, "token-alice", "token-bob", "token-alice-b") as (alice, bob, other):
        a1, b1 = start(alice), start(bob)
        assert_refused(answer(bob, a1, "quantity", {"quantity": 9}))  # bob presents alice's handle
        assert_refused(answer(other, a1, "quantity", {"quantity": 9}))  # alice, but another partition
        assert_refused(answer(alice, a1, "quantity", {"quantity": 9}, name="order.peek"))  # another operation
        b2 = asked(answer(bob, b1, "quantity", {"quantity": 5}), "confirm", b1)
        a2 = asked(answer(alice, a1, "quantity", {"quantity": 1}), "confirm", a1)  # alice's entry was untouched
        assert_refused(answer(alice, b2, "confirm", {"confirm": True}))
        bob_done = answer(bob, b2, "confirm", {"confirm": False})
        alice_done = answer(alice, a2, "confirm", {"confirm": True})
        assert (bob_done.text, alice_done.text) == ("Order not placed.", "Order placed: 1 item.")


@pytest.mark.slow
def test_every_refusal_is_the_same_bytes_and_log_reason(store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="soklet.mcp.access")
    with serving(store_url) as base, clients(base, "token-alice", "token-bob", "token-alice-b") as (alice, bob, other):
        live = start(alice)
        spent = start(alice)
        asked(answer(alice, spent, "quantity", {"quantity": 4}), "confirm", spent)
        unknown = "A" * 43
        cases = {
            "missing": (alice, None, TOOL),
            "malformed": (alice, "not-a-handle", TOOL),
            "unknown": (alice, unknown, TOOL),
            "replayed": (alice, spent, TOOL),
            "wrong-principal": (bob, live, TOOL),
            "wrong-partition": (other, live, TOOL),
            "wrong-operation": (alice, live, "order.peek"),
        }
        seen: dict[str, tuple[int, str | None, bytes]] = {}
        for name, (client, handle, operation) in cases.items():
            params: dict[str, Any] = {
                "name": operation,
                "arguments": {},
                "inputResponses": {"quantity": accept({"quantity": 1})},
            }
            if handle is not None:
                params["requestState"] = handle
            params["_meta"] = {PV: VERSION, CAPS: FORM_CAPS}
            body = {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": params}
            response = client.http.post(
                client.url,
                content=json.dumps(body).encode(),
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": VERSION,
                    "Mcp-Method": "tools/call",
                    "Mcp-Name": operation,
                    "Authorization": f"Bearer {client.token}",
                },
            )
            seen[name] = (response.status_code, response.headers.get("content-type"), response.content)
        assert len(set(seen.values())) == 1, seen
        status, _, content = seen["missing"]
        assert status == 400
        assert json.loads(content) == {
            "jsonrpc": "2.0",
            "id": 77,
            "error": {"code": -32602, "message": "Invalid or expired request state"},
        }
        # Nothing was consumed: the live handle still continues.
        asked(answer(alice, live, "quantity", {"quantity": 2}), "confirm", live)
    lines = [record.getMessage() for record in caplog.records if record.name == "soklet.mcp.access"]
    refusals = [line for line in lines if f"reason={HANDLE_REJECTED_REASON}" in line]
    assert len(refusals) == len(cases), lines
    assert not any(live in line or spent in line or unknown in line for line in lines)


@pytest.mark.slow
def test_thirty_two_concurrent_retries_one_wins(store_url: str) -> None:
    with serving(store_url) as base, clients(base, "token-alice") as (alice,):
        handle = start(alice)
        gate = threading.Barrier(32)

        def retry(_: int) -> tuple[int, str | None]:
            with httpx.Client(timeout=30) as http:
                client = Client(base, token="token-alice")
                client.http = http
                gate.wait()
                reply = answer(client, handle, "quantity", {"quantity": 2})
                return reply.status, reply.state if reply.status == 200 else None

        with ThreadPoolExecutor(max_workers=32) as pool:
            outcomes = list(pool.map(retry, range(32)))
        winners = [state for status, state in outcomes if status == 200]
        assert len(winners) == 1, outcomes
        assert sorted(status for status, _ in outcomes) == [200] + [400] * 31
        assert winners[0] is not None
        done = answer(alice, winners[0], "confirm", {"confirm": True})
        assert done.text == "Order placed: 2 items."


def test_without_a_store_the_demo_has_no_checkout() -> None:
    assert demo.build_registry().find_tool(TOOL) is None
    names = [registration.name for registration in demo.build_registry().tools]
    assert names == ["catalog.continue", "account.link", "deploy.approve"]


@pytest.mark.slow
def test_two_instances_sharing_the_store_serve_one_workflow(store_url: str) -> None:
    with (
        serving(store_url) as first,
        serving(store_url) as second,
        clients(first, "token-alice") as (on_first,),
        clients(second, "token-alice") as (on_second,),
    ):
        handle = start(on_first)
        rotated = asked(answer(on_second, handle, "quantity", {"quantity": 7}), "confirm", handle)
        assert_refused(answer(on_first, handle, "quantity", {"quantity": 7}))  # spent on the other instance
        done = answer(on_first, rotated, "confirm", {"confirm": True})
        assert done.text == "Order placed: 7 items."
        assert_refused(answer(on_second, rotated, "confirm", {"confirm": True}))
