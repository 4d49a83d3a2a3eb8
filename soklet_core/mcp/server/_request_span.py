"""One MCP request's server span: its parent, its attributes and its end, for every transport and both eras.

A transport starts one :class:`RequestSpan` per JSON-RPC request once it knows the method (after the envelope),
makes it current while admission and the engine run (so their spans are its children), and ends it with the
answer. The parent is the span the client named: ``params._meta.traceparent`` first (MCP carries trace context
there, and leaves it out of the params digest, so it survives a retry unchanged), else the HTTP ``traceparent``
header; when both name different spans, the header's becomes a link. Every round of one continuation that carries
the client's ``traceparent`` is therefore a child of the client's trace, whichever instance serves it.

No link to the first round is carried inside the sealed state: its plaintext is a closed schema every instance of
a fleet must read (``docs/protection-format.md``), and a trace context is not a security binding. ``docs/tracing.md``
explains the choice.

Attributes are the MCP semantic conventions' where they exist (``mcp.method.name``, ``mcp.protocol.version``,
``gen_ai.tool.name``, ``gen_ai.prompt.name``, ``gen_ai.operation.name``, ``rpc.response.status_code``,
``http.response.status_code``, ``network.transport``, ``error.type``) and soklet's own for the rest
(``soklet.era``, ``soklet.outcome``, ``soklet.reason``, ``soklet.operation``). Only known method names, registered
operation names, validated protocol versions and closed reasons are written: never ids, params, tokens or headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Final

from opentelemetry.trace import Span, SpanContext, SpanKind

from soklet_core import tracing
from soklet_core.json import JsonObject, JsonString, JsonValue
from soklet_core.mcp.model import methods
from soklet_core.mcp.server._jsonrpc import DispatchResult
from soklet_core.mcp.server.engine._call import Complete, InputRequired, Outcome, Refused, TaskCreated

__all__ = ["LEGACY_ERA", "MODERN_ERA", "RequestSpan", "meta_of"]

#: ``soklet.era`` of a 2026-07-28 request.
MODERN_ERA: Final = "2026-07-28"
#: ``soklet.era`` of a request inside a 2025-era session.
LEGACY_ERA: Final = "2025"

_TRACEPARENT: Final = "traceparent"
_OUTCOMES: Final[Mapping[type, str]] = {
    Complete: "complete",
    InputRequired: "input_required",
    TaskCreated: "task_created",
    Refused: "refused",
}
# The semantic conventions' attribute naming the target of the methods that have one.
_TARGETS: Final = {methods.TOOLS_CALL: "gen_ai.tool.name", methods.PROMPTS_GET: "gen_ai.prompt.name"}


def meta_of(message: JsonValue) -> JsonObject | None:
    """``params._meta`` of a JSON-RPC message, when both are objects."""
    if not isinstance(message, JsonObject):
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, JsonObject) else None
    return meta if isinstance(meta, JsonObject) else None


class RequestSpan:
    """The server span of one MCP request (built by :meth:`start`; ``None`` there when tracing is off)."""

    __slots__ = ("_method", "_outcome", "_span")

    def __init__(self, span: Span, method: str | None) -> None:
        self._span = span
        self._method = method
        self._outcome: str | None = None

    @classmethod
    def start(
        cls,
        *,
        method: str | None,
        meta: JsonObject | None,
        headers: Mapping[str, str] | None,
        transport: str,
        era: str,
        started_ns: int | None = None,
    ) -> RequestSpan | None:
        """Start the span of a request for ``method`` — a method the transport knows (its access log's rule), or
        ``None``: never named — with its parent from ``meta`` or ``headers``; ``transport`` is ``tcp`` or ``pipe``;
        ``started_ns``: when the request arrived (``time.time_ns()``), else now. ``None`` when tracing is off."""
        if tracing.tracer() is None:
            return None
        known = method
        from_meta = meta.get(_TRACEPARENT) if meta is not None else None
        parent = tracing.remote_parent(from_meta.value) if isinstance(from_meta, JsonString) else None
        header = tracing.remote_parent(headers.get(_TRACEPARENT)) if headers is not None else None
        links: tuple[SpanContext, ...] = ()
        if parent is None:
            parent = header
        elif header is not None and header.span_id != parent.span_id:
            links = (header,)
        attributes: dict[str, tracing.AttributeValue] = {"network.transport": transport, "soklet.era": era}
        if known is not None:
            attributes["mcp.method.name"] = known
        span = tracing.start_span(
            known or "mcp",
            parent=parent,
            links=links,
            attributes=attributes,
            kind=SpanKind.SERVER,
            start_time_ns=started_ns,
        )
        return None if span is None else cls(span, known)

    def scope(self) -> AbstractContextManager[Span]:
        """The span current for a ``with`` block (not ended by it)."""
        return tracing.use_span(self._span)

    def version(self, protocol_version: str) -> None:
        """The protocol version the request was validated for (a supported one)."""
        self._span.set_attribute("mcp.protocol.version", protocol_version)

    def outcome(self, outcome: Outcome) -> None:
        """What the engine answered: the outcome word, the operation, and the method's target attribute."""
        self._outcome = _OUTCOMES.get(type(outcome), "refused")
        self.operation(outcome.operation)

    def operation(self, name: str | None) -> None:
        """The registered operation the request resolved to (names the span ``method operation``)."""
        if name is None or self._method is None:
            return
        span = self._span
        span.update_name(f"{self._method} {name}")
        span.set_attribute(tracing.OPERATION, name)
        target = _TARGETS.get(self._method)
        if target is not None:
            span.set_attribute(target, name)
        if self._method == methods.TOOLS_CALL:
            span.set_attribute("gen_ai.operation.name", "execute_tool")

    def round(self, number: int) -> None:
        """The request-state round this request continued (the round of the state it carried)."""
        self._span.set_attribute(tracing.ROUND, number)

    def finish(self, result: DispatchResult) -> DispatchResult:
        """End the span with the answer (status, JSON-RPC code, refusal reason); ``result`` with the span's ids."""
        span = self._span
        if self._outcome is None and result.operation is not None:
            self.operation(result.operation)  # a transport that does not hand over the engine's outcome (2025 era)
        span.set_attribute("http.response.status_code", result.status)
        if result.code is not None:
            span.set_attribute("rpc.response.status_code", str(result.code))
        if result.reason is not None and result.reason != "notification":
            tracing.fail(span, result.reason)
        else:
            span.set_attribute(
                tracing.OUTCOME, self._outcome or ("complete" if result.body is not None else "accepted")
            )
        span.end()
        ids = tracing.trace_ids(span)
        return result if ids is None else result.traced(ids)

    def abandon(self, reason: str) -> None:
        """End the span of a request that got no answer (cancelled: ``reason`` says by whom)."""
        tracing.fail(self._span, reason, "cancelled")
        self._span.end()
