"""NonBlockingStderr: a log line never blocks the caller; a full pipe drops lines (counted, then reported once
the pipe is read again); closing does not wait on a pipe nobody reads. Real pipes, no mocks."""

from __future__ import annotations

import logging
import os
import time

import pytest

from soklet_cli.log_lines import MAX_QUEUED_LOG_LINES, NonBlockingStderr

#: A bound on waiting for the writer thread (a hang guard, not a timing assertion).
GUARD_SECONDS = 30


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("soklet.test", logging.INFO, __file__, 1, message, None, None)


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_lines_reach_the_pipe_in_order() -> None:
    read_end, write_end = os.pipe()
    handler = NonBlockingStderr(write_end)
    try:
        for n in range(3):
            handler.emit(_record(f"line {n}"))
        deadline = time.monotonic() + GUARD_SECONDS
        seen = b""
        while seen.count(b"\n") < 3:
            assert time.monotonic() < deadline, seen
            seen += _read_all(read_end)
            time.sleep(0.01)
        assert seen == b"line 0\nline 1\nline 2\n"
        assert handler.dropped == 0
    finally:
        handler.close()
        os.close(read_end)
        os.close(write_end)


def test_a_pipe_nobody_reads_drops_lines_and_never_blocks_the_caller() -> None:
    read_end, write_end = os.pipe()
    handler = NonBlockingStderr(write_end, max_lines=4)
    try:
        line = "x" * 1000
        for _ in range(200):  # 200 KB: more than the pipe and the queue hold
            handler.emit(_record(line))  # returns at once, whatever the pipe holds
        assert handler.dropped > 0
        handler.close()  # bounded: the writer thread may still be stuck on the full pipe
        received = b""
        deadline = time.monotonic() + GUARD_SECONDS
        # Once read, the pipe takes every queued line and the count of the dropped ones: nothing is lost unsaid.
        while b"log lines dropped" not in received or received.count(line.encode()) + handler.dropped < 200:
            assert time.monotonic() < deadline, (received.count(line.encode()), handler.dropped)
            received += _read_all(read_end)
            time.sleep(0.01)
        assert received.count(line.encode()) + handler.dropped == 200
    finally:
        os.close(read_end)
        os.close(write_end)


def test_the_queue_bound_is_checked() -> None:
    assert MAX_QUEUED_LOG_LINES == 4096
    NonBlockingStderr(max_lines=1).close()
    with pytest.raises(ValueError, match="max_lines"):
        NonBlockingStderr(max_lines=0)
