"""The refusal types of the MCP model layer and their bounded reasons.

Every refusal in :mod:`soklet_core.mcp` is a :class:`McpModelError` (a ``ValueError``) carrying one
:class:`McpModelErrorReason` from a closed set; subclasses group the reasons by area so callers can catch one
area at a time. Messages are built from the reason and, at most, a *subject*: a name the application itself
chose (a tool name, a form field, a response key) and only when it is a short plain identifier. Values a client
sent — response contents, unexpected keys, URLs, state — never appear in a message.
"""

from __future__ import annotations

import enum
import re
from typing import Any, Final

__all__ = [
    "ArgumentsError",
    "CapabilitiesError",
    "FormPolicyViolation",
    "InputRequestError",
    "InputRequiredResultError",
    "InputResponseError",
    "McpModelError",
    "McpModelErrorReason",
    "RegistrationError",
    "RequestContextError",
    "ResultError",
    "safe_subject",
]

# A subject is repeated in a message only when it looks like an identifier a developer wrote.
_SAFE_SUBJECT: Final = re.compile(r"[A-Za-z0-9_.:/{}-]{1,128}")


def safe_subject(text: object) -> str | None:
    """``text`` if it is a short plain identifier that may appear in a message, else ``None``."""
    return text if isinstance(text, str) and _SAFE_SUBJECT.fullmatch(text) else None


class McpModelErrorReason(enum.Enum):
    """Why a model value was refused. The set is closed: callers may switch on it."""

    # registrations
    INVALID_NAME = "invalid-name"
    MISSING_DESCRIPTION = "missing-description"
    INVALID_INPUT_SCHEMA = "invalid-input-schema"
    DUPLICATE_REGISTRATION = "duplicate-registration"
    DUPLICATE_DECLARATION = "duplicate-declaration"
    INVALID_URI = "invalid-uri"
    INVALID_URI_TEMPLATE = "invalid-uri-template"
    INVALID_PROMPT_ARGUMENTS = "invalid-prompt-arguments"
    UNKNOWN_COMPLETION_TARGET = "unknown-completion-target"
    INVALID_HANDLER = "invalid-handler"
    INVALID_FIELD = "invalid-field"
    INVALID_HEADER_PARAMETER = "invalid-header-parameter"
    UNDECLARED_INPUT_REQUEST = "undeclared-input-request"
    STATE_MODE_MISMATCH = "state-mode-mismatch"
    # client capabilities
    INVALID_CAPABILITIES = "invalid-capabilities"
    # input requests
    INVALID_INPUT_REQUEST_PARAMS = "invalid-input-request-params"
    DECLARATION_MISMATCH = "declaration-mismatch"
    INVALID_FORM_SCHEMA = "invalid-form-schema"
    SECRET_BEARING_FIELD = "secret-bearing-field"  # noqa: S105 (a reason name, not a secret)
    INVALID_URL = "invalid-url"
    INSECURE_URL = "insecure-url"
    URL_USERINFO = "url-userinfo"
    URL_QUERY_OR_FRAGMENT = "url-query-or-fragment"
    WEAK_HANDLE = "weak-handle"
    # input-required results
    EMPTY_INPUT_REQUIRED_RESULT = "empty-input-required-result"
    INVALID_INPUT_REQUEST_KEY = "invalid-input-request-key"
    DUPLICATE_INPUT_REQUEST_KEY = "duplicate-input-request-key"
    INVALID_APPLICATION_STATE = "invalid-application-state"
    APPLICATION_STATE_TOO_LARGE = "application-state-too-large"
    SEALED_STATE_MISMATCH = "sealed-state-mismatch"
    # input responses
    INVALID_INPUT_RESPONSE = "invalid-input-response"
    DUPLICATE_INPUT_RESPONSE_KEY = "duplicate-input-response-key"
    CONVERSION_FAILED = "conversion-failed"
    UNSUPPORTED_TARGET_TYPE = "unsupported-target-type"
    # complete results
    INVALID_CONTENT = "invalid-content"
    TOO_MANY_COMPLETION_VALUES = "too-many-completion-values"
    INVALID_CACHE_HINT = "invalid-cache-hint"
    # request context
    INVALID_REQUEST_CONTEXT = "invalid-request-context"

    @property
    def description(self) -> str:
        """A fixed, human sentence for the reason; never contains input."""
        return _DESCRIPTIONS[self]


_R = McpModelErrorReason
_DESCRIPTIONS: Final[dict[McpModelErrorReason, str]] = {
    _R.INVALID_NAME: "a name must be 1 to 128 characters from A-Z a-z 0-9 _ . -",
    _R.MISSING_DESCRIPTION: "a description is required and must not be blank",
    _R.INVALID_INPUT_SCHEMA: 'a schema must be a JSON object whose type is "object"',
    _R.DUPLICATE_REGISTRATION: "this name or URI is already registered",
    _R.DUPLICATE_DECLARATION: "an operation declares the same input request type twice",
    _R.INVALID_URI: "a resource URI must be an absolute URI without spaces or control characters",
    _R.INVALID_URI_TEMPLATE: "a URI template must use {name} or {+name} expressions with distinct variable names",
    _R.INVALID_PROMPT_ARGUMENTS: "prompt arguments must be strings, declared, and include every required one",
    _R.UNKNOWN_COMPLETION_TARGET: "the completion names no registered prompt argument or template variable",
    _R.INVALID_HANDLER: "a handler must be callable",
    _R.INVALID_FIELD: "a registration field has the wrong type or value",
    _R.INVALID_HEADER_PARAMETER: "x-mcp-header must be a unique header-name token on a primitive top-level property",
    _R.UNDECLARED_INPUT_REQUEST: "the operation emitted an input request it did not declare",
    _R.STATE_MODE_MISMATCH: "the request state does not match the operation's declared request-state mode",
    _R.INVALID_CAPABILITIES: "client capabilities must be a JSON object of capability objects",
    _R.INVALID_INPUT_REQUEST_PARAMS: "the params do not fit the input request's method",
    _R.DECLARATION_MISMATCH: "the params ask for another input request type than the declaration",
    _R.INVALID_FORM_SCHEMA: "a form schema must be a flat object of primitive properties",
    _R.SECRET_BEARING_FIELD: "form mode must not ask for secrets; use URL mode for them",
    _R.INVALID_URL: "an elicitation URL must be an absolute ASCII http(s) URL with a host",
    _R.INSECURE_URL: "an elicitation URL must use HTTPS (plain HTTP only to a loopback host in development)",
    _R.URL_USERINFO: "an elicitation URL must not carry a user name or password",
    _R.URL_QUERY_OR_FRAGMENT: "an elicitation URL must not carry a query or fragment; put an opaque handle in the path",
    _R.WEAK_HANDLE: "an opaque URL handle needs at least 128 bits from a CSPRNG, as base64url",
    _R.EMPTY_INPUT_REQUIRED_RESULT: "an input-required result needs at least one input request or a request state",
    _R.INVALID_INPUT_REQUEST_KEY: "an input request key must be a non-empty JSON string",
    _R.DUPLICATE_INPUT_REQUEST_KEY: "input request keys must be unique within one result",
    _R.INVALID_APPLICATION_STATE: "application request state must be a non-empty string of Unicode scalar values",
    _R.APPLICATION_STATE_TOO_LARGE: "application request state must be at most 65,536 UTF-8 bytes",
    _R.SEALED_STATE_MISMATCH: "a sealed state token goes with framework state, and only with it",
    _R.INVALID_INPUT_RESPONSE: "an input response must be an elicitation, sampling or roots result",
    _R.DUPLICATE_INPUT_RESPONSE_KEY: "input response keys must be unique",
    _R.CONVERSION_FAILED: "the input response does not convert to the requested type",
    _R.UNSUPPORTED_TARGET_TYPE: "typed lookup converts only to str, bool, Decimal, int, list[str], dict or JSON types",
    _R.INVALID_CONTENT: "a result holds an invalid content item",
    _R.TOO_MANY_COMPLETION_VALUES: "a completion result holds at most 100 values",
    _R.INVALID_CACHE_HINT: "a cache hint needs an integer ttlMs >= 0",
    _R.INVALID_REQUEST_CONTEXT: "the request context is inconsistent",
}


class McpModelError(ValueError):
    """A refused MCP model value.

    ``reason`` is one of a closed set. ``subject`` names what was refused (a tool name, a form field, a key)
    when the caller supplied one that is a short plain identifier; anything else is dropped, since it may be
    attacker input or a secret. ``detail`` is a fixed phrase from this package, never input. The message is
    built only from these three.
    """

    __slots__ = ("detail", "reason", "subject")

    def __init__(self, reason: McpModelErrorReason, subject: object = None, detail: str | None = None) -> None:
        self.reason = reason
        self.subject = safe_subject(subject)
        self.detail = detail
        about = f" ({self.subject!r})" if self.subject is not None else ""
        extra = f" [{detail}]" if detail else ""
        super().__init__(f"{reason.value}{about}: {reason.description}{extra}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), (self.reason, self.subject, self.detail))


class RegistrationError(McpModelError):
    """A tool, prompt, resource, template or completion registration (or an emission against it) was refused."""

    __slots__ = ()


class ArgumentsError(McpModelError):
    """A client's operation arguments do not fit the registration (for example, a missing required prompt
    argument)."""

    __slots__ = ()


class CapabilitiesError(McpModelError):
    """A client-capabilities object was malformed."""

    __slots__ = ()


class InputRequestError(McpModelError):
    """An input request (or its declaration, form schema or URL) was refused."""

    __slots__ = ()


class FormPolicyViolation(InputRequestError):
    """A form field looks secret-bearing under the form-schema policy.

    ``concept`` is the :class:`~soklet_core.mcp.model.form_policy.SecretConcept` value that matched and ``where`` the
    part of the property that matched it (``name``, ``title``, ``description`` or ``format``).
    """

    __slots__ = ("concept", "where")

    def __init__(self, field: object, concept: str, where: str) -> None:
        self.concept = concept
        self.where = where
        super().__init__(McpModelErrorReason.SECRET_BEARING_FIELD, field, f"{concept} in {where}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), (self.subject, self.concept, self.where))


class InputRequiredResultError(McpModelError):
    """An input-required result broke a builder rule (emptiness, keys, state)."""

    __slots__ = ()


class InputResponseError(McpModelError):
    """An input response was outside the protocol union, or a typed lookup could not convert it."""

    __slots__ = ()


class ResultError(McpModelError):
    """A complete result (tool, prompt, resource or completion) was malformed."""

    __slots__ = ()


class RequestContextError(McpModelError):
    """A request context was built inconsistently (for example, state of an undeclared mode)."""

    __slots__ = ()
