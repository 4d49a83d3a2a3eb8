"""The async admin client against real loopback sockets that misbehave as a real soklet serve cannot: an answer
over the size bound, one that never comes, 401, a redirect, a non-snapshot. Each is an outcome with fixed text,
never an exception, and never delays the other instances beyond their own timeout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from soklet_core.fleet import (
    MAX_CA_FILE_BYTES,
    MAX_CONCURRENT_READS,
    MAX_SNAPSHOT_BYTES,
    AdminTarget,
    InstanceReading,
    read_snapshots,
    resolve_targets,
)
from tests.fleet.support_snapshots import A, B, document, keyring

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
TOKEN = "fleet-test-token-0123456789"


def _answer(status: str, body: bytes, *, length: int | None = None, extra: str = "", delay: float = 0) -> Handler:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        assert f"authorization: Bearer {TOKEN}".encode() in head.lower().replace(b"bearer", b"Bearer")
        assert b"accept-encoding: identity" in head.lower()
        await asyncio.sleep(delay)
        size = len(body) if length is None else length
        fields = f"content-length: {size}\r\n{extra}connection: close\r\n\r\n"
        writer.write(f"HTTP/1.1 {status}\r\n{fields}".encode() + body)
        await writer.drain()
        writer.close()

    return handle


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(30)


async def _streaming(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # No content-length: the body is cut off by reading, not by the declared size.
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n")
    for _ in range(MAX_SNAPSHOT_BYTES // 65536 + 2):
        writer.write(b" " * 65536)
        await writer.drain()
    writer.close()


async def _serve(handler: Handler) -> tuple[asyncio.Server, str]:
    # A backlog above MAX_CONCURRENT_READS: asyncio's default (100) would cap what the test can see in flight.
    server = await asyncio.start_server(handler, "127.0.0.1", 0, backlog=512)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


@contextlib.asynccontextmanager
async def _servers() -> AsyncIterator[dict[str, str]]:
    good = json.dumps(document(keyring(A, B), "good")).encode()
    handlers: dict[str, Handler] = {
        "good": _answer("200 OK", good),
        "unauthorized": _answer("401 Unauthorized", b""),
        "redirect": _answer("302 Found", b""),
        "declared-large": _answer("200 OK", b"", length=MAX_SNAPSHOT_BYTES + 1),
        "streamed-large": _streaming,
        "not-json": _answer("200 OK", b"<html>hunter2</html>"),
        "compressed": _answer("200 OK", good, extra="content-encoding: gzip\r\n"),
        "silent": _silent,
    }
    started = {name: await _serve(handler) for name, handler in handlers.items()}
    yield {name: url for name, (_, url) in started.items()}
    for server, _ in started.values():
        server.close()


@pytest.mark.slow
def test_each_failure_is_an_outcome_with_fixed_text() -> None:
    async def scenario(closed: str) -> tuple[list[AdminTarget], tuple[InstanceReading, ...]]:
        async with _servers() as servers:
            # Only the silent instance is meant to run out of time: the others get a bound a busy machine meets.
            targets = [
                AdminTarget(name, url, TOKEN, timeout=1.0 if name == "silent" else 30.0)
                for name, url in servers.items()
            ]
            targets.append(AdminTarget("closed", closed, TOKEN, timeout=30.0))
            return targets, await read_snapshots(targets)

    # The probe stays bound, never listening, for the whole scenario: a connection to it is refused, and no server
    # the scenario starts on port 0 can be given its port (released early, it was once handed to "good").
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        targets, answers = asyncio.run(scenario(f"http://127.0.0.1:{probe.getsockname()[1]}"))
    readings = {reading.name: reading for reading in answers}
    # That the reads run at once is shown without a clock by test_at_most_max_concurrent_reads_in_flight.
    assert readings["good"].snapshot is not None
    assert readings["good"].snapshot.instance == "good"
    assert readings["unauthorized"].problem == "HTTP 401: the admin token was refused"
    assert readings["redirect"].problem == "HTTP 302"
    assert readings["declared-large"].problem == f"the answer is larger than {MAX_SNAPSHOT_BYTES:,} bytes"
    assert readings["streamed-large"].problem == f"the answer is larger than {MAX_SNAPSHOT_BYTES:,} bytes"
    assert readings["not-json"].problem is not None
    assert readings["not-json"].problem.startswith("not a keyring snapshot")
    assert "hunter2" not in readings["not-json"].problem
    assert readings["silent"].problem == "no answer within 1 s"
    assert readings["closed"].problem == "connection refused"
    assert readings["compressed"].problem == "the answer is compressed (identity was asked for)"
    assert TOKEN not in repr(targets[0])


def test_a_missing_ca_file_is_a_reading_problem() -> None:
    target = AdminTarget("x", "https://127.0.0.1:1", TOKEN, ca_file="/nonexistent/ca.pem")
    (reading,) = asyncio.run(read_snapshots([target]))
    assert reading.problem == "CA file: no such file"


def test_resolve_localhost_gives_every_address() -> None:
    targets = asyncio.run(resolve_targets("localhost", 9001, token=TOKEN))
    urls = [target.url for target in targets]
    assert "http://127.0.0.1:9001" in urls
    assert len(urls) == len(set(urls))
    assert all(url in ("http://127.0.0.1:9001", "http://[::1]:9001") for url in urls)
    secure = asyncio.run(resolve_targets("localhost", 9443, token=TOKEN, scheme="https"))
    assert all(target.server_name == "localhost" for target in secure)
    with pytest.raises(socket.gaierror):
        asyncio.run(resolve_targets("no-such-host.invalid", 9001, token=TOKEN))


@pytest.mark.slow
def test_at_most_max_concurrent_reads_in_flight() -> None:
    body = json.dumps(document(keyring(A, B), "good")).encode()
    peak = 0
    open_now = 0

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal peak, open_now
        open_now += 1
        peak = max(peak, open_now)
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(0.3)
        open_now -= 1
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()

    async def scenario() -> tuple[InstanceReading, ...]:
        server, url = await _serve(slow)
        try:
            targets = [AdminTarget(f"i{index}", url, TOKEN, timeout=30) for index in range(MAX_CONCURRENT_READS + 2)]
            return await read_snapshots(targets)
        finally:
            server.close()

    readings = asyncio.run(scenario())
    assert all(reading.reachable for reading in readings)
    assert peak == MAX_CONCURRENT_READS


def test_ca_file_size_limit(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-" * (MAX_CA_FILE_BYTES + 1))
    (reading,) = asyncio.run(read_snapshots([AdminTarget("x", "https://127.0.0.1:1", TOKEN, ca_file=str(ca))]))
    assert reading.problem == "CA file: the file is larger than soklet reads"
    ca.write_bytes(b"-" * MAX_CA_FILE_BYTES)
    (reading,) = asyncio.run(read_snapshots([AdminTarget("x", "https://127.0.0.1:1", TOKEN, ca_file=str(ca))]))
    assert reading.problem == "CA file: not PEM certificates"


@pytest.mark.slow
def test_an_answer_slower_than_httpx_default_but_within_the_timeout_is_read() -> None:
    good = json.dumps(document(keyring(A, B), "slow")).encode()

    async def scenario() -> tuple[InstanceReading, ...]:
        # httpx's own default timeout is 5 s; the target's timeout (30 s, met by a busy machine too) is the one
        # that counts.
        server, url = await _serve(_answer("200 OK", good, delay=5.5))
        try:
            return await read_snapshots([AdminTarget("slow", url, TOKEN, timeout=30)])
        finally:
            server.close()

    (reading,) = asyncio.run(scenario())
    assert reading.reachable, reading.problem
