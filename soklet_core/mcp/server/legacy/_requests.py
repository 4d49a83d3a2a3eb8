"""What one 2025-era message is to the session engine (:class:`LegacyRequest`), how the engine reaches the client
while the request runs (:class:`ClientChannel`), and the engine's progress channel over it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from soklet_core.json import JsonObject, JsonValue
from soklet_core.mcp.server.legacy._sessions import LegacySession

__all__ = ["ChannelProgress", "ClientChannel", "LegacyRequest"]


class ClientChannel(Protocol):
    """How the engine reaches the client while one request runs (HTTP: the POST's SSE stream; stdio: stdout)."""

    @property
    def cancelled(self) -> bool:
        """Whether the client has gone."""
        ...

    def send(self, frame: JsonObject) -> None:
        """Queue one JSON-RPC message (a server request or notification) to the client; never blocks."""
        ...


@dataclass(frozen=True, slots=True)
class LegacyRequest:
    """One 2025-era message: the endpoint path, the real headers (lower-case names; ``{}`` on stdio), the parsed
    message, the session it belongs to when the transport knows it (stdio), the body size, and the client's
    address as the transport saw it (``None`` on stdio: the session table counts anonymous sessions per peer)."""

    path: str
    headers: Mapping[str, str]
    message: JsonValue
    session: LegacySession | None = None
    body_bytes: int = 0
    peer: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise ValueError("path must be a path starting with '/'")
        if not isinstance(self.headers, Mapping):
            raise TypeError("headers must be a mapping of lower-case names")
        if not isinstance(self.message, JsonValue):
            raise TypeError("message must be a JsonValue")
        if self.session is not None and not isinstance(self.session, LegacySession):
            raise TypeError("session must be a LegacySession or None")
        if isinstance(self.body_bytes, bool) or not isinstance(self.body_bytes, int) or self.body_bytes < 0:
            raise ValueError("body_bytes must be a non-negative int")
        if self.peer is not None and not isinstance(self.peer, str):
            raise TypeError("peer must be a str or None")


class ChannelProgress:
    """The engine's progress channel over a :class:`ClientChannel`: frames reach the client once streaming is
    allowed."""

    __slots__ = ("_channel", "_streaming")

    def __init__(self, channel: ClientChannel) -> None:
        self._channel = channel
        self._streaming = False

    @property
    def cancelled(self) -> bool:
        """Whether the client has gone."""
        return self._channel.cancelled

    def allow_streaming(self) -> None:
        """Progress may reach the client from now on."""
        self._streaming = True

    def progress(self, frame: JsonObject) -> None:
        """One progress notification, sent once streaming is allowed (dropped before)."""
        if self._streaming:
            self._channel.send(frame)
