"""A task as the store keeps it and as the wire and the CLI show it: the task document (:class:`TaskDocument`,
versioned JSON text in the task record, read and written off the event loop by :func:`read_document` and
:func:`document_text`), whether a record has expired (:func:`task_expired`), how a log names a task
(:func:`log_name`), its encoding as a ``Task`` / ``DetailedTask`` (:func:`encode_task`, :func:`detailed_task`),
the fixed failures a task ends with, and what ``soklet tasks show`` reads of a run (:func:`task_run`)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from soklet_core.json import (
    JsonArray,
    JsonError,
    JsonNull,
    JsonNumber,
    JsonObject,
    JsonString,
    JsonValue,
    encode_wire,
    parse,
)
from soklet_core.json.limits import INLINE_BODY_BYTES
from soklet_core.mcp.server._jsonrpc import INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE, RESPONSE_TOO_LARGE_MESSAGE
from soklet_core.mcp.server.durable._task_errors import TaskError, TaskErrorReason
from soklet_core.protection.diagnosis import iso_time
from soklet_core.store import TaskRecord, TaskStatus
from soklet_core.store.records import from_millis

__all__ = [
    "INTERNAL_FAILURE",
    "STEP_UNFINISHED_ERROR",
    "STEP_UNFINISHED_MESSAGE",
    "TOO_LARGE_FAILURE",
    "UNRECOGNISED_HOLDER",
    "TaskDocument",
    "TaskRun",
    "detailed_task",
    "document_text",
    "encode_task",
    "error_object",
    "log_name",
    "read_document",
    "task_expired",
    "task_run",
]

_logger = logging.getLogger("soklet.mcp.tasks")

# A lease holder's name as this module writes it (host/pid/suffix), or as earlier versions did (16 hex digits); the
# classes are separated by "/", which none of them holds, so nothing can backtrack.
_HOLDER: Final = re.compile(r"[A-Za-z0-9.-]{1,64}/[0-9]{1,10}/[0-9a-f]{8}|[0-9a-f]{16}")
#: What :func:`task_run` reports for a lease holder the record names in another shape (an edited store).
UNRECOGNISED_HOLDER: Final = "(unrecognised)"

_DOCUMENT_VERSION: Final = 1
#: What a client is told of a task step that did not finish in time (a failed task's error, an inline run's).
STEP_UNFINISHED_MESSAGE: Final = "The task's step did not finish"


def error_object(code: int, message: str, data: JsonValue | None = None) -> JsonObject:
    out = JsonObject.builder().put("code", code).put("message", message)
    if data is not None:
        out.put("data", data)
    return out.build()


STEP_UNFINISHED_ERROR: Final = error_object(INTERNAL_ERROR, STEP_UNFINISHED_MESSAGE)
INTERNAL_FAILURE: Final = error_object(INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE)
TOO_LARGE_FAILURE: Final = error_object(INTERNAL_ERROR, RESPONSE_TOO_LARGE_MESSAGE)


@dataclass(frozen=True, slots=True)
class TaskDocument:
    """The task manager's part of a record (its ``document`` JSON text). Values are kept as JSON values."""

    arguments: JsonObject
    capabilities: JsonObject
    ttl_ms: int | None
    poll_interval_ms: int
    state: JsonValue | None = None
    round: int = 1
    issued: tuple[str, ...] = ()
    pending: JsonObject | None = None  # key -> {"method","params"?}: the outstanding requests of this round
    answers: JsonObject | None = None  # key -> response: answers to pending keys received so far
    responses: JsonObject | None = None  # the answers the next step run gets (every key of the last round)
    result: JsonObject | None = None
    error: JsonObject | None = None
    lease: int | None = None  # epoch milliseconds the holder's lease runs to
    owner: str | None = None  # the process (TaskManager instance) holding the lease
    attempts: int = 0

    def to_text(self) -> str:
        members: dict[str, JsonValue | None] = {
            "v": JsonNumber.from_value(_DOCUMENT_VERSION),
            "arguments": self.arguments,
            "capabilities": self.capabilities,
            "ttlMs": JsonNull.instance() if self.ttl_ms is None else JsonNumber.from_value(self.ttl_ms),
            "pollIntervalMs": JsonNumber.from_value(self.poll_interval_ms),
            "state": self.state,
            "round": JsonNumber.from_value(self.round),
            "issued": JsonValue.from_python(list(self.issued)),
            "pending": self.pending,
            "answers": self.answers,
            "responses": self.responses,
            "result": self.result,
            "error": self.error,
            "lease": None if self.lease is None else JsonNumber.from_value(self.lease),
            "owner": None if self.owner is None else JsonString.from_value(self.owner),
            "attempts": JsonNumber.from_value(self.attempts),
        }
        out = JsonObject.builder()
        for name, value in members.items():
            if value is not None:
                out.put(name, value)
        return encode_wire(out.build()).decode("utf-8")

    @classmethod
    def from_text(cls, text: str) -> TaskDocument:
        value = parse(text.encode("utf-8"))
        if not isinstance(value, JsonObject):
            raise ValueError("task document is not an object")

        def number(name: str, default: int | None = None) -> int | None:
            item = value.get(name)
            if isinstance(item, JsonNumber):
                return int(item.value)
            return default

        def obj(name: str) -> JsonObject | None:
            item = value.get(name)
            return item if isinstance(item, JsonObject) else None

        issued = value.get("issued")
        owner = value.get("owner")
        state = value.get("state")
        arguments, capabilities = obj("arguments"), obj("capabilities")
        poll, round_, attempts = number("pollIntervalMs"), number("round", 1), number("attempts", 0)
        if arguments is None or capabilities is None or poll is None or round_ is None or attempts is None:
            raise ValueError("task document lacks a member")
        return cls(
            arguments=arguments,
            capabilities=capabilities,
            ttl_ms=number("ttlMs"),
            poll_interval_ms=poll,
            state=state,
            round=round_,
            issued=tuple(item.value for item in issued if isinstance(item, JsonString))
            if isinstance(issued, JsonArray)
            else (),
            pending=obj("pending"),
            answers=obj("answers"),
            responses=obj("responses"),
            result=obj("result"),
            error=obj("error"),
            lease=number("lease"),
            owner=owner.value if isinstance(owner, JsonString) else None,
            attempts=attempts,
        )


def log_name(task_id: str) -> str:
    """How a log names a task: task ids are bearer secrets, so only a short digest of one is ever written."""
    return hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:12]


def task_expired(record: TaskRecord, now: datetime) -> bool:
    """Whether ``record`` has outlived its ``ttlMs`` at ``now`` (it then answers not found, or expired to its
    owner, until it is purged)."""
    return record.expires_at is not None and now >= record.expires_at


async def read_document(record: TaskRecord) -> TaskDocument:
    """``record``'s document, read in a worker thread when it is over the inline size. Raises
    :class:`~._task_errors.TaskError` (``DOCUMENT``) when it does not read."""
    text = record.document
    try:
        if len(text) <= INLINE_BODY_BYTES:
            return TaskDocument.from_text(text)
        return await asyncio.to_thread(TaskDocument.from_text, text)
    except (JsonError, ValueError):
        _logger.error("task %s: its document does not read", log_name(record.task_id))
        raise TaskError(TaskErrorReason.DOCUMENT) from None


async def document_text(document: TaskDocument) -> str:
    """``document`` as the record's text."""
    # The members that grow with input (arguments, state, answers, result) are only known in size once
    # written: every document is encoded in a worker thread, so none is written out on the event loop.
    return await asyncio.to_thread(document.to_text)


def encode_task(record: TaskRecord, document: TaskDocument, *, detailed: bool) -> bytes:
    """A ``CreateTaskResult`` (``resultType: "task"``) or a DetailedTask (``resultType: "complete"``), without
    ``_meta``: the task's fields, then the status's own member (outstanding ``inputRequests``, ``result`` or
    ``error``). Never ``requestState``."""
    out = JsonObject.builder().put("resultType", "complete" if detailed else "task")
    out.put("taskId", record.task_id).put("status", record.status.value)
    if record.status_message is not None:
        out.put("statusMessage", record.status_message)
    out.put("createdAt", iso_time(record.created_at)).put("lastUpdatedAt", iso_time(record.updated_at))
    out.put("ttlMs", JsonNull.instance() if document.ttl_ms is None else JsonNumber.from_value(document.ttl_ms))
    out.put("pollIntervalMs", document.poll_interval_ms)
    if detailed:
        if record.status is TaskStatus.INPUT_REQUIRED and document.pending is not None:
            answered: Mapping[str, JsonValue] = document.answers or JsonObject.empty_instance()
            outstanding = {key: value for key, value in document.pending.items() if key not in answered}
            out.put("inputRequests", JsonObject.from_mapping(outstanding))
        elif record.status is TaskStatus.COMPLETED and document.result is not None:
            out.put("result", document.result)
        elif record.status is TaskStatus.FAILED and document.error is not None:
            out.put("error", document.error)
    return encode_wire(out.build())


def detailed_task(record: TaskRecord) -> bytes:
    """``record``'s DetailedTask exactly as ``tasks/get`` answers it (``resultType: "complete"``), read without side
    effects (no step is started, nothing is written): for operator tools such as ``soklet tasks show``. Raises
    ``ValueError`` or :class:`~soklet_core.json.JsonError` when the record's document does not read."""
    return encode_task(record, TaskDocument.from_text(record.document), detailed=True)


@dataclass(frozen=True, slots=True)
class TaskRun:
    """Who runs a task's step, as its record says (for operator tools such as ``soklet tasks show``).

    ``holder`` is the lease holder (``host/pid/suffix`` of the :class:`TaskManager` running the step, checked
    against that shape so that it can be printed as it is, else :data:`UNRECOGNISED_HOLDER`; ``None`` when no
    process holds it), ``lease_expires_at`` when its lease runs out unless renewed (``None``: no lease),
    ``attempts`` how many step runs this round has started (re-runs after a lost lease included; past
    :data:`MAX_STEP_ATTEMPTS` the task fails) and ``round`` the step's round."""

    holder: str | None
    lease_expires_at: datetime | None
    attempts: int
    round: int


def task_run(record: TaskRecord) -> TaskRun:
    """The lease and attempts of ``record``, read without side effects. Raises ``ValueError`` or
    :class:`~soklet_core.json.JsonError` when the record's document does not read."""
    document = TaskDocument.from_text(record.document)
    lease = None if document.lease is None else from_millis(document.lease)
    holder = document.owner
    if holder is not None and not _HOLDER.fullmatch(holder):
        holder = UNRECOGNISED_HOLDER
    return TaskRun(holder=holder, lease_expires_at=lease, attempts=document.attempts, round=document.round)
