"""Sealing and opening: round trips, every opening reason, bit flips, keys, limits, rounds, expiry, binding."""

from __future__ import annotations

import base64
import json
import threading
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soklet_core.json import JsonNumber, JsonString, JsonValue, canonical_bytes, parse
from soklet_core.keys import KeyInUse, KeyringManager
from soklet_core.protection import (
    BindingField,
    BoundRequest,
    CheckStatus,
    EnvelopeHeader,
    OpenedRequestState,
    OpeningStep,
    ProtectionConfig,
    ProtectionUsageError,
    Reason,
    RequestStateBinding,
    RequestStateProtectionContext,
    RequestStateProtectionException,
    RequestStateSealer,
    SealedStateContents,
)
from tests.protection.support import MINUTE, T0, Clock, bound, key, keyring, request, sealer_for, state

OPENING_REASONS = [reason for reason in Reason if not reason.is_sealing]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def refusal(sealer: RequestStateSealer, token: Any, retry: BoundRequest) -> Reason:
    with pytest.raises(RequestStateProtectionException) as caught:
        sealer.open(token, retry)
    return caught.value.reason


@pytest.fixture
def setup() -> tuple[RequestStateSealer, Clock]:
    return sealer_for(keyring(key("k1")))


# ------------------------------------------------------------------------------------------------ round trips

ROUND_TRIP_STATES: list[Any] = [
    None,
    True,
    False,
    0,
    "",
    "plain",
    [],
    {},
    {"null": None, "t": True, "f": False, "n": 3, "s": "x", "a": [1, "2", [3]], "o": {"deep": {"er": []}}},
    Decimal("123456789012345678901234567890.123456789012345678901234567890"),
    Decimal("-0.000000000000000000000000000000000000000000000000000000000001"),
    {"big": Decimal("9" * 60), "tiny": Decimal("1E-60"), "exp": Decimal("1.5E+300")},
    'Zoë — ünïcödé ✓ 日本語 😀 \u2028 \x00\x1f " \\',
    {"😀": 1, "é": 2, "e": 3, "\uffff": 4, "\U0001f600x": 5},
    [Decimal("1.50"), Decimal("0.0"), Decimal("-0"), 100, Decimal("1E+2"), Decimal("120")],
]


@pytest.mark.parametrize("data", ROUND_TRIP_STATES, ids=range(len(ROUND_TRIP_STATES)))
def test_round_trip_of_every_json_kind(setup, data: Any) -> None:
    sealer, _ = setup
    value = state(data)
    token = sealer.seal(value, bound(request(1)))
    opened = sealer.open(token, bound(request(2))).state
    assert opened == value
    # The state comes back with canonical numbers, as the canonical form spells them.
    assert canonical_bytes(opened) == canonical_bytes(value)


def test_numbers_come_back_canonical(setup) -> None:
    sealer, _ = setup
    token = sealer.seal(state({"a": 100, "b": Decimal("1.50"), "c": Decimal("0.0"), "d": Decimal("3.50")}), bound())
    opened = sealer.open(token, bound(request(2))).state
    values = {name: item.value for name, item in opened.items()}  # type: ignore[union-attr]
    assert str(values["a"]) == "1E+2"
    assert str(values["b"]) == "1.5"
    assert str(values["c"]) == "0"
    assert str(values["d"]) == "3.5"


def test_open_returns_application_json_only(setup) -> None:
    sealer, _ = setup
    token = sealer.seal(state({"step": 2}), bound())
    opened = sealer.open(token, bound(request(2)))
    assert opened.state == state({"step": 2})
    public = [name for name in dir(opened) if not name.startswith("_")]
    # The round is the server's to read (its spans); a handler is given opened.state alone (RequestContext).
    assert public == ["round", "state"]
    assert opened.round == 1
    assert "step" not in repr(opened)
    contents = sealer.diagnose(token).contents
    assert contents is not None
    assert OpenedRequestState(contents).state == state({"step": 2})
    with pytest.raises(TypeError, match="OpenedRequestState holds SealedStateContents"):
        OpenedRequestState(state({"step": 2}))  # type: ignore[arg-type]


def test_plaintext_is_canonical_and_has_the_documented_schema(setup) -> None:
    _sealer, _clock = setup
    contents = SealedStateContents(
        RequestStateBinding.of(
            method="tools/call", path="/mcp", protocol_version="2026-07-28", partition="p", params_digest="A" * 43
        ),
        3,
        T0,
        T0 + 15 * MINUTE,
        JsonString.from_value('id "QZX" \\ quotes\n'),
        state({"z": 1, "a": [Decimal("1.0")]}),
    )
    plaintext = contents.plaintext()
    assert canonical_bytes(parse(plaintext)) == plaintext
    document = json.loads(plaintext)
    assert list(document) == ["b", "e", "i", "q", "r", "s"]
    assert list(document["b"]) == ["a", "d", "m", "p", "v"]
    assert SealedStateContents.from_plaintext(plaintext) == contents
    assert "QZX" not in repr(contents)


# ------------------------------------------------------------------------------------------------ emission


def test_first_emission_and_re_emission_metadata(setup) -> None:
    sealer, clock = setup
    first = sealer.seal(state("s1"), bound(request("a")))
    contents = sealer.diagnose(first).contents
    assert contents is not None
    assert (contents.round, contents.issued_at_ms, contents.expires_at_ms) == (1, T0, T0 + 15 * MINUTE)
    assert contents.request_id == JsonString.from_value("a")
    clock.now += 5 * MINUTE
    opened = sealer.open(first, bound(request("b")))
    second = sealer.seal(state("s2"), bound(request("b")), continuing=opened)
    again = sealer.diagnose(second).contents
    assert again is not None
    # Re-emission keeps the first expiry (and issue time), increments the round, records the current id.
    assert (again.round, again.issued_at_ms, again.expires_at_ms) == (2, T0, T0 + 15 * MINUTE)
    assert again.request_id == JsonString.from_value("b")
    assert again.state == state("s2")


def test_final_allowed_round_completes_but_cannot_emit(setup) -> None:
    sealer, _clock = setup
    rounds = sealer.config.maximum_request_state_rounds
    token = sealer.seal(state(0), bound(request(0)))
    for number in range(1, rounds):
        opened = sealer.open(token, bound(request(number)))
        token = sealer.seal(state(number), bound(request(number)), continuing=opened)
    contents = sealer.diagnose(token).contents
    assert contents is not None
    assert contents.round == rounds
    # The retry carrying the final round opens (and can complete) ...
    last = sealer.open(token, bound(request(rounds)))
    assert last.state == state(rounds - 1)
    # ... but emitting again is refused, and nothing is emitted.
    with pytest.raises(RequestStateProtectionException) as caught:
        sealer.seal(state("more"), bound(request(rounds)), continuing=last)
    assert caught.value.reason is Reason.LAST_ROUND
    assert caught.value.reason.is_sealing


def test_a_round_beyond_the_configured_maximum_is_refused_on_opening() -> None:
    ring = keyring(key("k1"))
    generous, clock = sealer_for(ring, maximum_request_state_rounds=5)
    strict, _ = sealer_for(ring, clock, maximum_request_state_rounds=3)
    token = generous.seal(state(1), bound(request(0)))
    for number in range(1, 4):
        token = generous.seal(state(1), bound(request(number)), continuing=generous.open(token, bound(request(number))))
    assert generous.diagnose(token).contents.round == 4  # type: ignore[union-attr]
    assert refusal(strict, token, bound(request(9))) is Reason.ROUND
    assert generous.open(token, bound(request(9))).state == state(1)


def test_round_zero_is_refused() -> None:
    sealer, _clock = sealer_for(keyring(key("k1", 1)))
    contents = sealer.diagnose(sealer.seal(state(1), bound())).contents
    assert contents is not None
    zero = sealer.seal_contents(
        SealedStateContents(contents.binding, 0, T0, T0 + MINUTE, contents.request_id, contents.state)
    )
    assert refusal(sealer, zero, bound(request(2))) is Reason.ROUND


def test_state_expiring_while_the_handler_ran_is_not_re_emitted(setup) -> None:
    sealer, clock = setup
    token = sealer.seal(state(1), bound(request(1)))
    clock.now = T0 + 15 * MINUTE - 1
    opened = sealer.open(token, bound(request(2)))
    clock.now = T0 + 15 * MINUTE  # the handler took a millisecond too long
    with pytest.raises(RequestStateProtectionException) as caught:
        sealer.seal(state(2), bound(request(2)), continuing=opened)
    assert caught.value.reason is Reason.EXPIRED_DURING_HANDLER


# ------------------------------------------------------------------------------------------------ expiry


def test_expiry_edges(setup) -> None:
    sealer, clock = setup
    token = sealer.seal(state(1), bound(request(1)))
    expires = T0 + 15 * MINUTE
    clock.now = expires - 1
    assert sealer.open(token, bound(request(2))).state == state(1)
    # Half-open lifetime: exactly at expires-at the state has expired (documented in docs/protection-format.md).
    clock.now = expires
    assert refusal(sealer, token, bound(request(2))) is Reason.EXPIRED
    clock.now = expires + 1
    assert refusal(sealer, token, bound(request(2))) is Reason.EXPIRED


def test_a_lifetime_longer_than_the_configured_maximum_is_refused() -> None:
    from datetime import timedelta

    ring = keyring(key("k1"))
    long_lived, clock = sealer_for(ring, maximum_request_state_lifetime=timedelta(hours=1))
    short_lived, _ = sealer_for(ring, clock, maximum_request_state_lifetime=timedelta(minutes=15))
    token = long_lived.seal(state(1), bound())
    assert refusal(short_lived, token, bound(request(2))) is Reason.LIFETIME_EXCEEDED
    exact, _ = sealer_for(ring, clock, maximum_request_state_lifetime=timedelta(hours=1))
    assert exact.open(token, bound(request(2))).state == state(1)


# ------------------------------------------------------------------------------------------------ request id


@pytest.mark.parametrize(
    ("emitter", "retry", "refused"),
    [
        (7, 7, True),
        ("7", "7", True),
        (7, "7", False),  # a string never equals a number
        ("7", 8, False),
    ],
)
def test_same_request_id_as_the_emitter_is_refused(setup, emitter, retry, refused) -> None:
    sealer, _ = setup
    token = sealer.seal(state(1), bound(request(emitter)))
    if refused:
        assert refusal(sealer, token, bound(request(retry))) is Reason.REQUEST_ID_REUSED
    else:
        assert sealer.open(token, bound(request(retry))).state == state(1)


def test_request_ids_compare_as_json_values(setup) -> None:
    sealer, _ = setup
    token = sealer.seal(state(1), bound(request(1)))
    # 1.0 and 1E+0 are the JSON number 1: the same id.
    for spelled in (b"1.0", b"1E+0", b"10E-1"):
        data = request(99).replace(b'"id": 99', b'"id": ' + spelled)
        assert refusal(sealer, token, bound(data)) is Reason.REQUEST_ID_REUSED
    retry = BoundRequest(bound().binding, JsonNumber.from_value(Decimal("1.000")))
    assert refusal(sealer, token, retry) is Reason.REQUEST_ID_REUSED


# ------------------------------------------------------------------------------------------------ binding


BINDING_CHANGES: dict[BindingField, dict[str, Any]] = {
    BindingField.METHOD: {"data": request(2, method="prompts/get")},
    BindingField.PATH: {"path": "/other"},
    BindingField.PROTOCOL_VERSION: {"protocol_version": "2025-11-25"},
    BindingField.PARTITION: {"partition": "tenant-b"},
    BindingField.PARAMS: {"data": request(2, arguments={"sku": "A-100", "quantity": 4})},
}


@pytest.mark.parametrize("field", list(BindingField), ids=lambda field: field.name)
def test_each_binding_field_changed_alone_is_refused_as_that_field(setup, field: BindingField) -> None:
    sealer, _ = setup
    token = sealer.seal(state(1), bound(request(1)))
    change = dict(BINDING_CHANGES[field])
    retry = bound(change.pop("data", request(2)), **change)
    assert bound(request(2)).binding.mismatches(retry.binding) == (field,)
    with pytest.raises(RequestStateProtectionException) as caught:
        sealer.open(token, retry)
    assert caught.value.reason is Reason.for_binding(field)
    assert caught.value.binding_field is field
    assert not caught.value.reason.is_sealing
    diagnosis = sealer.diagnose(token, retry)
    assert diagnosis.failures == (Reason.for_binding(field),)


def test_binding_fields_are_compared_in_order(setup) -> None:
    sealer, _ = setup
    token = sealer.seal(state(1), bound(request(1)))
    retry = bound(request(2, method="prompts/get", arguments={"x": 1}), path="/b", partition="q")
    assert refusal(sealer, token, retry) is Reason.BINDING_METHOD
    diagnosis = sealer.diagnose(token, retry)
    assert diagnosis.failures == (
        Reason.BINDING_METHOD,
        Reason.BINDING_PATH,
        Reason.BINDING_PARTITION,
        Reason.BINDING_PARAMS,
    )


RETRY_VARIANTS: dict[str, bytes] = {
    "inputResponses": request(2, inputResponses={"confirm": {"action": "accept", "content": {"ok": True}}}),
    "requestState": request(2, requestState="anything at all"),
    "progressToken": request(2, meta={"progressToken": "p-9"}),
    "traceparent": request(2, meta={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
    "tracestate": request(2, meta={"tracestate": "vendor=abc"}),
    "baggage": request(2, meta={"baggage": "user=zoë"}),
    "all of them": request(
        2,
        inputResponses={"k": {"action": "decline"}},
        requestState="t",
        meta={"progressToken": 5, "traceparent": "x", "tracestate": "y", "baggage": "z"},
    ),
    "equivalent path": request(2),
}


@pytest.mark.parametrize("variant", list(RETRY_VARIANTS))
def test_retry_that_adds_responses_or_changes_transient_members_still_opens(setup, variant: str) -> None:
    sealer, _ = setup
    token = sealer.seal(state({"s": 1}), bound(request(1, meta={"progressToken": "p-1", "traceparent": "a"})))
    path = "//mcp/./" if variant == "equivalent path" else "/mcp"
    assert sealer.open(token, bound(RETRY_VARIANTS[variant], path=path)).state == state({"s": 1})


# ------------------------------------------------------------------------------------------------ keys


def test_verification_only_key_opens_but_never_seals() -> None:
    old, new = key("old"), key("new")
    before, clock = sealer_for(keyring(old))
    token_old = before.seal(state("before"), bound())
    after, _ = sealer_for(keyring(new, old), clock)
    # The verification-only key opens what it sealed while it was active ...
    assert after.open(token_old, bound(request(2))).state == state("before")
    # ... and every new seal is under the active key.
    for _ in range(5):
        assert EnvelopeHeader.read(after.seal(state("after"), bound())).key_id == "new"


def test_rotation_on_the_live_manager_moves_sealing_to_the_new_key() -> None:
    sealer, _ = sealer_for(keyring(key("k1")))
    manager = sealer.keyring_manager
    assert manager is not None
    first = sealer.seal(state(1), bound())
    manager.rotate_active_key(key("k2"))
    second = sealer.seal(state(2), bound())
    assert EnvelopeHeader.read(first).key_id == "k1"
    assert EnvelopeHeader.read(second).key_id == "k2"
    assert sealer.open(first, bound(request(2))).state == state(1)
    assert sealer.open(second, bound(request(2))).state == state(2)


def test_unknown_key_id_is_its_own_reason_and_a_removed_key_stops_opening() -> None:
    sealer, clock = sealer_for(keyring(key("k1")))
    token = sealer.seal(state(1), bound())
    stranger, _ = sealer_for(keyring(key("k9")), clock)
    assert refusal(stranger, token, bound(request(2))) is Reason.UNKNOWN_KEY
    manager = sealer.keyring_manager
    assert manager is not None
    manager.rotate_active_key(key("k2"))
    assert sealer.open(token, bound(request(2))).state == state(1)
    manager.remove_verification_key("k1")
    assert refusal(sealer, token, bound(request(2))) is Reason.UNKNOWN_KEY


def test_same_key_id_with_other_material_does_not_authenticate() -> None:
    sealer, clock = sealer_for(keyring(key("k1", 1)))
    token = sealer.seal(state(1), bound())
    impostor, _ = sealer_for(keyring(key("k1", 2)), clock)
    assert refusal(impostor, token, bound(request(2))) is Reason.AUTHENTICATION


def test_each_server_copies_the_keyring_into_its_own_manager() -> None:
    config = ProtectionConfig(keyring=keyring(key("k1")))
    one = RequestStateSealer(config)
    two = RequestStateSealer(config)
    assert one.keyring_manager is not two.keyring_manager
    one.keyring_manager.rotate_active_key(key("k2"))  # type: ignore[union-attr]
    assert two.keyring_manager.current().active_key.id == "k1"  # type: ignore[union-attr]
    assert config.keyring.active_key.id == "k1"  # type: ignore[union-attr]


def test_sealing_holds_a_reservation_on_the_active_key() -> None:
    seen: list[dict[str, int]] = []
    manager_box: list[KeyringManager] = []

    def nonce(size: int) -> bytes:
        # Called inside the seal: the reservation must be held right now, and removal refused.
        manager = manager_box[0]
        seen.append(dict(manager.outstanding_reservations()))
        manager.activate_staged_key("k2")
        with pytest.raises(KeyInUse):
            manager.remove_verification_key("k1")
        return bytes(size)

    config = ProtectionConfig(keyring=keyring(key("k1"), key("k2")))
    sealer = RequestStateSealer(config, nonce_source=nonce, clock=Clock())
    manager_box.append(sealer.keyring_manager)  # type: ignore[arg-type]
    token = sealer.seal(state(1), bound())
    assert seen == [{"k1": 1}]
    assert EnvelopeHeader.read(token).key_id == "k1"  # sealed under the key it reserved
    assert manager_box[0].outstanding_reservations() == {}
    manager_box[0].remove_verification_key("k1")


def test_concurrent_seals_and_opens_during_rotation() -> None:
    sealer, _ = sealer_for(keyring(key("k0")))
    manager = sealer.keyring_manager
    assert manager is not None
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for number in range(60):
                token = sealer.seal(state(number), bound())
                assert sealer.open(token, bound(request(2))).state == state(number)
        except BaseException as error:  # collected and re-raised in the main thread
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for number in range(1, 6):
        manager.rotate_active_key(key(f"k{number}"))
    for thread in threads:
        thread.join()
    assert errors == []


# ------------------------------------------------------------------------------------------------ limits


def sized_state(sealer: RequestStateSealer, plaintext_size: int) -> JsonValue:
    """A string state whose plaintext (for ``bound()``) is exactly ``plaintext_size`` bytes."""
    base = bound()
    empty = SealedStateContents(base.binding, 1, T0, T0 + 15 * MINUTE, base.request_id, state("")).plaintext()
    return state("x" * (plaintext_size - len(empty)))


def test_decoded_limit_edge() -> None:
    ring = keyring(key("k1"))
    sealer, clock = sealer_for(ring, maximum_decoded_bytes=40_000)
    exact = sealer.seal(sized_state(sealer, 40_000), bound())
    assert EnvelopeHeader.read(exact).decoded_size == 40_000
    assert sealer.open(exact, bound(request(2))).state == sized_state(sealer, 40_000)
    with pytest.raises(RequestStateProtectionException) as caught:
        sealer.seal(sized_state(sealer, 40_001), bound())
    assert caught.value.reason is Reason.TOO_LARGE
    # A token holding one byte more (sealed by a more generous server with the same key) does not open here.
    generous, _ = sealer_for(ring, clock, maximum_decoded_bytes=40_001)
    over = generous.seal(sized_state(sealer, 40_001), bound())
    assert refusal(sealer, over, bound(request(2))) is Reason.DECODED_TOO_LARGE


def test_encoded_limit_edge() -> None:
    ring = keyring(key("k1"))
    sealer, _clock = sealer_for(ring)  # defaults: 65,536 encoded, 49,152 decoded
    # 49,152 envelope bytes encode to exactly 65,536 characters: header (4) + nonce (12) + tag (16) + plaintext.
    plaintext_size = 49_152 - 4 - 12 - 16
    exact = sealer.seal(sized_state(sealer, plaintext_size), bound())
    assert len(exact) == 65_536
    assert sealer.open(exact, bound(request(2))).state == sized_state(sealer, plaintext_size)
    with pytest.raises(RequestStateProtectionException) as caught:
        sealer.seal(sized_state(sealer, plaintext_size + 1), bound())
    assert caught.value.reason is Reason.TOO_LARGE
    assert refusal(sealer, exact + "A", bound(request(2))) is Reason.ENCODED_TOO_LARGE
    assert refusal(sealer, "A" * 65_537, bound(request(2))) is Reason.ENCODED_TOO_LARGE
    # Non-ASCII text counts in UTF-8 bytes.
    assert refusal(sealer, "é" * 32_769, bound(request(2))) is Reason.ENCODED_TOO_LARGE
    assert refusal(sealer, "é" * 32_768, bound(request(2))) is Reason.BASE64URL


# ------------------------------------------------------------------------------------------------ each reason


def forge(sealer_key_material: bytes, key_id: str, plaintext: bytes, *, version: int = 1) -> str:
    """An envelope built here from the documented layout (a second implementation, for JSON/size reasons)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.hashes import SHA256
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    aead_key = HKDF(algorithm=SHA256(), length=32, salt=None, info=b"soklet-mcp-protection-v1/aead").derive(
        sealer_key_material
    )
    header = bytes((version, len(key_id))) + key_id.encode()
    nonce = bytes(range(12))
    body = AESGCM(aead_key).encrypt(nonce, plaintext, b"soklet-mcp-protection-v1\x00" + header)
    return b64(header + nonce + body)


def statuses(diagnosis: Any) -> list[tuple[OpeningStep, CheckStatus]]:
    return [(check.step, check.status) for check in diagnosis.checks]


def expected_statuses(failing: OpeningStep | None, *, retry: bool = True) -> list[tuple[OpeningStep, CheckStatus]]:
    """The documented diagnosis of a token with one failing check: before the state decodes, a failure ends the
    run (later checks not run); after it, every check runs, and the retry's checks need a retry."""
    steps = list(OpeningStep)
    decoded = steps.index(OpeningStep.JSON)
    rows = []
    for index, step in enumerate(steps):
        ended = failing is not None and steps.index(failing) <= decoded and index > steps.index(failing)
        wants_retry = not retry and index > steps.index(OpeningStep.ROUND)
        if step is failing:
            status = CheckStatus.FAILED
        elif ended or wants_retry:
            status = CheckStatus.NOT_RUN
        else:
            status = CheckStatus.PASSED
        rows.append((step, status))
    return rows


def test_every_opening_reason_is_reachable_and_reported_as_itself() -> None:
    material = bytes([7]) * 32
    ring = keyring(key("k1", 7))
    sealer, clock = sealer_for(ring, maximum_decoded_bytes=2_000, maximum_encoded_bytes=4_000)
    first = bound(request(1))
    retry = bound(request(2))
    good = sealer.seal(state({"a": 1}), first)
    raw = unb64(good)
    plaintext = sealer.diagnose(good).contents.plaintext()  # type: ignore[union-attr]
    cases: dict[Reason, tuple[str, BoundRequest, int]] = {
        Reason.ENCODED_TOO_LARGE: ("A" * 4_001, retry, T0),
        Reason.BASE64URL: (good + "=", retry, T0),
        Reason.VERSION: (b64(b"\x02" + raw[1:]), retry, T0),
        Reason.UNKNOWN_KEY: (b64(raw[:2] + b"k9" + raw[4:]), retry, T0),
        Reason.AUTHENTICATION: (b64(raw[:-1] + bytes([raw[-1] ^ 1])), retry, T0),
        Reason.DECODED_TOO_LARGE: (forge(material, "k1", plaintext[:-1] + b" " * 2_000 + b"}"), retry, T0),
        Reason.JSON: (forge(material, "k1", plaintext.replace(b'"r":1', b'"r":"1"')), retry, T0),
        Reason.EXPIRED: (good, retry, T0 + 15 * MINUTE),
        Reason.ISSUED_IN_FUTURE: (good, retry, T0 - 2 * MINUTE),
        Reason.LIFETIME_EXCEEDED: (
            forge(material, "k1", plaintext.replace(b'"i":1.7855424E+12', b'"i":1.7855423E+12')),
            retry,
            T0,
        ),
        Reason.ROUND: (forge(material, "k1", plaintext.replace(b'"r":1', b'"r":11')), retry, T0),
        Reason.BINDING_METHOD: (good, bound(request(2, method="resources/read")), T0),
        Reason.BINDING_PATH: (good, bound(request(2), path="/mcp/v2"), T0),
        Reason.BINDING_PROTOCOL_VERSION: (good, bound(request(2), protocol_version="2099-01-01"), T0),
        Reason.BINDING_PARTITION: (good, bound(request(2), partition="someone-else"), T0),
        Reason.BINDING_PARAMS: (good, bound(request(2, name="other.tool")), T0),
        Reason.REQUEST_ID_REUSED: (good, first, T0),
    }
    assert set(cases) == set(OPENING_REASONS)
    for reason, (token, retry_request, now) in cases.items():
        clock.now = now
        assert refusal(sealer, token, retry_request) is reason, reason
        diagnosis = sealer.diagnose(token, retry_request)
        assert diagnosis.first_failure is reason, reason
        failed = [check.step for check in diagnosis.checks if check.status is CheckStatus.FAILED]
        assert failed[0] is OpeningStep.failing_with(reason)
        passed = [check.step for check in diagnosis.checks if check.status is CheckStatus.PASSED]
        assert all(list(OpeningStep).index(step) < list(OpeningStep).index(failed[0]) for step in passed[:1])
        assert statuses(diagnosis) == expected_statuses(OpeningStep.failing_with(reason)), reason
        without_retry = sealer.diagnose(token)
        if list(OpeningStep).index(OpeningStep.failing_with(reason)) > list(OpeningStep).index(OpeningStep.ROUND):
            assert without_retry.opens
            assert statuses(without_retry) == expected_statuses(None, retry=False)
        else:
            assert statuses(without_retry) == expected_statuses(OpeningStep.failing_with(reason), retry=False)
    clock.now = T0
    assert sealer.diagnose(good, retry).opens
    assert statuses(sealer.diagnose(good, retry)) == expected_statuses(None)
    assert statuses(sealer.diagnose(good)) == expected_statuses(None, retry=False)
    not_text: Any = b"token"
    assert statuses(sealer.diagnose(not_text, retry)) == expected_statuses(OpeningStep.BASE64URL)
    # After decoding, every check runs: an expired state replayed with its own id under another method.
    clock.now = T0 + 15 * MINUTE
    replayed = bound(request(1, method="resources/read"))
    assert refusal(sealer, good, replayed) is Reason.EXPIRED
    assert sealer.diagnose(good, replayed).failures == (Reason.EXPIRED, Reason.BINDING_METHOD, Reason.REQUEST_ID_REUSED)


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda raw: b"", Reason.VERSION),
        (lambda raw: raw[:1], Reason.UNKNOWN_KEY),
        (lambda raw: raw[:2], Reason.UNKNOWN_KEY),
        (lambda raw: raw[:1] + b"\x00" + raw[4:], Reason.UNKNOWN_KEY),
        (lambda raw: raw[:2] + b"k\x80" + raw[4:], Reason.UNKNOWN_KEY),
        (lambda raw: raw[:4] + raw[4:20], Reason.AUTHENTICATION),
        (lambda raw: raw[:4], Reason.AUTHENTICATION),
    ],
)
def test_truncated_and_malformed_envelopes(setup, mangle, reason: Reason) -> None:
    sealer, _ = setup
    raw = unb64(sealer.seal(state(1), bound()))
    assert refusal(sealer, b64(mangle(raw)), bound(request(2))) is reason


@pytest.mark.parametrize("token", ["", "A", "AQ=", "AQ==", "a b", "ab+/", "AQJrMQ\n", "Ä", 5, None, b"AQ"])
def test_malformed_text(setup, token: Any) -> None:
    sealer, _ = setup
    assert refusal(sealer, token, bound(request(2))) in {Reason.BASE64URL, Reason.VERSION}


def test_non_canonical_base64url_is_refused(setup) -> None:
    sealer, _ = setup
    token = sealer.seal(state(1), bound())
    if len(token) % 4 == 0:  # pragma: no cover - make the trailing bits meaningful
        token = sealer.seal(state(12), bound())
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(token[-1])
    # Setting an unused low bit of the last character decodes to the same bytes: a second spelling.
    twin = token[:-1] + alphabet[last | 1]
    assert twin != token
    assert unb64(twin) == unb64(token)
    assert refusal(sealer, twin, bound(request(2))) is Reason.BASE64URL


def test_every_single_bit_flip_is_refused_with_a_bounded_reason() -> None:
    sealer, _ = sealer_for(keyring(key("2026-08", 3)))
    token = sealer.seal(state({"cart": ["A-100", "B-200"], "step": 2, "note": "x" * 120}), bound(request(1)))
    assert 250 <= len(token) <= 600
    retry = bound(request(2))
    raw = unb64(token)
    seen: set[Reason] = set()
    # Every bit of the envelope bytes ...
    for index in range(len(raw)):
        for bit in range(8):
            flipped = bytearray(raw)
            flipped[index] ^= 1 << bit
            seen.add(refusal(sealer, b64(bytes(flipped)), retry))
    assert seen == {Reason.VERSION, Reason.UNKNOWN_KEY, Reason.AUTHENTICATION}
    # ... and every bit of the token text.
    for index in range(len(token)):
        for bit in range(8):
            flipped_text = token[:index] + chr(ord(token[index]) ^ (1 << bit)) + token[index + 1 :]
            reason = refusal(sealer, flipped_text, retry)
            assert reason in {Reason.BASE64URL, Reason.VERSION, Reason.UNKNOWN_KEY, Reason.AUTHENTICATION}


# ------------------------------------------------------------------------------------------------ custom protector


class XorHmacProtector:
    """A toy custom protector (HMAC-authenticated, no secrecy) that records the contexts it is given."""

    def __init__(self) -> None:
        self.contexts: list[RequestStateProtectionContext] = []

    def seal(self, plaintext: bytes, context: RequestStateProtectionContext) -> str:
        import hashlib
        import hmac

        self.contexts.append(context)
        tag = hmac.new(b"k" * 32, context.associated_data + plaintext, hashlib.sha256).digest()
        return "c1." + b64(tag + plaintext)

    def open(self, token: str, context: RequestStateProtectionContext) -> bytes:
        import hashlib
        import hmac

        self.contexts.append(context)
        if not token.startswith("c1."):
            raise RequestStateProtectionException(Reason.VERSION)
        raw = unb64(token[3:])
        tag, plaintext = raw[:32], raw[32:]
        expected = hmac.new(b"k" * 32, context.associated_data + plaintext, hashlib.sha256).digest()
        if not hmac.compare_digest(tag, expected):
            raise RequestStateProtectionException(Reason.AUTHENTICATION)
        return plaintext


class BrokenProtector:
    def seal(self, plaintext: bytes, context: RequestStateProtectionContext) -> str:
        raise RuntimeError("secret-ish detail " + plaintext.decode())

    def open(self, token: str, context: RequestStateProtectionContext) -> bytes:
        raise KeyError(token)


def test_custom_protector_gets_the_framework_context_and_all_checks_still_apply() -> None:
    protector = XorHmacProtector()
    config = ProtectionConfig(protector=protector)
    clock = Clock()
    sealer = RequestStateSealer(config, clock=clock)
    assert sealer.keyring_manager is None
    token = sealer.seal(state({"a": 1}), bound(request(1)))
    assert sealer.open(token, bound(request(2))).state == state({"a": 1})
    assert refusal(sealer, token, bound(request(1))) is Reason.REQUEST_ID_REUSED
    assert refusal(sealer, token, bound(request(2), partition="x")) is Reason.BINDING_PARTITION
    assert refusal(sealer, "c1." + token[3:-2] + "AA", bound(request(2))) is Reason.AUTHENTICATION
    assert refusal(sealer, "zz", bound(request(2))) is Reason.VERSION
    clock.now += 15 * MINUTE
    assert refusal(sealer, token, bound(request(2))) is Reason.EXPIRED
    context = protector.contexts[0]
    assert context == RequestStateProtectionContext.framework()
    assert context.profile == "soklet-mcp-protection-v1"
    assert context.associated_data == b"soklet-mcp-protection-v1\x00"
    assert context.key_id is None
    assert context.for_key("k1").associated_data == b"soklet-mcp-protection-v1\x00\x01\x02k1"


def test_a_failing_custom_protector_fails_closed_without_its_text(caplog) -> None:
    sealer = RequestStateSealer(ProtectionConfig(protector=BrokenProtector()), clock=Clock())
    with pytest.raises(RequestStateProtectionException) as sealing:
        sealer.seal(state("hush"), bound())
    assert sealing.value.reason is Reason.PROTECTOR_FAILED
    assert "hush" not in str(sealing.value)
    assert sealing.value.__cause__ is None
    assert sealing.value.__suppress_context__
    with pytest.raises(RequestStateProtectionException) as opening:
        sealer.open("tok-hush", bound(request(2)))
    assert opening.value.reason is Reason.AUTHENTICATION
    assert all("hush" not in record.getMessage() for record in caplog.records)


def test_config_refuses_what_is_not_a_provider() -> None:
    with pytest.raises(ProtectionUsageError):
        ProtectionConfig(protector=object())  # type: ignore[arg-type]
    with pytest.raises(ProtectionUsageError):
        ProtectionConfig(keyring=XorHmacProtector())  # type: ignore[arg-type]
    with pytest.raises(ProtectionUsageError):
        ProtectionConfig(protector=keyring(key("k1")))  # type: ignore[arg-type]
    with pytest.raises(ProtectionUsageError):
        ProtectionConfig()
    with pytest.raises(ProtectionUsageError):
        ProtectionConfig(keyring=keyring(key("k1")), protector=XorHmacProtector())


def test_bad_clock_and_nonce_source_are_usage_errors() -> None:
    config = ProtectionConfig(keyring=keyring(key("k1")))
    with pytest.raises(ProtectionUsageError):
        RequestStateSealer(config, clock=lambda: 1.5).seal(state(1), bound())  # type: ignore[arg-type,return-value]
    with pytest.raises(ProtectionUsageError):
        RequestStateSealer(config, nonce_source=lambda size: bytes(size - 1)).seal(state(1), bound())
    with pytest.raises(TypeError):
        RequestStateSealer()


def test_the_opening_table_covers_every_step_once_in_order() -> None:
    from soklet_core.protection.sealer import _OPENING_CHECKS

    steps = list(OpeningStep)
    firsts = [step for step, _, _ in _OPENING_CHECKS]
    assert firsts == sorted(firsts, key=steps.index)
    assert firsts[0] is steps[0]
    # Only the protector's row covers more than its own step: base64url, version, key id, authentication.
    covered = {step for step in steps if step not in firsts}
    assert covered == {OpeningStep.VERSION, OpeningStep.KEY_ID, OpeningStep.AUTHENTICATION}
    retry_rows = [step for step, _, needs_retry in _OPENING_CHECKS if needs_retry]
    assert retry_rows == steps[steps.index(OpeningStep.BINDING_METHOD) :]


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    minutes=st.integers(0, 20),
    retry_change=st.sampled_from(["none", "method", "path", "partition", "params", "same-id"]),
)
def test_open_refuses_with_the_diagnosis_first_failure(data: st.DataObject, minutes: int, retry_change: str) -> None:
    """Whatever goes wrong, open stops at the check the diagnosis names first (one table drives both)."""
    material = bytes([7]) * 32
    sealer, clock = sealer_for(keyring(key("k1", 7)), maximum_decoded_bytes=2_000, maximum_encoded_bytes=4_000)
    good = sealer.seal(state({"a": [1, "b"]}), bound(request(1)))
    plaintext = sealer.diagnose(good).contents.plaintext()  # type: ignore[union-attr]
    tokens = {
        "good": good,
        "bit flip": b64(_flip(unb64(good), data.draw(st.integers(0, 10**6)))),
        "round": forge(material, "k1", plaintext.replace(b'"r":1', b'"r":%d' % data.draw(st.integers(-2, 12)))),
        "json": forge(material, "k1", plaintext.replace(b'"s":', b'"s":' + data.draw(st.sampled_from([b"[", b"1,"])))),
    }
    token = tokens[data.draw(st.sampled_from(sorted(tokens)))]
    retry = {
        "none": bound(request(2)),
        "method": bound(request(2, method="resources/read")),
        "path": bound(request(2), path="/other"),
        "partition": bound(request(2), partition="p2"),
        "params": bound(request(2, name="other")),
        "same-id": bound(request(1)),
    }[retry_change]
    clock.now = T0 + minutes * MINUTE
    diagnosis = sealer.diagnose(token, retry)
    if diagnosis.first_failure is not None:
        assert refusal(sealer, token, retry) is diagnosis.first_failure
    else:
        assert diagnosis.contents is not None
        assert sealer.open(token, retry).state == diagnosis.contents.state


def _flip(raw: bytes, where: int) -> bytes:
    flipped = bytearray(raw)
    flipped[where % len(raw)] ^= 1 << (where % 8)
    return bytes(flipped)
