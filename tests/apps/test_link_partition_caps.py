"""``account.link`` pending links are capped per partition: one partition at its cap is refused with a clear tool
error while every other partition still gets links; the store-wide cap stays as a backstop.

Before the cap, 4,095 calls from one caller in 4.4 s filled the whole store and blocked the tool for everyone for
the links' 10-minute lifetime.
"""

from __future__ import annotations

from typing import Any

from soklet_apps import demo
from soklet_apps.link_page import (
    LINK_LIFETIME_SECONDS,
    MAX_LINK_RECORDS,
    MAX_PENDING_LINKS_PER_PARTITION,
    LinkRefusal,
    LinkStatus,
    LinkStore,
)
from soklet_core.json import JsonValue
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import (
    BearerTokenAdmission,
    ClientCapabilities,
    Identity,
    InputResponses,
    McpServer,
    RequestContext,
    RequestStateMode,
)
from soklet_core.protection import ProtectionConfig
from tests.server.support import Client, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("link-caps"))
URL_CAPS: dict[str, Any] = {"elicitation": {"url": {}}}
LINK_BASE = "http://127.0.0.1:9/link"
TOKENS = {"token-mallory": ("mallory", "tenant-m"), "token-alice": ("alice", "tenant-a")}


def context(subject: str, partition: str) -> RequestContext:
    return RequestContext(
        identity=Identity(subject),
        partition=partition,
        client_capabilities=ClientCapabilities.from_mapping(URL_CAPS),
        protocol_version="2026-07-28",
        request_id=JsonValue.from_python(1),  # type: ignore[arg-type]
        method="tools/call",
        operation_name="account.link",
        input_responses=InputResponses.from_responses({}),
        request_state_mode=RequestStateMode.NONE,
        framework_request_state=None,
    )


def test_the_cap_is_a_named_constant_well_under_the_store_cap() -> None:
    assert MAX_PENDING_LINKS_PER_PARTITION == 64
    assert MAX_LINK_RECORDS // MAX_PENDING_LINKS_PER_PARTITION == 64  # the backstop needs 64 full partitions


def test_one_partition_at_its_cap_is_refused_while_another_still_gets_links() -> None:
    now = [1_000_000.0]
    store = LinkStore(clock=lambda: now[0])
    mallory, alice = context("mallory", "tenant-m"), context("alice", "tenant-a")
    handles = [store.mint(mallory) for _ in range(MAX_PENDING_LINKS_PER_PARTITION)]
    assert all(isinstance(handle, str) for handle in handles)
    assert store.mint(mallory) is LinkRefusal.PARTITION_FULL
    # Another subject of the same partition shares its cap; another partition does not.
    assert store.mint(context("mallory-2", "tenant-m")) is LinkRefusal.PARTITION_FULL
    assert isinstance(store.mint(alice), str)
    assert store.pending(mallory) == MAX_PENDING_LINKS_PER_PARTITION
    assert store.pending(alice) == 1
    # A link that ends (declined: released; linked: consumed) frees its place at once.
    first = handles[0]
    assert isinstance(first, str)
    assert store.release(first, alice) is False  # not alice's: untouched
    assert store.release(first, mallory) is True
    assert isinstance(store.mint(mallory), str)
    assert store.mint(mallory) is LinkRefusal.PARTITION_FULL
    # And every one of them frees its place when it expires.
    now[0] += LINK_LIFETIME_SECONDS
    assert isinstance(store.mint(mallory), str)
    assert store.pending(mallory) == 1


def test_the_store_wide_cap_stays_a_backstop() -> None:
    store = LinkStore()
    partitions = MAX_LINK_RECORDS // MAX_PENDING_LINKS_PER_PARTITION
    for index in range(partitions):
        caller = context("user", f"tenant-{index}")
        for _ in range(MAX_PENDING_LINKS_PER_PARTITION):
            assert isinstance(store.mint(caller), str)
    assert len(store) == MAX_LINK_RECORDS
    assert store.mint(context("user", "tenant-new")) is LinkRefusal.STORE_FULL
    assert store.mint(context("user", "tenant-0")) is LinkRefusal.PARTITION_FULL


def test_served_one_partition_cannot_block_account_link_for_another() -> None:
    links = LinkStore()
    registry = demo.build_registry(link_base_url=LINK_BASE, development=True, links=links)
    server = McpServer(registry, protection=ProtectionConfig(keyring=KEYRING), admission=BearerTokenAdmission(TOKENS))
    with running(server) as base:
        mallory, alice = Client(base, token="token-mallory"), Client(base, token="token-alice")
        try:
            for _ in range(MAX_PENDING_LINKS_PER_PARTITION):
                reply = mallory.call("account.link", {}, capabilities=URL_CAPS)
                assert reply.result["resultType"] == "input_required", reply.result
            refused = mallory.call("account.link", {}, capabilities=URL_CAPS)
            assert refused.status == 200
            assert refused.result["isError"] is True
            assert refused.text.startswith("Too many account links are waiting for this caller's partition")
            first = alice.call("account.link", {}, capabilities=URL_CAPS)
            assert first.result["resultType"] == "input_required", first.result
            # Declining ends the link and frees its place for the next one.
            declined = alice.retry(
                "account.link", {}, first.state, {"link": {"action": "decline"}}, capabilities=URL_CAPS
            )
            assert declined.text == "Account linking was declined."
            handle = first.result["inputRequests"]["link"]["params"]["url"].rsplit("/", 1)[1]
            assert links.consume(handle, context("alice", "tenant-a")) is LinkStatus.GONE
        finally:
            mallory.close()
            alice.close()
