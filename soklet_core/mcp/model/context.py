"""``RequestContext``: the one admitted request context that callbacks, the interceptor and the handler share.

The transport builds one per admitted request, after admission (identity and partition), capability checks and
state verification; the same instance then reaches every lifecycle callback, the handler interceptor and the
operation handler. On an initial request both state accessors are ``None``; on a retry only the accessor of the
operation's declared :class:`RequestStateMode` can be non-``None`` (construction refuses anything else).

:class:`InvocationFeatures` is what a running handler may do beyond returning: report progress and notice
cancellation. It is a protocol the transport implements; :data:`NO_INVOCATION_FEATURES` is the inert stand-in
for tests and for requests without a progress token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Final, Protocol, runtime_checkable

from soklet_core.json import JsonNumber, JsonObject, JsonString, JsonValue
from soklet_core.protection import RequestId

from .capabilities import ClientCapabilities
from .errors import McpModelErrorReason, RequestContextError
from .input_required_result import RequestStateMode, check_application_request_state
from .input_responses import InputResponses

__all__ = [
    "NO_INVOCATION_FEATURES",
    "Identity",
    "InvocationFeatures",
    "RequestContext",
    "RequestId",
]


@runtime_checkable
class InvocationFeatures(Protocol):
    """Per-invocation controls the transport offers a handler.

    ``report_progress`` must not block: the transport queues a ``notifications/progress`` frame on the request's
    SSE stream (and holds it back while an unmet CONDITIONAL capability keeps the response uncommitted). It is a
    no-op when the request carried no ``progressToken``. ``progress`` must increase from call to call.
    ``cancelled`` turns true when the client disconnects; long handlers should check it and stop cooperatively.
    """

    @property
    def progress_token(self) -> RequestId | None:
        """The request's ``_meta.progressToken``, or ``None``."""
        ...

    @property
    def cancelled(self) -> bool:
        """Whether the client has gone (the request is cancelled)."""
        ...

    def report_progress(
        self, progress: Decimal | int, *, total: Decimal | int | None = None, message: str | None = None
    ) -> None:
        """Queue one progress notification (no-op without a progress token)."""
        ...


class _NoInvocationFeatures:
    """Inert features: no progress token, never cancelled, progress discarded."""

    __slots__ = ()

    @property
    def progress_token(self) -> RequestId | None:
        return None

    @property
    def cancelled(self) -> bool:
        return False

    def report_progress(
        self, progress: Decimal | int, *, total: Decimal | int | None = None, message: str | None = None
    ) -> None:
        return None

    def __repr__(self) -> str:
        return "NO_INVOCATION_FEATURES"


#: Invocation features that do nothing (tests, or requests without a progress token).
NO_INVOCATION_FEATURES: Final[InvocationFeatures] = _NoInvocationFeatures()


@dataclass(frozen=True, slots=True)
class Identity:
    """Who admission says is calling. ``subject`` is ``None`` for an anonymous caller.

    Bind application state (URL handles, repository entries) to ``subject`` and to the context's partition.
    """

    subject: str | None = None

    def __post_init__(self) -> None:
        if self.subject is not None and (not isinstance(self.subject, str) or not self.subject):
            raise RequestContextError(McpModelErrorReason.INVALID_REQUEST_CONTEXT, detail="subject")

    @classmethod
    def anonymous(cls) -> Identity:
        """The anonymous caller."""
        return _ANONYMOUS

    @property
    def is_anonymous(self) -> bool:
        """Whether no subject was admitted."""
        return self.subject is None


_ANONYMOUS: Final = Identity()


def _refuse(detail: str) -> RequestContextError:
    return RequestContextError(McpModelErrorReason.INVALID_REQUEST_CONTEXT, detail=detail)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RequestContext:
    """The admitted context of one ``tools/call``, ``prompts/get``, ``resources/read`` or ``completion/complete``.

    Fields:

    * ``identity`` and ``partition``: what admission mapped the request to (the partition is part of the
      framework-state binding);
    * ``client_capabilities``, ``protocol_version``, ``request_id``, ``method``, ``meta`` (the request's
      ``params._meta``, exact) and ``client_info`` (``None`` if not sent): from this request only;
    * ``operation_name``: the tool or prompt name, or the resource URI;
    * ``input_responses``: the verified responses of a retry (empty on an initial request);
    * ``request_state_mode`` with ``framework_request_state`` / ``application_request_state``: the verified state
      of a retry; only the accessor of the declared mode can be non-``None``;
    * ``invocation``: progress and cancellation (:class:`InvocationFeatures`).

    Equality is identity: the same admitted instance reaches every callback.
    """

    identity: Identity
    partition: str
    client_capabilities: ClientCapabilities
    protocol_version: str
    request_id: RequestId
    method: str
    operation_name: str
    input_responses: InputResponses = field(default_factory=InputResponses.empty, repr=False)
    request_state_mode: RequestStateMode = RequestStateMode.NONE
    framework_request_state: JsonValue | None = field(default=None, repr=False)
    application_request_state: str | None = field(default=None, repr=False)
    meta: JsonObject = field(default_factory=JsonObject.empty_instance, repr=False)
    client_info: JsonObject | None = field(default=None, repr=False)
    invocation: InvocationFeatures = field(default=NO_INVOCATION_FEATURES, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.identity, Identity):
            raise _refuse("identity")
        if not isinstance(self.partition, str) or not self.partition:
            raise _refuse("partition")
        if not isinstance(self.client_capabilities, ClientCapabilities):
            raise _refuse("client_capabilities")
        if not isinstance(self.request_id, JsonString | JsonNumber):
            raise _refuse("request_id")
        if not isinstance(self.input_responses, InputResponses):
            raise _refuse("input_responses")
        if not isinstance(self.request_state_mode, RequestStateMode):
            raise _refuse("request_state_mode")
        if not isinstance(self.meta, JsonObject) or not (
            self.client_info is None or isinstance(self.client_info, JsonObject)
        ):
            raise _refuse("meta")
        if self.framework_request_state is not None and (
            self.request_state_mode is not RequestStateMode.FRAMEWORK_PROTECTED
            or not isinstance(self.framework_request_state, JsonValue)
        ):
            raise RequestContextError(McpModelErrorReason.STATE_MODE_MISMATCH, detail="framework state")
        if self.application_request_state is not None:
            if self.request_state_mode is not RequestStateMode.APPLICATION_PROTECTED:
                raise RequestContextError(McpModelErrorReason.STATE_MODE_MISMATCH, detail="application state")
            check_application_request_state(self.application_request_state)

    @property
    def is_retry(self) -> bool:
        """Whether the request carried input responses or a verified state."""
        return bool(self.input_responses) or (
            self.framework_request_state is not None or self.application_request_state is not None
        )
