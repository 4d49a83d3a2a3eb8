"""The conformance fixture set: every fixture of the MCP conformance catalogue (reference §2) for ``soklet serve
--fixtures conformance``.

Registration order matters to the suite: ``test_simple_text`` is the first tool (``http-header-validation`` calls
the first listed tool with no arguments) and ``test://static-text`` the first resource (``caching`` reads the
first listed resource). The MRTR fixtures that carry state use FRAMEWORK_PROTECTED state, so a tampered state is
refused by the protection layer before the handler runs.

The tasks extension's fixtures (catalogue §4) come after the other tools: ``greet`` (never a task),
``slow_compute`` (task support optional), ``failing_job`` (required; completes with a tool error),
``protocol_error_job`` (ends ``failed``), ``confirm_delete`` and ``multi_input`` (ask through the task snapshot) and
``test_tool_with_task`` (one MRTR round, then a task). They need a server with a durable store. Their steps sleep
with ``await asyncio.sleep`` in short slices, so a cancelled task stops at once.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Mapping
from typing import TypeVar

from soklet_core.json import JsonNumber, JsonObject, JsonString, JsonValue, serialize
from soklet_core.mcp import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    InputRequest,
    InputRequestDeclaration,
    InputRequiredResult,
    InputRequirement,
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
)
from soklet_core.mcp.model import (
    AudioContent,
    BlobResourceContents,
    CompletionArguments,
    EmbeddedResource,
    ImageContent,
    PromptArgument,
    Registration,
    ResourceArguments,
    TaskFailed,
    TaskInputRequired,
    TextResourceContents,
    boolean_field,
    expect_accept,
    text_field,
)
from soklet_core.mcp.server._jsonrpc import INTERNAL_ERROR

#: A 1×1 PNG.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
#: An empty 16-bit mono WAV file.
WAV_HEADER = (
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00D\xac\x00\x00\x88X\x01\x00\x02\x00\x10\x00"
    b"data\x00\x00\x00\x00"
)

#: Byte-for-byte the schema of the conformance suite's json-schema-2020-12 scenario (as one compact line).
JSON_SCHEMA_2020_12 = (
    '{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":'
    '{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},'
    '"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":'
    '{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},'
    '"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":'
    '{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},'
    '"additionalProperties":false}'
)

#: The input schema of a tool without arguments.
NO_ARGUMENTS = '{"type":"object","properties":{}}'

#: Declarations used by the MRTR fixtures.
FORM = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
SAMPLING = InputRequestDeclaration.from_sampling(InputRequirement.CONDITIONAL)
ROOTS = InputRequestDeclaration.from_roots_list(InputRequirement.CONDITIONAL)
SAMPLING_REQUIRED = InputRequestDeclaration.from_sampling(InputRequirement.REQUIRED)

#: The form asking for a name.
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def ask_name() -> InputRequest:
    """A form elicitation asking for a name."""
    return form_request(FORM, "What is your name?", NAME_SCHEMA)


def ask_sampling(prompt_text: str, max_tokens: int = 100) -> InputRequest:
    """A sampling request with one user message."""
    return InputRequest.from_declaration(
        SAMPLING,
        {"messages": [{"role": "user", "content": {"type": "text", "text": prompt_text}}], "maxTokens": max_tokens},
    )


def ask_roots() -> InputRequest:
    """A ``roots/list`` request."""
    return InputRequest.from_declaration(ROOTS, {})


#: The bounds of the task fixtures' arguments: ``slow_compute`` sleeps at most this long, and a name, label or file
#: name is at most this many characters.
MAX_SLOW_COMPUTE_SECONDS = 300
MAX_ARGUMENT_CHARS = 256
#: The longest single sleep of a task step: between slices it looks at the cooperative cancel flag too.
SLEEP_SLICE_SECONDS = 0.25
#: How long ``failing_job`` works before it reports its tool error.
FAILING_JOB_SECONDS = 1.0

#: Input schemas of the task fixtures (the bounds above, written as the client sees them).
GREET_SCHEMA = '{"type":"object","properties":{"name":{"type":"string","maxLength":256}},"required":["name"]}'
SLOW_COMPUTE_SCHEMA = (
    '{"type":"object","properties":{"seconds":{"type":"number","minimum":0,"maximum":300},'
    '"label":{"type":"string","maxLength":256}},"required":["seconds"]}'
)
CONFIRM_DELETE_SCHEMA = (
    '{"type":"object","properties":{"filename":{"type":"string","maxLength":256}},"required":["filename"]}'
)
#: The form asking to confirm.
CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


def text_argument(arguments: JsonObject, name: str) -> str | None:
    """The string argument ``name`` if present and at most :data:`MAX_ARGUMENT_CHARS` long, else ``None``."""
    value = arguments.get(name)
    if isinstance(value, JsonString) and len(value.value) <= MAX_ARGUMENT_CHARS:
        return value.value
    return None


def seconds_argument(arguments: JsonObject) -> float | None:
    """``slow_compute``'s ``seconds``: a number within 0..:data:`MAX_SLOW_COMPUTE_SECONDS`, else ``None``."""
    value = arguments.get("seconds")
    if isinstance(value, JsonNumber) and 0 <= value.value <= MAX_SLOW_COMPUTE_SECONDS:
        return float(value.value)
    return None


async def work_for(context: TaskContext, seconds: float) -> bool:
    """Sleep ``seconds`` in short slices; False as soon as the task is cancelled (a cancelled step may also simply
    be stopped at its ``await``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (remaining := deadline - loop.time()) > 0:
        if context.cancel_requested():
            return False
        await asyncio.sleep(min(remaining, SLEEP_SLICE_SECONDS))
    return not context.cancel_requested()


def confirmed(response: JsonValue | None) -> bool:
    """Whether an elicitation answer accepted with ``confirm: true`` (other fields the client adds are ignored)."""
    outcome = expect_accept(response, {"confirm": boolean_field()}, allow_extra=True)
    return outcome.ok and outcome.value("confirm") is True


def task_fixtures() -> list[Registration]:
    """The tasks extension's fixtures (catalogue §4), in the order they are listed."""

    @tool(name="greet", description="Greets by name; never a task.", input_schema=GREET_SCHEMA)
    def greet(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        name = text_argument(arguments, "name")
        if name is None:
            return CallToolResult.error_text("greet needs a name of at most 256 characters")
        return CallToolResult.from_text(f"Hello, {name}!")

    @task_tool(
        name="slow_compute",
        description="Works for `seconds` seconds, then answers; a task when the client declares the extension.",
        input_schema=SLOW_COMPUTE_SCHEMA,
    )
    async def slow_compute(context: TaskContext) -> CallToolResult:
        seconds = seconds_argument(context.arguments)
        if seconds is None:
            return CallToolResult.error_text("seconds must be a number from 0 to 300")
        label = text_argument(context.arguments, "label") or "slow_compute"
        if not await work_for(context, seconds):
            return CallToolResult.error_text(f"{label}: cancelled")
        return CallToolResult.from_text(f"{label}: computed after {seconds:g} s")

    @task_tool(
        name="failing_job",
        description="A task (required) that reports a tool error after about a second.",
        input_schema=NO_ARGUMENTS,
        task_support=TaskSupport.REQUIRED,
    )
    async def failing_job(context: TaskContext) -> CallToolResult:
        await work_for(context, FAILING_JOB_SECONDS)
        return CallToolResult.error_text("The job failed: this fixture always reports a tool error")

    @task_tool(
        name="protocol_error_job",
        description="A task that ends failed with a JSON-RPC error.",
        input_schema=NO_ARGUMENTS,
    )
    def protocol_error_job(context: TaskContext) -> TaskFailed:
        return TaskFailed(INTERNAL_ERROR, "Internal error: this fixture always fails at the protocol level")

    @task_tool(
        name="confirm_delete",
        description="A task that asks to confirm through the task, then answers.",
        input_schema=CONFIRM_DELETE_SCHEMA,
        input_request_declarations=[FORM],
    )
    def confirm_delete(context: TaskContext) -> CallToolResult | TaskInputRequired:
        filename = text_argument(context.arguments, "filename")
        if filename is None:
            return CallToolResult.error_text("filename must be a string of at most 256 characters")
        if context.round == 1:
            ask = form_request(FORM, f"Delete {filename}?", CONFIRM_SCHEMA)
            return TaskInputRequired({"confirm": ask}, status_message="Waiting for confirmation")
        if confirmed(context.input_responses.find("confirm")):
            return CallToolResult.from_text(f"Deleted {filename}")
        return CallToolResult.from_text(f"Kept {filename}")

    @task_tool(
        name="multi_input",
        description="A task that asks two things at once, answered together or one at a time.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[FORM],
    )
    def multi_input(context: TaskContext) -> CallToolResult | TaskInputRequired:
        if context.round == 1:
            return TaskInputRequired(
                {"user_name": ask_name(), "confirm": form_request(FORM, "Proceed?", CONFIRM_SCHEMA)},
                status_message="Waiting for two answers",
            )
        outcome = expect_accept(
            context.input_responses.find("user_name"), {"name": text_field(min_length=1)}, allow_extra=True
        )
        name = outcome.value("name") if outcome.ok else None
        answer = "confirmed" if confirmed(context.input_responses.find("confirm")) else "not confirmed"
        return CallToolResult.from_text(f"name: {name or '(none)'}; {answer}")

    def greet_in_task(context: TaskContext) -> CallToolResult:
        name = context.state.get("name") if isinstance(context.state, JsonObject) else None
        return CallToolResult.from_text(f"Hello, {name.value if isinstance(name, JsonString) else 'stranger'}!")

    @tool(
        name="test_tool_with_task",
        description="Asks for the user's name in an MRTR round, then finishes in a task.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[FORM],
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
        task_support=TaskSupport.REQUIRED,
        task_step=greet_in_task,
    )
    def tool_with_task(context: RequestContext, arguments: JsonObject) -> InputRequiredResult | StartTask:
        # The sealed state proves round 1 happened; the name is the answer to the key round 1 asked.
        outcome = expect_accept(
            context.input_responses.find("user_name"), {"name": text_field(min_length=1, max_length=256)}
        )
        if context.framework_request_state is None or not outcome.ok:
            return InputRequiredResult.with_input_request("user_name", ask_name()).framework_request_state(1).build()
        return StartTask(state=outcome.content, status_message="Greeting")  # exactly {"name": ...}

    return [greet, slow_compute, failing_job, protocol_error_job, confirm_delete, multi_input, tool_with_task]


_R = TypeVar("_R", bound=Registration)

#: The gap between the progress fixture's notifications, like the reference server's.
PROGRESS_INTERVAL_SECONDS = 0.05


def build_registry(*, tasks: bool = True) -> Registry:
    """The conformance fixtures, in the order the suite needs. The task fixtures need a server with a durable store;
    ``tasks=False`` leaves them out, for a server without one."""
    registrations: list[Registration] = []

    def add(registration: _R) -> _R:
        registrations.append(registration)
        return registration

    @add
    @tool(name="test_simple_text", description="Returns a simple text response.", input_schema=NO_ARGUMENTS)
    def simple_text(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        return CallToolResult.from_text("This is a simple text response for testing.")

    @add
    @tool(name="test_image_content", description="Returns an image.", input_schema=NO_ARGUMENTS)
    def image_content(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        return CallToolResult.of([ImageContent.from_bytes(PNG_1X1, "image/png")])

    @add
    @tool(name="test_audio_content", description="Returns audio.", input_schema=NO_ARGUMENTS)
    def audio_content(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        return CallToolResult.of([AudioContent.from_bytes(WAV_HEADER, "audio/wav")])

    @add
    @tool(name="test_embedded_resource", description="Returns an embedded resource.", input_schema=NO_ARGUMENTS)
    def embedded_resource(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        contents = TextResourceContents(
            uri="test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain"
        )
        return CallToolResult.of([EmbeddedResource(contents)])

    @add
    @tool(name="test_multiple_content_types", description="Returns mixed content.", input_schema=NO_ARGUMENTS)
    def mixed(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        resource_contents = TextResourceContents(
            uri="test://mixed-content-resource", text='{"test":"data","value":123}', mime_type="application/json"
        )
        return CallToolResult.of(
            [
                TextContent("Multiple content types test:"),
                ImageContent.from_bytes(PNG_1X1, "image/png"),
                EmbeddedResource(resource_contents),
            ]
        )

    @add
    @tool(name="test_error_handling", description="Always returns a tool error.", input_schema=NO_ARGUMENTS)
    def error_handling(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        return CallToolResult.error_text("This tool intentionally returns an error for testing")

    @add
    @tool(name="test_tool_with_progress", description="Reports progress.", input_schema=NO_ARGUMENTS)
    def with_progress(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        for step in (0, 50, 100):
            if context.invocation.cancelled:
                break
            context.invocation.report_progress(step, total=100, message=f"step {step}")
            time.sleep(PROGRESS_INTERVAL_SECONDS)
        return CallToolResult.from_text("Progress complete")

    @add
    @tool(
        name="test_missing_capability",
        description="Needs the client's sampling capability.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[SAMPLING_REQUIRED],
    )
    def missing_capability(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        return CallToolResult.from_text("The client declared sampling.")

    for name in ("test_streaming_elicitation", "test_logging_tool", "test_trigger_tool_change",
                 "test_trigger_prompt_change"):  # fmt: skip
        add(
            tool(name=name, description=f"Diagnostic fixture {name}.", input_schema=NO_ARGUMENTS)(
                lambda context, arguments: CallToolResult.from_text("done")
            )
        )

    @add
    @tool(
        name="test_input_required_result_elicitation",
        description="Asks for the user's name, then greets.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[FORM],
    )
    def mrtr_elicitation(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        outcome = expect_accept(context.input_responses.find("user_name"), {"name": text_field(min_length=1)})
        if not outcome.ok:
            return InputRequiredResult.with_input_request("user_name", ask_name()).build()
        return CallToolResult.from_text(f"Hello, {outcome.value('name')}!")

    @add
    @tool(
        name="test_input_required_result_sampling",
        description="Asks the client's model a question.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[SAMPLING],
    )
    def mrtr_sampling(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        if context.input_responses.find("capital") is None:
            return InputRequiredResult.with_input_request("capital", ask_sampling("Capital of France?")).build()
        return CallToolResult.from_text("sampled")

    @add
    @tool(
        name="test_input_required_result_list_roots",
        description="Asks for the client's roots.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[ROOTS],
    )
    def mrtr_roots(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        if context.input_responses.find("roots") is None:
            return InputRequiredResult.with_input_request("roots", ask_roots()).build()
        return CallToolResult.from_text("roots received")

    @add
    @tool(
        name="test_input_required_result_request_state",
        description="Asks for confirmation and carries state.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[FORM],
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    )
    def mrtr_state(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        if context.framework_request_state is None:
            confirm = form_request(FORM, "Confirm?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
            return InputRequiredResult.with_input_request("confirm", confirm).framework_request_state("r1").build()
        return CallToolResult.from_text("state-ok")

    @add
    @tool(
        name="test_input_required_result_multiple_inputs",
        description="Asks three things at once.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[FORM, SAMPLING, ROOTS],
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    )
    def mrtr_multiple(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        keys = {"user_name", "greeting", "client_roots"}
        if not keys <= context.input_responses.keys():
            return (
                InputRequiredResult.with_input_request("user_name", ask_name())
                .with_input_request("greeting", ask_sampling("Say hello", 50))
                .with_input_request("client_roots", ask_roots())
                .framework_request_state({"round": 1})
                .build()
            )
        return CallToolResult.from_text("all answered")

    @add
    @tool(
        name="test_input_required_result_multi_round",
        description="Asks twice before completing.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[FORM],
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    )
    def mrtr_rounds(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        state = context.framework_request_state
        step = 0 if state is None else int(state["step"].value)  # type: ignore[index]
        if step < 2:
            key = f"step{step + 1}"
            return (
                InputRequiredResult.with_input_request(key, ask_name())
                .framework_request_state({"step": step + 1})
                .build()
            )
        return CallToolResult.from_text("three rounds done")

    @add
    @tool(
        name="test_input_required_result_tampered_state",
        description="Carries integrity-protected state.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[FORM],
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    )
    def mrtr_tampered(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        if context.framework_request_state is None:
            return InputRequiredResult.with_input_request("user_name", ask_name()).framework_request_state("v").build()
        return CallToolResult.from_text("state verified")

    @add
    @tool(
        name="test_input_required_result_capabilities",
        description="Only asks what the client declared.",
        input_schema=NO_ARGUMENTS,
        input_request_declarations=[FORM, SAMPLING],
    )
    def mrtr_capabilities(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        if context.input_responses.find("answer") is not None:
            return CallToolResult.from_text("answered")
        if context.client_capabilities.elicitation_form:
            return InputRequiredResult.with_input_request("answer", ask_name()).build()
        return InputRequiredResult.with_input_request("answer", ask_sampling("Name?")).build()

    @add
    @tool(
        name="json_schema_2020_12_tool",
        description="Tool with JSON Schema 2020-12 features",
        input_schema=JSON_SCHEMA_2020_12,
    )
    def json_schema_tool(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        return CallToolResult.from_text("ok")

    @add
    @tool(
        name="test_custom_header_params",
        description="Has an x-mcp-header parameter.",
        input_schema='{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}',
    )
    def custom_header(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        return CallToolResult.from_text("header ok")

    for registration in task_fixtures() if tasks else []:
        add(registration)

    # --- prompts ---

    @add
    @prompt(name="test_simple_prompt", description="A simple prompt.")
    def simple_prompt(context: RequestContext, arguments: Mapping[str, str]) -> GetPromptResult:
        return GetPromptResult.of([PromptMessage.user("This is a simple prompt for testing.")])

    @add
    @prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two arguments.",
        arguments=[
            PromptArgument("arg1", "First test argument", required=True),
            PromptArgument("arg2", "Second test argument", required=True),
        ],
    )
    def prompt_with_arguments(context: RequestContext, arguments: Mapping[str, str]) -> GetPromptResult:
        text = f"Prompt with arguments: arg1='{arguments['arg1']}', arg2='{arguments['arg2']}'"
        return GetPromptResult.of([PromptMessage.user(text)])

    @add
    @prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt embedding a resource.",
        arguments=[PromptArgument("resourceUri", "URI of the resource to embed", required=True)],
    )
    def prompt_with_resource(context: RequestContext, arguments: Mapping[str, str]) -> GetPromptResult:
        contents = TextResourceContents(
            uri=arguments["resourceUri"], text="Embedded resource content for testing.", mime_type="text/plain"
        )
        return GetPromptResult.of(
            [
                PromptMessage.user(EmbeddedResource(contents)),
                PromptMessage.user("Please process the embedded resource above."),
            ]
        )

    @add
    @prompt(name="test_prompt_with_image", description="A prompt with an image.")
    def prompt_with_image(context: RequestContext, arguments: Mapping[str, str]) -> GetPromptResult:
        return GetPromptResult.of(
            [
                PromptMessage.user(ImageContent.from_bytes(PNG_1X1, "image/png")),
                PromptMessage.user("Please analyze the image above."),
            ]
        )

    @add
    @prompt(
        name="test_input_required_result_prompt",
        description="Asks for context before producing messages.",
        input_request_declarations=[FORM],
    )
    def prompt_mrtr(context: RequestContext, arguments: Mapping[str, str]) -> GetPromptResult | InputRequiredResult:
        outcome = expect_accept(context.input_responses.find("user_context"), {"context": text_field()})
        if not outcome.ok:
            ask = form_request(FORM, "What context?", {"type": "object", "properties": {"context": {"type": "string"}}})
            return InputRequiredResult.with_input_request("user_context", ask).build()
        return GetPromptResult.of([PromptMessage.user(f"Context: {outcome.value('context')}")])

    # --- resources, templates, completion ---

    @add
    @resource(
        uri="test://static-text", name="static-text", description="A static text resource", mime_type="text/plain"
    )
    def static_text(context: RequestContext, arguments: ResourceArguments) -> ReadResourceResult:
        text = "This is the content of the static text resource."
        return ReadResourceResult.of([TextResourceContents(uri=arguments.uri, text=text, mime_type="text/plain")])

    @add
    @resource(uri="test://static-binary", name="static-binary", description="A static binary resource",
              mime_type="image/png")  # fmt: skip
    def static_binary(context: RequestContext, arguments: ResourceArguments) -> ReadResourceResult:
        return ReadResourceResult.of([BlobResourceContents.from_bytes(arguments.uri, PNG_1X1, "image/png")])

    @add
    @resource_template(
        uri_template="test://template/{id}/data",
        name="template",
        description="A resource template with an id",
        mime_type="application/json",
    )
    def template(context: RequestContext, arguments: ResourceArguments) -> ReadResourceResult:
        identifier = arguments.variables["id"]
        body = JsonObject.builder().put("id", identifier).put("templateTest", True)
        body.put("data", f"Data for ID: {identifier}")
        return ReadResourceResult.of(
            [TextResourceContents(uri=arguments.uri, text=serialize(body.build()), mime_type="application/json")]
        )

    @add
    @completion(prompt="test_prompt_with_arguments", argument="arg1")
    def complete_arg1(context: RequestContext, arguments: CompletionArguments) -> CompleteResult:
        return CompleteResult.first_of(v for v in ("test", "testing", "tested") if v.startswith(arguments.value))

    @add
    @completion(resource_template="test://template/{id}/data", argument="id")
    def complete_id(context: RequestContext, arguments: CompletionArguments) -> CompleteResult:
        return CompleteResult.of(["123", "456"])

    return Registry(*registrations)
