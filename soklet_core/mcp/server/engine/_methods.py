"""The one method table: every method the engine answers, the params member it routes by, and how it resolves.

:data:`METHODS` has an entry for every name of :data:`~soklet_core.mcp.model.methods.KNOWN_METHODS`, tasks included.
:func:`routing_member` is the one answer to "which params member does this method route by" (the member
``Mcp-Name`` echoes on HTTP, the member a 2025-era round names its operation by); :class:`Resolver` turns a method
and its params into what runs (validation step 16): a :class:`Target` (a registration's handler), an
:class:`~.EncodedResult` answered without running anything (the lists, ``server/discover``, a completion nobody
registered), or, for a ``tasks/*`` request, ``None`` (the engine hands it to the task manager).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from soklet_core.errors import SokletError
from soklet_core.json import JsonArray, JsonObject, JsonString, JsonValue, encode_wire
from soklet_core.mcp.model import methods
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.client_requests import InputRequirement
from soklet_core.mcp.model.context import RequestContext
from soklet_core.mcp.model.errors import McpModelError
from soklet_core.mcp.model.registry import (
    CompletionArguments,
    CompletionRegistration,
    PromptRegistration,
    Registry,
    ResourceArguments,
    ResourceRegistration,
    ResourceTemplateRegistration,
    ToolRegistration,
)
from soklet_core.mcp.model.results import (
    CacheHint,
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    ReadResourceResult,
)
from soklet_core.mcp.server._jsonrpc import INVALID_PARAMS, McpError, method_refusal
from soklet_core.mcp.server.engine._call import EncodedResult, RefusalKind
from soklet_core.protocol import TASKS_EXTENSION

__all__ = [
    "METHODS",
    "Method",
    "MethodKind",
    "Operation",
    "Refusal",
    "Resolver",
    "Target",
    "build_lists",
    "conditional_capabilities",
    "discover_capabilities",
    "invalid_params",
    "routing_member",
    "routing_value",
]

#: A registration that takes input responses and state (a completion takes neither).
Operation: TypeAlias = ToolRegistration | PromptRegistration | ResourceRegistration | ResourceTemplateRegistration
_REF_PROMPT: Final = JsonString.from_value("ref/prompt")


class _Refusal(SokletError):
    """A call refused inside the engine: its closed kind (the reason) and its wire error (made anew for every
    request). The engine answers it as :class:`~.Refused`; it never leaves :meth:`Engine.call <.Engine.call>`."""

    def __init__(self, kind: RefusalKind, error: McpError) -> None:
        super().__init__(kind, kind.value)
        self.kind = kind
        self.error = error


# Private (control flow inside the engine, never raised to a caller), shared by the engine's modules under this name.
Refusal = _Refusal


def invalid_params(message: str, reason: str, data: JsonValue | None = None) -> McpError:
    """-32602 (400) with a fixed ``message`` and a bounded log ``reason``."""
    return McpError(INVALID_PARAMS, message, data, log_reason=reason)


class MethodKind(enum.Enum):
    """How a method is answered."""

    LIST = "list"
    OPERATION = "operation"
    COMPLETION = "completion"
    TASK = "task"


@dataclass(frozen=True, slots=True)
class Method:
    """One entry of the method table: the params member the method routes by (``None``: none), and its kind."""

    routing_member: str | None
    kind: MethodKind


#: The one method table.
METHODS: Final[Mapping[str, Method]] = {
    methods.SERVER_DISCOVER: Method(None, MethodKind.LIST),
    methods.TOOLS_LIST: Method(None, MethodKind.LIST),
    methods.PROMPTS_LIST: Method(None, MethodKind.LIST),
    methods.RESOURCES_LIST: Method(None, MethodKind.LIST),
    methods.RESOURCES_TEMPLATES_LIST: Method(None, MethodKind.LIST),
    methods.TOOLS_CALL: Method("name", MethodKind.OPERATION),
    methods.PROMPTS_GET: Method("name", MethodKind.OPERATION),
    methods.RESOURCES_READ: Method("uri", MethodKind.OPERATION),
    methods.COMPLETION_COMPLETE: Method(None, MethodKind.COMPLETION),
    methods.TASKS_GET: Method("taskId", MethodKind.TASK),
    methods.TASKS_UPDATE: Method("taskId", MethodKind.TASK),
    methods.TASKS_CANCEL: Method("taskId", MethodKind.TASK),
}
assert frozenset(METHODS) == methods.KNOWN_METHODS


def routing_member(method: str) -> str | None:
    """The params member ``method`` routes by (``name``, ``uri``, ``taskId``), ``None`` for a method that routes by
    none or an unknown method."""
    entry = METHODS.get(method)
    return entry.routing_member if entry is not None else None


def routing_value(method: str, params: JsonObject) -> str | None:
    """The value of ``method``'s routing member in ``params`` (``None``: the method has none); raises -32602
    ``params.<member> must be a string`` when it is missing or not a string."""
    member = routing_member(method)
    if member is None:
        return None
    value = params.get(member)
    if not isinstance(value, JsonString):
        raise invalid_params(f"Invalid params: params.{member} must be a string", f"{member.lower()}-missing")
    return value.value


@dataclass(frozen=True, slots=True)
class Target:
    """What a request runs: a registration's handler, the name the log gives it, and where it runs.

    ``operation`` is the tool, prompt, resource or template (``None`` for a completion, which takes no input
    responses and no state); ``arguments`` turns the request's params into the handler's second argument (step
    18, raising :class:`Refusal`); ``on_loop`` says the handler runs on the event loop (``async`` handlers, and
    ``def`` handlers registered with ``blocking=False``) rather than in a worker thread. Built by the resolver
    only, from values it has checked.
    """

    name: str
    operation: Operation | None
    handler: Callable[[RequestContext, Any], object]
    arguments: Callable[[JsonObject], object]
    on_loop: bool
    expected: type


def conditional_capabilities(operation: Operation) -> tuple[ClientCapabilities, ...]:
    """The capabilities of the operation's CONDITIONAL input requests (checked on what the handler emits)."""
    return tuple(
        item.capabilities
        for item in operation.input_request_declarations
        if item.requirement is InputRequirement.CONDITIONAL
    )


def _refused_params(message: str, reason: str, data: JsonValue | None = None) -> Refusal:
    return Refusal(RefusalKind.INVALID_PARAMS, invalid_params(message, reason, data))


def _unknown(message: str, reason: str, data: JsonValue | None = None) -> Refusal:
    return Refusal(RefusalKind.UNKNOWN_OPERATION, invalid_params(message, reason, data))


def _tool_arguments(params: JsonObject) -> object:
    arguments = params.get("arguments")
    if arguments is None:
        return JsonObject.empty_instance()
    if not isinstance(arguments, JsonObject):
        raise _refused_params("Invalid params: arguments must be an object", "arguments")
    return arguments


class Resolver:
    """Validation step 16 for one registry: a method and its params → what runs."""

    __slots__ = ("_in_thread", "_lists", "_registry", "_resolvers")

    def __init__(self, registry: Registry, lists: Mapping[str, EncodedResult], *, in_thread: bool) -> None:
        self._registry = registry
        self._lists = lists
        self._in_thread = in_thread
        self._resolvers: Mapping[str, Callable[[JsonObject], Target | EncodedResult]] = {
            methods.TOOLS_CALL: self._tool,
            methods.PROMPTS_GET: self._prompt,
            methods.RESOURCES_READ: self._resource,
            methods.COMPLETION_COMPLETE: self._completion,
        }

    def resolve(self, method: str, params: JsonObject) -> Target | EncodedResult | None:
        """What ``method`` runs for ``params``: a :class:`Target`, a result answered as is, or ``None`` for a
        ``tasks/*`` request. Raises :class:`Refusal` (unknown method, unknown operation, malformed params)."""
        entry = METHODS.get(method)
        if entry is None:
            raise Refusal(RefusalKind.METHOD_NOT_FOUND, method_refusal())
        if entry.kind is MethodKind.LIST:
            return self._lists[method]
        if entry.kind is MethodKind.TASK:
            return None
        return self._resolvers[method](params)

    def _target(
        self,
        name: str,
        registration: Operation | CompletionRegistration,
        arguments: Callable[[JsonObject], object],
        expected: type,
    ) -> Target:
        handler = registration.handler
        on_loop = inspect.iscoroutinefunction(handler) or not registration.blocking or not self._in_thread
        operation = None if isinstance(registration, CompletionRegistration) else registration
        return Target(name, operation, handler, arguments, on_loop, expected)

    def _tool(self, params: JsonObject) -> Target | EncodedResult:
        name = params.get("name")
        tool = self._registry.find_tool(name.value) if isinstance(name, JsonString) else None
        if tool is None:
            raise _unknown("Unknown tool", "unknown-tool")
        return self._target(tool.name, tool, _tool_arguments, CallToolResult)

    def _prompt(self, params: JsonObject) -> Target | EncodedResult:
        name = params.get("name")
        prompt = self._registry.find_prompt(name.value) if isinstance(name, JsonString) else None
        if prompt is None:
            raise _unknown("Unknown prompt", "unknown-prompt")

        def arguments(params: JsonObject) -> object:
            try:
                return prompt.check_arguments(params.get("arguments"))
            except McpModelError:
                raise _refused_params("Invalid params: prompt arguments", "prompt-arguments") from None

        return self._target(prompt.name, prompt, arguments, GetPromptResult)

    def _resource(self, params: JsonObject) -> Target | EncodedResult:
        uri = params.get("uri")
        if not isinstance(uri, JsonString):
            raise _refused_params("Invalid params: params.uri must be a string", "uri-missing")
        found = self._registry.find_resource(uri.value)
        if found is not None:
            fixed = ResourceArguments(uri.value)
            return self._target(found.uri, found, lambda _params: fixed, ReadResourceResult)
        matched = self._registry.match_resource_template(uri.value)
        if matched is None:
            raise _unknown("Resource not found", "unknown-resource", JsonObject.from_mapping({"uri": uri}))
        template, matched_arguments = matched
        return self._target(template.template.text, template, lambda _params: matched_arguments, ReadResourceResult)

    def _completion(self, params: JsonObject) -> Target | EncodedResult:
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, JsonObject) or not isinstance(argument, JsonObject):
            raise _refused_params("Invalid params: ref and argument must be objects", "completion-params")
        ref_type, argument_name, value = ref.get("type"), argument.get("name"), argument.get("value")
        ref_name = ref.get("name") if ref_type == _REF_PROMPT else ref.get("uri")
        if not (
            isinstance(ref_type, JsonString)
            and isinstance(ref_name, JsonString)
            and isinstance(argument_name, JsonString)
            and isinstance(value, JsonString)
        ):
            raise _refused_params("Invalid params: completion reference", "completion-params")
        registration = self._registry.find_completion(ref_type.value, ref_name.value, argument_name.value)
        if registration is None:
            return _EMPTY_COMPLETION
        known: dict[str, str] = {}
        context_value = params.get("context")
        if isinstance(context_value, JsonObject) and isinstance(context_value.get("arguments"), JsonObject):
            nested = context_value["arguments"]
            assert isinstance(nested, JsonObject)
            known = {k: v.value for k, v in nested.items() if isinstance(v, JsonString)}
        fixed = CompletionArguments(argument_name.value, value.value, known)
        return self._target(registration.ref_name, registration, lambda _params: fixed, CompleteResult)


_EMPTY_COMPLETION: Final = EncodedResult(encode_wire(CompleteResult.empty().to_wire()))


def _list_result(member: str, items: Iterable[JsonValue], hint: CacheHint) -> JsonObject:
    return (
        JsonObject.builder()
        .put("resultType", "complete")
        .put(member, JsonArray.of(*items))
        .put("ttlMs", hint.ttl_ms)
        .put("cacheScope", hint.scope.value)
        .build()
    )


def build_lists(
    registry: Registry,
    *,
    versions: JsonArray,
    capabilities: JsonObject,
    instructions: str | None,
    hint: CacheHint,
) -> Mapping[str, EncodedResult]:
    """The list results and ``server/discover``, encoded once (registrations are immutable)."""
    discover = (
        JsonObject.builder()
        .put("resultType", "complete")
        .put("supportedVersions", versions)
        .put("capabilities", capabilities)
    )
    if instructions is not None:
        discover.put("instructions", instructions)
    discover.put("ttlMs", hint.ttl_ms).put("cacheScope", hint.scope.value)
    results = {
        methods.SERVER_DISCOVER: discover.build(),
        methods.TOOLS_LIST: _list_result("tools", (t.to_wire() for t in registry.tools), hint),
        methods.PROMPTS_LIST: _list_result("prompts", (p.to_wire() for p in registry.prompts), hint),
        methods.RESOURCES_LIST: _list_result("resources", (r.to_wire() for r in registry.resources), hint),
        methods.RESOURCES_TEMPLATES_LIST: _list_result(
            "resourceTemplates", (t.to_wire() for t in registry.resource_templates), hint
        ),
    }
    return {method: EncodedResult(encode_wire(result)) for method, result in results.items()}


def discover_capabilities(capabilities: JsonObject, *, tasks: bool) -> JsonObject:
    """What ``server/discover`` advertises: the registry's capabilities, plus the tasks extension when offered."""
    if not tasks:
        return capabilities
    extensions = JsonObject.builder().put(TASKS_EXTENSION, JsonObject.empty_instance()).build()
    return JsonObject.builder().put_all(capabilities).put("extensions", extensions).build()
