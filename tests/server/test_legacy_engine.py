"""The 2025-era engine driven in process: a real Engine over the demo registry with a real keyring, and a test
client channel that answers the server's requests by posting its JSON-RPC responses back through the engine (the
real client side of the engine, not a mock of soklet)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from soklet_apps import demo
from soklet_core.json import JsonNumber, JsonObject, JsonValue, encode_wire, parse
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import (
    BearerTokenAdmission,
    CallToolResult,
    GetPromptResult,
    InputRequestDeclaration,
    InputRequiredResult,
    InputRequirement,
    PromptMessage,
    Registry,
    RequestContext,
    form_request,
    prompt,
    tool,
)
from soklet_core.mcp.model import InputRequestType, may_request_input
from soklet_core.mcp.server._headers import HttpRequest
from soklet_core.mcp.server._jsonrpc import DispatchResult
from soklet_core.mcp.server.engine import Engine
from soklet_core.mcp.server.http._dispatch import HttpDispatch
from soklet_core.mcp.server.legacy._engine import (
    LEGACY_PROTOCOL_VERSIONS,
    SESSION_HEADER,
    LegacyProtocol,
    LegacyRequest,
    ProtocolEras,
    era_from_headers,
    is_legacy_message,
    legacy_capabilities,
)
from soklet_core.mcp.server.legacy._sessions import MAX_INFLIGHT_PER_SESSION
from soklet_core.mcp.server.options import SessionOptions
from soklet_core.protection import ProtectionConfig, RequestStateSealer

KEYRING = ProtectionKeyring(ProtectionKey.generate("legacy-engine"))
PATH = "/mcp"
FORM: dict[str, Any] = {"elicitation": {}}
MODERN = ("2026-07-28",)
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
Answer = Callable[[dict[str, Any]], dict[str, Any] | None]


def engine(
    *,
    registry: Registry | None = None,
    rounds: int | None = None,
    timeout: float = 300.0,
    eras: ProtocolEras = ProtocolEras.BOTH,
    admission: BearerTokenAdmission | None = None,
) -> LegacyProtocol:
    config = (
        ProtectionConfig(keyring=KEYRING)
        if rounds is None
        else ProtectionConfig(keyring=KEYRING, maximum_request_state_rounds=rounds)
    )
    sessions = SessionOptions(input_timeout_seconds=timeout)
    return LegacyProtocol(core(registry, config, admission), eras=eras, sessions=sessions)


def core(
    registry: Registry | None = None,
    config: ProtectionConfig | None = None,
    admission: BearerTokenAdmission | None = None,
) -> Engine:
    """The engine McpServer builds: the same registry, sealer and admission (no HTTP app needed here)."""
    sealer = RequestStateSealer(config or ProtectionConfig(keyring=KEYRING))
    return Engine(registry=registry or demo.build_registry(), sealer=sealer, admission=admission)


async def modern_post(protocol: LegacyProtocol, sent: dict[str, Any]) -> DispatchResult:
    """``sent`` as a 2026-07-28 client POSTs it to the same engine: with its ``_meta`` (the version, form
    elicitation) and the headers that go with it."""
    params = {**sent["params"], "_meta": {PV: "2026-07-28", CAPS: FORM}}
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": sent["method"], "mcp-name": params["name"]}
    raw = json.dumps({**sent, "params": params}).encode()
    return await HttpDispatch(protocol.engine).dispatch(HttpRequest(PATH, headers, raw))


def message(value: dict[str, Any]) -> JsonValue:
    return parse(json.dumps(value).encode())


def body(result: DispatchResult) -> dict[str, Any]:
    assert result.body is not None
    decoded: dict[str, Any] = json.loads(result.body)
    return decoded


@dataclass
class Channel:
    """The client end of one request: records what the server sent and answers through the engine."""

    protocol: LegacyProtocol
    session_id: str
    answer: Answer
    headers: dict[str, str] = field(default_factory=dict)
    sent: list[dict[str, Any]] = field(default_factory=list)
    replies: list[DispatchResult] = field(default_factory=list)
    gone: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def cancelled(self) -> bool:
        return self.gone

    def send(self, frame: JsonObject) -> None:
        sent = _plain(frame)
        self.sent.append(sent)
        if "id" not in sent:
            return
        reply = self.answer(sent)
        if reply is not None:
            self.tasks.append(asyncio.get_running_loop().create_task(self._post(reply)))

    async def _post(self, reply: dict[str, Any]) -> None:
        headers = {SESSION_HEADER: self.session_id, **self.headers}
        result = await self.protocol.handle(LegacyRequest(PATH, headers, message(reply)), None)
        self.replies.append(result)


def _plain(value: JsonValue) -> Any:
    return json.loads(encode_wire(value))


def accept(content: dict[str, Any] | None = None) -> Answer:
    return lambda frame: {"jsonrpc": "2.0", "id": frame["id"], "result": {"action": "accept", "content": content or {}}}


def action(name: str) -> Answer:
    return lambda frame: {"jsonrpc": "2.0", "id": frame["id"], "result": {"action": name}}


def action_with_null_content(name: str) -> Answer:
    # As some 2025 clients write an absent content.
    return lambda frame: {"jsonrpc": "2.0", "id": frame["id"], "result": {"action": name, "content": None}}


def never(frame: dict[str, Any]) -> dict[str, Any] | None:
    return None


async def initialize(
    protocol: LegacyProtocol,
    capabilities: Any = None,
    version: str = "2025-11-25",
    headers: dict[str, str] | None = None,
) -> str:
    params: dict[str, Any] = {"protocolVersion": version, "clientInfo": {"name": "test", "version": "1"}}
    params["capabilities"] = FORM if capabilities is None else capabilities
    result = await protocol.handle(
        LegacyRequest(
            PATH, headers or {}, message({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        ),
        None,
    )
    assert result.status == 200, body(result)
    assert body(result)["result"]["protocolVersion"] in LEGACY_PROTOCOL_VERSIONS
    (name, session_id), *_ = result.headers
    assert name == SESSION_HEADER
    done = await protocol.handle(
        LegacyRequest(
            PATH,
            {SESSION_HEADER: session_id, **(headers or {})},
            message({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ),
        None,
    )
    assert done.status == 202
    return session_id


async def call(
    protocol: LegacyProtocol,
    session_id: str,
    method: str,
    params: dict[str, Any] | None = None,
    answer: Answer = never,
    *,
    request_id: Any = 7,
    headers: dict[str, str] | None = None,
) -> tuple[DispatchResult, Channel]:
    channel = Channel(protocol, session_id, answer, dict(headers or {}))
    sent: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        sent["params"] = params
    result = await protocol.handle(
        LegacyRequest(PATH, {SESSION_HEADER: session_id, **(headers or {})}, message(sent)), channel
    )
    await asyncio.gather(*channel.tasks)
    return result, channel


def tool_text(result: DispatchResult) -> tuple[str, bool]:
    decoded = body(result)
    assert "result" in decoded, decoded
    content = decoded["result"]["content"]
    return content[0]["text"], bool(decoded["result"].get("isError", False))


# ------------------------------------------------------------------------------------------------ handshake


def test_initialize_negotiates_and_answers_the_server_capabilities() -> None:
    async def run() -> None:
        protocol = engine()
        for requested, expected in (("2025-06-18", "2025-06-18"), ("2024-11-05", "2025-11-25"), (7, "2025-11-25")):
            result = await protocol.handle(
                LegacyRequest(
                    PATH,
                    {},
                    message(
                        {
                            "jsonrpc": "2.0",
                            "id": "i",
                            "method": "initialize",
                            "params": {"protocolVersion": requested, "capabilities": {}},
                        }
                    ),
                ),
                None,
            )
            answer = body(result)["result"]
            assert answer["protocolVersion"] == expected
            assert answer["capabilities"] == {"tools": {}}  # the demo holds tools only: nothing else is advertised
            assert answer["serverInfo"]["name"] == "soklet"
            assert "resultType" not in answer
        assert len(protocol.sessions) == 3

    asyncio.run(run())


def test_initialize_refuses_capabilities_that_are_not_an_object() -> None:
    async def run() -> None:
        protocol = engine()
        result = await protocol.handle(
            LegacyRequest(
                PATH,
                {},
                message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": [1]}}),
            ),
            None,
        )
        assert result.status == 400
        assert body(result)["error"]["code"] == -32602
        assert len(protocol.sessions) == 0

    asyncio.run(run())


def test_capabilities_translate_to_the_modern_shape() -> None:
    full = legacy_capabilities(message({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}))
    assert full.elicitation_form
    assert full.elicitation_url
    assert full.sampling
    assert full.roots
    old = legacy_capabilities(message({"elicitation": {}}))
    assert old.elicitation_form
    assert not old.elicitation_url
    dropped = legacy_capabilities(message({"sampling": 3, "elicitation": {"url": 1, "form": {}}, "tasks": {}}))
    assert dropped.to_wire() == message({"elicitation": {"form": {}}, "tasks": {}})


def test_modern_only_server_refuses_a_legacy_initialize_clearly() -> None:
    async def run() -> None:
        protocol = engine(eras=ProtocolEras.MODERN)
        result = await protocol.handle(
            LegacyRequest(
                PATH,
                {},
                message(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {"protocolVersion": "2025-06-18", "capabilities": {}},
                    }
                ),
            ),
            None,
        )
        assert result.status == 400
        assert result.reason == "legacy-client"
        assert result.method == "initialize"
        error = body(result)["error"]
        assert error["code"] == -32022
        assert error["data"] == {"supported": ["2026-07-28"], "requested": "2025-06-18"}
        assert "2025-era initialize (2025-06-18)" in error["message"]
        assert "--protocol both" in error["message"]
        odd = await protocol.handle(
            LegacyRequest(
                PATH,
                {},
                message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "<x>"}}),
            ),
            None,
        )
        assert "<x>" not in body(odd)["error"]["message"]

    asyncio.run(run())


def test_legacy_only_server_refuses_modern_requests() -> None:
    protocol = engine(eras=ProtocolEras.LEGACY)
    refused = protocol.refuse_modern(
        message({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {PV: "2026-07-28"}}})
    )
    assert refused.status == 400
    assert refused.reason == "modern-client"
    error = body(refused)["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": list(LEGACY_PROTOCOL_VERSIONS), "requested": "2026-07-28"}


def test_era_detection() -> None:
    init = message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    modern_init = message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"_meta": {PV: "2026-07-28"}}})
    listing = message({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert is_legacy_message({}, init, modern_versions=MODERN)
    assert is_legacy_message({"mcp-protocol-version": "2025-06-18"}, init, modern_versions=MODERN)
    assert not is_legacy_message({"mcp-protocol-version": "2026-07-28"}, init, modern_versions=MODERN)
    assert not is_legacy_message({}, modern_init, modern_versions=MODERN)
    assert not is_legacy_message({}, listing, modern_versions=MODERN)
    assert is_legacy_message({SESSION_HEADER: "x"}, listing, modern_versions=MODERN)
    assert is_legacy_message({}, listing, modern_versions=MODERN, legacy_connection=True)
    assert era_from_headers({SESSION_HEADER: "x"}, modern_versions=MODERN) is ProtocolEras.LEGACY
    assert era_from_headers({"mcp-protocol-version": "2026-07-28"}, modern_versions=MODERN) is ProtocolEras.MODERN
    assert era_from_headers({"mcp-protocol-version": "2025-06-18"}, modern_versions=MODERN) is None
    assert era_from_headers({}, modern_versions=MODERN) is None
    response = message({"jsonrpc": "2.0", "id": "s-1", "result": {}})
    assert is_legacy_message({}, response, modern_versions=MODERN, legacy_connection=True)


# ------------------------------------------------------------------------------------------------ operations


def test_ping_lists_and_notifications() -> None:
    async def run() -> None:
        protocol = engine()
        session_id = await initialize(protocol)
        pong, _ = await call(protocol, session_id, "ping")
        assert body(pong) == {"jsonrpc": "2.0", "id": 7, "result": {}}
        listed, _ = await call(protocol, session_id, "tools/list", {})
        result = body(listed)["result"]
        assert {item["name"] for item in result["tools"]} >= {"catalog.continue", "deploy.approve"}
        assert not {"resultType", "ttlMs", "cacheScope"} & set(result)
        note = await protocol.handle(
            LegacyRequest(
                PATH,
                {SESSION_HEADER: session_id},
                message({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
            ),
            None,
        )
        assert note.status == 202
        assert note.body is None
        unknown, _ = await call(protocol, session_id, "logging/setLevel", {"level": "info"})
        assert unknown.status == 200
        assert body(unknown)["error"]["code"] == -32601

    asyncio.run(run())


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        (accept(), "Catalog access approved."),
        (action("decline"), "Catalog access was declined."),
        (action("cancel"), "Catalog access was cancelled."),
        (action_with_null_content("decline"), "Catalog access was declined."),
    ],
)
def test_catalog_continue_through_real_elicitation(answer: Answer, text: str) -> None:
    async def run() -> None:
        protocol = engine()
        session_id = await initialize(protocol)
        result, channel = await call(
            protocol, session_id, "tools/call", {"name": "catalog.continue", "arguments": {}}, answer
        )
        assert tool_text(result) == (text, False)
        assert [frame["method"] for frame in channel.sent] == ["elicitation/create"]
        assert channel.sent[0]["params"]["mode"] == "form"
        assert [reply.status for reply in channel.replies] == [202]
        assert body(result)["id"] == 7
        assert protocol.sessions.get(session_id) is not None
        assert protocol.sessions.get(session_id).pending == 0  # type: ignore[union-attr]

    asyncio.run(run())


def test_a_2025_06_18_session_gets_form_elicitation_without_mode() -> None:
    async def run() -> None:
        protocol = engine()
        session_id = await initialize(protocol, version="2025-06-18")
        result, channel = await call(
            protocol, session_id, "tools/call", {"name": "catalog.continue", "arguments": {}}, accept()
        )
        assert tool_text(result) == ("Catalog access approved.", False)
        assert "mode" not in channel.sent[0]["params"]

    asyncio.run(run())


def test_deploy_approve_three_rounds() -> None:
    async def run() -> None:
        protocol = engine()
        session_id = await initialize(protocol)
        result, channel = await call(
            protocol,
            session_id,
            "tools/call",
            {"name": "deploy.approve", "arguments": {"stages": 3}},
            accept({"approve": True}),
        )
        assert tool_text(result) == ("All 3 stages approved; deploying.", False)
        messages = [frame["params"]["message"] for frame in channel.sent]
        assert messages == [f"Approve deployment stage {n} of 3?" for n in (1, 2, 3)]
        assert len({frame["id"] for frame in channel.sent}) == 3

    asyncio.run(run())


def test_a_client_error_answer_becomes_an_is_error_result() -> None:
    async def run() -> None:
        protocol = engine()
        session_id = await initialize(protocol)

        def refuse(frame: dict[str, Any]) -> dict[str, Any]:
            return {"jsonrpc": "2.0", "id": frame["id"], "error": {"code": -1, "message": "<script>no</script>"}}

        result, _ = await call(protocol, session_id, "tools/call", {"name": "catalog.continue"}, refuse)
        text, is_error = tool_text(result)
        assert is_error
        assert text == "The client refused the server's request (elicitation/create)."
        assert result.reason == "input-refused"

    asyncio.run(run())


@pytest.mark.slow
def test_a_round_that_times_out_ends_with_a_sentence() -> None:
    async def run() -> None:
        protocol = engine(timeout=1)
        session_id = await initialize(protocol)
        result, channel = await call(protocol, session_id, "tools/call", {"name": "catalog.continue"}, never)
        text, is_error = tool_text(result)
        assert is_error
        assert text == "The client did not answer the server's request within 1 seconds."
        session = protocol.sessions.get(session_id)
        assert session is not None
        assert session.pending == 0
        # A late answer is ignored (202, not delivered).
        late = await protocol.handle(
            LegacyRequest(
                PATH,
                {SESSION_HEADER: session_id},
                message({"jsonrpc": "2.0", "id": channel.sent[0]["id"], "result": {"action": "accept", "content": {}}}),
            ),
            None,
        )
        assert late.status == 202
        assert late.reason == "response-unmatched"

    asyncio.run(run())


def test_missing_capability_names_the_capability() -> None:
    async def run() -> None:
        protocol = engine()
        session_id = await initialize(protocol, capabilities={})
        result, channel = await call(protocol, session_id, "tools/call", {"name": "catalog.continue"}, accept())
        text, is_error = tool_text(result)
        assert is_error
        assert text == (
            "This tool needs the client capability elicitation.form, which this client did not declare in initialize."
        )
        assert channel.sent == []
        url_session = await initialize(protocol, capabilities=FORM)
        linked, _ = await call(protocol, url_session, "tools/call", {"name": "account.link"}, accept())
        text, is_error = tool_text(linked)
        assert is_error
        assert "elicitation.url" in text

    asyncio.run(run())


def _modern_state(protocol: LegacyProtocol, tool_name: str) -> str:
    sent = {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": tool_name, "arguments": {}}}
    result = asyncio.run(modern_post(protocol, sent))
    state: str = body(result)["result"]["requestState"]
    return state


@pytest.mark.parametrize("tamper", ["tampered", "other-tool"])
def test_a_client_sent_state_is_refused_as_on_the_modern_path(tamper: str) -> None:
    protocol = engine()
    if tamper == "tampered":
        state = _modern_state(protocol, "catalog.continue")
        state = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        target = "catalog.continue"
    else:
        state = _modern_state(protocol, "deploy.approve")
        target = "catalog.continue"

    async def run() -> None:
        session_id = await initialize(protocol)
        params = {
            "name": target,
            "arguments": {},
            "requestState": state,
            "inputResponses": {"approval": {"action": "accept", "content": {}}},
        }
        result, channel = await call(protocol, session_id, "tools/call", params, accept())
        assert result.status == 200  # inside a session: a 4xx would read as a broken transport
        assert body(result)["error"] == {"code": -32602, "message": "Invalid or expired request state"}
        assert body(result)["id"] == 7
        assert result.reason is not None
        assert result.reason.startswith("state-")
        assert channel.sent == []
        # The same retry on the 2026-07-28 path: the same error, for the same logged reason.
        modern = await modern_post(protocol, {"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": params})
        assert modern.status == 400
        assert body(modern)["error"] == body(result)["error"]
        assert modern.reason == result.reason

    asyncio.run(run())


def test_exceeding_the_round_limit_ends_cleanly_and_the_session_still_works() -> None:
    async def run() -> None:
        protocol = engine(rounds=2)
        session_id = await initialize(protocol)
        result, channel = await call(
            protocol,
            session_id,
            "tools/call",
            {"name": "deploy.approve", "arguments": {"stages": 5}},
            accept({"approve": True}),
        )
        text, is_error = tool_text(result)
        assert is_error
        assert text == "This tool needed more rounds of input than the server allows; start again."
        assert len(channel.sent) == 2
        again, _ = await call(protocol, session_id, "tools/call", {"name": "catalog.continue"}, accept(), request_id=8)
        assert tool_text(again) == ("Catalog access approved.", False)

    asyncio.run(run())


def test_an_unprotected_tool_that_never_completes_is_capped() -> None:
    declaration = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)

    @tool(
        name="forever",
        description="Always asks again.",
        input_schema={"type": "object"},
        input_request_declarations=[
            may_request_input(type=InputRequestType.ELICITATION_FORM, requirement=InputRequirement.CONDITIONAL)
        ],
    )
    def forever(context: RequestContext, arguments: JsonObject) -> InputRequiredResult:
        request = form_request(declaration, "Again?", {"type": "object", "properties": {}})
        return InputRequiredResult.with_input_request("again", request).build()

    async def run() -> None:
        protocol = engine(registry=Registry(forever))
        session_id = await initialize(protocol)
        result, channel = await call(protocol, session_id, "tools/call", {"name": "forever"}, accept())
        text, is_error = tool_text(result)
        assert is_error
        assert "more rounds" in text
        assert len(channel.sent) == 10

    asyncio.run(run())


def test_cancellation_by_the_client_cancels_the_handler() -> None:
    started = asyncio.Event
    seen: dict[str, Any] = {}

    @tool(name="slow", description="Waits until cancelled.", input_schema={"type": "object"})
    async def slow(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        seen["started"].set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise
        return CallToolResult.from_text("woke")

    async def run() -> None:
        seen["started"] = started()
        protocol = engine(registry=Registry(slow))
        session_id = await initialize(protocol)
        running = asyncio.create_task(call(protocol, session_id, "tools/call", {"name": "slow"}, request_id="c-1"))
        await seen["started"].wait()
        note = await protocol.handle(
            LegacyRequest(
                PATH,
                {SESSION_HEADER: session_id},
                message({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c-1"}}),
            ),
            None,
        )
        assert note.status == 202
        result, _ = await running
        assert seen.get("cancelled") is True
        assert body(result)["error"]["code"] == -32800
        # The client going away (its task cancelled) cancels the handler too.
        seen["started"] = started()
        seen.pop("cancelled")
        gone = asyncio.create_task(call(protocol, session_id, "tools/call", {"name": "slow"}, request_id="c-2"))
        await seen["started"].wait()
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert seen.get("cancelled") is True
        assert protocol.sessions.get(session_id).in_flight == 0  # type: ignore[union-attr]

    asyncio.run(run())


@pytest.mark.slow
def test_a_waiting_round_ends_when_the_client_goes() -> None:
    async def run() -> None:
        protocol = engine()
        session_id = await initialize(protocol)
        channel = Channel(protocol, session_id, never)
        request = LegacyRequest(
            PATH,
            {SESSION_HEADER: session_id},
            message({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "catalog.continue"}}),
        )
        task = asyncio.create_task(protocol.handle(request, channel))
        while not channel.sent:
            await asyncio.sleep(0)
        channel.gone = True
        with pytest.raises(asyncio.CancelledError):
            await task
        session = protocol.sessions.get(session_id)
        assert session is not None
        assert session.pending == 0
        assert session.in_flight == 0

    asyncio.run(run())


# ------------------------------------------------------------------------------------------------ session edges


def test_session_less_and_unknown_shapes() -> None:
    async def run() -> None:
        protocol = engine()
        no_session = await protocol.handle(
            LegacyRequest(PATH, {}, message({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})), None
        )
        assert no_session.status == 400
        assert body(no_session)["error"]["code"] == -32600
        unknown = await protocol.handle(
            LegacyRequest(PATH, {SESSION_HEADER: "nope"}, message({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
            None,
        )
        assert unknown.status == 404
        assert body(unknown)["error"] == {"code": -32001, "message": "Session not found"}
        for shape in (
            [1],
            {"jsonrpc": "1.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "id": {}, "method": "ping"},
        ):
            refused = await protocol.handle(LegacyRequest(PATH, {}, message(shape)), None)  # type: ignore[arg-type]
            assert refused.status == 400
            assert body(refused)["error"]["code"] == -32600
        session_id = await initialize(protocol)
        again = await protocol.handle(
            LegacyRequest(
                PATH, {SESSION_HEADER: session_id}, message({"jsonrpc": "2.0", "id": 2, "method": "initialize"})
            ),
            None,
        )
        assert again.status == 400

    asyncio.run(run())


def test_a_session_is_bound_to_its_partition() -> None:
    async def run() -> None:
        admission = BearerTokenAdmission({"token-a": ("alice", "tenant-a"), "token-b": ("bob", "tenant-b")})
        protocol = engine(admission=admission)
        alice = {"authorization": "Bearer token-a"}
        session_id = await initialize(protocol, headers=alice)
        ok, _ = await call(protocol, session_id, "tools/list", {}, headers=alice)
        assert ok.status == 200
        foreign, _ = await call(protocol, session_id, "tools/list", {}, headers={"authorization": "Bearer token-b"})
        assert foreign.status == 404
        anonymous, _ = await call(protocol, session_id, "tools/list", {})
        assert anonymous.status == 401
        guessed, _ = await call(protocol, "not-a-session", "tools/list", {})
        assert guessed.status == 401  # a refused caller learns nothing about sessions
        unknown, _ = await call(protocol, "not-a-session", "tools/list", {}, headers=alice)
        assert unknown.status == 404
        unauthorized = await protocol.handle(
            LegacyRequest(PATH, {}, message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})), None
        )
        assert unauthorized.status == 401

    asyncio.run(run())


def test_a_full_session_table_refuses_initialize_with_503_only_when_every_session_is_busy() -> None:
    async def run() -> None:
        protocol = LegacyProtocol(core(), sessions=SessionOptions(max_sessions=1))
        idle = protocol.sessions.get(await initialize(protocol))
        assert idle is not None
        busy_id = await initialize(protocol)  # the table is full: the idle session makes room
        assert idle.closed
        busy = protocol.sessions.get(busy_id)
        assert busy is not None
        running = asyncio.ensure_future(asyncio.sleep(60))
        busy.track(JsonNumber.from_value(1), running)  # type: ignore[arg-type]
        result = await protocol.handle(
            LegacyRequest(PATH, {}, message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})), None
        )
        assert result.status == 503
        assert ("retry-after", "5") in result.headers
        assert not busy.closed
        running.cancel()

    asyncio.run(run())


def test_engine_options_are_checked() -> None:
    for bad in (0.5, 3601):
        with pytest.raises(ValueError, match="input_timeout_seconds"):
            LegacyProtocol(core(), sessions=SessionOptions(input_timeout_seconds=bad))
    with pytest.raises(TypeError):
        LegacyProtocol(core(), eras="both")  # type: ignore[arg-type]
    assert LegacyProtocol.DEFAULT_INPUT_TIMEOUT_SECONDS == 300.0


def test_a_url_elicitation_to_a_2025_11_25_client_carries_an_elicitation_id() -> None:
    async def run() -> None:
        protocol = engine()
        session_id = await initialize(protocol, capabilities={"elicitation": {"url": {}}})
        _, channel = await call(protocol, session_id, "tools/call", {"name": "account.link"}, action("decline"))
        params = channel.sent[0]["params"]
        assert params["mode"] == "url"
        assert isinstance(params["elicitationId"], str)
        assert len(params["elicitationId"]) >= 16

    asyncio.run(run())


def test_a_prompt_missing_a_required_capability_is_a_json_rpc_error_with_the_sentence() -> None:
    @prompt(
        name="sampled",
        description="Needs sampling.",
        input_request_declarations=[
            may_request_input(type=InputRequestType.SAMPLING, requirement=InputRequirement.REQUIRED)
        ],
    )
    def sampled(context: RequestContext, arguments: Any) -> GetPromptResult:
        return GetPromptResult.of([PromptMessage.user("hi")])

    async def run() -> None:
        protocol = engine(registry=Registry(sampled))
        session_id = await initialize(protocol, capabilities={})
        result, _ = await call(protocol, session_id, "prompts/get", {"name": "sampled"})
        error = body(result)["error"]
        assert error["code"] == -32021
        assert error["message"] == (
            "This request needs the client capability sampling, which this client did not declare in initialize."
        )
        assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
        sampling = await initialize(protocol, capabilities={"sampling": {}})
        ok, _ = await call(protocol, sampling, "prompts/get", {"name": "sampled"})
        got = body(ok)["result"]
        assert got["messages"] == [{"role": "user", "content": {"type": "text", "text": "hi"}}]
        assert "resultType" not in got

    asyncio.run(run())


def test_a_large_result_reaches_the_client_whole_without_modern_members() -> None:
    text = "x" * (200 * 1024)

    @tool(name="big", description="A long answer.", input_schema={"type": "object"})
    def big(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        return CallToolResult.from_text(text)

    async def run() -> None:
        protocol = engine(registry=Registry(big))
        session_id = await initialize(protocol)
        result, _ = await call(protocol, session_id, "tools/call", {"name": "big"})
        assert tool_text(result) == (text, False)
        assert "resultType" not in body(result)["result"]

    asyncio.run(run())


def test_progress_reaches_the_client_through_the_channel() -> None:
    @tool(name="busy", description="Reports progress.", input_schema={"type": "object"})
    async def busy(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        context.invocation.report_progress(1, total=2, message="half")
        await asyncio.sleep(0)
        return CallToolResult.from_text("done")

    async def run() -> None:
        protocol = engine(registry=Registry(busy))
        session_id = await initialize(protocol)
        result, channel = await call(
            protocol, session_id, "tools/call", {"name": "busy", "_meta": {"progressToken": "tok"}}
        )
        assert tool_text(result) == ("done", False)
        assert channel.sent == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": "tok", "progress": 1, "total": 2, "message": "half"},
            }
        ]

    asyncio.run(run())


def test_the_handler_sees_the_session_capabilities_and_client_info() -> None:
    seen: dict[str, Any] = {}

    @tool(name="who", description="Looks at the caller.", input_schema={"type": "object"})
    def who(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        seen["capabilities"] = context.client_capabilities
        seen["info"] = context.client_info
        seen["version"] = context.protocol_version
        return CallToolResult.from_text("ok")

    async def run() -> None:
        protocol = engine(registry=Registry(who))
        session_id = await initialize(protocol, capabilities={"elicitation": {}, "roots": {"listChanged": True}})
        await call(protocol, session_id, "tools/call", {"name": "who"})
        assert seen["capabilities"].elicitation_form
        assert seen["capabilities"].roots
        assert not seen["capabilities"].elicitation_url
        assert seen["info"] == message({"name": "test", "version": "1"})
        assert seen["version"] == "2026-07-28"

    asyncio.run(run())


def test_an_oversized_initialize_is_refused() -> None:
    async def run() -> None:
        protocol = engine()
        huge = {"experimental": {f"x{n}": {"pad": "y" * 100} for n in range(1000)}}
        sent = message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": huge}})
        for size in (0, 200_000):
            result = await protocol.handle(LegacyRequest(PATH, {}, sent, body_bytes=size), None)
            assert result.status == 400
            assert body(result)["error"] == {"code": -32602, "message": "Invalid params: initialize is too large"}
        assert len(protocol.sessions) == 0

    asyncio.run(run())


def test_a_state_that_expires_while_the_client_answers_ends_with_a_sentence() -> None:
    now = {"ms": 1_800_000_000_000}
    sealer = RequestStateSealer(ProtectionConfig(keyring=KEYRING), clock=lambda: now["ms"])
    protocol = LegacyProtocol(Engine(registry=demo.build_registry(), sealer=sealer))

    def late(frame: dict[str, Any]) -> dict[str, Any]:
        now["ms"] += 16 * 60 * 1000  # past the 15-minute state lifetime
        return accept()(frame) or {}

    async def run() -> None:
        session_id = await initialize(protocol)
        result, _ = await call(protocol, session_id, "tools/call", {"name": "catalog.continue"}, late)
        text, is_error = tool_text(result)
        assert is_error
        assert text == "This tool's saved progress expired or was refused; start again."
        assert result.reason == "state-expired"

    asyncio.run(run())


def test_legacy_request_checks_its_fields() -> None:
    ok = message({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    with pytest.raises(ValueError, match="path"):
        LegacyRequest("mcp", {}, ok)
    with pytest.raises(TypeError, match="message"):
        LegacyRequest(PATH, {}, {"jsonrpc": "2.0"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session"):
        LegacyRequest(PATH, {}, ok, session="id")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="body_bytes"):
        LegacyRequest(PATH, {}, ok, body_bytes=-1)


def test_requests_past_the_in_flight_cap_get_503_and_the_session_recovers() -> None:
    gate: dict[str, asyncio.Event] = {}

    @tool(name="held", description="Waits for the test.", input_schema={"type": "object"})
    async def held(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        await gate["open"].wait()
        return CallToolResult.from_text("released")

    async def run() -> None:
        gate["open"] = asyncio.Event()
        protocol = engine(registry=Registry(held))
        session_id = await initialize(protocol)
        session = protocol.sessions.get(session_id)
        assert session is not None
        running = [
            asyncio.create_task(call(protocol, session_id, "tools/call", {"name": "held"}, request_id=n))
            for n in range(MAX_INFLIGHT_PER_SESSION)
        ]
        while session.in_flight < MAX_INFLIGHT_PER_SESSION:
            await asyncio.sleep(0)
        refused, _ = await call(protocol, session_id, "tools/call", {"name": "held"}, request_id="extra")
        assert refused.status == 503
        assert ("retry-after", "1") in refused.headers
        gate["open"].set()
        for finished in await asyncio.gather(*running):
            assert tool_text(finished[0]) == ("released", False)
        assert session.in_flight == 0
        again, _ = await call(protocol, session_id, "tools/call", {"name": "held"}, request_id="again")
        assert tool_text(again) == ("released", False)

    asyncio.run(run())
