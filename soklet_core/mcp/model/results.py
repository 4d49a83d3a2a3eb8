"""Complete results: what a tool call, prompt get, resource read or completion returns when it is done.

Each ``to_wire()`` writes ``"resultType":"complete"`` (every 2026-07-28 result carries a ``resultType``)::

    CallToolResult.from_text("Approved.").to_wire()
    # {"resultType":"complete","content":[{"type":"text","text":"Approved."}]}
    CallToolResult.error_text("Not allowed.").to_wire()      # ... "isError":true
    GetPromptResult.of([PromptMessage.user("Hello")]).to_wire()
    ReadResourceResult.of([TextResourceContents(uri="test://a", text="…", mime_type="text/plain")]).to_wire()
    CompleteResult.of(["alpha", "beta"]).to_wire()

``CompleteResult`` is the wire's name for the ``completion/complete`` result. The spec's
``McpCompleteResult.fromToolText(text)`` is :meth:`CallToolResult.from_text` here.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Final, Self, TypeAlias

from soklet_core.json import JsonArray, JsonObject, JsonValue

from ._wire import Members, WireValue, encode_bytes, to_object
from .errors import McpModelErrorReason, ResultError
from .uri_templates import is_absolute_uri

__all__ = [
    "COMPLETE_RESULT_TYPE",
    "MAX_COMPLETION_VALUES",
    "AudioContent",
    "BlobResourceContents",
    "CacheHint",
    "CacheScope",
    "CallToolResult",
    "CompleteResult",
    "ContentBlock",
    "EmbeddedResource",
    "GetPromptResult",
    "ImageContent",
    "PromptMessage",
    "ReadResourceResult",
    "ResourceContents",
    "ResourceLink",
    "Role",
    "TextContent",
    "TextResourceContents",
]

#: The ``resultType`` of every complete result.
COMPLETE_RESULT_TYPE: Final = "complete"
#: The most values one ``completion/complete`` result may hold (wire schema).
MAX_COMPLETION_VALUES: Final = 100

_MIME: Final = re.compile(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(?:\s*;[\x20-\x7e]*)?")


def _invalid(detail: str) -> ResultError:
    return ResultError(McpModelErrorReason.INVALID_CONTENT, detail=detail)


def _check_text(value: object, what: str) -> None:
    if not isinstance(value, str):
        raise _invalid(f"{what} must be a str")


def _check_mime(value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not _MIME.fullmatch(value):
        raise _invalid("mime type must look like type/subtype")


def _check_base64(value: object, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise _invalid(f"{what} must be non-empty base64 text")
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _invalid(f"{what} must be standard base64") from None


def _check_uri(value: object) -> None:
    if not is_absolute_uri(value):
        raise _invalid("uri must be an absolute URI")


def _check_object(value: object, what: str) -> None:
    if value is not None and not isinstance(value, JsonObject):
        raise _invalid(f"{what} must be a JsonObject")


def _finish(members: Iterable[tuple[str, JsonValue | str | bool | int | None]]) -> JsonObject:
    out = JsonObject.builder()
    for name, value in members:
        if value is not None:
            out.put(name, value)
    return out.build()


# --- content blocks --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextContent:
    """``{"type":"text","text":…}``."""

    text: str
    annotations: JsonObject | None = None
    meta: JsonObject | None = None

    def __post_init__(self) -> None:
        _check_text(self.text, "text")
        _check_object(self.annotations, "annotations")
        _check_object(self.meta, "meta")

    def to_wire(self) -> JsonObject:
        """The wire content block."""
        return to_object(self._members())

    def _members(self) -> Members:
        return [("type", "text"), ("text", self.text), ("annotations", self.annotations), ("_meta", self.meta)]


@dataclass(frozen=True, slots=True)
class _EncodedMedia:
    """Base64 media content: image and audio blocks share their shape and differ only in ``type``."""

    _kind: ClassVar[str]

    data: str
    mime_type: str
    annotations: JsonObject | None = None
    meta: JsonObject | None = None

    def __post_init__(self) -> None:
        _check_base64(self.data, "data")
        _check_mime(self.mime_type, optional=False)
        _check_object(self.annotations, "annotations")
        _check_object(self.meta, "meta")

    @classmethod
    def from_bytes(cls, data: bytes, mime_type: str) -> Self:
        """A block from raw bytes (base64-encoded here)."""
        return cls(base64.b64encode(data).decode("ascii"), mime_type)

    def to_wire(self) -> JsonObject:
        """The wire content block."""
        return _finish(
            [
                ("type", self._kind),
                ("data", self.data),
                ("mimeType", self.mime_type),
                ("annotations", self.annotations),
                ("_meta", self.meta),
            ]
        )


@dataclass(frozen=True, slots=True)
class ImageContent(_EncodedMedia):
    """``{"type":"image","data":<base64>,"mimeType":…}``."""

    _kind: ClassVar[str] = "image"


@dataclass(frozen=True, slots=True)
class AudioContent(_EncodedMedia):
    """``{"type":"audio","data":<base64>,"mimeType":…}`` (e.g. ``audio/wav``)."""

    _kind: ClassVar[str] = "audio"


@dataclass(frozen=True, slots=True)
class TextResourceContents:
    """``{"uri":…,"mimeType"?:…,"text":…}``: a text resource's contents."""

    uri: str
    text: str
    mime_type: str | None = None
    meta: JsonObject | None = None

    def __post_init__(self) -> None:
        _check_uri(self.uri)
        _check_text(self.text, "text")
        _check_mime(self.mime_type, optional=True)
        _check_object(self.meta, "meta")

    def to_wire(self) -> JsonObject:
        """The wire resource contents."""
        return _finish([("uri", self.uri), ("mimeType", self.mime_type), ("text", self.text), ("_meta", self.meta)])


@dataclass(frozen=True, slots=True)
class BlobResourceContents:
    """``{"uri":…,"mimeType"?:…,"blob":<base64>}``: a binary resource's contents."""

    uri: str
    blob: str
    mime_type: str | None = None
    meta: JsonObject | None = None

    def __post_init__(self) -> None:
        _check_uri(self.uri)
        _check_base64(self.blob, "blob")
        _check_mime(self.mime_type, optional=True)
        _check_object(self.meta, "meta")

    @classmethod
    def from_bytes(cls, uri: str, data: bytes, mime_type: str | None = None) -> BlobResourceContents:
        """Binary contents from raw bytes (base64-encoded here)."""
        return cls(uri, base64.b64encode(data).decode("ascii"), mime_type)

    def to_wire(self) -> JsonObject:
        """The wire resource contents."""
        return _finish([("uri", self.uri), ("mimeType", self.mime_type), ("blob", self.blob), ("_meta", self.meta)])


#: The contents of a resource read or an embedded resource.
ResourceContents: TypeAlias = TextResourceContents | BlobResourceContents


@dataclass(frozen=True, slots=True)
class EmbeddedResource:
    """``{"type":"resource","resource":{uri, mimeType?, text|blob}}``."""

    resource: ResourceContents
    annotations: JsonObject | None = None
    meta: JsonObject | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.resource, TextResourceContents | BlobResourceContents):
            raise _invalid("resource must be TextResourceContents or BlobResourceContents")
        _check_object(self.annotations, "annotations")
        _check_object(self.meta, "meta")

    def to_wire(self) -> JsonObject:
        """The wire content block."""
        return _finish(
            [
                ("type", "resource"),
                ("resource", self.resource.to_wire()),
                ("annotations", self.annotations),
                ("_meta", self.meta),
            ]
        )


@dataclass(frozen=True, slots=True)
class ResourceLink:
    """``{"type":"resource_link","uri":…,"name":…}``: a reference the client may read later."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: JsonObject | None = None
    meta: JsonObject | None = None

    def __post_init__(self) -> None:
        _check_uri(self.uri)
        if not isinstance(self.name, str) or not self.name:
            raise _invalid("name must be a non-empty str")
        for value, what in ((self.title, "title"), (self.description, "description")):
            if value is not None:
                _check_text(value, what)
        _check_mime(self.mime_type, optional=True)
        _check_object(self.annotations, "annotations")
        _check_object(self.meta, "meta")

    def to_wire(self) -> JsonObject:
        """The wire content block."""
        return _finish(
            [
                ("type", "resource_link"),
                ("uri", self.uri),
                ("name", self.name),
                ("title", self.title),
                ("description", self.description),
                ("mimeType", self.mime_type),
                ("annotations", self.annotations),
                ("_meta", self.meta),
            ]
        )


#: Any content block of a tool result or prompt message.
ContentBlock: TypeAlias = TextContent | ImageContent | AudioContent | EmbeddedResource | ResourceLink
_CONTENT_TYPES: Final = (TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink)


def _content_tuple(content: Iterable[ContentBlock]) -> tuple[ContentBlock, ...]:
    items = tuple(content)
    if not all(isinstance(item, _CONTENT_TYPES) for item in items):
        raise _invalid("content items must be content blocks")
    return items


def _meta_member(meta: JsonObject | None) -> list[tuple[str, JsonValue | None]]:
    _check_object(meta, "meta")
    return [("_meta", meta)]


# --- tool results ----------------------------------------------------------------------------------------------


def _block_members(block: ContentBlock) -> WireValue:
    # Text, by far the commonest block, is written from its members; the others from their value model.
    return block._members() if type(block) is TextContent else block.to_wire()


@dataclass(frozen=True, slots=True)
class CallToolResult:
    """A complete ``tools/call`` result. A tool failure is ``is_error=True`` with explanatory content — a result,
    not a JSON-RPC error. Build it with :meth:`of`, :meth:`from_text` or :meth:`error_text`."""

    content: tuple[ContentBlock, ...]
    is_error: bool = False
    structured_content: JsonObject | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", _content_tuple(self.content))
        if not isinstance(self.is_error, bool):
            raise _invalid("is_error must be a bool")
        _check_object(self.structured_content, "structured_content")

    @classmethod
    def of(
        cls, content: Iterable[ContentBlock], *, is_error: bool = False, structured_content: JsonObject | None = None
    ) -> CallToolResult:
        """A result with ``content`` (any iterable of content blocks)."""
        return cls(tuple(content), is_error, structured_content)

    @classmethod
    def from_text(cls, text: str) -> CallToolResult:
        """A successful result with one text block (the spec's ``McpCompleteResult.fromToolText``)."""
        return cls((TextContent(text),))

    @classmethod
    def error_text(cls, text: str) -> CallToolResult:
        """A tool-level failure (``isError: true``) with one text block."""
        return cls((TextContent(text),), True)

    def to_wire(self, *, meta: JsonObject | None = None) -> JsonObject:
        """``{"resultType":"complete","content":[…],"structuredContent"?,"isError"?:true,"_meta"?}``."""
        return to_object([*self._members(), *_meta_member(meta)])

    def encode(self) -> bytes:
        """The wire result without ``_meta``, as compact UTF-8 JSON (``serialize(self.to_wire())``, encoded)."""
        return encode_bytes(self._members())

    def _members(self) -> Members:
        return [
            ("resultType", COMPLETE_RESULT_TYPE),
            ("content", tuple(_block_members(item) for item in self.content)),
            ("structuredContent", self.structured_content),
            ("isError", True if self.is_error else None),
        ]


# --- prompt results --------------------------------------------------------------------------------------------


class Role(enum.Enum):
    """Who speaks a prompt message."""

    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True, slots=True)
class PromptMessage:
    """One prompt message: a role and one content block."""

    role: Role
    content: ContentBlock

    def __post_init__(self) -> None:
        if not isinstance(self.role, Role):
            raise _invalid("role must be a Role")
        if not isinstance(self.content, _CONTENT_TYPES):
            raise _invalid("content must be a content block")

    @classmethod
    def user(cls, content: ContentBlock | str) -> PromptMessage:
        """A user message (a ``str`` becomes a text block)."""
        return cls(Role.USER, TextContent(content) if isinstance(content, str) else content)

    @classmethod
    def assistant(cls, content: ContentBlock | str) -> PromptMessage:
        """An assistant message (a ``str`` becomes a text block)."""
        return cls(Role.ASSISTANT, TextContent(content) if isinstance(content, str) else content)

    def to_wire(self) -> JsonObject:
        """``{"role":…,"content":{…}}``."""
        return _finish([("role", self.role.value), ("content", self.content.to_wire())])


@dataclass(frozen=True, slots=True)
class GetPromptResult:
    """A complete ``prompts/get`` result: the messages (non-empty) and an optional description."""

    messages: tuple[PromptMessage, ...]
    description: str | None = None

    def __post_init__(self) -> None:
        messages = tuple(self.messages)
        if not messages or not all(isinstance(message, PromptMessage) for message in messages):
            raise _invalid("messages must be a non-empty sequence of PromptMessage")
        object.__setattr__(self, "messages", messages)
        if self.description is not None:
            _check_text(self.description, "description")

    @classmethod
    def of(cls, messages: Iterable[PromptMessage], *, description: str | None = None) -> GetPromptResult:
        """A result with ``messages``."""
        return cls(tuple(messages), description)

    def to_wire(self, *, meta: JsonObject | None = None) -> JsonObject:
        """``{"resultType":"complete","description"?,"messages":[…],"_meta"?}``."""
        return _finish(
            [
                ("resultType", COMPLETE_RESULT_TYPE),
                ("description", self.description),
                ("messages", JsonArray.of(*(message.to_wire() for message in self.messages))),
                *_meta_member(meta),
            ]
        )


# --- resource results ------------------------------------------------------------------------------------------


class CacheScope(enum.Enum):
    """Who may reuse a cached result."""

    PUBLIC = "public"
    PRIVATE = "private"


@dataclass(frozen=True, slots=True)
class CacheHint:
    """``ttlMs`` (an integer ≥ 0) and ``cacheScope``, required on ``resources/read`` and list results."""

    ttl_ms: int
    scope: CacheScope

    def __post_init__(self) -> None:
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms < 0:
            raise ResultError(McpModelErrorReason.INVALID_CACHE_HINT)
        if not isinstance(self.scope, CacheScope):
            raise ResultError(McpModelErrorReason.INVALID_CACHE_HINT)

    @classmethod
    def uncached(cls) -> CacheHint:
        """``ttlMs: 0``, ``private``: do not reuse. Retries carrying responses or state must use this."""
        return cls(0, CacheScope.PRIVATE)


@dataclass(frozen=True, slots=True)
class ReadResourceResult:
    """A complete ``resources/read`` result: the contents and a cache hint (default :meth:`CacheHint.uncached`)."""

    contents: tuple[ResourceContents, ...]
    cache_hint: CacheHint = CacheHint(0, CacheScope.PRIVATE)

    def __post_init__(self) -> None:
        contents = tuple(self.contents)
        if not all(isinstance(item, TextResourceContents | BlobResourceContents) for item in contents):
            raise _invalid("contents must be TextResourceContents or BlobResourceContents")
        object.__setattr__(self, "contents", contents)
        if not isinstance(self.cache_hint, CacheHint):
            raise ResultError(McpModelErrorReason.INVALID_CACHE_HINT)

    @classmethod
    def of(cls, contents: Iterable[ResourceContents], *, cache_hint: CacheHint | None = None) -> ReadResourceResult:
        """A result with ``contents``."""
        return cls(tuple(contents), cache_hint or CacheHint.uncached())

    def to_wire(self, *, cache_hint: CacheHint | None = None, meta: JsonObject | None = None) -> JsonObject:
        """``{"resultType":"complete","contents":[…],"ttlMs":…,"cacheScope":…,"_meta"?}``.

        ``cache_hint`` overrides the result's own (the transport passes :meth:`CacheHint.uncached` for a retry).
        """
        hint = cache_hint or self.cache_hint
        return _finish(
            [
                ("resultType", COMPLETE_RESULT_TYPE),
                ("contents", JsonArray.of(*(item.to_wire() for item in self.contents))),
                ("ttlMs", hint.ttl_ms),
                ("cacheScope", hint.scope.value),
                *_meta_member(meta),
            ]
        )


# --- completion results ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompleteResult:
    """A ``completion/complete`` result: at most 100 ``values``, optional ``total`` and ``has_more``."""

    values: tuple[str, ...]
    total: int | None = None
    has_more: bool | None = None

    def __post_init__(self) -> None:
        values = tuple(self.values)
        if not all(isinstance(value, str) for value in values):
            raise _invalid("completion values must be str")
        if len(values) > MAX_COMPLETION_VALUES:
            raise ResultError(McpModelErrorReason.TOO_MANY_COMPLETION_VALUES)
        object.__setattr__(self, "values", values)
        if self.total is not None and (isinstance(self.total, bool) or not isinstance(self.total, int)):
            raise _invalid("total must be an int")
        if self.has_more is not None and not isinstance(self.has_more, bool):
            raise _invalid("has_more must be a bool")

    @classmethod
    def of(cls, values: Iterable[str], *, total: int | None = None, has_more: bool | None = None) -> CompleteResult:
        """A result with ``values`` (at most 100)."""
        return cls(tuple(values), total, has_more)

    @classmethod
    def first_of(cls, candidates: Iterable[str]) -> CompleteResult:
        """The first 100 of ``candidates``, with ``total`` and ``has_more`` set from the whole list."""
        every = tuple(candidates)
        return cls(every[:MAX_COMPLETION_VALUES], len(every), len(every) > MAX_COMPLETION_VALUES)

    @classmethod
    def empty(cls) -> CompleteResult:
        """No suggestions."""
        return cls(())

    def to_wire(self, *, meta: JsonObject | None = None) -> JsonObject:
        """``{"resultType":"complete","completion":{"values":[…],"total"?,"hasMore"?},"_meta"?}``."""
        completion = _finish(
            [("values", JsonArray.of(*self.values)), ("total", self.total), ("hasMore", self.has_more)]
        )
        return _finish([("resultType", COMPLETE_RESULT_TYPE), ("completion", completion), *_meta_member(meta)])
