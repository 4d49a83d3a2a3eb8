"""The server machinery, in rooms: :mod:`.engine` (the transport-neutral engine and the JSON-RPC wire),
:mod:`.http` (the 2026-07-28 HTTP transport and its uvicorn runner), :mod:`.legacy` (the 2025-era session engine),
:mod:`.stdio`, :mod:`.durable` (handles and tasks) and :mod:`.ops` (admin API, live keyrings, readiness, metrics).

This package exports what an application needs to run a server; each room exports its own names for embedding
and for tests, and the modules inside a room are internal (underscored).
"""

from soklet_core.mcp.server._admission import (
    Admission,
    AdmissionPolicy,
    AnonymousAdmission,
    BearerTokenAdmission,
    BearerTokenEntry,
)
from soklet_core.mcp.server._jsonrpc import McpError
from soklet_core.mcp.server._server import DEFAULT_ENDPOINT_PATH, McpServer
from soklet_core.mcp.server.durable import HandleRepository, TaskManager, handle_rejected
from soklet_core.mcp.server.http import HttpLimits
from soklet_core.mcp.server.legacy import ProtocolEras

__all__ = [
    "DEFAULT_ENDPOINT_PATH",
    "Admission",
    "AdmissionPolicy",
    "AnonymousAdmission",
    "BearerTokenAdmission",
    "BearerTokenEntry",
    "HandleRepository",
    "HttpLimits",
    "McpError",
    "McpServer",
    "ProtocolEras",
    "TaskManager",
    "handle_rejected",
]
