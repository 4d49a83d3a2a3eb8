"""Complete results: every to_wire carries resultType, content blocks have their wire shapes."""

from __future__ import annotations

import pytest

from soklet_core.json import JsonObject, parse, serialize
from soklet_core.mcp import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    McpModelErrorReason,
    PromptMessage,
    ReadResourceResult,
    TextContent,
)
from soklet_core.mcp.model import (
    MAX_COMPLETION_VALUES,
    AudioContent,
    BlobResourceContents,
    CacheHint,
    CacheScope,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    ResultError,
    Role,
    TextResourceContents,
)

META = JsonObject.from_mapping({"io.modelcontextprotocol/serverInfo": {"name": "soklet", "version": "0.1.0"}})


def test_call_tool_results() -> None:
    assert serialize(CallToolResult.from_text("Approved.").to_wire()) == (
        '{"resultType":"complete","content":[{"type":"text","text":"Approved."}]}'
    )
    assert serialize(CallToolResult.error_text("No.").to_wire()) == (
        '{"resultType":"complete","content":[{"type":"text","text":"No."}],"isError":true}'
    )
    structured = CallToolResult.of([TextContent("{}")], structured_content=JsonObject.from_mapping({"n": 1})).to_wire(
        meta=META
    )
    assert list(structured) == ["resultType", "content", "structuredContent", "_meta"]
    assert serialize(CallToolResult.of([]).to_wire()) == '{"resultType":"complete","content":[]}'


def test_content_blocks() -> None:
    image = ImageContent.from_bytes(b"\x89PNG", "image/png")
    assert serialize(image.to_wire()) == '{"type":"image","data":"iVBORw==","mimeType":"image/png"}'
    audio = AudioContent("UklGRg==", "audio/wav", annotations=JsonObject.from_mapping({"priority": 1}))
    assert serialize(audio.to_wire()) == (
        '{"type":"audio","data":"UklGRg==","mimeType":"audio/wav","annotations":{"priority":1}}'
    )
    embedded = EmbeddedResource(TextResourceContents("test://embedded-resource", "text", "text/plain"))
    assert serialize(embedded.to_wire()) == (
        '{"type":"resource","resource":{"uri":"test://embedded-resource","mimeType":"text/plain","text":"text"}}'
    )
    blob = EmbeddedResource(BlobResourceContents.from_bytes("test://b", b"\x00\x01"))
    assert serialize(blob.to_wire()) == '{"type":"resource","resource":{"uri":"test://b","blob":"AAE="}}'
    link = ResourceLink("test://static-text", "static-text", description="d", mime_type="text/plain")
    assert serialize(link.to_wire()) == (
        '{"type":"resource_link","uri":"test://static-text","name":"static-text","description":"d",'
        '"mimeType":"text/plain"}'
    )
    text = TextContent("hi", meta=JsonObject.from_mapping({"k": "v"}))
    assert serialize(text.to_wire()) == '{"type":"text","text":"hi","_meta":{"k":"v"}}'


@pytest.mark.parametrize(
    "make",
    [
        lambda: TextContent(5),  # type: ignore[arg-type]
        lambda: ImageContent("not base64!", "image/png"),
        lambda: ImageContent("", "image/png"),
        lambda: ImageContent("AA==", "png"),
        lambda: AudioContent("AA==", ""),
        lambda: TextResourceContents("no scheme", "x"),
        lambda: TextResourceContents("test://x", "x", "text plain"),
        lambda: BlobResourceContents("test://x", "@@@"),
        lambda: EmbeddedResource("test://x"),  # type: ignore[arg-type]
        lambda: ResourceLink("test://x", ""),
        lambda: TextContent("x", annotations={"a": 1}),  # type: ignore[arg-type]
        lambda: CallToolResult.of(["text"]),  # type: ignore[list-item]
        lambda: CallToolResult((TextContent("x"),), is_error=1),  # type: ignore[arg-type]
        lambda: PromptMessage("user", TextContent("x")),  # type: ignore[arg-type]
        lambda: PromptMessage(Role.USER, "x"),  # type: ignore[arg-type]
        lambda: GetPromptResult.of([]),
        lambda: ReadResourceResult.of([TextContent("x")]),  # type: ignore[list-item]
        lambda: CompleteResult.of([1]),  # type: ignore[list-item]
        lambda: CompleteResult.of([], total=True),
        lambda: CompleteResult.of([], has_more="no"),  # type: ignore[arg-type]
    ],
)
def test_invalid_content_refused(make: object) -> None:
    with pytest.raises(ResultError) as caught:
        make()  # type: ignore[operator]
    assert caught.value.reason is McpModelErrorReason.INVALID_CONTENT


def test_prompt_results() -> None:
    result = GetPromptResult.of(
        [PromptMessage.user("Hello"), PromptMessage.assistant(ImageContent("AA==", "image/png"))],
        description="Greeting",
    )
    assert serialize(result.to_wire()) == (
        '{"resultType":"complete","description":"Greeting","messages":[{"role":"user","content":{"type":"text",'
        '"text":"Hello"}},{"role":"assistant","content":{"type":"image","data":"AA==","mimeType":"image/png"}}]}'
    )


def test_read_resource_results_carry_cache_hints() -> None:
    contents = [TextResourceContents("test://static-text", "body", "text/plain")]
    default = ReadResourceResult.of(contents).to_wire()
    assert serialize(default) == (
        '{"resultType":"complete","contents":[{"uri":"test://static-text","mimeType":"text/plain","text":"body"}],'
        '"ttlMs":0,"cacheScope":"private"}'
    )
    public = ReadResourceResult.of(contents, cache_hint=CacheHint(300000, CacheScope.PUBLIC))
    assert public.to_wire()["ttlMs"] == parse("300000")
    assert public.to_wire()["cacheScope"] == parse('"public"')
    retry = public.to_wire(cache_hint=CacheHint.uncached(), meta=META)
    assert retry["ttlMs"] == parse("0")
    assert retry["cacheScope"] == parse('"private"')
    assert retry["_meta"] == META
    for bad in (-1, True, 1.5):
        with pytest.raises(ResultError) as caught:
            CacheHint(bad, CacheScope.PUBLIC)  # type: ignore[arg-type]
        assert caught.value.reason is McpModelErrorReason.INVALID_CACHE_HINT
    with pytest.raises(ResultError):
        CacheHint(0, "public")  # type: ignore[arg-type]


def test_completion_results() -> None:
    assert serialize(CompleteResult.empty().to_wire()) == '{"resultType":"complete","completion":{"values":[]}}'
    assert len(CompleteResult.of(["x"] * MAX_COMPLETION_VALUES).values) == 100
    with pytest.raises(ResultError) as caught:
        CompleteResult.of(["x"] * (MAX_COMPLETION_VALUES + 1))
    assert caught.value.reason is McpModelErrorReason.TOO_MANY_COMPLETION_VALUES
    many = CompleteResult.first_of(str(n) for n in range(250))
    assert len(many.values) == 100
    assert many.total == 250
    assert many.has_more is True
    assert serialize(CompleteResult.of(["a"], total=1, has_more=False).to_wire(meta=META)).startswith(
        '{"resultType":"complete","completion":{"values":["a"],"total":1,"hasMore":false},"_meta":'
    )


def test_results_are_frozen() -> None:
    result = CallToolResult.from_text("x")
    with pytest.raises(AttributeError):
        result.is_error = True  # type: ignore[misc]
    assert result.content == (TextContent("x"),)
    assert CallToolResult.of(iter([TextContent("a")])).content == (TextContent("a"),)
