"""The server's tunables, spelled once: four frozen groups, each validated when it is built, and
:class:`ServerOptions` holding them (as httpx's ``Limits``/``Timeout`` or uvicorn's ``Config``).

This module is the home of every option's default and bounds. It sits below the rooms (it imports none of them),
so each room's constructor can take its group; the rooms re-export the constants they read from here.

>>> options = ServerOptions(http=HttpOptions(path="/api/mcp", max_request_body_bytes=1024))
>>> options.http.path, options.sessions.max_sessions == DEFAULT_MAX_SESSIONS
('/api/mcp', True)
>>> SessionOptions(max_sessions=MAX_SESSIONS_LIMIT + 1)
Traceback (most recent call last):
...
ValueError: max_sessions must be between 1 and 65536

Protection is not an option group: it is its own value, :class:`~soklet_core.protection.ProtectionConfig`, passed to
``McpServer(protection=...)``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from soklet_core import __version__
from soklet_core.json import DEFAULT_REQUEST_BODY_BYTES, MAX_REQUEST_BODY_BYTES, RESPONSE_OUTPUT_CEILING_BYTES
from soklet_core.mcp.model.results import CacheHint, CacheScope
from soklet_core.protection import ProtectionError, normalize_endpoint_path
from soklet_core.protocol import DEFAULT_ENDPOINT_PATH, DEFAULT_SHUTDOWN_GRACE_SECONDS, SUPPORTED_PROTOCOL_VERSIONS
from soklet_core.store import StoreError, TaskQuota

__all__ = [
    "DEFAULT_BODY_TIMEOUT_SECONDS",
    "DEFAULT_HEADER_TIMEOUT_SECONDS",
    "DEFAULT_INPUT_TIMEOUT_SECONDS",
    "DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS",
    "DEFAULT_LIST_CACHE_HINT",
    "DEFAULT_LIST_CACHE_TTL_MS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_HEAD_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_POLL_INTERVAL_MS",
    "DEFAULT_SERVER_NAME",
    "DEFAULT_SESSION_IDLE_SECONDS",
    "DEFAULT_TASK_TTL_MS",
    "MAX_CONNECTIONS_CEILING",
    "MAX_HEAD_BYTES_CEILING",
    "MAX_INPUT_TIMEOUT_SECONDS",
    "MAX_SESSIONS_LIMIT",
    "MAX_SESSION_IDLE_SECONDS",
    "MAX_STORED_TASKS_PER_PARTITION",
    "MAX_STORED_TASK_BYTES_PER_PARTITION",
    "MAX_TASK_MILLISECONDS",
    "MAX_TIMEOUT_SECONDS",
    "MIN_HEAD_BYTES",
    "MIN_INPUT_TIMEOUT_SECONDS",
    "MIN_SESSION_IDLE_SECONDS",
    "SHUTDOWN_MARGIN_SECONDS",
    "HttpLimits",
    "HttpOptions",
    "ProtocolEras",
    "ProtocolOptions",
    "ServerOptions",
    "SessionOptions",
    "TaskOptions",
]

# --- protocol ---------------------------------------------------------------------------------------------------

#: How long a client may reuse ``server/discover`` and the list results by default, in milliseconds: briefly, so a
#: redeployed server's new tools reach a pinned client within a minute.
DEFAULT_LIST_CACHE_TTL_MS: Final = 60_000
#: Cache hint of ``server/discover`` and the list results unless the server is given another (``list_cache_hint``):
#: private (a shared cache keyed by URL would serve one deployment's lists after the next) and brief.
DEFAULT_LIST_CACHE_HINT: Final = CacheHint(DEFAULT_LIST_CACHE_TTL_MS, CacheScope.PRIVATE)
#: The name a server gives in its ``serverInfo`` unless told another.
DEFAULT_SERVER_NAME: Final = "soklet"


class ProtocolEras(enum.Enum):
    """Which protocol eras a server speaks (``--protocol``): 2026-07-28 only, the 2025 era only, or both."""

    MODERN = "modern"
    LEGACY = "legacy"
    BOTH = "both"

    @property
    def modern(self) -> bool:
        """Whether 2026-07-28 requests are served."""
        return self is not ProtocolEras.LEGACY

    @property
    def legacy(self) -> bool:
        """Whether 2025-era sessions are served."""
        return self is not ProtocolEras.MODERN


# --- HTTP -------------------------------------------------------------------------------------------------------

#: Request line plus header fields, in bytes as received (64 KiB).
DEFAULT_MAX_HEAD_BYTES: Final = 64 * 1024
#: The smallest head limit accepted (a real MCP request head is about 300 bytes).
MIN_HEAD_BYTES: Final = 1024
#: The largest head limit accepted (1 MiB).
MAX_HEAD_BYTES_CEILING: Final = 1024 * 1024
#: Seconds a client has to send a complete request head.
DEFAULT_HEADER_TIMEOUT_SECONDS: Final = 10.0
#: Seconds a client has to send a complete body once its head arrived.
DEFAULT_BODY_TIMEOUT_SECONDS: Final = 30.0
#: Seconds an idle kept-alive connection stays open.
DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS: Final = 5.0
#: Open connections served at once; one more is answered 503 and closed.
DEFAULT_MAX_CONNECTIONS: Final = 512
#: The largest connection cap accepted.
MAX_CONNECTIONS_CEILING: Final = 65_536
#: Every timeout and the grace are at most one hour.
MAX_TIMEOUT_SECONDS: Final = 3600.0
#: uvicorn's own graceful-shutdown timeout exceeds the app's grace by this much, so the app always answers first.
SHUTDOWN_MARGIN_SECONDS: Final = 5.0

# --- 2025-era sessions ------------------------------------------------------------------------------------------

#: Sessions one table holds unless told otherwise; :data:`MAX_SESSIONS_LIMIT` at most.
DEFAULT_MAX_SESSIONS: Final = 1024
#: The largest ``max_sessions`` a table accepts.
MAX_SESSIONS_LIMIT: Final = 65536
#: Seconds an unused session with nothing running lives unless told otherwise (eight hours: a window left open
#: over a working day keeps its session; the count bound and eviction keep the table small);
#: :data:`MAX_SESSION_IDLE_SECONDS` at most.
DEFAULT_SESSION_IDLE_SECONDS: Final = 8 * 3600.0
#: The shortest idle time a table accepts.
MIN_SESSION_IDLE_SECONDS: Final = 1.0
#: The longest idle time a table accepts (one day).
MAX_SESSION_IDLE_SECONDS: Final = 86400.0
#: How long one input round waits for all the client's answers unless told otherwise.
DEFAULT_INPUT_TIMEOUT_SECONDS: Final = 300.0
#: Bounds of ``input_timeout_seconds``.
MIN_INPUT_TIMEOUT_SECONDS: Final = 1.0
MAX_INPUT_TIMEOUT_SECONDS: Final = 3600.0

# --- tasks ------------------------------------------------------------------------------------------------------

#: How long a task is kept from its creation (``ttlMs``): one hour.
DEFAULT_TASK_TTL_MS: Final = 3_600_000
#: How often a client should poll ``tasks/get`` (``pollIntervalMs``).
DEFAULT_POLL_INTERVAL_MS: Final = 500
#: The largest ``ttlMs`` or ``pollIntervalMs``: the largest integer a JSON peer reads exactly.
MAX_TASK_MILLISECONDS: Final = 2**53
#: Tasks one partition may keep in the store (finished ones included, until their ``ttlMs`` ends).
MAX_STORED_TASKS_PER_PARTITION: Final = 1000
#: Bytes of task documents (arguments, state, answers, result) one partition may keep in the store: 32 MiB.
MAX_STORED_TASK_BYTES_PER_PARTITION: Final = 32 * 1024 * 1024


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_seconds(name: str, value: float) -> None:
    if not _is_number(value) or not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise ValueError(f"{name} must be a number of seconds above 0 and at most {MAX_TIMEOUT_SECONDS:g}")


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if not _is_int(value) or not low <= value <= high:
        raise ValueError(f"{name} must be an int between {low} and {high}")


def _strings(name: str, values: Iterable[str]) -> tuple[str, ...]:
    # A str is itself an iterable of str: refused, or "/mcp" would become four one-letter values.
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise TypeError(f"{name} takes a tuple of str")
    items = tuple(values)
    if not all(isinstance(item, str) for item in items):
        raise TypeError(f"{name} takes a tuple of str")
    return items


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The limits and timeouts of the HTTP server: head size, header/body/keep-alive timeouts, connection cap and
    shutdown grace (:mod:`~soklet_core.mcp.server.http` says what each one does and what the client sees)."""

    max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES
    header_timeout_seconds: float = DEFAULT_HEADER_TIMEOUT_SECONDS
    body_timeout_seconds: float = DEFAULT_BODY_TIMEOUT_SECONDS
    keep_alive_timeout_seconds: float = DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    shutdown_grace_seconds: float = DEFAULT_SHUTDOWN_GRACE_SECONDS

    def __post_init__(self) -> None:
        _check_int("max_head_bytes", self.max_head_bytes, MIN_HEAD_BYTES, MAX_HEAD_BYTES_CEILING)
        _check_seconds("header_timeout_seconds", self.header_timeout_seconds)
        _check_seconds("body_timeout_seconds", self.body_timeout_seconds)
        _check_seconds("keep_alive_timeout_seconds", self.keep_alive_timeout_seconds)
        _check_int("max_connections", self.max_connections, 1, MAX_CONNECTIONS_CEILING)
        _check_seconds("shutdown_grace_seconds", self.shutdown_grace_seconds)

    @property
    def uvicorn_shutdown_timeout_seconds(self) -> int:
        """uvicorn's ``timeout_graceful_shutdown``: the grace plus :data:`SHUTDOWN_MARGIN_SECONDS`, whole seconds."""
        return math.ceil(self.shutdown_grace_seconds + SHUTDOWN_MARGIN_SECONDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolOptions:
    """What the server speaks and says about itself.

    * ``supported_versions`` — the 2026-07-28-style versions accepted, preferred first (at least one);
    * ``eras`` — :class:`ProtocolEras`: ``BOTH`` (the default) serves the 2025 era (``initialize``,
      ``Mcp-Session-Id`` sessions, server-to-client requests over SSE) beside 2026-07-28; ``MODERN`` refuses a
      2025-era ``initialize`` with -32022; ``LEGACY`` refuses 2026-07-28 requests with -32022;
    * ``server_name``, ``server_version`` — what ``_meta["io.modelcontextprotocol/serverInfo"]`` says on every
      result; ``instructions`` — the ``server/discover`` instructions;
    * ``list_cache_hint`` — cache hint of discovery and list results (default 60,000 ms, private);
    * ``sync_handlers_in_thread`` — run ``def`` handlers in a worker thread (the default) or, when ``False``, all on
      the event loop (only when every sync handler returns quickly without blocking).
    """

    supported_versions: tuple[str, ...] = SUPPORTED_PROTOCOL_VERSIONS
    eras: ProtocolEras = ProtocolEras.BOTH
    server_name: str = DEFAULT_SERVER_NAME
    server_version: str = __version__
    instructions: str | None = None
    list_cache_hint: CacheHint = DEFAULT_LIST_CACHE_HINT
    sync_handlers_in_thread: bool = True

    def __post_init__(self) -> None:
        versions = _strings("supported_versions", self.supported_versions)
        if not versions or not all(versions):
            raise ValueError("at least one protocol version must be supported")
        object.__setattr__(self, "supported_versions", versions)  # a list given is kept as a tuple
        if not isinstance(self.eras, ProtocolEras):
            raise TypeError("eras takes a ProtocolEras")
        if not isinstance(self.server_name, str) or not isinstance(self.server_version, str):
            raise TypeError("server_name and server_version take a str")
        if self.instructions is not None and not isinstance(self.instructions, str):
            raise TypeError("instructions take a str or None")
        if not isinstance(self.list_cache_hint, CacheHint):
            raise TypeError("list_cache_hint takes a CacheHint")
        if not isinstance(self.sync_handlers_in_thread, bool):
            raise TypeError("sync_handlers_in_thread takes a bool")


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpOptions:
    """The HTTP endpoint.

    * ``path`` — the endpoint path (default ``/mcp``);
    * ``allowed_hosts`` — ``Host`` values allowed besides the loopback names (``name`` or ``name:port``);
      ``allowed_origins`` — ``Origin`` values allowed besides loopback origins (``https://app.example.com``);
    * ``max_request_body_bytes`` — 10 MiB by default, at most 16 MiB; ``output_ceiling_bytes`` — the response
      output ceiling (default 4 MiB);
    * ``limits`` — head size, header/body/keep-alive timeouts, connection cap, shutdown grace (:class:`HttpLimits`):
      the app enforces the body timeout and the grace, ``uvicorn_config(server)`` hands the rest to uvicorn.
    """

    path: str = DEFAULT_ENDPOINT_PATH
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_request_body_bytes: int = DEFAULT_REQUEST_BODY_BYTES
    output_ceiling_bytes: int = RESPONSE_OUTPUT_CEILING_BYTES
    limits: HttpLimits = field(default_factory=HttpLimits)

    def __post_init__(self) -> None:
        try:
            normalize_endpoint_path(self.path)
        except ProtectionError:
            raise ValueError("the endpoint path must start with '/' and have no query or fragment") from None
        object.__setattr__(self, "allowed_hosts", _strings("allowed_hosts", self.allowed_hosts))
        object.__setattr__(self, "allowed_origins", _strings("allowed_origins", self.allowed_origins))
        limit = self.max_request_body_bytes
        if not _is_int(limit) or not 0 < limit <= MAX_REQUEST_BODY_BYTES:
            raise ValueError(f"the request body limit must be between 1 and {MAX_REQUEST_BODY_BYTES} bytes")
        if not _is_int(self.output_ceiling_bytes) or self.output_ceiling_bytes <= 0:
            raise ValueError("the output ceiling must be a positive int")
        if not isinstance(self.limits, HttpLimits):
            raise TypeError("http limits take an HttpLimits")


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOptions:
    """The 2025-era sessions (they live in this process: a fleet needs sticky routing for 2025-era clients).

    * ``max_sessions`` — live sessions at once (default 1024, 1..65536; a partition holds at most a quarter, an
      anonymous peer a sixteenth, and a full share or table ends its longest-idle session for a new one);
    * ``idle_seconds`` — an unused session with nothing running ends after this long (default 28800, eight hours;
      1..86400);
    * ``input_timeout_seconds`` — how long a request waits for the client's answers to one round of
      server-to-client requests (default 300, 1..3600).
    """

    max_sessions: int = DEFAULT_MAX_SESSIONS
    idle_seconds: float = DEFAULT_SESSION_IDLE_SECONDS
    input_timeout_seconds: float = DEFAULT_INPUT_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        if not _is_int(self.max_sessions):
            raise TypeError("max_sessions must be an int")
        if not 1 <= self.max_sessions <= MAX_SESSIONS_LIMIT:
            raise ValueError(f"max_sessions must be between 1 and {MAX_SESSIONS_LIMIT}")
        if not _is_number(self.idle_seconds):
            raise TypeError("idle_seconds must be a number")
        if not MIN_SESSION_IDLE_SECONDS <= self.idle_seconds <= MAX_SESSION_IDLE_SECONDS:
            raise ValueError(
                f"idle_seconds must be between {MIN_SESSION_IDLE_SECONDS:g} and {MAX_SESSION_IDLE_SECONDS:g}"
            )
        if not _is_number(self.input_timeout_seconds):
            raise TypeError("input_timeout_seconds must be a number")
        if not MIN_INPUT_TIMEOUT_SECONDS <= self.input_timeout_seconds <= MAX_INPUT_TIMEOUT_SECONDS:
            raise ValueError(
                f"input_timeout_seconds must be between {MIN_INPUT_TIMEOUT_SECONDS:g} and {MAX_INPUT_TIMEOUT_SECONDS:g}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOptions:
    """The tasks extension (used only with a durable store).

    * ``ttl_ms`` — how long a task is kept from its creation (default 3,600,000; ``None``: unlimited);
    * ``poll_interval_ms`` — the poll interval tasks name (default 500);
    * ``max_per_partition`` and ``max_bytes_per_partition`` — what one partition may keep in the store (default
      1,000 tasks and 32 MiB of task documents; past either a creation gets -32603 ``Too many stored tasks``).
    """

    ttl_ms: int | None = DEFAULT_TASK_TTL_MS
    poll_interval_ms: int = DEFAULT_POLL_INTERVAL_MS
    max_per_partition: int = MAX_STORED_TASKS_PER_PARTITION
    max_bytes_per_partition: int = MAX_STORED_TASK_BYTES_PER_PARTITION

    def __post_init__(self) -> None:
        for name, value in (("ttl_ms", self.ttl_ms), ("poll_interval_ms", self.poll_interval_ms)):
            if value is None and name == "ttl_ms":
                continue
            if not _is_int(value) or not 0 < value <= MAX_TASK_MILLISECONDS:  # type: ignore[operator]
                raise ValueError(f"{name} must be a positive int (milliseconds)")
        self.quota()  # the store's quota is the one home of its bounds

    def quota(self) -> TaskQuota:
        """The store quota of one partition these options name."""
        try:
            return TaskQuota(max_tasks=self.max_per_partition, max_bytes=self.max_bytes_per_partition)
        except StoreError:
            raise ValueError("max_per_partition and max_bytes_per_partition must be positive ints") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerOptions:
    """Every tunable of an :class:`~soklet_core.mcp.server.McpServer`, in four groups (each defaulted)."""

    protocol: ProtocolOptions = field(default_factory=ProtocolOptions)
    http: HttpOptions = field(default_factory=HttpOptions)
    sessions: SessionOptions = field(default_factory=SessionOptions)
    tasks: TaskOptions = field(default_factory=TaskOptions)

    def __post_init__(self) -> None:
        groups = (
            ("protocol", self.protocol, ProtocolOptions),
            ("http", self.http, HttpOptions),
            ("sessions", self.sessions, SessionOptions),
            ("tasks", self.tasks, TaskOptions),
        )
        for name, value, kind in groups:
            if not isinstance(value, kind):
                raise TypeError(f"ServerOptions.{name} takes a {kind.__name__}")
