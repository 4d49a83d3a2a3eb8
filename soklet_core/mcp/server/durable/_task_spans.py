"""Tasks as spans: one ``soklet.task.step`` span per step run (:func:`step_span`, :class:`StepVerdict`) and one
``soklet.task.<operation>`` span per task manager operation (:func:`task_span`).

A span holds the registered tool's name (:data:`~soklet_core.tracing.OPERATION`), the step's attempt
(:data:`ATTEMPT`), what it came to (:data:`~soklet_core.tracing.OUTCOME`) and, when it failed or was refused, a
closed reason (:data:`~soklet_core.tracing.REASON`: a :class:`~._task_errors.TaskErrorReason` value, one of
:data:`STEP_FAILURES`, or ``store-`` and a :class:`~soklet_core.store.StoreErrorReason` value). Never a task id,
a partition, a subject, arguments, state, answers or a result.

A step started by a request is a child of the span current then (the request's, or the operation's); a step the
orphan sweep starts runs in a fresh context, the root of its own trace. While tracing is off a step or an
operation costs one :func:`soklet_core.tracing.tracer` check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

from opentelemetry.trace import Span, SpanKind

from soklet_core import tracing
from soklet_core.mcp.server.durable._task_errors import TaskError
from soklet_core.store import StoreError, TaskStatus

__all__ = [
    "ATTEMPT",
    "STEP_FAILURES",
    "STEP_OUTCOMES",
    "STEP_SPAN",
    "TASK_SPAN_PREFIX",
    "StepVerdict",
    "TaskSpan",
    "step_span",
    "task_span",
]

#: The name of a step run's span.
STEP_SPAN: Final = "soklet.task.step"
#: What a task operation's span name starts with (``soklet.task.create``, ``.get``, ``.update``, ...).
TASK_SPAN_PREFIX: Final = "soklet.task"
#: The attribute holding a step run's attempt within its round (1 to ``MAX_STEP_ATTEMPTS``).
ATTEMPT: Final = "soklet.task.attempt"
#: What a step run may come to: the status it wrote, or why it wrote none.
STEP_OUTCOMES: Final = frozenset(
    {
        *(status.value for status in TaskStatus if status is not TaskStatus.WORKING),
        "not-run",  # another process holds the lease, or the task is no longer working
        "lease-lost",  # another process took the step over while it ran
        "stopped",  # this process stopped it (shutting down) and gave its lease back
    }
)
#: Why a step run failed its task, besides the :class:`~._task_errors.TaskErrorReason` values ``tool-failed``
#: (the tool's own protocol error), ``step-failed`` (it raised), ``step-unfinished`` (timed out, or out of attempts)
#: and ``too-large`` (its result).
STEP_FAILURES: Final = frozenset(
    {"tool-not-served", "reused-key", "undeclared-emission", "missing-capability", "bad-answer"}
)


class StepVerdict:
    """What one step run came to, noted as the driver goes (the span is marked with it at the end)."""

    __slots__ = ("attempt", "outcome", "reason", "tool")

    def __init__(self) -> None:
        self.tool: str | None = None
        self.attempt: int | None = None
        self.outcome = "not-run"
        self.reason: str | None = None

    def written(self, status: TaskStatus) -> None:
        """The run's outcome was stored: the task is now ``status``."""
        self.outcome = status.value

    def mark(self, found: Span) -> None:
        """Set the run's attributes on ``found``; a failed task also fails the span with its reason."""
        if self.tool is not None:
            found.set_attribute(tracing.OPERATION, self.tool)
        if self.attempt is not None:
            found.set_attribute(ATTEMPT, self.attempt)
        if self.outcome == TaskStatus.FAILED.value and self.reason is not None:
            tracing.fail(found, self.reason, self.outcome)
        else:
            found.set_attribute(tracing.OUTCOME, self.outcome)


@contextlib.contextmanager
def step_span(verdict: StepVerdict) -> Iterator[None]:
    """The span of one step run, current for the block and marked with ``verdict`` when it ends. A store failure
    or an exception leaving the block fails it (``store-<reason>``, or the exception's type name)."""
    found = tracing.start_span(STEP_SPAN, kind=SpanKind.INTERNAL)
    if found is None:
        yield
        return
    try:
        with tracing.use_span(found):
            yield
    except StoreError as error:
        verdict.outcome, verdict.reason = TaskStatus.FAILED.value, f"store-{error.reason.value}"
        raise
    except Exception as error:
        verdict.outcome, verdict.reason = TaskStatus.FAILED.value, type(error).__name__
        raise
    finally:
        verdict.mark(found)
        found.end()


class TaskSpan:
    """A task operation's span while it runs: :meth:`done` notes how it ended."""

    __slots__ = ("_span",)

    def __init__(self, found: Span) -> None:
        self._span = found

    def done(self, outcome: str, tool: str | None = None) -> None:
        """The operation succeeded: ``outcome`` (a fixed word or a task status), on the registered ``tool``."""
        if tool is not None:
            self._span.set_attribute(tracing.OPERATION, tool)
        self._span.set_attribute(tracing.OUTCOME, outcome)


@contextlib.contextmanager
def task_span(operation: str, tool: str | None = None) -> Iterator[TaskSpan | None]:
    """The span ``soklet.task.<operation>`` for the block (``None`` in it when tracing is off), on the registered
    ``tool`` when known. A :class:`~._task_errors.TaskError` leaving it refuses it with its reason, a
    :class:`~soklet_core.store.StoreError` fails it with ``store-<reason>``."""
    found = tracing.start_span(f"{TASK_SPAN_PREFIX}.{operation}", kind=SpanKind.INTERNAL)
    if found is None:
        yield None
        return
    if tool is not None:
        found.set_attribute(tracing.OPERATION, tool)
    try:
        with tracing.use_span(found):
            yield TaskSpan(found)
    except TaskError as error:
        tracing.fail(found, error.reason.value)
        raise
    except StoreError as error:
        tracing.fail(found, f"store-{error.reason.value}", "failed")
        raise
    except BaseException as error:
        tracing.fail(found, type(error).__name__, "failed")
        raise
    finally:
        found.end()
