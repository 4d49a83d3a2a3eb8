"""The 2025-era session's own wire answers: the session-not-found error, the request-cancelled code, the sentences
a 2025 client reads for a refusal it could not have caused, and the HTTP status a refusal keeps inside a session."""

from __future__ import annotations

from typing import Final

from soklet_core.json import JsonValue
from soklet_core.mcp.model import methods
from soklet_core.mcp.server._jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, McpError, capability_names

__all__ = [
    "KEPT_STATUSES",
    "REQUEST_CANCELLED",
    "SESSION_NOT_FOUND",
    "SESSION_NOT_FOUND_MESSAGE",
    "in_session",
    "initialize_too_large",
    "invalid_request",
    "missing_sentence",
    "session_failure",
    "session_not_found",
]

#: JSON-RPC code of an unknown, expired or foreign session (HTTP 404), as 2025-era servers answer it.
SESSION_NOT_FOUND: Final = -32001
#: Its message.
SESSION_NOT_FOUND_MESSAGE: Final = "Session not found"
#: JSON-RPC code of a request the client cancelled itself (``notifications/cancelled``).
REQUEST_CANCELLED: Final = -32800

# Statuses a session request keeps from the engine's refusal; every other JSON-RPC error of a request inside a session
# is sent with 200, as 2025-era clients read a 4xx as a broken transport (404: the session is gone).
KEPT_STATUSES: Final = frozenset({200, 401, 403, 503})


def missing_sentence(required: JsonValue | None, method: str) -> str:
    """The sentence a 2025-era client reads when a request needs capabilities it did not declare."""
    subject = "This tool" if method == methods.TOOLS_CALL else "This request"
    names = capability_names(required)
    if not names:
        return f"{subject} needs a client capability this client did not declare in initialize."
    if len(names) == 1:
        return f"{subject} needs the client capability {names[0]}, which this client did not declare in initialize."
    listed = ", ".join(names[:-1]) + " and " + names[-1]
    return f"{subject} needs the client capabilities {listed}, which this client did not declare in initialize."


def session_failure(sentence: str, reason: str, code: int = INTERNAL_ERROR, data: JsonValue | None = None) -> McpError:
    """A 2025-session failure told in a sentence: ``isError`` for ``tools/call``, a JSON-RPC error otherwise
    (the session engine decides). The sentence names no client input."""
    return McpError(code, sentence, data, http_status=200, log_reason=reason)


def in_session(error: McpError) -> McpError:
    """``error`` as a request inside a session answers it: with HTTP 200 unless its status is one a 2025-era client
    reads as meant (401, 403, 503)."""
    if error.http_status in KEPT_STATUSES:
        return error
    return McpError(
        error.code, error.message, error.data, http_status=200, log_reason=error.log_reason, headers=error.headers
    )


def session_not_found() -> McpError:
    """An unknown, expired or foreign session: 404, -32001."""
    return McpError(SESSION_NOT_FOUND, SESSION_NOT_FOUND_MESSAGE, http_status=404, log_reason="session-not-found")


def initialize_too_large() -> McpError:
    """An ``initialize`` over the session engine's ``MAX_INITIALIZE_BYTES``."""
    return McpError(INVALID_PARAMS, "Invalid params: initialize is too large", log_reason="initialize-too-large")


def invalid_request(message: str = "Invalid Request", reason: str = "envelope") -> McpError:
    """A malformed 2025-era message: -32600."""
    return McpError(INVALID_REQUEST, message, log_reason=reason)
