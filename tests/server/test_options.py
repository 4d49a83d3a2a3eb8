"""``ServerOptions`` and its groups: each bound refused at its edge (the limit passes, one more is refused) when the
group is built, and a real server on loopback honours what the options say."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from soklet_apps import conformance
from soklet_core.json import MAX_REQUEST_BODY_BYTES
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer, Registry, ServerOptions
from soklet_core.mcp.server.options import (
    MAX_INPUT_TIMEOUT_SECONDS,
    MAX_SESSION_IDLE_SECONDS,
    MAX_SESSIONS_LIMIT,
    MAX_TASK_MILLISECONDS,
    MIN_INPUT_TIMEOUT_SECONDS,
    MIN_SESSION_IDLE_SECONDS,
    HttpLimits,
    HttpOptions,
    ProtocolEras,
    ProtocolOptions,
    SessionOptions,
    TaskOptions,
)
from soklet_core.protection import MAX_ENDPOINT_PATH_CHARS, ProtectionConfig
from soklet_core.store import MAX_QUOTA_VALUE
from tests.server.support import CAPS, PV, VERSION, Client, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("options-test"))
DOC = Path(__file__).resolve().parents[2] / "docs" / "server.md"
BODY_LIMIT = 4096

Build = Callable[[Any], object]

#: (build one group from a value, the largest or smallest value accepted, the first value refused past it)
EDGES: list[tuple[str, Build, Any, Any]] = [
    (
        "body limit, top",
        lambda v: HttpOptions(max_request_body_bytes=v),
        MAX_REQUEST_BODY_BYTES,
        MAX_REQUEST_BODY_BYTES + 1,
    ),
    ("body limit, bottom", lambda v: HttpOptions(max_request_body_bytes=v), 1, 0),
    ("output ceiling", lambda v: HttpOptions(output_ceiling_bytes=v), 1, 0),
    (
        "path length",
        lambda v: HttpOptions(path=v),
        "/" + "p" * (MAX_ENDPOINT_PATH_CHARS - 1),
        "/" + "p" * MAX_ENDPOINT_PATH_CHARS,
    ),
    ("max sessions, top", lambda v: SessionOptions(max_sessions=v), MAX_SESSIONS_LIMIT, MAX_SESSIONS_LIMIT + 1),
    ("max sessions, bottom", lambda v: SessionOptions(max_sessions=v), 1, 0),
    ("idle, top", lambda v: SessionOptions(idle_seconds=v), MAX_SESSION_IDLE_SECONDS, MAX_SESSION_IDLE_SECONDS + 1),
    (
        "idle, bottom",
        lambda v: SessionOptions(idle_seconds=v),
        MIN_SESSION_IDLE_SECONDS,
        MIN_SESSION_IDLE_SECONDS - 0.5,
    ),
    (
        "input timeout, top",
        lambda v: SessionOptions(input_timeout_seconds=v),
        MAX_INPUT_TIMEOUT_SECONDS,
        MAX_INPUT_TIMEOUT_SECONDS + 1,
    ),
    (
        "input timeout, bottom",
        lambda v: SessionOptions(input_timeout_seconds=v),
        MIN_INPUT_TIMEOUT_SECONDS,
        MIN_INPUT_TIMEOUT_SECONDS - 0.5,
    ),
    ("ttl, top", lambda v: TaskOptions(ttl_ms=v), MAX_TASK_MILLISECONDS, MAX_TASK_MILLISECONDS + 1),
    ("ttl, bottom", lambda v: TaskOptions(ttl_ms=v), 1, 0),
    ("poll, top", lambda v: TaskOptions(poll_interval_ms=v), MAX_TASK_MILLISECONDS, MAX_TASK_MILLISECONDS + 1),
    ("poll, bottom", lambda v: TaskOptions(poll_interval_ms=v), 1, 0),
    ("tasks per partition", lambda v: TaskOptions(max_per_partition=v), MAX_QUOTA_VALUE, MAX_QUOTA_VALUE + 1),
    (
        "task bytes per partition",
        lambda v: TaskOptions(max_bytes_per_partition=v),
        MAX_QUOTA_VALUE,
        MAX_QUOTA_VALUE + 1,
    ),
]


@pytest.mark.parametrize(("build", "accepted", "refused"), [edge[1:] for edge in EDGES], ids=[e[0] for e in EDGES])
def test_each_group_refuses_one_past_its_edge(build: Build, accepted: Any, refused: Any) -> None:
    assert build(accepted) is not None
    with pytest.raises(ValueError, match="must"):
        build(refused)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ProtocolOptions(eras="both"),
        lambda: ProtocolOptions(list_cache_hint=60_000),
        lambda: ProtocolOptions(sync_handlers_in_thread=1),
        lambda: HttpOptions(allowed_hosts="mcp.example.com"),  # one str, not a tuple of them
        lambda: HttpOptions(limits={"max_connections": 1}),
        lambda: SessionOptions(max_sessions=True),
        lambda: SessionOptions(idle_seconds="60"),
        lambda: ServerOptions(http=SessionOptions()),
        lambda: McpServer(Registry(), options=HttpOptions()),
    ],
)
def test_a_wrong_type_is_refused_when_the_group_is_built(build: Callable[[], object]) -> None:
    with pytest.raises(TypeError):
        build()


def test_the_refusals_say_which_bound() -> None:
    with pytest.raises(ValueError, match=f"between 1 and {MAX_REQUEST_BODY_BYTES} bytes"):
        HttpOptions(max_request_body_bytes=MAX_REQUEST_BODY_BYTES + 1)
    with pytest.raises(ValueError, match=f"max_sessions must be between 1 and {MAX_SESSIONS_LIMIT}"):
        SessionOptions(max_sessions=MAX_SESSIONS_LIMIT + 1)
    with pytest.raises(ValueError, match="at least one protocol version"):
        ProtocolOptions(supported_versions=())
    with pytest.raises(ValueError, match="endpoint path"):
        HttpOptions(path="mcp")
    assert TaskOptions(ttl_ms=None).ttl_ms is None  # unlimited


def test_groups_are_frozen_keyword_only_and_keep_sequences_as_tuples() -> None:
    protocol = ProtocolOptions(supported_versions=[VERSION, "2026-01-01"])  # type: ignore[arg-type]
    assert protocol.supported_versions == (VERSION, "2026-01-01")
    http = HttpOptions(allowed_hosts=["mcp.example.com"])  # type: ignore[arg-type]
    assert http.allowed_hosts == ("mcp.example.com",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        http.path = "/other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        SessionOptions(64)  # type: ignore[misc]
    assert ServerOptions() == ServerOptions()


def test_the_options_table_names_every_option() -> None:
    doc = DOC.read_text()
    table = doc[doc.index("## Options") : doc.index("## Limits and timeouts")]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    for group in (ProtocolOptions, HttpOptions, SessionOptions, TaskOptions):
        for field in dataclasses.fields(group):
            assert any(f"| `{group.__name__}` |" in row and f"`{field.name}`" in row for row in rows), field.name


def _padded(size: int) -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {PV: VERSION, CAPS: {}}}}
    body = json.dumps(message).encode()
    return body + b" " * (size - len(body))


def test_a_served_server_honours_its_options() -> None:
    options = ServerOptions(
        protocol=ProtocolOptions(eras=ProtocolEras.MODERN, server_name="options-test"),
        http=HttpOptions(path="/api/mcp", max_request_body_bytes=BODY_LIMIT, limits=HttpLimits(max_connections=64)),
        sessions=SessionOptions(max_sessions=8, idle_seconds=60),
    )
    server = McpServer(
        conformance.build_registry(tasks=False), options=options, protection=ProtectionConfig(keyring=KEYRING)
    )
    assert server.options is options
    assert server.path == "/api/mcp"
    assert server.http_limits.max_connections == 64
    assert server.protocol_eras is ProtocolEras.MODERN
    assert server.legacy_protocol.sessions.max_sessions == 8
    with running(server) as base:
        client = Client(base, path="/api/mcp")
        try:
            listed = client.post("tools/list")
            assert listed.status == 200
            assert listed.result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "options-test"
            assert client.post("tools/list", raw=_padded(BODY_LIMIT)).status == 200
            over = client.post("tools/list", raw=_padded(BODY_LIMIT + 1))
            assert over.status == 413
            assert over.error["code"] == -32600
        finally:
            client.close()
        # The default path is not served when another is set.
        elsewhere = httpx.post(base + "/mcp", content=_padded(200), headers={"Content-Type": "application/json"})
        assert elsewhere.status_code == 404
