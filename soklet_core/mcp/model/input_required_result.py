"""``InputRequiredResult``: the ``input_required`` answer of a tool call, prompt get or resource read.

It holds keyed input requests, a request state, or both — never neither::

    InputRequiredResult({"approval": request}, framework_request_state=JsonValue.from_python({"phase": "waiting"}))

or, in the spec's builder vocabulary::

    InputRequiredResult.with_input_request("approval", request) \\
        .framework_request_state(JsonObject.builder().put("phase", "waiting-for-approval").build()) \\
        .build()

    InputRequiredResult.builder().application_request_state(handle).build()   # state only ("load shedding")

Keys are exact, application-assigned JSON member names, unique within one result. The builder's two state
setters are mutually exclusive and the last call wins. There are deliberately no cache fields: an
``input_required`` result is never cacheable.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from types import MappingProxyType
from typing import Any, Final

from soklet_core.json import JsonObject, JsonString, JsonValue

from ._wire import Members, encode_bytes, to_object
from .capabilities import ClientCapabilities
from .client_requests import InputRequest
from .errors import InputRequiredResultError, McpModelErrorReason

__all__ = [
    "INPUT_REQUIRED_RESULT_TYPE",
    "MAX_APPLICATION_REQUEST_STATE_BYTES",
    "InputRequiredResult",
    "InputRequiredResultBuilder",
    "RequestStateMode",
    "check_application_request_state",
]

#: The ``resultType`` of an input-required result.
INPUT_REQUIRED_RESULT_TYPE: Final = "input_required"
#: The largest APPLICATION_PROTECTED state, in UTF-8 bytes.
MAX_APPLICATION_REQUEST_STATE_BYTES: Final = 65_536


class RequestStateMode(enum.Enum):
    """How an operation's retry state is carried. Every input-capable operation declares exactly one.

    ``NONE`` (default): no state. ``APPLICATION_PROTECTED``: a non-empty opaque string the application protects,
    expires and validates; soklet only bounds it (65,536 UTF-8 bytes) and returns it untouched.
    ``FRAMEWORK_PROTECTED``: a JSON value soklet seals, authenticates, binds to the request and checks on retry.
    """

    NONE = "none"
    APPLICATION_PROTECTED = "application-protected"
    FRAMEWORK_PROTECTED = "framework-protected"


def check_application_request_state(state: object) -> str:
    """``state`` if it is a valid APPLICATION_PROTECTED state: a non-empty ``str`` of Unicode scalar values of at
    most 65,536 UTF-8 bytes. Raises :class:`InputRequiredResultError` otherwise (the message never holds it)."""
    if not isinstance(state, str) or not state:
        raise InputRequiredResultError(McpModelErrorReason.INVALID_APPLICATION_STATE)
    try:
        size = len(state.encode("utf-8"))
    except UnicodeEncodeError:
        raise InputRequiredResultError(McpModelErrorReason.INVALID_APPLICATION_STATE) from None
    if size > MAX_APPLICATION_REQUEST_STATE_BYTES:
        raise InputRequiredResultError(McpModelErrorReason.APPLICATION_STATE_TOO_LARGE)
    return state


def _check_input_request(key: object, request: object) -> None:
    """Refuse a request that is not an :class:`InputRequest` or a key that is not a non-empty JSON string."""
    if not isinstance(request, InputRequest):
        raise TypeError("request must be an InputRequest (see InputRequest.from_declaration)")
    if not isinstance(key, str) or not key:
        raise InputRequiredResultError(McpModelErrorReason.INVALID_INPUT_REQUEST_KEY)
    try:
        JsonString.from_value(key)
    except ValueError:
        raise InputRequiredResultError(McpModelErrorReason.INVALID_INPUT_REQUEST_KEY) from None


@dataclass(frozen=True, slots=True)
class InputRequiredResult:
    """An immutable ``input_required`` result.

    ``InputRequiredResult({"approval": request}, framework_request_state=state)``, or the spec's builder
    (:meth:`with_input_request`, :meth:`builder`). ``input_requests`` is kept as a read-only mapping in
    insertion order; at most one of ``framework_request_state`` and ``application_request_state`` is not
    ``None`` (``two-request-states`` otherwise), and a result with neither and no request is refused
    (``empty-input-required-result``).
    """

    input_requests: Mapping[str, InputRequest] = field(default_factory=dict)
    _: KW_ONLY
    framework_request_state: JsonValue | None = None
    application_request_state: str | None = None

    def __post_init__(self) -> None:
        requests = MappingProxyType(dict(self.input_requests))
        for key, request in requests.items():
            _check_input_request(key, request)
        framework, application = self.framework_request_state, self.application_request_state
        if framework is not None and not isinstance(framework, JsonValue):
            raise TypeError("framework_request_state must be a JsonValue (see JsonValue.from_python)")
        if application is not None:
            check_application_request_state(application)
            if framework is not None:
                raise InputRequiredResultError(McpModelErrorReason.TWO_REQUEST_STATES)
        elif not requests and framework is None:
            raise InputRequiredResultError(McpModelErrorReason.EMPTY_INPUT_REQUIRED_RESULT)
        object.__setattr__(self, "input_requests", requests)

    @classmethod
    def with_input_request(cls, key: str, request: InputRequest) -> InputRequiredResultBuilder:
        """A builder holding one keyed request; add more, set a state, then ``build()``."""
        return InputRequiredResultBuilder().with_input_request(key, request)

    @classmethod
    def builder(cls) -> InputRequiredResultBuilder:
        """An empty builder, e.g. for a state-only result."""
        return InputRequiredResultBuilder()

    @property
    def request_state_mode(self) -> RequestStateMode:
        """The mode of the state this result carries (``NONE`` when it carries none)."""
        if self.framework_request_state is not None:
            return RequestStateMode.FRAMEWORK_PROTECTED
        if self.application_request_state is not None:
            return RequestStateMode.APPLICATION_PROTECTED
        return RequestStateMode.NONE

    @property
    def required_capabilities(self) -> tuple[ClientCapabilities, ...]:
        """The capabilities of every emitted request, in key order (feed to ``ClientCapabilities.missing``)."""
        return tuple(request.capabilities for request in self.input_requests.values())

    def to_wire(self, sealed_request_state: str | None = None, *, meta: JsonObject | None = None) -> JsonObject:
        """The wire result: ``resultType``, then ``inputRequests`` (if any), ``requestState`` (if any), ``_meta``.

        An APPLICATION_PROTECTED state is written as given. A FRAMEWORK_PROTECTED state must first be sealed by
        the protection layer: pass the token as ``sealed_request_state``. Passing a token without framework
        state, or omitting it with framework state, raises ``sealed-state-mismatch``. No ``ttlMs`` or
        ``cacheScope`` is ever written.
        """
        return to_object([*self._members(sealed_request_state), ("_meta", meta)])

    def encode(self, sealed_request_state: str | None = None) -> bytes:
        """The wire result without ``_meta``, as compact UTF-8 JSON (``serialize(self.to_wire(…))``, encoded);
        ``sealed_request_state`` as in :meth:`to_wire`."""
        return encode_bytes(self._members(sealed_request_state))

    def _members(self, sealed_request_state: str | None) -> Members:
        if (sealed_request_state is not None) != (self.framework_request_state is not None):
            raise InputRequiredResultError(McpModelErrorReason.SEALED_STATE_MISMATCH)
        requests: Members | None = None
        if self.input_requests:
            requests = [(key, request.wire_members()) for key, request in self.input_requests.items()]
        state = sealed_request_state if sealed_request_state is not None else self.application_request_state
        return [("resultType", INPUT_REQUIRED_RESULT_TYPE), ("inputRequests", requests), ("requestState", state)]

    def __hash__(self) -> int:
        return hash((tuple(self.input_requests.items()), self.framework_request_state, self.application_request_state))

    def __repr__(self) -> str:
        return f"InputRequiredResult(keys={list(self.input_requests)!r}, state={self.request_state_mode.value})"


class InputRequiredResultBuilder:
    """Collects one :class:`InputRequiredResult`. Keys must be unique; the state setters are last-call-wins."""

    __slots__ = ("_application_state", "_framework_state", "_requests")

    def __init__(self) -> None:
        self._requests: dict[str, InputRequest] = {}
        self._framework_state: JsonValue | None = None
        self._application_state: str | None = None

    def with_input_request(self, key: str, request: InputRequest) -> InputRequiredResultBuilder:
        """Add ``request`` under ``key`` (a non-empty JSON string, new to this result)."""
        _check_input_request(key, request)
        if key in self._requests:
            raise InputRequiredResultError(McpModelErrorReason.DUPLICATE_INPUT_REQUEST_KEY, key)
        self._requests[key] = request
        return self

    def framework_request_state(self, state: Any) -> InputRequiredResultBuilder:
        """Set FRAMEWORK_PROTECTED state (any JSON value; plain Python data is converted). Clears any
        application state: the setters are exclusive and the last call wins."""
        self._framework_state = JsonValue.from_python(state)
        self._application_state = None
        return self

    def application_request_state(self, state: str) -> InputRequiredResultBuilder:
        """Set APPLICATION_PROTECTED state: a non-empty opaque string of at most 65,536 UTF-8 bytes. Clears any
        framework state: the setters are exclusive and the last call wins."""
        self._application_state = check_application_request_state(state)
        self._framework_state = None
        return self

    def build(self) -> InputRequiredResult:
        """The result; raises ``empty-input-required-result`` with neither a request nor a state."""
        return InputRequiredResult(
            self._requests,
            framework_request_state=self._framework_state,
            application_request_state=self._application_state,
        )
