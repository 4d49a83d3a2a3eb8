"""soklet's MCP server (2026-07-28, and the 2025 era beside it): the model an application author writes against,
and the server that runs it.

Two subpackages, imports pointing down:

* :mod:`soklet_core.mcp.model` — registrations, the input-required vocabulary, results, the request context and
  the elicitation helpers. What an application author writes most (the decorators, the registry, the context, the
  results, the input-required vocabulary, tasks, the model's errors) is re-exported here; the rest is imported
  from :mod:`soklet_core.mcp.model`.
* :mod:`soklet_core.mcp.server` — the engine, the transports, durable handles and tasks, the operator's parts.
  Only what an application needs to run a server (:class:`McpServer`, :class:`ServerOptions`, :class:`McpError`,
  :class:`BearerTokenAdmission`) and to use durable handles (:class:`HandleRepository`, :class:`HandleRejected`)
  is re-exported here.

See ``docs/mcp-model.md`` for the vocabulary with examples.

>>> from soklet_core.mcp import InputRequestDeclaration, InputRequirement, InputRequest, InputRequiredResult
>>> FORM = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
>>> request = InputRequest.from_declaration(
...     FORM, {"message": "Approve?", "mode": "form", "requestedSchema": {"type": "object", "properties": {}}})
>>> result = InputRequiredResult.with_input_request("approval", request).framework_request_state(
...     {"phase": "waiting-for-approval"}).build()
>>> list(result.input_requests)
['approval']
"""

from .model import (
    CallToolResult,
    ClientCapabilities,
    CompleteResult,
    GetPromptResult,
    Identity,
    InputRequest,
    InputRequestDeclaration,
    InputRequiredResult,
    InputRequirement,
    InputResponses,
    McpModelError,
    McpModelErrorReason,
    PromptMessage,
    ReadResourceResult,
    Registry,
    RequestContext,
    RequestStateMode,
    StartTask,
    TaskContext,
    TaskSupport,
    TextContent,
    completion,
    form_request,
    prompt,
    resource,
    resource_template,
    task_tool,
    tool,
    url_request,
)
from .server import BearerTokenAdmission, McpError, McpServer, ServerOptions
from .server.durable import HandleRejected, HandleRepository

#: What an application author writes (the rest of the model is in :mod:`soklet_core.mcp.model`), then what runs it.
__all__ = [
    "BearerTokenAdmission",
    "CallToolResult",
    "ClientCapabilities",
    "CompleteResult",
    "GetPromptResult",
    "HandleRejected",
    "HandleRepository",
    "Identity",
    "InputRequest",
    "InputRequestDeclaration",
    "InputRequiredResult",
    "InputRequirement",
    "InputResponses",
    "McpError",
    "McpModelError",
    "McpModelErrorReason",
    "McpServer",
    "PromptMessage",
    "ReadResourceResult",
    "Registry",
    "RequestContext",
    "RequestStateMode",
    "ServerOptions",
    "StartTask",
    "TaskContext",
    "TaskSupport",
    "TextContent",
    "completion",
    "form_request",
    "prompt",
    "resource",
    "resource_template",
    "task_tool",
    "tool",
    "url_request",
]
