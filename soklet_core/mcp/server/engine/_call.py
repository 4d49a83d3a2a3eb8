"""What crosses the engine: a :class:`Call` in, an :class:`Outcome` out. No HTTP header and no encoded bytes.

Every transport (the 2026-07-28 HTTP transport, the 2025-era session engine, stdio) reads its own wire, builds a
:class:`Call` from values it has already checked, and encodes the :class:`Outcome` in its own framing. The engine
(:class:`~soklet_core.mcp.server.engine.Engine`) never sees where a call came from.

>>> RefusalKind("state-refused") is RefusalKind.STATE_REFUSED
True
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from soklet_core.json import JsonObject, ParamsDigest, params_digest, parse
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.context import RequestId
from soklet_core.mcp.model.input_required_result import InputRequiredResult
from soklet_core.mcp.server._jsonrpc import McpError
from soklet_core.mcp.server.admission import Admission

__all__ = [
    "Call",
    "CanonicalParams",
    "Complete",
    "DigestSource",
    "EncodedResult",
    "InputRequired",
    "Outcome",
    "ProgressChannel",
    "RefusalKind",
    "Refused",
    "ResultValue",
    "TaskCreated",
]


class DigestSource(Protocol):
    """Where the engine takes a call's params digest from, at most once and only when a framework-protected state
    is opened or sealed: the body bytes on HTTP, the canonical params elsewhere."""

    @property
    def size(self) -> int:
        """How much work taking the digest is, in bytes: above the inline body size it runs in a worker."""
        ...

    def take(self) -> ParamsDigest:
        """The digest (raises :class:`~soklet_core.json.JsonError` for params that cannot be digested)."""
        ...


class CanonicalParams:
    """A :class:`DigestSource` over a params value (for a caller without the request's bytes: a library caller, a
    2025-era round, a stdio line): the digest of its canonical form, taken once. ``size`` is how large the caller
    knows the params to be (the bytes they were parsed from), so that the engine digests large ones in a worker.

    One source may serve several calls whose params differ only in members the digest leaves out
    (``inputResponses``, ``requestState``: the rounds of one 2025-era operation); the digest is then taken once for
    all of them."""

    __slots__ = ("_params", "_size", "_taken")

    def __init__(self, params: JsonObject, size: int = 0) -> None:
        self._params = params
        self._size = size
        self._taken: ParamsDigest | None = None

    @property
    def size(self) -> int:
        """The size the caller gave."""
        return self._size

    def take(self) -> ParamsDigest:
        """The digest of the params value (raises :class:`~soklet_core.json.JsonError` when it cannot be taken)."""
        if self._taken is None:
            self._taken = params_digest(self._params, whole_request=False)
        return self._taken

    def __repr__(self) -> str:
        return f"CanonicalParams(size={self._size})"


class ProgressChannel(Protocol):
    """Where the transport receives a running handler's progress frames (called on the event-loop thread).

    ``allow_streaming()`` is called before the handler runs when no unmet CONDITIONAL capability can still turn
    the answer into an error; until then frames must be held back, not streamed. ``cancelled`` turns true when
    the client disconnects.
    """

    @property
    def cancelled(self) -> bool:
        """Whether the client has gone."""
        ...

    def allow_streaming(self) -> None:
        """The response may now be committed as a stream when a frame arrives."""
        ...

    def progress(self, frame: JsonObject) -> None:
        """One ``notifications/progress`` message."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One request as the engine runs it, from any transport: every member already checked by the transport
    (envelope, version, ``_meta``, admission) or by the era's rules."""

    method: str
    request_id: RequestId
    protocol_version: str
    params: JsonObject
    meta: JsonObject
    capabilities: ClientCapabilities
    admission: Admission
    endpoint_path: str
    digest: DigestSource

    def __repr__(self) -> str:
        # Params and _meta are attacker input: never in a repr.
        return f"Call(method={self.method!r}, protocol_version={self.protocol_version!r})"


class ResultValue(Protocol):
    """A complete result as a value: the transport asks for bytes (the 2026-07-28 wire) or for the JSON value
    (the 2025 era rewrites it)."""

    def to_wire(self) -> JsonObject:
        """The result object."""
        ...


@dataclass(frozen=True, slots=True)
class EncodedResult:
    """A complete result the engine holds encoded already (the lists and ``server/discover``, encoded once at start;
    a task's document; the tasks acknowledgement): the result object's bytes, without the server's ``_meta``, so
    that the 2026-07-28 transport splices them as they are."""

    body: bytes

    def encode(self) -> bytes:
        """The result object's bytes."""
        return self.body

    def to_wire(self) -> JsonObject:
        """The result object as a value (parsed: for the transports that rewrite it, not the 2026-07-28 path)."""
        value = parse(self.body)
        assert isinstance(value, JsonObject)
        return value

    def __repr__(self) -> str:
        return f"EncodedResult(bytes={len(self.body)})"


class RefusalKind(enum.Enum):
    """Why the engine refused a call: a closed set, so that a transport decides what to do from a value and never
    from a log string."""

    ENVELOPE = "envelope"
    META = "meta"
    UNSUPPORTED_VERSION = "unsupported-version"
    METHOD_NOT_FOUND = "method-not-found"
    UNAUTHORIZED = "unauthorized"
    INVALID_PARAMS = "invalid-params"
    UNKNOWN_OPERATION = "unknown-operation"
    INPUT_RESPONSES = "input-responses"
    MISSING_CAPABILITY = "missing-capability"
    #: The admission lacks a scope the operation requires (``required_scopes=``): 403 ``insufficient_scope``.
    INSUFFICIENT_SCOPE = "insufficient-scope"
    STATE_REFUSED = "state-refused"
    ROUND_LIMIT = "round-limit"
    TASK_NOT_FOUND = "task-not-found"
    BUSY = "busy"
    STORE_UNAVAILABLE = "store-unavailable"
    HANDLER_FAILED = "handler-failed"
    #: The handler or the interceptor raised an :class:`~soklet_core.mcp.server.McpError` of its own: its answer.
    APPLICATION = "application"
    #: The task manager refused a ``tasks/*`` request or a task's creation (other than not found).
    TASK_REFUSED = "task-refused"
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class Complete:
    """A complete result (a handler's, a list, discovery, a task's state or acknowledgement)."""

    result: ResultValue
    operation: str | None = None


@dataclass(frozen=True, slots=True)
class InputRequired:
    """The handler needs input: its requests, and the framework state sealed for the retry (``None``: none)."""

    result: InputRequiredResult
    sealed_state: str | None
    operation: str


@dataclass(frozen=True, slots=True)
class TaskCreated:
    """A task tool's call stored as a task: the ``CreateTaskResult``."""

    result: ResultValue
    operation: str


@dataclass(frozen=True, slots=True)
class Refused:
    """The call was refused: the closed kind a transport may act on, and the wire error it answers with."""

    kind: RefusalKind
    error: McpError
    operation: str | None = None


#: What :meth:`Engine.call` answers: one of four values.
Outcome: TypeAlias = Complete | InputRequired | TaskCreated | Refused
