"""The response path's encoding against the value model: ``encode()`` writes exactly ``serialize(to_wire())``.

Results that the server encodes straight from their members (``CallToolResult``, ``InputRequiredResult``) are
compared, on hypothesis-generated texts, keys, numbers and structured content, with the value model the rest of
soklet reads (``to_wire()``) as ``soklet_core.json.serialize`` writes it.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soklet_core.json import JsonObject, JsonValue, parse, serialize
from soklet_core.mcp import (
    CallToolResult,
    InputRequest,
    InputRequestDeclaration,
    InputRequiredResult,
    InputRequirement,
    TextContent,
)
from soklet_core.mcp.model import ImageContent, InputRequiredResultError

FORM = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
ROOTS = InputRequestDeclaration.from_roots_list(InputRequirement.CONDITIONAL)

# Any text a str can hold that JSON can carry: lone surrogates are excluded (the model refuses them).
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
NUMBER = st.sampled_from(
    ["0", "-0", "1.50", "1e400", "-2.5E-7", "123456789012345678901234567890123456789012345678901234567890"]
)
LEAF = st.one_of(
    TEXT.map(lambda t: serialize(JsonValue.from_python(t))), NUMBER, st.sampled_from(["true", "false", "null"])
)
JSON_TEXT = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        st.dictionaries(TEXT, inner, max_size=4).map(
            lambda members: (
                "{" + ",".join(serialize(JsonValue.from_python(k)) + ":" + v for k, v in members.items()) + "}"
            )
        ),
    ),
    max_leaves=12,
)
OBJECT_TEXT = st.dictionaries(TEXT, JSON_TEXT, max_size=4).map(
    lambda members: "{" + ",".join(serialize(JsonValue.from_python(k)) + ":" + v for k, v in members.items()) + "}"
)


def _object(text: str) -> JsonObject:
    value = parse(text)
    assert isinstance(value, JsonObject)
    return value


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(TEXT, max_size=3),
    structured=st.none() | OBJECT_TEXT,
    annotations=st.none() | OBJECT_TEXT,
    is_error=st.booleans(),
    image=st.booleans(),
)
def test_call_tool_result_encoding_is_the_serialized_model(
    texts: list[str], structured: str | None, annotations: str | None, is_error: bool, image: bool
) -> None:
    blocks: list[TextContent | ImageContent] = [
        TextContent(text, None if annotations is None else _object(annotations)) for text in texts
    ]
    if image:
        blocks.append(ImageContent.from_bytes(b"\x89PNG", "image/png"))
    result = CallToolResult.of(
        blocks, is_error=is_error, structured_content=None if structured is None else _object(structured)
    )
    assert result.encode() == serialize(result.to_wire()).encode("utf-8")


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(TEXT.filter(bool), min_size=0, max_size=3, unique=True),
    message=TEXT,
    state=st.one_of(st.none(), st.just("framework"), TEXT.map(lambda t: "app:" + t)),
)
def test_input_required_result_encoding_is_the_serialized_model(
    keys: list[str], message: str, state: str | None
) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    builder = InputRequiredResult.builder()
    for index, key in enumerate(keys):
        request = (
            InputRequest.from_declaration(FORM, {"message": message, "mode": "form", "requestedSchema": schema})
            if index % 2 == 0
            else InputRequest.from_declaration(ROOTS)
        )
        builder.with_input_request(key, request)
    sealed = None
    if state == "framework":
        builder.framework_request_state({"n": 1})
        sealed = "AAAA-_token"
    elif state is not None:
        builder.application_request_state(state)
    if not keys and state is None:
        builder.application_request_state("app:only")
    result = builder.build()
    assert result.encode(sealed) == serialize(result.to_wire(sealed)).encode("utf-8")


def test_a_sealed_state_must_match_the_framework_state_when_encoding() -> None:
    result = InputRequiredResult.builder().application_request_state("app").build()
    with pytest.raises(InputRequiredResultError):
        result.encode("sealed-token")
