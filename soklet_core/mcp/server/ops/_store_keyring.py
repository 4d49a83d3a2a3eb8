"""``StoreKeyring``: the live keyring of a fleet member that takes its keyring from the store (store mode).

The fleet's keyring lives in the durable store, wrapped under a key-encryption key, with one generation every
change raises (:class:`~soklet_core.store.FleetKeyring`). This module keeps one server's
:class:`~soklet_core.keys.KeyringManager` equal to it:

* the **follower** waits for a newer generation (``wait_for_keyring_change``: PostgreSQL ``LISTEN/NOTIFY``, a poll
  on SQLite and as the fallback), loads it (unwrapped on a worker thread) and swaps it in; a change committed to a
  reachable store is applied within :data:`PROPAGATION_BOUND_SECONDS`;
* from the moment it has seen a generation newer than the one it applied until it applied it, the instance is
  **not ready** (:attr:`.NotReady.GENERATION_BEHIND`): the MCP endpoint answers 503, so it never seals
  with a key older than the newest generation it has seen (a load that fails, a KEK that cannot unwrap, a key still
  reserved for a seal: it stays held back and tries again every :data:`RETRY_SECONDS`). A process loads the current
  generation before it serves at all;
* a **heartbeat** every :data:`HEARTBEAT_SECONDS` records in the store the instance's name, process id, the
  generation applied, its v2 fingerprint, its wall clock, its admin URL and its longest state lifetime (what a
  store rotation reads to know its members and wait for them);
* the admin API's changes (stage, activate, remove) go through the store: one compare-and-swap transaction that
  raises the generation, applied here at once and by every other member through its follower; ``reload`` loads now.

A store outage changes nothing of what is served: the keyring held stays live (``soklet_store_up`` says 0, one
WARNING line when the store stops answering, one INFO line when it answers again) and the follower keeps trying. A
SQLite store whose file was removed or replaced holds the instance back (``store-file-lost``): only a restart
mends it. Each applied change writes one ``soklet.admin.audit`` line (who, what, key id, generation, fingerprint,
never material).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

from soklet_core.errors import SokletError
from soklet_core.keys import (
    KeyInUse,
    KeyringManager,
    KeyringSnapshot,
    KeyWrapError,
    ProtectionKey,
    printable_name,
)
from soklet_core.keys.fingerprint import CURRENT_FINGERPRINT_VERSION, FINGERPRINT_VERSIONS
from soklet_core.mcp.server.ops._live_keyring import announce_change
from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.mcp.server.ops._readiness import NotReady, Readiness
from soklet_core.store import FleetKeyring, LoadedFleetKeyring, SqliteStore, StoreError, StoreErrorReason
from soklet_core.store.keyring_records import KEYRING_POLL_SECONDS, Heartbeat
from soklet_core.store.records import STORE_TIMEOUT_SECONDS

__all__ = [
    "FOLLOW_WAIT_SECONDS",
    "HEARTBEAT_SECONDS",
    "PROPAGATION_BOUND_SECONDS",
    "RETRY_SECONDS",
    "StoreKeyring",
]

#: How often an instance records its heartbeat in the store.
HEARTBEAT_SECONDS: Final = 2.0
#: How long one wait of the follower for a newer generation lasts before it asks again (each call is bounded).
FOLLOW_WAIT_SECONDS: Final = 30.0
#: After a failed load or apply (a store outage, a KEK that cannot unwrap, a key still reserved), the follower
#: tries again this much later; a store that does not answer is asked again this much later too.
RETRY_SECONDS: Final = 1.0
#: A change committed to a reachable store reaches every following instance within this bound: one poll interval
#: (PostgreSQL usually hears it at once), one read of the generation and one load, each bounded by the store's
#: timeout (a local KEK unwraps in microseconds; a KEK command has its own bound per key).
PROPAGATION_BOUND_SECONDS: Final = KEYRING_POLL_SECONDS + 2 * STORE_TIMEOUT_SECONDS
#: How long an admin change waits for the store (read, unwrap, compare-and-swap, a few retries of a lost race).
_CHANGE_TIMEOUT_SECONDS: Final = 6 * STORE_TIMEOUT_SECONDS

_logger = logging.getLogger("soklet.admin")

_T = TypeVar("_T")


class StoreKeyring:
    """The :class:`~.live_keyring.KeyringHolder` of a store-mode server: ``manager`` follows the fleet keyring in
    ``fleet``'s store, starting from ``loaded`` (what the process loaded before it served).

    The snapshot reports the fleet generation applied (not the manager's own count), so every member that applied
    one generation reports the same number. :meth:`run` (on the serving event loop) follows the store and beats
    until cancelled; the admin changes block (call them from a worker thread, as the admin API does) and run on
    that loop.
    """

    __slots__ = (
        "_admin_url",
        "_applied",
        "_fingerprint_version",
        "_fleet",
        "_instance",
        "_lifetime",
        "_lock",
        "_loop",
        "_manager",
        "_metrics",
        "_observers",
        "_process_id",
        "_readiness",
        "_reloads",
        "_seen",
        "_store_down",
    )

    def __init__(
        self,
        manager: KeyringManager,
        fleet: FleetKeyring,
        loaded: LoadedFleetKeyring,
        *,
        readiness: Readiness,
        instance: str,
        process_id: str,
        max_state_lifetime: timedelta,
        admin_url: str | None = None,
        metrics: ServerMetrics | None = None,
        fingerprint_version: int = CURRENT_FINGERPRINT_VERSION,
    ) -> None:
        if fingerprint_version not in FINGERPRINT_VERSIONS:
            raise ValueError(f"fingerprint_version must be one of {FINGERPRINT_VERSIONS}")
        if manager.current() != loaded.keyring:
            raise ValueError("the manager must hold the loaded keyring")
        self._manager = manager
        self._fleet = fleet
        self._readiness = readiness
        self._instance = instance
        self._process_id = process_id
        self._lifetime = max_state_lifetime
        self._admin_url = admin_url
        self._metrics = metrics
        self._fingerprint_version = fingerprint_version
        self._lock = threading.Lock()
        self._applied = loaded
        self._seen = loaded.generation
        self._store_down = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._observers: list[Callable[[KeyringSnapshot], None]] = []
        self._reloads: set[asyncio.Task[None]] = set()  # held until done: the loop keeps weak references only
        # Loaded before serving: nothing holds this instance back for its keyring.
        readiness.clear(NotReady.KEYRING_NOT_LOADED)
        readiness.clear(NotReady.GENERATION_BEHIND)
        if metrics is not None:
            metrics.fleet_generation(loaded.generation)

    # -- what the admin API reads ---------------------------------------------------------------------------------

    @property
    def manager(self) -> KeyringManager:
        """The live manager the server seals and opens with."""
        return self._manager

    @property
    def generation(self) -> int:
        """The fleet generation applied."""
        return self._applied.generation

    @property
    def running(self) -> bool:
        """Whether :meth:`run` follows the store now (admin changes need it: they run on its loop)."""
        return self._loop is not None

    @property
    def seen_generation(self) -> int:
        """The newest fleet generation this instance has seen in the store."""
        return self._seen

    def snapshot(self) -> KeyringSnapshot:
        """The manager's snapshot in the configured fingerprint version, labelled with the fleet generation."""
        with self._lock:  # the generation and the keyring applied with it, never one without the other
            generation = self._applied.generation
            snapshot = self._manager.snapshot(fingerprint_version=self._fingerprint_version)
        return dataclasses.replace(snapshot, generation=generation)

    def created(self, key_id: str) -> str | None:
        """When ``key_id`` was created, as the store records it (ISO 8601)."""
        moment = self._applied.created.get(key_id)
        return None if moment is None else moment.isoformat()

    def retired(self, key_id: str) -> str | None:
        """When ``key_id`` stopped sealing, as the store records it (ISO 8601), or ``None``."""
        moment = self._applied.retired.get(key_id)
        return None if moment is None else moment.isoformat()

    def add_observer(self, observer: Callable[[KeyringSnapshot], None]) -> None:
        """Call ``observer(snapshot)`` now and after every applied generation (e.g. metrics)."""
        self._observers.append(observer)
        observer(self.snapshot())

    # -- admin changes (blocking: from a worker thread) -----------------------------------------------------------

    def stage(self, key: ProtectionKey, *, actor: str) -> KeyringSnapshot:
        """Stage ``key`` in the fleet keyring (identical re-stage: no change; its id with other bytes: refused)."""
        return self._change("stage", key.id, lambda: self._fleet.stage(key), actor)

    def activate(self, key_id: str, *, actor: str) -> KeyringSnapshot:
        """Make the staged ``key_id`` the fleet's active key."""
        return self._change("activate", key_id, lambda: self._fleet.activate(key_id), actor)

    def remove(self, key_id: str, *, actor: str) -> KeyringSnapshot:
        """Remove verification key ``key_id`` from the fleet keyring: refused while a seal here holds it
        (``KeyInUse``) and until the longest state lifetime passed since it stopped sealing."""
        reserved = self._manager.outstanding_reservations()
        if key_id in reserved:
            _logger.warning("keyring remove of %s by %s refused: key-in-use", _shown(key_id), actor)
            raise KeyInUse(key_id)
        return self._change(
            "remove", key_id, lambda: self._fleet.remove(key_id, max_state_lifetime=self._lifetime), actor
        )

    def reload(self, *, actor: str) -> KeyringSnapshot:
        """Load the fleet keyring now and apply it (a newer generation than the one applied)."""
        loaded = self._on_loop(self._load())
        self._apply(loaded, "reload", None, actor)
        return self.snapshot()

    def _change(
        self,
        action: str,
        key_id: str,
        change: Callable[[], Coroutine[Any, Any, LoadedFleetKeyring]],
        actor: str,
    ) -> KeyringSnapshot:
        try:
            loaded = self._on_loop(change())
        except Exception as error:
            reason = error.reason if isinstance(error, SokletError) else None
            shown = type(error).__name__ if reason is None else reason.value
            _logger.warning("keyring %s of %s by %s refused: %s", action, _shown(key_id), actor, shown)
            raise
        self._apply(loaded, action, key_id, actor)
        return self.snapshot()

    def _on_loop(self, work: Coroutine[Any, Any, _T]) -> _T:
        """Run ``work`` on the serving loop (the store's connections belong to it) and wait for it, bounded."""
        loop = self._loop
        if loop is None or loop.is_closed():
            work.close()
            raise StoreError(StoreErrorReason.UNAVAILABLE, "the store keyring is not running")
        future = asyncio.run_coroutine_threadsafe(work, loop)
        try:
            return future.result(_CHANGE_TIMEOUT_SECONDS)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise StoreError(StoreErrorReason.UNAVAILABLE, "keyring change: the store did not answer") from None

    # -- the follower and the heartbeat ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Follow the store and beat until cancelled (call on the serving event loop, after the store opened)."""
        self._loop = asyncio.get_running_loop()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._follow(), name="soklet-keyring-follow")
                group.create_task(self._beat_forever(), name="soklet-heartbeat")
        finally:
            self._loop = None

    def request_reload(self) -> None:
        """Load the fleet keyring now (safe to call from a signal handler; nothing when not running)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._start_reload)

    def _start_reload(self) -> None:
        task = asyncio.get_running_loop().create_task(self._reload_now())
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    async def _reload_now(self) -> None:
        with contextlib.suppress(StoreError, KeyWrapError, KeyInUse):
            await self._catch_up("sighup")

    async def _follow(self) -> None:
        while True:
            try:
                await self._follow_once()
            except (StoreError, KeyWrapError, KeyInUse):
                await asyncio.sleep(RETRY_SECONDS)  # logged where it happened
            except Exception as error:  # the follower must outlive any surprise; the keyring held stays
                _logger.error("following the store's keyring failed: %s; trying again", type(error).__name__)
                await asyncio.sleep(RETRY_SECONDS)

    async def _follow_once(self) -> None:
        """Wait (bounded) for a newer generation; load and apply it when there is one."""
        try:
            latest = await self._fleet.store.wait_for_keyring_change(self._applied.generation, FOLLOW_WAIT_SECONDS)
        except StoreError as error:
            self._store_failed(error)
            raise
        self._store_answered()
        self._saw(latest)
        if latest > self._applied.generation:
            await self._catch_up("store")

    async def _catch_up(self, actor: str) -> None:
        """Load and apply the newest generation; failures are logged (bounded reasons) and re-raised."""
        try:
            loaded = await self._load()
        except StoreError as error:
            self._store_failed(error)
            raise
        except KeyWrapError as error:
            # Every member shares one KEK: a key this one cannot unwrap is the operator's to mend.
            _logger.error(
                "fleet keyring generation %d cannot be applied: %s; this instance stays not ready",
                self._seen,
                error.reason.value,
            )
            raise
        self._store_answered()
        try:
            self._apply(loaded, "follow" if actor == "store" else "reload", None, actor)
        except KeyInUse:
            # A seal in flight still holds a key the new generation drops: the next try comes after it.
            _logger.info("fleet keyring generation %d waits for a seal in flight", loaded.generation)
            raise

    async def _load(self) -> LoadedFleetKeyring:
        # A generation that only re-wrapped the keys held (a KEK rewrap) is applied without unwrapping them.
        loaded = await self._fleet.load(known=self._applied)
        if loaded is None:
            raise StoreError(StoreErrorReason.NO_KEYRING, "the store no longer holds a fleet keyring")
        self._saw(loaded.generation)
        return loaded

    async def _beat_forever(self) -> None:
        store = self._fleet.store
        lifetime_ms = int(self._lifetime / timedelta(milliseconds=1))
        while True:
            now = datetime.now(UTC)
            with self._lock:  # the generation and the keyring applied with it, never one without the other
                generation, keyring = self._applied.generation, self._manager.current()
            try:
                heartbeat = Heartbeat(
                    instance=self._instance,
                    process_id=self._process_id,
                    generation=generation,
                    fingerprint=keyring.fingerprint(CURRENT_FINGERPRINT_VERSION).value,
                    clock=now,
                    admin_url=self._admin_url,
                    seen_at=now,
                    max_state_lifetime_ms=lifetime_ms,
                )
                await store.beat(heartbeat)
            except StoreError as error:
                self._store_failed(error)
            except Exception as error:  # the heartbeat must outlive any surprise
                _logger.error("heartbeat failed: %s; trying again", type(error).__name__)
            else:
                self._store_answered()
            await asyncio.sleep(HEARTBEAT_SECONDS)

    # -- state ------------------------------------------------------------------------------------------------------

    def _saw(self, generation: int) -> None:
        """Note the store's newest generation: newer than the one applied holds the instance back."""
        with self._lock:
            if generation > self._seen:
                self._seen = generation
            behind = self._seen > self._applied.generation
            seen = self._seen
        self._readiness.set(NotReady.GENERATION_BEHIND, behind)
        if self._metrics is not None:
            self._metrics.fleet_generation(seen)

    def _apply(self, loaded: LoadedFleetKeyring, action: str, key_id: str | None, actor: str) -> None:
        """Make ``loaded`` live unless a newer generation already is (``KeyInUse``: a seal still holds a key it
        drops; nothing changes)."""
        with self._lock:
            if loaded.generation <= self._applied.generation:
                return
            self._manager.replace_keyring(loaded.keyring)
            self._applied = loaded
            self._seen = max(self._seen, loaded.generation)
            behind = self._seen > loaded.generation
            seen = self._seen
        self._readiness.set(NotReady.GENERATION_BEHIND, behind)
        if self._metrics is not None:
            self._metrics.fleet_generation(seen)
        announce_change(self.snapshot(), action=action, key_id=key_id, actor=actor, observers=self._observers)

    def _store_failed(self, error: StoreError) -> None:
        store = self._fleet.store
        if isinstance(store, SqliteStore) and store.file_lost:
            self._readiness.set(NotReady.STORE_FILE_LOST)
        if not self._store_down:
            self._store_down = True
            _logger.warning(
                "the store refused or did not answer (%s): the keyring of generation %d stays live; trying again",
                error.reason.value,
                self._applied.generation,
            )

    def _store_answered(self) -> None:
        if self._store_down:
            self._store_down = False
            _logger.info("the store answers again (fleet generation %d applied)", self._applied.generation)

    def __repr__(self) -> str:
        return f"StoreKeyring(generation={self._applied.generation}, seen={self._seen})"


def _shown(key_id: str) -> str:
    return printable_name(key_id, what="a key id")
