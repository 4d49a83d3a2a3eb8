"""A small real OTLP/HTTP trace receiver for the tracing tests (a support module, not a test).

``OtlpReceiver`` is a ``ThreadingHTTPServer`` on 127.0.0.1 (port 0 unless named) in a daemon thread. It takes
``POST /v1/traces`` with ``Content-Type: application/x-protobuf`` (gzip-decoded when ``Content-Encoding: gzip``),
decodes the body as an ``ExportTraceServiceRequest``, answers 200 with an empty ``ExportTraceServiceResponse`` and
keeps every span as a :class:`ReceivedSpan` (plain values: hex ids, names, decoded attributes, status, links, the
resource's attributes). It also keeps every decoded body and every request's headers, so a test can look for a
secret in all that was sent, not only in the fields it decodes. Anything else is answered 404 or 415 and counted.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType, TracebackType
from typing import Any, Self

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

#: The path an OTLP/HTTP trace exporter posts to.
TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True, slots=True)
class ReceivedLink:
    """A span link: the linked span's trace and span ids (hex) and the link's attributes."""

    trace_id: str
    span_id: str
    attributes: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ReceivedEvent:
    """A span event: its name and attributes."""

    name: str
    attributes: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ReceivedSpan:
    """One exported span as plain values. ``kind`` is ``SERVER``, ``INTERNAL``...; ``status_code`` ``UNSET``, ``OK``
    or ``ERROR``; ``parent_span_id`` is ``""`` for a root; ``resource`` holds every resource attribute."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    attributes: Mapping[str, Any]
    status_code: str
    status_message: str
    links: tuple[ReceivedLink, ...]
    events: tuple[ReceivedEvent, ...]
    scope: str
    resource: Mapping[str, Any]

    @property
    def service_name(self) -> str | None:
        """The resource's ``service.name``."""
        value = self.resource.get("service.name")
        return value if isinstance(value, str) else None

    def texts(self) -> list[str]:
        """Every piece of text this span carries: name, status message, attribute keys and values, event and link
        attributes, the resource's attributes (what a secret must never be found in)."""
        found = [self.name, self.status_message, self.scope]
        for mapping in (self.attributes, self.resource, *(e.attributes for e in self.events)):
            found.extend(_texts(mapping))
        found.extend(event.name for event in self.events)
        for link in self.links:
            found.extend(_texts(link.attributes))
        return found


def _texts(mapping: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for key, value in mapping.items():
        found.append(key)
        found.extend(_value_texts(value))
    return found


def _value_texts(value: Any) -> list[str]:
    if isinstance(value, tuple):
        return [text for item in value for text in _value_texts(item)]
    if isinstance(value, Mapping):
        return _texts(value)
    if isinstance(value, bytes):
        return [value.hex(), value.decode("latin-1")]
    return [str(value)]


def _any_value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return tuple(_any_value(item) for item in value.array_value.values)
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which)


def _attributes(pairs: Any) -> Mapping[str, Any]:
    items: list[KeyValue] = list(pairs)
    return MappingProxyType({pair.key: _any_value(pair.value) for pair in items})


def _enum_name(full: str, prefix: str) -> str:
    return full.removeprefix(prefix)


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ``ExportTraceServiceRequest``."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=_enum_name(Span.SpanKind.Name(span.kind), "SPAN_KIND_"),
                        attributes=_attributes(span.attributes),
                        status_code=_enum_name(Status.StatusCode.Name(span.status.code), "STATUS_CODE_"),
                        status_message=span.status.message,
                        links=tuple(
                            ReceivedLink(link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
                            for link in span.links
                        ),
                        events=tuple(ReceivedEvent(event.name, _attributes(event.attributes)) for event in span.events),
                        scope=scope,
                        resource=resource,
                    )
                )
    return spans


class OtlpReceiver:
    """A real OTLP/HTTP receiver on loopback; use as a context manager. ``endpoint`` is its base URL (what
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes); ``spans``, ``bodies`` and ``headers`` what it received so far."""

    def __init__(self, port: int = 0) -> None:
        self._lock = threading.Condition()
        self._spans: list[ReceivedSpan] = []
        self._bodies: list[bytes] = []
        self._headers: list[dict[str, str]] = []
        self.refused = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                if self.path != TRACES_PATH:
                    receiver._refuse(self, 404)
                    return
                if self.headers.get("Content-Type", "").split(";")[0].strip() != PROTOBUF:
                    receiver._refuse(self, 415)
                    return
                body = gzip.decompress(raw) if self.headers.get("Content-Encoding", "") == "gzip" else raw
                spans = decode(body)
                with receiver._lock:
                    receiver._spans.extend(spans)
                    receiver._bodies.append(body)
                    receiver._headers.append({name.lower(): value for name, value in self.headers.items()})
                    receiver._lock.notify_all()
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", PROTOBUF)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="otlp-receiver")

    def _refuse(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        with self._lock:
            self.refused += 1
        handler.send_response(status)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    @property
    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in arrival order."""
        with self._lock:
            return list(self._spans)

    @property
    def bodies(self) -> list[bytes]:
        """Every decoded request body received so far (protobuf bytes)."""
        with self._lock:
            return list(self._bodies)

    @property
    def headers(self) -> list[dict[str, str]]:
        """The headers (lower-case names) of every accepted export request."""
        with self._lock:
            return list(self._headers)

    def wait_for(self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 30.0) -> list[ReceivedSpan]:
        """Wait until ``predicate(spans)`` holds for the spans received; answer them. ``AssertionError`` after
        ``timeout`` seconds, naming what had arrived."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate(list(self._spans)):
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(span.service_name, span.name, dict(span.attributes)) for span in self._spans]
                    raise AssertionError(f"the spans waited for did not arrive in {timeout:g} s; received: {seen}")
                self._lock.wait(min(left, 0.1))
            return list(self._spans)
