"""The admission contract a token policy plugs into, on a real uvicorn: scopes (the values, an admission's, an
operation's ``required_scopes``), how each refusal is answered (401/403/503 with an RFC 6750 challenge naming the RFC
9728 metadata URL), the metadata document at both well-known paths, awaited policies, 2025-era sessions bound to
the subject as well as the partition, and the refusal counter."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from soklet_core.json import JsonObject
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import (
    BearerTokenAdmission,
    CallToolResult,
    McpServer,
    Registry,
    RequestContext,
    tool,
)
from soklet_core.mcp.model.context import Identity
from soklet_core.mcp.model.errors import RegistrationError
from soklet_core.mcp.model.scopes import MAX_SCOPE_CHARS, MAX_SCOPES, parse_scope_text, scope_set
from soklet_core.mcp.server._jsonrpc import INVALID_STATE_MESSAGE
from soklet_core.mcp.server.admission import (
    MAX_BEARER_TOKEN_CHARS,
    Admission,
    AdmissionRefused,
    AdmissionRefusedReason,
    AdmissionRequest,
    BearerTokenEntry,
    bearer_token,
)
from soklet_core.mcp.server.auth import JwtSettings
from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.mcp.server.resource_metadata import WELL_KNOWN_PATH, ProtectedResource, check_resource_url
from soklet_core.protection import ProtectionConfig
from tests.cli.support_tokens import AUDIENCE, ISSUER, TokenIssuer
from tests.server.support import FORM_CAPS, Client, Entries, build_test_registry, running

OBJECT = {"type": "object"}
ENTERED: list[str] = []


@tool(name="files.read", description="Reads (needs files:read).", input_schema=OBJECT, required_scopes=["files:read"])
def files_read(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    ENTERED.append(f"read:{context.identity.subject}")
    return CallToolResult.from_text("read")


@tool(name="open.tool", description="Needs no scope.", input_schema=OBJECT)
def open_tool(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    ENTERED.append(f"open:{context.identity.subject}")
    return CallToolResult.from_text("open")


REGISTRY = Registry(files_read, open_tool)
RESOURCE = ProtectedResource(
    resource="http://127.0.0.1:1/mcp",
    authorization_servers=("http://127.0.0.1:2/realms/acme",),
    scopes_supported=frozenset({"files:read"}),
)
TOKENS = BearerTokenAdmission(
    {
        "reader": BearerTokenEntry("alice", "acme", frozenset({"files:read"})),
        "plain": BearerTokenEntry("bob", "acme"),
        "other": BearerTokenEntry("carol", "acme", frozenset({"files:read"})),
    }
)


def _server(admission: Any = TOKENS, metrics: ServerMetrics | None = None) -> McpServer:
    keyring = ProtectionKeyring(ProtectionKey.generate("k1"))
    return McpServer(
        REGISTRY,
        protection=ProtectionConfig(keyring=keyring),
        admission=admission,
        protected_resource=RESOURCE,
        metrics=metrics,
    )


# --- values --------------------------------------------------------------------------------------------------------


def test_scope_values_are_bounded_at_their_edges() -> None:
    assert scope_set(["a" * MAX_SCOPE_CHARS]) == {"a" * MAX_SCOPE_CHARS}
    assert len(scope_set([f"s{i}" for i in range(MAX_SCOPES)])) == MAX_SCOPES
    for bad in (
        ["a" * (MAX_SCOPE_CHARS + 1)],
        [f"s{i}" for i in range(MAX_SCOPES + 1)],
        ["two words"],
        ['q"'],
        ["b\\"],
        [""],
    ):
        with pytest.raises(ValueError, match="scope"):
            scope_set(bad)
    with pytest.raises(ValueError, match="not as one string"):
        scope_set("files:read")
    assert parse_scope_text("  a  b a ") == {"a", "b"}
    with pytest.raises(ValueError, match="too long"):
        parse_scope_text("a " * (MAX_SCOPES * (MAX_SCOPE_CHARS + 1)))


def test_a_registration_refuses_a_scope_that_could_break_the_challenge() -> None:
    with pytest.raises(RegistrationError):
        tool(name="bad.tool", description="x", input_schema=OBJECT, required_scopes=['files" error="x'])(open_tool)
    assert files_read.required_scopes == frozenset({"files:read"})
    assert REGISTRY.required_scopes == frozenset({"files:read"})
    assert Registry(open_tool).required_scopes == frozenset()
    assert open_tool.required_scopes == frozenset()


def test_each_refusal_reason_has_one_answer() -> None:
    answers = {
        reason: (AdmissionRefused(reason).http_status, AdmissionRefused(reason).bearer_error)
        for reason in AdmissionRefusedReason
    }
    assert answers[AdmissionRefusedReason.MISSING_CREDENTIALS] == (401, None)
    assert answers[AdmissionRefusedReason.MALFORMED_CREDENTIALS] == (401, "invalid_request")
    assert answers[AdmissionRefusedReason.INSUFFICIENT_SCOPE] == (403, "insufficient_scope")
    assert answers[AdmissionRefusedReason.VERIFIER_UNAVAILABLE] == (503, None)
    for reason in (
        AdmissionRefusedReason.EXPIRED,
        AdmissionRefusedReason.BAD_SIGNATURE,
        AdmissionRefusedReason.DISALLOWED_ALGORITHM,
        AdmissionRefusedReason.UNKNOWN_KEY,
        AdmissionRefusedReason.WRONG_AUDIENCE,
        AdmissionRefusedReason.TOKEN_TOO_LARGE,
    ):
        assert answers[reason] == (401, "invalid_token")
    assert str(AdmissionRefused(AdmissionRefusedReason.EXPIRED)) == "expired"


def test_the_bearer_token_is_read_in_one_place_with_its_bound() -> None:
    def read(header: str | None) -> str:
        return bearer_token(AdmissionRequest("/mcp", {} if header is None else {"authorization": header}))

    assert read("Bearer " + "t" * MAX_BEARER_TOKEN_CHARS) == "t" * MAX_BEARER_TOKEN_CHARS
    assert read("bearer  abc ") == "abc"
    cases = {
        None: AdmissionRefusedReason.MISSING_CREDENTIALS,
        "Basic abc": AdmissionRefusedReason.MALFORMED_CREDENTIALS,
        "Bearer ": AdmissionRefusedReason.MALFORMED_CREDENTIALS,
        "Bearer " + "t" * (MAX_BEARER_TOKEN_CHARS + 1): AdmissionRefusedReason.TOKEN_TOO_LARGE,
    }
    for header, reason in cases.items():
        with pytest.raises(AdmissionRefused) as refused:
            read(header)
        assert refused.value.reason is reason


def test_an_unscoped_admission_runs_everything_and_a_scoped_one_what_it_grants() -> None:
    anonymous = Admission(Identity.anonymous(), "anonymous", scopes=None)
    assert anonymous.grants({"files:read"})
    granted = Admission(Identity("alice"), "acme", frozenset({"files:read"}))
    assert granted.grants({"files:read"})
    assert not granted.grants({"files:read", "files:write"})
    assert Admission(Identity("bob"), "acme").grants(())
    assert not Admission(Identity("bob"), "acme").grants({"x"})


def test_the_resource_metadata_paths_url_and_document() -> None:
    assert RESOURCE.metadata_paths == (f"{WELL_KNOWN_PATH}/mcp", WELL_KNOWN_PATH)
    assert RESOURCE.metadata_url == f"http://127.0.0.1:1{WELL_KNOWN_PATH}/mcp"
    root = ProtectedResource(resource="https://mcp.example.com/", authorization_servers=("https://auth.example.com",))
    assert root.metadata_paths == (WELL_KNOWN_PATH,)
    assert json.loads(RESOURCE.document()) == {
        "resource": "http://127.0.0.1:1/mcp",
        "authorization_servers": ["http://127.0.0.1:2/realms/acme"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["files:read"],
    }
    for bad in (
        "http://mcp.example.com/mcp",  # plain http off loopback
        "https://mcp.example.com/mcp#frag",
        "https://user:pw@mcp.example.com/mcp",
        'https://mcp.example.com/"x',
        "ftp://mcp.example.com/",
        "https:///nohost",
        "https://mcp.example.com:99999/",
        "https://" + "a" * 2050,
    ):
        with pytest.raises(ValueError, match="the resource") as problem:
            check_resource_url(bad, "the resource")
        assert bad not in str(problem.value)
    assert check_resource_url("http://localhost:8/x", "u") == "http://localhost:8/x"
    longest = "https://m.example.com/" + "p" * (2048 - len("https://m.example.com/"))
    assert check_resource_url(longest, "u") == longest
    with pytest.raises(ValueError, match="at most 2048"):
        check_resource_url(longest + "p", "u")
    servers = tuple(f"https://a{i}.example.com" for i in range(16))
    ProtectedResource(resource="https://m.example.com/mcp", authorization_servers=servers)
    with pytest.raises(ValueError, match="1-16"):
        ProtectedResource(
            resource="https://m.example.com/mcp", authorization_servers=(*servers, "https://b.example.com")
        )
    with pytest.raises(ValueError, match="1-16"):
        ProtectedResource(resource="https://m.example.com/mcp", authorization_servers=())


# --- on the wire ---------------------------------------------------------------------------------------------------


def _challenge(headers: httpx.Headers) -> str:
    return headers["www-authenticate"]


def test_refusals_carry_the_challenge_and_scopes_are_checked_before_the_handler() -> None:
    ENTERED.clear()
    metrics = ServerMetrics(instance="t")
    with running(_server(metrics=metrics)) as base:
        meta = f'resource_metadata="{RESOURCE.metadata_url}"'
        none = Client(base).call("open.tool", {})
        assert none.status == 401
        assert _challenge(none.headers) == f"Bearer {meta}"
        assert none.error["code"] == -32600
        assert none.error["message"] == "Unauthorized"
        unknown = Client(base, token="nobody").call("open.tool", {})
        assert unknown.status == 401
        assert _challenge(unknown.headers) == f'Bearer {meta}, error="invalid_token"'
        basic = Client(base).post("tools/call", {"name": "open.tool"}, headers={"Authorization": "Basic eA=="})
        assert basic.status == 401
        assert 'error="invalid_request"' in _challenge(basic.headers)
        scoped = Client(base, token="plain").call("files.read", {})
        assert scoped.status == 403
        assert scoped.error["message"] == "Forbidden"
        assert _challenge(scoped.headers) == f'Bearer {meta}, error="insufficient_scope", scope="files:read"'
        assert ENTERED == []  # no refused call entered a handler
        assert Client(base, token="plain").call("open.tool", {}).text == "open"
        assert Client(base, token="reader").call("files.read", {}).text == "read"
        assert ENTERED == ["open:bob", "read:alice"]
        # The document at both well-known paths, GET and HEAD; other methods 405; no token needed.
        for path in RESOURCE.metadata_paths:
            got = httpx.get(base + path)
            assert got.status_code == 200
            assert got.json()["resource"] == RESOURCE.resource
            assert got.headers["content-type"] == "application/json"
            assert httpx.head(base + path).status_code == 200
            assert httpx.post(base + path).status_code == 405
        assert httpx.get(base + WELL_KNOWN_PATH + "/other").status_code == 404
    rendered = metrics.render()[0].decode()
    for reason, count in (
        ("missing-credentials", 1),
        ("unknown-credentials", 1),
        ("malformed-credentials", 1),
        ("insufficient-scope", 1),
    ):
        assert f'soklet_admission_refusals_total{{reason="{reason}"}} {count}.0' in rendered


def test_the_anonymous_caller_is_unscoped() -> None:
    ENTERED.clear()
    with running(_server(admission=None)) as base:
        assert Client(base).call("files.read", {}).text == "read"
    assert ENTERED == ["read:None"]


class _AwaitedPolicy:
    """A policy that must wait (as one asking a key set or an introspection endpoint does)."""

    async def admit(self, request: AdmissionRequest) -> Admission:
        await asyncio.sleep(0)
        token = bearer_token(request)
        if token == "down":
            raise AdmissionRefused(AdmissionRefusedReason.VERIFIER_UNAVAILABLE)
        if token != "ok":
            raise AdmissionRefused(AdmissionRefusedReason.EXPIRED)
        return Admission(Identity("dana"), "acme", frozenset({"files:read"}))


def test_an_awaited_policy_admits_and_refuses() -> None:
    ENTERED.clear()
    with running(_server(admission=_AwaitedPolicy())) as base:
        assert Client(base, token="ok").call("files.read", {}).text == "read"
        expired = Client(base, token="old").call("files.read", {})
        assert expired.status == 401
        assert 'error="invalid_token"' in _challenge(expired.headers)
        down = Client(base, token="down").call("files.read", {})
        assert down.status == 503
        assert down.headers["retry-after"]
        assert "www-authenticate" not in down.headers
    assert ENTERED == ["read:dana"]


def _legacy(base: str, token: str, body: dict[str, Any], session: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return httpx.post(base + "/mcp", json=body, headers=headers)


def test_a_2025_session_is_bound_to_the_subject_as_well_as_the_partition() -> None:
    with running(_server()) as base:
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        opened = _legacy(base, "reader", initialize)
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        # carol: the same partition (acme), the same scopes, another subject: not her session.
        assert _legacy(base, "other", listing, session).status_code == 404
        assert _legacy(base, "reader", listing, session).status_code == 200
        scoped = _legacy(base, "plain", listing, session)
        assert scoped.status_code == 404
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "files.read", "arguments": {}}}
        assert "read" in _legacy(base, "reader", call, session).text


def test_a_state_sealed_for_one_tenant_is_refused_for_another_before_the_handler(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The JWT policy on a real uvicorn: tenant B's valid token cannot continue tenant A's state."""
    issuer = TokenIssuer()
    settings = JwtSettings(
        issuer=ISSUER, audience=AUDIENCE, jwks_file=issuer.write_jwks(tmp_path / "jwks.json"), partition_claim="tenant"
    )
    entries = Entries()
    keyring = ProtectionKeyring(ProtectionKey.generate("k1"))
    server = McpServer(
        build_test_registry(entries), protection=ProtectionConfig(keyring=keyring), admission=settings.policy()
    )
    alice = issuer.token(sub="alice", tenant="tenant-a")
    mallory = issuer.token(sub="mallory", tenant="tenant-b")
    with caplog.at_level(logging.INFO, logger="soklet.mcp.access"), running(server) as base:
        tenant_a = Client(base, token=alice)
        first = tenant_a.call("probe", {}, capabilities=FORM_CAPS)
        assert first.state is not None
        assert entries["probe"] == 1
        replay = Client(base, token=mallory).retry(
            "probe", {}, first.state, {"done": {"action": "accept"}}, capabilities=FORM_CAPS
        )
        assert replay.error == {"code": -32602, "message": INVALID_STATE_MESSAGE}
        assert entries["probe"] == 1  # the handler never entered for tenant B
        done = tenant_a.retry("probe", {}, first.state, {"done": {"action": "accept"}}, capabilities=FORM_CAPS)
        assert done.text == "done after 1 rounds; owner=tenant-a"
        assert entries["probe"] == 2
    lines = [record.getMessage() for record in caplog.records if record.name == "soklet.mcp.access"]
    assert any("reason=state-binding-partition" in line for line in lines), lines
    for line in lines:
        for segment in (*alice.split("."), *mallory.split(".")):
            assert segment not in line
