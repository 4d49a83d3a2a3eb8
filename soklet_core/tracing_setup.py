"""soklet's trace export, configured from the standard ``OTEL_*`` environment variables.

:func:`configure_from_environment` reads the variables, decides whether spans are exported and how, and installs an
OpenTelemetry SDK tracer provider for them (global, and for soklet's spans through
:func:`soklet_core.tracing.use_provider`, so it takes effect even when another provider was set first). It answers
a :class:`TracingSetup`, whose :meth:`~TracingSetup.shutdown` flushes the last spans when the server stops, or
``None`` when tracing stays off.

Off unless asked: spans are exported only when ``OTEL_TRACES_EXPORTER`` or an OTLP endpoint
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set. The SDK's own default would send
to ``http://localhost:4318`` as soon as it is installed; a server that starts sending its traffic's shape to
whatever listens on a port of its host, uninvited, is not a default soklet takes. ``OTEL_SDK_DISABLED=true`` and
``OTEL_TRACES_EXPORTER=none`` turn it off too.

What is read here, from the mapping given:

* ``OTEL_TRACES_EXPORTER`` — ``otlp`` (OTLP over HTTP with protobuf), ``console`` (the SDK's console exporter, to
  standard error: for a developer), a comma list of both, or ``none``. Unset with an endpoint set: ``otlp``.
* ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL`` — ``http/protobuf`` only (soklet
  ships the HTTP exporter alone); anything else is refused rather than sent in a protocol the collector does not
  expect.

What the SDK reads itself, from the process environment (``os.environ``): the endpoint, headers, timeout,
compression and TLS files of the exporter (``OTEL_EXPORTER_OTLP_*``), the sampler (``OTEL_TRACES_SAMPLER``,
``OTEL_TRACES_SAMPLER_ARG``; default ``parentbased_always_on``), the batch (``OTEL_BSP_*``) and the resource
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``; ``service.name`` is ``soklet`` when neither names one).

A refusal is a :class:`TracingSetupError`: a closed reason and a message naming the variable, never its value
(``OTEL_EXPORTER_OTLP_HEADERS`` may hold an API key, and is never read here at all). The SDK is optional (the
``tracing`` extra): this module imports it only when an export is asked for, and its absence is a refusal of its
own.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.tracing import use_provider

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "EXPORTERS",
    "PROTOCOL",
    "TracingSetup",
    "TracingSetupError",
    "TracingSetupErrorReason",
    "configure_from_environment",
]

#: ``service.name`` when neither ``OTEL_SERVICE_NAME`` nor ``OTEL_RESOURCE_ATTRIBUTES`` names one.
DEFAULT_SERVICE_NAME: Final = "soklet"
#: The exporters soklet makes, by their ``OTEL_TRACES_EXPORTER`` names.
EXPORTERS: Final = ("otlp", "console")
#: The one OTLP protocol soklet exports with.
PROTOCOL: Final = "http/protobuf"

_SDK_DISABLED: Final = "OTEL_SDK_DISABLED"
_EXPORTER: Final = "OTEL_TRACES_EXPORTER"
_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
_TRACES_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_PROTOCOL"
_TRACES_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
_SERVICE_NAME: Final = "OTEL_SERVICE_NAME"
# The names a refusal may carry: the message is made of these and fixed words only.
_VARIABLES: Final = frozenset({_SDK_DISABLED, _EXPORTER, _ENDPOINT, _TRACES_ENDPOINT, _PROTOCOL, _TRACES_PROTOCOL})
# What the SDK calls a resource without a service name ("unknown_service:<executable>").
_UNKNOWN_SERVICE: Final = "unknown_service"
_MILLIS_PER_SECOND: Final = 1000


class TracingSetupErrorReason(ErrorReason):
    """Why the ``OTEL_*`` variables were refused. Closed."""

    SDK_MISSING = "sdk-missing", "install the tracing extra: pip install 'soklet[tracing]'"
    UNKNOWN_EXPORTER = "unknown-exporter", "soklet exports with otlp or console, a comma list of them, or none"
    UNSUPPORTED_PROTOCOL = "unsupported-protocol", f"soklet exports OTLP over {PROTOCOL} only"
    SDK_REFUSED = "sdk-refused", "the OpenTelemetry SDK refused its OTEL_* settings"


class TracingSetupError(SokletError):
    """The ``OTEL_*`` variables ask for an export soklet cannot make: ``reason`` (a :class:`TracingSetupErrorReason`),
    ``variable`` (the variable at fault, one of the names read here; ``None`` when it is no one variable) and
    ``detail`` (the type name of an exception the SDK raised, never its text). The message never holds a value."""

    __slots__ = ("detail", "variable")

    reason: TracingSetupErrorReason

    def __init__(
        self, reason: TracingSetupErrorReason, *, variable: str | None = None, detail: str | None = None
    ) -> None:
        # Only a name this module reads is kept: the message is vouched to hold no value.
        self.variable = variable if variable in _VARIABLES else None
        self.detail = detail if detail is not None and detail.isidentifier() else None
        if reason is TracingSetupErrorReason.SDK_MISSING:
            message = reason.description
        else:
            where = reason.value if self.variable is None else self.variable
            suffix = "" if self.detail is None else f" ({self.detail})"
            message = f"{where}: {reason.description}{suffix}"
        super().__init__(reason, message)


@dataclass(frozen=True, slots=True)
class TracingSetup:
    """An installed trace export: the SDK ``provider``, the ``exporters`` made (their ``OTEL_TRACES_EXPORTER``
    names) and the ``service_name`` the spans carry. :meth:`shutdown` ends it."""

    provider: TracerProvider
    exporters: tuple[str, ...]
    service_name: str

    def shutdown(self, timeout_seconds: float = 5.0) -> None:
        """Export the spans still batched (waiting at most ``timeout_seconds``), then shut the provider down and send
        soklet's spans back to the global provider. Never raises: a collector that is gone must not turn a clean
        stop into a failed one."""
        with contextlib.suppress(Exception):
            self.provider.force_flush(max(0, int(timeout_seconds * _MILLIS_PER_SECOND)))
        with contextlib.suppress(Exception):
            self.provider.shutdown()
        use_provider(None)


def configure_from_environment(environ: Mapping[str, str] = os.environ) -> TracingSetup | None:
    """Install the trace export the ``OTEL_*`` variables in ``environ`` ask for (see the module docstring), or
    answer ``None`` when they ask for none. Raises :class:`TracingSetupError` for an exporter or protocol soklet
    does not make, or when the SDK is not installed."""
    exporters = _exporters(environ)
    if not exporters:
        return None
    if "otlp" in exporters:
        _check_protocol(environ)
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError:
        raise TracingSetupError(TracingSetupErrorReason.SDK_MISSING) from None
    made: list[SpanExporter] = []
    try:
        if "otlp" in exporters:
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError:
                raise TracingSetupError(TracingSetupErrorReason.SDK_MISSING) from None
            made.append(OTLPSpanExporter())
        if "console" in exporters:
            # Standard output may be the protocol itself (stdio): a developer's spans go to standard error.
            made.append(ConsoleSpanExporter(out=sys.stderr))
        resource = Resource.create()
        service = resource.attributes.get(SERVICE_NAME)
        if not isinstance(service, str) or (service.startswith(_UNKNOWN_SERVICE) and not _set(environ, _SERVICE_NAME)):
            resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
            service = DEFAULT_SERVICE_NAME
        # No sampler given: the SDK reads OTEL_TRACES_SAMPLER (and its argument) itself.
        provider = TracerProvider(resource=resource)
        for exporter in made:
            provider.add_span_processor(BatchSpanProcessor(exporter))
    except (ValueError, TypeError) as error:
        # The SDK's own checks of its variables (a timeout that is not a number...): its text may quote them.
        for exporter in made:
            with contextlib.suppress(Exception):
                exporter.shutdown()
        raise TracingSetupError(TracingSetupErrorReason.SDK_REFUSED, detail=type(error).__name__) from None
    # The global provider can be set once per process (later attempts are refused with a warning); soklet's own
    # spans follow this one either way.
    trace.set_tracer_provider(provider)
    use_provider(provider)
    return TracingSetup(provider, exporters, service)


def _set(environ: Mapping[str, str], name: str) -> bool:
    # The specification reads an empty value as unset.
    return bool(environ.get(name, "").strip())


def _exporters(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters asked for, in order and each once; ``()`` when tracing stays off."""
    if environ.get(_SDK_DISABLED, "").strip().lower() == "true":
        return ()
    if not _set(environ, _EXPORTER):
        return ("otlp",) if _set(environ, _ENDPOINT) or _set(environ, _TRACES_ENDPOINT) else ()
    names = [name.strip().lower() for name in environ[_EXPORTER].split(",")]
    if names == ["none"]:
        return ()
    if not all(name in EXPORTERS for name in names):
        # "none" beside an exporter is as unclear as an unknown name: refused, not guessed.
        raise TracingSetupError(TracingSetupErrorReason.UNKNOWN_EXPORTER, variable=_EXPORTER)
    return tuple(dict.fromkeys(names))


def _check_protocol(environ: Mapping[str, str]) -> None:
    """The OTLP protocol in effect (the traces variable before the general one) is ``http/protobuf``."""
    for name in (_TRACES_PROTOCOL, _PROTOCOL):
        if _set(environ, name):
            if environ[name].strip().lower() != PROTOCOL:
                raise TracingSetupError(TracingSetupErrorReason.UNSUPPORTED_PROTOCOL, variable=name)
            return
