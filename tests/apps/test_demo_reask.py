"""The demo tools ask again instead of failing: a missing or wrong-shaped ``accept`` gets the same request back with
the state kept; ``account.link`` links only once the page was completed, once, for the same caller. Real uvicorn on
loopback, httpx; the page's approval is done through the shared store (the page itself is tested in a browser)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from soklet_apps import demo
from soklet_apps.link_page import LINK_LIFETIME_SECONDS, ApprovalOutcome, LinkStatus, LinkStore
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
from tests.server.support import FORM_CAPS, Client, Reply, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("reask-key"))
URL_CAPS: dict[str, Any] = {"elicitation": {"url": {}}}
LINK_BASE = "http://127.0.0.1:9/link"
TOKENS = {"token-alice": ("alice", "tenant-a"), "token-bob": ("bob", "tenant-a")}


@pytest.fixture(scope="module")
def links() -> LinkStore:
    return LinkStore()


@pytest.fixture(scope="module")
def base_url(links: LinkStore) -> Iterator[str]:
    registry = demo.build_registry(link_base_url=LINK_BASE, development=True, links=links)
    server = McpServer(registry, protection=ProtectionConfig(keyring=KEYRING), admission=BearerTokenAdmission(TOKENS))
    with running(server) as url:
        yield url


@pytest.fixture
def client(base_url: str) -> Iterator[Client]:
    c = Client(base_url, token="token-alice")
    yield c
    c.close()


def assert_asked_again(reply: Reply, key: str, previous_state: str | None) -> None:
    assert reply.status == 200
    assert reply.result["resultType"] == "input_required", reply.result
    assert list(reply.result["inputRequests"]) == [key]
    assert reply.state
    assert reply.state != previous_state
    assert "isError" not in reply.result


# --- catalog.continue ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "accept", "content": {"admin": True}},
        {"action": "accept", "content": {"approved": "yes", "other": 1}},
    ],
)
def test_catalog_continue_asks_again_on_a_wrong_shaped_accept(client: Client, answer: dict[str, Any]) -> None:
    first = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
    again = client.retry("catalog.continue", {}, first.state, {"approval": answer}, capabilities=FORM_CAPS)
    assert_asked_again(again, "approval", first.state)
    assert again.result["inputRequests"] == first.result["inputRequests"]
    done = client.retry(
        "catalog.continue", {}, again.state, {"approval": {"action": "accept", "content": {}}}, capabilities=FORM_CAPS
    )
    assert done.text == "Catalog access approved."
    assert "isError" not in done.result


# --- deploy.approve --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [{}, {"approve": "yes"}, {"approve": 1}, {"approve": True, "force": True}],
    ids=["missing-field", "string", "number", "extra-field"],
)
def test_deploy_approve_asks_the_same_stage_again(client: Client, content: dict[str, Any]) -> None:
    first = client.call("deploy.approve", {"stages": 2}, capabilities=FORM_CAPS)
    wrong = {"stage": {"action": "accept", "content": content}}
    again = client.retry("deploy.approve", {"stages": 2}, first.state, wrong, capabilities=FORM_CAPS)
    assert_asked_again(again, "stage", first.state)
    assert "stage 1 of 2" in again.result["inputRequests"]["stage"]["params"]["message"]
    right = {"stage": {"action": "accept", "content": {"approve": True}}}
    second = client.retry("deploy.approve", {"stages": 2}, again.state, right, capabilities=FORM_CAPS)
    assert "stage 2 of 2" in second.result["inputRequests"]["stage"]["params"]["message"]
    done = client.retry("deploy.approve", {"stages": 2}, second.state, right, capabilities=FORM_CAPS)
    assert done.text == "All 2 stages approved; deploying."


def test_deploy_approve_still_ends_normally_on_decline(client: Client) -> None:
    first = client.call("deploy.approve", {"stages": 2}, capabilities=FORM_CAPS)
    done = client.retry(
        "deploy.approve", {"stages": 2}, first.state, {"stage": {"action": "decline"}}, capabilities=FORM_CAPS
    )
    assert done.text == "Deployment stopped at stage 1 of 2."
    assert "isError" not in done.result


# --- account.link ----------------------------------------------------------------------------------------------


def link_url(reply: Reply) -> str:
    url: str = reply.result["inputRequests"]["link"]["params"]["url"]
    assert url.startswith(LINK_BASE + "/")
    return url


def approve(links: LinkStore, url: str) -> None:
    handle = url.rsplit("/", 1)[1]
    view = links.view(handle)
    assert view is not None
    assert links.approve(handle, form_token=view.csrf, cookie_tokens=[view.csrf]) is ApprovalOutcome.APPROVED


ACCEPT = {"link": {"action": "accept"}}


def test_account_link_asks_again_until_the_page_is_completed(client: Client, links: LinkStore) -> None:
    first = client.call("account.link", {}, capabilities=URL_CAPS)
    url = link_url(first)
    early = client.retry("account.link", {}, first.state, ACCEPT, capabilities=URL_CAPS)
    assert_asked_again(early, "link", first.state)
    assert link_url(early) == url  # the same page, not a new handle
    wrong = client.retry(
        "account.link", {}, early.state, {"link": {"action": "accept", "content": {"x": 1}}}, capabilities=URL_CAPS
    )
    assert_asked_again(wrong, "link", early.state)
    assert link_url(wrong) == url
    approve(links, url)
    done = client.retry("account.link", {}, wrong.state, ACCEPT, capabilities=URL_CAPS)
    assert done.text == "Account linked."
    assert "isError" not in done.result
    # Single use: the same (still valid) state again finds the record consumed.
    replay = client.retry("account.link", {}, wrong.state, ACCEPT, capabilities=URL_CAPS)
    assert replay.result["isError"] is True
    assert replay.text == "Account linking did not complete; start again."


@pytest.mark.parametrize(("action", "text"), [("decline", "declined"), ("cancel", "cancelled")])
def test_account_link_decline_and_cancel_are_normal_endings(client: Client, action: str, text: str) -> None:
    first = client.call("account.link", {}, capabilities=URL_CAPS)
    done = client.retry("account.link", {}, first.state, {"link": {"action": action}}, capabilities=URL_CAPS)
    assert done.text == f"Account linking was {text}."
    assert "isError" not in done.result


# --- the store's binding, directly -----------------------------------------------------------------------------


def context(subject: str | None, partition: str) -> RequestContext:
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


def test_store_links_only_the_bound_caller_and_only_once() -> None:
    store = LinkStore()
    alice = context("alice", "tenant-a")
    handle = store.mint(alice)
    assert isinstance(handle, str)  # minted (not a LinkRefusal)
    assert store.consume(handle, alice) is LinkStatus.PENDING
    view = store.view(handle)
    assert view is not None
    assert store.approve(handle, form_token=view.csrf, cookie_tokens=[]) is ApprovalOutcome.FORBIDDEN
    assert store.approve(handle, form_token=None, cookie_tokens=[view.csrf]) is ApprovalOutcome.FORBIDDEN
    assert store.approve(handle, form_token=view.csrf, cookie_tokens=["x" * 43]) is ApprovalOutcome.FORBIDDEN
    assert store.approve(handle, form_token=view.csrf, cookie_tokens=[view.csrf]) is ApprovalOutcome.APPROVED
    assert store.approve(handle, form_token=view.csrf, cookie_tokens=[view.csrf]) is ApprovalOutcome.USED
    # Another subject, or the same subject in another partition, cannot consume it (and leaves it in place).
    assert store.consume(handle, context("bob", "tenant-a")) is LinkStatus.GONE
    assert store.consume(handle, context("alice", "tenant-b")) is LinkStatus.GONE
    assert store.consume(handle, alice) is LinkStatus.LINKED
    assert store.consume(handle, alice) is LinkStatus.GONE
    assert store.view(handle) is None


def test_store_records_expire() -> None:
    now = [1_000_000.0]
    store = LinkStore(clock=lambda: now[0])
    alice = context("alice", "tenant-a")
    handle = store.mint(alice)
    assert isinstance(handle, str)  # minted (not a LinkRefusal)
    view = store.view(handle)
    assert view is not None
    assert view.expires_at == 1_000_000.0 + LINK_LIFETIME_SECONDS
    now[0] += LINK_LIFETIME_SECONDS
    assert store.view(handle) is None
    assert store.approve(handle, form_token=view.csrf, cookie_tokens=[view.csrf]) is ApprovalOutcome.GONE
    assert store.consume(handle, alice) is LinkStatus.GONE
    assert len(store) == 0
