"""What an operator runs beside the server: the admin API, its snapshot, live keyrings, readiness and metrics."""

from soklet_core.mcp.server.ops._admin import (
    MAX_ADMIN_BODY_BYTES,
    AdminApp,
    AdminTokenError,
    AdminTokens,
    read_admin_tokens,
)
from soklet_core.mcp.server.ops._live_keyring import (
    KeyringFileWatcher,
    LiveKeyring,
    LiveKeyringError,
    LiveKeyringRefusal,
)
from soklet_core.mcp.server.ops._readiness import (
    NotReady,
    Readiness,
)

__all__ = [
    "MAX_ADMIN_BODY_BYTES",
    "AdminApp",
    "AdminTokenError",
    "AdminTokens",
    "KeyringFileWatcher",
    "LiveKeyring",
    "LiveKeyringError",
    "LiveKeyringRefusal",
    "NotReady",
    "Readiness",
    "read_admin_tokens",
]
