"""The refusal types of the MCP model layer and their bounded reasons.

Every refusal in :mod:`soklet_core.mcp.model` is a :class:`McpModelError` (a ``ValueError``) carrying one
:class:`McpModelErrorReason` from a closed set; subclasses group the reasons by area so callers can catch one
area at a time. Messages are built from the reason and, at most, a *subject*: a name the application itself
chose (a tool name, a form field, a response key) and only when it is a short plain identifier. Values a client
sent — response contents, unexpected keys, URLs, state — never appear in a message.
"""

from __future__ import annotations

import re
from typing import Final

from soklet_core.errors import ErrorReason, SokletError

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


class McpModelErrorReason(ErrorReason):
    """Why a model value was refused. The set is closed: callers may switch on it."""

    # registrations
    INVALID_NAME = "invalid-name", "a name must be 1 to 128 characters from A-Z a-z 0-9 _ . -"
    MISSING_DESCRIPTION = "missing-description", "a description is required and must not be blank"
    INVALID_INPUT_SCHEMA = "invalid-input-schema", 'a schema must be a JSON object whose type is "object"'
    DUPLICATE_REGISTRATION = "duplicate-registration", "this name or URI is already registered"
    DUPLICATE_DECLARATION = "duplicate-declaration", "an operation declares the same input request type twice"
    INVALID_URI = "invalid-uri", "a resource URI must be an absolute URI without spaces or control characters"
    INVALID_URI_TEMPLATE = (
        "invalid-uri-template",
        "a URI template must use {name} or {+name} expressions with distinct variable names",
    )
    INVALID_PROMPT_ARGUMENTS = (
        "invalid-prompt-arguments",
        "prompt arguments must be strings, declared, and include every required one",
    )
    UNKNOWN_COMPLETION_TARGET = (
        "unknown-completion-target",
        "the completion names no registered prompt argument or template variable",
    )
    INVALID_HANDLER = "invalid-handler", "a handler must be callable"
    INVALID_FIELD = "invalid-field", "a registration field has the wrong type or value"
    INVALID_HEADER_PARAMETER = (
        "invalid-header-parameter",
        "x-mcp-header must be a unique header-name token on a primitive top-level property",
    )
    UNDECLARED_INPUT_REQUEST = "undeclared-input-request", "the operation emitted an input request it did not declare"
    STATE_MODE_MISMATCH = (
        "state-mode-mismatch",
        "the request state does not match the operation's declared request-state mode",
    )
    # client capabilities
    INVALID_CAPABILITIES = "invalid-capabilities", "client capabilities must be a JSON object of capability objects"
    # input requests
    INVALID_INPUT_REQUEST_PARAMS = "invalid-input-request-params", "the params do not fit the input request's method"
    DECLARATION_MISMATCH = "declaration-mismatch", "the params ask for another input request type than the declaration"
    INVALID_FORM_SCHEMA = "invalid-form-schema", "a form schema must be a flat object of primitive properties"
    SECRET_BEARING_FIELD = "secret-bearing-field", "form mode must not ask for secrets; use URL mode for them"
    INVALID_URL = "invalid-url", "an elicitation URL must be an absolute ASCII http(s) URL with a host"
    INSECURE_URL = (
        "insecure-url",
        "an elicitation URL must use HTTPS (plain HTTP only to a loopback host in development)",
    )
    URL_USERINFO = "url-userinfo", "an elicitation URL must not carry a user name or password"
    URL_QUERY_OR_FRAGMENT = (
        "url-query-or-fragment",
        "an elicitation URL must not carry a query or fragment; put an opaque handle in the path",
    )
    WEAK_HANDLE = "weak-handle", "an opaque URL handle needs at least 128 bits from a CSPRNG, as base64url"
    # input-required results
    EMPTY_INPUT_REQUIRED_RESULT = (
        "empty-input-required-result",
        "an input-required result needs at least one input request or a request state",
    )
    INVALID_INPUT_REQUEST_KEY = "invalid-input-request-key", "an input request key must be a non-empty JSON string"
    DUPLICATE_INPUT_REQUEST_KEY = "duplicate-input-request-key", "input request keys must be unique within one result"
    INVALID_APPLICATION_STATE = (
        "invalid-application-state",
        "application request state must be a non-empty string of Unicode scalar values",
    )
    APPLICATION_STATE_TOO_LARGE = (
        "application-state-too-large",
        "application request state must be at most 65,536 UTF-8 bytes",
    )
    SEALED_STATE_MISMATCH = "sealed-state-mismatch", "a sealed state token goes with framework state, and only with it"
    TWO_REQUEST_STATES = (
        "two-request-states",
        "an input-required result carries framework or application state, not both",
    )
    # input responses
    INVALID_INPUT_RESPONSE = (
        "invalid-input-response",
        "an input response must be an elicitation, sampling or roots result",
    )
    DUPLICATE_INPUT_RESPONSE_KEY = "duplicate-input-response-key", "input response keys must be unique"
    CONVERSION_FAILED = "conversion-failed", "the input response does not convert to the requested type"
    UNSUPPORTED_TARGET_TYPE = (
        "unsupported-target-type",
        "typed lookup converts only to str, bool, Decimal, int, list[str], dict or JSON types",
    )
    # complete results
    INVALID_CONTENT = "invalid-content", "a result holds an invalid content item"
    TOO_MANY_COMPLETION_VALUES = "too-many-completion-values", "a completion result holds at most 100 values"
    INVALID_CACHE_HINT = "invalid-cache-hint", "a cache hint needs an integer ttlMs >= 0"
    # request context
    INVALID_REQUEST_CONTEXT = "invalid-request-context", "the request context is inconsistent"


class McpModelError(SokletError, ValueError):
    """A refused MCP model value.

    ``reason`` is one of a closed set. ``subject`` names what was refused (a tool name, a form field, a key)
    when the caller supplied one that is a short plain identifier; anything else is dropped, since it may be
    attacker input or a secret. ``detail`` is a fixed phrase from this package, never input. The message is
    built only from these three.
    """

    __slots__ = ("detail", "subject")

    reason: McpModelErrorReason

    def __init__(self, reason: McpModelErrorReason, subject: object = None, detail: str | None = None) -> None:
        self.subject = safe_subject(subject)
        self.detail = detail
        about = f" ({self.subject!r})" if self.subject is not None else ""
        extra = f" [{detail}]" if detail else ""
        super().__init__(reason, f"{reason.value}{about}: {reason.description}{extra}")


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

    @property
    def field(self) -> str | None:
        """The form field's name as the message shows it (``None`` when it is not a plain identifier)."""
        return self.subject


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
