"""The server machinery: the dispatcher pipeline, the JSON-RPC wire, admission, the ASGI transport, the 2025-era
engine and its sessions, durable application handles, durable tasks, the stdio transport, the hardened uvicorn
runner, the admin listener, live keyrings and metrics.

An application usually needs only :class:`McpServer` (also exported by :mod:`soklet_core.mcp`); the rest is here
for embedding and for tests.
"""

from .admin import (
    MAX_ADMIN_BODY_BYTES,
    AdminApp,
    AdminTokenError,
    AdminTokens,
    read_admin_tokens,
)
from .admission import (
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
from .app import (
    DEFAULT_ENDPOINT_PATH,
    McpServer,
)
from .dispatcher import (
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
from .handles import (
    DEFAULT_HANDLE_LIFETIME,
    DEFAULT_HANDLE_TENANT,
    DEFAULT_PURGE_EVERY,
    HANDLE_BYTES,
    HANDLE_REJECTED_REASON,
    MAX_HANDLE_LIFETIME,
    HandleRepository,
    handle_rejected,
)
from .http_runner import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEADER_TIMEOUT_SECONDS,
    DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEAD_BYTES,
    DEFAULT_SHUTDOWN_GRACE_SECONDS,
    HttpLimits,
    limited_uvicorn_config,
    run_together,
    uvicorn_config,
    uvicorn_server_class,
)
from .jsonrpc import (
    McpError,
)
from .legacy import (
    DEFAULT_INPUT_TIMEOUT_SECONDS,
    LEGACY_PROTOCOL_VERSIONS,
    ClientChannel,
    LegacyProtocol,
    LegacyRequest,
    ProtocolEras,
    is_legacy_message,
    modern_request,
)
from .live_keyring import (
    KeyringFileWatcher,
    LiveKeyring,
    LiveKeyringError,
    LiveKeyringRefusal,
)
from .readiness import NotReady, Readiness
from .sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_SECONDS,
    LegacySession,
    SessionLimitReason,
    SessionsFull,
    SessionTable,
)
from .stdio import StdioTransport, open_pipe_streams
from .tasks import (
    DEFAULT_POLL_INTERVAL_MS,
    DEFAULT_STEP_TIMEOUT_SECONDS,
    DEFAULT_TASK_TTL_MS,
    MAX_LIVE_TASKS_PER_CALLER,
    MAX_STORED_TASK_BYTES_PER_PARTITION,
    MAX_STORED_TASKS_PER_PARTITION,
    TaskManager,
)
from .transport import (
    LOCAL_HOSTS,
    McpAsgiApp,
    parse_authority,
    parse_origin,
)

__all__ = [
    "ANONYMOUS_PARTITION",
    "DEFAULT_BODY_TIMEOUT_SECONDS",
    "DEFAULT_ENDPOINT_PATH",
    "DEFAULT_HANDLE_LIFETIME",
    "DEFAULT_HANDLE_TENANT",
    "DEFAULT_HEADER_TIMEOUT_SECONDS",
    "DEFAULT_INPUT_TIMEOUT_SECONDS",
    "DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_HEAD_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_POLL_INTERVAL_MS",
    "DEFAULT_PURGE_EVERY",
    "DEFAULT_SESSION_IDLE_SECONDS",
    "DEFAULT_SHUTDOWN_GRACE_SECONDS",
    "DEFAULT_STEP_TIMEOUT_SECONDS",
    "DEFAULT_TASK_TTL_MS",
    "HANDLE_BYTES",
    "HANDLE_REJECTED_REASON",
    "LEGACY_PROTOCOL_VERSIONS",
    "LOCAL_HOSTS",
    "MAX_ADMIN_BODY_BYTES",
    "MAX_HANDLE_LIFETIME",
    "MAX_LIVE_TASKS_PER_CALLER",
    "MAX_STORED_TASKS_PER_PARTITION",
    "MAX_STORED_TASK_BYTES_PER_PARTITION",
    "PROTOCOL_VERSION_META_KEY",
    "SERVER_INFO_META_KEY",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "AdminApp",
    "AdminTokenError",
    "AdminTokens",
    "Admission",
    "AdmissionPolicy",
    "AdmissionRefused",
    "AdmissionRefusedReason",
    "AdmissionRequest",
    "AnonymousAdmission",
    "BearerTokenAdmission",
    "BearerTokenEntry",
    "ClientChannel",
    "DispatchResult",
    "Dispatcher",
    "HandleRepository",
    "HttpLimits",
    "HttpRequest",
    "Interceptor",
    "KeyringFileWatcher",
    "LegacyProtocol",
    "LegacyRequest",
    "LegacySession",
    "LifecycleCallback",
    "LiveKeyring",
    "LiveKeyringError",
    "LiveKeyringRefusal",
    "McpAsgiApp",
    "McpError",
    "McpServer",
    "NotReady",
    "ProgressChannel",
    "ProtocolEras",
    "Readiness",
    "SessionLimitReason",
    "SessionTable",
    "SessionsFull",
    "StdioTransport",
    "TaskManager",
    "handle_rejected",
    "is_legacy_message",
    "limited_uvicorn_config",
    "modern_request",
    "open_pipe_streams",
    "parse_authority",
    "parse_origin",
    "read_admin_tokens",
    "run_together",
    "uvicorn_config",
    "uvicorn_server_class",
]
