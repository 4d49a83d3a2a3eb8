"""The defaults and protocol values the README and the CLI's docs state in prose are the ones the code uses: each is
read from its one home (``soklet_core.protocol``, the HTTP and fleet limits, the options' defaults) and looked up in
the text, so a changed constant fails here until the prose follows."""

from __future__ import annotations

import inspect
from datetime import timedelta
from pathlib import Path

import pytest

from soklet_cli.keys import DEFAULT_STATE_LIFETIME
from soklet_cli.serve import serve
from soklet_core.files import DEFAULT_FLEET_TIMEOUT_SECONDS, MAX_FLEET_TIMEOUT_SECONDS
from soklet_core.mcp.server.legacy._engine import (
    DEFAULT_INPUT_TIMEOUT_SECONDS,
    LEGACY_PROTOCOL_VERSIONS,
    MAX_INITIALIZE_BYTES,
    MAX_INPUT_TIMEOUT_SECONDS,
    MIN_INPUT_TIMEOUT_SECONDS,
)
from soklet_core.mcp.server.legacy._sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_SECONDS,
    MAX_INFLIGHT_PER_SESSION,
    MAX_PENDING_PER_SESSION,
    MAX_SESSION_IDLE_SECONDS,
    MAX_SESSIONS_LIMIT,
    PARTITION_SHARE_DIVISOR,
    PEER_SHARE_DIVISOR,
)
from soklet_core.mcp.server.ops._live_keyring import DEFAULT_POLL_INTERVAL_SECONDS
from soklet_core.protocol import (
    DEFAULT_ENDPOINT_PATH,
    DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME,
    PROTOCOL_VERSION,
    PROTOCOL_VERSION_META_KEY,
)

ROOT = Path(__file__).resolve().parents[2]
MINUTES = DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME // timedelta(minutes=1)
POLL = f"{DEFAULT_POLL_INTERVAL_SECONDS:g}"
SERVE_PORT = inspect.signature(serve).parameters["port"].default


def prose(name: str) -> str:
    """A document's text with its line breaks as spaces (a phrase may wrap)."""
    return " ".join((ROOT / name).read_text("utf-8").split())


STATEMENTS = {
    "README.md": [
        f"MCP servers speaking protocol {PROTOCOL_VERSION}",
        f"a real MCP server on `http://127.0.0.1:{SERVE_PORT}{DEFAULT_ENDPOINT_PATH}`",
        f"speaking {PROTOCOL_VERSION} and the 2025 era ({', '.join(LEGACY_PROTOCOL_VERSIONS)})",
        f"`_meta` member `{PROTOCOL_VERSION_META_KEY}`",
        f"polled every {POLL} s",
        f"a {POLL}-second file poll",
        f"the maximum request-state lifetime ({MINUTES} min by default)",
    ],
    "docs/keys.md": [
        f"(default `{DEFAULT_STATE_LIFETIME}`;",
        f"the maximum request-state lifetime ({MINUTES} minutes by default)",
    ],
    "docs/fleet.md": [
        f"above 0 and at most {MAX_FLEET_TIMEOUT_SECONDS:g}, to the millisecond",
        f"default {DEFAULT_FLEET_TIMEOUT_SECONDS:g} or the fleet file's",
        f"| `DEFAULT_FLEET_TIMEOUT_SECONDS` | {DEFAULT_FLEET_TIMEOUT_SECONDS:g} |",
        f"| `MAX_FLEET_TIMEOUT_SECONDS` | {MAX_FLEET_TIMEOUT_SECONDS:g} |",
    ],
    "docs/conformance.md": [f"**{PROTOCOL_VERSION} requirement set**"],
    "docs/clients.md": [
        f"| sessions per instance | {DEFAULT_MAX_SESSIONS:,} (`DEFAULT_MAX_SESSIONS`), 1–{MAX_SESSIONS_LIMIT:,} |",
        f"| idle time of a session | {DEFAULT_SESSION_IDLE_SECONDS / 3600:g} h (`DEFAULT_SESSION_IDLE_SECONDS`), 1 s–"
        f"{MAX_SESSION_IDLE_SECONDS / 3600:g} h |",
        f"a quarter of the table (`PARTITION_SHARE_DIVISOR` = {PARTITION_SHARE_DIVISOR}: "
        f"{DEFAULT_MAX_SESSIONS // PARTITION_SHARE_DIVISOR} of {DEFAULT_MAX_SESSIONS:,})",
        f"a sixteenth of the table (`PEER_SHARE_DIVISOR` = {PEER_SHARE_DIVISOR}: "
        f"{DEFAULT_MAX_SESSIONS // PEER_SHARE_DIVISOR} of {DEFAULT_MAX_SESSIONS:,})",
        f"| requests running in one session | {MAX_INFLIGHT_PER_SESSION} (`MAX_INFLIGHT_PER_SESSION`) |",
        f"awaiting an answer in one session | {MAX_PENDING_PER_SESSION} (`MAX_PENDING_PER_SESSION`) |",
        f"| one round's wait for the client's answers | {DEFAULT_INPUT_TIMEOUT_SECONDS / 60:g} min "
        f"(`DEFAULT_INPUT_TIMEOUT_SECONDS`), {MIN_INPUT_TIMEOUT_SECONDS:g} s–{MAX_INPUT_TIMEOUT_SECONDS / 3600:g} h |",
        f"an `initialize` over {MAX_INITIALIZE_BYTES // 1024} KiB (`MAX_INITIALIZE_BYTES`",
    ],
}


@pytest.mark.parametrize(
    ("document", "statement"),
    [(document, statement) for document, statements in STATEMENTS.items() for statement in statements],
)
def test_the_docs_state_the_values_the_code_uses(document: str, statement: str) -> None:
    assert statement in prose(document)
