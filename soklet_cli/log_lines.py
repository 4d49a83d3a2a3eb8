"""Log lines to standard error that never block the server: a bounded queue and one writer thread.

A process whose standard error is a pipe nobody reads (a host that launched ``soklet serve --stdio`` and ignores
its stderr) fills the pipe after 64 KiB; a plain ``logging.StreamHandler`` then blocks the thread that logs — the
event loop — and with it every answer and the stop signal. :class:`NonBlockingStderr` formats a record on the
caller's thread, queues the line, and a daemon thread writes it. When the queue is full (stderr is not read), the
line is dropped and counted; the count is written as one line once stderr takes lines again. Closing waits at most
:data:`CLOSE_WAIT_SECONDS` for the queue to be written, so a stop never hangs on a full pipe either.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from typing import Final

__all__ = ["CLOSE_WAIT_SECONDS", "MAX_QUEUED_LOG_LINES", "NonBlockingStderr"]

#: Log lines waiting to be written beyond which new lines are dropped (and counted).
MAX_QUEUED_LOG_LINES: Final = 4096
#: How long closing the handler waits for the queued lines to be written.
CLOSE_WAIT_SECONDS: Final = 1.0


class NonBlockingStderr(logging.Handler):
    """A logging handler writing to file descriptor ``fd`` (default 2) from its own thread; ``emit`` never
    blocks. ``dropped`` counts the lines dropped because the queue was full."""

    def __init__(self, fd: int = 2, *, max_lines: int = MAX_QUEUED_LOG_LINES) -> None:
        super().__init__()
        if isinstance(max_lines, bool) or not isinstance(max_lines, int) or max_lines < 1:
            raise ValueError("max_lines must be a positive int")
        self._fd = fd
        self._queue: queue.Queue[bytes | None] = queue.Queue(max_lines)
        self._counter = threading.Lock()
        self._dropped = 0
        self._unreported = 0
        self._thread = threading.Thread(target=self._run, name="soklet-stderr", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        """Lines dropped since the start because standard error did not take them."""
        with self._counter:
            return self._dropped

    def emit(self, record: logging.LogRecord) -> None:
        """Queue the formatted record, or count it as dropped when the queue is full."""
        try:
            line = self.format(record).encode("utf-8", "backslashreplace") + b"\n"
        except Exception:  # a record that cannot be formatted is logging's own business
            self.handleError(record)
            return
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            with self._counter:
                self._dropped += 1
                self._unreported += 1

    def _run(self) -> None:
        while True:
            line = self._queue.get()
            if line is None:
                return
            self._write(line)
            with self._counter:
                missed, self._unreported = self._unreported, 0
            if missed:
                self._write(f"soklet: {missed} log lines dropped (standard error was not read)\n".encode())

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except OSError:
                return  # standard error is gone: the line is lost, the server goes on
            view = view[written:]

    def close(self) -> None:
        """Stop the thread once the queue is written, waiting at most :data:`CLOSE_WAIT_SECONDS`."""
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(CLOSE_WAIT_SECONDS)
        super().close()
