"""``soklet inspect-state --partition-from-token`` / ``--subject-from-token``: the partition and subject a bearer
token is admitted with, computed by the real JWT policy (a JWKS file and one served by a real loopback server),
used for the binding checks; a refused token is named by its reason only, never shown."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.support_tokens import AUDIENCE, ISSUER, JwksServer, TokenIssuer
from tests.cli.test_inspect_state_cli import RING, write_request

pytestmark = pytest.mark.slow


@pytest.fixture
def issuer() -> TokenIssuer:
    return TokenIssuer()


def _sealed_for(soklet: Any, partition: str) -> str:
    """A state sealed now (the real clock: the tokens are checked against it) for ``partition``."""
    soklet.run("keys", "generate", "--id", "k1")
    write_request(soklet.cwd, "call.json", 1)
    write_request(soklet.cwd, "retry.json", 2)
    (soklet.cwd / "state.json").write_text('{"step": 1}')
    result = soklet.run("seal-state", "--request", "call.json", "--state", "state.json", "--partition", partition)
    assert result.returncode == 0, result.stderr
    token: str = result.stdout.strip()
    return token


def _jwt_options(soklet: Any, issuer: TokenIssuer) -> list[str]:
    jwks = issuer.write_jwks(soklet.cwd / "jwks.json")
    return ["--issuer", ISSUER, "--audience", AUDIENCE, "--jwks-file", str(jwks), "--partition-claim", "tenant"]


def test_the_token_partition_binds_the_retry(soklet: Any, issuer: TokenIssuer) -> None:
    state = _sealed_for(soklet, "acme")
    options = ["--keyring", RING, "--request", "retry.json", *_jwt_options(soklet, issuer)]
    token_a = issuer.token(sub="alice", tenant="acme", scope="mcp:tools mcp:read")
    token_b = issuer.token(sub="bob", tenant="globex")
    same, other, human = soklet.run_together(
        ("inspect-state", *options, "--json", "--partition-from-token", token_a, state),
        ("inspect-state", *options, "--json", "--partition-from-token", token_b, state),
        ("inspect-state", *options, "--partition-from-token", token_a, state),
    )
    assert same.returncode == 0, same.stderr
    document = json.loads(same.stdout)
    assert document["admission"]["partition"] == "acme"
    assert document["admission"]["subject"] == "alice"
    assert document["admission"]["scopes"] == ["mcp:read", "mcp:tools"]
    assert document["retry"]["partition"] == "acme"
    assert other.returncode == 1
    refused = json.loads(other.stdout)
    assert refused["admission"]["partition"] == "globex"
    assert refused["refusal"] == "binding-partition"
    assert human.returncode == 0, human.stderr
    assert "Admission (from --partition-from-token)" in human.stdout
    assert "alice" in human.stdout
    for result in (same, other, human):
        for segment in token_a.split(".") + token_b.split("."):
            assert segment not in result.stdout + result.stderr


def test_the_subject_from_a_token_served_by_a_jwks_url(soklet: Any, issuer: TokenIssuer) -> None:
    state = _sealed_for(soklet, "alice")
    token = issuer.token(sub="alice", alg="EdDSA")
    with JwksServer(issuer.jwks()) as jwks:
        # Without --partition-claim the partition is the subject, as the server admits it.
        result = soklet.run(
            "inspect-state",
            "--issuer",
            ISSUER,
            "--audience",
            AUDIENCE,
            "--jwks-url",
            jwks.url,
            "--json",
            "--subject-from-token",
            token,
            state,
        )
    assert result.returncode == 0, result.stderr
    admission = json.loads(result.stdout)["admission"]
    assert admission["subject"] == "alice"
    assert admission["partition"] == "alice"
    assert admission["from"] == "--subject-from-token"
    assert jwks.fetches >= 1


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp_in": -600}, "expired"),
        ({"aud": "someone-else"}, "wrong-audience"),
        ({"iss": "https://other.example"}, "wrong-issuer"),
    ],
)
def test_a_refused_token_says_its_reason_only(
    soklet: Any, issuer: TokenIssuer, claims: dict[str, Any], reason: str
) -> None:
    state = _sealed_for(soklet, "acme")
    token = issuer.token(tenant="acme", **claims)
    options = [*_jwt_options(soklet, issuer), "--partition-from-token", token, state]
    human, as_json = soklet.run_together(("inspect-state", *options), ("inspect-state", "--json", *options))
    assert human.returncode == 1
    assert human.stderr.startswith(f"soklet: --partition-from-token: admission refuses the token: {reason}")
    assert json.loads(as_json.stdout) == {
        "kind": "admission-refused",
        "from": "--partition-from-token",
        "reason": reason,
        "exit_code": 1,
    }
    for result in (human, as_json):
        for segment in token.split("."):
            assert segment not in result.stdout + result.stderr


def test_usage_errors(soklet: Any, issuer: TokenIssuer) -> None:
    token = issuer.token(tenant="acme")
    no_jwks, both, auth_alone = soklet.run_together(
        ("inspect-state", "--issuer", ISSUER, "--audience", AUDIENCE, "--partition-from-token", token, "x"),
        ("inspect-state", "--partition", "p", *_jwt_options(soklet, issuer), "--partition-from-token", token, "x"),
        ("inspect-state", "--auth", "jwt", "x"),
    )
    assert no_jwks.returncode == 2
    assert "exactly one of --jwks-url and --jwks-file" in no_jwks.stderr
    assert both.returncode == 2
    assert "--partition and --partition-from-token exclude each other" in both.stderr
    assert auth_alone.returncode == 2
    assert "need --partition-from-token or --subject-from-token" in auth_alone.stderr


def test_a_token_read_from_a_file(soklet: Any, issuer: TokenIssuer) -> None:
    state = _sealed_for(soklet, "acme")
    token_file = soklet.cwd / "token.txt"
    token = issuer.token(sub="alice", tenant="acme")
    token_file.write_text(token + "\n")
    options = ["--keyring", RING, "--request", "retry.json", *_jwt_options(soklet, issuer)]
    read, stdin, zero_leeway = soklet.run_together(
        ("inspect-state", *options, "--json", "--partition-from-token", f"@{token_file}", state),
        ("inspect-state", *options, "--partition-from-token", "@-", state),
        ("inspect-state", *options, "--leeway", "0s", "--json", "--partition-from-token", f"@{token_file}", state),
    )
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["admission"]["partition"] == "acme"
    assert stdin.returncode == 2
    assert "@FILE" in stdin.stderr
    assert zero_leeway.returncode == 0, zero_leeway.stderr
    assert json.loads(zero_leeway.stdout)["admission"]["subject"] == "alice"
    for result in (read, stdin, zero_leeway):
        for segment in token.split("."):
            assert segment not in result.stdout + result.stderr
