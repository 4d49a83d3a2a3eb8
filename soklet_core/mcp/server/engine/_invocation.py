"""The :class:`~soklet_core.mcp.InvocationFeatures` of one call: its progress token, its progress frames to the
transport's :class:`~.ProgressChannel` (increasing values only, stopped once the result exists) and whether the
client has gone."""

from __future__ import annotations

import asyncio
from decimal import Decimal

from soklet_core.json import JsonObject
from soklet_core.mcp.model.context import RequestId
from soklet_core.mcp.server.engine._call import ProgressChannel

__all__ = ["Invocation"]


class Invocation:
    """The :class:`~soklet_core.mcp.InvocationFeatures` of one request, feeding a :class:`ProgressChannel`."""

    __slots__ = ("_channel", "_closed", "_last", "_loop", "_token")

    def __init__(self, token: RequestId | None, channel: ProgressChannel | None) -> None:
        self._token = token
        self._channel = channel
        self._loop = asyncio.get_running_loop()
        self._last: Decimal | None = None
        self._closed = False

    @property
    def progress_token(self) -> RequestId | None:
        return self._token

    @property
    def cancelled(self) -> bool:
        return self._channel is not None and self._channel.cancelled

    def close(self) -> None:
        # Progress must stop once the result exists; frames a handler thread sends later are dropped.
        self._closed = True

    def report_progress(
        self, progress: Decimal | int, *, total: Decimal | int | None = None, message: str | None = None
    ) -> None:
        if self._token is None or self._channel is None or self._closed:
            return
        value = _exact(progress)
        if self._last is not None and value <= self._last:
            return  # progress must increase: a repeated or lower value is dropped, not sent
        self._last = value
        params = JsonObject.builder().put("progressToken", self._token).put("progress", value)
        if total is not None:
            params.put("total", _exact(total))
        if message is not None:
            params.put("message", message)
        frame = (
            JsonObject.builder()
            .put("jsonrpc", "2.0")
            .put("method", "notifications/progress")
            .put("params", params.build())
            .build()
        )
        try:
            self._loop.call_soon_threadsafe(self._deliver, frame)
        except RuntimeError:  # the loop has closed (shutdown): there is nobody to tell
            self._closed = True

    def _deliver(self, frame: JsonObject) -> None:
        if not self._closed and self._channel is not None:
            self._channel.progress(frame)


def _exact(number: Decimal | float) -> Decimal:
    # A float is taken by its shortest repr (0.1 -> 0.1), not its binary expansion.
    return Decimal(repr(number)) if isinstance(number, float) else Decimal(number)
