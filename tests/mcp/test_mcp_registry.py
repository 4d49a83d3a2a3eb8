"""Registrations and the registry: names, descriptions, exact schemas, order, duplicates, decorators,
completion, templates, emission checks, and the whole conformance fixture catalogue."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pytest

from soklet_core.json import JsonError, JsonObject, JsonString, canonical_text, parse, serialize
from soklet_core.mcp import (
    CallToolResult,
    ClientCapabilities,
    CompleteResult,
    GetPromptResult,
    InputRequest,
    InputRequestDeclaration,
    InputRequiredResult,
    InputRequirement,
    McpModelErrorReason,
    PromptMessage,
    ReadResourceResult,
    Registry,
    RequestContext,
    RequestStateMode,
    completion,
    prompt,
    resource,
    resource_template,
    tool,
)
from soklet_core.mcp.model import (
    MAX_NAME_CHARS,
    ArgumentsError,
    CompletionArguments,
    CompletionRegistration,
    InputRequestType,
    PromptArgument,
    PromptRegistration,
    RegistrationError,
    ResourceArguments,
    ResourceRegistration,
    ResourceTemplateRegistration,
    ToolRegistration,
    UriTemplate,
    is_valid_name,
    may_request_input,
)
from tests.mcp.support import JSON_SCHEMA_2020_12, build_registry

R = McpModelErrorReason
OBJECT = {"type": "object"}


def handler(context: RequestContext, arguments: Any) -> CallToolResult:
    return CallToolResult.from_text("ok")


def prompt_handler(context: RequestContext, arguments: Mapping[str, str]) -> GetPromptResult:
    return GetPromptResult.of([PromptMessage.user("hi")])


def resource_handler(context: RequestContext, arguments: ResourceArguments) -> ReadResourceResult:
    return ReadResourceResult.of([])


def make_tool(name: str = "t", **options: Any) -> ToolRegistration:
    return ToolRegistration(
        name=name, description=options.pop("description", "A tool."), input_schema=options.pop("input_schema", OBJECT),
        handler=options.pop("handler", handler), **options,
    )  # fmt: skip


# --- names and descriptions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "A_b.c-d", "catalog.continue", "x" * 128, "0", "-", ".", "_"])
def test_valid_names(name: str) -> None:
    assert is_valid_name(name)
    assert make_tool(name).name == name
    assert PromptRegistration(name=name, description="p", handler=prompt_handler).name == name


@pytest.mark.parametrize("name", ["", "x" * 129, "a/b", "a b", "ä", "a:b", "tool!", "\n", None, 5])
def test_invalid_names(name: Any) -> None:
    assert not is_valid_name(name)
    with pytest.raises(RegistrationError) as caught:
        make_tool(name)
    assert caught.value.reason is R.INVALID_NAME
    with pytest.raises(RegistrationError):
        PromptRegistration(name=name, description="p", handler=prompt_handler)
    with pytest.raises(RegistrationError):
        ResourceRegistration(uri="test://x", name=name, description="r", handler=resource_handler)


def test_name_limit_constant() -> None:
    assert MAX_NAME_CHARS == 128


@pytest.mark.parametrize("description", ["", "   ", "\n\t", None, 3])
def test_description_required(description: Any) -> None:
    with pytest.raises(RegistrationError) as caught:
        make_tool(description=description)
    assert caught.value.reason is R.MISSING_DESCRIPTION
    with pytest.raises(RegistrationError):
        PromptRegistration(name="p", description=description, handler=prompt_handler)
    with pytest.raises(RegistrationError):
        ResourceRegistration(uri="test://x", name="r", description=description, handler=resource_handler)
    with pytest.raises(RegistrationError):
        ResourceTemplateRegistration(
            uri_template="test://{id}", name="r", description=description, handler=resource_handler
        )


def test_description_kept_exactly() -> None:
    text = '  Line one.\nLine two — with ünïcode and "quotes".  '
    assert make_tool(description=text).to_wire()["description"] == JsonString.from_value(text)
    assert serialize(make_tool(description=text).to_wire()).count(text.replace('"', '\\"').replace("\n", "\\n")) == 1


# --- schemas kept exactly ---------------------------------------------------------------------------------------


def test_2020_12_schema_round_trips_byte_identical() -> None:
    registration = make_tool("json_schema_2020_12_tool", input_schema=JSON_SCHEMA_2020_12)
    assert serialize(registration.input_schema) == JSON_SCHEMA_2020_12
    wire = registration.to_wire()
    assert serialize(wire["inputSchema"]) == JSON_SCHEMA_2020_12
    assert serialize(wire) == (
        '{"name":"json_schema_2020_12_tool","description":"A tool.","inputSchema":' + JSON_SCHEMA_2020_12 + "}"
    )
    # given as bytes, as a parsed value or as Python data: the same exact schema
    assert serialize(make_tool(input_schema=JSON_SCHEMA_2020_12.encode()).input_schema) == JSON_SCHEMA_2020_12
    parsed = parse(JSON_SCHEMA_2020_12)
    assert make_tool(input_schema=parsed).input_schema is parsed
    as_python = parsed.to_python()
    assert serialize(make_tool(input_schema=as_python).input_schema) == JSON_SCHEMA_2020_12


def test_schema_numbers_and_member_order_kept() -> None:
    text = '{"type":"object","properties":{"z":{"type":"number","minimum":1.50,"maximum":1E+2},"a":{"type":"string"}}}'
    assert serialize(make_tool(input_schema=text).to_wire()["inputSchema"]) == text
    pretty = '{\n  "type": "object",\n  "x-order": [3, 2, 1]\n}'
    assert serialize(make_tool(input_schema=pretty).input_schema) == '{"type":"object","x-order":[3,2,1]}'


@pytest.mark.parametrize(
    "schema",
    ['{"type":"array"}', "{}", '{"type":["object"]}', "[]", '"object"', {"properties": {}}, '{"type":"object",}'],
)
def test_schema_must_be_an_object_schema(schema: Any) -> None:
    # RegistrationError, or JsonError for text that is not strict JSON
    with pytest.raises((RegistrationError, JsonError)):
        make_tool(input_schema=schema)
    with pytest.raises((RegistrationError, JsonError)):
        make_tool(output_schema=schema)


def test_output_schema_annotations_meta_title() -> None:
    registration = make_tool(
        title="T", output_schema='{"type":"object","properties":{"n":{"type":"number"}}}',
        annotations={"readOnlyHint": True}, meta={"vendor/x": 1},
    )  # fmt: skip
    assert serialize(registration.to_wire()) == (
        '{"name":"t","title":"T","description":"A tool.","inputSchema":{"type":"object"},'
        '"outputSchema":{"type":"object","properties":{"n":{"type":"number"}}},'
        '"annotations":{"readOnlyHint":true},"_meta":{"vendor/x":1}}'
    )
    with pytest.raises(RegistrationError):
        make_tool(annotations=[1])


def test_registrations_are_frozen() -> None:
    registration = make_tool()
    with pytest.raises(AttributeError):
        registration.name = "other"  # type: ignore[misc]
    with pytest.raises(RegistrationError) as caught:
        make_tool(handler="not callable")
    assert caught.value.reason is R.INVALID_HANDLER


def test_direct_construction_validates_too() -> None:
    with pytest.raises(RegistrationError):
        ToolRegistration(name="t", description="d", input_schema=JsonObject.empty_instance(), handler=handler)
    ok = ToolRegistration(name="t", description="d", input_schema=JsonObject.from_mapping(OBJECT), handler=handler)
    assert ok.request_state_mode is RequestStateMode.NONE
    assert ok.input_request_declarations == ()


# --- header parameters -----------------------------------------------------------------------------------------


def test_header_parameters() -> None:
    registration = make_tool(
        input_schema={"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"},
                                                       "n": {"type": "integer", "x-mcp-header": "Count"}, "x": {}}}
    )  # fmt: skip
    assert dict(registration.header_parameters) == {"Region": "region", "Count": "n"}
    for bad in (
        {"a": {"type": "string", "x-mcp-header": "Bad Name"}},
        {"a": {"type": "string", "x-mcp-header": ""}},
        {"a": {"type": "string", "x-mcp-header": 1}},
        {"a": {"type": "object", "x-mcp-header": "A"}},
        {"a": {"type": "string", "x-mcp-header": "Dup"}, "b": {"type": "string", "x-mcp-header": "dup"}},
    ):
        with pytest.raises(RegistrationError) as caught:
            make_tool(input_schema={"type": "object", "properties": bad})
        assert caught.value.reason is R.INVALID_HEADER_PARAMETER


# --- declarations, modes and emission --------------------------------------------------------------------------

FORM_C = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
URL_R = InputRequestDeclaration.from_elicitation_url(InputRequirement.REQUIRED)
SAMPLING_R = InputRequestDeclaration.from_sampling(InputRequirement.REQUIRED)
ASK = InputRequest.from_declaration(FORM_C, {"message": "?", "requestedSchema": {"type": "object", "properties": {}}})


def test_required_capabilities_and_declares() -> None:
    registration = make_tool(input_request_declarations=[FORM_C, URL_R, SAMPLING_R])
    assert registration.required_capabilities == (URL_R.capabilities, SAMPLING_R.capabilities)
    missing = ClientCapabilities.from_mapping({"elicitation": {}}).missing(registration.required_capabilities)
    assert missing is not None
    assert canonical_text(missing.to_wire()) == '{"elicitation":{"url":{}},"sampling":{}}'
    assert registration.declares(FORM_C)
    assert not registration.declares(InputRequestDeclaration.from_elicitation_form(InputRequirement.REQUIRED))


def test_duplicate_declaration_type_refused() -> None:
    with pytest.raises(RegistrationError) as caught:
        make_tool(
            input_request_declarations=[
                FORM_C,
                InputRequestDeclaration.from_elicitation_form(InputRequirement.REQUIRED),
            ]
        )
    assert caught.value.reason is R.DUPLICATE_DECLARATION


@pytest.mark.parametrize(
    "make",
    [
        lambda: make_tool(input_request_declarations=["elicitation"]),
        lambda: make_tool(request_state_mode="framework-protected"),
        lambda: make_tool(title=3),
        lambda: PromptArgument("a", required="yes"),  # type: ignore[arg-type]
        lambda: PromptRegistration(name="p", description="d", handler=prompt_handler, arguments=("a",)),  # type: ignore[arg-type]
        lambda: ResourceRegistration(uri="test://r", name="r", description="d", handler=resource_handler,
                                            size=-1),
        lambda: ResourceRegistration(uri="test://r", name="r", description="d", handler=resource_handler,
                                            mime_type=5),  # type: ignore[arg-type]
        lambda: make_tool(meta=[1]),
    ],
)  # fmt: skip
def test_invalid_fields(make: Any) -> None:
    with pytest.raises(RegistrationError) as caught:
        make()
    assert caught.value.reason is R.INVALID_FIELD


def test_check_emission() -> None:
    framework = make_tool(input_request_declarations=[FORM_C], request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED)
    framework.check_emission(InputRequiredResult.with_input_request("a", ASK).framework_request_state({"s": 1}).build())
    framework.check_emission(InputRequiredResult.with_input_request("a", ASK).build())
    with pytest.raises(RegistrationError) as caught:
        framework.check_emission(
            InputRequiredResult.with_input_request("a", ASK).application_request_state("h").build()
        )
    assert caught.value.reason is R.STATE_MODE_MISMATCH
    undeclared = make_tool(input_request_declarations=[URL_R])
    with pytest.raises(RegistrationError) as caught:
        undeclared.check_emission(InputRequiredResult.with_input_request("a", ASK).build())
    assert caught.value.reason is R.UNDECLARED_INPUT_REQUEST
    none_mode = make_tool(input_request_declarations=[FORM_C])
    with pytest.raises(RegistrationError):
        none_mode.check_emission(InputRequiredResult.builder().framework_request_state(1).build())


def test_decorator_equals_builder_form() -> None:
    @tool(
        name="catalog.continue",
        description="Continue.",
        input_schema=OBJECT,
        input_request_declarations=[
            may_request_input(type=InputRequestType.ELICITATION_FORM, requirement=InputRequirement.CONDITIONAL)
        ],
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    )
    def catalog_continue(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        return CallToolResult.from_text("x")

    assert isinstance(catalog_continue, ToolRegistration)
    built = ToolRegistration(
        name="catalog.continue", description="Continue.", input_schema=OBJECT, handler=catalog_continue.handler,
        input_request_declarations=[FORM_C], request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    )  # fmt: skip
    assert built == catalog_continue


# --- the registry ----------------------------------------------------------------------------------------------


def test_order_is_registration_order_every_time() -> None:
    names = ["zeta", "alpha", "mid.point", "Beta", "_x"]
    registry = Registry(*(make_tool(name) for name in names))
    for _ in range(3):
        assert [item.name for item in registry.tools] == names
        assert [item.to_wire()["name"] for item in registry.tools] == [parse(f'"{n}"') for n in names]
    assert registry.find_tool("mid.point") is registry.tools[2]
    assert registry.find_tool("nope") is None


def test_duplicates_refused() -> None:
    tool_t = make_tool("t")
    with pytest.raises(RegistrationError) as caught:
        Registry(tool_t, make_tool("t", description="Another."))
    assert caught.value.reason is R.DUPLICATE_REGISTRATION
    assert caught.value.subject == "t"
    prompt_t = PromptRegistration(name="t", description="A prompt may share a tool's name.", handler=prompt_handler)
    Registry(tool_t, prompt_t)
    with pytest.raises(RegistrationError):
        Registry(prompt_t, PromptRegistration(name="t", description="again", handler=prompt_handler))
    resource_a = ResourceRegistration(uri="test://a", name="a", description="r", handler=resource_handler)
    with pytest.raises(RegistrationError):
        Registry(resource_a, ResourceRegistration(uri="test://a", name="b", description="r", handler=resource_handler))
    with pytest.raises(RegistrationError):
        Registry(resource_a, ResourceRegistration(uri="test://b", name="a", description="r", handler=resource_handler))
    template = ResourceTemplateRegistration(uri_template="test://t/{id}", name="t1", description="t",
                                            handler=resource_handler)  # fmt: skip
    with pytest.raises(RegistrationError):
        Registry(template, ResourceTemplateRegistration(uri_template="test://t/{id}", name="t2", description="t",
                                                        handler=resource_handler))  # fmt: skip
    with pytest.raises(TypeError):
        Registry("tool")  # type: ignore[arg-type]


def test_merge_puts_completions_last_and_refuses_duplicates() -> None:
    @completion(prompt="p", argument="a")
    def complete_a(context: RequestContext, arguments: CompletionArguments) -> CompleteResult:
        return CompleteResult.empty()

    prompt_p = PromptRegistration(prompt_handler, name="p", description="d", arguments=[PromptArgument("a")])
    first = Registry(make_tool("a"))
    merged = Registry.merge(Registry(make_tool("b")), first, Registry(prompt_p))
    assert [t.name for t in merged.tools] == ["b", "a"]
    with pytest.raises(RegistrationError) as caught:
        Registry(complete_a, prompt_p)
    assert caught.value.reason is R.UNKNOWN_COMPLETION_TARGET
    combined = Registry.merge(Registry(make_tool("c")), Registry(prompt_p, complete_a))
    assert combined.completions == (complete_a,)
    assert combined.prompts == (prompt_p,)
    with pytest.raises(RegistrationError) as caught:
        Registry.merge(first, first)
    assert caught.value.reason is R.DUPLICATE_REGISTRATION
    assert Registry.merge() == Registry()


def test_prompts() -> None:
    registration = PromptRegistration(
        name="greet", description="Greets.", handler=prompt_handler, title="Greeting",
        arguments=[PromptArgument("who", "Who to greet", required=True), PromptArgument("style")],
    )  # fmt: skip
    assert serialize(registration.to_wire()) == (
        '{"name":"greet","title":"Greeting","description":"Greets.","arguments":'
        '[{"name":"who","description":"Who to greet","required":true},{"name":"style"}]}'
    )
    bare = PromptRegistration(name="bare", description="No arguments.", handler=prompt_handler)
    assert "arguments" not in bare.to_wire()
    assert dict(registration.check_arguments(parse('{"who":"world"}'))) == {"who": "world"}
    assert dict(bare.check_arguments(None)) == {}
    for bad in ("{}", '{"who":1}', '{"who":"w","extra":"x"}', "[]", '{"style":"s"}'):
        with pytest.raises(ArgumentsError) as caught:
            registration.check_arguments(parse(bad))
        assert caught.value.reason is R.INVALID_PROMPT_ARGUMENTS
    with pytest.raises(RegistrationError):
        PromptRegistration(name="p", description="d", handler=prompt_handler,
                                  arguments=[PromptArgument("a"), PromptArgument("a")])  # fmt: skip
    with pytest.raises(RegistrationError):
        PromptArgument("bad name")
    with pytest.raises(RegistrationError):
        PromptArgument("a", description="  ")


def test_resources_and_templates() -> None:
    registry = build_registry()
    assert [r.uri for r in registry.resources] == ["test://static-text", "test://static-binary"]
    assert serialize(registry.resources[0].to_wire()) == (
        '{"uri":"test://static-text","name":"static-text","description":"A static text resource",'
        '"mimeType":"text/plain"}'
    )
    assert registry.find_resource("test://static-binary") is registry.resources[1]
    assert registry.find_resource("test://nonexistent-resource-for-conformance-testing") is None
    match = registry.match_resource_template("test://template/123/data")
    assert match is not None
    template, arguments = match
    assert arguments.uri == "test://template/123/data"
    assert dict(arguments.variables) == {"id": "123"}
    assert serialize(template.to_wire()) == (
        '{"uriTemplate":"test://template/{id}/data","name":"template","description":"A resource template with an id",'
        '"mimeType":"application/json"}'
    )
    assert registry.match_resource_template("test://template/123/other") is None
    assert registry.match_resource_template("test://template//data") is None
    with pytest.raises(RegistrationError) as caught:
        ResourceRegistration(uri="not a uri", name="x", description="d", handler=resource_handler)
    assert caught.value.reason is R.INVALID_URI


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        ("test://template/{id}/data", "test://template/a%20b/data", {"id": "a b"}),
        ("file:///{+path}", "file:///a/b/c.txt", {"path": "a/b/c.txt"}),
        ("test://{a}/{b}", "test://x/y", {"a": "x", "b": "y"}),
        ("test://{a}/{b}", "test://x/y/z", None),
        ("test://{a}", "test://x?y", None),
        ("test://{a}.json", "test://doc.json", {"a": "doc"}),
    ],
)
def test_uri_template_matching(template: str, uri: str, expected: dict[str, str] | None) -> None:
    assert UriTemplate.parse(template).match(uri) == expected


@pytest.mark.parametrize(
    "template",
    ["test://{}", "test://{a", "test://a}", "test://{?q}", "test://{a}/{a}", "{+uri}", "no-braces", "test://{a b}"],
)
def test_invalid_uri_templates(template: str) -> None:
    with pytest.raises(RegistrationError) as caught:
        UriTemplate.parse(template)
    assert caught.value.reason is R.INVALID_URI_TEMPLATE


def test_uri_template_expand() -> None:
    template = UriTemplate.parse("test://template/{id}/{+rest}")
    assert template.variables == ("id", "rest")
    assert template.expand(id="a b/c", rest="x/y z") == "test://template/a%20b%2Fc/x/y%20z"
    assert template.expand({"id": "1"}, rest="r") == "test://template/1/r"
    assert template == UriTemplate.parse("test://template/{id}/{+rest}")
    assert UriTemplate("test://template/{id}/{+rest}") == template  # the constructor parses, as parse does
    with pytest.raises(RegistrationError):
        UriTemplate("test://template/{id}/{id}")


def test_completions() -> None:
    registry = build_registry()
    found = registry.find_completion("ref/prompt", "test_prompt_with_arguments", "arg1")
    assert found is not None
    result = found.handler(None, CompletionArguments("arg1", "test"))  # type: ignore[arg-type]
    assert isinstance(result, CompleteResult)
    assert serialize(result.to_wire()) == (
        '{"resultType":"complete","completion":{"values":["test","testing","tested"],"total":3,"hasMore":false}}'
    )
    assert registry.find_completion("ref/resource", "test://template/{id}/data", "id") is not None
    assert registry.find_completion("ref/prompt", "test_prompt_with_arguments", "arg9") is None

    def empty(context: RequestContext, arguments: CompletionArguments) -> CompleteResult:
        return CompleteResult.empty()

    with pytest.raises(RegistrationError) as caught:
        Registry(CompletionRegistration(empty, prompt="missing", argument="a"))
    assert caught.value.reason is R.UNKNOWN_COMPLETION_TARGET
    p = PromptRegistration(name="p", description="d", handler=prompt_handler, arguments=[PromptArgument("a")])
    with pytest.raises(RegistrationError):
        Registry(p, CompletionRegistration(empty, prompt="p", argument="b"))
    complete_a = CompletionRegistration(empty, prompt="p", argument="a")
    with pytest.raises(RegistrationError) as caught:
        Registry(p, complete_a, CompletionRegistration(empty, prompt="p", argument="a"))
    assert caught.value.reason is R.DUPLICATE_REGISTRATION
    with pytest.raises(RegistrationError):
        Registry(p, CompletionRegistration(empty, resource_template="test://{x}", argument="x"))
    with pytest.raises(RegistrationError):
        completion(argument="a")(empty)
    with pytest.raises(RegistrationError):
        completion(argument="a", prompt="p", resource_template="test://{a}")(empty)


def test_decorators_for_every_kind() -> None:
    @prompt(name="p", description="d", arguments=[PromptArgument("a", required=True)])
    def p(context: RequestContext, arguments: Mapping[str, str]) -> GetPromptResult:
        return GetPromptResult.of([PromptMessage.user(arguments["a"])])

    @resource(uri="test://r", name="r", description="d", size=12)
    def r(context: RequestContext, arguments: ResourceArguments) -> ReadResourceResult:
        return ReadResourceResult.of([])

    @resource_template(uri_template="test://t/{id}", name="t", description="d")
    def t(context: RequestContext, arguments: ResourceArguments) -> ReadResourceResult:
        return ReadResourceResult.of([])

    @completion(resource_template="test://t/{id}", argument="id")
    def c(context: RequestContext, arguments: CompletionArguments) -> CompleteResult:
        return CompleteResult.of([arguments.value + "1"])

    registry = Registry(p, r, t, c)
    assert registry.prompts == (p,)
    assert registry.resources == (r,)
    assert registry.resource_templates == (t,)
    assert registry.completions == (c,)
    assert serialize(r.to_wire()) == '{"uri":"test://r","name":"r","description":"d","size":12}'


# --- the whole conformance catalogue ---------------------------------------------------------------------------


def test_conformance_catalogue_is_expressible() -> None:
    registry = build_registry()
    tool_names = [item.name for item in registry.tools]
    for required in (
        "test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
        "test_multiple_content_types", "test_error_handling", "test_tool_with_progress", "test_missing_capability",
        "test_streaming_elicitation", "test_logging_tool", "test_trigger_tool_change", "test_trigger_prompt_change",
        "test_input_required_result_elicitation", "test_input_required_result_sampling",
        "test_input_required_result_list_roots", "test_input_required_result_request_state",
        "test_input_required_result_multiple_inputs", "test_input_required_result_multi_round",
        "test_input_required_result_tampered_state", "test_input_required_result_capabilities",
        "json_schema_2020_12_tool",
    ):  # fmt: skip
        assert required in tool_names
    assert [p.name for p in registry.prompts] == [
        "test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource",
        "test_prompt_with_image", "test_input_required_result_prompt",
    ]  # fmt: skip
    for registration in registry.tools:
        wire = registration.to_wire()
        assert wire["description"] != parse('""')
        schema = wire["inputSchema"]
        assert isinstance(schema, JsonObject)
        assert schema["type"] == parse('"object"')
        assert is_valid_name(registration.name)
    for prompt_registration in registry.prompts:
        assert "description" in prompt_registration.to_wire()
    json_tool = registry.find_tool("json_schema_2020_12_tool")
    assert json_tool is not None
    assert serialize(json_tool.to_wire()["inputSchema"]) == JSON_SCHEMA_2020_12
    missing = registry.find_tool("test_missing_capability")
    assert missing is not None
    gap = ClientCapabilities.empty().missing(missing.required_capabilities)
    assert gap is not None
    assert canonical_text(gap.to_wire()) == '{"sampling":{}}'
    header_tool = registry.find_tool("test_custom_header_params")
    assert header_tool is not None
    assert dict(header_tool.header_parameters) == {"Region": "region"}


def test_decimal_values_in_schemas_are_exact() -> None:
    registration = make_tool(
        input_schema={"type": "object", "properties": {"p": {"type": "number", "minimum": Decimal("0.10")}}}
    )
    assert (
        serialize(registration.input_schema) == '{"type":"object","properties":{"p":{"type":"number","minimum":0.10}}}'
    )


def test_async_handlers_register_like_sync_ones() -> None:
    import asyncio
    import inspect

    @tool(name="slow", description="An async tool.", input_schema=OBJECT)
    async def slow(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        await asyncio.sleep(0)
        return CallToolResult.from_text("later")

    outcome = slow.handler(None, JsonObject.empty_instance())  # type: ignore[arg-type]
    assert inspect.isawaitable(outcome)

    async def settle() -> object:
        return await outcome

    result = asyncio.run(settle())
    assert isinstance(result, CallToolResult)
    assert result.content[0].to_wire()["text"] == JsonString.from_value("later")
