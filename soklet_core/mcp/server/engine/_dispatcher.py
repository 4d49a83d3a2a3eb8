"""A bridge for the callers that still drive the engine as an HTTP POST (the 2025-era session engine and stdio forge
2026-07-28 requests): :class:`Dispatcher` is an :class:`~.Engine` that also answers
:meth:`Dispatcher.dispatch(HttpRequest) <Dispatcher.dispatch>` through the HTTP side
(:class:`soklet_core.mcp.server.http._dispatch.HttpDispatch`). New code builds a :class:`~.Call` and calls
:meth:`Engine.call <.Engine.call>`; this module goes once ``legacy/`` and ``stdio/`` do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soklet_core.mcp.server._headers import HttpRequest, encode_header
from soklet_core.mcp.server._jsonrpc import DispatchResult
from soklet_core.mcp.server._options import DEFAULT_LIST_CACHE_HINT, DEFAULT_LIST_CACHE_TTL_MS, DEFAULT_SERVER_NAME
from soklet_core.mcp.server.engine._call import Call, ProgressChannel
from soklet_core.mcp.server.engine._engine import Engine, Interceptor, LifecycleCallback
from soklet_core.mcp.server.engine._state import LARGE_BODY_WAIT_SECONDS, MAX_CONCURRENT_LARGE_BODIES
from soklet_core.protocol import PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY, SUPPORTED_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from soklet_core.mcp.server.http._dispatch import HttpDispatch

__all__ = [
    "DEFAULT_LIST_CACHE_HINT",
    "DEFAULT_LIST_CACHE_TTL_MS",
    "DEFAULT_SERVER_NAME",
    "LARGE_BODY_WAIT_SECONDS",
    "MAX_CONCURRENT_LARGE_BODIES",
    "PROTOCOL_VERSION_META_KEY",
    "SERVER_INFO_META_KEY",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "DispatchResult",
    "Dispatcher",
    "HttpRequest",
    "Interceptor",
    "LifecycleCallback",
    "ProgressChannel",
    "encode_header",
]


class Dispatcher(Engine):
    """An :class:`~.Engine` that also answers a forged 2026-07-28 POST (the bridge; see the module)."""

    _http: HttpDispatch | None = None

    def _http_side(self) -> HttpDispatch:
        if self._http is None:
            # Imported here: the HTTP room sits above the engine, and this bridge is its only way down.
            from soklet_core.mcp.server.http._dispatch import HttpDispatch

            self._http = HttpDispatch(self)
        return self._http

    async def dispatch(self, request: HttpRequest, channel: ProgressChannel | None = None) -> DispatchResult:
        """Answer one 2026-07-28 POST (:meth:`HttpDispatch.dispatch`)."""
        return await self._http_side().dispatch(request, channel)

    async def validate(self, request: HttpRequest) -> Call | None:
        """Validation steps 1-8 of one POST (:meth:`HttpDispatch.validate`)."""
        return await self._http_side().validate(request)
