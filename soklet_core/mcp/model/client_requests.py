"""Input-request declarations and the input requests an operation emits.

An operation *declares* every client request it might emit (:class:`InputRequestDeclaration`, usually by one
of its four named factories) and then *emits* keyed :class:`InputRequest` values inside an ``input_required``
result::

    FORM = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
    request = InputRequest.from_declaration(FORM, {
        "message": "Approve catalog access?",
        "mode": "form",
        "requestedSchema": {"type": "object", "properties": {}},
    })
    request.to_wire()   # {"method":"elicitation/create","params":{...}}

``REQUIRED`` capabilities are checked after admission and before the handler runs, on every call; ``CONDITIONAL``
ones only when the request is emitted. The values in ``inputRequests`` are embedded client operations: never
standalone JSON-RPC requests.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from soklet_core.json import JsonArray, JsonNumber, JsonObject, JsonString, JsonValue, PythonJson

from ._wire import Members, to_object
from .capabilities import ClientCapabilities
from .client_results import matches_input_response
from .errors import InputRequestError, McpModelErrorReason
from .form_policy import DEFAULT_FORM_POLICY, FormSchemaPolicy, check_form_schema
from .methods import ELICITATION_CREATE, ROOTS_LIST, SAMPLING_CREATE_MESSAGE
from .url_policy import check_elicitation_url

__all__ = [
    "InputRequest",
    "InputRequestDeclaration",
    "InputRequestType",
    "InputRequirement",
]


class InputRequirement(enum.Enum):
    """When a declaration's client capability is checked.

    ``REQUIRED``: after admission and before execution, on every call (a missing capability is ``-32021`` and the
    handler never runs). ``CONDITIONAL``: only if the handler emits a request of this declaration.
    """

    REQUIRED = "required"
    CONDITIONAL = "conditional"


class InputRequestType(enum.Enum):
    """The kinds of client request an operation may emit, with their JSON-RPC method."""

    ELICITATION_FORM = "elicitation-form"
    ELICITATION_URL = "elicitation-url"
    SAMPLING = "sampling"
    ROOTS_LIST = "roots-list"

    @property
    def json_rpc_method(self) -> str:
        """``elicitation/create``, ``sampling/createMessage`` or ``roots/list``."""
        return _METHODS[self]

    @property
    def capabilities(self) -> ClientCapabilities:
        """The client capability a request of this type needs."""
        return _CAPABILITIES[self]


_METHODS: Final = {
    InputRequestType.ELICITATION_FORM: ELICITATION_CREATE,
    InputRequestType.ELICITATION_URL: ELICITATION_CREATE,
    InputRequestType.SAMPLING: SAMPLING_CREATE_MESSAGE,
    InputRequestType.ROOTS_LIST: ROOTS_LIST,
}
_CAPABILITIES: Final = {
    InputRequestType.ELICITATION_FORM: ClientCapabilities.from_mapping({"elicitation": {"form": {}}}),
    InputRequestType.ELICITATION_URL: ClientCapabilities.from_mapping({"elicitation": {"url": {}}}),
    InputRequestType.SAMPLING: ClientCapabilities.from_mapping({"sampling": {}}),
    InputRequestType.ROOTS_LIST: ClientCapabilities.from_mapping({"roots": {}}),
}


@dataclass(frozen=True, slots=True)
class InputRequestDeclaration:
    """One client request an operation may emit, and when its capability is checked.

    ``InputRequestDeclaration(InputRequestType.SAMPLING, InputRequirement.CONDITIONAL)``, or by the spec's four
    named factories :meth:`from_elicitation_form`, :meth:`from_elicitation_url`, :meth:`from_sampling` and
    :meth:`from_roots_list`. A final immutable value: equal declarations (same type and requirement) are
    interchangeable. Declarations are not an escape hatch for arbitrary client methods.
    """

    input_request_type: InputRequestType
    requirement: InputRequirement

    def __post_init__(self) -> None:
        if not isinstance(self.input_request_type, InputRequestType):
            raise TypeError("input_request_type must be an InputRequestType")
        if not isinstance(self.requirement, InputRequirement):
            raise TypeError("requirement must be an InputRequirement")

    @classmethod
    def from_elicitation_form(cls, requirement: InputRequirement) -> InputRequestDeclaration:
        """Form-mode ``elicitation/create``; needs ``{"elicitation":{"form":{}}}`` (``{"elicitation":{}}`` also
        satisfies it)."""
        return cls(InputRequestType.ELICITATION_FORM, requirement)

    @classmethod
    def from_elicitation_url(cls, requirement: InputRequirement) -> InputRequestDeclaration:
        """URL-mode ``elicitation/create``; needs ``{"elicitation":{"url":{}}}``."""
        return cls(InputRequestType.ELICITATION_URL, requirement)

    @classmethod
    def from_sampling(cls, requirement: InputRequirement) -> InputRequestDeclaration:
        """``sampling/createMessage`` (deprecated in the protocol but valid); needs ``{"sampling":{}}``."""
        return cls(InputRequestType.SAMPLING, requirement)

    @classmethod
    def from_roots_list(cls, requirement: InputRequirement) -> InputRequestDeclaration:
        """``roots/list`` (deprecated in the protocol but valid); needs ``{"roots":{}}``."""
        return cls(InputRequestType.ROOTS_LIST, requirement)

    @property
    def json_rpc_method(self) -> str:
        """The embedded request's method: ``elicitation/create``, ``sampling/createMessage`` or ``roots/list``."""
        return self.input_request_type.json_rpc_method

    @property
    def capabilities(self) -> ClientCapabilities:
        """The client capability this declaration needs (see :class:`InputRequestType`)."""
        return self.input_request_type.capabilities

    def __repr__(self) -> str:
        return f"InputRequestDeclaration({self.input_request_type.value}, {self.requirement.value})"


def _params_object(params: JsonValue | Mapping[str, Any] | None) -> JsonObject | None:
    if params is None or isinstance(params, JsonObject):
        return params
    if isinstance(params, JsonValue):
        raise InputRequestError(McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS, detail="params must be an object")
    return JsonObject.from_mapping(params)


def _invalid(detail: str) -> InputRequestError:
    return InputRequestError(McpModelErrorReason.INVALID_INPUT_REQUEST_PARAMS, detail=detail)


def _check_elicitation(
    declaration: InputRequestDeclaration, params: JsonObject, policy: FormSchemaPolicy, development: bool
) -> None:
    mode = params.get("mode")
    if mode is not None and not isinstance(mode, JsonString):
        raise _invalid("mode must be a string")
    mode_text = "form" if mode is None else mode.value
    wanted = "form" if declaration.input_request_type is InputRequestType.ELICITATION_FORM else "url"
    if mode_text not in ("form", "url"):
        raise _invalid("mode must be form or url")
    if mode_text != wanted:
        raise InputRequestError(McpModelErrorReason.DECLARATION_MISMATCH, detail=f"declared {wanted} mode")
    if not isinstance(params.get("message"), JsonString):
        raise _invalid("message must be a string")
    if wanted == "form":
        if "url" in params:
            raise _invalid("form mode carries no url")
        if "requestedSchema" not in params:
            raise _invalid("form mode needs requestedSchema")
        check_form_schema(params["requestedSchema"], policy)
    else:
        url = params.get("url")
        if not isinstance(url, JsonString):
            raise _invalid("url mode needs a url string")
        if "requestedSchema" in params:
            raise _invalid("url mode carries no requestedSchema")
        check_elicitation_url(url.value, development=development)


def _check_sampling(params: JsonObject) -> None:
    messages, max_tokens = params.get("messages"), params.get("maxTokens")
    if not isinstance(messages, JsonArray) or not messages:
        raise _invalid("messages must be a non-empty array")
    for message in messages:
        if not isinstance(message, JsonObject):
            raise _invalid("each message must be an object")
        role, content = message.get("role"), message.get("content")
        if not (isinstance(role, JsonString) and role.value in ("user", "assistant")):
            raise _invalid("message role must be user or assistant")
        blocks = content if isinstance(content, JsonArray) else (content,)
        if not blocks or not all(isinstance(b, JsonObject) and isinstance(b.get("type"), JsonString) for b in blocks):
            raise _invalid("message content must be a content block or a non-empty array of them")
    if not (
        isinstance(max_tokens, JsonNumber)
        and max_tokens.value >= 1
        and max_tokens.value == max_tokens.value.to_integral_value()
    ):
        raise _invalid("maxTokens must be a positive integer")
    include = params.get("includeContext")
    if include is not None and not (
        isinstance(include, JsonString) and include.value in ("none", "thisServer", "allServers")
    ):
        raise _invalid("includeContext must be none, thisServer or allServers")


def _extra_capabilities(kind: InputRequestType, params: JsonObject | None) -> ClientCapabilities | None:
    # The wire forbids sampling tools unless the client declared sampling.tools, and a context other than
    # "none" unless it declared sampling.context: such params need more than the declaration's {"sampling":{}}.
    if kind is not InputRequestType.SAMPLING or params is None:
        return None
    sampling: dict[str, PythonJson] = {}
    if "tools" in params or "toolChoice" in params:
        sampling["tools"] = {}
    include = params.get("includeContext")
    if isinstance(include, JsonString) and include.value != "none":
        sampling["context"] = {}
    return ClientCapabilities.from_mapping({"sampling": sampling}) if sampling else None


@dataclass(frozen=True, slots=True, init=False)
class InputRequest:
    """One embedded client request of an ``input_required`` result: a declaration and its params.

    ``InputRequest(declaration, params)`` validates the params against the declaration (the spec's
    :meth:`from_declaration` and the helpers ``form_request`` / ``url_request`` of
    :mod:`soklet_core.mcp.model.elicitation` build one the same way). A final immutable value; ``params`` is kept
    exactly as given, ``None`` only for a ``roots/list`` request without params; ``capabilities`` is what the
    client must have declared for it.
    """

    declaration: InputRequestDeclaration
    params: JsonObject | None
    capabilities: ClientCapabilities

    # Written by hand rather than generated: params come in as a mapping or JSON and are kept as a JsonObject,
    # the form policy and development flag steer validation without being kept, and capabilities are derived.
    def __init__(
        self,
        declaration: InputRequestDeclaration,
        params: JsonValue | Mapping[str, Any] | None = None,
        *,
        form_policy: FormSchemaPolicy = DEFAULT_FORM_POLICY,
        development: bool = False,
    ) -> None:
        """A request of ``declaration`` with ``params`` (a ``JsonObject`` or plain mapping), validated.

        * form elicitation: ``mode`` absent or ``"form"``, a string ``message``, and a ``requestedSchema`` of the
          flat primitive shape that passes ``form_policy`` (secret-bearing fields are refused here, before the
          request exists);
        * URL elicitation: ``mode: "url"``, a string ``message``, and a ``url`` passing
          :func:`~soklet_core.mcp.model.url_policy.check_elicitation_url` (``development`` allows loopback HTTP);
        * sampling: a non-empty ``messages`` array and a positive integer ``maxTokens``;
        * roots/list: no params, or an object (normally ``{}`` or only ``_meta``).

        Raises :class:`InputRequestError` (``declaration-mismatch``, ``invalid-input-request-params``,
        ``invalid-form-schema``, the URL reasons) or :class:`FormPolicyViolation`.
        """
        if not isinstance(declaration, InputRequestDeclaration):
            raise TypeError("declaration must be an InputRequestDeclaration")
        body = _params_object(params)
        kind = declaration.input_request_type
        if kind is not InputRequestType.ROOTS_LIST and body is None:
            raise _invalid("params are required")
        if kind in (InputRequestType.ELICITATION_FORM, InputRequestType.ELICITATION_URL):
            assert body is not None
            _check_elicitation(declaration, body, form_policy, development)
        elif kind is InputRequestType.SAMPLING:
            assert body is not None
            _check_sampling(body)
        extra = _extra_capabilities(kind, body)
        needed = (
            declaration.capabilities if extra is None else ClientCapabilities.merged([declaration.capabilities, extra])
        )
        # The class is frozen, so its own constructor sets the fields underneath (as a generated one would).
        object.__setattr__(self, "declaration", declaration)
        object.__setattr__(self, "params", body)
        object.__setattr__(self, "capabilities", needed)

    @classmethod
    def from_declaration(
        cls,
        declaration: InputRequestDeclaration,
        params: JsonValue | Mapping[str, Any] | None = None,
        *,
        form_policy: FormSchemaPolicy = DEFAULT_FORM_POLICY,
        development: bool = False,
    ) -> InputRequest:
        """``InputRequest(declaration, params, ...)`` under the spec's name for the factory."""
        return cls(declaration, params, form_policy=form_policy, development=development)

    @property
    def json_rpc_method(self) -> str:
        """The embedded request's method."""
        return self.declaration.json_rpc_method

    def to_wire(self) -> JsonObject:
        """``{"method": …, "params": …}`` with no ``jsonrpc`` or ``id`` (``params`` omitted when ``None``)."""
        return to_object(self.wire_members())

    def wire_members(self) -> Members:
        """The members of :meth:`to_wire`, for a result that writes this request in its own encoding."""
        return [("method", self.json_rpc_method), ("params", self.params)]

    def matches_input_response(self, response: JsonValue) -> bool:
        """Whether ``response`` is in the protocol union for this request's method.

        This checks the protocol shape only (for elicitation: the action, content only with accept, and content
        values that are strings, exact numbers, booleans or arrays of strings). It does not enforce the requested
        form schema: the application still validates fields, values and lengths before acting.
        """
        return matches_input_response(response, self.json_rpc_method)

    def __repr__(self) -> str:
        return f"InputRequest({self.declaration!r})"
