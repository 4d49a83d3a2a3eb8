"""Why a task operation was refused: :class:`TaskError` and its closed :class:`TaskErrorReason`.

The task manager and its step driver raise it; the engine maps each reason to its wire answer in one place
(``task_refusal``), so nothing in :mod:`soklet_core.mcp.server.durable` builds a JSON-RPC error for a client.
"""

from __future__ import annotations

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.mcp.model.tasks import TaskFailed

__all__ = ["TaskError", "TaskErrorReason"]


class TaskErrorReason(ErrorReason):
    """Why the task manager refused an operation (the engine maps each to its wire answer in one place)."""

    NOT_FOUND = "not-found", "no such task for this caller (unknown, purged, or another caller's)"
    EXPIRED = "expired", "the caller's task has outlived its ttlMs"
    INPUT_RESPONSES = "input-responses", "an answer is outside the protocol union of the request it answers"
    TOO_LARGE = "too-large", "the task's document is over the size one task may hold"
    STORED_QUOTA = "stored-quota", "the partition keeps as many tasks or task bytes as it may"
    LIVE_LIMIT = "live-limit", "the caller has as many unfinished tasks in this process as it may"
    STEP_UNFINISHED = "step-unfinished", "the task's step did not finish in time"
    STEP_FAILED = "step-failed", "the task's step raised an exception"
    TOOL_FAILED = "tool-failed", "the tool failed the task with a protocol error of its own"
    INPUT_INLINE = "input-inline", "a step run within the request asked for input"
    CONTENTION = "contention", "other writers kept changing the task"
    DOCUMENT = "document", "the stored task document cannot be read"


class TaskError(SokletError):
    """A task operation refused: ``reason`` says why; ``failure`` is the tool's own protocol error
    (:attr:`TaskErrorReason.TOOL_FAILED`). The wire answer of each is the engine's to give."""

    def __init__(self, reason: TaskErrorReason, failure: TaskFailed | None = None) -> None:
        super().__init__(reason)
        self.reason: TaskErrorReason = reason
        self.failure = failure
