"""soklet's OpenTelemetry spans: one tracer, off at the cost of one check until an SDK is installed.

soklet depends on ``opentelemetry-api`` alone. Without a tracer provider (the API's default proxy, or a
``NoOpTracerProvider``) :func:`tracer` answers ``None`` and every helper here returns at once: no span object, no
context switch, no attribute built. With one (the ``tracing`` extra, configured from the ``OTEL_*`` variables by
:mod:`soklet_core.tracing_setup`, or any SDK provider an application installs), spans go to it under the
instrumentation scope ``soklet``.

What a span may hold is decided where it is made: method names soklet knows, registered operation names, closed
reason enums, key ids that authenticated something, counts. Never a token, a state, params, a header, a claim or
any other text a client chose. Exceptions are not recorded (their messages may quote input); a failed span gets
``ERROR`` status and the bounded reason as its description.

The parent a client names (:func:`remote_parent`) is read from a W3C ``traceparent`` value by a strict parser (no
regular expression, at most :data:`MAX_TRACEPARENT_CHARS`); ``tracestate`` and ``baggage`` are not carried: they are
free text of the client's choosing.
"""

from __future__ import annotations

import importlib.metadata
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Final, TypeAlias

from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
    TracerProvider,
)

__all__ = [
    "KEY_ID",
    "MAX_TRACEPARENT_CHARS",
    "OPERATION",
    "OUTCOME",
    "REASON",
    "RECHECK_SECONDS",
    "ROUND",
    "TRACER_NAME",
    "AttributeValue",
    "TraceIds",
    "current_span",
    "current_trace_ids",
    "fail",
    "remote_parent",
    "span",
    "start_span",
    "trace_ids",
    "tracer",
    "use_provider",
    "use_span",
]

#: The instrumentation scope of every soklet span.
TRACER_NAME: Final = "soklet"
#: The longest ``traceparent`` read (version 00 is 55 characters; a later version may append fields).
MAX_TRACEPARENT_CHARS: Final = 128

# The attribute keys every soklet span shares (the one home of their spelling; docs/tracing.md lists them all).
#: What happened, in one closed word per span kind (``complete``, ``input_required``, ``refused``, ``opened``...).
OUTCOME: Final = "soklet.outcome"
#: Why a step was refused or failed: a closed, bounded reason (a protection reason, an admission reason...).
REASON: Final = "soklet.reason"
#: A key id that authenticated or sealed something (never one read from a token that did not authenticate).
KEY_ID: Final = "soklet.key_id"
#: A registered operation name (a tool, prompt, resource or template).
OPERATION: Final = "soklet.operation"
#: The request-state round: of the state a retry carried when opened, of the state emitted when sealed.
ROUND: Final = "soklet.request_state.round"

#: What a span attribute holds here: bounded text, a number or a flag.
AttributeValue: TypeAlias = str | int | float | bool

_HEX: Final = frozenset("0123456789abcdef")
#: How long a decision of :func:`tracer` stands: a global provider installed (or replaced) later is seen within
#: this time. Asking the API every call would cost about a microsecond (it reads the process environment while no
#: provider is set), several times per request.
RECHECK_SECONDS: Final = 1.0

_lock = threading.Lock()
# A provider for soklet alone (tests, an application that keeps soklet's spans apart); None: the global one.
_override: TracerProvider | None = None
# (until when the decision stands by time.monotonic(), the provider it was taken for, its soklet tracer or None).
_decision: tuple[float, object, Tracer | None] = (0.0, None, None)


def use_provider(provider: TracerProvider | None) -> None:
    """Send soklet's spans to ``provider`` instead of the global tracer provider (``None``: back to the global),
    from the next span on.

    The global provider can be set only once per process; this is how a test, or an application that routes
    soklet's spans apart, chooses another.
    """
    global _override, _decision
    with _lock:
        _override = provider
        _decision = (0.0, None, None)


def tracer() -> Tracer | None:
    """soklet's tracer, or ``None`` while no SDK provider is installed (tracing is off).

    The answer is decided at most once per :data:`RECHECK_SECONDS`, so the check costs a clock read when off.
    """
    decision = _decision
    if time.monotonic() < decision[0]:
        return decision[2]
    return _decide()


def _decide() -> Tracer | None:
    global _decision
    with _lock:
        provider = _override if _override is not None else trace.get_tracer_provider()
        _until, known, found = _decision
        if known is not provider:
            off = isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)
            found = None if off else provider.get_tracer(TRACER_NAME, _version())
        _decision = (time.monotonic() + RECHECK_SECONDS, provider, found)
        return found


def _version() -> str | None:
    # Read once a provider is installed (the package root is above this layer, so not imported from here).
    try:
        return importlib.metadata.version("soklet")
    except importlib.metadata.PackageNotFoundError:
        return None


class _Off:
    """The scope of a span not made: tracing is off."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


_OFF: Final = _Off()


def span(
    name: str, attributes: Mapping[str, AttributeValue] | None = None, *, kind: SpanKind = SpanKind.INTERNAL
) -> AbstractContextManager[Span | None]:
    """A child of the current span, current inside the ``with`` block (``None`` in it when tracing is off, or when
    the current span was sampled out: a child follows its request's sampling decision).

    ``name`` and ``attributes`` are fixed or bounded values (see the module docstring). An exception leaving the
    block marks the span ``ERROR`` with its type name only.
    """
    found = tracer()
    if found is None:
        return _OFF
    parent = trace.get_current_span()
    if not parent.is_recording() and parent.get_span_context().is_valid:
        # The request was sampled out: its children follow its decision (as a parent-based sampler would decide
        # for each of them, at several microseconds a span).
        return _OFF
    return _Scoped(found.start_span(name, kind=kind, attributes=attributes))


class _Scoped:
    """A started span made current for a ``with`` block and ended at its end (an exception: its type, no text)."""

    __slots__ = ("_scope", "_span")

    def __init__(self, started: Span) -> None:
        self._span = started
        self._scope: AbstractContextManager[Span] | None = None

    def __enter__(self) -> Span:
        self._scope = trace.use_span(
            self._span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )
        self._scope.__enter__()
        return self._span

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: object) -> None:
        assert self._scope is not None
        self._scope.__exit__(None, None, None)
        if kind is not None and self._span.is_recording() and not _has_status(self._span):
            fail(self._span, kind.__name__, "failed")
        self._span.end()


def _has_status(found: Span) -> bool:
    status = getattr(found, "status", None)
    return isinstance(status, Status) and status.status_code is not StatusCode.UNSET


def start_span(
    name: str,
    *,
    parent: SpanContext | None = None,
    links: Sequence[SpanContext] = (),
    attributes: Mapping[str, AttributeValue] | None = None,
    kind: SpanKind = SpanKind.SERVER,
    start_time_ns: int | None = None,
) -> Span | None:
    """A span started now (or at ``start_time_ns``), not yet current: the caller ends it. Its parent is ``parent``
    (a remote context a client named) when given, else the current span; ``links`` point at other traces.
    ``None`` when tracing is off."""
    found = tracer()
    if found is None:
        return None
    context = trace.set_span_in_context(NonRecordingSpan(parent)) if parent is not None else None
    return found.start_span(
        name,
        context=context,
        kind=kind,
        attributes=attributes,
        links=[Link(link) for link in links],
        start_time=start_time_ns,
    )


def use_span(started: Span) -> AbstractContextManager[Span]:
    """``started`` made current for a ``with`` block, not ended by it (exceptions not recorded)."""
    return trace.use_span(started, end_on_exit=False, record_exception=False, set_status_on_exception=False)


def fail(found: Span | None, reason: str, outcome: str = "refused") -> None:
    """Mark ``found`` refused or failed: :data:`OUTCOME` = ``outcome``, :data:`REASON` and ``error.type`` =
    ``reason`` (a closed, bounded reason), status ``ERROR`` described by ``reason``."""
    if found is None or not found.is_recording():
        return
    found.set_attributes({OUTCOME: outcome, REASON: reason, "error.type": reason})
    found.set_status(Status(StatusCode.ERROR, reason))


def current_span() -> Span | None:
    """The current span while it records (``None`` when tracing is off or no span is current)."""
    if tracer() is None:
        return None
    found = trace.get_current_span()
    return found if found.is_recording() else None


@dataclass(frozen=True, slots=True)
class TraceIds:
    """The ids of one span as lower-case hex: ``trace_id`` (32 digits) and ``span_id`` (16), as logs print them."""

    trace_id: str
    span_id: str

    def __post_init__(self) -> None:
        if len(self.trace_id) != 32 or not _HEX.issuperset(self.trace_id):
            raise ValueError("trace_id is 32 lower-case hex digits")
        if len(self.span_id) != 16 or not _HEX.issuperset(self.span_id):
            raise ValueError("span_id is 16 lower-case hex digits")


def trace_ids(found: Span | None) -> TraceIds | None:
    """The ids of ``found`` (``None``: no span, or one without a valid context)."""
    if found is None:
        return None
    context = found.get_span_context()
    if not context.is_valid:
        return None
    return TraceIds(format(context.trace_id, "032x"), format(context.span_id, "016x"))


def current_trace_ids() -> TraceIds | None:
    """The ids of the current span, when there is a valid one (``None`` when tracing is off)."""
    if tracer() is None:
        return None
    return trace_ids(trace.get_current_span())


def remote_parent(traceparent: str | None) -> SpanContext | None:
    """The span context a W3C ``traceparent`` names, or ``None`` for anything else (absent, too long, malformed,
    version ``ff``, an all-zero id). Strict and linear: ``version-traceid-parentid-flags`` in lower-case hex, the
    exact length for version 00, and for a later version a ``-`` after the flags when more follows."""
    if traceparent is None or not isinstance(traceparent, str) or len(traceparent) > MAX_TRACEPARENT_CHARS:
        return None
    if len(traceparent) < 55:
        return None
    version = traceparent[0:2]
    if not _HEX.issuperset(version) or version == "ff":
        return None
    if version == "00" and len(traceparent) != 55:
        return None
    if len(traceparent) > 55 and traceparent[55] != "-":
        return None
    if traceparent[2] != "-" or traceparent[35] != "-" or traceparent[52] != "-":
        return None
    trace_hex, span_hex, flags_hex = traceparent[3:35], traceparent[36:52], traceparent[53:55]
    if not (_HEX.issuperset(trace_hex) and _HEX.issuperset(span_hex) and _HEX.issuperset(flags_hex)):
        return None
    trace_id, span_id = int(trace_hex, 16), int(span_hex, 16)
    if trace_id == 0 or span_id == 0:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(int(flags_hex, 16) & 0x01))
