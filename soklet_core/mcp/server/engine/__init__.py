"""The transport-neutral engine: the method table, the state wrapper, emission and sealing."""

from soklet_core.mcp.server._admission import (
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
from soklet_core.mcp.server._jsonrpc import (
    McpError,
)
from soklet_core.mcp.server.engine._dispatcher import (
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    SUPPORTED_PROTOCOL_VERSIONS,
    Dispatcher,
    DispatchResult,
    HttpRequest,
    Interceptor,
    LifecycleCallback,
    ProgressChannel,
)

__all__ = [
    "ANONYMOUS_PARTITION",
    "PROTOCOL_VERSION_META_KEY",
    "SERVER_INFO_META_KEY",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "Admission",
    "AdmissionPolicy",
    "AdmissionRefused",
    "AdmissionRefusedReason",
    "AdmissionRequest",
    "AnonymousAdmission",
    "BearerTokenAdmission",
    "BearerTokenEntry",
    "DispatchResult",
    "Dispatcher",
    "HttpRequest",
    "Interceptor",
    "LifecycleCallback",
    "McpError",
    "ProgressChannel",
]
