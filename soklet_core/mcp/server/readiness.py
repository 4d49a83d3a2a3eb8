"""``Readiness``: whether this instance may take MCP traffic now, and the one bounded reason when it may not.

Several parts of a server can hold it back: the keyring not loaded yet, a newer fleet generation seen than the one
applied (store mode), a keyring file refused on reload, a fingerprint other than the one the operator expects, the
durable store's file lost. Each sets or clears its own :class:`NotReady` reason; the instance is ready when none is
set. The MCP transport answers 503 with ``Retry-After`` while it is not ready (a load balancer routes around it) and
``GET /v1/ready`` reports the first reason in the enum's order. A store outage alone is not a reason: a loaded
instance keeps serving with the keyring it holds.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable

__all__ = ["NotReady", "Readiness"]


class NotReady(enum.Enum):
    """Why an instance is not ready, in the order ``/v1/ready`` reports them. The set is closed; the values are
    the slugs a probe, a log line and a metric label show."""

    KEYRING_NOT_LOADED = "keyring-not-loaded"
    GENERATION_BEHIND = "generation-behind"
    KEYRING_FILE_REFUSED = "keyring-file-refused"
    FINGERPRINT_MISMATCH = "fingerprint-mismatch"
    STORE_FILE_LOST = "store-file-lost"


class Readiness:
    """The set of reasons holding this instance back. Thread-safe; reading it is one attribute load."""

    __slots__ = ("_first", "_lock", "_observers", "_reasons")

    def __init__(self, *reasons: NotReady) -> None:
        self._lock = threading.Lock()
        self._reasons: frozenset[NotReady] = frozenset(reasons)
        self._first: NotReady | None = _first(self._reasons)
        self._observers: list[Callable[[NotReady | None], None]] = []

    @property
    def reason(self) -> NotReady | None:
        """The first reason (in the enum's order) this instance is not ready, or ``None`` when it is ready."""
        return self._first

    @property
    def ready(self) -> bool:
        """True when no reason is set."""
        return self._first is None

    @property
    def reasons(self) -> frozenset[NotReady]:
        """Every reason set now."""
        return self._reasons

    def set(self, reason: NotReady, held: bool = True) -> None:
        """Hold the instance back for ``reason`` (``held=False`` clears it). Observers hear of a changed first
        reason, on the caller's thread."""
        with self._lock:
            reasons = self._reasons | {reason} if held else self._reasons - {reason}
            if reasons == self._reasons:
                return
            before = self._first
            self._reasons = reasons
            self._first = _first(reasons)
            after = self._first
            observers = list(self._observers) if after is not before else []
        for observer in observers:
            observer(after)

    def clear(self, reason: NotReady) -> None:
        """Clear ``reason``; the same as ``set(reason, False)``."""
        self.set(reason, False)

    def add_observer(self, observer: Callable[[NotReady | None], None]) -> None:
        """Call ``observer`` with the new first reason (``None``: ready) whenever it changes."""
        with self._lock:
            self._observers.append(observer)

    def __repr__(self) -> str:
        shown = ", ".join(reason.value for reason in NotReady if reason in self._reasons)
        return f"Readiness({shown or 'ready'})"


def _first(reasons: frozenset[NotReady]) -> NotReady | None:
    for reason in NotReady:
        if reason in reasons:
            return reason
    return None
