"""The MCP 2026-07-28 method names the model layer refers to.

Input requests are embedded client operations: one of :data:`INPUT_REQUEST_METHODS`, placed only inside an
``input_required`` result. Such a result may answer only :data:`INPUT_REQUIRED_CAPABLE_METHODS`.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "COMPLETION_COMPLETE",
    "ELICITATION_CREATE",
    "INPUT_REQUEST_METHODS",
    "INPUT_REQUIRED_CAPABLE_METHODS",
    "KNOWN_METHODS",
    "PROMPTS_GET",
    "PROMPTS_LIST",
    "RESOURCES_LIST",
    "RESOURCES_READ",
    "RESOURCES_TEMPLATES_LIST",
    "ROOTS_LIST",
    "SAMPLING_CREATE_MESSAGE",
    "SERVER_DISCOVER",
    "TASKS_CANCEL",
    "TASKS_GET",
    "TASKS_UPDATE",
    "TOOLS_CALL",
    "TOOLS_LIST",
]

#: Embedded client operations (the values of ``inputRequests``).
ELICITATION_CREATE: Final = "elicitation/create"
SAMPLING_CREATE_MESSAGE: Final = "sampling/createMessage"
ROOTS_LIST: Final = "roots/list"
INPUT_REQUEST_METHODS: Final = frozenset({ELICITATION_CREATE, SAMPLING_CREATE_MESSAGE, ROOTS_LIST})

#: Client requests served by a registry.
SERVER_DISCOVER: Final = "server/discover"
TOOLS_LIST: Final = "tools/list"
TOOLS_CALL: Final = "tools/call"
PROMPTS_LIST: Final = "prompts/list"
PROMPTS_GET: Final = "prompts/get"
RESOURCES_LIST: Final = "resources/list"
RESOURCES_READ: Final = "resources/read"
RESOURCES_TEMPLATES_LIST: Final = "resources/templates/list"
COMPLETION_COMPLETE: Final = "completion/complete"
#: The tasks extension's requests (answered only for a request that declares the extension).
TASKS_GET: Final = "tasks/get"
TASKS_UPDATE: Final = "tasks/update"
TASKS_CANCEL: Final = "tasks/cancel"

#: The only requests an ``input_required`` result may answer.
INPUT_REQUIRED_CAPABLE_METHODS: Final = frozenset({TOOLS_CALL, PROMPTS_GET, RESOURCES_READ})

#: Every client request a server answers (the method table of the engine has one entry for each; the access log and
#: the metrics name no other method).
KNOWN_METHODS: Final = frozenset(
    {
        SERVER_DISCOVER,
        TOOLS_LIST,
        TOOLS_CALL,
        PROMPTS_LIST,
        PROMPTS_GET,
        RESOURCES_LIST,
        RESOURCES_READ,
        RESOURCES_TEMPLATES_LIST,
        COMPLETION_COMPLETE,
        TASKS_GET,
        TASKS_UPDATE,
        TASKS_CANCEL,
    }
)
