"""Durable application handles: the server-side repository behind an APPLICATION_PROTECTED workflow.

A multi-round tool whose state must outlive one process (or reach every instance of a fleet) keeps that state in a
:class:`~soklet_core.store.DurableStore` and sends the client only an opaque handle as its ``requestState``::

    handles = HandleRepository(store)
    handle = await handles.issue(context, {"step": "quantity"})          # round 1
    state = await handles.resume(context)                                # a retry: the state behind its handle
    fresh = await handles.consume_and_replace(context, {"step": "confirm"})  # rotate (None: finished)

Each entry is bound to the tenant, the admitted principal (``identity.subject``), the authorization partition, the
operation and an expiry. A handle is :data:`HANDLE_BYTES` bytes from the OS CSPRNG (base64url, no meaning of its
own); the store keys the entry by the handle's SHA-256 only, so a copy of the store's data holds no live handle.
``consume_and_replace`` is the store's single compare-and-swap transaction: of any number of concurrent retries
with one handle, exactly one consumes it, and a retry whose binding differs consumes nothing.

Every way a handle can fail — missing, malformed, unknown, expired, replayed, another tenant, principal, partition
or operation, or a lost compare-and-swap — raises the one domain error :class:`HandleRejected`, which tells no
case from another. A handler lets it propagate: the engine answers it in its one place (the same bytes on the wire
for every case: HTTP 400, -32602, the request-state refusal sentence, and the one access-log reason
:data:`HANDLE_REJECTED_REASON`), so neither the client nor the log tells the cases apart. The operator sees only a
count (:attr:`HandleRepository.rejected`).

Expired entries do not pile up: every ``purge_every`` handles it stores (default :data:`DEFAULT_PURGE_EVERY`), the
repository deletes the store's expired entries in the same call, so the table holds at most the live handles plus
those that expired since the last purge (``soklet handles purge-expired`` does the same on demand).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from soklet_core.errors import SokletError
from soklet_core.json import JsonError, JsonValue, parse, serialize
from soklet_core.mcp.model.context import RequestContext
from soklet_core.mcp.model.url_policy import DEFAULT_HANDLE_BYTES, is_opaque_handle, mint_url_handle
from soklet_core.store import MAX_HANDLE_STATE_BYTES, MAX_KEY_CHARS, DurableStore, HandleBinding, HandleRecord
from soklet_core.store.records import from_millis, to_millis

__all__ = [
    "DEFAULT_HANDLE_LIFETIME",
    "DEFAULT_HANDLE_TENANT",
    "DEFAULT_PURGE_EVERY",
    "HANDLE_BYTES",
    "HANDLE_REJECTED_REASON",
    "MAX_HANDLE_LIFETIME",
    "HandleRejected",
    "HandleRepository",
    "looks_like_handle",
]

#: Random bytes per handle (256 bits from ``secrets``); the handle is their unpadded base64url text.
HANDLE_BYTES: Final = DEFAULT_HANDLE_BYTES
#: How long an issued handle stays live unless the repository is given another lifetime.
DEFAULT_HANDLE_LIFETIME: Final = timedelta(minutes=15)
#: The longest lifetime a repository accepts: a handle is a bearer continuation, not a session.
MAX_HANDLE_LIFETIME: Final = timedelta(days=1)
#: The tenant of a repository that is not given one.
DEFAULT_HANDLE_TENANT: Final = "default"
#: How many handles a repository stores between two purges of the store's expired entries.
DEFAULT_PURGE_EVERY: Final = 1024
#: The access-log reason of every refused handle, whatever the case.
HANDLE_REJECTED_REASON: Final = "handle-rejected"

# A minted handle's length in characters: base64url of HANDLE_BYTES without padding.
_HANDLE_CHARS: Final = len(base64.urlsafe_b64encode(bytes(HANDLE_BYTES)).rstrip(b"="))


class HandleRejected(SokletError):
    """A handle refused by a :class:`HandleRepository`, whatever the case (missing, malformed, unknown, expired,
    replayed, bound to another caller or operation, or a lost compare-and-swap).

    Its ``reason`` is ``None``: the cases are one on purpose (a caller, a client or a log that told them apart
    would learn whose handle it holds), so no closed enum of them exists. A handler lets it propagate; the engine
    gives its one wire answer. Raised fresh each time, so that no traceback is shared between requests.
    """

    def __init__(self) -> None:
        super().__init__(None, HANDLE_REJECTED_REASON)


def looks_like_handle(text: object) -> bool:
    """Whether ``text`` has a minted handle's shape: :data:`HANDLE_BYTES` bytes as unpadded base64url. Says nothing
    of whether a store holds it; no framework-sealed state is ever that short (``soklet inspect-state`` tells
    the two apart by it)."""
    return isinstance(text, str) and len(text) == _HANDLE_CHARS and is_opaque_handle(text)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _store_key(handle: str) -> str:
    """What the store keys an entry by: the SHA-256 of the handle, base64url (the handle itself is never stored)."""
    return base64.urlsafe_b64encode(hashlib.sha256(handle.encode("ascii")).digest()).rstrip(b"=").decode("ascii")


class HandleRepository:
    """Issues, resumes and rotates durable application handles over a :class:`~soklet_core.store.DurableStore`.

    ``tenant`` (1-256 characters) is bound into every entry, so repositories of different tenants sharing one
    store never accept each other's handles; ``lifetime`` (positive, at most :data:`MAX_HANDLE_LIFETIME`) is how
    long each issued handle stays live; ``purge_every`` (at least 1) is how many handles it stores between two
    purges of expired entries; ``clock`` returns the current time, timezone-aware (tests move it). The store is
    opened on first use (opening is idempotent), on the event loop that uses the repository.
    """

    __slots__ = ("_clock", "_lifetime", "_opened", "_purge_every", "_rejected", "_store", "_tenant", "_writes")

    def __init__(
        self,
        store: DurableStore,
        *,
        tenant: str = DEFAULT_HANDLE_TENANT,
        lifetime: timedelta = DEFAULT_HANDLE_LIFETIME,
        purge_every: int = DEFAULT_PURGE_EVERY,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if not isinstance(tenant, str) or not 0 < len(tenant) <= MAX_KEY_CHARS:
            raise ValueError(f"tenant must be a string of 1 to {MAX_KEY_CHARS} characters")
        if not isinstance(lifetime, timedelta) or not timedelta(0) < lifetime <= MAX_HANDLE_LIFETIME:
            raise ValueError("lifetime must be a timedelta above zero and at most one day")
        if isinstance(purge_every, bool) or not isinstance(purge_every, int) or purge_every < 1:
            raise ValueError("purge_every must be an integer of at least 1")
        if clock is not None and not callable(clock):
            raise TypeError("clock must be callable")
        self._store = store
        self._tenant = tenant
        self._lifetime = lifetime
        self._clock: Callable[[], datetime] = clock if clock is not None else _utc_now
        self._purge_every = purge_every
        self._opened = False
        self._rejected = 0
        self._writes = 0

    @property
    def store(self) -> DurableStore:
        """The store the entries live in."""
        return self._store

    @property
    def tenant(self) -> str:
        """The tenant bound into every entry."""
        return self._tenant

    @property
    def lifetime(self) -> timedelta:
        """How long an issued handle stays live."""
        return self._lifetime

    @property
    def rejected(self) -> int:
        """How many handles this repository refused (every case counted together, never told apart)."""
        return self._rejected

    def binding(self, context: RequestContext) -> HandleBinding:
        """What an entry issued for ``context`` is bound to: tenant, principal, partition and operation."""
        return HandleBinding(
            tenant=self._tenant,
            principal=context.identity.subject,
            partition=context.partition,
            operation=context.operation_name,
        )

    async def issue(self, context: RequestContext, state: Any) -> str:
        """A fresh handle bound to ``context``'s caller and operation, standing for ``state`` (a JSON value, or
        plain Python data converted as by ``JsonValue.from_python``). The entry is stored before it returns.
        Raises :class:`~soklet_core.store.StoreError` (``too-large`` for a state over the store's limit)."""
        await self._open()
        handle, record = self._record(self.binding(context), state, self._now())
        await self._store.insert_handle(record)
        await self._stored()
        return handle

    async def resume(self, context: RequestContext) -> JsonValue:
        """The state behind ``context``'s handle (its ``application_request_state``), consuming nothing.

        Raises :class:`HandleRejected` unless the handle is live and bound to exactly this caller and operation.
        """
        handle = self._presented(context)
        await self._open()
        record = await self._store.peek_handle(_store_key(handle), self.binding(context), self._now())
        if record is None:
            raise self._reject()
        try:
            return parse(record.state, max_bytes=MAX_HANDLE_STATE_BYTES)
        except JsonError:  # a row this repository did not write: refused like any other unknown handle
            raise self._reject() from None

    async def consume_and_replace(self, context: RequestContext, next_state: Any | None) -> str | None:
        """Consume ``context``'s handle and, unless ``next_state`` is ``None`` (the workflow finished), store
        ``next_state`` under a fresh handle bound to the same caller and operation, in one transaction.

        Returns the fresh handle (``None`` when finished). Raises :class:`HandleRejected` when the handle is not
        live for this caller — including when a concurrent retry consumed it first; another caller's entry is
        never consumed.
        """
        handle = self._presented(context)
        await self._open()
        binding = self.binding(context)
        now = self._now()
        fresh: str | None = None
        replacement: HandleRecord | None = None
        if next_state is not None:
            fresh, replacement = self._record(binding, next_state, now)
        if not await self._store.consume_and_replace(_store_key(handle), binding, now, replacement):
            raise self._reject()
        if replacement is not None:
            await self._stored()
        return fresh

    def _presented(self, context: RequestContext) -> str:
        """The handle ``context`` carries, if it has a minted handle's shape (a cheap refusal before the store)."""
        handle = context.application_request_state
        if handle is None or not looks_like_handle(handle):
            raise self._reject()
        return handle

    def _now(self) -> datetime:
        """The clock's time as the store keeps times (UTC, whole milliseconds), so records built from it are
        taken as they are."""
        return from_millis(to_millis(self._clock()))

    def _record(self, binding: HandleBinding, state: Any, now: datetime) -> tuple[str, HandleRecord]:
        value = state if isinstance(state, JsonValue) else JsonValue.from_python(state)
        handle = mint_url_handle(HANDLE_BYTES)
        record = HandleRecord(
            handle=_store_key(handle),
            binding=binding,
            state=serialize(value),
            created_at=now,
            expires_at=now + self._lifetime,
        )
        return handle, record

    async def _stored(self) -> None:
        """Count one stored handle; every ``purge_every`` of them, delete the store's expired entries."""
        self._writes += 1
        if self._writes >= self._purge_every:
            self._writes = 0
            await self._store.purge_expired_handles(self._now())

    async def _open(self) -> None:
        if not self._opened:
            await self._store.open()
            self._opened = True

    def _reject(self) -> HandleRejected:
        self._rejected += 1
        return HandleRejected()

    def __repr__(self) -> str:
        return f"HandleRepository(store={self._store.backend}, tenant={self._tenant!r}, lifetime={self._lifetime})"
