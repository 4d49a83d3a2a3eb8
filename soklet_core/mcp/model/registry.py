"""Registrations of tools, prompts, resources, resource templates and completions, and the registry of them.

Names, descriptions and schemas are kept exactly as written (a schema is stored as the ``JsonValue`` it was
given or parsed to, member order and number spelling included); lists come out in registration order; a repeated
name (or URI) is refused. Each tool, prompt, resource and template carries its input-request declarations and its
request-state mode, and a handler ``handler(context, arguments) -> result`` (sync or async)::

    FORM = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)

    @tool(
        name="catalog.continue",
        description="Continue the catalog workflow after approval.",
        input_schema={"type": "object"},
        may_request_input=[may_request_input(type=InputRequestType.ELICITATION_FORM,
                                             requirement=InputRequirement.CONDITIONAL)],
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    )
    def catalog_continue(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        ...

    registry = Registry.of(catalog_continue)      # or: builder = Registry.builder(); builder.add(...)

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
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias, TypeVar

from soklet_core.json import JsonObject, JsonString, JsonValue, parse

from ._frozen import new_frozen
from .capabilities import ClientCapabilities
from .client_requests import InputRequestDeclaration, InputRequestType, InputRequirement
from .context import RequestContext
from .errors import ArgumentsError, McpModelErrorReason, RegistrationError
from .input_required_result import InputRequiredResult, RequestStateMode
from .results import CallToolResult, CompleteResult, GetPromptResult, ReadResourceResult
from .uri_templates import UriTemplate, is_absolute_uri

__all__ = [
    "MAX_NAME_CHARS",
    "CompletionArguments",
    "CompletionHandler",
    "CompletionRegistration",
    "PromptArgument",
    "PromptHandler",
    "PromptOutcome",
    "PromptRegistration",
    "Registration",
    "Registry",
    "RegistryBuilder",
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
    "tool",
]

#: Names of tools, prompts, prompt arguments, resources and templates: 1 to this many of ``[A-Za-z0-9_.-]``.
MAX_NAME_CHARS: Final = 128
_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1," + str(MAX_NAME_CHARS) + "}")
_HEADER_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
_PRIMITIVE_TYPES: Final = frozenset({"string", "number", "integer", "boolean"})
_OBJECT: Final = JsonString.from_value("object")

#: What a schema may be given as: a ``JsonObject``, plain Python data, or JSON text (parsed strictly, so the
#: number spelling and member order of the text are kept).
SchemaSource: TypeAlias = JsonValue | Mapping[str, Any] | str | bytes

ToolOutcome: TypeAlias = CallToolResult | InputRequiredResult
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


def _check_optional_object(value: object, owner: object, what: str) -> None:
    if value is not None and not isinstance(value, JsonObject):
        raise _field_error(owner, f"{what} must be a JSON object")


def _schema(source: SchemaSource, owner: object) -> JsonObject:
    value = parse(source) if isinstance(source, str | bytes) else JsonValue.from_python(source)
    if not isinstance(value, JsonObject) or value.get("type") != _OBJECT:
        raise RegistrationError(McpModelErrorReason.INVALID_INPUT_SCHEMA, owner)
    return value


def _optional_schema(source: SchemaSource | None, owner: object) -> JsonObject | None:
    return None if source is None else _schema(source, owner)


def _optional_json_object(value: JsonValue | Mapping[str, Any] | None) -> JsonObject | None:
    if value is None:
        return None
    converted = JsonValue.from_python(value)
    if not isinstance(converted, JsonObject):
        raise _field_error(None, "annotations and meta must be JSON objects")
    return converted


def _declarations(items: Iterable[InputRequestDeclaration], owner: object) -> tuple[InputRequestDeclaration, ...]:
    declarations = tuple(items)
    if not all(isinstance(item, InputRequestDeclaration) for item in declarations):
        raise _field_error(owner, "declarations must be InputRequestDeclaration values")
    kinds = [item.input_request_type for item in declarations]
    if len(set(kinds)) != len(kinds):
        raise RegistrationError(McpModelErrorReason.DUPLICATE_DECLARATION, owner)
    return declarations


def _check_operation(registration: _Operation, owner: object) -> None:
    if not callable(registration.handler):
        raise RegistrationError(McpModelErrorReason.INVALID_HANDLER, owner)
    object.__setattr__(
        registration,
        "input_request_declarations",
        _declarations(registration.input_request_declarations, owner),
    )
    if not isinstance(registration.request_state_mode, RequestStateMode):
        raise _field_error(owner, "request_state_mode must be a RequestStateMode")
    if not isinstance(registration.blocking, bool):
        raise _field_error(owner, "blocking must be a bool")


def _put(builder: list[tuple[str, JsonValue | str | int | None]]) -> JsonObject:
    out = JsonObject.builder()
    for name, value in builder:
        if value is not None:
            out.put(name, value)
    return out.build()


class _Operation:
    """Behaviour shared by the input-capable registrations (tools, prompts, resources, templates)."""

    __slots__ = ()

    handler: Callable[..., object]
    input_request_declarations: tuple[InputRequestDeclaration, ...]
    request_state_mode: RequestStateMode
    blocking: bool

    @property
    def required_capabilities(self) -> tuple[ClientCapabilities, ...]:
        """The capabilities of the REQUIRED declarations: checked after admission, before every execution."""
        return tuple(
            item.capabilities
            for item in self.input_request_declarations
            if item.requirement is InputRequirement.REQUIRED
        )

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


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRegistration(_Operation):
    """A tool. Build it with :meth:`create` or the :func:`tool` decorator.

    ``input_schema`` (and ``output_schema``) are JSON objects whose ``type`` is ``"object"``, kept exactly as
    written; ``to_wire()`` gives them back unchanged. ``header_parameters`` maps each ``x-mcp-header`` name of a
    top-level property to the property (for ``Mcp-Param-{Name}`` validation).
    """

    name: str
    description: str
    input_schema: JsonObject
    handler: ToolHandler
    title: str | None = None
    output_schema: JsonObject | None = None
    annotations: JsonObject | None = None
    meta: JsonObject | None = None
    input_request_declarations: tuple[InputRequestDeclaration, ...] = ()
    request_state_mode: RequestStateMode = RequestStateMode.NONE
    blocking: bool = True
    header_parameters: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_description(self.description, self.name)
        _check_optional_text(self.title, self.name)
        if not isinstance(self.input_schema, JsonObject) or self.input_schema.get("type") != JsonString.from_value(
            "object"
        ):
            raise RegistrationError(McpModelErrorReason.INVALID_INPUT_SCHEMA, self.name)
        if self.output_schema is not None and (
            not isinstance(self.output_schema, JsonObject) or self.output_schema.get("type") != _OBJECT
        ):
            raise RegistrationError(McpModelErrorReason.INVALID_INPUT_SCHEMA, self.name, "output schema")
        _check_optional_object(self.annotations, self.name, "annotations")
        _check_optional_object(self.meta, self.name, "meta")
        _check_operation(self, self.name)
        object.__setattr__(self, "header_parameters", _header_parameters(self.input_schema, self.name))

    @classmethod
    def create(
        cls,
        *,
        name: str,
        description: str,
        input_schema: SchemaSource,
        handler: ToolHandler,
        title: str | None = None,
        output_schema: SchemaSource | None = None,
        annotations: JsonValue | Mapping[str, Any] | None = None,
        meta: JsonValue | Mapping[str, Any] | None = None,
        input_request_declarations: Iterable[InputRequestDeclaration] = (),
        request_state_mode: RequestStateMode = RequestStateMode.NONE,
        blocking: bool = True,
    ) -> ToolRegistration:
        """A tool registration; schemas may be ``JsonObject``, plain Python data or JSON text."""
        return cls(
            name=name,
            description=description,
            input_schema=_schema(input_schema, name),
            handler=handler,
            title=title,
            output_schema=_optional_schema(output_schema, name),
            annotations=_optional_json_object(annotations),
            meta=_optional_json_object(meta),
            input_request_declarations=tuple(input_request_declarations),
            request_state_mode=request_state_mode,
            blocking=blocking,
        )

    def to_wire(self) -> JsonObject:
        """``{"name","title"?,"description","inputSchema","outputSchema"?,"annotations"?,"_meta"?}``."""
        return _put(
            [
                ("name", self.name),
                ("title", self.title),
                ("description", self.description),
                ("inputSchema", self.input_schema),
                ("outputSchema", self.output_schema),
                ("annotations", self.annotations),
                ("_meta", self.meta),
            ]
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
        return _put(
            [
                ("name", self.name),
                ("title", self.title),
                ("description", self.description),
                ("required", True if self.required else None),
            ]
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptRegistration(_Operation):
    """A prompt. Build it with :meth:`create` or the :func:`prompt` decorator."""

    name: str
    description: str
    handler: PromptHandler
    arguments: tuple[PromptArgument, ...] = ()
    title: str | None = None
    meta: JsonObject | None = None
    input_request_declarations: tuple[InputRequestDeclaration, ...] = ()
    request_state_mode: RequestStateMode = RequestStateMode.NONE
    blocking: bool = True

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_description(self.description, self.name)
        _check_optional_text(self.title, self.name)
        arguments = tuple(self.arguments)
        if not all(isinstance(item, PromptArgument) for item in arguments):
            raise _field_error(self.name, "arguments must be PromptArgument values")
        names = [item.name for item in arguments]
        if len(set(names)) != len(names):
            raise RegistrationError(McpModelErrorReason.DUPLICATE_REGISTRATION, self.name, "argument names")
        object.__setattr__(self, "arguments", arguments)
        _check_optional_object(self.meta, self.name, "meta")
        _check_operation(self, self.name)

    @classmethod
    def create(
        cls,
        *,
        name: str,
        description: str,
        handler: PromptHandler,
        arguments: Iterable[PromptArgument] = (),
        title: str | None = None,
        meta: JsonValue | Mapping[str, Any] | None = None,
        input_request_declarations: Iterable[InputRequestDeclaration] = (),
        request_state_mode: RequestStateMode = RequestStateMode.NONE,
        blocking: bool = True,
    ) -> PromptRegistration:
        """A prompt registration."""
        return cls(
            name=name,
            description=description,
            handler=handler,
            arguments=tuple(arguments),
            title=title,
            meta=_optional_json_object(meta),
            input_request_declarations=tuple(input_request_declarations),
            request_state_mode=request_state_mode,
            blocking=blocking,
        )

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
        arguments = [item.to_wire() for item in self.arguments]
        return _put(
            [
                ("name", self.name),
                ("title", self.title),
                ("description", self.description),
                ("arguments", JsonValue.from_python(arguments) if arguments else None),
                ("_meta", self.meta),
            ]
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceRegistration(_Operation):
    """A fixed resource at one absolute ``uri``. Build it with :meth:`create` or the :func:`resource` decorator."""

    uri: str
    name: str
    description: str
    handler: ResourceHandler
    title: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: JsonObject | None = None
    meta: JsonObject | None = None
    input_request_declarations: tuple[InputRequestDeclaration, ...] = ()
    request_state_mode: RequestStateMode = RequestStateMode.NONE
    blocking: bool = True

    def __post_init__(self) -> None:
        _check_name(self.name)
        if not is_absolute_uri(self.uri):
            raise RegistrationError(McpModelErrorReason.INVALID_URI, self.name)
        _check_description(self.description, self.name)
        _check_optional_text(self.title, self.name)
        _check_optional_text(self.mime_type, self.name, "mime_type")
        if self.size is not None and (isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0):
            raise _field_error(self.name, "size must be an int >= 0")
        _check_optional_object(self.annotations, self.name, "annotations")
        _check_optional_object(self.meta, self.name, "meta")
        _check_operation(self, self.name)

    @classmethod
    def create(
        cls,
        *,
        uri: str,
        name: str,
        description: str,
        handler: ResourceHandler,
        title: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: JsonValue | Mapping[str, Any] | None = None,
        meta: JsonValue | Mapping[str, Any] | None = None,
        input_request_declarations: Iterable[InputRequestDeclaration] = (),
        request_state_mode: RequestStateMode = RequestStateMode.NONE,
        blocking: bool = True,
    ) -> ResourceRegistration:
        """A resource registration."""
        return cls(
            uri=uri,
            name=name,
            description=description,
            handler=handler,
            title=title,
            mime_type=mime_type,
            size=size,
            annotations=_optional_json_object(annotations),
            meta=_optional_json_object(meta),
            input_request_declarations=tuple(input_request_declarations),
            request_state_mode=request_state_mode,
            blocking=blocking,
        )

    def to_wire(self) -> JsonObject:
        """``{"uri","name","title"?,"description","mimeType"?,"size"?,"annotations"?,"_meta"?}``."""
        return _put(
            [
                ("uri", self.uri),
                ("name", self.name),
                ("title", self.title),
                ("description", self.description),
                ("mimeType", self.mime_type),
                ("size", self.size),
                ("annotations", self.annotations),
                ("_meta", self.meta),
            ]
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceTemplateRegistration(_Operation):
    """Resources under a URI template (``test://template/{id}/data``). Build it with :meth:`create` or the
    :func:`resource_template` decorator; :meth:`match` routes a ``resources/read`` URI to it."""

    uri_template: UriTemplate
    name: str
    description: str
    handler: ResourceHandler
    title: str | None = None
    mime_type: str | None = None
    annotations: JsonObject | None = None
    meta: JsonObject | None = None
    input_request_declarations: tuple[InputRequestDeclaration, ...] = ()
    request_state_mode: RequestStateMode = RequestStateMode.NONE
    blocking: bool = True

    def __post_init__(self) -> None:
        _check_name(self.name)
        if not isinstance(self.uri_template, UriTemplate):
            raise RegistrationError(McpModelErrorReason.INVALID_URI_TEMPLATE, self.name, "use UriTemplate.parse")
        _check_description(self.description, self.name)
        _check_optional_text(self.title, self.name)
        _check_optional_text(self.mime_type, self.name, "mime_type")
        _check_optional_object(self.annotations, self.name, "annotations")
        _check_optional_object(self.meta, self.name, "meta")
        _check_operation(self, self.name)

    @classmethod
    def create(
        cls,
        *,
        uri_template: str | UriTemplate,
        name: str,
        description: str,
        handler: ResourceHandler,
        title: str | None = None,
        mime_type: str | None = None,
        annotations: JsonValue | Mapping[str, Any] | None = None,
        meta: JsonValue | Mapping[str, Any] | None = None,
        input_request_declarations: Iterable[InputRequestDeclaration] = (),
        request_state_mode: RequestStateMode = RequestStateMode.NONE,
        blocking: bool = True,
    ) -> ResourceTemplateRegistration:
        """A resource-template registration (``uri_template`` text is parsed here)."""
        return cls(
            uri_template=uri_template if isinstance(uri_template, UriTemplate) else UriTemplate.parse(uri_template),
            name=name,
            description=description,
            handler=handler,
            title=title,
            mime_type=mime_type,
            annotations=_optional_json_object(annotations),
            meta=_optional_json_object(meta),
            input_request_declarations=tuple(input_request_declarations),
            request_state_mode=request_state_mode,
            blocking=blocking,
        )

    def match(self, uri: str) -> ResourceArguments | None:
        """The handler arguments for ``uri`` if it matches this template, else ``None``."""
        variables = self.uri_template.match(uri)
        return None if variables is None else ResourceArguments(uri, MappingProxyType(variables))

    def to_wire(self) -> JsonObject:
        """``{"uriTemplate","name","title"?,"description","mimeType"?,"annotations"?,"_meta"?}``."""
        return _put(
            [
                ("uriTemplate", self.uri_template.text),
                ("name", self.name),
                ("title", self.title),
                ("description", self.description),
                ("mimeType", self.mime_type),
                ("annotations", self.annotations),
                ("_meta", self.meta),
            ]
        )


#: The wire ``ref.type`` of a completion target.
CompletionRefType: TypeAlias = Literal["ref/prompt", "ref/resource"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletionRegistration:
    """Completion of one prompt argument (``ref/prompt``) or one template variable (``ref/resource``).

    Build it with :meth:`for_prompt`, :meth:`for_resource_template` or the :func:`completion` decorator.
    ``ref_name`` is the prompt name or the template text; ``argument`` the argument or variable completed.
    """

    ref_type: CompletionRefType
    ref_name: str
    argument: str
    handler: CompletionHandler
    blocking: bool = True

    def __post_init__(self) -> None:
        if self.ref_type not in ("ref/prompt", "ref/resource"):
            raise RegistrationError(McpModelErrorReason.UNKNOWN_COMPLETION_TARGET)
        if not isinstance(self.ref_name, str) or not self.ref_name or not is_valid_name(self.argument):
            raise RegistrationError(McpModelErrorReason.UNKNOWN_COMPLETION_TARGET, self.ref_name)
        if not callable(self.handler):
            raise RegistrationError(McpModelErrorReason.INVALID_HANDLER, self.ref_name)
        if not isinstance(self.blocking, bool):
            raise _field_error(self.ref_name, "blocking must be a bool")

    @classmethod
    def for_prompt(
        cls, prompt: str, argument: str, handler: CompletionHandler, *, blocking: bool = True
    ) -> CompletionRegistration:
        """Complete ``argument`` of the prompt named ``prompt``."""
        return cls(ref_type="ref/prompt", ref_name=prompt, argument=argument, handler=handler, blocking=blocking)

    @classmethod
    def for_resource_template(
        cls, uri_template: str, variable: str, handler: CompletionHandler, *, blocking: bool = True
    ) -> CompletionRegistration:
        """Complete ``variable`` of the resource template written ``uri_template``."""
        return cls(
            ref_type="ref/resource", ref_name=uri_template, argument=variable, handler=handler, blocking=blocking
        )


#: Anything a :class:`RegistryBuilder` accepts.
Registration: TypeAlias = (
    ToolRegistration | PromptRegistration | ResourceRegistration | ResourceTemplateRegistration | CompletionRegistration
)
_R = TypeVar("_R", bound=Registration)


def _duplicate(subject: object) -> RegistrationError:
    return RegistrationError(McpModelErrorReason.DUPLICATE_REGISTRATION, subject)


@dataclass(frozen=True, slots=True, init=False)
class Registry:
    """An immutable set of registrations. Lists are in registration order, every time.

    Build it with :meth:`builder` (or :meth:`of`).
    """

    tools: tuple[ToolRegistration, ...]
    prompts: tuple[PromptRegistration, ...]
    resources: tuple[ResourceRegistration, ...]
    resource_templates: tuple[ResourceTemplateRegistration, ...]
    completions: tuple[CompletionRegistration, ...]
    _tools: Mapping[str, ToolRegistration] = field(repr=False, compare=False)
    _prompts: Mapping[str, PromptRegistration] = field(repr=False, compare=False)
    _resources: Mapping[str, ResourceRegistration] = field(repr=False, compare=False)
    _completions: Mapping[tuple[str, str, str], CompletionRegistration] = field(repr=False, compare=False)

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("use Registry.builder() ... .build() or Registry.of(...)")

    @classmethod
    def builder(cls) -> RegistryBuilder:
        """An empty builder."""
        return RegistryBuilder()

    @classmethod
    def of(cls, *registrations: Registration) -> Registry:
        """A registry holding ``registrations`` in the order given."""
        builder = RegistryBuilder()
        for item in registrations:
            builder.add(item)
        return builder.build()

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


class RegistryBuilder:
    """Collects registrations for one :class:`Registry`; refuses duplicates as they are added.

    Tools and prompts are unique by name; resources by URI and by name; templates by template text and by name;
    completions by target. A completion must name a prompt argument or template variable added before it.
    :meth:`add` returns its argument, so it stacks on the decorators::

        @builder.add
        @tool(name="echo", description="Echo the arguments.", input_schema={"type": "object"})
        def echo(context, arguments): ...
    """

    __slots__ = ("_completions", "_prompts", "_resources", "_templates", "_tools")

    def __init__(self) -> None:
        self._tools: dict[str, ToolRegistration] = {}
        self._prompts: dict[str, PromptRegistration] = {}
        self._resources: dict[str, ResourceRegistration] = {}
        self._templates: dict[str, ResourceTemplateRegistration] = {}
        self._completions: dict[tuple[str, str, str], CompletionRegistration] = {}

    def add(self, registration: _R) -> _R:
        """Add ``registration`` and return it (so a decorated function stays bound to its registration)."""
        if isinstance(registration, ToolRegistration):
            if registration.name in self._tools:
                raise _duplicate(registration.name)
            self._tools[registration.name] = registration
        elif isinstance(registration, PromptRegistration):
            if registration.name in self._prompts:
                raise _duplicate(registration.name)
            self._prompts[registration.name] = registration
        elif isinstance(registration, ResourceRegistration):
            if registration.uri in self._resources or any(
                item.name == registration.name for item in self._resources.values()
            ):
                raise _duplicate(registration.name)
            self._resources[registration.uri] = registration
        elif isinstance(registration, ResourceTemplateRegistration):
            text = registration.uri_template.text
            if text in self._templates or any(item.name == registration.name for item in self._templates.values()):
                raise _duplicate(registration.name)
            self._templates[text] = registration
        elif isinstance(registration, CompletionRegistration):
            self._add_completion(registration)
        else:
            raise TypeError("not a registration")
        return registration

    def _add_completion(self, registration: CompletionRegistration) -> None:
        key = (registration.ref_type, registration.ref_name, registration.argument)
        if registration.ref_type == "ref/prompt":
            prompt_registration = self._prompts.get(registration.ref_name)
            known = prompt_registration is not None and any(
                item.name == registration.argument for item in prompt_registration.arguments
            )
        else:
            template = self._templates.get(registration.ref_name)
            known = template is not None and registration.argument in template.uri_template.variables
        if not known:
            raise RegistrationError(McpModelErrorReason.UNKNOWN_COMPLETION_TARGET, registration.ref_name)
        if key in self._completions:
            raise _duplicate(registration.ref_name)
        self._completions[key] = registration

    def build(self) -> Registry:
        """The registry (a snapshot: later additions to this builder do not change it)."""
        return _new_registry(
            tuple(self._tools.values()),
            tuple(self._prompts.values()),
            tuple(self._resources.values()),
            tuple(self._templates.values()),
            tuple(self._completions.values()),
        )


def _new_registry(
    tools: tuple[ToolRegistration, ...],
    prompts: tuple[PromptRegistration, ...],
    resources: tuple[ResourceRegistration, ...],
    templates: tuple[ResourceTemplateRegistration, ...],
    completions: tuple[CompletionRegistration, ...],
) -> Registry:
    return new_frozen(
        Registry,
        tools=tools,
        prompts=prompts,
        resources=resources,
        resource_templates=templates,
        completions=completions,
        _tools=MappingProxyType({item.name: item for item in tools}),
        _prompts=MappingProxyType({item.name: item for item in prompts}),
        _resources=MappingProxyType({item.uri: item for item in resources}),
        _completions=MappingProxyType({(c.ref_type, c.ref_name, c.argument): c for c in completions}),
    )


# --- decorator forms -------------------------------------------------------------------------------------------

_DECLARATION_FACTORIES: Final = {
    InputRequestType.ELICITATION_FORM: InputRequestDeclaration.from_elicitation_form,
    InputRequestType.ELICITATION_URL: InputRequestDeclaration.from_elicitation_url,
    InputRequestType.SAMPLING: InputRequestDeclaration.from_sampling,
    InputRequestType.ROOTS_LIST: InputRequestDeclaration.from_roots_list,
}


def may_request_input(*, type: InputRequestType, requirement: InputRequirement) -> InputRequestDeclaration:
    """The declaration the spec writes ``@McpMayRequestInput(type=…, requirement=…)``: one typed value for the
    ``may_request_input=[…]`` list of a decorator (equal to the matching named factory's result)."""
    if not isinstance(type, InputRequestType):
        raise TypeError("type must be an InputRequestType")
    return _DECLARATION_FACTORIES[type](requirement)


def tool(
    *,
    name: str,
    description: str,
    input_schema: SchemaSource,
    title: str | None = None,
    output_schema: SchemaSource | None = None,
    annotations: JsonValue | Mapping[str, Any] | None = None,
    meta: JsonValue | Mapping[str, Any] | None = None,
    may_request_input: Iterable[InputRequestDeclaration] = (),
    request_state_mode: RequestStateMode = RequestStateMode.NONE,
    blocking: bool = True,
) -> Callable[[ToolHandler], ToolRegistration]:
    """Decorator: turn ``handler(context, arguments)`` into a :class:`ToolRegistration` (see
    :meth:`ToolRegistration.create`; ``may_request_input`` is its ``input_request_declarations``)."""
    declarations = tuple(may_request_input)
    return lambda handler: ToolRegistration.create(
        name=name,
        description=description,
        input_schema=input_schema,
        handler=handler,
        title=title,
        output_schema=output_schema,
        annotations=annotations,
        meta=meta,
        input_request_declarations=declarations,
        request_state_mode=request_state_mode,
        blocking=blocking,
    )


def prompt(
    *,
    name: str,
    description: str,
    arguments: Iterable[PromptArgument] = (),
    title: str | None = None,
    meta: JsonValue | Mapping[str, Any] | None = None,
    may_request_input: Iterable[InputRequestDeclaration] = (),
    request_state_mode: RequestStateMode = RequestStateMode.NONE,
    blocking: bool = True,
) -> Callable[[PromptHandler], PromptRegistration]:
    """Decorator: turn ``handler(context, arguments)`` into a :class:`PromptRegistration`."""
    declarations, argument_list = tuple(may_request_input), tuple(arguments)
    return lambda handler: PromptRegistration.create(
        name=name,
        description=description,
        handler=handler,
        arguments=argument_list,
        title=title,
        meta=meta,
        input_request_declarations=declarations,
        request_state_mode=request_state_mode,
        blocking=blocking,
    )


def resource(
    *,
    uri: str,
    name: str,
    description: str,
    title: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    annotations: JsonValue | Mapping[str, Any] | None = None,
    meta: JsonValue | Mapping[str, Any] | None = None,
    may_request_input: Iterable[InputRequestDeclaration] = (),
    request_state_mode: RequestStateMode = RequestStateMode.NONE,
    blocking: bool = True,
) -> Callable[[ResourceHandler], ResourceRegistration]:
    """Decorator: turn ``handler(context, resource_arguments)`` into a :class:`ResourceRegistration`."""
    declarations = tuple(may_request_input)
    return lambda handler: ResourceRegistration.create(
        uri=uri,
        name=name,
        description=description,
        handler=handler,
        title=title,
        mime_type=mime_type,
        size=size,
        annotations=annotations,
        meta=meta,
        input_request_declarations=declarations,
        request_state_mode=request_state_mode,
        blocking=blocking,
    )


def resource_template(
    *,
    uri_template: str | UriTemplate,
    name: str,
    description: str,
    title: str | None = None,
    mime_type: str | None = None,
    annotations: JsonValue | Mapping[str, Any] | None = None,
    meta: JsonValue | Mapping[str, Any] | None = None,
    may_request_input: Iterable[InputRequestDeclaration] = (),
    request_state_mode: RequestStateMode = RequestStateMode.NONE,
    blocking: bool = True,
) -> Callable[[ResourceHandler], ResourceTemplateRegistration]:
    """Decorator: turn ``handler(context, resource_arguments)`` into a :class:`ResourceTemplateRegistration`."""
    declarations = tuple(may_request_input)
    return lambda handler: ResourceTemplateRegistration.create(
        uri_template=uri_template,
        name=name,
        description=description,
        handler=handler,
        title=title,
        mime_type=mime_type,
        annotations=annotations,
        meta=meta,
        input_request_declarations=declarations,
        request_state_mode=request_state_mode,
        blocking=blocking,
    )


def completion(
    *, argument: str, prompt: str | None = None, resource_template: str | None = None, blocking: bool = True
) -> Callable[[CompletionHandler], CompletionRegistration]:
    """Decorator: turn ``handler(context, completion_arguments)`` into a :class:`CompletionRegistration` for
    exactly one of ``prompt`` (a prompt name) or ``resource_template`` (a template text)."""
    if (prompt is None) == (resource_template is None):
        raise RegistrationError(McpModelErrorReason.UNKNOWN_COMPLETION_TARGET, detail="name one target")
    if prompt is not None:
        target = prompt
        return lambda handler: CompletionRegistration.for_prompt(target, argument, handler, blocking=blocking)
    assert resource_template is not None
    template = resource_template
    return lambda handler: CompletionRegistration.for_resource_template(template, argument, handler, blocking=blocking)
