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
import logging
import threading
from collections.abc import Callable
from typing import Final

from soklet_core.keys import Fingerprint, FingerprintComparison, ProtectionKeyring
from soklet_core.keys.fingerprint import CURRENT_FINGERPRINT_VERSION

__all__ = ["RETRY_AFTER_SECONDS", "ExpectedFingerprint", "NotReady", "Readiness"]

_logger = logging.getLogger("soklet.ready")

#: The ``Retry-After`` (seconds) of a not-ready answer, on the MCP endpoint and on ``/v1/ready``: a reason clears
#: within about this long once its cause is gone (a follower's next load, a reload), and a client that honours it
#: costs the instance one refused request per second at most.
RETRY_AFTER_SECONDS: Final = 1


class NotReady(enum.Enum):
    """Why an instance is not ready, in the order ``/v1/ready`` reports them. The set is closed; the values are
    the slugs a probe, a log line and a metric label show."""

    KEYRING_NOT_LOADED = "keyring-not-loaded"
    GENERATION_BEHIND = "generation-behind"
    KEYRING_FILE_REFUSED = "keyring-file-refused"
    FINGERPRINT_MISMATCH = "fingerprint-mismatch"
    STORE_FILE_LOST = "store-file-lost"


#: Reasons that hold a healthy instance back for a moment as a matter of course (a store-mode member between seeing
#: a generation and applying it, on every change): their line is INFO, not WARNING. What keeps one held back longer
#: (a KEK that cannot unwrap, an unreachable store) is logged by the part that failed.
_ROUTINE: Final = frozenset({NotReady.GENERATION_BEHIND})


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
        reason, on the caller's thread, and one line on ``soklet.ready`` tells the operator (WARNING when held
        back, INFO when ready again or held back for a routine moment: ``generation-behind``)."""
        with self._lock:
            reasons = self._reasons | {reason} if held else self._reasons - {reason}
            if reasons == self._reasons:
                return
            before = self._first
            self._reasons = reasons
            self._first = _first(reasons)
            after = self._first
            changed = after is not before
            observers = list(self._observers) if changed else []
        if changed:
            if after is None:
                _logger.info("ready: the MCP endpoint serves requests again")
            else:
                level = logging.INFO if after in _ROUTINE else logging.WARNING
                _logger.log(level, "not ready (%s): the MCP endpoint answers 503 until it clears", after.value)
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


class ExpectedFingerprint:
    """``soklet serve --expect-fingerprint``: holds the instance back (:attr:`NotReady.FINGERPRINT_MISMATCH`) while
    the live keyring's fingerprint differs from the one the operator expects. :meth:`check` runs at start and after
    every change of the keyring (a reload, an admin change); the keyring is compared in the expectation's version,
    which must be the current one (a v1 fingerprint names ids only and would call other bytes equal)."""

    __slots__ = ("_expected", "_readiness")

    def __init__(self, readiness: Readiness, expected: Fingerprint) -> None:
        if not isinstance(expected, Fingerprint) or expected.version != CURRENT_FINGERPRINT_VERSION:
            raise ValueError(f"the expected fingerprint must be a v{CURRENT_FINGERPRINT_VERSION} fingerprint")
        self._readiness = readiness
        self._expected = expected

    @property
    def expected(self) -> Fingerprint:
        """The fingerprint the operator expects."""
        return self._expected

    def check(self, keyring: ProtectionKeyring) -> bool:
        """Whether ``keyring`` has the expected fingerprint; sets or clears the reason accordingly."""
        fingerprint = keyring.fingerprint(version=self._expected.version)
        matches = fingerprint.compare(self._expected) is FingerprintComparison.EQUAL
        self._readiness.set(NotReady.FINGERPRINT_MISMATCH, not matches)
        return matches
