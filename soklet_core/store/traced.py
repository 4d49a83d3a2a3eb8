"""Store calls as spans: one ``CLIENT`` span per public call of a backend, made in one place for both.

:func:`traced_store` wraps every operation of :data:`TRACED_OPERATIONS` (the public calls of
:class:`~soklet_core.store.repository.DurableStore` and :class:`~soklet_core.store.repository.KeyringRepository`)
of a backend class. Each call is a span named ``soklet.store <operation>`` with ``db.system.name`` (``sqlite`` or
``postgresql``) and ``db.operation.name`` (the operation); a :class:`~soklet_core.store.errors.StoreError` marks it
refused with the error's closed reason (:func:`soklet_core.tracing.fail`), any other exception failed with its type
name. A span never holds an argument or a record: no task id, partition, subject, handle, document or key.

A store call made within another one (the generation reads of ``wait_for_keyring_change``, the holder read of a
refused ``rotation_lock``) belongs to the outer call's span, so a follower's wait is one span however often it polls.
``rotation_lock``'s span covers taking the lock (or its refusal), not the block that holds it.

While tracing is off a call costs one :func:`soklet_core.tracing.tracer` check: no span, no attribute built.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Final, TypeVar

from opentelemetry.trace import SpanKind

from soklet_core import tracing

from .errors import StoreError

__all__ = ["DB_OPERATION", "DB_SYSTEM", "SPAN_PREFIX", "TRACED_OPERATIONS", "traced_store"]

#: The OpenTelemetry database attribute naming the backend: ``sqlite`` or ``postgresql``.
DB_SYSTEM: Final = "db.system.name"
#: The OpenTelemetry database attribute naming the operation (a store method's name).
DB_OPERATION: Final = "db.operation.name"
#: What every store span's name starts with (a space, then the operation).
SPAN_PREFIX: Final = "soklet.store"
#: The calls traced: every public operation of both repository interfaces (``rotation_lock`` is a context manager).
TRACED_OPERATIONS: Final = (
    "open",
    "check",
    "close",
    "insert_task",
    "get_task",
    "replace_task",
    "list_tasks",
    "count_tasks",
    "delete_expired_tasks",
    "insert_handle",
    "peek_handle",
    "consume_and_replace",
    "count_live_handles",
    "purge_expired_handles",
    "read_keyring",
    "keyring_generation",
    "write_keyring",
    "wait_for_keyring_change",
    "beat",
    "heartbeats",
    "forget_instance",
    "read_rotation",
    "write_rotation",
    "delete_rotation",
    "rotation_lock",
)
_LOCK: Final = "rotation_lock"
_BACKENDS: Final = frozenset({"sqlite", "postgresql"})

_C = TypeVar("_C", bound=type)
# True while a store call's span is current in this context: a call made inside it adds no span of its own.
_inside: ContextVar[bool] = ContextVar("soklet_store_call", default=False)


def traced_store(cls: _C) -> _C:
    """Make every operation of :data:`TRACED_OPERATIONS` of the backend class ``cls`` (its ``backend`` is
    ``sqlite`` or ``postgresql``) one span per call; the class, changed in place."""
    backend = getattr(cls, "backend", None)
    if backend not in _BACKENDS:
        raise TypeError("a traced store class names its backend: sqlite or postgresql")
    for operation in TRACED_OPERATIONS:
        method = cls.__dict__.get(operation)
        if not callable(method):
            raise TypeError(f"{cls.__name__} lacks the store operation {operation}")
        attributes = MappingProxyType({DB_SYSTEM: backend, DB_OPERATION: operation})
        name = f"{SPAN_PREFIX} {operation}"
        wrapped = _lock(method, name, attributes) if operation == _LOCK else _call(method, name, attributes)
        setattr(cls, operation, wrapped)
    return cls


@contextlib.contextmanager
def _store_span(name: str, attributes: Mapping[str, tracing.AttributeValue]) -> Iterator[None]:
    """The span of one store call, current (and marking its nested calls) for the block."""
    with tracing.span(name, attributes, kind=SpanKind.CLIENT) as found:
        token = _inside.set(True)
        try:
            yield
        except StoreError as error:
            tracing.fail(found, error.reason.value)
            raise
        finally:
            _inside.reset(token)


def _call(
    method: Callable[..., Awaitable[Any]], name: str, attributes: Mapping[str, tracing.AttributeValue]
) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        if tracing.tracer() is None or _inside.get():
            return await method(*args, **kwargs)
        with _store_span(name, attributes):
            return await method(*args, **kwargs)

    return call


def _lock(
    method: Callable[..., AbstractAsyncContextManager[None]],
    name: str,
    attributes: Mapping[str, tracing.AttributeValue],
) -> Callable[..., AbstractAsyncContextManager[None]]:
    @functools.wraps(method)
    def lock(*args: Any, **kwargs: Any) -> AbstractAsyncContextManager[None]:
        if tracing.tracer() is None or _inside.get():
            return method(*args, **kwargs)
        return _held(method(*args, **kwargs), name, attributes)

    return lock


@contextlib.asynccontextmanager
async def _held(
    scope: AbstractAsyncContextManager[None], name: str, attributes: Mapping[str, tracing.AttributeValue]
) -> AsyncIterator[None]:
    """``scope`` held for the block; the span covers its taking only (the holder's work is not a store call)."""
    async with contextlib.AsyncExitStack() as stack:
        with _store_span(name, attributes):
            await stack.enter_async_context(scope)
        yield
