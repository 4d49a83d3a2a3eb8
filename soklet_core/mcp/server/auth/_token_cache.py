"""The bounded, digest-keyed cache of token verdicts: the one home both token policies keep their answers in.

An entry is keyed by the SHA-256 digest of a bearer token, never by the token: a memory dump or a debugger shows
which digests were seen, not a credential anyone could replay. The cache holds at most ``capacity`` entries and
evicts the least recently used one first, so a flood of distinct forged tokens costs bounded memory. Each entry
carries its own deadline on the monotonic clock (a wall-clock step neither revives nor kills an entry early).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["TokenCache", "token_digest"]

_V = TypeVar("_V")


def token_digest(token: str) -> bytes:
    """The SHA-256 digest a token is cached under (32 bytes); the token itself is never kept."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenCache(Generic[_V]):
    """At most ``capacity`` values, each under a token digest until its own deadline; least recently used first out.

    ``clock`` is the monotonic clock the deadlines are read on (a parameter so that tests can move time).
    Not thread-safe: it lives on one event loop, where every operation is a few dictionary steps.
    """

    __slots__ = ("_capacity", "_clock", "_entries")

    def __init__(self, capacity: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError("a token cache holds at least one entry")
        self._capacity = capacity
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, _V]] = OrderedDict()

    def get(self, digest: bytes) -> _V | None:
        """The live value under ``digest``, or ``None`` (an expired entry is dropped on the way)."""
        entry = self._entries.get(digest)
        if entry is None:
            return None
        deadline, value = entry
        if self._clock() >= deadline:
            del self._entries[digest]
            return None
        self._entries.move_to_end(digest)
        return value

    def put(self, digest: bytes, value: _V, ttl_seconds: float) -> None:
        """Keep ``value`` under ``digest`` for ``ttl_seconds`` (nothing is kept for a span of zero or less)."""
        if ttl_seconds <= 0:
            self._entries.pop(digest, None)
            return
        self._entries[digest] = (self._clock() + ttl_seconds, value)
        self._entries.move_to_end(digest)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def discard(self, digest: bytes) -> None:
        """Forget the entry under ``digest``, if any."""
        self._entries.pop(digest, None)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"TokenCache(<{len(self._entries)} of {self._capacity} entries>)"
