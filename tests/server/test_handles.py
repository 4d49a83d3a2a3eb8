"""HandleRepository over a real store, on both backends (the ``store_url`` fixture: SQLite in tmp_path and a fresh
database of the throwaway PostgreSQL cluster): issue, resume, rotation, every collapse case refused with the same
bytes and consuming nothing, 32 concurrent retries with one handle, durability through a fresh repository and
store object."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest

from soklet_core.json import JsonNumber, JsonObject, JsonValue
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import (
    ClientCapabilities,
    HandleRejected,
    HandleRepository,
    Identity,
    McpError,
    RequestContext,
    RequestStateMode,
)
from soklet_core.mcp.model import mint_url_handle
from soklet_core.mcp.server.durable import HANDLE_BYTES, HANDLE_REJECTED_REASON, MAX_HANDLE_LIFETIME
from soklet_core.mcp.server.engine import AnonymousAdmission, Call, CanonicalParams, Engine, RefusalKind, Refused
from soklet_core.mcp.server.engine._engine import handle_refusal
from soklet_core.protection import ProtectionConfig, RequestStateSealer
from soklet_core.protocol import PROTOCOL_VERSION
from soklet_core.store import MAX_HANDLE_STATE_BYTES, DurableStore, StoreError, StoreErrorReason, open_store

T = TypeVar("T")
OPERATION = "order.checkout"
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Clock:
    """A clock the test moves."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def ctx(
    handle: str | None = None,
    *,
    subject: str | None = "alice",
    partition: str = "tenant-a",
    operation: str = OPERATION,
) -> RequestContext:
    """The admitted context of one call (a retry carrying ``handle`` as its application state)."""
    return RequestContext(
        identity=Identity(subject),
        partition=partition,
        client_capabilities=ClientCapabilities.from_mapping({"elicitation": {}}),
        protocol_version="2026-07-28",
        request_id=JsonNumber.from_value(1),
        method="tools/call",
        operation_name=operation,
        request_state_mode=RequestStateMode.APPLICATION_PROTECTED,
        application_request_state=handle,
    )


def run_with(store_url: str, body: Callable[[DurableStore], Awaitable[T]]) -> T:
    """Run ``body`` with an opened store on ``store_url`` (closed afterwards) in one event loop."""

    async def main() -> T:
        store = open_store(store_url)
        await store.open()
        try:
            return await body(store)
        finally:
            await store.close()

    return asyncio.run(main())


async def rejected(call: Awaitable[Any]) -> HandleRejected:
    """The error ``call`` raises; fails the test unless it is the one domain refusal (never a wire error)."""
    with pytest.raises(HandleRejected) as caught:
        await call
    assert not isinstance(caught.value, McpError)
    return caught.value


def wire(error: HandleRejected) -> McpError:
    """What the client gets when a handler lets ``error`` through: the engine's one mapping."""
    refusal = handle_refusal(error)
    assert refusal.kind is RefusalKind.APPLICATION
    return refusal.error


def value(data: Any) -> JsonValue:
    return JsonValue.from_python(data)


@pytest.mark.slow
def test_issue_resume_rotate_finish(store_url: str) -> None:
    async def body(store: DurableStore) -> None:
        handles = HandleRepository(store)
        first = await handles.issue(ctx(), {"step": "quantity"})
        assert len(first) == 43
        assert len(base64.urlsafe_b64decode(first + "=")) == HANDLE_BYTES
        assert await handles.resume(ctx(first)) == value({"step": "quantity"})
        assert await handles.resume(ctx(first)) == value({"step": "quantity"})  # resuming consumes nothing
        second = await handles.consume_and_replace(ctx(first), {"step": "confirm", "quantity": 3})
        assert second is not None
        assert second != first
        assert await handles.resume(ctx(second)) == value({"step": "confirm", "quantity": 3})
        await rejected(handles.resume(ctx(first)))  # the accepted handle was rotated away
        await rejected(handles.consume_and_replace(ctx(first), {"step": "x"}))
        assert await handles.consume_and_replace(ctx(second), None) is None  # finished: no replacement
        await rejected(handles.resume(ctx(second)))
        assert await store.count_live_handles(datetime.now(UTC)) == 0
        assert handles.rejected == 3

    run_with(store_url, body)


def test_every_collapse_case_is_the_same_failure_and_consumes_nothing(store_url: str) -> None:
    async def body(store: DurableStore) -> None:
        clock = Clock()
        handles = HandleRepository(store, clock=clock)
        owner = await handles.issue(ctx(), {"n": 1})
        replayed = await handles.issue(ctx(), {"n": 2})
        assert await handles.consume_and_replace(ctx(replayed), None) is None
        other_tenant = HandleRepository(store, tenant="other", clock=clock)
        later = HandleRepository(store, clock=Clock(START + handles.lifetime))  # exactly at expiry: dead
        never_issued = mint_url_handle(HANDLE_BYTES)
        cases: dict[str, Callable[[], Awaitable[Any]]] = {
            "missing": lambda: handles.resume(ctx(None)),
            "malformed": lambda: handles.resume(ctx(owner[:-1])),
            "not-base64url": lambda: handles.resume(ctx(owner[:-1] + "!")),
            "unknown": lambda: handles.resume(ctx(never_issued)),
            "expired": lambda: later.resume(ctx(owner)),
            "replayed": lambda: handles.resume(ctx(replayed)),
            "wrong-tenant": lambda: other_tenant.resume(ctx(owner)),
            "wrong-principal": lambda: handles.resume(ctx(owner, subject="bob")),
            "anonymous": lambda: handles.resume(ctx(owner, subject=None)),
            "wrong-partition": lambda: handles.resume(ctx(owner, partition="tenant-b")),
            "wrong-operation": lambda: handles.resume(ctx(owner, operation="deploy.approve")),
            "consume-missing": lambda: handles.consume_and_replace(ctx(None), {"n": 9}),
            "consume-unknown": lambda: handles.consume_and_replace(ctx(never_issued), {"n": 9}),
            "consume-expired": lambda: later.consume_and_replace(ctx(owner), None),
            "consume-replayed": lambda: handles.consume_and_replace(ctx(replayed), None),
            "consume-wrong-tenant": lambda: other_tenant.consume_and_replace(ctx(owner), None),
            "consume-wrong-principal": lambda: handles.consume_and_replace(ctx(owner, subject="bob"), {"n": 9}),
            "consume-wrong-partition": lambda: handles.consume_and_replace(ctx(owner, partition="tenant-b"), None),
            "consume-wrong-operation": lambda: handles.consume_and_replace(ctx(owner, operation="x.y"), None),
        }
        expected = wire(HandleRejected())
        for name, call in cases.items():
            error = await rejected(call())
            answer = wire(error)
            assert (answer.encode(value(5)), answer.http_status, answer.log_reason) == (
                expected.encode(value(5)),
                400,
                HANDLE_REJECTED_REASON,
            ), name
            assert (str(error), error.reason) == (HANDLE_REJECTED_REASON, None), name
            assert owner not in repr(error), name
        assert expected.code == -32602
        assert expected.message == "Invalid or expired request state"
        # Not one of those consumed the owner's entry: it resumes and rotates as if nothing happened.
        assert await handles.resume(ctx(owner)) == value({"n": 1})
        assert await handles.consume_and_replace(ctx(owner), {"n": 3}) is not None
        assert handles.rejected + other_tenant.rejected + later.rejected == len(cases)

    run_with(store_url, body)


def test_thirty_two_concurrent_retries_exactly_one_wins(store_url: str) -> None:
    async def body(store: DurableStore) -> None:
        handles = HandleRepository(store)
        handle = await handles.issue(ctx(), {"n": 0})
        outcomes = await asyncio.gather(
            *(handles.consume_and_replace(ctx(handle), {"n": i}) for i in range(32)), return_exceptions=True
        )
        winners = [outcome for outcome in outcomes if isinstance(outcome, str)]
        losers = [outcome for outcome in outcomes if isinstance(outcome, HandleRejected)]
        assert len(winners) == 1, outcomes
        assert len(losers) == 31, outcomes
        assert await store.count_live_handles(datetime.now(UTC)) == 1  # the winner's replacement only
        assert isinstance(await handles.resume(ctx(winners[0])), JsonObject)

    run_with(store_url, body)


def test_a_fresh_repository_and_store_object_continue(store_url: str) -> None:
    async def first(store: DurableStore) -> str:
        return await HandleRepository(store).issue(ctx(subject="bob"), {"step": "confirm", "quantity": 2})

    handle = run_with(store_url, first)

    async def second(store: DurableStore) -> str | None:
        handles = HandleRepository(store)
        assert await handles.resume(ctx(handle, subject="bob")) == value({"step": "confirm", "quantity": 2})
        return await handles.consume_and_replace(ctx(handle, subject="bob"), None)

    assert run_with(store_url, second) is None


def test_the_store_never_holds_the_handle_itself(store_url: str) -> None:
    async def body(store: DurableStore) -> None:
        handles = HandleRepository(store)
        handle = await handles.issue(ctx(), {"n": 1})
        # Looked up by the handle text directly, the store has nothing: it is keyed by the handle's digest.
        assert await store.peek_handle(handle, handles.binding(ctx()), datetime.now(UTC)) is None
        assert not await store.consume_and_replace(handle, handles.binding(ctx()), datetime.now(UTC), None)
        assert await handles.resume(ctx(handle)) == value({"n": 1})

    run_with(store_url, body)


def test_state_size_limit(store_url: str) -> None:
    async def body(store: DurableStore) -> None:
        handles = HandleRepository(store)
        at_limit = "x" * (MAX_HANDLE_STATE_BYTES - 2)  # the JSON text adds two quotes
        handle = await handles.issue(ctx(), at_limit)
        assert await handles.resume(ctx(handle)) == value(at_limit)
        with pytest.raises(StoreError) as caught:
            await handles.issue(ctx(), at_limit + "x")
        assert caught.value.reason is StoreErrorReason.TOO_LARGE
        assert at_limit not in str(caught.value)
        with pytest.raises(StoreError):
            await handles.consume_and_replace(ctx(handle), at_limit + "x")
        assert await handles.resume(ctx(handle)) == value(at_limit)  # the refused rotation consumed nothing

    run_with(store_url, body)


def test_handles_are_fresh_and_opaque(store_url: str) -> None:
    async def body(store: DurableStore) -> None:
        handles = HandleRepository(store)
        issued = {await handles.issue(ctx(), {"n": 1}) for _ in range(50)}
        assert len(issued) == 50
        assert all("alice" not in handle and "tenant" not in handle for handle in issued)
        text = repr(handles)
        assert "default" in text
        assert not any(handle in text for handle in issued)

    run_with(store_url, body)


def test_expired_entries_are_purged_as_handles_are_stored(store_url: str) -> None:
    async def body(store: DurableStore) -> None:
        clock = Clock()
        handles = HandleRepository(store, purge_every=4, clock=clock)
        for _ in range(3):
            await handles.issue(ctx(), {"n": 1})
        clock.now = START + handles.lifetime  # all three expire
        live = await handles.issue(ctx(), {"n": 2})  # the fourth stored handle purges the expired three
        assert await store.purge_expired_handles(clock.now) == 0
        assert await store.count_live_handles(clock.now) == 1
        rotated = await handles.consume_and_replace(ctx(live), {"n": 3})
        assert rotated is not None
        assert await handles.resume(ctx(rotated)) == value({"n": 3})

    run_with(store_url, body)


def test_constructor_refusals(sqlite_store_url: str) -> None:
    store = open_store(sqlite_store_url)
    for keywords, refusal in (
        ({"tenant": ""}, "tenant"),
        ({"tenant": "t" * 257}, "tenant"),
        ({"lifetime": timedelta(0)}, "lifetime"),
        ({"lifetime": timedelta(seconds=-1)}, "lifetime"),
        ({"lifetime": MAX_HANDLE_LIFETIME + timedelta(seconds=1)}, "lifetime"),
        ({"purge_every": 0}, "purge_every"),
        ({"purge_every": True}, "purge_every"),
    ):
        with pytest.raises(ValueError, match=refusal):
            HandleRepository(store, **keywords)
    with pytest.raises(TypeError):
        HandleRepository(store, clock=5)  # type: ignore[arg-type]
    assert HandleRepository(store, tenant="t" * 256, lifetime=MAX_HANDLE_LIFETIME).tenant == "t" * 256


def test_a_clock_in_another_zone_is_kept_in_utc_milliseconds(store_url: str) -> None:
    async def body(store: DurableStore) -> None:
        # 12:00:00.999999 UTC, told in +05:00: the entry is made at 12:00:00.999 UTC and lives until exactly
        # one lifetime later.
        clock = Clock(datetime(2026, 12, 1, 17, 0, 0, 999999, tzinfo=timezone(timedelta(hours=5))))
        handles = HandleRepository(store, clock=clock)
        issued = await handles.issue(ctx(), {"n": 1})
        expiry = START + timedelta(milliseconds=999) + handles.lifetime
        assert await store.count_live_handles(expiry - timedelta(milliseconds=1)) == 1
        assert await store.count_live_handles(expiry) == 0
        clock.now = expiry - timedelta(milliseconds=1)
        assert await handles.resume(ctx(issued)) == value({"n": 1})
        clock.now = expiry
        await rejected(handles.consume_and_replace(ctx(issued), {"n": 2}))

    run_with(store_url, body)


def test_a_handler_that_lets_the_refusal_through_gets_the_one_wire_answer(sqlite_store_url: str) -> None:
    """The repository raises its domain error, not a wire error; the engine answers it as a handle refusal always
    was: HTTP 400, -32602, the request-state sentence, log reason ``handle-rejected``, the handler's own answer."""
    from soklet_apps.demo import build_registry

    async def body(store: DurableStore) -> None:
        never_issued = mint_url_handle(HANDLE_BYTES)
        await rejected(HandleRepository(store).resume(ctx(never_issued)))  # the domain error, not McpError
        sealer = RequestStateSealer(ProtectionConfig(keyring=ProtectionKeyring(ProtectionKey.generate("h-key"))))
        engine = Engine(registry=build_registry(store=store), sealer=sealer)
        params = JsonObject.from_mapping(
            {
                "name": "order.checkout",
                "arguments": {},
                "inputResponses": {},
                "requestState": never_issued,
            }
        )
        call = Call(
            method="tools/call",
            request_id=JsonNumber.from_value(7),
            protocol_version=PROTOCOL_VERSION,
            params=params,
            meta=JsonObject.empty_instance(),
            capabilities=ClientCapabilities.from_mapping({"elicitation": {"form": {}}}),
            admission=AnonymousAdmission().admit(None),  # type: ignore[arg-type]
            endpoint_path="/mcp",
            digest=CanonicalParams(params),
        )
        outcome = await engine.call(call, None)
        assert isinstance(outcome, Refused), outcome
        error = outcome.error
        assert (outcome.kind, outcome.operation) == (RefusalKind.APPLICATION, "order.checkout")
        assert (error.code, error.message, error.data, error.http_status, error.log_reason) == (
            -32602,
            "Invalid or expired request state",
            None,
            400,
            HANDLE_REJECTED_REASON,
        )

    run_with(sqlite_store_url, body)
