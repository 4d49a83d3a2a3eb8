"""Registrations of tools, prompts, resources, resource templates and completions, and the registry of them.

Names, descriptions and schemas are kept exactly as written (a schema is stored as the ``JsonValue`` it was
given or parsed to, member order and number spelling included); lists come out in registration order; a repeated
name (or URI) is refused. Each tool, prompt, resource and template carries its input-request declarations and its
request-state mode, and a handler ``handler(context, arguments) -> result`` (sync or async)::

    @tool(
        name="catalog.continue",
        description="Continue the catalog workflow after approval.",
        input_schema={"type": "object"},
        input_request_declarations=[may_request_input(type=InputRequestType.ELICITATION_FORM,
                                                      requirement=InputRequirement.CONDITIONAL)],
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    )
    def catalog_continue(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        ...

    registry = Registry(catalog_continue, ...)    # Registry.merge(first, second) joins registries

Each kind is declared once, as a frozen dataclass: its constructor takes the handler first and every other field
by keyword, validates them in ``__post_init__`` (a schema may be a ``JsonObject``, plain Python data or JSON text,
and is kept as the ``JsonObject`` it becomes), and its decorator (:func:`tool`, :func:`prompt`, :func:`resource`,
:func:`resource_template`, :func:`completion`) takes exactly the constructor's keywords and passes them on.
Its wire form comes from one table per kind (attribute → wire member, in wire order).

Handler arguments: a tool gets the ``arguments`` object (``{}`` when absent); a prompt gets its string arguments
(checked by :meth:`PromptRegistration.check_arguments`); a resource or template gets :class:`ResourceArguments`;
a completion gets :class:`CompletionArguments`. A handler may return the result or an awaitable of it.

Where a handler runs: an ``async def`` handler on the event loop; a ``def`` handler in a worker thread, so that
one that blocks (I/O, sleeps, heavy work) cannot stall other requests. A ``def`` handler that never blocks may
say so with ``blocking=False`` (every registration and decorator takes it): it then runs on the event loop too,
without the thread hop (about half the cost of a small round trip). One blocking handler registered with
``blocking=False`` stalls every request while it runs.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from types import MappingProxyType
from typing import Any, Concatenate, Final, Literal, ParamSpec, TypeAlias, TypeVar

from soklet_core.json import JsonObject, JsonString, JsonValue, parse

from .capabilities import ClientCapabilities
from .client_requests import InputRequestDeclaration, InputRequestType, InputRequirement
from .context import RequestContext
from .errors import ArgumentsError, McpModelErrorReason, RegistrationError
from .input_required_result import InputRequiredResult, RequestStateMode
from .results import CallToolResult, CompleteResult, GetPromptResult, ReadResourceResult
from .scopes import scope_set
from .tasks import TASKS_CAPABILITIES, StartTask, TaskStep, TaskSupport, start_task
from .uri_templates import UriTemplate, is_absolute_uri

__all__ = [
    "MAX_NAME_CHARS",
    "CompletionArguments",
    "CompletionHandler",
    "CompletionRegistration",
    "JsonObjectSource",
    "PromptArgument",
    "PromptHandler",
    "PromptOutcome",
    "PromptRegistration",
    "Registration",
    "Registry",
    "ResourceArguments",
    "ResourceHandler",
    "ResourceOutcome",
    "ResourceRegistration",
    "ResourceTemplateRegistration",
    "SchemaSource",
    "ToolHandler",
    "ToolOutcome",
    "ToolRegistration",
    "completion",
    "is_valid_name",
    "may_request_input",
    "prompt",
    "resource",
    "resource_template",
    "task_tool",
    "tool",
]

#: Names of tools, prompts, prompt arguments, resources and templates: 1 to this many of ``[A-Za-z0-9_.-]``.
MAX_NAME_CHARS: Final = 128
_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1," + str(MAX_NAME_CHARS) + "}")
_HEADER_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
_PRIMITIVE_TYPES: Final = frozenset({"string", "number", "integer", "boolean"})
_OBJECT: Final = JsonString.from_value("object")

#: What a schema may be given as: a ``JsonObject``, plain Python data, or JSON text (parsed strictly, so the
#: number spelling and member order of the text are kept). A registration keeps it as a ``JsonObject``.
SchemaSource: TypeAlias = JsonValue | Mapping[str, Any] | str | bytes
#: What ``annotations`` and ``meta`` may be given as: a ``JsonObject`` or plain Python data (kept as a
#: ``JsonObject``).
JsonObjectSource: TypeAlias = JsonValue | Mapping[str, Any]

ToolOutcome: TypeAlias = CallToolResult | InputRequiredResult | StartTask
PromptOutcome: TypeAlias = GetPromptResult | InputRequiredResult
ResourceOutcome: TypeAlias = ReadResourceResult | InputRequiredResult


@dataclass(frozen=True, slots=True)
class ResourceArguments:
    """What a resource handler gets: the requested ``uri`` and, for a template, its decoded ``variables``."""

    uri: str
    variables: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class CompletionArguments:
    """What a completion handler gets: the argument being completed, its partial ``value``, and the values of
    other arguments the client already knows (``context_arguments``)."""

    argument_name: str
    value: str
    context_arguments: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


ToolHandler: TypeAlias = Callable[[RequestContext, JsonObject], ToolOutcome | Awaitable[ToolOutcome]]
PromptHandler: TypeAlias = Callable[[RequestContext, Mapping[str, str]], PromptOutcome | Awaitable[PromptOutcome]]
ResourceHandler: TypeAlias = Callable[[RequestContext, ResourceArguments], ResourceOutcome | Awaitable[ResourceOutcome]]
CompletionHandler: TypeAlias = Callable[
    [RequestContext, CompletionArguments], CompleteResult | Awaitable[CompleteResult]
]


def is_valid_name(name: object) -> bool:
    """Whether ``name`` is 1 to 128 characters from ``[A-Za-z0-9_.-]``."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def _check_name(name: object) -> None:
    if not is_valid_name(name):
        raise RegistrationError(McpModelErrorReason.INVALID_NAME)


def _check_description(description: object, owner: object) -> None:
    if not isinstance(description, str) or not description.strip():
        raise RegistrationError(McpModelErrorReason.MISSING_DESCRIPTION, owner)


def _field_error(owner: object, detail: str) -> RegistrationError:
    return RegistrationError(McpModelErrorReason.INVALID_FIELD, owner, detail)


def _check_optional_text(value: object, owner: object, what: str = "title") -> None:
    if value is not None and not isinstance(value, str):
        raise _field_error(owner, f"{what} must be a str")


def _schema(source: SchemaSource, owner: object, detail: str | None = None) -> JsonObject:
    value = parse(source) if isinstance(source, str | bytes) else JsonValue.from_python(source)
    if not isinstance(value, JsonObject) or value.get("type") != _OBJECT:
        raise RegistrationError(McpModelErrorReason.INVALID_INPUT_SCHEMA, owner, detail)
    return value


def _optional_json_object(value: JsonObjectSource | None) -> JsonObject | None:
    if value is None:
        return None
    converted = JsonValue.from_python(value)
    if not isinstance(converted, JsonObject):
        raise _field_error(None, "annotations and meta must be JSON objects")
    return converted


def _set(registration: object, name: str, value: object) -> None:
    # A frozen dataclass keeps, once validated, the normal form of what its constructor was given.
    object.__setattr__(registration, name, value)


def _check_operation(registration: _Operation, owner: object) -> None:
    if not callable(registration.handler):
        raise RegistrationError(McpModelErrorReason.INVALID_HANDLER, owner)
    declarations = tuple(registration.input_request_declarations)
    if not all(isinstance(item, InputRequestDeclaration) for item in declarations):
        raise _field_error(owner, "declarations must be InputRequestDeclaration values")
    kinds = [item.input_request_type for item in declarations]
    if len(set(kinds)) != len(kinds):
        raise RegistrationError(McpModelErrorReason.DUPLICATE_DECLARATION, owner)
    _set(registration, "input_request_declarations", declarations)
    if not isinstance(registration.request_state_mode, RequestStateMode):
        raise _field_error(owner, "request_state_mode must be a RequestStateMode")
    if not isinstance(registration.blocking, bool):
        raise _field_error(owner, "blocking must be a bool")
    try:
        _set(registration, "required_scopes", scope_set(registration.required_scopes))
    except (TypeError, ValueError) as problem:
        raise _field_error(owner, f"required_scopes: {problem}") from None


#: One kind's wire form: (attribute, wire member) pairs in the order the members are written.
_WireTable: TypeAlias = tuple[tuple[str, str], ...]


def _to_wire(registration: object, table: _WireTable) -> JsonObject:
    """The wire object of ``registration`` as ``table`` lays it out.

    An absent value (``None``, ``False``, an empty tuple) writes no member; a template writes its text; a tuple
    of prompt arguments writes their wire objects.
    """
    out = JsonObject.builder()
    for attribute, member in table:
        value = getattr(registration, attribute)
        if value is None or value is False or value == ():
            continue
        if isinstance(value, UriTemplate):
            value = value.text
        elif isinstance(value, tuple):
            value = JsonValue.from_python([item.to_wire() for item in value])
        out.put(member, value)
    return out.build()


def _declared_required(operation: _Operation) -> tuple[ClientCapabilities, ...]:
    return tuple(
        item.capabilities
        for item in operation.input_request_declarations
        if item.requirement is InputRequirement.REQUIRED
    )


class _Operation:
    """Behaviour shared by the input-capable registrations (tools, prompts, resources, templates)."""

    __slots__ = ()

    handler: Callable[..., object]
    input_request_declarations: Sequence[InputRequestDeclaration]
    request_state_mode: RequestStateMode
    blocking: bool
    #: The OAuth scopes an admission must grant to run the operation (checked after admission, before capabilities;
    #: never for an unscoped admission, such as the anonymous caller's). A frozenset once validated.
    required_scopes: Collection[str]

    @property
    def required_capabilities(self) -> tuple[ClientCapabilities, ...]:
        """The capabilities of the REQUIRED declarations: checked after admission, before every execution."""
        return _declared_required(self)

    def declares(self, declaration: InputRequestDeclaration) -> bool:
        """Whether ``declaration`` (same type and requirement) is one of this operation's declarations."""
        return declaration in self.input_request_declarations

    def check_emission(self, result: InputRequiredResult) -> None:
        """Refuse an ``input_required`` result this operation may not emit.

        Every request must use one of the declared declarations (``undeclared-input-request``); a state must be
        of the declared request-state mode (``state-mode-mismatch``).
        """
        for request in result.input_requests.values():
            if not self.declares(request.declaration):
                raise RegistrationError(McpModelErrorReason.UNDECLARED_INPUT_REQUEST)
        mode = result.request_state_mode
        if mode is not RequestStateMode.NONE and mode is not self.request_state_mode:
            raise RegistrationError(McpModelErrorReason.STATE_MODE_MISMATCH)


def _header_parameters(schema: JsonObject, owner: object) -> Mapping[str, str]:
    properties = schema.get("properties")
    found: dict[str, str] = {}
    if not isinstance(properties, JsonObject):
        return MappingProxyType(found)
    seen: set[str] = set()
    for name, property_schema in properties.items():
        if not isinstance(property_schema, JsonObject) or "x-mcp-header" not in property_schema:
            continue
        header, kind = property_schema["x-mcp-header"], property_schema.get("type")
        if (
            not isinstance(header, JsonString)
            or not _HEADER_TOKEN.fullmatch(header.value)
            or header.value.lower() in seen
            or (kind is not None and not (isinstance(kind, JsonString) and kind.value in _PRIMITIVE_TYPES))
        ):
            raise RegistrationError(McpModelErrorReason.INVALID_HEADER_PARAMETER, owner)
        seen.add(header.value.lower())
        found[header.value] = name
    return MappingProxyType(found)


_TOOL_WIRE: Final[_WireTable] = (
    ("name", "name"),
    ("title", "title"),
    ("description", "description"),
    ("input_schema", "inputSchema"),
    ("output_schema", "outputSchema"),
    ("annotations", "annotations"),
    ("meta", "_meta"),
)


@dataclass(frozen=True, slots=True)
class ToolRegistration(_Operation):
    """A tool: ``ToolRegistration(handler, name=..., description=..., input_schema=...)`` or the :func:`tool`
    decorator.

    ``input_schema`` (and ``output_schema``) are JSON objects whose ``type`` is ``"object"``, kept exactly as
    written; ``to_wire()`` gives them back unchanged. ``header_parameters`` maps each ``x-mcp-header`` name of a
    top-level property to the property (for ``Mcp-Param-{Name}`` validation).

    ``task_support`` (:class:`~.tasks.TaskSupport`, default ``NONE``) and ``task_step`` come together: a tool
    with task support has a step, and its handler may answer :class:`~.tasks.StartTask` (see :func:`task_tool`).
    A ``REQUIRED`` tool lists the tasks extension among its required capabilities, so a request that does not
    declare it gets ``-32021`` before the handler runs. ``blocking`` is about the handler; a ``def`` step always
    runs in a worker thread.
    """

    handler: ToolHandler
    _: KW_ONLY
    name: str
    description: str
    input_schema: SchemaSource
    title: str | None = None
    output_schema: SchemaSource | None = None
    annotations: JsonObjectSource | None = None
    meta: JsonObjectSource | None = None
    input_request_declarations: Sequence[InputRequestDeclaration] = ()
    request_state_mode: RequestStateMode = RequestStateMode.NONE
    blocking: bool = True
    required_scopes: Collection[str] = frozenset()
    task_support: TaskSupport = TaskSupport.NONE
    task_step: TaskStep | None = field(default=None, repr=False)
    header_parameters: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.task_support, TaskSupport):
            raise _field_error(self.name, "task_support must be a TaskSupport")
        if (self.task_step is None) != (self.task_support is TaskSupport.NONE) or not (
            self.task_step is None or callable(self.task_step)
        ):
            raise _field_error(self.name, "a tool with task support needs a callable task_step, and only it")
        schema = _schema(self.input_schema, self.name)
        _set(self, "input_schema", schema)
        if self.output_schema is not None:
            _set(self, "output_schema", _schema(self.output_schema, self.name, "output schema"))
        _set(self, "annotations", _optional_json_object(self.annotations))
        _set(self, "meta", _optional_json_object(self.meta))
        _check_name(self.name)
        _check_description(self.description, self.name)
        _check_optional_text(self.title, self.name)
        _check_operation(self, self.name)
        _set(self, "header_parameters", _header_parameters(schema, self.name))

    @property
    def required_capabilities(self) -> tuple[ClientCapabilities, ...]:
        """The REQUIRED declarations' capabilities, and the tasks extension for a ``REQUIRED`` task tool."""
        declared = _declared_required(self)
        if self.task_support is TaskSupport.REQUIRED:
            return (*declared, TASKS_CAPABILITIES)
        return declared

    def to_wire(self) -> JsonObject:
        """``{"name","title"?,"description","inputSchema","outputSchema"?,"annotations"?,"_meta"?}``."""
        return _to_wire(self, _TOOL_WIRE)


_PROMPT_ARGUMENT_WIRE: Final[_WireTable] = (
    ("name", "name"),
    ("title", "title"),
    ("description", "description"),
    ("required", "required"),
)


@dataclass(frozen=True, slots=True)
class PromptArgument:
    """One prompt argument: a ``name`` (same rule as tool names), an optional description and title, and
    whether it is ``required``. Prompt argument values are strings."""

    name: str
    description: str | None = None
    required: bool = False
    title: str | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_optional_text(self.title, self.name)
        if self.description is not None:
            _check_description(self.description, self.name)
        if not isinstance(self.required, bool):
            raise _field_error(self.name, "required must be a bool")

    def to_wire(self) -> JsonObject:
        """``{"name","title"?,"description"?,"required"?}`` (``required`` written only when true)."""
        return _to_wire(self, _PROMPT_ARGUMENT_WIRE)


_PROMPT_WIRE: Final[_WireTable] = (
    ("name", "name"),
    ("title", "title"),
    ("description", "description"),
    ("arguments", "arguments"),
    ("meta", "_meta"),
)


@dataclass(frozen=True, slots=True)
class PromptRegistration(_Operation):
    """A prompt: ``PromptRegistration(handler, name=..., description=..., arguments=[...])`` or the
    :func:`prompt` decorator."""

    handler: PromptHandler
    _: KW_ONLY
    name: str
    description: str
    arguments: Sequence[PromptArgument] = ()
    title: str | None = None
    meta: JsonObjectSource | None = None
    input_request_declarations: Sequence[InputRequestDeclaration] = ()
    request_state_mode: RequestStateMode = RequestStateMode.NONE
    blocking: bool = True
    required_scopes: Collection[str] = frozenset()

    def __post_init__(self) -> None:
        _set(self, "meta", _optional_json_object(self.meta))
        _check_name(self.name)
        _check_description(self.description, self.name)
        _check_optional_text(self.title, self.name)
        arguments = tuple(self.arguments)
        if not all(isinstance(item, PromptArgument) for item in arguments):
            raise _field_error(self.name, "arguments must be PromptArgument values")
        names = [item.name for item in arguments]
        if len(set(names)) != len(names):
            raise RegistrationError(McpModelErrorReason.DUPLICATE_REGISTRATION, self.name, "argument names")
        _set(self, "arguments", arguments)
        _check_operation(self, self.name)

    def check_arguments(self, arguments: JsonValue | None) -> Mapping[str, str]:
        """The client's ``params.arguments`` as a read-only ``{name: str}`` mapping, or :class:`ArgumentsError`
        (``invalid-prompt-arguments``) when they are not an object of strings, name an undeclared argument, or
        miss a required one. ``None`` (absent) counts as ``{}``."""
        if arguments is None:
            arguments = JsonObject.empty_instance()
        if not isinstance(arguments, JsonObject):
            raise ArgumentsError(McpModelErrorReason.INVALID_PROMPT_ARGUMENTS, self.name)
        declared = {item.name for item in self.arguments}
        values: dict[str, str] = {}
        for name, value in arguments.items():
            if name not in declared or not isinstance(value, JsonString):
                raise ArgumentsError(McpModelErrorReason.INVALID_PROMPT_ARGUMENTS, self.name)
            values[name] = value.value
        for item in self.arguments:
            if item.required and item.name not in values:
                raise ArgumentsError(McpModelErrorReason.INVALID_PROMPT_ARGUMENTS, self.name, "missing argument")
        return MappingProxyType(values)

    def to_wire(self) -> JsonObject:
        """``{"name","title"?,"description","arguments"?,"_meta"?}`` (``arguments`` omitted when none)."""
        return _to_wire(self, _PROMPT_WIRE)


_RESOURCE_WIRE: Final[_WireTable] = (
    ("uri", "uri"),
    ("name", "name"),
    ("title", "title"),
    ("description", "description"),
    ("mime_type", "mimeType"),
    ("size", "size"),
    ("annotations", "annotations"),
    ("meta", "_meta"),
)


@dataclass(frozen=True, slots=True)
class ResourceRegistration(_Operation):
    """A fixed resource at one absolute ``uri``: ``ResourceRegistration(handler, uri=..., name=...,
    description=...)`` or the :func:`resource` decorator."""

    handler: ResourceHandler
    _: KW_ONLY
    uri: str
    name: str
    description: str
    title: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: JsonObjectSource | None = None
    meta: JsonObjectSource | None = None
    input_request_declarations: Sequence[InputRequestDeclaration] = ()
    request_state_mode: RequestStateMode = RequestStateMode.NONE
    blocking: bool = True
    required_scopes: Collection[str] = frozenset()

    def __post_init__(self) -> None:
        _set(self, "annotations", _optional_json_object(self.annotations))
        _set(self, "meta", _optional_json_object(self.meta))
        _check_name(self.name)
        if not is_absolute_uri(self.uri):
            raise RegistrationError(McpModelErrorReason.INVALID_URI, self.name)
        _check_description(self.description, self.name)
        _check_optional_text(self.title, self.name)
        _check_optional_text(self.mime_type, self.name, "mime_type")
        if self.size is not None and (isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0):
            raise _field_error(self.name, "size must be an int >= 0")
        _check_operation(self, self.name)

    def to_wire(self) -> JsonObject:
        """``{"uri","name","title"?,"description","mimeType"?,"size"?,"annotations"?,"_meta"?}``."""
        return _to_wire(self, _RESOURCE_WIRE)


_RESOURCE_TEMPLATE_WIRE: Final[_WireTable] = (
    ("template", "uriTemplate"),
    ("name", "name"),
    ("title", "title"),
    ("description", "description"),
    ("mime_type", "mimeType"),
    ("annotations", "annotations"),
    ("meta", "_meta"),
)


@dataclass(frozen=True, slots=True)
class ResourceTemplateRegistration(_Operation):
    """Resources under a URI template (``test://template/{id}/data``): ``ResourceTemplateRegistration(handler,
    uri_template=..., name=..., description=...)`` or the :func:`resource_template` decorator; :meth:`match`
    routes a ``resources/read`` URI to it.

    ``uri_template`` may be given as text or a :class:`UriTemplate`; :attr:`template` is the parsed template.
    """

    handler: ResourceHandler
    _: KW_ONLY
    uri_template: str | UriTemplate
    name: str
    description: str
    title: str | None = None
    mime_type: str | None = None
    annotations: JsonObjectSource | None = None
    meta: JsonObjectSource | None = None
    input_request_declarations: Sequence[InputRequestDeclaration] = ()
    request_state_mode: RequestStateMode = RequestStateMode.NONE
    blocking: bool = True
    required_scopes: Collection[str] = frozenset()
    template: UriTemplate = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        template = self.uri_template
        _set(self, "template", template if isinstance(template, UriTemplate) else UriTemplate.parse(template))
        _set(self, "uri_template", self.template)
        _set(self, "annotations", _optional_json_object(self.annotations))
        _set(self, "meta", _optional_json_object(self.meta))
        _check_name(self.name)
        _check_description(self.description, self.name)
        _check_optional_text(self.title, self.name)
        _check_optional_text(self.mime_type, self.name, "mime_type")
        _check_operation(self, self.name)

    def match(self, uri: str) -> ResourceArguments | None:
        """The handler arguments for ``uri`` if it matches this template, else ``None``."""
        variables = self.template.match(uri)
        return None if variables is None else ResourceArguments(uri, MappingProxyType(variables))

    def to_wire(self) -> JsonObject:
        """``{"uriTemplate","name","title"?,"description","mimeType"?,"annotations"?,"_meta"?}``."""
        return _to_wire(self, _RESOURCE_TEMPLATE_WIRE)


#: The wire ``ref.type`` of a completion target.
CompletionRefType: TypeAlias = Literal["ref/prompt", "ref/resource"]


@dataclass(frozen=True, slots=True)
class CompletionRegistration:
    """Completion of one prompt argument (``ref/prompt``) or one template variable (``ref/resource``):
    ``CompletionRegistration(handler, argument=..., prompt=...)`` (or ``resource_template=...``) or the
    :func:`completion` decorator.

    Exactly one of ``prompt`` (a prompt name) and ``resource_template`` (a template text) is given; ``argument``
    is the argument or variable completed. ``ref_type`` and ``ref_name`` are the target as the wire names it.
    """

    handler: CompletionHandler
    _: KW_ONLY
    argument: str
    prompt: str | None = None
    resource_template: str | None = None
    blocking: bool = True
    ref_type: CompletionRefType = field(init=False)
    ref_name: str = field(init=False)

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.resource_template is None):
            raise RegistrationError(McpModelErrorReason.UNKNOWN_COMPLETION_TARGET, detail="name one target")
        if self.prompt is not None:
            _set(self, "ref_type", "ref/prompt")
            _set(self, "ref_name", self.prompt)
        else:
            _set(self, "ref_type", "ref/resource")
            _set(self, "ref_name", self.resource_template)
        if not isinstance(self.ref_name, str) or not self.ref_name or not is_valid_name(self.argument):
            raise RegistrationError(McpModelErrorReason.UNKNOWN_COMPLETION_TARGET, self.ref_name)
        if not callable(self.handler):
            raise RegistrationError(McpModelErrorReason.INVALID_HANDLER, self.ref_name)
        if not isinstance(self.blocking, bool):
            raise _field_error(self.ref_name, "blocking must be a bool")


#: Anything a :class:`Registry` holds.
Registration: TypeAlias = (
    ToolRegistration | PromptRegistration | ResourceRegistration | ResourceTemplateRegistration | CompletionRegistration
)


def _duplicate(subject: object) -> RegistrationError:
    return RegistrationError(McpModelErrorReason.DUPLICATE_REGISTRATION, subject)


@dataclass(frozen=True, slots=True, init=False)
class Registry:
    """An immutable set of registrations: ``Registry(echo, greet, ...)``. Lists are in registration order.

    Duplicates are refused (``duplicate-registration``): tools and prompts are unique by name; resources by URI
    and by name; templates by template text and by name; completions by target. A completion must name a prompt
    argument or template variable registered before it (``unknown-completion-target``). :meth:`merge` joins
    registries.
    """

    tools: tuple[ToolRegistration, ...]
    prompts: tuple[PromptRegistration, ...]
    resources: tuple[ResourceRegistration, ...]
    resource_templates: tuple[ResourceTemplateRegistration, ...]
    completions: tuple[CompletionRegistration, ...]
    _tools: Mapping[str, ToolRegistration] = field(repr=False, compare=False)
    _prompts: Mapping[str, PromptRegistration] = field(repr=False, compare=False)
    _resources: Mapping[str, ResourceRegistration] = field(repr=False, compare=False)
    _templates: Mapping[str, ResourceTemplateRegistration] = field(repr=False, compare=False)
    _completions: Mapping[tuple[str, str, str], CompletionRegistration] = field(repr=False, compare=False)

    def __init__(self, *registrations: Registration) -> None:
        tools: dict[str, ToolRegistration] = {}
        prompts: dict[str, PromptRegistration] = {}
        resources: dict[str, ResourceRegistration] = {}
        templates: dict[str, ResourceTemplateRegistration] = {}
        completions: dict[tuple[str, str, str], CompletionRegistration] = {}
        for item in registrations:
            if isinstance(item, ToolRegistration):
                if item.name in tools:
                    raise _duplicate(item.name)
                tools[item.name] = item
            elif isinstance(item, PromptRegistration):
                if item.name in prompts:
                    raise _duplicate(item.name)
                prompts[item.name] = item
            elif isinstance(item, ResourceRegistration):
                if item.uri in resources or any(other.name == item.name for other in resources.values()):
                    raise _duplicate(item.name)
                resources[item.uri] = item
            elif isinstance(item, ResourceTemplateRegistration):
                text = item.template.text
                if text in templates or any(other.name == item.name for other in templates.values()):
                    raise _duplicate(item.name)
                templates[text] = item
            elif isinstance(item, CompletionRegistration):
                _check_completion_target(item, prompts, templates)
                key = (item.ref_type, item.ref_name, item.argument)
                if key in completions:
                    raise _duplicate(item.ref_name)
                completions[key] = item
            else:
                raise TypeError("not a registration")
        _set(self, "tools", tuple(tools.values()))
        _set(self, "prompts", tuple(prompts.values()))
        _set(self, "resources", tuple(resources.values()))
        _set(self, "resource_templates", tuple(templates.values()))
        _set(self, "completions", tuple(completions.values()))
        _set(self, "_tools", MappingProxyType(tools))
        _set(self, "_prompts", MappingProxyType(prompts))
        _set(self, "_resources", MappingProxyType(resources))
        _set(self, "_templates", MappingProxyType(templates))
        _set(self, "_completions", MappingProxyType(completions))

    @classmethod
    def merge(cls, *registries: Registry) -> Registry:
        """One registry serving everything in ``registries``, each kind in the order given.

        Every completion comes after every other registration, so a completion may target a prompt or template
        of any of the registries; a registration that two of them hold is refused as a duplicate.
        """
        operations: list[Registration] = []
        for registry in registries:
            operations += [*registry.tools, *registry.prompts, *registry.resources, *registry.resource_templates]
        return cls(*operations, *(item for registry in registries for item in registry.completions))

    def find_tool(self, name: str) -> ToolRegistration | None:
        """The tool named ``name``."""
        return self._tools.get(name)

    def find_prompt(self, name: str) -> PromptRegistration | None:
        """The prompt named ``name``."""
        return self._prompts.get(name)

    def find_resource(self, uri: str) -> ResourceRegistration | None:
        """The fixed resource at exactly ``uri``."""
        return self._resources.get(uri)

    def match_resource_template(self, uri: str) -> tuple[ResourceTemplateRegistration, ResourceArguments] | None:
        """The first template (in registration order) matching ``uri``, with the handler arguments."""
        for template in self.resource_templates:
            arguments = template.match(uri)
            if arguments is not None:
                return template, arguments
        return None

    def find_completion(self, ref_type: str, ref_name: str, argument: str) -> CompletionRegistration | None:
        """The completion for a ``completion/complete`` ``ref`` (type and prompt name or template text) and
        argument name."""
        return self._completions.get((ref_type, ref_name, argument))

    @property
    def required_scopes(self) -> frozenset[str]:
        """Every scope some operation of this registry requires (``required_scopes=``): what a server lists in its
        RFC 9728 ``scopes_supported``."""
        return frozenset().union(
            *(
                item.required_scopes
                for group in (self.tools, self.prompts, self.resources, self.resource_templates)
                for item in group
            )
        )

    def server_capabilities(self) -> JsonObject:
        """The server capabilities a server of this registry advertises (``server/discover``, a 2025-era
        ``initialize``): ``tools``, ``prompts``, ``resources`` and ``completions``, each only when at least one
        registration of that kind is held (``resources`` for a resource or a template; ``completions`` for a
        completion registration, since nothing else completes). A client never sees a capability it cannot use."""
        held = (
            ("tools", bool(self.tools)),
            ("prompts", bool(self.prompts)),
            ("resources", bool(self.resources or self.resource_templates)),
            ("completions", bool(self.completions)),
        )
        return JsonObject.from_mapping({name: {} for name, present in held if present})


def _check_completion_target(
    registration: CompletionRegistration,
    prompts: Mapping[str, PromptRegistration],
    templates: Mapping[str, ResourceTemplateRegistration],
) -> None:
    if registration.ref_type == "ref/prompt":
        target = prompts.get(registration.ref_name)
        known = target is not None and any(item.name == registration.argument for item in target.arguments)
    else:
        template = templates.get(registration.ref_name)
        known = template is not None and registration.argument in template.template.variables
    if not known:
        raise RegistrationError(McpModelErrorReason.UNKNOWN_COMPLETION_TARGET, registration.ref_name)


# --- decorator forms -------------------------------------------------------------------------------------------

_DECLARATION_FACTORIES: Final = {
    InputRequestType.ELICITATION_FORM: InputRequestDeclaration.from_elicitation_form,
    InputRequestType.ELICITATION_URL: InputRequestDeclaration.from_elicitation_url,
    InputRequestType.SAMPLING: InputRequestDeclaration.from_sampling,
    InputRequestType.ROOTS_LIST: InputRequestDeclaration.from_roots_list,
}


def may_request_input(*, type: InputRequestType, requirement: InputRequirement) -> InputRequestDeclaration:
    """The declaration the spec writes ``@McpMayRequestInput(type=…, requirement=…)``: one typed value for the
    ``input_request_declarations=[…]`` list of a registration (equal to the matching named factory's result)."""
    if not isinstance(type, InputRequestType):
        raise TypeError("type must be an InputRequestType")
    return _DECLARATION_FACTORIES[type](requirement)


_Handler = TypeVar("_Handler")
_Options = ParamSpec("_Options")
_Made = TypeVar("_Made")


def _decorator(
    registration: Callable[Concatenate[_Handler, _Options], _Made],
) -> Callable[_Options, Callable[[_Handler], _Made]]:
    """The decorator form of a registration class: it takes the class's keywords and, given the handler,
    constructs the registration (so its signature and checks are the constructor's, written once)."""

    def decorator(*args: _Options.args, **options: _Options.kwargs) -> Callable[[_Handler], _Made]:
        def register(handler: _Handler) -> _Made:
            return registration(handler, *args, **options)

        return register

    name = getattr(registration, "__name__", "registration")
    decorator.__doc__ = f"Decorator: ``@decorator(**keywords)`` turns ``handler`` into ``{name}(handler, **keywords)``."
    return decorator


tool = _decorator(ToolRegistration)
prompt = _decorator(PromptRegistration)
resource = _decorator(ResourceRegistration)
resource_template = _decorator(ResourceTemplateRegistration)
completion = _decorator(CompletionRegistration)


def task_tool(
    *,
    task_support: TaskSupport = TaskSupport.OPTIONAL,
    blocking: bool = False,
    **tool_keywords: Any,
) -> Callable[[TaskStep], ToolRegistration]:
    """Decorator: ``@task_tool(name=..., description=..., input_schema=..., ...)`` on a task *step* registers a
    tool whose handler (:func:`~.tasks.start_task`) starts a task with no state, and whose step is the decorated
    function. ``task_support`` defaults to ``OPTIONAL``; the other keywords are :class:`ToolRegistration`'s
    (``blocking`` defaults to ``False``: the built-in handler never blocks)."""
    if task_support is TaskSupport.NONE:
        raise _field_error(tool_keywords.get("name"), "a task tool needs task support")

    def register(step: TaskStep) -> ToolRegistration:
        return ToolRegistration(
            start_task, task_support=task_support, task_step=step, blocking=blocking, **tool_keywords
        )

    return register
