"""``soklet serve --auth jwt``: a real server subprocess on loopback, a JWKS served by a real local HTTP server and
tokens minted by :mod:`tests.cli.support_tokens`.

What is checked end to end: a valid token runs the demo; no token, an expired token and a missing scope get the
RFC 6750 challenges naming the RFC 9728 metadata, which both well-known paths serve; a huge Authorization header
never reaches a handler; a state sealed for tenant A never opens for tenant B (logged binding-partition, answered
with the sanitized -32602) and still opens for A; a 2025-era session belongs to its subject; no token is ever
logged; and the option errors are one usage line each.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.support_serve import Served
from tests.cli.support_tokens import AUDIENCE, ISSUER, JwksServer, TokenIssuer, serve_auth_args
from tests.server.support import Client

pytestmark = pytest.mark.slow

#: The demo tool that answers input_required with a framework-protected (sealed) requestState.
TOOL = "catalog.continue"
ELICIT = {"elicitation": {}}
APPROVE = {"approval": {"action": "accept", "content": {}}}
WELL_KNOWN = "/.well-known/oauth-protected-resource"


@pytest.fixture(scope="module")
def issuer() -> TokenIssuer:
    return TokenIssuer()


@pytest.fixture(scope="module")
def jwks(issuer: TokenIssuer) -> Iterator[JwksServer]:
    with JwksServer(issuer.jwks()) as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, jwks: JwksServer) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("auth"), *serve_auth_args(jwks))
    try:
        yield server
    finally:
        server.kill()


def _base(served: Served) -> str:
    url: str = served.facts["url"]
    return url.removesuffix("/mcp")


def _client(served: Served, token: str | None) -> Client:
    return Client(_base(served), token=token)


def _wait_for_log(served: Served, words: str, seconds: float = 10.0) -> None:
    """Wait until the server's stderr holds ``words`` (the access line is written after the answer is sent)."""
    deadline = time.monotonic() + seconds
    while words not in served.log.read_text():
        assert time.monotonic() < deadline, f"{words!r} never logged"
        time.sleep(0.05)


def _challenge(reply: Any) -> str:
    value: str = reply.headers["www-authenticate"]
    return value


def test_the_start_up_facts_name_the_policy_and_never_a_secret(served: Served) -> None:
    auth = served.facts["auth"]
    port = served.facts["port"]
    assert auth == {
        "kind": "jwt",
        "issuer": ISSUER,
        "audience": AUDIENCE,
        "resource": f"http://127.0.0.1:{port}/mcp",
        "resource_metadata": f"http://127.0.0.1:{port}{WELL_KNOWN}/mcp",
    }


def test_a_valid_token_runs_the_demo_tool(served: Served, issuer: TokenIssuer) -> None:
    client = _client(served, issuer.token(tenant="acme", alg="ES256"))
    first = client.call(TOOL, {}, capabilities=ELICIT)
    assert first.status == 200
    assert first.result["resultType"] == "input_required"
    done = client.retry(TOOL, {}, first.state, APPROVE, capabilities=ELICIT)
    assert done.status == 200, done.body
    assert done.result.get("resultType", "complete") == "complete"


def test_no_token_is_401_naming_the_resource_metadata(served: Served) -> None:
    reply = _client(served, None).call(TOOL, {}, capabilities=ELICIT)
    assert reply.status == 401
    port = served.facts["port"]
    assert _challenge(reply) == f'Bearer resource_metadata="http://127.0.0.1:{port}{WELL_KNOWN}/mcp"'


def test_an_expired_token_is_401_invalid_token(served: Served, issuer: TokenIssuer) -> None:
    reply = _client(served, issuer.token(tenant="acme", exp_in=-600)).call(TOOL, {}, capabilities=ELICIT)
    assert reply.status == 401
    challenge = _challenge(reply)
    assert 'error="invalid_token"' in challenge
    assert "resource_metadata=" in challenge


def test_both_well_known_paths_serve_the_rfc_9728_document(served: Served) -> None:
    port = served.facts["port"]
    for path in (f"{WELL_KNOWN}/mcp", WELL_KNOWN):
        answer = httpx.get(_base(served) + path)
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("application/json")
        document = answer.json()
        assert document["resource"] == f"http://127.0.0.1:{port}/mcp"
        assert document["authorization_servers"] == [ISSUER]
        assert document["bearer_methods_supported"] == ["header"]
        # The demo's registrations require no scope and neither does the server: none listed.
        assert document.get("scopes_supported", []) == []


def test_a_one_mib_authorization_header_never_reaches_a_handler(served: Served, issuer: TokenIssuer) -> None:
    before = served.log.read_text().count(f"operation={TOOL} status=200")
    huge = "Bearer " + "A" * (1024 * 1024)
    try:
        reply = _client(served, None).call(TOOL, {}, capabilities=ELICIT, headers={"Authorization": huge})
        assert reply.status in (400, 401, 431)
    except httpx.HTTPError:
        pass  # the server may close the connection on a head that large: refused all the same
    assert served.log.read_text().count(f"operation={TOOL} status=200") == before
    # The server survives it.
    assert _client(served, issuer.token(tenant="acme")).call(TOOL, {}, capabilities=ELICIT).status == 200


def test_a_state_sealed_for_one_tenant_never_opens_for_another(served: Served, issuer: TokenIssuer) -> None:
    tenant_a = _client(served, issuer.token(sub="alice", tenant="tenant-a"))
    tenant_b = _client(served, issuer.token(sub="bob", tenant="tenant-b"))
    first = tenant_a.call(TOOL, {}, capabilities=ELICIT)
    state = first.state
    assert state is not None
    replay = tenant_b.retry(TOOL, {}, state, APPROVE, capabilities=ELICIT)
    assert replay.error["code"] == -32602
    # Sanitized: the wire never says why (the access log does).
    assert "partition" not in str(replay.body).lower()
    _wait_for_log(served, "reason=state-binding-partition")
    done = tenant_a.retry(TOOL, {}, state, APPROVE, capabilities=ELICIT)
    assert done.status == 200
    assert "result" in done.body, done.body


def test_a_2025_session_belongs_to_its_subject(served: Served, issuer: TokenIssuer) -> None:
    alice = issuer.token(sub="alice", tenant="acme")
    carol = issuer.token(sub="carol", tenant="acme")
    url = served.facts["url"]

    def post(token: str, body: dict[str, Any], session: str | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        if session is not None:
            headers["Mcp-Session-Id"] = session
        return httpx.post(url, json=body, headers=headers, timeout=20)

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    opened = post(alice, initialize)
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert post(carol, listing, session).status_code == 404
    assert post(alice, listing, session).status_code == 200


def test_the_access_log_never_holds_a_token(served: Served, issuer: TokenIssuer) -> None:
    token = issuer.token(sub="logged", tenant="acme")
    _client(served, token).call(TOOL, {}, capabilities=ELICIT)
    _client(served, token + "x").call(TOOL, {}, capabilities=ELICIT)
    log = served.log.read_text()
    # Any part of a signed token: its header, claims and signature segments.
    for segment in token.split("."):
        assert segment not in log


def test_a_missing_required_scope_is_403_insufficient_scope(
    tmp_path: Path, jwks: JwksServer, issuer: TokenIssuer
) -> None:
    server = Served(tmp_path, *serve_auth_args(jwks, "--required-scope", "mcp:tools", "--required-scope", "mcp:read"))
    try:
        base = _base(server)
        reply = Client(base, token=issuer.token(tenant="acme", scope="mcp:read")).call(TOOL, {}, capabilities=ELICIT)
        assert reply.status == 403
        challenge = _challenge(reply)
        assert 'error="insufficient_scope"' in challenge
        assert 'scope="mcp:read mcp:tools"' in challenge or 'scope="mcp:tools mcp:read"' in challenge
        granted = Client(base, token=issuer.token(tenant="acme", scope="mcp:read mcp:tools"))
        assert granted.call(TOOL, {}, capabilities=ELICIT).status == 200
        document = httpx.get(base + WELL_KNOWN).json()
        assert sorted(document["scopes_supported"]) == ["mcp:read", "mcp:tools"]
    finally:
        server.stop()


def test_a_jwks_file_and_an_explicit_resource_are_served(tmp_path: Path, issuer: TokenIssuer) -> None:
    jwks_file = issuer.write_jwks(tmp_path / "jwks.json")
    server = Served(
        tmp_path,
        "--auth",
        "jwt",
        "--issuer",
        ISSUER,
        "--audience",
        AUDIENCE,
        "--jwks-file",
        str(jwks_file),
        "--resource",
        "https://mcp.example.com/mcp",
        "--authorization-server",
        "https://auth.example.com",
    )
    try:
        base = _base(server)
        reply = Client(base, token=issuer.token(alg="EdDSA")).call(TOOL, {}, capabilities=ELICIT)
        assert reply.status == 200
        refused = Client(base).call(TOOL, {}, capabilities=ELICIT)
        expected = f'Bearer resource_metadata="https://mcp.example.com{WELL_KNOWN}/mcp"'
        assert _challenge(refused) == expected
        document = httpx.get(base + WELL_KNOWN + "/mcp").json()
        assert document["resource"] == "https://mcp.example.com/mcp"
        assert document["authorization_servers"] == ["https://auth.example.com"]
    finally:
        server.stop()


# -- option errors: one usage line, exit 2, no traceback, no value echoed ------------------------------------------


def _serve(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


JWT = ("--auth", "jwt", "--issuer", ISSUER, "--audience", AUDIENCE, "--jwks-url", "http://127.0.0.1:9/jwks.json")


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ((*JWT, "--stdio"), "--auth cannot be used with --stdio"),
        (("--auth", "jwt", "--audience", AUDIENCE, "--jwks-url", "https://a.example/j"), "needs --issuer"),
        (("--auth", "jwt", "--issuer", ISSUER, "--audience", AUDIENCE), "exactly one of --jwks-url and --jwks-file"),
        (("--issuer", ISSUER), "--issuer need --auth jwt or --auth introspection"),
        (("--resource", "https://mcp.example.com/mcp"), "--resource and --authorization-server need --auth"),
        (("--auth", "introspection", "--client-id", "c"), "needs --introspection-url"),
        ((*JWT, "--client-id", "c"), "--client-id cannot be used with --auth jwt"),
        ((*JWT, "--leeway", "10m"), "--leeway"),
        ((*JWT, "--host", "0.0.0.0"), "needs --resource URL"),
        ((*JWT, "--resource", "http://mcp.example.com/mcp"), "--resource must use https://"),
    ],
)
def test_option_errors_are_one_usage_line(arguments: tuple[str, ...], words: str) -> None:
    result = _serve(*arguments)
    assert result.returncode == 2, result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("soklet: usage:")


def test_a_plain_http_issuer_off_loopback_is_refused_without_echoing_it() -> None:
    issuer = "http://auth.example.com/realm-secretish"
    result = _serve("--auth", "jwt", "--issuer", issuer, "--audience", AUDIENCE, "--jwks-url", "https://a.example/j")
    assert result.returncode == 2
    assert result.stderr.startswith("soklet: usage: --issuer must")
    assert "https://" in result.stderr
    assert "realm-secretish" not in result.stderr
    assert "Traceback" not in result.stderr


def test_a_client_secret_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t-value\n")
    secret.chmod(0o644)
    result = _serve(
        "--auth",
        "introspection",
        "--introspection-url",
        "https://auth.example.com/introspect",
        "--client-id",
        "soklet",
        "--client-secret-file",
        str(secret),
        "--issuer",
        "https://auth.example.com",
    )
    # As every secret file of this CLI (the admin token file): an unusable file is exit 3.
    assert result.returncode == 3, result.stderr
    assert "--client-secret-file" in result.stderr
    assert "--allow-insecure-permissions" in result.stderr
    assert "s3cr3t-value" not in result.stderr + result.stdout
