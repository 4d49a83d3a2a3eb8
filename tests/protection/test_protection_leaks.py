"""Property: no exception text and no log record carries key material, plaintext, state or the token."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soklet_core.keys import ProtectionKey
from soklet_core.protection import (
    ProtectionConfig,
    RequestStateProtectionException,
    RequestStateSealer,
)
from tests.protection.support import MINUTE, Clock, bound, keyring, request, state

FRAGMENT = 16


def forms(secret: bytes) -> set[str]:
    url = base64.urlsafe_b64encode(secret).rstrip(b"=").decode()
    std = base64.b64encode(secret).decode()
    found = {url, std.rstrip("="), secret.hex(), secret.hex().upper()}
    found |= {url[i : i + FRAGMENT] for i in range(max(0, len(url) - FRAGMENT + 1))}
    found |= {secret.hex()[i : i + 2 * FRAGMENT] for i in range(0, max(0, 2 * len(secret) - 2 * FRAGMENT + 1), 2)}
    return found


def texts_of(error: BaseException, records: list[logging.LogRecord]) -> list[str]:
    out = [str(error), repr(error), *map(repr, error.args)]
    for record in records:
        out.append(record.getMessage())
        out.append(repr(record.args))
    return out


SCENARIOS = [
    "tamper",
    "truncate",
    "wrong-key",
    "expired",
    "binding",
    "reused-id",
    "too-large",
    "last-round",
    "expired-during-handler",
    "garbage",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    material=st.binary(min_size=32, max_size=64),
    marker=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=20, max_size=40),
    extra=st.text(max_size=40),
    scenario=st.sampled_from(SCENARIOS),
    position=st.integers(min_value=0, max_value=10_000),
)
def test_no_secret_in_errors_or_logs(caplog, material: bytes, marker: str, extra: str, scenario: str, position: int):
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    try:
        application_state = state({"marker": marker, "extra": extra.encode("utf-8", "ignore").decode()})
    except Exception:  # lone surrogates are refused by the JSON model itself; nothing to seal
        return
    key = ProtectionKey.from_id_and_bytes("k1", material)
    clock = Clock()
    sizes = {"maximum_decoded_bytes": 120, "maximum_encoded_bytes": 200} if scenario == "too-large" else {}
    config = ProtectionConfig(keyring=keyring(key), maximum_request_state_rounds=1, **sizes)
    sealer = RequestStateSealer(config, clock=clock)
    first, retry = bound(request(1)), bound(request(2))
    token = ""
    plaintext = b""
    error: BaseException | None = None
    try:
        token = sealer.seal(application_state, first)
        contents = sealer.diagnose(token).contents
        assert contents is not None
        plaintext = contents.plaintext()
        if scenario == "tamper":
            index = position % len(token)
            sealer.open(token[:index] + ("A" if token[index] != "A" else "B") + token[index + 1 :], retry)
        elif scenario == "truncate":
            sealer.open(token[: position % len(token)], retry)
        elif scenario == "wrong-key":
            other = RequestStateSealer(
                ProtectionConfig(keyring=keyring(ProtectionKey.from_id_and_bytes("k1", bytes(32))))
            )
            other.open(token, retry)
        elif scenario == "expired":
            clock.now += 15 * MINUTE + position
            sealer.open(token, retry)
        elif scenario == "binding":
            sealer.open(token, bound(request(2), partition=marker))
        elif scenario == "reused-id":
            sealer.open(token, first)
        elif scenario in ("last-round", "expired-during-handler"):
            opened = sealer.open(token, retry)
            if scenario == "expired-during-handler":
                clock.now += 15 * MINUTE
            sealer.seal(application_state, retry, continuing=opened)
        elif scenario == "garbage":
            sealer.open(marker + token[::-1], retry)
    except RequestStateProtectionException as caught:
        error = caught
    if scenario == "too-large":
        assert error is not None
    if error is None:
        return
    secrets: set[str] = forms(material) | {marker}
    if token:
        secrets |= {token} | {token[i : i + FRAGMENT] for i in range(6, max(6, len(token) - FRAGMENT + 1))}
    if plaintext:
        secrets.add(plaintext.decode())
    for text in texts_of(error, caplog.records):
        leaked = [secret for secret in secrets if secret and secret in text]
        assert not leaked, f"{scenario}: leaked into {text!r}"
    assert error.__cause__ is None


@pytest.mark.parametrize("scenario", ["authentication", "json"])
def test_refusals_are_logged_by_reason_only(caplog, scenario: str) -> None:
    caplog.set_level(logging.DEBUG)
    sealer = RequestStateSealer(ProtectionConfig(keyring=keyring(ProtectionKey.generate("k1"))))
    token = sealer.seal(state({"s": "PLAINTEXT-MARKER-123"}), bound())
    with pytest.raises(RequestStateProtectionException):
        sealer.open(token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBA"), bound(request(2)))
    messages = [record.getMessage() for record in caplog.records]
    assert messages == ["request state refused: authentication"]
    assert all(record.name == "soklet.protection" for record in caplog.records)


def test_key_and_manager_reprs_hold_no_material() -> None:
    key = ProtectionKey.generate("k1")
    sealer = RequestStateSealer(ProtectionConfig(keyring=keyring(key)))
    everything: list[Any] = [sealer, sealer.config, sealer.protector, sealer.keyring_manager]
    for item in everything:
        for secret in forms(key.material):
            assert secret not in repr(item)
