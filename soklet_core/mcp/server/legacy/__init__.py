"""The 2025-era protocol: the session engine that runs 2025 clients on the same engine, and its session table."""

from soklet_core.mcp.server.legacy._engine import (
    DEFAULT_INPUT_TIMEOUT_SECONDS,
    LEGACY_PROTOCOL_VERSIONS,
    ClientChannel,
    LegacyProtocol,
    LegacyRequest,
    ProtocolEras,
    is_legacy_message,
)
from soklet_core.mcp.server.legacy._sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_SECONDS,
    LegacySession,
    SessionLimitReason,
    SessionsFull,
    SessionTable,
)

__all__ = [
    "DEFAULT_INPUT_TIMEOUT_SECONDS",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_IDLE_SECONDS",
    "LEGACY_PROTOCOL_VERSIONS",
    "ClientChannel",
    "LegacyProtocol",
    "LegacyRequest",
    "LegacySession",
    "ProtocolEras",
    "SessionLimitReason",
    "SessionTable",
    "SessionsFull",
    "is_legacy_message",
]
