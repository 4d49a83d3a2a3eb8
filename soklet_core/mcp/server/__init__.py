"""The server machinery, in rooms: :mod:`.engine` (the transport-neutral engine), :mod:`.http` (the 2026-07-28
HTTP transport and its uvicorn runner), :mod:`.legacy` (the 2025-era session engine), :mod:`.stdio`,
:mod:`.durable` (handles and tasks) and :mod:`.ops` (admin API, live keyrings, readiness, metrics).

This package exports what an application needs to run a server: :class:`McpServer` and its
:class:`ServerOptions`, or :func:`run` / :func:`serve` with a :class:`ServeConfig` for everything ``soklet serve``
runs; :class:`McpError`; :class:`BearerTokenAdmission`. Two public modules sit below the rooms:
:mod:`.options` (the option groups, every option's default and bounds) and :mod:`.admission` (the admission
policies). Each room exports its own names for embedding and for tests; the modules inside a room, and
``_jsonrpc``, ``_headers``, ``_server`` and ``_serve*`` here, are internal (underscored).
"""

from soklet_core.mcp.server._jsonrpc import McpError
from soklet_core.mcp.server._serve import run, serve
from soklet_core.mcp.server._serve_config import AdminListener, KeyringFile, KeyringFromStore, ServeConfig, ServeError
from soklet_core.mcp.server._server import McpServer
from soklet_core.mcp.server.admission import BearerTokenAdmission
from soklet_core.mcp.server.options import ServerOptions

__all__ = [
    "AdminListener",
    "BearerTokenAdmission",
    "KeyringFile",
    "KeyringFromStore",
    "McpError",
    "McpServer",
    "ServeConfig",
    "ServeError",
    "ServerOptions",
    "run",
    "serve",
]
