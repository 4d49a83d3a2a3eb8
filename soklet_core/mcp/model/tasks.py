"""The tasks extension (``io.modelcontextprotocol/tasks``) as a tool author sees it.

A tool registered with task support (:class:`TaskSupport` ``OPTIONAL`` or ``REQUIRED``, and a *task step*) may
answer a ``tools/call`` with :class:`StartTask` instead of a result. The server then stores a task, answers the
client with a ``CreateTaskResult`` and runs the step in the background; the client polls ``tasks/get``, answers
the step's questions through ``tasks/update`` and may ``tasks/cancel`` it::

    @task_tool(name="report.build", description="Build the report.", input_schema={"type": "object"})
    async def build(context: TaskContext) -> CallToolResult | TaskInputRequired | TaskFailed:
        if context.round == 1:
            return TaskInputRequired({"confirm": form_request(...)}, state={"phase": "asked"})
        return CallToolResult.from_text("done")

A step gets a :class:`TaskContext` (the creating call's arguments, identity, partition and capabilities, the
state the handler or the previous round left, and the answers of the previous round) and returns:

* a :class:`~.results.CallToolResult` (``isError`` too): the task ends ``completed`` with that result;
* :class:`TaskInputRequired`: the task waits ``input_required`` with those requests until every key is answered,
  then the step runs again (``round + 1``) with the answers and the state it returned;
* :class:`TaskFailed`: the task ends ``failed`` with that JSON-RPC error.

An exception ends the task ``failed`` with ``-32603 Internal error``. Steps run at least once per round: a step
whose process died is re-run by another instance, so a step must be safe to run again.

MRTR rounds (``input_required`` results of the handler itself) finish synchronously before a task exists; the
handler hands what they gathered to the step through ``StartTask.state``.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from soklet_core.json import JsonObject, JsonValue
from soklet_core.protocol import TASKS_EXTENSION
from soklet_core.store import MAX_STATUS_MESSAGE_CHARS  # a status message is stored with the task

from .capabilities import ClientCapabilities
from .client_requests import InputRequest
from .context import Identity, RequestContext
from .input_required_result import InputRequiredResult
from .input_responses import InputResponses
from .results import CallToolResult

__all__ = [
    "MAX_STATUS_MESSAGE_CHARS",
    "TASKS_CAPABILITIES",
    "StartTask",
    "TaskContext",
    "TaskFailed",
    "TaskInputRequired",
    "TaskStep",
    "TaskStepOutcome",
    "TaskSupport",
    "start_task",
]

#: What a request must declare to get a task (and to call ``tasks/get``, ``tasks/update``, ``tasks/cancel``); a
#: ``-32021`` error names it as its ``requiredCapabilities``.
TASKS_CAPABILITIES: Final = ClientCapabilities.from_mapping({"extensions": {TASKS_EXTENSION: {}}})


class TaskSupport(enum.StrEnum):
    """Whether ``tools/call`` of a tool may create a task.

    ``NONE`` (default): never. ``OPTIONAL``: a task when the request declares the tasks extension, otherwise the
    step runs within the request and its result answers it. ``REQUIRED``: only with the extension; a request
    without it gets ``-32021`` with ``requiredCapabilities.extensions`` before the handler runs.
    """

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRED = "required"


def _json_or_none(value: Any, what: str) -> JsonValue | None:
    # Plain Python data is accepted and kept as the JsonValue it becomes (the value is stored as JSON).
    if value is None or isinstance(value, JsonValue):
        return value
    try:
        return JsonValue.from_python(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be JSON data") from None


def _check_status_message(message: object) -> None:
    if message is not None and (not isinstance(message, str) or len(message) > MAX_STATUS_MESSAGE_CHARS):
        raise ValueError(f"status_message must be a str of at most {MAX_STATUS_MESSAGE_CHARS} characters")


@dataclass(frozen=True, slots=True)
class StartTask:
    """A ``tools/call`` handler's answer: run the tool's task step durably, starting from ``state``.

    ``state`` (a ``JsonValue`` or plain JSON data, kept as a ``JsonValue``) reaches the first step run as
    :attr:`TaskContext.state`; ``status_message`` is the task's first ``statusMessage``. Only a tool whose
    ``task_support`` is not ``NONE`` may return it.
    """

    state: JsonValue | None = None
    status_message: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", _json_or_none(self.state, "state"))
        _check_status_message(self.status_message)


@dataclass(frozen=True, slots=True)
class TaskInputRequired:
    """A task step's answer: wait in ``input_required`` for ``input_requests`` (key → :class:`InputRequest`).

    The keys are checked as an ``input_required`` result's keys are, and must be new over the task's life (a key
    issued before fails the task). ``state`` reaches the next step run; ``status_message`` is shown while waiting.
    """

    input_requests: Mapping[str, InputRequest]
    state: JsonValue | None = None
    status_message: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.input_requests, Mapping) or not self.input_requests:
            raise ValueError("a task step asks for at least one input request")
        # The same key and request checks as an input_required result (the one home of those rules).
        checked = InputRequiredResult(self.input_requests)
        object.__setattr__(self, "input_requests", checked.input_requests)
        object.__setattr__(self, "state", _json_or_none(self.state, "state"))
        _check_status_message(self.status_message)

    @property
    def required_capabilities(self) -> tuple[ClientCapabilities, ...]:
        """The capabilities of every request, in key order (checked against the creating request's)."""
        return tuple(request.capabilities for request in self.input_requests.values())

    def as_input_required_result(self) -> InputRequiredResult:
        """The same requests as an ``input_required`` result (for the operation's emission check)."""
        return InputRequiredResult(self.input_requests)

    def __repr__(self) -> str:
        return f"TaskInputRequired(keys={list(self.input_requests)!r})"


@dataclass(frozen=True, slots=True)
class TaskFailed:
    """A task step's answer: end the task ``failed`` with the JSON-RPC error ``{code, message, data?}``.

    Use it for protocol-level failures only; a tool that ran and failed answers a ``CallToolResult`` with
    ``is_error=True`` (the task then ends ``completed``). ``message`` goes to the client as given: no secrets.
    """

    code: int
    message: str
    data: JsonValue | None = None

    def __post_init__(self) -> None:
        if isinstance(self.code, bool) or not isinstance(self.code, int):
            raise TypeError("code must be an int")
        if not isinstance(self.message, str) or not self.message or len(self.message) > MAX_STATUS_MESSAGE_CHARS:
            raise ValueError(f"message must be a non-empty str of at most {MAX_STATUS_MESSAGE_CHARS} characters")
        object.__setattr__(self, "data", _json_or_none(self.data, "data"))


def _never_cancelled() -> bool:
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskContext:
    """What one run of a task step is given.

    ``task_id`` (a bearer secret: never log it), ``tool``, ``identity`` and ``partition`` of the caller that
    created the task, the creating call's ``arguments`` and ``client_capabilities``; ``state``: ``StartTask.state``
    on round 1, then the last :class:`TaskInputRequired` state; ``input_responses``: the answers to the keys the
    last ``TaskInputRequired`` asked (all of them; empty on round 1); ``round``: 1, then +1 after each answered
    ``TaskInputRequired``. :meth:`cancel_requested` is the cooperative check; a running step may also simply be
    cancelled (``asyncio.CancelledError`` in an ``async`` step).
    """

    task_id: str = field(repr=False)
    tool: str
    identity: Identity
    partition: str
    arguments: JsonObject = field(repr=False)
    state: JsonValue | None = field(default=None, repr=False)
    input_responses: InputResponses = field(default_factory=InputResponses.empty, repr=False)
    round: int = 1
    client_capabilities: ClientCapabilities = field(default_factory=ClientCapabilities.empty, repr=False)
    cancel_check: Callable[[], bool] = field(default=_never_cancelled, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.task_id, str) or not self.task_id or not isinstance(self.tool, str):
            raise ValueError("a task context needs a task id and a tool name")
        if not isinstance(self.identity, Identity) or not isinstance(self.partition, str) or not self.partition:
            raise ValueError("a task context needs an Identity and a non-empty partition")
        if not isinstance(self.arguments, JsonObject) or not isinstance(self.input_responses, InputResponses):
            raise TypeError("arguments must be a JsonObject and input_responses InputResponses")
        if self.state is not None and not isinstance(self.state, JsonValue):
            raise TypeError("state must be a JsonValue")
        if isinstance(self.round, bool) or not isinstance(self.round, int) or self.round < 1:
            raise ValueError("round must be a positive int")
        if not isinstance(self.client_capabilities, ClientCapabilities) or not callable(self.cancel_check):
            raise TypeError("client_capabilities must be ClientCapabilities and cancel_check callable")

    def cancel_requested(self) -> bool:
        """Whether the task was cancelled (by this instance or another): stop at the next safe point."""
        return self.cancel_check()


#: What a task step returns (or an awaitable of it).
TaskStepOutcome: TypeAlias = CallToolResult | TaskInputRequired | TaskFailed
#: A task step: ``step(context)``, sync (run in a worker thread) or async (run on the event loop).
TaskStep: TypeAlias = Callable[[TaskContext], TaskStepOutcome | Awaitable[TaskStepOutcome]]


def start_task(context: RequestContext, arguments: JsonObject) -> StartTask:
    """The built-in ``tools/call`` handler of :func:`~.registry.task_tool`: start the task with no state."""
    return StartTask()
