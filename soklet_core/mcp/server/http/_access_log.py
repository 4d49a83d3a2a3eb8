"""The access log: one line per answered request on logger ``soklet.mcp.access``, the same for every transport.

``method=… operation=… status=… code=… duration_ms=… [reason=…]``, with ``transport=stdio`` in front for stdio.
The same fields travel with the record as values (``record.soklet``, a mapping of bounded values, with ``event`` =
``access``) and the request's span ids, when it was traced, as ``record.soklet_trace``
(:class:`~soklet_core.tracing.TraceIds`): a structured formatter writes them without parsing the line.
Only known method names, registered operation names and bounded reasons appear (the transports fill
:class:`~soklet_core.mcp.server._jsonrpc.DispatchResult` with nothing else): never tokens, headers, params or other
raw input.
The same answer is counted in the server's metrics, when it has any.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from soklet_core.mcp.server.ops._metrics import request_outcome

if TYPE_CHECKING:
    from soklet_core.mcp.server._jsonrpc import DispatchResult
    from soklet_core.mcp.server.ops._metrics import ServerMetrics

__all__ = ["record_answer"]

_access_log = logging.getLogger("soklet.mcp.access")


def record_answer(
    result: DispatchResult, started: float, metrics: ServerMetrics | None, *, transport: str | None = None
) -> None:
    """Count ``result`` in ``metrics`` and write its access-log line (``started``: ``time.perf_counter()`` when the
    request arrived; ``transport``: a fixed name prefixed as ``transport=NAME``, ``None`` for HTTP)."""
    if metrics is not None:
        metrics.request(result.method, request_outcome(result.status, result.code, result.reason), trace=result.trace)
    if not _access_log.isEnabledFor(logging.INFO):
        return
    duration_ms = round((time.perf_counter() - started) * 1000, 1)
    fields = {
        "event": "access",
        "transport": transport or "http",
        "method": result.method,
        "operation": result.operation,
        "status": result.status,
        "code": result.code,
        "duration_ms": duration_ms,
        "reason": result.reason,
    }
    _access_log.info(
        "%smethod=%s operation=%s status=%d code=%s duration_ms=%.1f%s",
        "" if transport is None else f"transport={transport} ",
        result.method or "-",
        result.operation or "-",
        result.status,
        result.code if result.code is not None else "-",
        duration_ms,
        "" if result.reason is None else f" reason={result.reason}",
        extra={"soklet": fields, "soklet_trace": result.trace},
    )
