"""2025-era sessions: what one ``initialize`` established, and the bounded table of live sessions.

A 2025-era client (protocol 2025-11-25, 2025-06-18, 2025-03-26) opens a session with ``initialize`` and names it on
every later request (``Mcp-Session-Id`` over HTTP; the connection itself over stdio). A :class:`LegacySession`
holds what ``initialize`` declared (version, capabilities translated to the modern shape, client info, the
admitted partition) and the two live maps of the session: the server-to-client requests still waiting for the
client's answer (:meth:`LegacySession.expect` / :meth:`LegacySession.deliver`) and the client's requests still
running (:meth:`LegacySession.track`, cancelled by ``notifications/cancelled`` or :meth:`LegacySession.close`).

Every map is bounded: :data:`DEFAULT_MAX_SESSIONS` sessions per table, :data:`MAX_PENDING_PER_SESSION` waiting
server requests and :data:`MAX_INFLIGHT_PER_SESSION` running client requests per session; a session with nothing
running that has not been used for the idle time (:data:`DEFAULT_SESSION_IDLE_SECONDS`, eight hours: as long as a
person leaves a window open, since no 2025-era client opens a new session on its own) is removed. Sessions live in
one process: a fleet behind a load balancer needs sticky routing for 2025-era clients.

One client cannot take every session: an admitted partition holds at most a share of the table
(:data:`PARTITION_SHARE_DIVISOR`), and in the anonymous partition each peer address (an IPv6 address counts by its
/64) holds at most a smaller share (:data:`PEER_SHARE_DIVISOR`). When a share, or the whole table, is full, a new
session takes the place of the longest-idle one with nothing running (of that share, or of the table) rather than
being refused: a client that floods ``initialize`` evicts its own sessions, not everyone else's. Only when every
candidate is running a request is ``initialize`` refused.

A session id is 256 bits from :mod:`secrets`, written in unpadded base64url (visible ASCII, as the 2025 transport
requires). It is a bearer secret for the session's lifetime: no ``repr`` and no log line shows it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.json import JsonNumber, JsonObject, JsonString, JsonValue
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.context import RequestId
from soklet_core.mcp.server.options import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_SECONDS,
    MAX_SESSION_IDLE_SECONDS,
    MAX_SESSIONS_LIMIT,
    SessionOptions,
)
from soklet_core.protection import ANONYMOUS_PARTITION

__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_IDLE_SECONDS",
    "MAX_INFLIGHT_PER_SESSION",
    "MAX_PENDING_PER_SESSION",
    "MAX_SESSIONS_LIMIT",
    "MAX_SESSION_IDLE_SECONDS",
    "PARTITION_SHARE_DIVISOR",
    "PEER_SHARE_DIVISOR",
    "SESSION_ID_BYTES",
    "LegacySession",
    "SessionLimitReason",
    "SessionTable",
    "SessionsFull",
    "peer_key",
]

#: Server-to-client requests of one session waiting for the client's answer at the same time.
MAX_PENDING_PER_SESSION: Final = 64
#: Client requests of one session running at the same time.
MAX_INFLIGHT_PER_SESSION: Final = 32
#: An admitted partition holds at most ``max_sessions // PARTITION_SHARE_DIVISOR`` sessions (at least one): a
#: quarter of the table.
PARTITION_SHARE_DIVISOR: Final = 4
#: In the anonymous partition, one peer address (IPv4 address, IPv6 /64) holds at most
#: ``max_sessions // PEER_SHARE_DIVISOR`` sessions (at least one): a sixteenth of the table. Behind a reverse
#: proxy every client has the proxy's address: give clients bearer tokens (partitions) or raise ``max_sessions``.
PEER_SHARE_DIVISOR: Final = 16
# The prefix of an IPv6 peer that counts as one peer (one customer's network, as one IPv4 address).
_IPV6_PEER_PREFIX: Final = 64
#: Random bytes of a session id (256 bits; the id is their unpadded base64url, 43 characters).
SESSION_ID_BYTES: Final = 32

_DEFAULT_OPTIONS: Final = SessionOptions()


class SessionLimitReason(ErrorReason):
    """Which session bound a request met."""

    SESSIONS = "sessions-full", "every session this client may take away is running a request"
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
    ``partition`` and ``subject`` the admission's partition and subject at ``initialize`` (``None``: anonymous; later
    requests must admit to the same pair);
    ``created`` and ``last_used`` are readings of the table's monotonic clock; ``initialized`` turns true with
    ``notifications/initialized``.
    """

    __slots__ = (
        "_clock",
        "_closed",
        "_inflight",
        "_next_request",
        "_on_touch",
        "_pending",
        "call_meta",
        "client_capabilities",
        "client_info",
        "created",
        "id",
        "initialized",
        "last_used",
        "partition",
        "protocol_version",
        "subject",
    )

    def __init__(
        self,
        *,
        protocol_version: str,
        client_capabilities: ClientCapabilities,
        client_info: JsonObject | None,
        partition: str,
        subject: str | None = None,
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
        if subject is not None and (not isinstance(subject, str) or not subject):
            raise ValueError("subject must be a non-empty str or None")
        self.id: Final = secrets.token_urlsafe(SESSION_ID_BYTES)
        self.protocol_version: Final = protocol_version
        self.client_capabilities: Final = client_capabilities
        self.client_info: Final = client_info
        self.partition: Final = partition
        self.subject: Final = subject
        self._clock = clock
        self.created: Final = clock()
        self.last_used = self.created
        self.initialized = False
        #: The ``_meta`` the session engine gives the session's calls (built once, on the first call).
        self.call_meta: JsonObject | None = None
        self._closed = False
        self._next_request = 0
        self._pending: dict[str, asyncio.Future[JsonObject]] = {}
        self._inflight: dict[RequestId, asyncio.Task[object]] = {}
        # Set by the table that holds the session: keeps its least-recently-used order.
        self._on_touch: Callable[[LegacySession], None] | None = None

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
        if self._on_touch is not None:
            self._on_touch(self)

    @property
    def busy(self) -> bool:
        """Whether a client request of the session is running (it is then never idle, never evicted)."""
        return bool(self._inflight)

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

    def waiting_for(self, request_id: RequestId) -> bool:
        """Whether the server request with this id still waits for the client's answer."""
        return isinstance(request_id, JsonString) and request_id.value in self._pending

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


def peer_key(peer: str | None) -> str | None:
    """The peer a share is counted by: an IPv4 address as is, an IPv6 address by its /64 (an IPv4-mapped one as
    IPv4); another transport's address (a Unix socket) as given; ``None`` without one (stdio)."""
    if peer is None:
        return None
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return peer
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, _IPV6_PEER_PREFIX), strict=False))
    return str(address)


class SessionTable:
    """The live sessions of one server, as ``options`` say (:class:`~soklet_core.mcp.server.SessionOptions`, which
    checks their bounds): at most ``max_sessions``, each removed after ``idle_seconds`` without use and with nothing
    running. One partition holds at
    most :attr:`partition_share` of them, one anonymous peer at most :attr:`peer_share`; a full share or table
    makes room by ending its longest-idle session with nothing running. ``clock`` is a monotonic clock in seconds
    (tests inject one)."""

    __slots__ = ("_clock", "_idle", "_max", "_partition_share", "_peer_share", "_sessions", "_share_of", "_shares")

    def __init__(
        self,
        *,
        options: SessionOptions = _DEFAULT_OPTIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(options, SessionOptions):
            raise TypeError("options must be a SessionOptions")
        max_sessions = options.max_sessions
        if not callable(clock):
            raise TypeError("clock must be callable")
        self._max = max_sessions
        self._partition_share = max(1, max_sessions // PARTITION_SHARE_DIVISOR)
        self._peer_share = max(1, max_sessions // PEER_SHARE_DIVISOR)
        self._idle = float(options.idle_seconds)
        self._clock = clock
        # Least recently used first, in the table and in each share (a session moves to the end when used).
        self._sessions: OrderedDict[str, LegacySession] = OrderedDict()
        self._shares: dict[tuple[str, str | None], OrderedDict[str, LegacySession]] = {}
        self._share_of: dict[str, tuple[str, str | None]] = {}

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

    @property
    def partition_share(self) -> int:
        """The most sessions one admitted partition holds (``max_sessions // PARTITION_SHARE_DIVISOR``, at least 1)."""
        return self._partition_share

    @property
    def peer_share(self) -> int:
        """The most sessions one peer of the anonymous partition holds (``max_sessions // PEER_SHARE_DIVISOR``, at
        least 1)."""
        return self._peer_share

    def _share(self, partition: str, peer: str | None) -> tuple[tuple[str, str | None], int]:
        # The anonymous partition is everyone without credentials: its shares are per peer. A partition of an
        # admission policy is one client (or one tenant): its share is per partition.
        if partition == ANONYMOUS_PARTITION and peer is not None:
            return (partition, peer_key(peer)), self._peer_share
        return (partition, None), self._partition_share

    def create(
        self,
        *,
        protocol_version: str,
        client_capabilities: ClientCapabilities,
        client_info: JsonObject | None,
        partition: str,
        subject: str | None = None,
        peer: str | None = None,
    ) -> LegacySession:
        """A new session of ``partition`` for the client at address ``peer`` (``None``: the transport has none).

        Idle sessions are swept first. When the client's share is full, its longest-idle session with nothing
        running is ended to make room; when the table is full, the table's. Raises :class:`SessionsFull` only when
        no such session exists."""
        if peer is not None and not isinstance(peer, str):
            raise TypeError("peer must be a str or None")
        self.sweep()
        key, cap = self._share(partition, peer)
        share = self._shares.get(key)
        if share is not None and len(share) >= cap:
            self._evict(share)
        if len(self._sessions) >= self._max:
            self._evict(self._sessions)
        session = LegacySession(
            protocol_version=protocol_version,
            client_capabilities=client_capabilities,
            client_info=client_info,
            partition=partition,
            subject=subject,
            clock=self._clock,
        )
        session._on_touch = self._used
        self._sessions[session.id] = session
        self._shares.setdefault(key, OrderedDict())[session.id] = session
        self._share_of[session.id] = key
        return session

    def _evict(self, sessions: OrderedDict[str, LegacySession]) -> None:
        # The longest-idle session with nothing running: the first such in least-recently-used order. The scan is
        # bounded by the table's size; busy sessions are the only ones passed over.
        for session_id, session in sessions.items():
            if not session.busy:
                self.remove(session_id)
                return
        raise SessionsFull(SessionLimitReason.SESSIONS)

    def _used(self, session: LegacySession) -> None:
        key = self._share_of.get(session.id)
        if key is None:
            return  # removed already
        self._sessions.move_to_end(session.id)
        self._shares[key].move_to_end(session.id)

    def get(self, session_id: str) -> LegacySession | None:
        """The live session with this id; ``None`` if unknown or expired (an expired one is removed and closed).
        Not marked used: only a request admitted to the session's partition does that (``LegacySession.touch``),
        so a caller who merely presents the id cannot keep a session from being the longest idle."""
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            return None
        if session.idle_for(self._clock()) >= self._idle:
            self.remove(session_id)
            return None
        return session

    def remove(self, session_id: str) -> bool:
        """End and forget a session (``DELETE``, expiry, eviction); ``False`` if no such session."""
        session = self._sessions.pop(session_id, None) if isinstance(session_id, str) else None
        if session is None:
            return False
        key = self._share_of.pop(session_id)
        share = self._shares[key]
        del share[session_id]
        if not share:
            del self._shares[key]
        session._on_touch = None
        session.close()
        return True

    def sweep(self) -> int:
        """Remove every idle session; how many were removed. Sessions are kept least recently used first, so the
        scan stops at the first unexpired session with nothing running (busy ones are passed over)."""
        now = self._clock()
        expired: list[str] = []
        for key, session in self._sessions.items():
            if session.busy:
                continue
            if session.idle_for(now) < self._idle:
                break
            expired.append(key)
        for key in expired:
            self.remove(key)
        return len(expired)

    def close(self) -> None:
        """End every session (server shutdown)."""
        for key in list(self._sessions):
            self.remove(key)
