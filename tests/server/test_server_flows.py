"""Input-required flows end to end: real uvicorn on loopback, httpx, no mocks."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest

from soklet_apps import demo
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import BearerTokenAdmission, McpServer, Registry, ServerOptions
from soklet_core.mcp.server._jsonrpc import INTERNAL_ERROR_MESSAGE, INVALID_STATE_MESSAGE
from soklet_core.mcp.server.options import HttpOptions, ProtocolOptions
from soklet_core.protection import ProtectionConfig
from tests.server.support import FORM_CAPS, Client, Entries, build_test_registry, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("test-key"))
ACCEPT = {"action": "accept", "content": {}}


def config(*, rounds: int = 10, lifetime: timedelta = timedelta(minutes=15)) -> ProtectionConfig:
    return ProtectionConfig(
        keyring=KEYRING, maximum_request_state_lifetime=lifetime, maximum_request_state_rounds=rounds
    )


def make_server(entries: Entries, **options: object) -> McpServer:
    registry = Registry.merge(demo.build_registry(), build_test_registry(entries))
    protection = config(rounds=int(options.pop("rounds", 10)), lifetime=options.pop("lifetime", timedelta(minutes=15)))  # type: ignore[arg-type]
    settings: dict[str, Any] = {}
    http = HttpOptions(path=str(options.pop("path"))) if "path" in options else HttpOptions()
    if "versions" in options:
        protocol = ProtocolOptions(supported_versions=options.pop("versions"))  # type: ignore[arg-type]
    else:
        protocol = ProtocolOptions()
    settings["options"] = ServerOptions(protocol=protocol, http=http)
    if "tokens" in options:
        settings["admission"] = BearerTokenAdmission(options.pop("tokens"))  # type: ignore[arg-type]
    assert not options
    return McpServer(registry, protection=protection, **settings)


@pytest.fixture(scope="module")
def entries() -> Entries:
    return Entries()


@pytest.fixture(scope="module")
def base_url(entries: Entries) -> Iterator[str]:
    with running(make_server(entries)) as url:
        yield url


@pytest.fixture
def client(base_url: str) -> Iterator[Client]:
    c = Client(base_url)
    yield c
    c.close()


def assert_opening_refused(reply: object) -> None:
    assert reply.status == 400  # type: ignore[attr-defined]
    assert reply.error == {"code": -32602, "message": INVALID_STATE_MESSAGE}  # type: ignore[attr-defined]


# --- the spec's flows -----------------------------------------------------------------------------------------


def test_catalog_continue_completes_in_two_requests(client: Client) -> None:
    first = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
    assert first.status == 200
    assert first.result["resultType"] == "input_required"
    assert list(first.result["inputRequests"]) == ["approval"]
    assert "ttlMs" not in first.result
    assert "cacheScope" not in first.result
    done = client.retry("catalog.continue", {}, first.state, {"approval": ACCEPT}, capabilities=FORM_CAPS)
    assert done.status == 200
    assert done.result["resultType"] == "complete"
    assert done.text == "Catalog access approved."


@pytest.mark.parametrize(
    ("action", "text"), [("decline", "Catalog access was declined."), ("cancel", "Catalog access was cancelled.")]
)
def test_decline_and_cancel_are_normal_endings(client: Client, action: str, text: str) -> None:
    first = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
    done = client.retry("catalog.continue", {}, first.state, {"approval": {"action": action}}, capabilities=FORM_CAPS)
    assert done.status == 200
    assert done.text == text
    assert "isError" not in done.result


def test_accept_with_unexpected_content_is_asked_again(client: Client) -> None:
    first = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
    answer = {"approval": {"action": "accept", "content": {"admin": True}}}
    again = client.retry("catalog.continue", {}, first.state, answer, capabilities=FORM_CAPS)
    assert again.result["resultType"] == "input_required"
    assert list(again.result["inputRequests"]) == ["approval"]


def test_missing_key_is_requested_again_with_new_state(client: Client) -> None:
    first = client.call("catalog.continue", {}, capabilities=FORM_CAPS)
    again = client.retry("catalog.continue", {}, first.state, {"other": ACCEPT}, capabilities=FORM_CAPS)
    assert again.result["resultType"] == "input_required"
    assert list(again.result["inputRequests"]) == ["approval"]
    assert again.state
    assert again.state != first.state
    done = client.retry("catalog.continue", {}, again.state, {"approval": ACCEPT}, capabilities=FORM_CAPS)
    assert done.text == "Catalog access approved."


def test_multi_round_flow_carries_step_and_deadline(client: Client) -> None:
    reply = client.call("deploy.approve", {"stages": 3}, capabilities=FORM_CAPS)
    states = []
    for stage in (1, 2, 3):
        assert reply.result["resultType"] == "input_required"
        assert f"stage {stage} of 3" in reply.result["inputRequests"]["stage"]["params"]["message"]
        states.append(reply.state)
        answer = {"stage": {"action": "accept", "content": {"approve": True}}}
        reply = client.retry("deploy.approve", {"stages": 3}, reply.state, answer, capabilities=FORM_CAPS)
    assert reply.text == "All 3 stages approved; deploying."
    assert len(set(states)) == 3


def test_unexpected_keys_are_preserved_and_typed_lookup_is_exact(client: Client) -> None:
    responses = {
        "order": {"action": "accept", "content": {"price": 3.50}},
        "extra": {"action": "accept", "content": {"note": "kept", "n": 1.50}},
    }
    raw = (
        '{"jsonrpc":"2.0","id":"r-1","method":"tools/call","params":{"name":"echo.responses","arguments":{},'
        '"inputResponses":{"order":{"action":"accept","content":{"price":3.50}},'
        '"extra":{"action":"accept","content":{"note":"kept","n":1.50}}},'
        '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        '"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}'
    )
    reply = client.call("echo.responses", {}, params={"inputResponses": responses}, raw=raw.encode())
    body = json.loads(reply.text)
    assert body["keys"] == ["order", "extra"]
    assert body["price"] == "3.50"
    assert body["extra"] == '{"action":"accept","content":{"note":"kept","n":1.50}}'


@pytest.mark.parametrize("bad", ["null", "[]", '"x"', '{"order":12345}', '{"order":{"action":"maybe"}}'])
def test_malformed_input_responses_are_refused(client: Client, entries: Entries, bad: str) -> None:
    before = entries["echo"]
    raw = (
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo.responses","arguments":{},'
        f'"inputResponses":{bad},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        '"io.modelcontextprotocol/clientCapabilities":{}}}}'
    )
    reply = client.call("echo.responses", {}, raw=raw.encode())
    assert reply.status == 400
    assert reply.error["code"] == -32602
    assert entries["echo"] == before


# --- capabilities ---------------------------------------------------------------------------------------------


def test_required_capability_is_checked_before_the_handler(client: Client, entries: Entries) -> None:
    before = entries["needs.sampling"]
    reply = client.call("needs.sampling", {}, capabilities={}, params={"requestState": "garbage"})
    assert reply.status == 400
    assert reply.error["code"] == -32021
    assert reply.error["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert reply.error["message"] == "Missing required client capability: sampling"
    assert entries["needs.sampling"] == before
    ok = client.call("needs.sampling", {}, capabilities={"sampling": {}})
    assert ok.text == "had sampling"
    assert entries["needs.sampling"] == before + 1


def test_conditional_capabilities_only_when_emitted_and_all_at_once(client: Client, entries: Entries) -> None:
    before = entries["asks.both"]
    quiet = client.call("asks.both", {}, capabilities={})
    assert quiet.status == 200
    assert quiet.text == "emitted nothing"
    emitted = client.call("asks.both", {"emit": True}, capabilities={}, meta={"progressToken": "t"})
    assert emitted.status == 400
    assert emitted.frames == []
    assert emitted.error["code"] == -32021
    assert emitted.error["data"]["requiredCapabilities"] == {"elicitation": {"form": {}, "url": {}}}
    assert emitted.error["message"] == "Missing required client capability: elicitation.form, elicitation.url"
    partial = client.call("asks.both", {"emit": True}, capabilities={"elicitation": {}})
    assert partial.error["data"]["requiredCapabilities"] == {"elicitation": {"url": {}}}
    assert partial.error["message"] == "Missing required client capability: elicitation.url"
    full = client.call("asks.both", {"emit": True}, capabilities={"elicitation": {"form": {}, "url": {}}})
    assert full.result["resultType"] == "input_required"
    assert entries["asks.both"] == before + 4


def test_held_progress_is_released_when_the_capability_gap_does_not_matter(client: Client) -> None:
    reply = client.call("asks.both", {}, capabilities={}, meta={"progressToken": 9})
    assert reply.headers["content-type"] == "text/event-stream"
    assert [frame.get("method") for frame in reply.frames] == ["notifications/progress", None]
    assert reply.frames[0]["params"]["progressToken"] == 9


# --- binding ----------------------------------------------------------------------------------------------------


def test_arguments_changed_alone_is_refused(client: Client, entries: Entries) -> None:
    first = client.call("probe", {"a": 1}, capabilities=FORM_CAPS)
    before = entries["probe"]
    assert_opening_refused(client.retry("probe", {"a": 2}, first.state, {"done": ACCEPT}, capabilities=FORM_CAPS))
    assert entries["probe"] == before
    same = client.retry("probe", {"a": 1.0}, first.state, {"done": ACCEPT}, capabilities=FORM_CAPS)
    assert same.text.startswith("done after 1 rounds")


def test_method_changed_alone_is_refused(client: Client, entries: Entries) -> None:
    first = client.post("tools/call", {"name": "probe"}, capabilities=FORM_CAPS)
    before = entries["probe-prompt"]
    retry = client.post(
        "prompts/get", {"name": "probe", "requestState": first.state, "inputResponses": {}}, capabilities=FORM_CAPS
    )
    assert_opening_refused(retry)
    assert entries["probe-prompt"] == before


def test_same_request_id_is_refused(client: Client, entries: Entries) -> None:
    first = client.call("probe", {}, capabilities=FORM_CAPS, request_id="same")
    before = entries["probe"]
    retry = client.retry("probe", {}, first.state, {"done": ACCEPT}, capabilities=FORM_CAPS, request_id="same")
    assert_opening_refused(retry)
    assert entries["probe"] == before


def test_tampered_state_and_state_on_a_none_operation_are_refused(client: Client, entries: Entries) -> None:
    first = client.call("probe", {}, capabilities=FORM_CAPS)
    before = entries["probe"]
    tampered = first.state[:-2] + ("A" if first.state[-2] != "A" else "B") + first.state[-1]
    assert_opening_refused(client.retry("probe", {}, tampered, {"done": ACCEPT}, capabilities=FORM_CAPS))
    assert entries["probe"] == before
    plain = entries["plain"]
    refused = client.retry("plain", {}, first.state, {}, capabilities=FORM_CAPS)
    assert refused.status == 400
    assert refused.error["code"] == -32602
    assert entries["plain"] == plain
    wrong_kind = client.call("probe", {}, params={"requestState": 12}, capabilities=FORM_CAPS)
    assert wrong_kind.status == 400
    assert wrong_kind.error["code"] == -32602


def test_path_version_and_partition_changed_alone_are_refused(entries: Entries) -> None:
    tokens = {"token-a": ("alice", "tenant-a"), "token-b": ("bob", "tenant-b")}
    versions = ("2026-07-28", "2026-12-01")
    with (
        running(make_server(entries, tokens=tokens, versions=versions)) as one,
        running(make_server(entries, tokens=tokens, versions=versions, path="/other")) as two,
    ):
        alice, bob = Client(one, token="token-a"), Client(one, token="token-b")
        alice_elsewhere = Client(two, path="/other", token="token-a")
        first = alice.call("probe", {}, capabilities=FORM_CAPS)
        before = entries["probe"]
        retry = ("probe", {}, first.state, {"done": ACCEPT})
        assert_opening_refused(alice_elsewhere.retry(*retry, capabilities=FORM_CAPS))
        assert_opening_refused(alice.retry(*retry, capabilities=FORM_CAPS, version="2026-12-01"))
        assert_opening_refused(bob.retry(*retry, capabilities=FORM_CAPS))
        assert entries["probe"] == before
        trailing_slash = Client(one, path="/mcp/", token="token-a")
        trailing_slash._next_id = 100  # a fresh request id: the state's own id would be refused
        assert trailing_slash.retry(*retry, capabilities=FORM_CAPS).text == "done after 1 rounds; owner=tenant-a"
        unauthorized = Client(one).call("probe", {}, capabilities=FORM_CAPS)
        assert unauthorized.status == 401
        assert unauthorized.headers["www-authenticate"] == "Bearer"
        wrong = Client(one, token="token-c").call("needs.sampling", {}, capabilities={})
        assert wrong.status == 401  # admission comes before the capability check
        for c in (alice, bob, alice_elsewhere, trailing_slash):
            c.close()


# --- lifetime and rounds ------------------------------------------------------------------------------------------


def test_expired_and_over_round_states_never_enter_the_handler(entries: Entries) -> None:
    with (
        running(make_server(entries, rounds=5)) as issuer,
        running(make_server(entries, rounds=2, lifetime=timedelta(seconds=1))) as strict,
    ):
        a, b = Client(issuer), Client(strict)
        reply = a.call("probe", {}, capabilities=FORM_CAPS)
        before = entries["probe"]
        assert_opening_refused(b.retry("probe", {}, reply.state, {}, capabilities=FORM_CAPS))  # 15-min state
        assert entries["probe"] == before
        for _ in range(2):  # rounds 2 and 3
            reply = a.retry("probe", {}, reply.state, {}, capabilities=FORM_CAPS)
        assert reply.result["resultType"] == "input_required"
        short = b.call("probe", {}, capabilities=FORM_CAPS)
        before = entries["probe"]
        assert_opening_refused(b.retry("probe", {}, reply.state, {}, capabilities=FORM_CAPS))  # round 3 > 2
        assert entries["probe"] == before
        second = b.retry("probe", {}, short.state, {}, capabilities=FORM_CAPS)
        assert second.result["resultType"] == "input_required"  # round 2: the final allowed round
        final = b.retry("probe", {}, second.state, {}, capabilities=FORM_CAPS)
        assert final.status == 200
        assert final.error == {"code": -32603, "message": INTERNAL_ERROR_MESSAGE}
        assert "result" not in final.body
        completes = b.retry("probe", {}, second.state, {"done": ACCEPT}, capabilities=FORM_CAPS)
        assert completes.text.startswith("done after 2 rounds")
        a.close()
        b.close()


def test_state_too_large_to_seal_gives_internal_error_and_no_state(client: Client) -> None:
    fits = client.call("big.state", {"size": 40_000}, capabilities=FORM_CAPS)
    assert fits.result["resultType"] == "input_required"
    assert fits.state
    too_big = client.call("big.state", {"size": 60_000}, capabilities=FORM_CAPS)
    assert too_big.status == 200
    assert too_big.error == {"code": -32603, "message": INTERNAL_ERROR_MESSAGE}
    assert "requestState" not in json.dumps(too_big.body)


def test_application_state_is_returned_untouched_up_to_the_limit(client: Client) -> None:
    first = client.call("app.state", {"size": 65_536})
    state = first.state
    assert state is not None
    assert len(state.encode()) == 65_536
    done = client.retry("app.state", {}, state, {})
    assert done.text == f"65536:{state[:3]}"
    over = client.retry("app.state", {}, state + "a", {})
    assert over.status == 400
    assert over.error["code"] == -32602
    refused_emission = client.call("app.state", {"size": 65_537})
    assert refused_emission.error["code"] == -32603


# --- concurrency ------------------------------------------------------------------------------------------------


def test_64_interleaved_flows_from_8_clients_have_no_cross_talk(entries: Entries) -> None:
    tokens = {f"token-{i}": (f"user-{i}", f"tenant-{i}") for i in range(8)}
    with running(make_server(entries, tokens=tokens)) as url:
        barrier = threading.Barrier(8)

        def flows(index: int) -> list[str]:
            c = Client(url, token=f"token-{index}")
            barrier.wait()
            pending = [(c.call("probe", {"flow": index * 100 + k}, capabilities=FORM_CAPS), k) for k in range(8)]
            finished = []
            for reply, k in pending:
                second = c.retry("probe", {"flow": index * 100 + k}, reply.state, {}, capabilities=FORM_CAPS)
                done = c.retry(
                    "probe", {"flow": index * 100 + k}, second.state, {"done": ACCEPT}, capabilities=FORM_CAPS
                )
                finished.append(done.text)
            c.close()
            return finished

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(flows, range(8)))
    for index, texts in enumerate(results):
        assert texts == [f"done after 2 rounds; owner=tenant-{index}"] * 8


def test_sync_handlers_on_the_loop_when_opted_in(entries: Entries) -> None:
    registry = Registry.merge(demo.build_registry(), build_test_registry(entries))
    options = ServerOptions(protocol=ProtocolOptions(sync_handlers_in_thread=False))
    server = McpServer(registry, protection=config(), options=options)
    with running(server) as url:
        c = Client(url)
        first = c.call("catalog.continue", {}, capabilities=FORM_CAPS)
        done = c.retry("catalog.continue", {}, first.state, {"approval": ACCEPT}, capabilities=FORM_CAPS)
        assert done.text == "Catalog access approved."
        c.close()
