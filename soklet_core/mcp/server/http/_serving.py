"""uvicorn serving an MCP app: its config from the app's :class:`~._runner.HttpLimits`, and a server class whose
stop starts the app's shutdown drain first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from soklet_core.mcp.server.http._runner import limited_uvicorn_config
from soklet_core.mcp.server.http._transport import McpAsgiApp

if TYPE_CHECKING:
    import uvicorn

__all__ = ["ServesAsgi", "uvicorn_config", "uvicorn_server_class"]


class ServesAsgi(Protocol):
    """Anything that hands out its MCP ASGI app (an ``McpServer``)."""

    def asgi_app(self) -> McpAsgiApp:
        """The app to serve."""
        ...


def _app_of(target: ServesAsgi | McpAsgiApp) -> McpAsgiApp:
    return target if isinstance(target, McpAsgiApp) else target.asgi_app()


def uvicorn_config(target: ServesAsgi | McpAsgiApp, **options: Any) -> uvicorn.Config:
    """A ``uvicorn.Config`` serving ``target`` with its :class:`HttpLimits` (uvloop, httptools, lifespan on).

    ``options`` go to ``uvicorn.Config`` (``log_level``, ``host``, ``port``…); the limit settings cannot be
    overridden there: set them in the server's options, ``ServerOptions(http=HttpOptions(limits=...))``.
    """
    app = _app_of(target)
    return limited_uvicorn_config(app, app.http_limits, **options)


_server_class: list[type[uvicorn.Server]] = []


def uvicorn_server_class() -> type[uvicorn.Server]:
    """A ``uvicorn.Server`` whose stop starts the app's drain before uvicorn closes its listeners.

    uvicorn sends the ASGI lifespan shutdown only after every connection has ended, far too late for the app to
    answer new requests 503 or to cancel the ones past the grace period with a JSON-RPC answer.
    """
    if _server_class:
        return _server_class[0]
    import uvicorn

    class DrainingServer(uvicorn.Server):
        """uvicorn's server; on stop, :meth:`McpAsgiApp.begin_drain` runs first."""

        async def shutdown(self, sockets: Any = None) -> None:
            app = self.config.loaded_app if self.config.loaded else self.config.app
            while not isinstance(app, McpAsgiApp) and hasattr(app, "app"):
                app = app.app  # uvicorn's wrappers (proxy headers, message logger) keep the real app as .app
            if isinstance(app, McpAsgiApp):
                app.begin_drain()
            await super().shutdown(sockets)

    _server_class.append(DrainingServer)
    return DrainingServer
