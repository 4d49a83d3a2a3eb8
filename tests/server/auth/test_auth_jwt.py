"""JwtAdmission against a real JWKS served on loopback and tokens signed with keys generated here (RS256, ES256,
EdDSA): every refusal reason of the verification steps, the key set's caching, rate-limited refresh and rotation,
and the verified-token cache."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jwt.algorithms import RSAAlgorithm

from soklet_core.mcp.server.admission import (
    MAX_BEARER_TOKEN_CHARS,
    Admission,
    AdmissionRefused,
    AdmissionRefusedReason,
    AdmissionRequest,
)
from soklet_core.mcp.server.auth import SIGNING_ALGORITHMS, JwksSource, JwtAdmission, JwtSettings
from soklet_core.mcp.server.auth._jwks import MAX_JWKS_BYTES
from tests.cli.support_tokens import ALGORITHMS, AUDIENCE, ISSUER, TokenIssuer
from tests.server.auth.support_auth import Clock, Endpoint, Reply, jwks_endpoint

R = AdmissionRefusedReason
T = TypeVar("T")


@pytest.fixture(scope="module")
def issuer() -> TokenIssuer:
    return TokenIssuer()


def request(token: str) -> AdmissionRequest:
    return AdmissionRequest("/mcp", {"authorization": f"Bearer {token}"})


def policy(url: str, clock: Clock | None = None, **settings: Any) -> JwtAdmission:
    clock = clock or Clock()
    jwt_settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=url, **settings)
    source = JwksSource(url=url, refresh_interval=jwt_settings.refresh_interval, clock=clock)
    return JwtAdmission(jwt_settings, source=source, clock=clock)


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(scenario())  # type: ignore[arg-type]


async def refusal(admission: JwtAdmission, token: str) -> AdmissionRefused:
    with pytest.raises(AdmissionRefused) as caught:
        await admission.admit(request(token))
    return caught.value


def admit_once(issuer: TokenIssuer, token: str, **settings: Any) -> Admission | AdmissionRefused:
    """One admission against a fresh policy and JWKS server: the admission or the refusal."""
    endpoint, _ = jwks_endpoint(issuer.jwks())

    async def scenario() -> Admission | AdmissionRefused:
        admission = policy(endpoint.url, **settings)
        try:
            return await admission.admit(request(token))
        except AdmissionRefused as refused:
            return refused
        finally:
            await admission.aclose()

    try:
        return run(scenario)
    finally:
        endpoint.stop()


def reason_of(outcome: Admission | AdmissionRefused) -> AdmissionRefusedReason | None:
    return outcome.reason if isinstance(outcome, AdmissionRefused) else None


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_made(header: dict[str, Any], claims: dict[str, Any], sign: Callable[[bytes], bytes]) -> str:
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}".encode()
    return f"{signing_input.decode()}.{b64(sign(signing_input))}"


def valid_claims() -> dict[str, Any]:
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": int(time.time()) + 300}


# --- valid tokens -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_a_valid_token_of_each_algorithm_is_admitted(issuer: TokenIssuer, alg: str) -> None:
    outcome = admit_once(issuer, issuer.token(alg=alg, scope="files:read files:write"))
    assert isinstance(outcome, Admission)
    assert outcome.identity.subject == "alice"
    assert outcome.partition == "alice"  # without a partition claim each subject is its own partition
    assert outcome.scopes == frozenset({"files:read", "files:write"})


def test_the_allowlist_is_exactly_three_asymmetric_algorithms() -> None:
    assert frozenset({"RS256", "ES256", "EdDSA"}) == SIGNING_ALGORITHMS


def test_the_partition_and_scopes_come_from_the_claims(issuer: TokenIssuer) -> None:
    token = issuer.token(tenant="acme", claims={"scp": ["a:read", "b:write"]})
    outcome = admit_once(issuer, token, partition_claim="tenant", required_scopes=frozenset({"a:read"}))
    assert isinstance(outcome, Admission)
    assert (outcome.identity.subject, outcome.partition) == ("alice", "acme")
    assert outcome.scopes == frozenset({"a:read", "b:write"})


def test_another_subject_claim(issuer: TokenIssuer) -> None:
    outcome = admit_once(issuer, issuer.token(claims={"oid": "user-7"}), subject_claim="oid")
    assert isinstance(outcome, Admission)
    assert outcome.identity.subject == "user-7"


# --- the registered claims ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"exp_in": -120}, R.EXPIRED),
        ({"nbf_in": 120}, R.NOT_YET_VALID),
        ({"iss": "https://other.example"}, R.WRONG_ISSUER),
        ({"aud": "another-resource"}, R.WRONG_AUDIENCE),
        ({"exp_in": None}, R.BAD_CLAIM),  # exp is required
        ({"claims": {"sub": 7}}, R.BAD_CLAIM),
        ({"sub": None}, R.BAD_CLAIM),
    ],
)
def test_the_registered_claims_are_checked(issuer: TokenIssuer, kwargs: dict[str, Any], reason: R) -> None:
    assert reason_of(admit_once(issuer, issuer.token(**kwargs))) is reason


def test_the_audience_may_be_a_list_naming_this_resource(issuer: TokenIssuer) -> None:
    assert isinstance(admit_once(issuer, issuer.token(aud=["other", AUDIENCE])), Admission)


@pytest.mark.parametrize(("exp_in", "admitted"), [(-20, True), (-40, False)])
def test_the_leeway_edge(issuer: TokenIssuer, exp_in: int, admitted: bool) -> None:
    # 30 s of leeway: expired 20 s ago is inside it, 40 s ago outside (10 s of margin either side for a slow run).
    outcome = admit_once(issuer, issuer.token(exp_in=exp_in), leeway=timedelta(seconds=30))
    assert isinstance(outcome, Admission) is admitted
    if not admitted:
        assert reason_of(outcome) is R.EXPIRED


def test_no_leeway_refuses_a_token_expired_a_second_ago(issuer: TokenIssuer) -> None:
    assert reason_of(admit_once(issuer, issuer.token(exp_in=-2), leeway=timedelta(0))) is R.EXPIRED


# --- signatures and algorithms ------------------------------------------------------------------------------------


def test_a_signature_by_another_key_with_the_same_kid_is_a_bad_signature(issuer: TokenIssuer) -> None:
    forger = TokenIssuer(prefix="test")  # same kids, other keys
    for alg in ALGORITHMS:
        assert reason_of(admit_once(issuer, forger.token(alg=alg))) is R.BAD_SIGNATURE


def test_alg_none_is_disallowed(issuer: TokenIssuer) -> None:
    token = jwt.encode(valid_claims(), None, algorithm="none", headers={"kid": issuer.kids["RS256"]})
    assert reason_of(admit_once(issuer, token)) is R.DISALLOWED_ALGORITHM


def test_hs256_keyed_with_the_rsa_public_key_is_disallowed(issuer: TokenIssuer) -> None:
    # The classic confusion attack: the public key's PEM (which anyone can fetch) as an HMAC secret.
    pem = issuer.keys["RS256"].public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    header = {"alg": "HS256", "typ": "JWT", "kid": issuer.kids["RS256"]}
    token = hand_made(header, valid_claims(), lambda data: hmac.new(pem, data, hashlib.sha256).digest())
    assert reason_of(admit_once(issuer, token)) is R.DISALLOWED_ALGORITHM


@pytest.mark.parametrize("alg", ["HS256", "HS512", "RS512", "PS256", "ES384", "none", "NONE"])
def test_every_algorithm_outside_the_allowlist_is_disallowed(issuer: TokenIssuer, alg: str) -> None:
    token = hand_made({"alg": alg, "kid": issuer.kids["RS256"]}, valid_claims(), lambda data: b"x" * 32)
    assert reason_of(admit_once(issuer, token)) is R.DISALLOWED_ALGORITHM


def test_an_rs256_header_naming_the_ec_key_is_disallowed_without_a_refetch(issuer: TokenIssuer) -> None:
    endpoint, _ = jwks_endpoint(issuer.jwks())

    async def scenario() -> AdmissionRefused:
        admission = policy(endpoint.url)
        try:
            return await refusal(admission, issuer.token(alg="RS256", kid=issuer.kids["ES256"]))
        finally:
            await admission.aclose()

    try:
        assert run(scenario).reason is R.DISALLOWED_ALGORITHM
        assert endpoint.requests == 1
    finally:
        endpoint.stop()


@pytest.mark.parametrize(
    "token",
    [
        "not-a-jwt",
        "a.b.c",
        "eyJhbGciOiJSUzI1NiJ9.e30",
        "x" * 100,
        "e30.e30.e30",
        # A header padded, of the standard alphabet, a JSON array, nested past the parser: all malformed.
        "eyJhbGciOiJSUzI1NiJ9==.e30.sig",
        "eyJhbGciOiJSUzI1NiIs+mtpZCI6ImsifQ.e30.sig",
        "WzFd.e30.sig",
        base64.urlsafe_b64encode(b"[" * 5000).rstrip(b"=").decode() + ".e30.sig",
    ],
)
def test_a_token_that_is_not_a_jws_is_malformed(issuer: TokenIssuer, token: str) -> None:
    assert reason_of(admit_once(issuer, token)) is R.MALFORMED_TOKEN


def test_a_critical_header_extension_is_refused(issuer: TokenIssuer) -> None:
    token = issuer.token(headers={"crit": ["exp"], "exp": 1})
    assert reason_of(admit_once(issuer, token)) is R.MALFORMED_TOKEN


def test_a_token_over_the_bound_is_refused_before_any_fetch(issuer: TokenIssuer) -> None:
    endpoint, _ = jwks_endpoint(issuer.jwks())

    async def scenario() -> AdmissionRefused:
        admission = policy(endpoint.url)
        try:
            return await refusal(admission, "e" * (MAX_BEARER_TOKEN_CHARS + 1))
        finally:
            await admission.aclose()

    try:
        assert run(scenario).reason is R.TOKEN_TOO_LARGE
        assert endpoint.requests == 0
    finally:
        endpoint.stop()


@pytest.mark.parametrize(
    ("headers", "reason"),
    [({}, R.MISSING_CREDENTIALS), ({"authorization": "Basic abc"}, R.MALFORMED_CREDENTIALS)],
)
def test_a_request_without_a_bearer_token(issuer: TokenIssuer, headers: dict[str, str], reason: R) -> None:
    async def scenario() -> AdmissionRefusedReason:
        admission = policy("http://127.0.0.1:9/jwks.json")
        try:
            with pytest.raises(AdmissionRefused) as caught:
                await admission.admit(AdmissionRequest("/mcp", headers))
            return caught.value.reason
        finally:
            await admission.aclose()

    assert run(scenario) is reason


# --- kid-less tokens ----------------------------------------------------------------------------------------------


def test_a_token_without_kid_works_only_with_one_key_of_its_type(issuer: TokenIssuer) -> None:
    claims = valid_claims()
    no_kid = jwt.encode(claims, issuer.keys["ES256"], algorithm="ES256")
    assert "kid" not in jwt.get_unverified_header(no_kid)
    assert isinstance(admit_once(issuer, no_kid), Admission)
    second = TokenIssuer(prefix="second")
    two_ec = {"keys": [issuer.jwk("ES256"), second.jwk("ES256")]}
    endpoint, _ = jwks_endpoint(two_ec)

    async def scenario() -> AdmissionRefused:
        admission = policy(endpoint.url)
        try:
            return await refusal(admission, no_kid)
        finally:
            await admission.aclose()

    try:
        assert run(scenario).reason is R.UNKNOWN_KEY
    finally:
        endpoint.stop()


# --- claims: scopes, partition ------------------------------------------------------------------------------------


def test_a_missing_required_scope_names_every_required_scope(issuer: TokenIssuer) -> None:
    outcome = admit_once(issuer, issuer.token(scope="a:read"), required_scopes=frozenset({"b:write", "a:read"}))
    assert isinstance(outcome, AdmissionRefused)
    assert outcome.reason is R.INSUFFICIENT_SCOPE
    assert outcome.scopes == ("a:read", "b:write")
    assert outcome.http_status == 403


@pytest.mark.parametrize(
    "claims",
    [{"scope": 7}, {"scope": ["a:read"]}, {"scp": "a:read"}, {"scp": [1]}, {"scope": 'bad"quote'}],
)
def test_a_scope_claim_of_the_wrong_shape_is_a_bad_claim(issuer: TokenIssuer, claims: dict[str, Any]) -> None:
    assert reason_of(admit_once(issuer, issuer.token(claims=claims))) is R.BAD_CLAIM


@pytest.mark.parametrize(
    ("tenant", "reason"),
    [
        (None, R.BAD_CLAIM),
        (42, R.BAD_CLAIM),
        ("", R.BAD_CLAIM),
        ("t" * 257, R.BAD_CLAIM),
        ("line\nbreak", R.BAD_CLAIM),
        ("t" * 256, None),
    ],
)
def test_the_partition_claim(issuer: TokenIssuer, tenant: object, reason: R | None) -> None:
    claims = {} if tenant is None else {"tenant": tenant}
    outcome = admit_once(issuer, issuer.token(claims=claims), partition_claim="tenant")
    assert reason_of(outcome) is reason
    if reason is None:
        assert isinstance(outcome, Admission)
        assert outcome.partition == "t" * 256


def test_a_subject_of_257_characters_is_a_bad_claim(issuer: TokenIssuer) -> None:
    assert reason_of(admit_once(issuer, issuer.token(sub="s" * 257))) is R.BAD_CLAIM
    assert isinstance(admit_once(issuer, issuer.token(sub="s" * 256)), Admission)


# --- the key set: fetch, refresh, rotation ------------------------------------------------------------------------


def test_an_unknown_kid_refetches_once_then_is_an_unknown_key(issuer: TokenIssuer) -> None:
    endpoint, _ = jwks_endpoint(issuer.jwks())
    clock = Clock()

    async def scenario() -> list[AdmissionRefusedReason]:
        admission = policy(endpoint.url, clock)
        try:
            await admission.admit(request(issuer.token()))  # the first load
            clock.advance(31)  # past the refresh interval (30 s), well inside the key set's max-age (5 min)
            first = await refusal(admission, issuer.token(kid="forged-1"))
            second = await refusal(admission, issuer.token(kid="forged-2"))  # inside the interval: no fetch
            return [first.reason, second.reason]
        finally:
            await admission.aclose()

    try:
        assert run(scenario) == [R.UNKNOWN_KEY, R.UNKNOWN_KEY]
        assert endpoint.requests == 2  # the load and exactly one refresh
    finally:
        endpoint.stop()


def test_a_thousand_forged_kids_at_once_cost_one_fetch_per_interval(issuer: TokenIssuer) -> None:
    endpoint, _ = jwks_endpoint(issuer.jwks())
    clock = Clock()
    forged = [issuer.token(alg="EdDSA", kid=f"forged-{number}") for number in range(1000)]

    async def scenario() -> set[AdmissionRefusedReason]:
        admission = policy(endpoint.url, clock)
        try:
            await admission.admit(request(issuer.token()))
            clock.advance(31)
            outcomes = await asyncio.gather(
                *(admission.admit(request(token)) for token in forged), return_exceptions=True
            )
            return {outcome.reason for outcome in outcomes if isinstance(outcome, AdmissionRefused)}
        finally:
            await admission.aclose()

    try:
        assert run(scenario) == {R.UNKNOWN_KEY}
        assert endpoint.requests == 2  # the load and one refresh shared by all 1,000
    finally:
        endpoint.stop()


def test_a_thousand_forged_kids_on_a_cold_start_cost_one_fetch(issuer: TokenIssuer) -> None:
    endpoint, _ = jwks_endpoint(issuer.jwks())
    forged = [issuer.token(alg="EdDSA", kid=f"forged-{number}") for number in range(1000)]

    async def scenario() -> None:
        admission = policy(endpoint.url)
        try:
            await asyncio.gather(*(admission.admit(request(token)) for token in forged), return_exceptions=True)
        finally:
            await admission.aclose()

    try:
        run(scenario)
        assert endpoint.requests == 1
    finally:
        endpoint.stop()


def test_a_key_rotated_in_is_picked_up_on_the_refresh(issuer: TokenIssuer) -> None:
    endpoint, served = jwks_endpoint(issuer.jwks())
    clock = Clock()
    rotated = TokenIssuer(prefix="rotated")

    async def scenario() -> Admission:
        admission = policy(endpoint.url, clock)
        try:
            await admission.admit(request(issuer.token()))
            served.document = {"keys": [*issuer.jwks()["keys"], rotated.jwk("ES256")]}
            clock.advance(31)
            return await admission.admit(request(rotated.token(alg="ES256", sub="bob")))
        finally:
            await admission.aclose()

    try:
        assert run(scenario).identity.subject == "bob"
        assert endpoint.requests == 2
    finally:
        endpoint.stop()


def test_the_key_set_is_kept_for_its_max_age(issuer: TokenIssuer) -> None:
    endpoint, _ = jwks_endpoint(issuer.jwks(), headers={"Cache-Control": "public, max-age=120"})
    clock = Clock()

    async def scenario() -> list[int]:
        admission = policy(endpoint.url, clock)
        counts = []
        try:
            for step in (0, 100, 21, 100):  # t = 0, 100 (cached), 121 (due), 221 (cached)
                clock.advance(step)
                await admission.admit(request(issuer.token(sub=f"s{clock.now}")))
                counts.append(endpoint.requests)
            return counts
        finally:
            await admission.aclose()

    try:
        assert run(scenario) == [1, 1, 2, 2]
    finally:
        endpoint.stop()


def test_an_unreachable_key_set_keeps_the_cached_keys(issuer: TokenIssuer) -> None:
    endpoint, _ = jwks_endpoint(issuer.jwks())
    clock = Clock()

    async def scenario() -> Admission:
        admission = policy(endpoint.url, clock)
        try:
            await admission.admit(request(issuer.token(sub="first")))
            endpoint.stop()
            clock.advance(3600)  # far past the max-age: a refetch is attempted and fails
            return await admission.admit(request(issuer.token(sub="second", alg="EdDSA")))
        finally:
            await admission.aclose()

    assert run(scenario).identity.subject == "second"
    assert endpoint.requests == 1


@pytest.mark.parametrize(
    "reply",
    [
        Reply(500, b"{}"),
        Reply(200, b"not json"),
        Reply(200, b'{"keys": []}'),
        Reply(302, b"", {"Location": "https://elsewhere.example/jwks.json"}),
    ],
)
def test_a_key_set_never_loaded_is_verifier_unavailable(issuer: TokenIssuer, reply: Reply) -> None:
    endpoint, served = jwks_endpoint(issuer.jwks())
    served.reply = reply
    clock = Clock()

    async def scenario() -> list[AdmissionRefusedReason]:
        admission = policy(endpoint.url, clock)
        try:
            first = await refusal(admission, issuer.token())
            again = await refusal(admission, issuer.token())  # inside the interval: no second attempt
            return [first.reason, again.reason]
        finally:
            await admission.aclose()

    try:
        assert run(scenario) == [R.VERIFIER_UNAVAILABLE, R.VERIFIER_UNAVAILABLE]
        assert endpoint.requests == 1
        assert AdmissionRefused(R.VERIFIER_UNAVAILABLE).http_status == 503
    finally:
        endpoint.stop()


@pytest.mark.parametrize("with_length", [True, False])
def test_a_key_set_over_256_kib_is_refused(issuer: TokenIssuer, with_length: bool) -> None:
    document = {**issuer.jwks(), "padding": "x" * MAX_JWKS_BYTES}
    endpoint, served = jwks_endpoint(document)
    served.reply = Reply(200, json.dumps(document).encode(), {"Content-Type": "application/json"}, with_length)

    async def scenario() -> AdmissionRefused:
        admission = policy(endpoint.url)
        try:
            return await refusal(admission, issuer.token())
        finally:
            await admission.aclose()

    try:
        assert run(scenario).reason is R.VERIFIER_UNAVAILABLE
    finally:
        endpoint.stop()


def test_a_key_set_of_exactly_256_kib_is_read(issuer: TokenIssuer) -> None:
    base = json.dumps({**issuer.jwks(), "padding": ""}).encode()
    document = {**issuer.jwks(), "padding": "x" * (MAX_JWKS_BYTES - len(base))}
    assert len(json.dumps(document).encode()) == MAX_JWKS_BYTES
    endpoint, _ = jwks_endpoint(document)

    async def scenario() -> Admission:
        admission = policy(endpoint.url)
        try:
            return await admission.admit(request(issuer.token()))
        finally:
            await admission.aclose()

    try:
        assert isinstance(run(scenario), Admission)
    finally:
        endpoint.stop()


def test_unusable_keys_are_skipped_and_counted(issuer: TokenIssuer) -> None:
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key()
    document = {
        "keys": [
            issuer.jwk("RS256"),
            {**issuer.jwk("ES256"), "use": "enc"},
            {**issuer.jwk("EdDSA"), "alg": "RS256"},
            {**RSAAlgorithm.to_jwk(weak, as_dict=True), "kid": "weak"},
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "RSA", "kid": "broken", "n": "!!", "e": "AQAB"},
            {"kty": "EC", "crv": "P-384", "kid": "p384", "x": "a", "y": "b"},
            "not an object",
        ]
    }
    endpoint, _ = jwks_endpoint(document)

    async def scenario() -> tuple[Admission, int, AdmissionRefusedReason]:
        admission = policy(endpoint.url)
        try:
            admitted = await admission.admit(request(issuer.token()))
            refused = await refusal(admission, issuer.token(alg="ES256"))  # its key is for encryption
            return admitted, admission.source.skipped_keys, refused.reason
        finally:
            await admission.aclose()

    try:
        admitted, skipped, reason = run(scenario)
        assert isinstance(admitted, Admission)
        assert skipped == 7
        assert reason is R.UNKNOWN_KEY
    finally:
        endpoint.stop()


def test_private_members_of_a_published_key_are_ignored(issuer: TokenIssuer) -> None:
    private = RSAAlgorithm.to_jwk(issuer.keys["RS256"], as_dict=True)
    del private["key_ops"]  # ["sign"]: a key so marked is skipped (tested above); here only its members count
    document = {"keys": [{**private, "kid": issuer.kids["RS256"]}, {**private, "kid": "signing", "key_ops": ["sign"]}]}
    endpoint, _ = jwks_endpoint(document)

    async def scenario() -> Admission:
        admission = policy(endpoint.url)
        try:
            return await admission.admit(request(issuer.token()))
        finally:
            await admission.aclose()

    try:
        assert isinstance(run(scenario), Admission)
    finally:
        endpoint.stop()


def test_a_key_file_is_read_and_read_again_when_it_changes(issuer: TokenIssuer, tmp_path: Path) -> None:
    path = issuer.write_jwks(tmp_path / "jwks.json", ("RS256",))
    clock = Clock()
    settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=path)

    async def scenario() -> list[object]:
        source = JwksSource(file=path, refresh_interval=settings.refresh_interval, clock=clock)
        admission = JwtAdmission(settings, source=source, clock=clock)
        try:
            outcomes: list[object] = [(await admission.admit(request(issuer.token()))).identity.subject]
            outcomes.append((await refusal(admission, issuer.token(alg="EdDSA"))).reason)
            issuer.write_jwks(path, ("RS256", "EdDSA"))
            clock.advance(31)
            outcomes.append((await admission.admit(request(issuer.token(alg="EdDSA", sub="bob")))).identity.subject)
            path.write_text("not json")
            clock.advance(31)
            outcomes.append((await admission.admit(request(issuer.token(alg="EdDSA", sub="carol")))).identity.subject)
            return outcomes
        finally:
            await admission.aclose()

    assert run(scenario) == ["alice", R.UNKNOWN_KEY, "bob", "carol"]


def test_a_missing_key_file_is_verifier_unavailable(issuer: TokenIssuer, tmp_path: Path) -> None:
    settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=tmp_path / "absent.json")

    async def scenario() -> AdmissionRefused:
        admission = settings.policy()
        try:
            return await refusal(admission, issuer.token())
        finally:
            await admission.aclose()

    assert run(scenario).reason is R.VERIFIER_UNAVAILABLE


# --- the verified-token cache -------------------------------------------------------------------------------------


def test_a_verified_token_is_admitted_from_the_cache_until_its_exp(issuer: TokenIssuer) -> None:
    endpoint, served = jwks_endpoint(issuer.jwks(), headers={"Cache-Control": "max-age=60"})
    clock = Clock()
    cached = issuer.token(exp_in=600)

    async def scenario() -> list[object]:
        admission = policy(endpoint.url, clock)
        try:
            await admission.admit(request(cached))
            # The key is removed from the set and the set refetched: a fresh token of that key now fails ...
            served.document = issuer.jwks(("ES256",))
            clock.advance(61)
            outcomes: list[object] = [(await refusal(admission, issuer.token(sub="fresh"))).reason]
            # ... while the token verified before is still admitted without a signature check, until its exp.
            outcomes.append((await admission.admit(request(cached))).identity.subject)
            return outcomes
        finally:
            await admission.aclose()

    try:
        assert run(scenario) == [R.UNKNOWN_KEY, "alice"]
        assert endpoint.requests == 2
    finally:
        endpoint.stop()


def test_the_cache_ends_at_the_tokens_exp(issuer: TokenIssuer) -> None:
    endpoint, served = jwks_endpoint(issuer.jwks())
    clock = Clock()
    cached = issuer.token(exp_in=60)

    async def scenario() -> AdmissionRefused:
        admission = policy(endpoint.url, clock)
        try:
            await admission.admit(request(cached))
            served.document = issuer.jwks(("ES256",))
            clock.advance(61)  # past the cached token's exp: it is verified again, and its key is gone
            clock.advance(300)
            return await refusal(admission, cached)
        finally:
            await admission.aclose()

    try:
        assert run(scenario).reason is R.UNKNOWN_KEY
    finally:
        endpoint.stop()


def test_the_cache_still_checks_the_required_scopes(issuer: TokenIssuer) -> None:
    endpoint, _ = jwks_endpoint(issuer.jwks())

    async def scenario() -> list[AdmissionRefusedReason]:
        admission = policy(endpoint.url, required_scopes=frozenset({"x:y"}))
        token = issuer.token(scope="a:b")
        try:
            return [(await refusal(admission, token)).reason, (await refusal(admission, token)).reason]
        finally:
            await admission.aclose()

    try:
        assert run(scenario) == [R.INSUFFICIENT_SCOPE, R.INSUFFICIENT_SCOPE]
    finally:
        endpoint.stop()


# --- what is never shown ------------------------------------------------------------------------------------------


def test_repr_and_refusals_never_show_keys_or_tokens(issuer: TokenIssuer) -> None:
    endpoint, _ = jwks_endpoint(issuer.jwks())
    token = issuer.token(exp_in=-300)

    async def scenario() -> tuple[str, AdmissionRefused]:
        admission = policy(endpoint.url)
        try:
            await admission.admit(request(issuer.token()))
            return repr(admission) + repr(admission.source), await refusal(admission, token)
        finally:
            await admission.aclose()

    try:
        shown, refused = run(scenario)
        assert shown.startswith(f"JwtAdmission(issuer={ISSUER!r}, audience={AUDIENCE!r})")
        for secret in (token, token.split(".")[2], issuer.jwk("RS256")["n"][:16]):
            assert secret not in shown
            assert secret not in str(refused) + repr(refused)
    finally:
        endpoint.stop()


def test_an_endpoint_that_never_answers_is_unavailable_within_the_timeout(issuer: TokenIssuer) -> None:
    # A port nobody listens on: the connection is refused at once, never a hang.
    closed = Endpoint(lambda received: Reply())
    url = closed.url + "/jwks.json"
    closed.stop()

    async def scenario() -> AdmissionRefused:
        admission = policy(url)
        try:
            return await refusal(admission, issuer.token())
        finally:
            await admission.aclose()

    started = time.monotonic()
    assert run(scenario).reason is R.VERIFIER_UNAVAILABLE
    assert time.monotonic() - started < 5


def test_mutated_tokens_are_refused_with_a_reason_never_an_exception(issuer: TokenIssuer) -> None:
    # Every byte of a valid token of each algorithm replaced in turn (and the token cut at every tenth position):
    # whatever PyJWT or cryptography make of it, the policy answers with an AdmissionRefused or an admission.
    alphabet = "A_-.=+/x0 é"
    tokens = [issuer.token(alg=alg) for alg in ALGORITHMS]
    mutants = [
        token[:index] + alphabet[(index + shift) % len(alphabet)] + token[index + 1 :]
        for token in tokens
        for index in range(0, len(token), 7)
        for shift in (0, 3)
    ]
    mutants += [token[:index] for token in tokens for index in range(1, len(token), 10)]
    endpoint, _ = jwks_endpoint(issuer.jwks())

    async def scenario() -> set[AdmissionRefusedReason | None]:
        admission = policy(endpoint.url)
        seen: set[AdmissionRefusedReason | None] = set()
        try:
            for mutant in mutants:
                try:
                    await admission.admit(request(mutant))
                    seen.add(None)
                except AdmissionRefused as refused:
                    seen.add(refused.reason)
            return seen
        finally:
            await admission.aclose()

    try:
        seen = run(scenario)
        assert R.BAD_SIGNATURE in seen
        assert R.MALFORMED_TOKEN in seen
    finally:
        endpoint.stop()
