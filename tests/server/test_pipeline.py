"""The request pipeline in process: the 2026-07-28 HTTP side (``HttpDispatch.dispatch`` / ``validate``) over the
engine (``Engine.call``), and the ASGI app through httpx.

Beside the real-uvicorn tests of tests/server: the validation order, the frozen per-request record, the one
method table, the request-state wrapper (open before the handler, seal after it, one digest per request), the
JSON-RPC wire mapping of protection refusals, and ``blocking=False`` handlers on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from soklet_apps import demo
from soklet_core.json import JsonObject, parse
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import (
    CallToolResult,
    InputRequestDeclaration,
    InputRequiredResult,
    InputRequirement,
    McpError,
    McpServer,
    Registry,
    RequestContext,
    RequestStateMode,
    ServerOptions,
    tool,
)
from soklet_core.mcp.model import RegistrationError, methods
from soklet_core.mcp.server._headers import HttpRequest
from soklet_core.mcp.server._jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INTERNAL_ERROR_MESSAGE,
    INVALID_PARAMS,
    INVALID_REQUEST,
    INVALID_STATE_MESSAGE,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_VERSION,
    encode_error,
    state_refusal,
)
from soklet_core.mcp.server.engine import METHODS, Call, Complete, DispatchResult, EncodedResult
from soklet_core.mcp.server.http._dispatch import HttpDispatch
from soklet_core.mcp.server.options import ProtocolOptions
from soklet_core.protection import ProtectionConfig, RequestStateProtectionException, bind_request
from soklet_core.protocol import PROTOCOL_VERSION, PROTOCOL_VERSION_META_KEY

KEYRING = ProtectionKeyring(ProtectionKey.generate("pipeline-key"))
FORM_CAPS: Mapping[str, Any] = {"elicitation": {"form": {}}}
ACCEPT = {"action": "accept", "content": {}}
OTHER_VERSION = "2027-01-01"


def config(rounds: int = 10) -> ProtectionConfig:
    return ProtectionConfig(keyring=KEYRING, maximum_request_state_rounds=rounds)


class Calls:
    """How often the counting tools ran, and on which thread."""

    def __init__(self) -> None:
        self.count = 0
        self.threads: list[int] = []


def counting_registry(calls: Calls) -> Registry:
    @tool(
        name="count.state",
        description="Counts its calls; asks again with a framework state until told to stop.",
        input_schema={"type": "object"},
        input_request_declarations=[demo.FORM],
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
        blocking=False,
    )
    def count_state(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        calls.count += 1
        calls.threads.append(threading.get_ident())
        if "stop" in arguments:
            return CallToolResult.from_text("stopped")
        return (
            InputRequiredResult.with_input_request("approval", demo._approval_request())
            .framework_request_state({"round": calls.count})
            .build()
        )

    @tool(name="count.plain", description="Counts its calls.", input_schema={"type": "object"})
    def count_plain(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        calls.count += 1
        calls.threads.append(threading.get_ident())
        return CallToolResult.from_text("plain")

    return Registry(count_state, count_plain)


def make_server(calls: Calls | None = None, *, rounds: int = 10, versions: tuple[str, ...] = ()) -> McpServer:
    registry = demo.build_registry() if calls is None else counting_registry(calls)
    if versions:
        options = ServerOptions(protocol=ProtocolOptions(supported_versions=tuple(versions)))
        return McpServer(registry, protection=config(rounds), options=options)
    return McpServer(registry, protection=config(rounds))


def body(
    method: str = methods.TOOLS_CALL,
    params: Mapping[str, Any] | None = None,
    *,
    request_id: object = 1,
    version: str = PROTOCOL_VERSION,
    caps: Mapping[str, Any] = FORM_CAPS,
) -> dict[str, Any]:
    meta = {PROTOCOL_VERSION_META_KEY: version, "io.modelcontextprotocol/clientCapabilities": dict(caps)}
    merged = dict(params or {})
    merged["_meta"] = {**meta, **merged.get("_meta", {})}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": merged}


def headers(
    method: str = methods.TOOLS_CALL, name: str | None = None, version: str = PROTOCOL_VERSION
) -> dict[str, str]:
    out = {"mcp-protocol-version": version, "mcp-method": method, "content-type": "application/json"}
    if name is not None:
        out["mcp-name"] = name
    return out


def call(
    name: str, arguments: Mapping[str, Any] | None = None, *, request_id: object = 1, **extra: Any
) -> dict[str, Any]:
    return body(params={"name": name, "arguments": dict(arguments or {}), **extra}, request_id=request_id)


async def dispatch(server: McpServer, message: Mapping[str, Any] | bytes, head: Mapping[str, str]) -> DispatchResult:
    raw = message if isinstance(message, bytes) else json.dumps(message).encode()
    return await http_side(server).dispatch(HttpRequest("/mcp", dict(head), raw))


def http_side(server: McpServer) -> HttpDispatch:
    """The 2026-07-28 HTTP side over the server's engine (what its ASGI app runs a POST through)."""
    return HttpDispatch(server.engine)


def reply(result: DispatchResult) -> dict[str, Any]:
    assert result.body is not None
    decoded: dict[str, Any] = json.loads(result.body)
    return decoded


# ------------------------------------------------------------------------------------------------ validation order


def _step_cases() -> list[tuple[str, bytes | dict[str, Any], dict[str, str], int, int, str]]:
    """Each case breaks one step and every later one it can, so only the order decides which answers."""
    unknown_method = body("tools/unknown", {"name": "nope"})
    no_meta = body(methods.TOOLS_CALL, {"name": "nope"})
    del no_meta["params"]["_meta"]
    bad_version = body(methods.TOOLS_CALL, {"name": "nope"}, version="1999-01-01")
    return [
        ("parse", b"{not json", headers(), 400, PARSE_ERROR, "parse-error"),
        ("envelope", {"jsonrpc": "1.0", "id": 1, "method": "x"}, headers(), 400, INVALID_REQUEST, "envelope"),
        ("version header", unknown_method, {"mcp-method": "tools/unknown"}, 400, HEADER_MISMATCH, "header-mismatch"),
        ("meta", no_meta, headers(name="other"), 400, INVALID_PARAMS, "meta-missing"),
        ("header vs meta", bad_version, headers(name="other"), 400, HEADER_MISMATCH, "header-mismatch"),
        (
            "version",
            bad_version,
            headers(name="other", version="1999-01-01"),
            400,
            UNSUPPORTED_VERSION,
            "unsupported-version",
        ),
        ("method", unknown_method, headers("tools/unknown"), 404, METHOD_NOT_FOUND, "method-not-found"),
        ("method header", call("nope"), headers(methods.TOOLS_LIST), 400, HEADER_MISMATCH, "header-mismatch"),
        ("name header", call("nope"), headers(name="other"), 400, HEADER_MISMATCH, "header-mismatch"),
        ("operation", call("nope"), headers(name="nope"), 400, INVALID_PARAMS, "unknown-tool"),
        (
            "required capabilities",
            body(methods.TOOLS_CALL, {"name": "catalog.continue", "arguments": 3}, caps={}),
            headers(name="catalog.continue"),
            200,
            0,
            "",
        ),
        (
            "arguments",
            body(methods.TOOLS_CALL, {"name": "catalog.continue", "arguments": 3, "requestState": "x"}),
            headers(name="catalog.continue"),
            400,
            INVALID_PARAMS,
            "arguments",
        ),
        (
            "state",
            call("catalog.continue", requestState="not-a-token"),
            headers(name="catalog.continue"),
            400,
            INVALID_PARAMS,
            "state-base64url",
        ),
    ]


@pytest.mark.parametrize(
    ("step", "message", "head", "status", "code", "reason"), _step_cases(), ids=[c[0] for c in _step_cases()]
)
def test_the_first_failing_step_answers(
    step: str, message: bytes | dict[str, Any], head: dict[str, str], status: int, code: int, reason: str
) -> None:
    server = make_server()
    result = asyncio.run(dispatch(server, message, head))
    if step == "required capabilities":
        # catalog.continue's form request is CONDITIONAL: a client without it still reaches the arguments check.
        assert (result.status, result.reason) == (400, "arguments")
        return
    assert (result.status, result.code, result.reason) == (status, code, reason)
    assert reply(result)["error"]["code"] == code


def test_a_missing_required_capability_answers_before_the_arguments() -> None:
    calls = Calls()

    @tool(
        name="needs.form",
        description="REQUIRED form elicitation.",
        input_schema={"type": "object"},
        input_request_declarations=[InputRequestDeclaration.from_elicitation_form(InputRequirement.REQUIRED)],
    )
    def needs_form(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        calls.count += 1
        return CallToolResult.from_text("ran")

    server = McpServer(Registry(needs_form))
    message = body(methods.TOOLS_CALL, {"name": "needs.form", "arguments": 3}, caps={})
    result = asyncio.run(dispatch(server, message, headers(name="needs.form")))
    assert (result.status, result.code, result.operation) == (400, MISSING_CAPABILITY, "needs.form")
    assert reply(result)["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert calls.count == 0


def test_a_notification_is_accepted_without_a_body() -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    result = asyncio.run(dispatch(make_server(), message, headers()))
    assert (result.status, result.body, result.message) == (202, None, None)


def test_an_id_with_a_method_that_is_not_a_string_is_refused_with_that_id() -> None:
    result = asyncio.run(dispatch(make_server(), {"jsonrpc": "2.0", "id": "abc", "method": 5}, headers()))
    assert (result.status, result.reason) == (400, "envelope")
    assert reply(result) == {
        "jsonrpc": "2.0",
        "id": "abc",
        "error": {"code": INVALID_REQUEST, "message": "Invalid Request"},
    }


# ------------------------------------------------------------------------------------------------ the record


def test_validation_ends_in_one_frozen_record() -> None:
    server = make_server()
    raw = json.dumps(call("catalog.continue")).encode()
    validated = asyncio.run(http_side(server).validate(HttpRequest("/mcp", headers(name="catalog.continue"), raw)))
    assert isinstance(validated, Call)
    assert (validated.method, validated.protocol_version, validated.endpoint_path) == (
        methods.TOOLS_CALL,
        PROTOCOL_VERSION,
        "/mcp",
    )
    target = server.engine.resolve(validated.method, validated.params)
    assert target is not None
    assert target.name == "catalog.continue"
    assert target.on_loop  # the demo's handlers are registered with blocking=False
    with pytest.raises(dataclasses.FrozenInstanceError):
        validated.method = "tools/list"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.name = "other"  # type: ignore[misc]


async def run_call(server: McpServer, raw: bytes, head: Mapping[str, str]) -> None:
    """Steps 1-8 on the HTTP side, then the engine; the engine's refusal raised as its wire error."""
    validated = await http_side(server).validate(HttpRequest("/mcp", dict(head), raw))
    assert validated is not None
    outcome = await server.engine.call(validated, None)
    if not isinstance(outcome, Complete):
        assert hasattr(outcome, "error")
        raise outcome.error


def test_validate_raises_the_first_failure_as_an_mcp_error() -> None:
    server = make_server()
    raw = json.dumps(call("nope")).encode()
    with pytest.raises(McpError) as caught:
        asyncio.run(run_call(server, raw, headers(name="nope")))
    assert (caught.value.code, caught.value.http_status, caught.value.log_reason) == (
        INVALID_PARAMS,
        400,
        "unknown-tool",
    )


def test_a_list_method_is_answered_by_its_pre_encoded_result() -> None:
    server = make_server()
    raw = json.dumps(body(methods.TOOLS_LIST)).encode()
    validated = asyncio.run(http_side(server).validate(HttpRequest("/mcp", headers(methods.TOOLS_LIST), raw)))
    assert validated is not None
    assert server.engine.resolve(validated.method, validated.params) is None  # no handler runs
    outcome = asyncio.run(server.engine.call(validated, None))
    assert isinstance(outcome, Complete)
    assert isinstance(outcome.result, EncodedResult)
    assert outcome.result is asyncio.run(server.engine.call(validated, None)).result  # type: ignore[union-attr]
    result = json.loads(outcome.result.body)
    assert [item["name"] for item in result["tools"]] == ["catalog.continue", "account.link", "deploy.approve"]
    answer = http_side(server).encode(outcome, validated)
    assert reply(answer)["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "soklet"


# ------------------------------------------------------------------------------------------------ the method table


def test_the_method_table_holds_every_served_method_once() -> None:
    served = {
        methods.SERVER_DISCOVER,
        methods.TOOLS_LIST,
        methods.TOOLS_CALL,
        methods.PROMPTS_LIST,
        methods.PROMPTS_GET,
        methods.RESOURCES_LIST,
        methods.RESOURCES_READ,
        methods.RESOURCES_TEMPLATES_LIST,
        methods.COMPLETION_COMPLETE,
        methods.TASKS_GET,
        methods.TASKS_UPDATE,
        methods.TASKS_CANCEL,
    }
    assert set(METHODS) == served
    assert {name for name, entry in METHODS.items() if entry.routing_member is not None} == {
        methods.TOOLS_CALL,
        methods.PROMPTS_GET,
        methods.RESOURCES_READ,
        methods.TASKS_GET,
        methods.TASKS_UPDATE,
        methods.TASKS_CANCEL,
    }


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_of_the_table_is_answered(method: str) -> None:
    params: dict[str, Any] = {}
    name = None
    if METHODS[method].routing_member == "name":
        params, name = {"name": "nope"}, "nope"
    elif METHODS[method].routing_member == "uri":
        params, name = {"uri": "test://nope"}, "test://nope"
    elif method == methods.COMPLETION_COMPLETE:
        params = {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}}
    result = asyncio.run(dispatch(make_server(), body(method, params), headers(method, name)))
    assert result.status != 404
    if METHODS[method].routing_member is None:
        assert result.status == 200
        assert reply(result)["result"]["resultType"] == "complete"


# ------------------------------------------------------------------------------------------------ the state wrapper


async def _first_state(server: McpServer, head: Mapping[str, str], message: Mapping[str, Any]) -> str:
    first = reply(await dispatch(server, message, head))
    state: str = first["result"]["requestState"]
    return state


def test_an_open_failure_answers_before_the_handler_runs() -> None:
    calls = Calls()
    server = make_server(calls)
    head = headers(name="count.state")

    async def scenario() -> DispatchResult:
        state = await _first_state(server, head, call("count.state"))
        tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        return await dispatch(
            server, call("count.state", inputResponses={"approval": ACCEPT}, requestState=tampered), head
        )

    result = asyncio.run(scenario())
    assert calls.count == 1  # the first call only
    assert (result.status, result.code) == (400, INVALID_PARAMS)
    assert result.reason is not None
    assert result.reason.startswith("state-")
    assert reply(result)["error"] == {"code": INVALID_PARAMS, "message": INVALID_STATE_MESSAGE}


def test_a_seal_failure_answers_internal_error_after_the_handler() -> None:
    calls = Calls()
    server = make_server(calls, rounds=1)
    head = headers(name="count.state")

    async def scenario() -> DispatchResult:
        state = await _first_state(server, head, call("count.state"))
        retry = call("count.state", request_id=2, inputResponses={"approval": ACCEPT}, requestState=state)
        return await dispatch(server, retry, head)

    result = asyncio.run(scenario())
    assert calls.count == 2  # the handler ran; its state could not be sealed (one round only)
    assert (result.status, result.code, result.reason) == (200, INTERNAL_ERROR, "seal-last-round")
    assert reply(result)["error"] == {"code": INTERNAL_ERROR, "message": INTERNAL_ERROR_MESSAGE}
    assert "result" not in reply(result)


def test_the_params_digest_is_taken_once_per_request_that_opens_or_seals() -> None:
    calls = Calls()
    server = make_server(calls)
    dispatcher = server.engine
    head = headers(name="count.state")

    async def scenario() -> list[int]:
        taken = [dispatcher.params_digests_taken]
        state = await _first_state(server, head, call("count.state"))  # seals only
        taken.append(dispatcher.params_digests_taken)
        retry = call("count.state", request_id=2, inputResponses={"approval": ACCEPT}, requestState=state)
        again = reply(await dispatch(server, retry, head))  # opens, then seals the next round
        assert again["result"]["resultType"] == "input_required"
        taken.append(dispatcher.params_digests_taken)
        plain = await dispatch(server, call("count.plain"), headers(name="count.plain"))  # no state at all
        assert plain.status == 200
        taken.append(dispatcher.params_digests_taken)
        return taken

    before, first, retry, plain = asyncio.run(scenario())
    assert (first - before, retry - first, plain - retry) == (1, 1, 0)


def test_a_retry_with_only_the_prefixed_version_is_bound_to_the_validated_version() -> None:
    # The server supports a second version and the request speaks it, naming it only in the prefixed _meta
    # member: the server binds the state to that version, and bind_request (what inspect-state --request runs)
    # reading the retry alone binds it identically, so the token opens against it.
    calls = Calls()
    server = make_server(calls, versions=(PROTOCOL_VERSION, OTHER_VERSION))
    head = headers(name="count.state", version=OTHER_VERSION)
    first = call("count.state", request_id=1)
    first["params"]["_meta"][PROTOCOL_VERSION_META_KEY] = OTHER_VERSION
    sealer = server.sealer
    assert sealer is not None
    state = asyncio.run(_first_state(server, head, first))
    retry = call("count.state", request_id=2, inputResponses={"approval": ACCEPT}, requestState=state)
    retry["params"]["_meta"][PROTOCOL_VERSION_META_KEY] = OTHER_VERSION
    as_inspected = bind_request(json.dumps(retry).encode(), path="/mcp", partition="anonymous")
    assert as_inspected.binding.protocol_version == OTHER_VERSION
    assert sealer.open(state, as_inspected).state == JsonObject.from_mapping({"round": 1})
    result = asyncio.run(dispatch(server, retry, head))
    assert result.status == 200
    assert reply(result)["result"]["resultType"] == "input_required"


# ------------------------------------------------------------------------------------------------ wire mapping


@pytest.mark.parametrize("reason", list(RequestStateProtectionException.Reason), ids=lambda r: r.value)
def test_every_protection_refusal_maps_by_direction_only(reason: RequestStateProtectionException.Reason) -> None:
    error = state_refusal(RequestStateProtectionException(reason))
    if reason.is_sealing:
        expected = (200, INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE, f"seal-{reason.value}")
    else:
        expected = (400, INVALID_PARAMS, INVALID_STATE_MESSAGE, f"state-{reason.value}")
    assert (error.http_status, error.code, error.message, error.log_reason) == expected
    assert error.data is None
    assert error.headers == ()


def test_mcp_error_defaults_and_refusals() -> None:
    assert McpError(METHOD_NOT_FOUND, "Method not found").http_status == 404
    assert McpError(-1, "app error").http_status == 200
    assert McpError(INVALID_PARAMS, "x").log_reason == "invalid-params"
    with pytest.raises(ValueError, match="log_reason"):
        McpError(INVALID_PARAMS, "x", log_reason="Has Spaces")
    with pytest.raises(ValueError, match="http_status"):
        McpError(INVALID_PARAMS, "x", http_status=99)
    with pytest.raises(TypeError):
        McpError(True, "x")
    with pytest.raises(TypeError):
        McpError(INVALID_PARAMS, "x", data={"raw": "dict"})  # type: ignore[arg-type]
    assert "secret" not in repr(McpError(INVALID_PARAMS, "secret text"))


@pytest.mark.parametrize(("request_id", "wire"), [(None, b"null"), (7, b"7"), ("seven", b'"seven"'), (1.5, b"1.50")])
def test_encoded_errors_are_the_json_rpc_shape(request_id: object, wire: bytes) -> None:
    wire_id = None if request_id is None else parse(wire)
    data = JsonObject.from_mapping({"n": 1})
    encoded = encode_error(wire_id, INVALID_PARAMS, 'Bad \u00e9 "quoted"', data)
    assert encoded.startswith(b'{"jsonrpc":"2.0","id":' + wire + b',"error":')  # the id as the client spelled it
    assert json.loads(encoded) == {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": INVALID_PARAMS, "message": 'Bad \u00e9 "quoted"', "data": {"n": 1}},
    }


# ------------------------------------------------------------------------------------------------ where handlers run


def test_blocking_false_runs_on_the_loop_and_the_default_in_a_thread() -> None:
    calls = Calls()
    server = make_server(calls)
    loop_thread: list[int] = []

    async def scenario() -> None:
        loop_thread.append(threading.get_ident())
        await dispatch(server, call("count.state"), headers(name="count.state"))
        await dispatch(server, call("count.plain"), headers(name="count.plain"))

    asyncio.run(scenario())
    assert calls.threads[0] == loop_thread[0]  # blocking=False
    assert calls.threads[1] != loop_thread[0]  # the default: a worker thread


def test_blocking_must_be_a_bool() -> None:

    with pytest.raises(RegistrationError):
        tool(name="t", description="d", input_schema={"type": "object"}, blocking="no")(  # type: ignore[arg-type]
            lambda context, arguments: CallToolResult.from_text("x")
        )


# ------------------------------------------------------------------------------------------------ through ASGI


def test_the_spec_flow_through_the_asgi_app_with_httpx() -> None:
    server = make_server()
    head = headers(name="catalog.continue")

    async def scenario() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=server.asgi_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            first = await client.post("/mcp", json=call("catalog.continue"), headers=head)
            state = first.json()["result"]["requestState"]
            retry = call("catalog.continue", request_id=2, inputResponses={"approval": ACCEPT}, requestState=state)
            return first, await client.post("/mcp", json=retry, headers=head)

    first, second = asyncio.run(scenario())
    assert first.status_code == 200
    assert first.headers["content-type"] == "application/json"
    assert first.json()["result"]["resultType"] == "input_required"
    assert int(first.headers["content-length"]) == len(first.content)
    assert second.json()["result"] == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "Catalog access approved."}],
        "_meta": {
            "io.modelcontextprotocol/serverInfo": {
                "name": "soklet",
                "version": second.json()["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["version"],
            }
        },
    }


def test_a_refused_state_through_the_asgi_app() -> None:
    server = make_server()
    head = headers(name="catalog.continue")

    async def scenario() -> httpx.Response:
        transport = httpx.ASGITransport(app=server.asgi_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            retry = call("catalog.continue", inputResponses={"approval": ACCEPT}, requestState="AAAA")
            return await client.post("/mcp", json=retry, headers=head)

    refused = asyncio.run(scenario())
    assert refused.status_code == 400
    assert refused.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": INVALID_PARAMS, "message": INVALID_STATE_MESSAGE},
    }


def test_an_mcp_error_raised_by_an_interceptor_is_answered_as_raised() -> None:
    calls = Calls()

    async def quota(context: RequestContext, call_handler: Any) -> object:
        raise McpError(-32001, "Quota exceeded", log_reason="quota")

    server = McpServer(counting_registry(calls), protection=config(), interceptor=quota)
    result = asyncio.run(dispatch(server, call("count.plain"), headers(name="count.plain")))
    assert (result.status, result.code, result.reason, result.operation) == (200, -32001, "quota", "count.plain")
    assert reply(result)["error"] == {"code": -32001, "message": "Quota exceeded"}
    assert calls.count == 0


def test_any_other_handler_exception_is_one_fixed_internal_error() -> None:
    @tool(name="boom", description="Fails.", input_schema={"type": "object"}, blocking=False)
    def boom(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        raise RuntimeError("secret detail")

    server = McpServer(Registry(boom))
    result = asyncio.run(dispatch(server, call("boom"), headers(name="boom")))
    assert (result.status, result.code, result.reason) == (200, INTERNAL_ERROR, "handler-failed")
    assert reply(result)["error"] == {"code": INTERNAL_ERROR, "message": INTERNAL_ERROR_MESSAGE}
    assert result.body is not None
    assert b"secret" not in result.body
