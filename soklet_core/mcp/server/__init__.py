"""The server machinery, in rooms: :mod:`.engine` (the transport-neutral engine and the JSON-RPC wire),
:mod:`.http` (the 2026-07-28 HTTP transport and its uvicorn runner), :mod:`.legacy` (the 2025-era session engine),
:mod:`.stdio`, :mod:`.durable` (handles and tasks) and :mod:`.ops` (admin API, live keyrings, readiness, metrics).

This package exports what an application needs to run a server (the server, its options, admission); each room
exports its own names for embedding and for tests, and the modules inside a room are internal (underscored).
``_options`` (the option groups and every option's default and bounds) sits below the rooms with ``_jsonrpc`` and
``_admission``.
"""

from soklet_core.mcp.server._admission import (
    Admission,
    AdmissionPolicy,
    AnonymousAdmission,
    BearerTokenAdmission,
    BearerTokenEntry,
)
from soklet_core.mcp.server._jsonrpc import McpError
from soklet_core.mcp.server._options import (
    HttpLimits,
    HttpOptions,
    ProtocolEras,
    ProtocolOptions,
    ServerOptions,
    SessionOptions,
    TaskOptions,
)
from soklet_core.mcp.server._serve import run, serve
from soklet_core.mcp.server._serve_config import AdminListener, KeyringFile, KeyringFromStore, ServeConfig, ServeError
from soklet_core.mcp.server._server import DEFAULT_ENDPOINT_PATH, McpServer
from soklet_core.mcp.server.durable import HandleRejected, HandleRepository, TaskManager

__all__ = [
    "DEFAULT_ENDPOINT_PATH",
    "AdminListener",
    "Admission",
    "AdmissionPolicy",
    "AnonymousAdmission",
    "BearerTokenAdmission",
    "BearerTokenEntry",
    "HandleRejected",
    "HandleRepository",
    "HttpLimits",
    "HttpOptions",
    "KeyringFile",
    "KeyringFromStore",
    "McpError",
    "McpServer",
    "ProtocolEras",
    "ProtocolOptions",
    "ServeConfig",
    "ServeError",
    "ServerOptions",
    "SessionOptions",
    "TaskManager",
    "TaskOptions",
    "run",
    "serve",
]
