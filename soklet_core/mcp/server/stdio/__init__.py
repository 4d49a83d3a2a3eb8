"""The stdio transport: newline-delimited JSON-RPC on a pipe, both eras."""

from soklet_core.mcp.server.stdio._transport import (
    StdioTransport,
    open_pipe_streams,
)

__all__ = [
    "StdioTransport",
    "open_pipe_streams",
]
