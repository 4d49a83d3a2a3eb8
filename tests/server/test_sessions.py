"""2025-era sessions at their edges: the table's count and idle bounds (with an injected clock), the pending and
in-flight caps, delivery of the client's answers, cancellation, and ids that are secret and never shown."""

from __future__ import annotations

import asyncio
import logging
import re
import secrets

import pytest

from soklet_core.json import JsonObject, parse
from soklet_core.mcp import ClientCapabilities
from soklet_core.mcp.server.legacy import _sessions as sessions_module
from soklet_core.mcp.server.legacy._sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_SECONDS,
    MAX_INFLIGHT_PER_SESSION,
    MAX_PENDING_PER_SESSION,
    PARTITION_SHARE_DIVISOR,
    PEER_SHARE_DIVISOR,
    LegacySession,
    SessionLimitReason,
    SessionsFull,
    SessionTable,
    peer_key,
)
from soklet_core.mcp.server.options import SessionOptions


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def create(table: SessionTable, partition: str = "anonymous", *, peer: str | None = None) -> LegacySession:
    return table.create(
        protocol_version="2025-11-25",
        client_capabilities=ClientCapabilities.empty(),
        client_info=None,
        partition=partition,
        peer=peer,
    )


def response(request_id: str, result: str = "{}") -> JsonObject:
    value = parse(f'{{"jsonrpc":"2.0","id":"{request_id}","result":{result}}}'.encode())
    assert isinstance(value, JsonObject)
    return value


def test_defaults_and_bounds() -> None:
    table = SessionTable()
    assert table.max_sessions == DEFAULT_MAX_SESSIONS == 1024
    assert table.idle_seconds == DEFAULT_SESSION_IDLE_SECONDS == 8 * 3600.0  # a window left open a working day
    assert (table.partition_share, table.peer_share) == (1024 // PARTITION_SHARE_DIVISOR, 1024 // PEER_SHARE_DIVISOR)
    smallest = SessionTable(options=SessionOptions(max_sessions=1))
    assert (smallest.partition_share, smallest.peer_share) == (1, 1)
    SessionTable(options=SessionOptions(max_sessions=1, idle_seconds=1))
    SessionTable(options=SessionOptions(max_sessions=65536, idle_seconds=86400))
    for bad in (0, 65537):
        with pytest.raises(ValueError, match="max_sessions"):
            SessionOptions(max_sessions=bad)
    for seconds in (0.5, 86401):
        with pytest.raises(ValueError, match="idle_seconds"):
            SessionOptions(idle_seconds=seconds)
    with pytest.raises(TypeError):
        SessionOptions(max_sessions=True)
    with pytest.raises(TypeError):
        SessionTable(options=64)  # type: ignore[arg-type]


def busy(session: LegacySession) -> asyncio.Task[None]:
    """Give the session a running request (call inside a running loop); cancel the task to end it."""
    task = asyncio.ensure_future(asyncio.sleep(3600))
    session.track(parse(b"1"), task)  # type: ignore[arg-type]
    return task


def test_a_full_table_evicts_its_longest_idle_session_and_refuses_only_when_all_are_busy() -> None:
    async def run() -> None:
        clock = Clock()
        # Three partitions, so that no share is full before the table (a partition's share of 3 is 1).
        table = SessionTable(options=SessionOptions(max_sessions=3), clock=clock)
        made = []
        for partition in ("p1", "p2", "p3"):
            made.append(create(table, partition))
            clock.now += 1
        assert table.get(made[0].id) is made[0]
        made[0].touch()  # used by an admitted request: made[1] is now the longest idle
        clock.now += 1
        fresh = create(table, "p4")
        assert made[1].closed
        assert not made[0].closed
        assert len(table) == 3
        assert table.remove(made[0].id)
        assert made[0].closed
        assert not table.remove(made[0].id)
        tasks = [busy(session) for session in (made[2], fresh, create(table, "p5"))]
        with pytest.raises(SessionsFull) as full:
            create(table, "p6")
        assert full.value.reason is SessionLimitReason.SESSIONS
        assert len(table) == 3
        assert not made[2].closed
        for task in tasks:
            task.cancel()

    asyncio.run(run())


def test_looking_a_session_up_does_not_mark_it_used() -> None:
    # The transport looks a session up before admission: a caller who only presents an id must not keep it from
    # being the longest idle (and so evicted first) while its owner is away.
    clock = Clock()
    table = SessionTable(options=SessionOptions(max_sessions=2), clock=clock)
    first = create(table, "p1")
    clock.now += 1
    second = create(table, "p2")
    clock.now += 1
    assert table.get(first.id) is first
    create(table, "p3")
    assert first.closed
    assert not second.closed


def test_one_anonymous_peer_flooding_evicts_only_its_own_sessions() -> None:
    clock = Clock()
    table = SessionTable(options=SessionOptions(max_sessions=64), clock=clock)
    share = table.peer_share
    assert share == 64 // PEER_SHARE_DIVISOR
    other = create(table, peer="192.0.2.7")
    flood = [create(table, peer="203.0.113.9") for _ in range(share)]  # the share, at its limit
    assert not any(session.closed for session in flood)
    clock.now += 1
    for _ in range(1100):  # and far past it
        create(table, peer="203.0.113.9")
    assert len(table) == share + 1
    assert all(session.closed for session in flood)  # the flooder's oldest made room
    assert table.get(other.id) is other
    assert create(table, peer="192.0.2.8") is not None  # another peer still gets a session


def test_the_share_of_a_partition_is_counted_per_partition_and_ipv6_peers_by_their_64() -> None:
    table = SessionTable(options=SessionOptions(max_sessions=64))
    share = table.partition_share
    alice = [create(table, "tenant-a", peer=f"192.0.2.{n}") for n in range(share + 5)]
    assert sum(not session.closed for session in alice) == share  # a partition's share, whatever its peers
    bob = create(table, "tenant-b")
    assert not bob.closed
    first = create(table, peer="2001:db8:1:2::1")
    for n in range(table.peer_share):
        create(table, peer=f"2001:db8:1:2::{n + 2:x}")  # the same /64: one peer
    assert first.closed
    assert peer_key("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64"
    assert peer_key("::ffff:192.0.2.1") == "192.0.2.1"
    assert peer_key("192.0.2.1") == "192.0.2.1"
    assert peer_key(None) is None


def test_sweep_stops_at_the_first_unexpired_session_and_passes_over_busy_ones() -> None:
    async def run() -> None:
        clock = Clock()
        table = SessionTable(options=SessionOptions(max_sessions=8, idle_seconds=10), clock=clock)
        running = create(table, "p1")
        task = busy(running)
        old = create(table, "p2")
        clock.now += 5
        young = create(table, "p3")
        clock.now += 6  # old is idle for 11 s, young for 6 s, running is busy
        assert table.sweep() == 1
        assert old.closed
        assert not young.closed
        assert not running.closed
        task.cancel()

    asyncio.run(run())


def test_idle_sessions_expire_at_the_idle_time() -> None:
    clock = Clock()
    table = SessionTable(options=SessionOptions(max_sessions=2, idle_seconds=60), clock=clock)
    first = create(table)
    clock.now += 59.9
    assert table.get(first.id) is first
    first.touch()  # used: the idle time starts again
    clock.now += 59.9
    assert table.get(first.id) is first
    clock.now += 60
    assert table.get(first.id) is None
    assert first.closed
    assert len(table) == 0


def test_create_sweeps_idle_sessions_when_full() -> None:
    clock = Clock()
    table = SessionTable(options=SessionOptions(max_sessions=2, idle_seconds=10), clock=clock)
    old = create(table, "p1")
    clock.now += 5
    young = create(table, "p2")
    clock.now += 6  # old is idle for 11 s, young for 6 s
    fresh = create(table, "p3")
    assert old.closed
    assert table.get(young.id) is young
    assert table.get(fresh.id) is fresh
    clock.now += 1
    newest = create(table, "p4")  # full: the longest idle (young, used before fresh) makes room
    assert young.closed
    assert not fresh.closed
    assert table.get(newest.id) is newest


def test_a_session_with_a_running_request_is_not_idle() -> None:
    async def run() -> None:
        clock = Clock()
        table = SessionTable(options=SessionOptions(idle_seconds=10), clock=clock)
        session = create(table)
        task = asyncio.ensure_future(asyncio.sleep(60))
        session.track(parse(b"1"), task)  # type: ignore[arg-type]
        clock.now += 100
        assert table.sweep() == 0
        assert table.get(session.id) is session
        session.untrack(parse(b"1"))  # type: ignore[arg-type]
        clock.now += 10
        assert table.get(session.id) is None
        task.cancel()

    asyncio.run(run())


def test_pending_requests_are_capped_and_resolved_by_id() -> None:
    async def run() -> None:
        session = create(SessionTable())
        waiting = [session.expect("elicitation/create") for _ in range(MAX_PENDING_PER_SESSION)]
        with pytest.raises(SessionsFull) as full:
            session.expect("elicitation/create")
        assert full.value.reason is SessionLimitReason.PENDING
        ids = [request_id for request_id, _ in waiting]
        assert len(set(ids)) == MAX_PENDING_PER_SESSION
        assert ids[0].value == "s-1"  # type: ignore[union-attr]
        assert session.deliver(response("s-2", '{"action":"accept"}'))
        assert waiting[1][1].result()["result"] == parse(b'{"action":"accept"}')
        assert not session.deliver(response("s-2"))  # answered once only
        assert not session.deliver(response("s-999"))  # unknown: ignored
        assert not session.deliver(parse(b'{"jsonrpc":"2.0","id":3,"result":{}}'))  # type: ignore[arg-type]
        error = parse(b'{"jsonrpc":"2.0","id":"s-3","error":{"code":-1,"message":"no"}}')
        assert isinstance(error, JsonObject)
        assert session.deliver(error)
        assert "error" in waiting[2][1].result()
        session.forget(ids[3])
        assert waiting[3][1].cancelled()
        assert not session.deliver(response("s-4"))
        assert session.pending == MAX_PENDING_PER_SESSION - 3
        session.expect("roots/list")  # a slot is free again
        session.close()
        assert all(future.done() for _, future in waiting)
        assert session.pending == 0

    asyncio.run(run())


def test_in_flight_requests_are_capped_and_cancellable() -> None:
    async def run() -> None:
        session = create(SessionTable())
        tasks = [asyncio.ensure_future(asyncio.sleep(60)) for _ in range(MAX_INFLIGHT_PER_SESSION + 1)]
        for number, task in enumerate(tasks[:-1]):
            session.track(parse(str(number).encode()), task)  # type: ignore[arg-type]
        with pytest.raises(SessionsFull) as full:
            session.track(parse(b'"extra"'), tasks[-1])  # type: ignore[arg-type]
        assert full.value.reason is SessionLimitReason.IN_FLIGHT
        assert session.cancel(parse(b"0"))
        assert not session.cancel(parse(b"999"))
        assert not session.cancel(parse(b"{}"))
        await asyncio.sleep(0)
        assert tasks[0].cancelled()
        session.close()
        await asyncio.sleep(0)
        assert all(task.cancelled() for task in tasks[:-1])
        tasks[-1].cancel()
        with pytest.raises(asyncio.CancelledError):
            session.expect("roots/list")

    asyncio.run(run())


def test_a_running_id_cannot_be_tracked_twice() -> None:
    async def run() -> None:
        session = create(SessionTable())
        first = asyncio.ensure_future(asyncio.sleep(60))
        second = asyncio.ensure_future(asyncio.sleep(60))
        session.track(parse(b"1"), first)  # type: ignore[arg-type]
        with pytest.raises(SessionsFull):
            session.track(parse(b"1"), second)  # type: ignore[arg-type]
        session.close()
        second.cancel()

    asyncio.run(run())


def test_ids_are_secret_random_and_never_shown(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[int] = []
    real = secrets.token_urlsafe

    def spy(nbytes: int) -> str:
        drawn.append(nbytes)
        return real(nbytes)

    monkeypatch.setattr(sessions_module.secrets, "token_urlsafe", spy)
    caplog.set_level(logging.DEBUG)
    table = SessionTable()
    made = [create(table) for _ in range(50)]
    assert drawn == [32] * 50  # 256 bits from secrets
    assert len({session.id for session in made}) == 50
    for session in made:
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", session.id)
        assert session.id not in repr(session)
        assert session.id not in str(session)
        assert session.id not in repr(table)
        assert session.id not in caplog.text


def test_constructor_checks() -> None:
    with pytest.raises(ValueError, match="protocol_version"):
        LegacySession(
            protocol_version="", client_capabilities=ClientCapabilities.empty(), client_info=None, partition="p"
        )
    with pytest.raises(TypeError, match="client_capabilities"):
        LegacySession(protocol_version="2025-11-25", client_capabilities={}, client_info=None, partition="p")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partition"):
        LegacySession(
            protocol_version="2025-11-25",
            client_capabilities=ClientCapabilities.empty(),
            client_info=None,
            partition="",
        )
