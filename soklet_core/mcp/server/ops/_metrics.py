"""One MCP server's Prometheus metrics, rendered by the admin listener's ``GET /metrics``.

Every label value comes from a bounded set, never from client input: method labels are the known MCP method
names or ``other``; request outcomes are a closed set derived from the status class and the access-log reason;
seal and open refusal reasons are :class:`~soklet_core.protection.RequestStateProtectionReason` values, plus
``retired-key`` (:data:`RETIRED_KEY_REASON`) for an ``unknown-key`` refusal whose key id this instance held and
removed; key ids come from the keyring (RFC 9110 tokens of at most 64 characters, as many as the keyring holds) and
key roles from :class:`~soklet_core.files.KeyRole`; readiness reasons are
:class:`~soklet_core.mcp.server.ops.NotReady` values; task statuses are :class:`~soklet_core.store.TaskStatus`
values. Anything outside a set is counted as ``other``, so a weird method string or an unregistered tool name can
never become a series.

Readiness (``soklet_ready``, ``soklet_not_ready{reason}``, ``soklet_keyring_file_refused``) is read from the watched
:class:`~soklet_core.mcp.server.ops._readiness.Readiness` at scrape time (:meth:`ServerMetrics.watch_readiness`);
``soklet_fleet_generation`` is exposed only once a store-mode server has set it
(:meth:`ServerMetrics.fleet_generation`).

The store figures (tasks by status, live handles) are read from the durable store at scrape time
(:meth:`ServerMetrics.refresh_store`), bounded by :data:`STORE_SCRAPE_TIMEOUT_SECONDS`; a store that fails or
does not answer makes ``soklet_store_up`` 0 and drops the figures, and the scrape still succeeds.

Refusals carry an exemplar while tracing is on: the counts of refused state opens and seals, of admission refusals,
and of requests whose outcome is a refusal or an error (:data:`EXEMPLAR_OUTCOMES`) are incremented with
``{"trace_id": ...}`` of the refused request's trace (:func:`~soklet_core.tracing.current_trace_ids`), so a graph's
spike leads to one trace of it. Only the OpenMetrics format shows exemplars: :meth:`ServerMetrics.render` writes it
when the scraper's ``Accept`` asks for ``application/openmetrics-text`` (:func:`exposition_for`), else the classic
text format. While tracing is off a refusal costs one check more and carries no exemplar.

Each :class:`ServerMetrics` owns its own ``CollectorRegistry``: two servers in one process (tests, one process
serving many admin listeners) never share counters, and the process-global registry is never touched.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector

from soklet_core import __version__
from soklet_core.files import KeyRole
from soklet_core.mcp.model.methods import KNOWN_METHODS
from soklet_core.mcp.server.admission import AdmissionRefusedReason
from soklet_core.mcp.server.durable._handles import HANDLE_REJECTED_REASON
from soklet_core.mcp.server.ops._readiness import NotReady, Readiness
from soklet_core.protection import EnvelopeHeader, RequestStateProtectionException, RequestStateProtectionReason
from soklet_core.store import DurableStore, StoreError, TaskStatus
from soklet_core.tracing import TraceIds, current_trace_ids

if TYPE_CHECKING:
    from soklet_core.keys import KeyringSnapshot

__all__ = [
    "ADMIN_AUTH_FAILURE_REASONS",
    "ADMISSION_REFUSAL_REASONS",
    "EXEMPLAR_OUTCOMES",
    "MAX_REMEMBERED_REMOVED_KEYS",
    "METRICS_CONTENT_TYPE",
    "METRIC_METHODS",
    "OPENMETRICS_CONTENT_TYPE",
    "OPEN_OUTCOMES",
    "OTHER",
    "REQUEST_OUTCOMES",
    "RETIRED_KEY_REASON",
    "SEAL_OUTCOMES",
    "STORE_SCRAPE_TIMEOUT_SECONDS",
    "ServerMetrics",
    "exposition_for",
    "request_outcome",
]

#: The label value of anything outside a bounded set (an unknown method, outcome or reason).
OTHER: Final = "other"
#: The ``reason`` label of a successful seal or open.
NO_REASON: Final = "none"
#: ``generate_latest`` writes the classic text format (names are plain ASCII), so the response says so.
METRICS_CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4
#: The OpenMetrics format (1.0.0), written for a scraper that asks for it: the one that shows exemplars.
OPENMETRICS_CONTENT_TYPE: Final = openmetrics.CONTENT_TYPE_LATEST
# The media type a scraper names to get OpenMetrics, and the most of an Accept value read for it.
_OPENMETRICS_MEDIA_TYPE: Final = "application/openmetrics-text"
_MAX_ACCEPT_CHARS: Final = 1024
#: The method label values besides ``other``: the client requests the server answers (``methods.KNOWN_METHODS``).
METRIC_METHODS: Final = KNOWN_METHODS
#: Request outcomes (see :func:`request_outcome`).
REQUEST_OUTCOMES: Final = frozenset(
    {
        "ok",
        "accepted",
        "error",
        "state_refused",
        "unauthorized",
        "refused",
        "disconnected",
        "unavailable",
        "server_error",
    }
)
SEAL_OUTCOMES: Final = frozenset({"sealed", "refused"})
#: Request outcomes counted with an exemplar (the trace of one such request) while tracing is on: the refusals and
#: the errors, which an operator follows to a trace; not a success, nor a client that left.
EXEMPLAR_OUTCOMES: Final = REQUEST_OUTCOMES - {"ok", "accepted", "disconnected"}
#: Why the admin listener refused an authentication: no ``Authorization`` header, or one that names no token.
ADMIN_AUTH_FAILURE_REASONS: Final = frozenset({"missing", "invalid"})
#: Why the MCP endpoint refused a caller's credentials: the admission policies' closed reasons.
ADMISSION_REFUSAL_REASONS: Final = frozenset(reason.value for reason in AdmissionRefusedReason)
OPEN_OUTCOMES: Final = frozenset({"opened", "refused"})
#: The open refusal reason of a token whose key id this instance held and removed (an ``unknown-key`` refusal
#: otherwise): a forged or very late token under a key the fleet retired, told apart from an id never seen.
RETIRED_KEY_REASON: Final = "retired-key"
_REASONS: Final = frozenset(reason.value for reason in RequestStateProtectionReason) | {RETIRED_KEY_REASON}
#: How many removed key ids an instance remembers to tell ``retired-key`` from ``unknown-key`` (the oldest removal
#: is forgotten first). A fleet rotating monthly keeps years of ids; the memory stays a few KiB whatever happens.
MAX_REMEMBERED_REMOVED_KEYS: Final = 64
#: How long one scrape waits for the store's figures before it reports ``soklet_store_up 0``: well inside a
#: Prometheus scrape timeout (10 s by default).
STORE_SCRAPE_TIMEOUT_SECONDS: Final = 2.0


def request_outcome(status: int, code: int | None, reason: str | None) -> str:
    """The outcome label of one answered POST, from its HTTP status, JSON-RPC error code and log reason.

    ``ok`` a result (``input_required`` included), ``accepted`` a notification, ``error`` a JSON-RPC error in
    a 200 (handler failure, seal failure, output ceiling), ``state_refused`` a request state that did not open
    (a durable handle refused included),
    ``unauthorized`` 401, ``refused`` any other 4xx, ``disconnected`` the client left (499), ``unavailable``
    503 (busy, draining), ``server_error`` any other 5xx.
    """
    if reason is not None and (reason.startswith("state-") or reason == HANDLE_REJECTED_REASON):
        return "state_refused"
    if status == 200:
        return "ok" if code is None else "error"
    if status == 202:
        return "accepted"
    if status == 401:
        return "unauthorized"
    if status == 499:
        return "disconnected"
    if status == 503:
        return "unavailable"
    if 400 <= status < 500:
        return "refused"
    return "server_error" if status >= 500 else OTHER


def exposition_for(accept: bytes | str | None) -> tuple[Callable[[CollectorRegistry], bytes], str]:
    """The writer and content type a scrape gets for its ``Accept`` value: OpenMetrics 1.0.0 when it names
    ``application/openmetrics-text`` (without ``q=0``), else the classic text format. Only the first
    1024 characters are read, and the content type answered is a constant: nothing of the header is echoed."""
    if isinstance(accept, bytes):
        accept = accept.decode("latin-1")
    if accept:
        for accepted in accept[:_MAX_ACCEPT_CHARS].split(","):
            media_type, _, parameters = accepted.partition(";")
            if media_type.strip().lower() == _OPENMETRICS_MEDIA_TYPE and not _refused(parameters):
                return openmetrics.generate_latest, OPENMETRICS_CONTENT_TYPE
    return generate_latest, METRICS_CONTENT_TYPE


def _refused(parameters: str) -> bool:
    """Whether a media range's parameters weigh it ``q=0`` (the scraper refuses it)."""
    for parameter in parameters.split(";"):
        name, _, weight = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(weight.strip()) == 0
            except ValueError:
                return False
    return False


def _exemplar(trace: TraceIds | None = None) -> dict[str, str] | None:
    """The exemplar of a refusal counted now: the trace of the request refused (``None`` when tracing is off)."""
    ids = trace if trace is not None else current_trace_ids()
    return None if ids is None else {"trace_id": ids.trace_id}


def _bounded(value: str | None, allowed: frozenset[str]) -> str:
    return value if value is not None and value in allowed else OTHER


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


class ServerMetrics:
    """One server's metrics in its own prometheus_client ``CollectorRegistry`` (never the global one).

    The request-path methods (:meth:`request`, :meth:`input_required`, :meth:`seal`, :meth:`open`) cost a dict
    lookup and a counter increment: label children are cached on first use. Safe to call from any thread.
    """

    __slots__ = (
        "_admin_auth_failures",
        "_admission_refusals",
        "_children",
        "_fingerprint",
        "_fleet_generation",
        "_generation",
        "_held_key_ids",
        "_input_required",
        "_key_info",
        "_keyring_lock",
        "_keyring_source",
        "_last_opened",
        "_last_sealed",
        "_opens",
        "_readiness",
        "_registry",
        "_removed_key_ids",
        "_removed_order",
        "_requests",
        "_seals",
        "_store",
        "_store_figures",
        "_store_reading",
    )

    def __init__(self, *, instance: str) -> None:
        registry = CollectorRegistry(auto_describe=True)
        self._registry = registry
        info = Gauge(
            "soklet_server_info",
            "This server: instance name and soklet version (always 1).",
            ["name", "version"],
            registry=registry,
        )
        info.labels(instance, __version__).set(1)
        self._requests = Counter(
            "soklet_mcp_requests",
            "MCP POSTs answered, by method and outcome.",
            ["method", "outcome"],
            registry=registry,
        )
        self._input_required = Counter(
            "soklet_input_required", "input_required results sent, by method.", ["method"], registry=registry
        )
        self._seals = Counter(
            "soklet_state_seals",
            "Request states sealed or refused, by outcome and refusal reason.",
            ["outcome", "reason"],
            registry=registry,
        )
        self._opens = Counter(
            "soklet_state_opens",
            "Request states opened or refused, by outcome and refusal reason.",
            ["outcome", "reason"],
            registry=registry,
        )
        self._admin_auth_failures = Counter(
            "soklet_admin_auth_failures",
            "Admin API requests refused (401), by reason: missing (no Authorization header) or invalid.",
            ["reason"],
            registry=registry,
        )
        self._admission_refusals = Counter(
            "soklet_admission_refusals",
            "MCP requests whose credentials admission refused (401, 403, 503), by the policy's reason: never more "
            "than the reason reaches the client.",
            ["reason"],
            registry=registry,
        )
        self._generation = Gauge(
            "soklet_keyring_generation", "The live keyring's generation (bumped by every change).", registry=registry
        )
        self._fingerprint = Gauge(
            "soklet_keyring_fingerprint_info",
            "The live keyring's fingerprint (secret-free; always 1): differing values across a fleet mean "
            "differing keys.",
            ["version", "profile", "value"],
            registry=registry,
        )
        self._last_sealed = Gauge(
            "soklet_key_last_sealed_timestamp_seconds",
            "When each key last sealed a state (Unix time).",
            ["key_id"],
            registry=registry,
        )
        self._last_opened = Gauge(
            "soklet_key_last_opened_timestamp_seconds",
            "When each key last opened a state (Unix time).",
            ["key_id"],
            registry=registry,
        )
        self._key_info = Gauge(
            "soklet_key_info",
            "Each key the live keyring holds, by id and role (active or verification; always 1).",
            ["key_id", "role"],
            registry=registry,
        )
        self._readiness: Readiness | None = None
        self._fleet_generation: int | None = None
        # Key ids of the last observed keyring, and those since removed (oldest first, bounded): what tells a
        # retired-key refusal from an unknown-key one. Read on the request path as one attribute load.
        self._held_key_ids: frozenset[str] = frozenset()
        self._removed_order: OrderedDict[str, None] = OrderedDict()
        self._removed_key_ids: frozenset[str] = frozenset()
        registry.register(_StateCollector(self))
        self._store: DurableStore | None = None
        self._store_reading: asyncio.Lock | None = None
        # The last reading: tasks by status and live handles, or None when the store failed (or is not read yet).
        self._store_figures: tuple[dict[TaskStatus, int], int] | None = None
        self._children: dict[tuple[str, ...], Counter] = {}
        self._keyring_lock = threading.Lock()
        self._keyring_source: Callable[[], KeyringSnapshot] | None = None
        # Present from the start, so a rate() over them is defined before the first state is seen.
        self._seals.labels("sealed", NO_REASON)
        self._opens.labels("opened", NO_REASON)
        for reason in ADMIN_AUTH_FAILURE_REASONS:
            self._admin_auth_failures.labels(reason)

    def watch_keyring(self, source: Callable[[], KeyringSnapshot]) -> None:
        """Read ``source()`` (e.g. the live keyring's ``snapshot``) at every :meth:`render`, through
        :meth:`observe_keyring`: generation, fingerprint and last use are then never staler than the scrape."""
        self._keyring_source = source

    def watch_readiness(self, readiness: Readiness) -> None:
        """Publish ``readiness`` at every scrape: ``soklet_ready`` (1 ready, 0 not), ``soklet_not_ready{reason}``
        (1 for each :class:`NotReady` reason set, 0 for the others) and ``soklet_keyring_file_refused``. Without
        a watched readiness none of them is exposed."""
        self._readiness = readiness

    def fleet_generation(self, generation: int) -> None:
        """Publish the newest fleet generation this store-mode instance has seen (``soklet_fleet_generation``;
        absent until first set, so a file-mode server never exposes it)."""
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
            raise ValueError("generation must be a whole number of at least 0")
        self._fleet_generation = generation

    def state_metrics(self) -> list[Metric]:
        """Readiness and fleet-generation families as of now (what the registry's state collector yields)."""
        families: list[Metric] = []
        readiness = self._readiness
        if readiness is not None:
            reasons = readiness.reasons
            families.append(
                GaugeMetricFamily(
                    "soklet_ready",
                    "1 while this instance takes MCP traffic, 0 while it is held back (see soklet_not_ready).",
                    value=0 if reasons else 1,
                )
            )
            held = GaugeMetricFamily(
                "soklet_not_ready",
                "1 for each reason holding this instance back from MCP traffic, 0 for the others.",
                labels=["reason"],
            )
            for reason in NotReady:
                held.add_metric([reason.value], 1 if reason in reasons else 0)
            families.append(held)
            families.append(
                GaugeMetricFamily(
                    "soklet_keyring_file_refused",
                    "1 while the keyring file on disk is refused (diverged, unreadable, invalid or insecure): the "
                    "last keyring accepted keeps serving.",
                    value=1 if NotReady.KEYRING_FILE_REFUSED in reasons else 0,
                )
            )
        generation = self._fleet_generation
        if generation is not None:
            families.append(
                GaugeMetricFamily(
                    "soklet_fleet_generation",
                    "The newest fleet keyring generation this instance has seen in the store (store mode).",
                    value=generation,
                )
            )
        return families

    def watch_store(self, store: DurableStore) -> None:
        """Publish the store's figures (``soklet_store_up``, ``soklet_tasks{status}``, ``soklet_handles_live``),
        read at every :meth:`refresh_store`. Without a watched store none of them is exposed."""
        if self._store is None:
            self._registry.register(_StoreCollector(self))
        self._store = store

    async def refresh_store(self) -> None:
        """Read the watched store's figures (nothing without a store). Call it before :meth:`render`, from the
        event loop the store was opened on.

        One reading at a time: a scrape that comes while another reads waits for it and publishes the same
        figures, so scrapes never pile queries onto the store. A :class:`~soklet_core.store.StoreError` or no
        answer within :data:`STORE_SCRAPE_TIMEOUT_SECONDS` sets ``soklet_store_up`` to 0 and drops the figures
        (stale ones would mislead); the scrape itself succeeds."""
        store = self._store
        if store is None:
            return
        if self._store_reading is None:
            self._store_reading = asyncio.Lock()
        reading = self._store_reading
        if reading.locked():
            async with reading:  # the reading in flight publishes for this scrape too
                return
        async with reading:
            try:
                async with asyncio.timeout(STORE_SCRAPE_TIMEOUT_SECONDS):
                    tasks = await store.count_tasks()
                    handles = await store.count_live_handles(datetime.now(UTC))
            except (StoreError, TimeoutError):
                self._store_figures = None
                return
            self._store_figures = ({status: tasks.get(status, 0) for status in TaskStatus}, handles)

    def store_metrics(self) -> list[Metric]:
        """The store's metric families from the last reading (what the registry's collector yields)."""
        figures = self._store_figures
        up = GaugeMetricFamily(
            "soklet_store_up",
            "1 when the last scrape read the durable store's figures, 0 when the store failed or was too slow.",
            value=0 if figures is None else 1,
        )
        if figures is None:
            return [up]
        tasks = GaugeMetricFamily(
            "soklet_tasks", "Tasks in the durable store, by status (read at scrape time).", labels=["status"]
        )
        for status, count in figures[0].items():
            tasks.add_metric([status.value], count)
        handles = GaugeMetricFamily(
            "soklet_handles_live",
            "Durable application handles live in the store (not expired; read at scrape time).",
            value=figures[1],
        )
        return [up, tasks, handles]

    def render(self, accept: bytes | str | None = None) -> tuple[bytes, str]:
        """The exposition of every metric, and its content type: OpenMetrics (with the exemplars) when ``accept``,
        the scrape's ``Accept`` value, asks for it, else the classic Prometheus text (:func:`exposition_for`)."""
        write, content_type = exposition_for(accept)
        source = self._keyring_source
        if source is not None:
            self.observe_keyring(source())
        with self._keyring_lock:  # never a half-replaced keyring view
            return write(self._registry), content_type

    def observe_keyring(
        self,
        snapshot: KeyringSnapshot,
        *,
        last_sealed_ms: Mapping[str, int | None] | None = None,
        last_opened_ms: Mapping[str, int | None] | None = None,
    ) -> None:
        """Publish ``snapshot``: generation, fingerprint, and each key's last use (epoch ms; ``None`` never used).

        Last use comes from the mappings when given, else from the snapshot's own ``key_use`` (what the live
        keyring manager records). Keys no longer in the keyring, and keys never used, have no last-use series.
        Entries for ids the snapshot does not hold are ignored, so the key-id label set stays bounded by the keyring.
        """
        key_ids = [entry.key_id for entry in snapshot.check_values]
        held = frozenset(key_ids)
        if last_sealed_ms is None:
            last_sealed_ms = {use.key_id: use.last_sealed_ms for use in snapshot.key_use}
        if last_opened_ms is None:
            last_opened_ms = {use.key_id: use.last_opened_ms for use in snapshot.key_use}
        fingerprint = snapshot.fingerprint
        with self._keyring_lock:
            self._remember_removed(held)
            self._generation.set(snapshot.generation)
            self._fingerprint.clear()
            self._fingerprint.labels(str(fingerprint.version), fingerprint.profile, fingerprint.value).set(1)
            self._key_info.clear()
            for key_id in key_ids:
                role = KeyRole.ACTIVE if key_id == snapshot.active_key_id else KeyRole.VERIFICATION
                self._key_info.labels(key_id, role.value).set(1)
            for gauge, times in ((self._last_sealed, last_sealed_ms), (self._last_opened, last_opened_ms)):
                gauge.clear()
                for key_id in key_ids:
                    seconds = _seconds(times.get(key_id))
                    if seconds is not None:
                        gauge.labels(key_id).set(seconds)

    def _remember_removed(self, held: frozenset[str]) -> None:
        """Note the ids the last observed keyring held and this one does not (under the keyring lock)."""
        removed = self._removed_order
        changed = False
        for key_id in sorted(self._held_key_ids - held):
            removed.pop(key_id, None)
            removed[key_id] = None
            changed = True
        for key_id in held & self._removed_key_ids:  # held again (re-staged): not retired any more
            removed.pop(key_id, None)
            changed = True
        while len(removed) > MAX_REMEMBERED_REMOVED_KEYS:
            removed.popitem(last=False)
        self._held_key_ids = held
        if changed:
            self._removed_key_ids = frozenset(removed)

    @property
    def removed_key_ids(self) -> frozenset[str]:
        """The key ids this instance held and removed (at most :data:`MAX_REMEMBERED_REMOVED_KEYS`, newest kept)."""
        return self._removed_key_ids

    def request(self, method: str | None, outcome: str, *, trace: TraceIds | None = None) -> None:
        """Count one answered POST: ``method`` outside :data:`METRIC_METHODS` and unknown outcomes count as other.
        An outcome of :data:`EXEMPLAR_OUTCOMES` carries the trace of the request (``trace``, its span's ids, else
        the current span's) as an exemplar while tracing is on."""
        bounded = _bounded(outcome, REQUEST_OUTCOMES)
        exemplar = _exemplar(trace) if bounded in EXEMPLAR_OUTCOMES else None
        self._inc(self._requests, "r", _bounded(method, METRIC_METHODS), bounded, exemplar=exemplar)

    def input_required(self, method: str) -> None:
        """Count one ``input_required`` result answering ``method``."""
        self._inc(self._input_required, "i", _bounded(method, METRIC_METHODS))

    def seal(self, outcome: str, reason: str | None = None) -> None:
        """Count one seal: ``sealed``, or ``refused`` with a :class:`RequestStateProtectionReason` value (a refusal
        carries the current trace as an exemplar while tracing is on)."""
        labels = self._state_labels(outcome, SEAL_OUTCOMES, reason)
        self._inc(self._seals, "s", *labels, exemplar=_exemplar() if labels[0] == "refused" else None)

    def open(self, outcome: str, reason: str | None = None, *, token: str | None = None) -> None:
        """Count one open: ``opened``, or ``refused`` with a :class:`RequestStateProtectionReason` value.

        An ``unknown-key`` refusal given the refused ``token`` is counted as :data:`RETIRED_KEY_REASON` when the
        token's key id is one this instance held and removed. The token's header is read only then (bounded work:
        the opener refused it after its size check); the id itself never becomes a label. A refusal carries the
        current trace as an exemplar while tracing is on."""
        if reason == RequestStateProtectionReason.UNKNOWN_KEY.value and token is not None and self._removed_key_ids:
            reason = self._unknown_key_reason(token)
        labels = self._state_labels(outcome, OPEN_OUTCOMES, reason)
        self._inc(self._opens, "o", *labels, exemplar=_exemplar() if labels[0] == "refused" else None)

    def _unknown_key_reason(self, token: str) -> str:
        unknown: str = RequestStateProtectionReason.UNKNOWN_KEY.value
        try:
            key_id = EnvelopeHeader.read(token).key_id
        except RequestStateProtectionException:
            return unknown
        return RETIRED_KEY_REASON if key_id in self._removed_key_ids else unknown

    def admin_auth_failure(self, reason: str) -> None:
        """Count one admin request refused for its token: a :data:`ADMIN_AUTH_FAILURE_REASONS` value, else other."""
        self._inc(self._admin_auth_failures, "a", _bounded(reason, ADMIN_AUTH_FAILURE_REASONS))

    def admission_refused(self, reason: str) -> None:
        """Count one MCP request refused by admission: an :data:`ADMISSION_REFUSAL_REASONS` value, else other (with
        the current trace as an exemplar while tracing is on)."""
        self._inc(self._admission_refusals, "d", _bounded(reason, ADMISSION_REFUSAL_REASONS), exemplar=_exemplar())

    @staticmethod
    def _state_labels(outcome: str, outcomes: frozenset[str], reason: str | None) -> tuple[str, str]:
        return _bounded(outcome, outcomes), NO_REASON if reason is None else _bounded(reason, _REASONS)

    def _inc(self, counter: Counter, family: str, *labels: str, exemplar: dict[str, str] | None = None) -> None:
        key = (family, *labels)
        child = self._children.get(key)
        if child is None:
            # Racing threads may both create it: labels() returns the same child, so nothing is lost.
            child = self._children.setdefault(key, counter.labels(*labels))
        child.inc(exemplar=exemplar)

    def __repr__(self) -> str:
        return "ServerMetrics()"


class _StateCollector(Collector):
    """Yields a server's readiness and fleet generation as they are at the scrape."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        """Nothing to describe ahead: these families appear only once watched or set (never a stale 0)."""
        return []

    def collect(self) -> Iterable[Metric]:
        """The readiness and fleet-generation families."""
        return self._metrics.state_metrics()


class _StoreCollector(Collector):
    """Yields a server's store figures as of its last :meth:`ServerMetrics.refresh_store`."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        """Every family this collector may yield, so the registry knows their names from the start."""
        return [
            GaugeMetricFamily("soklet_store_up", "", value=0),
            GaugeMetricFamily("soklet_tasks", "", labels=["status"]),
            GaugeMetricFamily("soklet_handles_live", "", value=0),
        ]

    def collect(self) -> Iterable[Metric]:
        """The store's metric families."""
        return self._metrics.store_metrics()
