"""The protocol union of input responses: what a client may send back for one embedded input request.

A retry's ``params.inputResponses`` maps each key to a bare client result (no ``resultType``):

* ``elicitation/create`` → ``ElicitResult`` ``{action: "accept"|"decline"|"cancel", content?}``. ``content`` is
  allowed only with ``accept`` and maps names to a string, a number (exact ``Decimal``), a boolean, or an array of
  strings. Nulls, nested objects and arrays holding anything but strings are outside the union.
* ``sampling/createMessage`` → ``CreateMessageResult`` ``{role: "assistant", content, model, stopReason?}``, where
  ``content`` is one content block or a non-empty array of them (``text``, ``image``, ``audio``, ``tool_use``,
  ``tool_result``).
* ``roots/list`` → ``ListRootsResult`` ``{roots: [{uri: "file://…", name?}]}``.

Like every MCP ``Result``, a response may carry ``_meta`` (an object) and further members, which are kept and not
interpreted. The check is structural only: it does **not** enforce the form schema that was requested. The
application must still check the expected fields, exact values, lengths and business rules (see
:func:`soklet_core.mcp.model.elicitation.expect_accept`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from soklet_core.json import JsonArray, JsonBoolean, JsonNumber, JsonObject, JsonString, JsonValue

from .errors import InputResponseError, McpModelErrorReason
from .methods import ELICITATION_CREATE, ROOTS_LIST, SAMPLING_CREATE_MESSAGE

__all__ = [
    "ElicitationAction",
    "ElicitationResponse",
    "input_response_methods",
    "is_elicitation_content_value",
    "matches_input_response",
]


class ElicitationAction(enum.Enum):
    """The three answers a user can give to an elicitation. Decline and cancel are normal endings, not errors."""

    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"


_ACTIONS: Final = {action.value: action for action in ElicitationAction}
_SAMPLING_BLOCK_TYPES: Final = frozenset({"text", "image", "audio", "tool_use", "tool_result"})


def is_elicitation_content_value(value: JsonValue) -> bool:
    """Whether ``value`` may appear in elicitation ``content``: string, number, boolean, or array of strings."""
    if isinstance(value, JsonString | JsonNumber | JsonBoolean):
        return True
    return isinstance(value, JsonArray) and all(isinstance(item, JsonString) for item in value)


def _optional_object(response: JsonObject, name: str) -> bool:
    return name not in response or isinstance(response[name], JsonObject)


def _is_elicitation_content(action: ElicitationAction, content: JsonValue | None) -> bool:
    """Whether ``content`` may come with ``action``: none, or for ``accept`` an object of content values."""
    if content is None:
        return True
    if action is not ElicitationAction.ACCEPT or not isinstance(content, JsonObject):
        return False
    return all(is_elicitation_content_value(item) for item in content.values())


def _is_elicit_result(response: JsonObject) -> bool:
    action = response.get("action")
    if not isinstance(action, JsonString) or action.value not in _ACTIONS or not _optional_object(response, "_meta"):
        return False
    return _is_elicitation_content(_ACTIONS[action.value], response.get("content"))


def _is_string(block: JsonObject, *names: str) -> bool:
    return all(isinstance(block.get(name), JsonString) for name in names)


def _is_sampling_block(block: JsonValue) -> bool:
    if not isinstance(block, JsonObject):
        return False
    kind = block.get("type")
    if not isinstance(kind, JsonString) or kind.value not in _SAMPLING_BLOCK_TYPES:
        return False
    if kind.value == "text":
        return _is_string(block, "text")
    if kind.value in ("image", "audio"):
        return _is_string(block, "data", "mimeType")
    if kind.value == "tool_use":
        return _is_string(block, "id", "name") and isinstance(block.get("input"), JsonObject)
    return _is_string(block, "toolUseId") and isinstance(block.get("content"), JsonArray)


def _is_create_message_result(response: JsonObject) -> bool:
    role, model, content = response.get("role"), response.get("model"), response.get("content")
    if not (isinstance(role, JsonString) and role.value == "assistant" and isinstance(model, JsonString)):
        return False
    if "stopReason" in response and not isinstance(response["stopReason"], JsonString):
        return False
    if not _optional_object(response, "_meta"):
        return False
    if isinstance(content, JsonArray):
        return len(content) > 0 and all(_is_sampling_block(block) for block in content)
    return content is not None and _is_sampling_block(content)


def _is_root(root: JsonValue) -> bool:
    if not isinstance(root, JsonObject):
        return False
    uri = root.get("uri")
    if not (isinstance(uri, JsonString) and uri.value.startswith("file://")):
        return False
    return ("name" not in root or isinstance(root["name"], JsonString)) and _optional_object(root, "_meta")


def _is_list_roots_result(response: JsonObject) -> bool:
    roots = response.get("roots")
    return (
        isinstance(roots, JsonArray) and all(_is_root(root) for root in roots) and _optional_object(response, "_meta")
    )


def input_response_methods(response: JsonValue) -> frozenset[str]:
    """The input-request methods whose result shape ``response`` has (empty when it is outside the union)."""
    if not isinstance(response, JsonObject):
        return frozenset()
    found = set()
    if _is_elicit_result(response):
        found.add(ELICITATION_CREATE)
    if _is_create_message_result(response):
        found.add(SAMPLING_CREATE_MESSAGE)
    if _is_list_roots_result(response):
        found.add(ROOTS_LIST)
    return frozenset(found)


def matches_input_response(response: JsonValue, method: str | None = None) -> bool:
    """Whether ``response`` is in the protocol union — or, given ``method``, is a result of that input request.

    ``method`` must be one of ``elicitation/create``, ``sampling/createMessage`` or ``roots/list``; any other
    name matches nothing.
    """
    if not isinstance(response, JsonObject):
        return False
    if method is None:  # the cheapest and by far the commonest shape first; stop at the first that fits
        return _is_elicit_result(response) or _is_create_message_result(response) or _is_list_roots_result(response)
    check = _SHAPE_OF_METHOD.get(method)
    return check is not None and check(response)


_SHAPE_OF_METHOD: Final = {
    ELICITATION_CREATE: _is_elicit_result,
    SAMPLING_CREATE_MESSAGE: _is_create_message_result,
    ROOTS_LIST: _is_list_roots_result,
}


@dataclass(frozen=True, slots=True)
class ElicitationResponse:
    """A parsed ``ElicitResult``: the ``action`` and, for an accepted form, its exact ``content``.

    ``ElicitationResponse(action, content)``, or :meth:`from_json` for the result a client sent. ``content`` is
    ``None`` when the client sent none (always so for decline and cancel, and for an accepted URL-mode
    elicitation); a content with another action, or holding a value outside the union, raises
    :class:`InputResponseError`.
    """

    action: ElicitationAction
    content: JsonObject | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.action, ElicitationAction):
            raise TypeError("action must be an ElicitationAction")
        if not _is_elicitation_content(self.action, self.content):
            raise InputResponseError(McpModelErrorReason.INVALID_INPUT_RESPONSE, detail="not an elicitation result")

    @classmethod
    def from_json(cls, response: JsonValue) -> ElicitationResponse:
        """Parse an elicitation result; raises :class:`InputResponseError` outside the elicitation shape."""
        if not isinstance(response, JsonObject) or not _is_elicit_result(response):
            raise InputResponseError(McpModelErrorReason.INVALID_INPUT_RESPONSE, detail="not an elicitation result")
        action = response["action"]
        assert isinstance(action, JsonString)
        content = response.get("content")
        assert content is None or isinstance(content, JsonObject)
        return cls(_ACTIONS[action.value], content)

    @property
    def accepted(self) -> bool:
        """Whether the user accepted."""
        return self.action is ElicitationAction.ACCEPT

    @property
    def declined(self) -> bool:
        """Whether the user explicitly declined."""
        return self.action is ElicitationAction.DECLINE

    @property
    def cancelled(self) -> bool:
        """Whether the user dismissed the request without choosing."""
        return self.action is ElicitationAction.CANCEL

    def __repr__(self) -> str:
        # Content is user input: show its size, not its values.
        fields = "no content" if self.content is None else f"{len(self.content)} content fields"
        return f"ElicitationResponse({self.action.value}, {fields})"
