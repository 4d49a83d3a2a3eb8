"""A sealed state's times are checked against each other and against this server's clock when it opens.

A state whose issued-at lies in the future (a sealer with a fast clock, or a forged state under a leaked key)
would otherwise live longer than the maximum lifetime: issued an hour ahead, a 15-minute state opens for 1 h 15 min.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from soklet_core.protection import (
    MAX_ISSUED_AT_SKEW,
    CheckStatus,
    OpeningStep,
    ProtectionConfig,
    RequestStateProtectionException,
    RequestStateSealer,
    SealedStateContents,
    system_clock_ms,
)
from soklet_core.protection.diagnosis import explain_checks
from tests.protection.support import MINUTE, T0, Clock, bound, key, keyring, request, sealer_for, state

SKEW_MS = MAX_ISSUED_AT_SKEW // timedelta(milliseconds=1)


def refusal_slug(sealer: RequestStateSealer, token: str) -> str:
    with pytest.raises(RequestStateProtectionException) as caught:
        sealer.open(token, bound(request(2)))
    return caught.value.reason.value


def test_the_skew_bound_is_a_minute() -> None:
    assert timedelta(seconds=60) == MAX_ISSUED_AT_SKEW


def test_a_state_issued_an_hour_ahead_is_refused_by_the_real_clock() -> None:
    ring = keyring(key("k1"))
    ahead = RequestStateSealer(ProtectionConfig(keyring=ring), clock=lambda: system_clock_ms() + 60 * MINUTE)
    token = ahead.seal(state({"step": 1}), bound(request(1)))
    real = RequestStateSealer(ProtectionConfig(keyring=ring))
    assert refusal_slug(real, token) == "issued-in-future"
    # The same state sealed by an honest clock opens.
    honest = real.seal(state({"step": 1}), bound(request(1)))
    assert real.open(honest, bound(request(2))).state == state({"step": 1})


def test_issued_at_up_to_the_skew_bound_ahead_opens_one_millisecond_more_is_refused() -> None:
    ring = keyring(key("k1"))
    opener, _ = sealer_for(ring, Clock(T0))
    at_bound, _ = sealer_for(ring, Clock(T0 + SKEW_MS))
    assert opener.open(at_bound.seal(state(1), bound(request(1))), bound(request(2))).state == state(1)
    beyond, _ = sealer_for(ring, Clock(T0 + SKEW_MS + 1))
    token = beyond.seal(state(1), bound(request(1)))
    assert refusal_slug(opener, token) == "issued-in-future"
    # Once the opener's clock catches up to within the bound, the same token opens.
    opener_later, _ = sealer_for(ring, Clock(T0 + 1))
    assert opener_later.open(token, bound(request(2))).state == state(1)


def test_a_lifetime_beyond_the_maximum_is_its_own_reason_at_the_edge() -> None:
    ring = keyring(key("k1", fill=3))
    opener, _ = sealer_for(ring)
    lifetime = opener.config.lifetime_ms
    binding = bound(request(1))

    def sealed_with(issued: int, expires: int) -> str:
        contents = SealedStateContents(binding.binding, 1, issued, expires, binding.request_id, state(1))
        return opener.seal_contents(contents)

    assert opener.open(sealed_with(T0, T0 + lifetime), bound(request(2))).state == state(1)
    assert refusal_slug(opener, sealed_with(T0, T0 + lifetime + 1)) == "lifetime-exceeded"
    # A state that expires before it was issued has no lifetime at all.
    assert refusal_slug(opener, sealed_with(T0 + 1, T0 + 1)) == "lifetime-exceeded"
    assert refusal_slug(opener, sealed_with(T0 + 2, T0 + 1)) == "lifetime-exceeded"


def test_both_are_opening_steps_between_expiry_and_round_and_diagnosed_in_words() -> None:
    steps = list(OpeningStep)
    assert steps.index(OpeningStep.EXPIRY) < steps.index(OpeningStep.ISSUED_AT) < steps.index(OpeningStep.LIFETIME)
    assert steps.index(OpeningStep.LIFETIME) < steps.index(OpeningStep.ROUND)
    assert not OpeningStep.ISSUED_AT.reason.is_sealing
    assert not OpeningStep.LIFETIME.reason.is_sealing
    ring = keyring(key("k1", fill=4))
    opener, _ = sealer_for(ring)
    ahead, _ = sealer_for(ring, Clock(T0 + 60 * MINUTE), maximum_request_state_lifetime=timedelta(minutes=75))
    token = ahead.seal(state(1), bound(request(1)))
    diagnosis = opener.diagnose(token, bound(request(2)))
    assert diagnosis.failures == (OpeningStep.ISSUED_AT.reason, OpeningStep.LIFETIME.reason)
    sentences = dict(
        zip(
            (check.step for check in diagnosis.checks),
            explain_checks(diagnosis, token=token, config=opener.config, retry=bound(request(2))),
            strict=True,
        )
    )
    assert sentences[OpeningStep.ISSUED_AT] == (
        "issued 2026-08-01T01:00:00.000Z, in 1h, beyond the 1m clock-skew bound"
    )
    assert sentences[OpeningStep.LIFETIME] == "its lifetime of 1h15m exceeds the 15m maximum"
    good = opener.seal(state(1), bound(request(1)))
    passed = opener.diagnose(good, bound(request(2)))
    assert {check.status for check in passed.checks} == {CheckStatus.PASSED}
    words = explain_checks(passed, token=good, config=opener.config, retry=bound(request(2)))
    by_step = dict(zip((check.step for check in passed.checks), words, strict=True))
    assert by_step[OpeningStep.ISSUED_AT] == "issued 2026-08-01T00:00:00.000Z, now"
    assert by_step[OpeningStep.LIFETIME] == "lifetime 15m of at most 15m"
