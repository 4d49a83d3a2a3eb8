"""``InputResponses``: the verified, keyed answers a retry carried in ``params.inputResponses``.

Every value is in the protocol union (see :mod:`soklet_core.mcp.model.client_results`) and is kept exactly as
received, including keys the operation never asked for. Typed lookup is *conversion, not policy*: it does not
correlate a key with the request that was issued, re-request a missing answer, branch on accept/decline/cancel
or validate accepted content — the application does all of that.

    responses.find("approval")                        # JsonValue | None, exact
    responses.find("approval", ElicitationResponse)   # parsed action and content
    responses.find_content("order", "count", int)     # an accepted field as an exact int, or InputResponseError
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Final, TypeVar, overload

from soklet_core.json import JsonArray, JsonBoolean, JsonNumber, JsonObject, JsonString, JsonValue

from .client_results import ElicitationResponse, matches_input_response
from .errors import InputResponseError, McpModelErrorReason

__all__ = ["InputResponses"]

_T = TypeVar("_T")


def _kind(value: JsonValue) -> str:
    return type(value).__name__.removeprefix("Json").lower()


def _conversion_error(key: str, target: str, value: JsonValue) -> InputResponseError:
    # The key is the application's own lookup key; the value is client input and is described only by its kind.
    return InputResponseError(McpModelErrorReason.CONVERSION_FAILED, key, f"wanted {target}, found {_kind(value)}")


def _convert(key: str, value: JsonValue, target: Any) -> Any:
    if target is str:
        if isinstance(value, JsonString):
            return value.value
    elif target is bool:
        if isinstance(value, JsonBoolean):
            return value.value
    elif target is Decimal:
        if isinstance(value, JsonNumber):
            return value.value
    elif target is int:
        if isinstance(value, JsonNumber):
            numerator, denominator = value.value.as_integer_ratio()
            if denominator == 1:
                return numerator
            raise _conversion_error(key, "int", value)
    elif target == list[str]:
        if isinstance(value, JsonArray) and all(isinstance(item, JsonString) for item in value):
            return [item.value for item in value if isinstance(item, JsonString)]
    elif target is dict:
        if isinstance(value, JsonObject):
            return value.to_python()
    elif target is ElicitationResponse:
        try:
            return ElicitationResponse.from_json(value)
        except InputResponseError:
            raise _conversion_error(key, "ElicitationResponse", value) from None
    elif isinstance(target, type) and issubclass(target, JsonValue):
        if isinstance(value, target):
            return value
    else:
        raise InputResponseError(McpModelErrorReason.UNSUPPORTED_TARGET_TYPE)
    raise _conversion_error(key, getattr(target, "__name__", "list[str]"), value)


_NO_RESPONSES: Final[Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, init=False)
class InputResponses:
    """An immutable map of input-response keys to exact JSON values, each in the protocol union.

    ``InputResponses({"approval": {...}})`` takes a mapping of key to value (``JsonValue`` or plain Python
    data) and raises :class:`InputResponseError` (``invalid-input-response``) if any value is outside the
    protocol union; the message names no key, since keys come from the client. The transport builds one from a
    verified retry; applications build them in tests.
    """

    _responses: Mapping[str, JsonValue]

    def __init__(self, responses: Mapping[str, Any] = _NO_RESPONSES) -> None:
        if isinstance(responses, JsonObject):
            # A JSON object's keys are valid JSON strings and its values JSON already: only the union check is left
            # (the path of every verified retry, through from_wire).
            for value in responses.values():
                if not matches_input_response(value):
                    raise InputResponseError(McpModelErrorReason.INVALID_INPUT_RESPONSE)
            object.__setattr__(self, "_responses", MappingProxyType(dict(responses.items())))
            return
        values: dict[str, JsonValue] = {}
        for key, response in responses.items():
            if not isinstance(key, str):
                raise TypeError("input response keys are str")
            value = JsonValue.from_python(response)
            if not matches_input_response(value):
                raise InputResponseError(McpModelErrorReason.INVALID_INPUT_RESPONSE)
            values[JsonString.from_value(key).value] = value
        object.__setattr__(self, "_responses", MappingProxyType(values))

    @classmethod
    def empty(cls) -> InputResponses:
        """No responses: what an initial (non-retry) request carries."""
        return _EMPTY

    @classmethod
    def from_responses(cls, responses: Mapping[str, Any]) -> InputResponses:
        """The spec's name (``McpInputResponses.fromResponses``) for ``InputResponses(responses)``."""
        return cls(responses)

    @classmethod
    def from_wire(cls, responses: JsonObject) -> InputResponses:
        """Responses from a request's parsed ``params.inputResponses`` object, each checked once against the
        protocol union (its keys are already valid and unique: it is a parsed object). Raises
        :class:`InputResponseError` (``invalid-input-response``) as :meth:`from_responses` does."""
        if not isinstance(responses, JsonObject):
            raise InputResponseError(McpModelErrorReason.INVALID_INPUT_RESPONSE)
        return cls(responses)

    @overload
    def find(self, key: str) -> JsonValue | None: ...
    @overload
    def find(self, key: str, as_type: type[list[str]]) -> list[str] | None: ...
    @overload
    def find(self, key: str, as_type: type[_T]) -> _T | None: ...
    def find(self, key: str, as_type: Any = None) -> Any:
        """The response under ``key`` (``None`` when absent), exact, or converted to ``as_type``.

        Closed conversions: ``str``, ``bool``, ``Decimal`` (exact, scale kept), ``int`` (exact; a non-integer
        such as ``3.5`` is refused, ``3.0`` gives ``3``), ``list[str]``, ``dict`` (plain Python, numbers as
        ``Decimal``), :class:`ElicitationResponse`, and any ``JsonValue`` class (a kind check). A value of
        another kind raises :class:`InputResponseError` ``conversion-failed`` naming the wanted and found kinds;
        an unsupported ``as_type`` raises ``unsupported-target-type``. Nothing else is raised.
        """
        value = self._responses.get(key)
        if value is None or as_type is None:
            return value
        return _convert(key, value, as_type)

    @overload
    def find_content(self, key: str, name: str) -> JsonValue | None: ...
    @overload
    def find_content(self, key: str, name: str, as_type: type[list[str]]) -> list[str] | None: ...
    @overload
    def find_content(self, key: str, name: str, as_type: type[_T]) -> _T | None: ...
    def find_content(self, key: str, name: str, as_type: Any = None) -> Any:
        """The content field ``name`` of the elicitation answer under ``key``, exact or converted to ``as_type``
        (the same closed conversions as :meth:`find`; ``str``, ``bool``, ``Decimal``, ``int`` and ``list[str]``
        are the ones that fit content values).

        ``None`` when the key is absent, the answer carries no content (decline, cancel, an accepted URL
        elicitation) or the field is absent — so branch on the action first (``find(key, ElicitationResponse)``
        or :func:`~soklet_core.mcp.model.elicitation.expect_accept`). A response that is not an elicitation result
        raises ``conversion-failed``.
        """
        response = self.find(key, ElicitationResponse)
        if response is None or response.content is None or name not in response.content:
            return None
        value = response.content[name]
        return value if as_type is None else _convert(name, value, as_type)

    def as_map(self) -> Mapping[str, JsonValue]:
        """The responses as a read-only mapping, in the order received (unexpected keys included)."""
        return self._responses

    def keys(self) -> frozenset[str]:
        """The keys present."""
        return frozenset(self._responses)

    def __contains__(self, key: object) -> bool:
        return key in self._responses

    def __len__(self) -> int:
        return len(self._responses)

    def __iter__(self) -> Iterator[str]:
        return iter(self._responses)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InputResponses) and dict(self._responses) == dict(other._responses)

    def __hash__(self) -> int:
        return hash(frozenset(self._responses.items()))

    def __repr__(self) -> str:
        # Keys and values both come from the client: show only how many there are.
        return f"InputResponses(<{len(self._responses)} responses>)"


_EMPTY: Final = InputResponses()
