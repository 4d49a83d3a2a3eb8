"""RequestContext: one admitted value; only the declared mode's state accessor can be non-None."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from soklet_core.json import JsonNumber, JsonObject, JsonString, parse
from soklet_core.mcp import (
    ClientCapabilities,
    Identity,
    InputResponses,
    McpModelErrorReason,
    RequestContext,
    RequestStateMode,
)
from soklet_core.mcp.model import (
    MAX_APPLICATION_REQUEST_STATE_BYTES,
    NO_INVOCATION_FEATURES,
    InputRequiredResultError,
    InvocationFeatures,
    RequestContextError,
)


def context(**overrides: Any) -> RequestContext:
    values: dict[str, Any] = {
        "identity": Identity("alice"),
        "partition": "tenant-a",
        "client_capabilities": ClientCapabilities.from_mapping({"elicitation": {}}),
        "protocol_version": "2026-07-28",
        "request_id": JsonNumber.from_value(7),
        "method": "tools/call",
        "operation_name": "catalog.continue",
    }
    values.update(overrides)
    return RequestContext(**values)


def test_initial_request_defaults() -> None:
    value = context()
    assert value.input_responses == InputResponses.empty()
    assert value.framework_request_state is None
    assert value.application_request_state is None
    assert value.request_state_mode is RequestStateMode.NONE
    assert not value.is_retry
    assert value.invocation is NO_INVOCATION_FEATURES
    assert value.meta == JsonObject.empty_instance()
    assert value.client_info is None


def test_only_the_declared_modes_accessor() -> None:
    framework = context(
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED, framework_request_state=parse('{"phase":"w"}')
    )
    assert framework.framework_request_state == parse('{"phase":"w"}')
    assert framework.application_request_state is None
    assert framework.is_retry
    application = context(request_state_mode=RequestStateMode.APPLICATION_PROTECTED, application_request_state="h")
    assert application.application_request_state == "h"
    assert application.framework_request_state is None
    for mode in (RequestStateMode.NONE, RequestStateMode.APPLICATION_PROTECTED):
        with pytest.raises(RequestContextError) as caught:
            context(request_state_mode=mode, framework_request_state=parse("1"))
        assert caught.value.reason is McpModelErrorReason.STATE_MODE_MISMATCH
    for mode in (RequestStateMode.NONE, RequestStateMode.FRAMEWORK_PROTECTED):
        with pytest.raises(RequestContextError):
            context(request_state_mode=mode, application_request_state="h")
    # a declared mode without state is an initial request
    assert not context(request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED).is_retry


def test_application_state_bound_applies() -> None:
    mode = RequestStateMode.APPLICATION_PROTECTED
    context(request_state_mode=mode, application_request_state="a" * MAX_APPLICATION_REQUEST_STATE_BYTES)
    with pytest.raises(InputRequiredResultError):
        context(request_state_mode=mode, application_request_state="a" * (MAX_APPLICATION_REQUEST_STATE_BYTES + 1))
    with pytest.raises(InputRequiredResultError):
        context(request_state_mode=mode, application_request_state="")


def test_retry_with_responses_only() -> None:
    responses = InputResponses.from_responses({"approval": {"action": "accept"}})
    assert context(input_responses=responses).is_retry


@pytest.mark.parametrize(
    "overrides",
    [
        {"identity": "alice"},
        {"partition": ""},
        {"partition": None},
        {"client_capabilities": {}},
        {"request_id": 7},
        {"request_id": parse("null")},
        {"input_responses": {}},
        {"request_state_mode": "none"},
        {"meta": {}},
        {"client_info": "x"},
        {"request_state_mode": RequestStateMode.FRAMEWORK_PROTECTED, "framework_request_state": {"a": 1}},
    ],
)
def test_inconsistent_contexts_refused(overrides: dict[str, Any]) -> None:
    with pytest.raises(RequestContextError):
        context(**overrides)


def test_request_ids_and_identity() -> None:
    assert context(request_id=JsonString.from_value("abc")).request_id == JsonString.from_value("abc")
    assert Identity.anonymous().is_anonymous
    assert Identity.anonymous() is Identity.anonymous()
    assert not Identity("alice").is_anonymous
    with pytest.raises(RequestContextError):
        Identity("")


def test_equality_is_identity_and_repr_hides_state() -> None:
    first = context(request_state_mode=RequestStateMode.APPLICATION_PROTECTED, application_request_state="SECRETISH")
    second = context(request_state_mode=RequestStateMode.APPLICATION_PROTECTED, application_request_state="SECRETISH")
    assert first == first
    assert first != second
    assert "SECRETISH" not in repr(first)
    with pytest.raises(AttributeError):
        first.partition = "other"  # type: ignore[misc]


class RecordingFeatures:
    """A transport-like implementation of the InvocationFeatures protocol."""

    def __init__(self) -> None:
        self.frames: list[tuple[Decimal | int, Decimal | int | None, str | None]] = []
        self.gone = False

    @property
    def progress_token(self) -> JsonString | JsonNumber | None:
        return JsonString.from_value("progress-test-1")

    @property
    def cancelled(self) -> bool:
        return self.gone

    def report_progress(
        self, progress: Decimal | int, *, total: Decimal | int | None = None, message: str | None = None
    ) -> None:
        self.frames.append((progress, total, message))


def is_cancelled(value: RequestContext) -> bool:
    return value.invocation.cancelled


def test_invocation_features_protocol() -> None:
    features = RecordingFeatures()
    assert isinstance(features, InvocationFeatures)
    assert isinstance(NO_INVOCATION_FEATURES, InvocationFeatures)
    value = context(invocation=features)
    value.invocation.report_progress(50, total=100, message="half")
    assert features.frames == [(50, 100, "half")]
    assert not is_cancelled(value)
    features.gone = True
    assert is_cancelled(value)
    assert NO_INVOCATION_FEATURES.progress_token is None
    assert not NO_INVOCATION_FEATURES.cancelled
    NO_INVOCATION_FEATURES.report_progress(1)
