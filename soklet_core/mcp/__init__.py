"""soklet's MCP server (2026-07-28, and the 2025 era beside it): the model an application author writes against,
and the server that runs it.

Two subpackages, imports pointing down:

* :mod:`soklet_core.mcp.model` — registrations, the input-required vocabulary, results, the request context and
  the elicitation helpers. Everything here is re-exported from this package.
* :mod:`soklet_core.mcp.server` — the dispatcher pipeline, the JSON-RPC wire, admission, the ASGI transport, the
  uvicorn runner, the admin listener, live keyrings and metrics. Only what an application needs to run a server
  (:class:`McpServer`, the admission policies, :class:`HttpLimits`, :class:`ProtocolEras`, :class:`McpError`,
  :class:`HandleRepository`, :class:`HandleRejected` and :class:`TaskManager`) is re-exported here.

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

from . import model
from .model import *  # noqa: F403 (the whole model is this package's surface; model.__all__ lists it)
from .server import (
    DEFAULT_ENDPOINT_PATH,
    Admission,
    AdmissionPolicy,
    AnonymousAdmission,
    BearerTokenAdmission,
    BearerTokenEntry,
    HandleRejected,
    HandleRepository,
    HttpLimits,
    HttpOptions,
    McpError,
    McpServer,
    ProtocolEras,
    ProtocolOptions,
    ServerOptions,
    SessionOptions,
    TaskManager,
    TaskOptions,
)

#: The model's names, then what an application needs to run a server.
__all__ = [
    *model.__all__,
    "DEFAULT_ENDPOINT_PATH",
    "Admission",
    "AdmissionPolicy",
    "AnonymousAdmission",
    "BearerTokenAdmission",
    "BearerTokenEntry",
    "HandleRejected",
    "HandleRepository",
    "HttpLimits",
    "HttpOptions",
    "McpError",
    "McpServer",
    "ProtocolEras",
    "ProtocolOptions",
    "ServerOptions",
    "SessionOptions",
    "TaskOptions",
    "TaskManager",
]
