"""Diagnosis in words: the sentence for every opening check, the params diff, and the time and span spellings."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from soklet_core.json import EXCLUDED_PARAMS_MEMBERS, JsonValue, parse
from soklet_core.protection import CheckStatus, OpeningStep, RequestStateSealer
from soklet_core.protection.diagnosis import (
    MAX_DIFF_PATHS,
    duration_text,
    explain_checks,
    iso_time,
    params_differences,
    relative_time,
)
from tests.protection.support import MINUTE, T0, bound, key, keyring, request, sealer_for, state

RETRY_STEPS = [
    OpeningStep.BINDING_METHOD,
    OpeningStep.BINDING_PATH,
    OpeningStep.BINDING_PROTOCOL_VERSION,
    OpeningStep.BINDING_PARTITION,
    OpeningStep.BINDING_PARAMS,
    OpeningStep.REQUEST_ID,
]


def sealed(sealer: RequestStateSealer, data: object = None) -> str:
    return sealer.seal(state({"step": 2} if data is None else data), bound(request(1)))


def explained(
    sealer: RequestStateSealer, token: str, retry_data: bytes | None = None, **options: Any
) -> dict[OpeningStep, tuple[CheckStatus, str]]:
    """``{step: (status, sentence)}`` for ``token`` against the retry ``retry_data`` (none when ``None``)."""
    retry = bound(retry_data) if retry_data is not None else None
    diagnosis = sealer.diagnose(token, retry)
    sentences = explain_checks(diagnosis, token=token, config=sealer.config, retry=retry, **options)
    assert len(sentences) == len(diagnosis.checks)
    return {check.step: (check.status, text) for check, text in zip(diagnosis.checks, sentences, strict=True)}


# ------------------------------------------------------------------------------------------ explanations


def test_a_retry_that_opens_explains_every_check_as_passed() -> None:
    sealer, _clock = sealer_for(keyring(key("k1")))
    token = sealed(sealer)
    checks = explained(sealer, token, request(2), retry_partition="anonymous")
    assert {status for status, _ in checks.values()} == {CheckStatus.PASSED}
    size = len(token)
    assert checks[OpeningStep.ENCODED_SIZE][1] == f"{size:,} of {sealer.config.maximum_encoded_bytes:,} bytes"
    assert checks[OpeningStep.BASE64URL][1] == "canonical unpadded base64url"
    assert checks[OpeningStep.KEY_ID][1] == "key 'k1' is in the keyring (active)"
    assert checks[OpeningStep.AUTHENTICATION][1] == "AES-256-GCM tag verified under key 'k1'"
    assert checks[OpeningStep.EXPIRY][1] == "expires 2026-08-01T00:15:00.000Z, in 15m 0s"
    assert checks[OpeningStep.ROUND][1] == f"round 1 of at most {sealer.config.maximum_request_state_rounds}"
    assert checks[OpeningStep.BINDING_METHOD][1] == "tools/call"
    assert checks[OpeningStep.BINDING_PATH][1] == "/mcp"
    assert checks[OpeningStep.BINDING_PARTITION][1] == "partition 'anonymous'"
    assert checks[OpeningStep.REQUEST_ID][1] == "retry id 2 differs from the emitting id 1"


def test_without_a_retry_the_binding_checks_say_how_to_give_one() -> None:
    sealer, _clock = sealer_for(keyring(key("k1")))
    token = sealed(sealer)
    default = explained(sealer, token)
    named = explained(sealer, token, retry_hint="give the retry with --request FILE")
    for step in RETRY_STEPS:
        assert default[step] == (CheckStatus.NOT_RUN, "not run: give the retry")
        assert named[step] == (CheckStatus.NOT_RUN, "not run: give the retry with --request FILE")
    assert default[OpeningStep.ROUND][0] is CheckStatus.PASSED


def test_an_unknown_key_names_the_keyring_ids_and_stops_the_checks() -> None:
    sealer, _clock = sealer_for(keyring(key("k1")))
    other, _ = sealer_for(keyring(key("k2"), key("k3")))
    checks = explained(other, sealed(sealer), request(2))
    assert checks[OpeningStep.KEY_ID] == (CheckStatus.FAILED, "no key 'k1' in the keyring (it holds k2, k3)")
    assert checks[OpeningStep.AUTHENTICATION] == (CheckStatus.NOT_RUN, "not run: an earlier check failed")
    assert checks[OpeningStep.REQUEST_ID] == (CheckStatus.NOT_RUN, "not run: give the retry")


def test_other_material_under_the_same_id_fails_authentication() -> None:
    sealer, _clock = sealer_for(keyring(key("k1", fill=1)))
    other, _ = sealer_for(keyring(key("k1", fill=2)))
    status, text = explained(other, sealed(sealer))[OpeningStep.AUTHENTICATION]
    assert status is CheckStatus.FAILED
    assert text.startswith("the tag did not verify: the token was altered, or key 'k1' in this keyring")


def test_a_token_that_is_not_base64url_fails_there() -> None:
    sealer, _clock = sealer_for(keyring(key("k1")))
    checks = explained(sealer, "not base64url!")
    assert checks[OpeningStep.BASE64URL] == (CheckStatus.FAILED, "not canonical unpadded base64url text")
    assert checks[OpeningStep.KEY_ID] == (CheckStatus.NOT_RUN, "not run: an earlier check failed")


def test_expiry_is_told_as_a_time_and_a_span() -> None:
    sealer, clock = sealer_for(keyring(key("k1")))
    token = sealed(sealer)
    clock.now = T0 + 16 * MINUTE
    status, text = explained(sealer, token)[OpeningStep.EXPIRY]
    assert (status, text) == (CheckStatus.FAILED, "expired 2026-08-01T00:15:00.000Z, 1m 0s ago")


def test_a_lifetime_beyond_the_maximum_names_the_maximum() -> None:
    sealer, _clock = sealer_for(keyring(key("k1", fill=1)))
    token = sealed(sealer)
    strict, _ = sealer_for(keyring(key("k1", fill=1)), maximum_request_state_lifetime=timedelta(minutes=5))
    checks = explained(strict, token)
    assert checks[OpeningStep.EXPIRY][0] is CheckStatus.PASSED
    assert checks[OpeningStep.LIFETIME] == (CheckStatus.FAILED, "its lifetime of 15m exceeds the 5m maximum")


def test_binding_mismatches_show_both_sides() -> None:
    sealer, _clock = sealer_for(keyring(key("k1")))
    token = sealed(sealer)
    checks = explained(sealer, token, request(2, method="prompts/get"))
    assert checks[OpeningStep.BINDING_METHOD] == (
        CheckStatus.FAILED,
        "sealed for 'tools/call', the retry calls 'prompts/get'",
    )
    retry = bound(request(2), partition="tenant-7")
    diagnosis = sealer.diagnose(token, retry)
    by_step = dict(
        zip(
            [check.step for check in diagnosis.checks],
            explain_checks(diagnosis, token=token, config=sealer.config, retry=retry, retry_partition="tenant-7"),
            strict=True,
        )
    )
    assert by_step[OpeningStep.BINDING_PARTITION].startswith("the retry's partition 'tenant-7' (digest ")
    unnamed = explain_checks(diagnosis, token=token, config=sealer.config, retry=retry)
    assert "tenant-7" not in " ".join(unnamed)


def test_a_params_mismatch_carries_the_callers_note() -> None:
    sealer, _clock = sealer_for(keyring(key("k1")))
    token = sealed(sealer)
    retry = request(2, arguments={"sku": "A-100", "quantity": 4})
    status, text = explained(sealer, token, retry, params_note="differing params paths: /arguments/quantity")[
        OpeningStep.BINDING_PARAMS
    ]
    assert status is CheckStatus.FAILED
    assert text.startswith("stable params differ: sealed digest ")
    assert text.endswith("; differing params paths: /arguments/quantity")


def test_a_reused_request_id_is_named() -> None:
    sealer, _clock = sealer_for(keyring(key("k1")))
    checks = explained(sealer, sealed(sealer), request(1))
    assert checks[OpeningStep.REQUEST_ID] == (CheckStatus.FAILED, "the retry reuses the emitting request id 1")


def test_no_sentence_repeats_the_state_or_params_values() -> None:
    sealer, _clock = sealer_for(keyring(key("k1")))
    token = sealed(sealer, {"secret": "state-value-7f3a"})
    retry = request(2, arguments={"sku": "params-value-9c1e"})
    text = " ".join(sentence for _, sentence in explained(sealer, token, retry).values())
    assert "state-value-7f3a" not in text
    assert "params-value-9c1e" not in text


# ------------------------------------------------------------------------------------------ params diff


def call(params: object) -> JsonValue:
    """A ``tools/call`` request with exactly ``params``."""
    return parse(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode())


def test_params_differences_name_json_pointers_in_order() -> None:
    first = call({"a": 1, "b": [1, 2], "c~/d": {"x": True}})
    second = call({"a": 1.0, "b": [1, 3, 4], "c~/d": {"x": False}, "e": None})
    assert params_differences(first, second) == ["/b/1", "/b/2", "/c~0~1d/x", "/e"]


def test_params_differences_leave_out_what_the_digest_leaves_out() -> None:
    excluded = {name: "changes every round" for name in EXCLUDED_PARAMS_MEMBERS}
    assert params_differences(call({"a": 1}), call({"a": 1, **excluded})) == []


def test_params_differences_are_bounded() -> None:
    first = call({"v": list(range(MAX_DIFF_PATHS + 10))})
    second = call({"v": [n + 1 for n in range(MAX_DIFF_PATHS + 10)]})
    assert len(params_differences(first, second)) == MAX_DIFF_PATHS
    assert params_differences(first, second, limit=3) == ["/v/0", "/v/1", "/v/2"]
    assert params_differences(first, second, limit=0) == []


def test_whole_params_of_different_kinds_differ_at_the_root() -> None:
    assert params_differences(call({"a": 1}), call([1])) == ["/"]


# ------------------------------------------------------------------------------------------ times and spans


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "now"),
        (500, "in 0s"),
        (-61_000, "1m 1s ago"),
        (3 * 3_600_000 + 120_000, "in 3h 2m"),
        (-2 * 86_400_000 - 5_000, "2d ago"),
    ],
)
def test_relative_time(ms: int, text: str) -> None:
    assert relative_time(ms) == text


def test_iso_time_and_times_no_calendar_spells() -> None:
    assert iso_time(T0) == "2026-08-01T00:00:00.000Z"
    assert iso_time(T0 + 1) == "2026-08-01T00:00:00.001Z"
    assert iso_time(10**20) == f"{10**20} ms"


@pytest.mark.parametrize(
    ("span", "text"),
    [
        (timedelta(minutes=15), "15m"),
        (timedelta(seconds=10), "10s"),
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(milliseconds=500), "0.5s"),
        (timedelta(hours=2, seconds=1, milliseconds=250), "2h1.25s"),
    ],
)
def test_duration_text(span: timedelta, text: str) -> None:
    assert duration_text(span) == text


@pytest.mark.parametrize("span", [timedelta(0), timedelta(seconds=-1), timedelta(microseconds=1500)])
def test_duration_text_takes_only_positive_whole_milliseconds(span: timedelta) -> None:
    with pytest.raises(ValueError, match="positive whole number of milliseconds"):
        duration_text(span)
