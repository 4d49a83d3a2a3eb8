"""Which era a message belongs to, the 2025-era capabilities in the modern shape, and the refusal of a message of
an era the server does not speak: the one home of each of those rules (the session engine, the HTTP transport and
stdio call them)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Final

from soklet_core.json import JsonArray, JsonNull, JsonNumber, JsonObject, JsonString, JsonValue
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.context import RequestId
from soklet_core.mcp.model.errors import McpModelError
from soklet_core.mcp.server._jsonrpc import INVALID_PARAMS, UNSUPPORTED_VERSION, DispatchResult, McpError
from soklet_core.mcp.server.options import ProtocolEras
from soklet_core.protocol import PROTOCOL_VERSION_META_KEY

__all__ = [
    "INITIALIZE",
    "LEGACY_PROTOCOL_VERSIONS",
    "SESSION_HEADER",
    "era_from_headers",
    "is_legacy_message",
    "legacy_capabilities",
    "refuse_legacy",
    "refuse_modern",
]

#: The 2025-era protocol versions served, preferred first (an unknown requested version gets the first).
LEGACY_PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
#: The HTTP header that names a 2025-era session (lower-case, as the transport hands headers over).
SESSION_HEADER: Final = "mcp-session-id"
#: The method that opens a 2025-era session.
INITIALIZE: Final = "initialize"


# ------------------------------------------------------------------------------------------------ era detection


def era_from_headers(headers: Mapping[str, str], *, modern_versions: Collection[str]) -> ProtocolEras | None:
    """The era the headers alone decide: LEGACY with a session header, MODERN with an ``MCP-Protocol-Version``
    header naming a modern version and no session header, ``None`` when the body must be read."""
    if SESSION_HEADER in headers:
        return ProtocolEras.LEGACY
    version = headers.get("mcp-protocol-version")
    if version is not None and version.strip() in modern_versions:
        return ProtocolEras.MODERN
    return None


def _meta_version(message: JsonObject) -> JsonValue | None:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, JsonObject) else None
    return meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, JsonObject) else None


def is_legacy_message(
    headers: Mapping[str, str],
    message: JsonValue,
    *,
    modern_versions: Iterable[str],
    legacy_connection: bool = False,
) -> bool:
    """Whether a message belongs to the 2025 era (everything else takes the 2026-07-28 path unchanged).

    Legacy when it carries an ``Mcp-Session-Id`` header; or it is an ``initialize`` without a ``_meta``
    protocol version and without an ``MCP-Protocol-Version`` header naming a modern version; or, on a connection
    that has initialized a 2025-era session (``legacy_connection``, stdio), it has no ``_meta`` protocol version
    (a client's JSON-RPC response included).
    """
    modern = tuple(modern_versions)
    decided = era_from_headers(headers, modern_versions=modern)
    if decided is not None:
        return decided is ProtocolEras.LEGACY
    if not isinstance(message, JsonObject):
        return False
    if _meta_version(message) is not None:
        return False
    if legacy_connection:
        return True
    method = message.get("method")
    return isinstance(method, JsonString) and method.value == INITIALIZE


# ------------------------------------------------------------------------------------------------ translation


def legacy_capabilities(value: JsonValue | None) -> ClientCapabilities:
    """A 2025 ``initialize``'s ``capabilities`` in the modern shape: the members map directly (``elicitation:{}``
    already means form); a member (or a nested mode) :class:`ClientCapabilities` refuses is dropped. Absent means
    none; raises :class:`McpError` (-32602) when it is not an object."""
    if value is None:
        return ClientCapabilities.empty()
    if not isinstance(value, JsonObject):
        raise McpError(INVALID_PARAMS, "Invalid params: capabilities must be an object", log_reason="capabilities")
    kept: dict[str, JsonValue] = {}
    for name, member in value.items():
        if _capability_ok(name, member):
            kept[name] = member
        elif isinstance(member, JsonObject):
            inner = {
                key: item for key, item in member.items() if _capability_ok(name, JsonObject.from_mapping({key: item}))
            }
            if _capability_ok(name, JsonObject.from_mapping(inner)):
                kept[name] = JsonObject.from_mapping(inner)
    return ClientCapabilities.from_json(JsonObject.from_mapping(kept)) if kept else ClientCapabilities.empty()


def _capability_ok(name: str, member: JsonValue) -> bool:
    try:
        ClientCapabilities.from_json(JsonObject.from_mapping({name: member}))
    except McpModelError:
        return False
    return True


# ------------------------------------------------------------------------------------------------ the other era


def refuse_modern(message: JsonValue, logged: Collection[str]) -> DispatchResult:
    """The answer of a 2026-07-28 request to a server that speaks only the 2025 era (-32022, 400); the access log
    names the method when it is one of ``logged``."""
    request_id: RequestId | None = None
    requested: JsonValue = JsonNull.instance()
    method: str | None = None
    if isinstance(message, JsonObject):
        found = message.get("id")
        request_id = found if isinstance(found, JsonString | JsonNumber) else None
        version = _meta_version(message)
        requested = version if isinstance(version, JsonString) else requested
        name = message.get("method")
        method = name.value if isinstance(name, JsonString) and name.value in logged else None
    data = JsonObject.builder().put("supported", JsonArray.of(*LEGACY_PROTOCOL_VERSIONS)).put("requested", requested)
    error = McpError(
        UNSUPPORTED_VERSION,
        "This server speaks the 2025-era MCP protocol only ("
        + ", ".join(LEGACY_PROTOCOL_VERSIONS)
        + "); start the server with --protocol both to serve 2026-07-28 clients",
        data.build(),
        log_reason="modern-client",
    )
    return DispatchResult.refused(error, request_id, method=method)


def refuse_legacy(
    message: JsonObject, request_id: RequestId | None, method: str | None, modern: tuple[str, ...]
) -> DispatchResult:
    """The answer of a 2025-era message to a server that speaks only ``modern`` (-32022, 400)."""
    params = message.get("params")
    requested = params.get("protocolVersion") if isinstance(params, JsonObject) else None
    known = (
        requested.value if isinstance(requested, JsonString) and requested.value in LEGACY_PROTOCOL_VERSIONS else None
    )
    data = (
        JsonObject.builder()
        .put("supported", JsonArray.of(*modern))
        .put("requested", requested if isinstance(requested, JsonString) else JsonNull.instance())
        .build()
    )
    what = "initialize" if method == INITIALIZE else "request"
    sent = f"a 2025-era {what} ({known})" if known is not None else f"a 2025-era {what}"
    error = McpError(
        UNSUPPORTED_VERSION,
        f"This server speaks MCP {', '.join(modern)} only; the client sent {sent}. Use a client that speaks "
        f"{modern[0]}, or start the server with --protocol both",
        data,
        log_reason="legacy-client",
    )
    return DispatchResult.refused(error, request_id, method=method)
