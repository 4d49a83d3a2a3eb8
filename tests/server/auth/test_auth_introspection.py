"""IntrospectionAdmission against a real RFC 7662 endpoint on loopback: the answer's checks, client authentication,
the answer cache (positive and negative), shared calls for concurrent misses, the bound on calls in flight, and
what happens when the endpoint is down."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import parse_qs

import pytest

from soklet_core.mcp.server.admission import Admission, AdmissionRefused, AdmissionRefusedReason, AdmissionRequest
from soklet_core.mcp.server.auth import IntrospectionAdmission, IntrospectionSettings
from tests.server.auth.support_auth import Clock, Endpoint, Introspector, Reply, basic_header

R = AdmissionRefusedReason
T = TypeVar("T")
CLIENT_ID = "soklet server"  # a space: form-urlencoded as '+' before the Basic encoding (RFC 6749 §2.3.1)
SECRET = "s3cr:et/+value-never-shown"
AUDIENCE = "https://mcp.example/mcp"
ISSUER = "https://auth.example"


@pytest.fixture
def introspector() -> Iterator[tuple[Endpoint, Introspector]]:
    answers = Introspector(CLIENT_ID, SECRET)
    endpoint = Endpoint(answers).start()
    try:
        yield endpoint, answers
    finally:
        endpoint.stop()


#: How far ahead of the clock an answer's exp (or a not-yet-valid nbf) lies: the parametrized answers are built when
#: the tests are collected, which may be many minutes before they run in a whole-suite run.
AHEAD_SECONDS = 86_400


def active(**claims: Any) -> dict[str, Any]:
    return {"active": True, "sub": "alice", "exp": int(time.time()) + AHEAD_SECONDS, **claims}


def request(token: str) -> AdmissionRequest:
    return AdmissionRequest("/mcp", {"authorization": f"Bearer {token}"})


def settings_for(endpoint: Endpoint, **settings: Any) -> IntrospectionSettings:
    return IntrospectionSettings(
        introspection_url=endpoint.url + "/introspect", client_id=CLIENT_ID, client_secret=SECRET, **settings
    )


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(scenario())  # type: ignore[arg-type]


def admit_all(
    endpoint: Endpoint, tokens: list[str], *, clock: Clock | None = None, **settings: Any
) -> list[Admission | AdmissionRefusedReason]:
    """Admit ``tokens`` one after the other with one policy: each admission or refusal reason."""

    async def scenario() -> list[Admission | AdmissionRefusedReason]:
        admission = IntrospectionAdmission(settings_for(endpoint, **settings), clock=clock or Clock())
        outcomes: list[Admission | AdmissionRefusedReason] = []
        try:
            for token in tokens:
                try:
                    outcomes.append(await admission.admit(request(token)))
                except AdmissionRefused as refused:
                    outcomes.append(refused.reason)
            return outcomes
        finally:
            await admission.aclose()

    return run(scenario)


def test_an_active_token_is_admitted(introspector: tuple[Endpoint, Introspector]) -> None:
    endpoint, answers = introspector
    answers.answers["tok-1"] = active(scope="files:read mcp:tools", tenant="acme")
    [outcome] = admit_all(endpoint, ["tok-1"], partition_claim="tenant")
    assert isinstance(outcome, Admission)
    assert (outcome.identity.subject, outcome.partition) == ("alice", "acme")
    assert outcome.scopes == frozenset({"files:read", "mcp:tools"})
    [sent] = endpoint.received
    assert sent.method == "POST"
    assert sent.path == "/introspect"
    assert sent.headers["authorization"] == basic_header(CLIENT_ID, SECRET)
    assert sent.headers["content-type"] == "application/x-www-form-urlencoded"
    assert parse_qs(sent.body.decode()) == {"token": ["tok-1"], "token_type_hint": ["access_token"]}
    assert SECRET not in sent.body.decode()


def test_without_a_partition_claim_the_subject_is_the_partition(introspector: tuple[Endpoint, Introspector]) -> None:
    endpoint, answers = introspector
    answers.answers["tok"] = active(sub="bob")
    [outcome] = admit_all(endpoint, ["tok"])
    assert isinstance(outcome, Admission)
    assert outcome.partition == "bob"
    assert outcome.scopes == frozenset()


@pytest.mark.parametrize(
    ("answer", "settings", "reason"),
    [
        ({"active": False}, {}, R.INACTIVE),
        ({"active": "true", "sub": "alice"}, {}, R.INACTIVE),
        ({"sub": "alice"}, {}, R.INACTIVE),
        (active(exp=int(time.time()) - 120), {}, R.EXPIRED),
        (active(nbf=int(time.time()) + AHEAD_SECONDS), {}, R.NOT_YET_VALID),
        (active(exp="soon"), {}, R.BAD_CLAIM),
        (active(aud="other"), {"audience": AUDIENCE}, R.WRONG_AUDIENCE),
        (active(aud=["other", "more"]), {"audience": AUDIENCE}, R.WRONG_AUDIENCE),
        (active(), {"audience": AUDIENCE}, R.WRONG_AUDIENCE),
        (active(aud=AUDIENCE, iss="https://other.example"), {"audience": AUDIENCE, "issuer": ISSUER}, R.WRONG_ISSUER),
        (active(sub=7), {}, R.BAD_CLAIM),
        (active(scope=["a"]), {}, R.BAD_CLAIM),
        (active(), {"partition_claim": "tenant"}, R.BAD_CLAIM),
        (active(tenant="t" * 257), {"partition_claim": "tenant"}, R.BAD_CLAIM),
        (active(scope="a:read"), {"required_scopes": frozenset({"a:write"})}, R.INSUFFICIENT_SCOPE),
    ],
)
def test_the_answer_is_checked(
    introspector: tuple[Endpoint, Introspector], answer: dict[str, Any], settings: dict[str, Any], reason: R
) -> None:
    endpoint, answers = introspector
    answers.answers["tok"] = answer
    assert admit_all(endpoint, ["tok"], **settings) == [reason]


def test_issuer_and_audience_when_they_match(introspector: tuple[Endpoint, Introspector]) -> None:
    endpoint, answers = introspector
    answers.answers["tok"] = active(aud=["other", AUDIENCE], iss=ISSUER)
    [outcome] = admit_all(endpoint, ["tok"], audience=AUDIENCE, issuer=ISSUER)
    assert isinstance(outcome, Admission)


def test_the_leeway_forgives_a_just_expired_token(introspector: tuple[Endpoint, Introspector]) -> None:
    endpoint, answers = introspector
    answers.answers["tok"] = active(exp=int(time.time()) - 10)
    [outcome] = admit_all(endpoint, ["tok"], leeway=timedelta(seconds=30))
    assert isinstance(outcome, Admission)


def test_a_missing_scope_names_the_required_scopes(introspector: tuple[Endpoint, Introspector]) -> None:
    endpoint, answers = introspector
    answers.answers["tok"] = active(scope="a:read")

    async def scenario() -> AdmissionRefused:
        admission = IntrospectionAdmission(settings_for(endpoint, required_scopes=frozenset({"z:write", "a:read"})))
        try:
            with pytest.raises(AdmissionRefused) as caught:
                await admission.admit(request("tok"))
            return caught.value
        finally:
            await admission.aclose()

    refused = run(scenario)
    assert refused.reason is R.INSUFFICIENT_SCOPE
    assert refused.scopes == ("a:read", "z:write")


def test_wrong_client_credentials_make_the_verifier_unavailable(introspector: tuple[Endpoint, Introspector]) -> None:
    endpoint, answers = introspector
    answers.answers["tok"] = active()

    async def scenario() -> AdmissionRefusedReason:
        settings = IntrospectionSettings(
            introspection_url=endpoint.url + "/introspect", client_id=CLIENT_ID, client_secret="wrong"
        )
        admission = settings.policy()
        try:
            with pytest.raises(AdmissionRefused) as caught:
                await admission.admit(request("tok"))
            return caught.value.reason
        finally:
            await admission.aclose()

    assert run(scenario) is R.VERIFIER_UNAVAILABLE


@pytest.mark.parametrize(
    "reply",
    [
        Reply(500, b'{"active": true}'),
        Reply(200, b"not json"),
        Reply(200, b"[true]"),
        Reply(200, b'{"active": true, "sub": "a", "exp": NaN}'),
        Reply(200, b'{"active": true, "pad": "' + b"x" * (64 * 1024) + b'"}'),
        Reply(200, b'{"active": true, "pad": "' + b"x" * (64 * 1024) + b'"}', length=False),
        Reply(302, b"", {"Location": "https://elsewhere.example/"}),
    ],
)
def test_a_failed_answer_is_verifier_unavailable(introspector: tuple[Endpoint, Introspector], reply: Reply) -> None:
    endpoint, answers = introspector
    answers.reply = reply
    assert admit_all(endpoint, ["tok"]) == [R.VERIFIER_UNAVAILABLE]


def test_an_endpoint_that_is_down_is_verifier_unavailable() -> None:
    endpoint = Endpoint(Introspector(CLIENT_ID, SECRET))
    endpoint.stop()  # bound, then closed: the port refuses connections
    assert admit_all(endpoint, ["tok", "tok"]) == [R.VERIFIER_UNAVAILABLE, R.VERIFIER_UNAVAILABLE]


def test_a_cached_answer_makes_one_call_for_a_hundred_admits(introspector: tuple[Endpoint, Introspector]) -> None:
    endpoint, answers = introspector
    answers.answers["tok"] = active()
    outcomes = admit_all(endpoint, ["tok"] * 100)
    assert all(isinstance(outcome, Admission) for outcome in outcomes)
    assert endpoint.requests == 1


def test_the_cache_lasts_cache_ttl_and_never_past_exp(introspector: tuple[Endpoint, Introspector]) -> None:
    endpoint, answers = introspector
    answers.answers["long"] = active()  # exp in 300 s, cache_ttl 60 s
    answers.answers["short"] = active(exp=int(time.time()) + 20)
    clock = Clock()

    async def scenario() -> list[int]:
        admission = IntrospectionAdmission(settings_for(endpoint, leeway=timedelta(0)), clock=clock)
        counts = []
        try:
            for step in (0, 15, 10, 40):  # t = 0, 15, 25, 65
                clock.advance(step)
                await admission.admit(request("long"))
                with contextlib.suppress(AdmissionRefused):  # (not refused: the wall clock does not move)
                    await admission.admit(request("short"))
                counts.append(endpoint.requests)
            return counts
        finally:
            await admission.aclose()

    # t=0: both asked; t=15: both cached; t=25: short's entry ended at its exp (20 s): asked again; t=65: long's
    # 60 s ended, and short's second entry (20 s from t=25) too.
    assert run(scenario) == [2, 2, 3, 5]


def test_an_inactive_answer_is_cached_briefly(introspector: tuple[Endpoint, Introspector]) -> None:
    endpoint, _ = introspector
    clock = Clock()
    assert admit_all(endpoint, ["bad"] * 50, clock=clock) == [R.INACTIVE] * 50
    assert endpoint.requests == 1

    async def after_the_negative_cache() -> list[AdmissionRefusedReason]:
        admission = IntrospectionAdmission(settings_for(endpoint), clock=clock)
        reasons = []
        try:
            for step in (0, 6):
                clock.advance(step)
                try:
                    await admission.admit(request("bad"))
                except AdmissionRefused as refused:
                    reasons.append(refused.reason)
            return reasons
        finally:
            await admission.aclose()

    assert run(after_the_negative_cache) == [R.INACTIVE, R.INACTIVE]
    assert endpoint.requests == 3  # the second policy asked once, and again after 5 s


def test_concurrent_misses_of_one_token_share_one_call() -> None:
    answers = Introspector(CLIENT_ID, SECRET)
    answers.answers["tok"] = active()
    endpoint = Endpoint(answers, delay=0.3).start()

    async def scenario() -> list[Admission | BaseException]:
        admission = IntrospectionAdmission(settings_for(endpoint))
        try:
            return await asyncio.gather(*(admission.admit(request("tok")) for _ in range(50)), return_exceptions=True)
        finally:
            await admission.aclose()

    try:
        outcomes = run(scenario)
        assert all(isinstance(outcome, Admission) for outcome in outcomes)
        assert endpoint.requests == 1
    finally:
        endpoint.stop()


def test_a_caller_that_gives_up_does_not_cancel_the_shared_call() -> None:
    answers = Introspector(CLIENT_ID, SECRET)
    answers.answers["tok"] = active()
    endpoint = Endpoint(answers, delay=0.3).start()

    async def scenario() -> Admission:
        admission = IntrospectionAdmission(settings_for(endpoint))
        try:
            impatient = asyncio.ensure_future(admission.admit(request("tok")))
            patient = asyncio.ensure_future(admission.admit(request("tok")))
            await asyncio.sleep(0.05)
            impatient.cancel()
            return await patient
        finally:
            await admission.aclose()

    try:
        assert isinstance(run(scenario), Admission)
        assert endpoint.requests == 1
    finally:
        endpoint.stop()


@pytest.mark.slow
def test_at_most_max_concurrent_calls_are_in_flight() -> None:
    answers = Introspector(CLIENT_ID, SECRET)
    for number in range(6):
        answers.answers[f"tok-{number}"] = active(sub=f"user-{number}")
    endpoint = Endpoint(answers, delay=1.3).start()

    async def scenario() -> list[Admission | BaseException]:
        admission = IntrospectionAdmission(settings_for(endpoint, max_concurrent=2))
        try:
            tokens = [f"tok-{number}" for number in range(6)]
            return await asyncio.gather(*(admission.admit(request(token)) for token in tokens), return_exceptions=True)
        finally:
            await admission.aclose()

    try:
        started = time.monotonic()
        outcomes = run(scenario)
        elapsed = time.monotonic() - started
        admitted = [outcome for outcome in outcomes if isinstance(outcome, Admission)]
        refused = [outcome for outcome in outcomes if isinstance(outcome, AdmissionRefused)]
        # Two calls take the slots for 1.3 s; the four others wait 1 s for one, then are refused: no storm.
        assert len(admitted) == 2
        assert [refusal.reason for refusal in refused] == [R.VERIFIER_UNAVAILABLE] * 4
        assert endpoint.peak <= 2
        assert endpoint.requests == 2
        assert elapsed < 3
    finally:
        endpoint.stop()


def test_the_secret_and_tokens_are_never_shown(introspector: tuple[Endpoint, Introspector]) -> None:
    endpoint, answers = introspector
    token = "opaque-token-value-1234567890"
    answers.answers[token] = {"active": False}
    settings = settings_for(endpoint)

    async def scenario() -> tuple[str, AdmissionRefused]:
        admission = settings.policy()
        try:
            with pytest.raises(AdmissionRefused) as caught:
                await admission.admit(request(token))
            return repr(admission), caught.value
        finally:
            await admission.aclose()

    shown, refused = run(scenario)
    for text in (repr(settings), str(settings), shown, str(refused), repr(refused)):
        assert SECRET not in text
        assert token not in text
    assert "client_secret" not in repr(settings)


@pytest.mark.slow
def test_an_endpoint_slower_than_the_budget_is_verifier_unavailable() -> None:
    answers = Introspector(CLIENT_ID, SECRET)
    answers.answers["tok"] = active()
    endpoint = Endpoint(answers, delay=6).start()
    try:
        started = time.monotonic()
        assert admit_all(endpoint, ["tok"]) == [R.VERIFIER_UNAVAILABLE]
        assert time.monotonic() - started < 5.9
    finally:
        endpoint.stop()
