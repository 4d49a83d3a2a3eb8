"""Real MCP clients with an OAuth 2.1 bearer token against ``soklet serve --auth jwt`` (issue 24).

The server verifies JWTs against a JWKS (``--jwks-url`` served by a real loopback HTTP server for the TypeScript
client, ``--jwks-file`` for the Python one) and a test issuer mints the tokens (tests/cli/support_tokens.py). Each
client passes its token through its SDK's own hook:

* ``@modelcontextprotocol/client`` 2.4.0: the transport's ``authProvider: { token }`` (``AuthProvider.token()`` is
  called before every request), and a fixed ``requestInit.headers.Authorization`` (clients/client_auth.mjs);
* the MCP Python SDK ``mcp`` 2.3.0: an ``httpx2.Auth`` on the transport's HTTP client
  (``streamable_http_client(url, http_client=create_mcp_http_client(auth=...))``).

With the token, each completes the demo flows in both eras. Without one, it is refused with HTTP 401 and a
``WWW-Authenticate: Bearer`` challenge naming the RFC 9728 metadata URL (a bad token adds
``error="invalid_token"``), which the clients' hooks see and plain HTTP confirms. The token's text never reaches the
server's log (the access log included)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.cli.support_tokens import JwksServer, TokenIssuer
from tests.interop.support_server import DEMO_FLOWS, DEMO_TOOLS, Served, serving
from tests.interop.test_python_client import leaves, run_flows
from tests.interop.test_ts_clients import assert_era, assert_flows
from tools import conformance as installer

pytestmark = pytest.mark.slow

CLIENTS = Path(__file__).resolve().parent / "clients"
SCRIPT = "client_auth.mjs"
#: Seconds one client run may take for all its flows (a hung exchange fails instead of blocking the run).
TIMEOUT = 120.0
#: The audience the server is told to require and the tokens name.
AUDIENCE = "soklet-interop"
#: The partition claim: the demo's handles (order.checkout) are bound to the caller's partition.
TENANT = "acme"
#: What the bad-token cases send: not a JWT at all.
BAD_TOKEN = "not-a-jwt"
#: A 2025-era ``initialize``: the first request of a plain HTTP client.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "plain", "version": "1"}},
}
ACCEPT = {"accept": "application/json, text/event-stream"}
_PARAMETER = re.compile(r'([a-z_]+)="([^"]*)"')


class Jwks:
    """A test issuer whose JWKS a real loopback HTTP server publishes; ``issuer`` is that server's origin."""

    def __init__(self, server: JwksServer) -> None:
        self.server = server
        self.issuer = f"http://127.0.0.1:{server.port}"
        self.tokens = TokenIssuer(issuer=self.issuer, audience=AUDIENCE, prefix="interop")
        server.document = self.tokens.jwks()

    def token(self, alg: str = "RS256") -> str:
        """A valid access token for the served audience, with the tenant claim."""
        return self.tokens.token(sub="interop-user", tenant=TENANT, alg=alg)

    def serve_options(self, folder: Path, *, key_file: bool = False) -> tuple[str, ...]:
        """The ``soklet serve`` options that admit this issuer's tokens: the key set by URL, or (``key_file``)
        written to a file in ``folder``."""
        if key_file:
            keys = ("--jwks-file", str(self.tokens.write_jwks(folder / "jwks.json")))
        else:
            keys = ("--jwks-url", self.server.url)
        return (
            "--auth",
            "jwt",
            "--issuer",
            self.issuer,
            "--audience",
            AUDIENCE,
            *keys,
            "--partition-claim",
            "tenant",
        )


class BearerAuth(httpx2.Auth):
    """The Python SDK's auth hook: an ``httpx2.Auth`` that sends ``token`` (if any) on every request the transport
    makes and records each 401 it gets back (status and ``WWW-Authenticate``)."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self.sent = 0
        self.refusals: list[tuple[int, str]] = []

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        """Add the ``Authorization`` header, send, and note a refusal."""
        if self.token is not None:
            request.headers["Authorization"] = f"Bearer {self.token}"
            self.sent += 1
        response = yield request
        if response.status_code == 401:
            self.refusals.append((response.status_code, response.headers.get("www-authenticate", "")))


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The install folder's node_modules, installed now when missing or stale; an install failure fails loudly."""
    try:
        folder = installer.ensure_installed()
    except installer.RunError as exc:
        pytest.fail(f"could not install the pinned Node 22 and TypeScript MCP clients: {exc}", pytrace=False)
    return folder / "node_modules"


@pytest.fixture
def jwks() -> Iterator[Jwks]:
    """A fresh issuer per test (so its fetch count is the test's own), its JWKS served over real HTTP on loopback."""
    with JwksServer({"keys": []}) as server:
        yield Jwks(server)


@pytest.fixture
def served(tmp_path: Path, jwks: Jwks) -> Iterator[Served]:
    """``soklet serve --auth jwt`` with the key set fetched from the JWKS server."""
    with serving(tmp_path, *jwks.serve_options(tmp_path)) as server:
        yield server


@pytest.fixture
def served_key_file(tmp_path: Path, jwks: Jwks) -> Iterator[Served]:
    """``soklet serve --auth jwt`` with the key set read from a file."""
    with serving(tmp_path, *jwks.serve_options(tmp_path, key_file=True)) as server:
        yield server


def metadata_url(served: Served) -> str:
    """Where the server's RFC 9728 document is: the well-known suffix inserted before the endpoint's path."""
    parts = urlsplit(served.url)
    return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path.rstrip('/')}"


def root_metadata_url(served: Served) -> str:
    """The root form of the metadata URL (no path suffix), which MCP clients fall back to."""
    parts = urlsplit(served.url)
    return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource"


def challenge(header: str | None) -> dict[str, str]:
    """The parameters of a ``WWW-Authenticate: Bearer k="v", ...`` challenge; fails if it is not Bearer."""
    assert header is not None, "no WWW-Authenticate header"
    scheme, _, rest = header.partition(" ")
    assert scheme.lower() == "bearer", header
    return dict(_PARAMETER.findall(rest))


def assert_never_logged(served: Served, *secrets: str) -> None:
    """Neither any ``secrets`` nor any of a JWT's three parts appear in the server's log."""
    text = served.log_text()
    assert text, "the server logged nothing"
    for secret in secrets:
        for part in {secret, *secret.split(".")}:
            assert part not in text, "the server's log holds token text"


def statuses(served: Served) -> list[str]:
    """The ``status=`` of every access-log line so far."""
    return [entry.get("status", "-") for entry in served.access_log()]


def reasons(served: Served) -> list[str]:
    """The ``reason=`` of every access-log line that has one, so far."""
    return [entry["reason"] for entry in served.access_log() if "reason" in entry]


def initialize_without_token(served: Served) -> httpx.Response:
    """A plain 2025-era ``initialize`` POST with no ``Authorization``: proves this server demands a token."""
    return httpx.post(served.url, json=INITIALIZE, headers=ACCEPT, timeout=30)


def run_node(node_modules: Path, served: Served, mode: str, token: str | None) -> dict[str, Any]:
    """Run clients/client_auth.mjs in ``mode`` with ``token`` in its environment (never on its command line); its
    JSON report. Fails with its stderr and the server's log when it fails or hangs."""
    env = installer.node_env()
    env.pop("SOKLET_TOKEN", None)
    if token is not None:
        env["SOKLET_TOKEN"] = token
    command = [str(installer.node_binary()), str(CLIENTS / SCRIPT), served.url, mode, str(node_modules)]
    try:
        done = subprocess.run(
            command,
            cwd=CLIENTS,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{SCRIPT} {mode} did not finish within {TIMEOUT:.0f} s:\n{served.log_text()[-3000:]}")
    if done.returncode != 0:
        pytest.fail(
            f"{SCRIPT} {mode} exited {done.returncode}:\n{done.stderr[-3000:]}\n--- server log ---\n"
            f"{served.log_text()[-3000:]}",
            pytrace=False,
        )
    report: dict[str, Any] = json.loads(done.stdout)
    return report


#: (mode, the era it must speak, the protocol version it must end up with).
TS_CASES = [
    ("default", "legacy", "2025-11-25"),
    ("pinned-2026", "modern", "2026-07-28"),
    ("headers-default", "legacy", "2025-11-25"),
]


@pytest.mark.parametrize(("mode", "era", "version"), TS_CASES, ids=[case[0] for case in TS_CASES])
def test_ts_client_with_a_token_completes_the_demo_flows(
    node_modules: Path, jwks: Jwks, served: Served, mode: str, era: str, version: str
) -> None:
    token = jwks.token()
    report = run_node(node_modules, served, mode, token)
    assert_flows(report, "@modelcontextprotocol/client", "2.4.0", mode)
    assert (report["era"], report["protocolVersion"]) == (era, version)
    assert report["sessionId"] is (era == "legacy")
    assert_era(era, served.access_log())
    assert "401" not in statuses(served), served.access_log()
    assert jwks.server.fetches >= 1  # the key set came from the JWKS URL
    assert initialize_without_token(served).status_code == 401  # the same server refuses a request without one
    assert_never_logged(served, token)


@pytest.mark.parametrize("mode", ["no-token-default", "no-token-pinned-2026"])
def test_ts_client_without_a_token_is_refused_with_the_metadata_url(
    node_modules: Path, served: Served, mode: str
) -> None:
    report = run_node(node_modules, served, mode, None)
    assert report["connected"] is False, report
    # An authProvider without onUnauthorized: the transport reads the challenge, then throws UnauthorizedError.
    assert report["error"]["unauthorized"] is True, report["error"]
    assert report["resourceMetadataUrl"] == metadata_url(served)
    plain = report["plainFetch"]
    assert plain["status"] == 401
    assert challenge(plain["wwwAuthenticate"]).get("resource_metadata") == metadata_url(served)
    assert set(reasons(served)) == {"admission-missing-credentials"}, served.access_log()
    assert "tools/call" not in served.access_methods()


def test_ts_client_with_a_bad_token_sees_invalid_token(node_modules: Path, served: Served) -> None:
    report = run_node(node_modules, served, "bad-token-default", None)
    assert report["connected"] is False, report
    # onUnauthorized was handed the 401 once; the one retry got 401 again and the transport gave up.
    assert [seen["status"] for seen in report["onUnauthorized"]] == [401]
    parameters = challenge(report["onUnauthorized"][0]["wwwAuthenticate"])
    assert parameters.get("error") == "invalid_token", parameters
    assert parameters.get("resource_metadata") == metadata_url(served)
    assert (report["error"]["name"], report["error"]["status"]) == ("SdkHttpError", 401), report["error"]
    # The SDK's try and its one retry, then the script's plain fetch without a token.
    expected = ["admission-malformed-token"] * 2 + ["admission-missing-credentials"]
    assert reasons(served) == expected, served.access_log()
    assert_never_logged(served, BAD_TOKEN)


async def python_flows(url: str, mode: str, auth: BearerAuth) -> tuple[str, list[str], list[Any]]:
    """The Python client's run of the demo flows (tests/interop/test_python_client.py) over a transport whose HTTP
    client carries ``auth``."""
    async with create_mcp_http_client(auth=auth) as http:
        return await run_flows(streamable_http_client(url, http_client=http), mode)


#: (the Python client's mode, the protocol version it must end up with).
PY_CASES = [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28"), ("auto", "2026-07-28")]


@pytest.mark.parametrize(("mode", "version"), PY_CASES, ids=[case[0] for case in PY_CASES])
def test_python_client_with_a_token_completes_the_demo_flows(
    jwks: Jwks, served_key_file: Served, mode: str, version: str
) -> None:
    served = served_key_file
    token = jwks.token(alg="ES256")
    auth = BearerAuth(token)
    try:
        negotiated, tools, outcomes = asyncio.run(asyncio.wait_for(python_flows(served.url, mode, auth), TIMEOUT))
    except Exception as exc:  # the SDK wraps errors in task-group exception groups: show the innermost ones
        failure = "; ".join(repr(leaf) for leaf in leaves(exc))
        pytest.fail(f"mode={mode}: {failure}\n--- server log ---\n{served.log_text()[-3000:]}", pytrace=False)
    assert negotiated == version
    assert tools == DEMO_TOOLS
    assert outcomes == [(tool, label, False, [text], len(scripted)) for tool, label, _, scripted, text in DEMO_FLOWS]
    assert auth.sent > len(DEMO_FLOWS)  # every request went through the hook
    assert auth.refusals == []
    methods = served.access_methods()
    assert ("initialize" in methods) is (mode == "legacy"), methods
    assert "401" not in statuses(served), served.access_log()
    assert initialize_without_token(served).status_code == 401  # the same server refuses a request without one
    assert_never_logged(served, token)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
def test_python_client_without_a_token_is_refused_with_the_metadata_url(served_key_file: Served, mode: str) -> None:
    served = served_key_file
    auth = BearerAuth(None)
    try:
        asyncio.run(asyncio.wait_for(python_flows(served.url, mode, auth), TIMEOUT))
    except Exception as exc:
        errors = [leaf for leaf in leaves(exc) if isinstance(leaf, MCPError)]
    else:
        errors = []
    # The SDK surfaces the 401's JSON-RPC error body as an MCPError; its auth hook saw the challenge itself.
    assert errors, f"mode={mode} without a token was not refused"
    assert (errors[0].error.code, errors[0].error.message) == (-32600, "Unauthorized")
    assert auth.refusals, "the auth hook saw no 401"
    status, header = auth.refusals[0]
    assert status == 401
    assert challenge(header).get("resource_metadata") == metadata_url(served)
    assert set(reasons(served)) == {"admission-missing-credentials"}, served.access_log()
    assert "tools/call" not in served.access_methods()


def test_plain_http_sees_the_challenges_and_the_metadata(jwks: Jwks, served_key_file: Served) -> None:
    """What any client reads: 401 with the challenge (``invalid_token`` for a malformed token or one for another
    audience), and the RFC 9728 document at both well-known paths, naming the issuer as its authorization server."""
    served = served_key_file
    good, elsewhere = jwks.token(), jwks.tokens.token(sub="interop-user", tenant=TENANT, aud="someone-else")
    with httpx.Client(timeout=30) as client:
        answers = {
            token: client.post(served.url, json=INITIALIZE, headers={**ACCEPT, "authorization": f"Bearer {token}"})
            for token in (BAD_TOKEN, elsewhere, good)
        }
        documents = [client.get(url) for url in (metadata_url(served), root_metadata_url(served))]
    missing = initialize_without_token(served)
    assert missing.status_code == 401
    assert challenge(missing.headers.get("www-authenticate")) == {"resource_metadata": metadata_url(served)}
    for refused in (BAD_TOKEN, elsewhere):
        assert answers[refused].status_code == 401
        parameters = challenge(answers[refused].headers.get("www-authenticate"))
        assert (parameters.get("error"), parameters.get("resource_metadata")) == ("invalid_token", metadata_url(served))
    assert answers[good].status_code == 200, answers[good].text
    for document in documents:
        assert document.status_code == 200
        body = document.json()
        assert body["resource"] == served.url
        assert jwks.issuer in body["authorization_servers"]
        assert body["bearer_methods_supported"] == ["header"]
    assert_never_logged(served, BAD_TOKEN, elsewhere, good)
