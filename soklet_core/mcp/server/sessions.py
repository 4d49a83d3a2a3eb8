"""2025-era sessions: what one ``initialize`` established, and the bounded table of live sessions.

A 2025-era client (protocol 2025-11-25, 2025-06-18, 2025-03-26) opens a session with ``initialize`` and names it on
every later request (``Mcp-Session-Id`` over HTTP; the connection itself over stdio). A :class:`LegacySession`
holds what ``initialize`` declared (version, capabilities translated to the modern shape, client info, the
admitted partition) and the two live maps of the session: the server-to-client requests still waiting for the
client's answer (:meth:`LegacySession.expect` / :meth:`LegacySession.deliver`) and the client's requests still
running (:meth:`LegacySession.track`, cancelled by ``notifications/cancelled`` or :meth:`LegacySession.close`).

Every map is bounded: :data:`DEFAULT_MAX_SESSIONS` sessions per table, :data:`MAX_PENDING_PER_SESSION` waiting
server requests and :data:`MAX_INFLIGHT_PER_SESSION` running client requests per session; a session with nothing
running that has not been used for the idle time is removed. Sessions live in one process: a fleet behind a load
balancer needs sticky routing for 2025-era clients.

A session id is 256 bits from :mod:`secrets`, written in unpadded base64url (visible ASCII, as the 2025 transport
requires). It is a bearer secret for the session's lifetime: no ``repr`` and no log line shows it.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import Final

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.json import JsonNumber, JsonObject, JsonString, JsonValue
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.context import RequestId

__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_IDLE_SECONDS",
    "MAX_INFLIGHT_PER_SESSION",
    "MAX_PENDING_PER_SESSION",
    "MAX_SESSIONS_LIMIT",
    "MAX_SESSION_IDLE_SECONDS",
    "SESSION_ID_BYTES",
    "LegacySession",
    "SessionLimitReason",
    "SessionTable",
    "SessionsFull",
]

#: Sessions one table holds unless told otherwise; :data:`MAX_SESSIONS_LIMIT` at most.
DEFAULT_MAX_SESSIONS: Final = 1024
#: The largest ``max_sessions`` a table accepts.
MAX_SESSIONS_LIMIT: Final = 65536
#: Seconds an unused session with nothing running lives unless told otherwise; :data:`MAX_SESSION_IDLE_SECONDS`
#: at most.
DEFAULT_SESSION_IDLE_SECONDS: Final = 1800.0
#: The longest idle time a table accepts (one day).
MAX_SESSION_IDLE_SECONDS: Final = 86400.0
#: Server-to-client requests of one session waiting for the client's answer at the same time.
MAX_PENDING_PER_SESSION: Final = 64
#: Client requests of one session running at the same time.
MAX_INFLIGHT_PER_SESSION: Final = 32
#: Random bytes of a session id (256 bits; the id is their unpadded base64url, 43 characters).
SESSION_ID_BYTES: Final = 32


class SessionLimitReason(ErrorReason):
    """Which session bound a request met."""

    SESSIONS = "sessions-full", "every session slot of this server is taken"
    PENDING = "pending-full", "the session has too many server requests waiting for the client"
    IN_FLIGHT = "in-flight-full", "the session has too many requests running"


class SessionsFull(SokletError):
    """A session bound was met (``reason``: a :class:`SessionLimitReason`): the server's state, not a bad request.

    The HTTP transport answers the table's refusal with 503 and ``Retry-After``.
    """

    reason: SessionLimitReason


class LegacySession:
    """One 2025-era session: made by :meth:`SessionTable.create` (or directly, for a stdio connection).

    ``id`` is the secret session id; ``protocol_version`` the negotiated 2025 version; ``client_capabilities`` what
    ``initialize`` declared, in the modern shape; ``client_info`` the client's ``clientInfo`` object (or ``None``);
    ``partition`` the admission partition at ``initialize`` (later requests must admit to the same one);
    ``created`` and ``last_used`` are readings of the table's monotonic clock; ``initialized`` turns true with
    ``notifications/initialized``.
    """

    __slots__ = (
        "_clock",
        "_closed",
        "_inflight",
        "_next_request",
        "_pending",
        "client_capabilities",
        "client_info",
        "created",
        "id",
        "initialized",
        "last_used",
        "partition",
        "protocol_version",
    )

    def __init__(
        self,
        *,
        protocol_version: str,
        client_capabilities: ClientCapabilities,
        client_info: JsonObject | None,
        partition: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(protocol_version, str) or not protocol_version:
            raise ValueError("protocol_version must be a non-empty str")
        if not isinstance(client_capabilities, ClientCapabilities):
            raise TypeError("client_capabilities must be ClientCapabilities")
        if client_info is not None and not isinstance(client_info, JsonObject):
            raise TypeError("client_info must be a JsonObject or None")
        if not isinstance(partition, str) or not partition:
            raise ValueError("partition must be a non-empty str")
        self.id: Final = secrets.token_urlsafe(SESSION_ID_BYTES)
        self.protocol_version: Final = protocol_version
        self.client_capabilities: Final = client_capabilities
        self.client_info: Final = client_info
        self.partition: Final = partition
        self._clock = clock
        self.created: Final = clock()
        self.last_used = self.created
        self.initialized = False
        self._closed = False
        self._next_request = 0
        self._pending: dict[str, asyncio.Future[JsonObject]] = {}
        self._inflight: dict[RequestId, asyncio.Task[object]] = {}

    def __repr__(self) -> str:
        # The id is a bearer secret: never shown.
        return (
            f"LegacySession(protocol_version={self.protocol_version!r}, pending={len(self._pending)}, "
            f"in_flight={len(self._inflight)}, closed={self._closed})"
        )

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran (the session is gone)."""
        return self._closed

    @property
    def pending(self) -> int:
        """Server-to-client requests waiting for the client's answer."""
        return len(self._pending)

    @property
    def in_flight(self) -> int:
        """Client requests running."""
        return len(self._inflight)

    def touch(self) -> None:
        """Mark the session used now."""
        self.last_used = self._clock()

    def idle_for(self, now: float) -> float:
        """Seconds since last use at clock reading ``now``; 0 while a request runs (a running request is use)."""
        return 0.0 if self._inflight else max(0.0, now - self.last_used)

    # ------------------------------------------------------------------------------------ server -> client

    def expect(self, method: str) -> tuple[RequestId, asyncio.Future[JsonObject]]:
        """Register one server-to-client request of ``method``: its fresh id (``"s-<n>"``) and the future the
        client's response resolves. Raises :class:`SessionsFull` past :data:`MAX_PENDING_PER_SESSION`, and
        ``asyncio.CancelledError`` once the session is closed (the request waiting on it ends with it)."""
        if self._closed:
            raise asyncio.CancelledError
        if len(self._pending) >= MAX_PENDING_PER_SESSION:
            raise SessionsFull(SessionLimitReason.PENDING)
        self._next_request += 1
        key = f"s-{self._next_request}"
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        return JsonString.from_value(key), future

    def forget(self, request_id: RequestId) -> None:
        """Drop a pending request (its round ended without it); a late answer is then ignored."""
        if isinstance(request_id, JsonString):
            future = self._pending.pop(request_id.value, None)
            if future is not None and not future.done():
                future.cancel()

    def deliver(self, message: JsonObject) -> bool:
        """Resolve the pending request a client JSON-RPC response answers (a ``result`` or an ``error``: the
        waiting side inspects it). ``False`` when no pending request has that id (unknown, late or forgotten)."""
        request_id = message.get("id") if isinstance(message, JsonObject) else None
        if not isinstance(request_id, JsonString):
            return False
        future = self._pending.pop(request_id.value, None)
        if future is None or future.done():
            return False
        future.set_result(message)
        return True

    # ------------------------------------------------------------------------------------ client -> server

    def track(self, request_id: RequestId, task: asyncio.Task[object]) -> None:
        """Record a running client request so ``notifications/cancelled`` can reach it. Raises
        :class:`SessionsFull` past :data:`MAX_INFLIGHT_PER_SESSION` or when the id is already running, and
        ``asyncio.CancelledError`` once the session is closed."""
        if self._closed:
            raise asyncio.CancelledError
        if len(self._inflight) >= MAX_INFLIGHT_PER_SESSION or request_id in self._inflight:
            raise SessionsFull(SessionLimitReason.IN_FLIGHT)
        self._inflight[request_id] = task

    def untrack(self, request_id: RequestId) -> None:
        """The request ended (counts as use of the session)."""
        self._inflight.pop(request_id, None)
        self.touch()

    def cancel(self, request_id: JsonValue | None) -> bool:
        """Cancel the running client request with this id (``notifications/cancelled``); ``False`` if none."""
        if not isinstance(request_id, JsonString | JsonNumber):
            return False
        task = self._inflight.get(request_id)
        if task is None:
            return False
        task.cancel()
        return True

    def close(self) -> None:
        """End the session: cancel every running request and every pending server request."""
        self._closed = True
        for task in self._inflight.values():
            task.cancel()
        for future in self._pending.values():
            if not future.done():
                future.cancel()
        self._inflight.clear()
        self._pending.clear()


class SessionTable:
    """The live sessions of one server: at most ``max_sessions`` (1..65536, default 1024), each removed after
    ``idle_seconds`` (1..86400, default 1800) without use and with nothing running. ``clock`` is a monotonic
    clock in seconds (tests inject one)."""

    __slots__ = ("_clock", "_idle", "_max", "_sessions")

    def __init__(
        self,
        *,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        idle_seconds: float = DEFAULT_SESSION_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int):
            raise TypeError("max_sessions must be an int")
        if not 1 <= max_sessions <= MAX_SESSIONS_LIMIT:
            raise ValueError(f"max_sessions must be between 1 and {MAX_SESSIONS_LIMIT}")
        if isinstance(idle_seconds, bool) or not isinstance(idle_seconds, int | float):
            raise TypeError("idle_seconds must be a number")
        if not 1 <= idle_seconds <= MAX_SESSION_IDLE_SECONDS:
            raise ValueError(f"idle_seconds must be between 1 and {MAX_SESSION_IDLE_SECONDS:g}")
        if not callable(clock):
            raise TypeError("clock must be callable")
        self._max = max_sessions
        self._idle = float(idle_seconds)
        self._clock = clock
        self._sessions: dict[str, LegacySession] = {}

    def __repr__(self) -> str:
        return f"SessionTable(sessions={len(self._sessions)}, max_sessions={self._max}, idle_seconds={self._idle:g})"

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def max_sessions(self) -> int:
        """The most sessions held at once."""
        return self._max

    @property
    def idle_seconds(self) -> float:
        """How long an unused session with nothing running lives."""
        return self._idle

    def create(
        self,
        *,
        protocol_version: str,
        client_capabilities: ClientCapabilities,
        client_info: JsonObject | None,
        partition: str,
    ) -> LegacySession:
        """A new session (idle ones are swept first); raises :class:`SessionsFull` when every slot is taken."""
        self.sweep()
        if len(self._sessions) >= self._max:
            raise SessionsFull(SessionLimitReason.SESSIONS)
        session = LegacySession(
            protocol_version=protocol_version,
            client_capabilities=client_capabilities,
            client_info=client_info,
            partition=partition,
            clock=self._clock,
        )
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str) -> LegacySession | None:
        """The live session with this id, marked used; ``None`` if unknown or expired (an expired one is removed
        and closed)."""
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            return None
        if session.idle_for(self._clock()) >= self._idle:
            self.remove(session_id)
            return None
        session.touch()
        return session

    def remove(self, session_id: str) -> bool:
        """End and forget a session (``DELETE``); ``False`` if no such session."""
        session = self._sessions.pop(session_id, None) if isinstance(session_id, str) else None
        if session is None:
            return False
        session.close()
        return True

    def sweep(self) -> int:
        """Remove every idle session; how many were removed."""
        now = self._clock()
        expired = [key for key, session in self._sessions.items() if session.idle_for(now) >= self._idle]
        for key in expired:
            self.remove(key)
        return len(expired)

    def close(self) -> None:
        """End every session (server shutdown)."""
        for key in list(self._sessions):
            self.remove(key)
