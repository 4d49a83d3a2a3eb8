"""What outlives a request: durable application handles and the tasks extension's task manager."""

from soklet_core.mcp.server.durable._handles import (
    DEFAULT_HANDLE_LIFETIME,
    DEFAULT_HANDLE_TENANT,
    DEFAULT_PURGE_EVERY,
    HANDLE_BYTES,
    HANDLE_REJECTED_REASON,
    MAX_HANDLE_LIFETIME,
    HandleRejected,
    HandleRepository,
)
from soklet_core.mcp.server.durable._tasks import (
    DEFAULT_POLL_INTERVAL_MS,
    DEFAULT_STEP_TIMEOUT_SECONDS,
    DEFAULT_TASK_TTL_MS,
    MAX_LIVE_TASKS_PER_CALLER,
    MAX_STORED_TASK_BYTES_PER_PARTITION,
    MAX_STORED_TASKS_PER_PARTITION,
    TaskError,
    TaskErrorReason,
    TaskManager,
)

__all__ = [
    "DEFAULT_HANDLE_LIFETIME",
    "DEFAULT_HANDLE_TENANT",
    "DEFAULT_POLL_INTERVAL_MS",
    "DEFAULT_PURGE_EVERY",
    "DEFAULT_STEP_TIMEOUT_SECONDS",
    "DEFAULT_TASK_TTL_MS",
    "HANDLE_BYTES",
    "HANDLE_REJECTED_REASON",
    "MAX_HANDLE_LIFETIME",
    "MAX_LIVE_TASKS_PER_CALLER",
    "MAX_STORED_TASKS_PER_PARTITION",
    "MAX_STORED_TASK_BYTES_PER_PARTITION",
    "HandleRejected",
    "HandleRepository",
    "TaskError",
    "TaskErrorReason",
    "TaskManager",
]
