"""The MCP protocol constants soklet speaks, and the defaults every layer shares: each written here once.

Every other module (the sealer, the engine, the HTTP server, the CLI's help texts, the docs' examples) takes
these names from here; a literal ``"2026-07-28"`` or ``"/mcp"`` anywhere else is a second home for the rule.
This module sits below every layer and imports nothing from soklet.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

__all__ = [
    "CLIENT_CAPABILITIES_META_KEY",
    "CLIENT_INFO_META_KEY",
    "DEFAULT_ENDPOINT_PATH",
    "DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME",
    "DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS",
    "DEFAULT_SHUTDOWN_GRACE_SECONDS",
    "LOG_LEVEL_META_KEY",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSION_META_KEY",
    "SERVER_INFO_META_KEY",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "TASKS_EXTENSION",
]

#: The MCP protocol version soklet implements: the one a request is bound to when it does not say.
PROTOCOL_VERSION: Final = "2026-07-28"
#: The protocol versions a server accepts by default; the first is the preferred one.
SUPPORTED_PROTOCOL_VERSIONS: Final = (PROTOCOL_VERSION,)

#: ``params._meta`` member that carries the request's protocol version. The server validates it against the
#: ``MCP-Protocol-Version`` header, and a sealed state is bound to it. (An unprefixed ``protocolVersion`` member
#: is not the protocol version: it is an ordinary ``_meta`` member, bound only through the params digest.)
PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"
#: ``params._meta`` member that carries the client's capabilities.
CLIENT_CAPABILITIES_META_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
#: ``params._meta`` member that names the client (optional).
CLIENT_INFO_META_KEY: Final = "io.modelcontextprotocol/clientInfo"
#: ``params._meta`` member that asks for a log level (optional).
LOG_LEVEL_META_KEY: Final = "io.modelcontextprotocol/logLevel"
#: Result ``_meta`` member that names the server.
SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"
#: The tasks extension: a client declares it per request in ``clientCapabilities.extensions``, a server in
#: ``server/discover``'s ``capabilities.extensions``.
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"

#: The endpoint path a server answers on unless configured otherwise.
DEFAULT_ENDPOINT_PATH: Final = "/mcp"
#: Longest a sealed state lives, from its first emission (re-emission keeps the first expiry).
DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME: Final = timedelta(minutes=15)
#: Most continuations one flow may emit; the first emission is round 1.
DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS: Final = 10
#: Seconds a stopping server waits for running requests before it cancels them.
DEFAULT_SHUTDOWN_GRACE_SECONDS: Final = 10.0
