"""The transport-neutral engine: a :class:`Call` in, an :class:`Outcome` out (:meth:`Engine.call`); the method table
(:func:`routing_member`, :meth:`Engine.resolve`), the state wrapper, emission and sealing."""

from soklet_core.mcp.server._jsonrpc import DispatchResult, McpError
from soklet_core.mcp.server.admission import (
    ANONYMOUS_PARTITION,
    Admission,
    AdmissionPolicy,
    AdmissionRefused,
    AdmissionRefusedReason,
    AdmissionRequest,
    AnonymousAdmission,
    BearerTokenAdmission,
    BearerTokenEntry,
)
from soklet_core.mcp.server.engine._call import (
    Call,
    CanonicalParams,
    Complete,
    DigestSource,
    EncodedResult,
    InputRequired,
    Outcome,
    ProgressChannel,
    RefusalKind,
    Refused,
    ResultValue,
    TaskCreated,
)
from soklet_core.mcp.server.engine._engine import Engine, Interceptor, LifecycleCallback, check_log_level
from soklet_core.mcp.server.engine._methods import METHODS, Target, routing_member, routing_value
from soklet_core.mcp.server.engine._state import LARGE_BODY_WAIT_SECONDS, MAX_CONCURRENT_LARGE_BODIES

__all__ = [
    "ANONYMOUS_PARTITION",
    "LARGE_BODY_WAIT_SECONDS",
    "MAX_CONCURRENT_LARGE_BODIES",
    "METHODS",
    "Admission",
    "AdmissionPolicy",
    "AdmissionRefused",
    "AdmissionRefusedReason",
    "AdmissionRequest",
    "AnonymousAdmission",
    "BearerTokenAdmission",
    "BearerTokenEntry",
    "Call",
    "CanonicalParams",
    "Complete",
    "DigestSource",
    "DispatchResult",
    "EncodedResult",
    "Engine",
    "InputRequired",
    "Interceptor",
    "LifecycleCallback",
    "McpError",
    "Outcome",
    "ProgressChannel",
    "RefusalKind",
    "Refused",
    "ResultValue",
    "Target",
    "TaskCreated",
    "check_log_level",
    "routing_member",
    "routing_value",
]
