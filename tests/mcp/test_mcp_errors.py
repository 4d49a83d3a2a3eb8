"""The model layer's one exception hierarchy: bounded reasons, messages free of client input."""

from __future__ import annotations

import pickle

import pytest

from soklet_core.mcp import McpModelError, McpModelErrorReason
from soklet_core.mcp.model import (
    ArgumentsError,
    CapabilitiesError,
    FormPolicyViolation,
    InputRequestError,
    InputRequiredResultError,
    InputResponseError,
    RegistrationError,
    RequestContextError,
    ResultError,
)
from soklet_core.mcp.model.errors import safe_subject


def test_every_reason_has_a_description() -> None:
    for reason in McpModelErrorReason:
        assert reason.description
        assert reason.value in str(McpModelError(reason))
    assert len({reason.value for reason in McpModelErrorReason}) == len(McpModelErrorReason)


@pytest.mark.parametrize(
    "kind",
    [ArgumentsError, CapabilitiesError, InputRequestError, InputRequiredResultError, InputResponseError,
     RegistrationError, RequestContextError, ResultError],
)  # fmt: skip
def test_hierarchy(kind: type[McpModelError]) -> None:
    error = kind(McpModelErrorReason.INVALID_NAME, "tool.name", "a fixed detail")
    assert isinstance(error, McpModelError)
    assert isinstance(error, ValueError)
    assert str(error) == (
        "invalid-name ('tool.name'): a name must be 1 to 128 characters from A-Z a-z 0-9 _ . - [a fixed detail]"
    )
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is kind
    assert copy.reason is error.reason
    assert copy.subject == "tool.name"


def test_policy_violation() -> None:
    error = FormPolicyViolation("api_key", "api-key-or-token", "name")
    assert isinstance(error, InputRequestError)
    assert error.reason is McpModelErrorReason.SECRET_BEARING_FIELD
    assert "api_key" in str(error)
    assert "api-key-or-token in name" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert copy.concept == "api-key-or-token"
    assert copy.where == "name"


@pytest.mark.parametrize(
    "subject",
    ["", "x" * 129, "has space", "new\nline", "quote'd", "<script>", "ünïcode", "a=b", "a@b", 7, None, b"bytes"],
)
def test_unsafe_subjects_are_dropped(subject: object) -> None:
    assert safe_subject(subject) is None
    error = McpModelError(McpModelErrorReason.CONVERSION_FAILED, subject)
    assert error.subject is None
    assert "(" not in str(error).split(":")[0]


@pytest.mark.parametrize("subject", ["user_name", "catalog.continue", "test://template/{id}/data", "a-b:c"])
def test_safe_subjects_are_kept(subject: str) -> None:
    assert McpModelError(McpModelErrorReason.CONVERSION_FAILED, subject).subject == subject
