"""The MCP 2026-07-28 HTTP transport (ASGI), its hardened uvicorn runner, Host/Origin checks and the access log."""

from soklet_core.mcp.server.http._runner import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEADER_TIMEOUT_SECONDS,
    DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEAD_BYTES,
    DEFAULT_SHUTDOWN_GRACE_SECONDS,
    HttpLimits,
    limited_uvicorn_config,
    run_together,
)
from soklet_core.mcp.server.http._serving import ServesAsgi, uvicorn_config, uvicorn_server_class
from soklet_core.mcp.server.http._transport import (
    LOCAL_HOSTS,
    McpAsgiApp,
    parse_authority,
    parse_origin,
)

__all__ = [
    "DEFAULT_BODY_TIMEOUT_SECONDS",
    "DEFAULT_HEADER_TIMEOUT_SECONDS",
    "DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_HEAD_BYTES",
    "DEFAULT_SHUTDOWN_GRACE_SECONDS",
    "LOCAL_HOSTS",
    "HttpLimits",
    "McpAsgiApp",
    "ServesAsgi",
    "limited_uvicorn_config",
    "parse_authority",
    "parse_origin",
    "run_together",
    "uvicorn_config",
    "uvicorn_server_class",
]
