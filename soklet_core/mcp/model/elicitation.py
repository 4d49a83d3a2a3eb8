"""Elicitation helpers that are easy to use right: building form and URL requests, and checking the answer.

Building::

    FORM = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
    ask = form_request(FORM, "Ship to which city?", {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 64}},
        "required": ["city"],
    })                                   # flat primitive shape and DEFAULT_FORM_POLICY checked here

    URL = InputRequestDeclaration.from_elicitation_url(InputRequirement.CONDITIONAL)
    handle = mint_url_handle()           # store handle -> (user, purpose, expiry) server-side
    go = url_request(URL, "Approve in your browser.", url_with_handle("https://approve.example.com/a", handle))

Checking the retry (the spec: re-request a missing key; decline and cancel are normal endings; for accept allow
only the expected field set and validate each exact value and length)::

    outcome = expect_accept(context.input_responses.find("city"), {"city": text_field(min_length=1, max_length=64)})
    match outcome.kind:
        case AcceptOutcomeKind.ACCEPTED: city = outcome.value("city")
        case AcceptOutcomeKind.MISSING: ...        # ask again
        case AcceptOutcomeKind.DECLINED | AcceptOutcomeKind.CANCELLED: ...   # a normal ending
        case _: ...                                # refuse: outcome.field_name says which expected field failed

Authorization is still the application's to perform again before any side effect.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final, Protocol, runtime_checkable

from soklet_core.json import JsonArray, JsonBoolean, JsonNumber, JsonObject, JsonString, JsonValue

from .client_requests import InputRequest, InputRequestDeclaration, InputRequestType
from .client_results import ElicitationAction, ElicitationResponse, matches_input_response
from .errors import InputRequestError, McpModelErrorReason
from .form_policy import DEFAULT_FORM_POLICY, FormSchemaPolicy
from .methods import ELICITATION_CREATE

__all__ = [
    "AcceptOutcome",
    "AcceptOutcomeKind",
    "FieldRule",
    "boolean_field",
    "choice_field",
    "exact_field",
    "expect_accept",
    "form_request",
    "number_field",
    "string_list_field",
    "text_field",
    "url_request",
]


def form_request(
    declaration: InputRequestDeclaration,
    message: str,
    requested_schema: JsonValue | Mapping[str, Any],
    *,
    policy: FormSchemaPolicy = DEFAULT_FORM_POLICY,
) -> InputRequest:
    """A form-mode ``elicitation/create`` request of ``declaration`` (which must be a form declaration).

    ``requested_schema`` must have the flat primitive shape and pass ``policy``: a secret-bearing field raises
    :class:`~soklet_core.mcp.model.errors.FormPolicyViolation` before any request exists.
    """
    if declaration.input_request_type is not InputRequestType.ELICITATION_FORM:
        raise InputRequestError(McpModelErrorReason.DECLARATION_MISMATCH, detail="declared form mode")
    params = (
        JsonObject.builder()
        .put("mode", "form")
        .put("message", message)
        .put("requestedSchema", JsonValue.from_python(requested_schema))
        .build()
    )
    return InputRequest.from_declaration(declaration, params, form_policy=policy)


def url_request(
    declaration: InputRequestDeclaration, message: str, url: str, *, development: bool = False
) -> InputRequest:
    """A URL-mode ``elicitation/create`` request of ``declaration`` (which must be a URL declaration).

    ``url`` must pass :func:`~soklet_core.mcp.model.url_policy.check_elicitation_url`: HTTPS (plain HTTP to a
    loopback host only with ``development=True``), no userinfo, no query, no fragment. Carry the workflow in an
    opaque path handle (:func:`~soklet_core.mcp.model.url_policy.url_with_handle`).
    """
    if declaration.input_request_type is not InputRequestType.ELICITATION_URL:
        raise InputRequestError(McpModelErrorReason.DECLARATION_MISMATCH, detail="declared url mode")
    params = JsonObject.builder().put("mode", "url").put("message", message).put("url", url).build()
    return InputRequest.from_declaration(declaration, params, development=development)


# --- checking the answer ---------------------------------------------------------------------------------------


class AcceptOutcomeKind(enum.Enum):
    """What :func:`expect_accept` found. Only ``ACCEPTED`` carries content."""

    ACCEPTED = "accepted"
    #: No response under the key: re-request it (the protocol's advice), do not fail.
    MISSING = "missing"
    #: The value is not an elicitation result at all.
    MALFORMED = "malformed"
    #: The user declined: a normal ending.
    DECLINED = "declined"
    #: The user dismissed the request: a normal ending.
    CANCELLED = "cancelled"
    #: Accepted content holds fields that were not asked for.
    UNEXPECTED_FIELDS = "unexpected-fields"
    #: A required field is absent.
    MISSING_FIELD = "missing-field"
    #: A field has the wrong JSON kind (e.g. a number where text was expected).
    WRONG_TYPE = "wrong-type"
    #: A field's length (characters, or items of a list) is out of bounds.
    WRONG_LENGTH = "wrong-length"
    #: A field's value is not the exact value, choice, pattern or range expected.
    WRONG_VALUE = "wrong-value"


@runtime_checkable
class FieldRule(Protocol):
    """How one expected field is checked. Build rules with :func:`text_field`, :func:`number_field`,
    :func:`boolean_field`, :func:`exact_field`, :func:`choice_field` or :func:`string_list_field`, or implement
    this protocol."""

    @property
    def required(self) -> bool:
        """Whether the field must be present."""
        ...

    def check(self, value: JsonValue) -> AcceptOutcomeKind | None:
        """``None`` if ``value`` is acceptable, else ``WRONG_TYPE``, ``WRONG_LENGTH`` or ``WRONG_VALUE``."""
        ...


def _within(count: int, minimum: int, maximum: int | None) -> bool:
    return count >= minimum and (maximum is None or count <= maximum)


@dataclass(frozen=True, slots=True)
class _TextRule:
    min_length: int
    max_length: int | None
    pattern: re.Pattern[str] | None
    required: bool

    def check(self, value: JsonValue) -> AcceptOutcomeKind | None:
        if not isinstance(value, JsonString):
            return AcceptOutcomeKind.WRONG_TYPE
        if not _within(len(value.value), self.min_length, self.max_length):
            return AcceptOutcomeKind.WRONG_LENGTH
        if self.pattern is not None and not self.pattern.fullmatch(value.value):
            return AcceptOutcomeKind.WRONG_VALUE
        return None


@dataclass(frozen=True, slots=True)
class _NumberRule:
    minimum: Decimal | None
    maximum: Decimal | None
    integer: bool
    required: bool

    def check(self, value: JsonValue) -> AcceptOutcomeKind | None:
        if not isinstance(value, JsonNumber):
            return AcceptOutcomeKind.WRONG_TYPE
        number = value.value
        if self.integer and number.as_integer_ratio()[1] != 1:
            return AcceptOutcomeKind.WRONG_TYPE
        if (self.minimum is not None and number < self.minimum) or (self.maximum is not None and number > self.maximum):
            return AcceptOutcomeKind.WRONG_VALUE
        return None


@dataclass(frozen=True, slots=True)
class _BooleanRule:
    required: bool

    def check(self, value: JsonValue) -> AcceptOutcomeKind | None:
        return None if isinstance(value, JsonBoolean) else AcceptOutcomeKind.WRONG_TYPE


@dataclass(frozen=True, slots=True)
class _ExactRule:
    expected: JsonValue
    required: bool

    def check(self, value: JsonValue) -> AcceptOutcomeKind | None:
        if type(value) is not type(self.expected):
            return AcceptOutcomeKind.WRONG_TYPE
        return None if value == self.expected else AcceptOutcomeKind.WRONG_VALUE


@dataclass(frozen=True, slots=True)
class _ChoiceRule:
    choices: frozenset[str]
    required: bool

    def check(self, value: JsonValue) -> AcceptOutcomeKind | None:
        if not isinstance(value, JsonString):
            return AcceptOutcomeKind.WRONG_TYPE
        return None if value.value in self.choices else AcceptOutcomeKind.WRONG_VALUE


@dataclass(frozen=True, slots=True)
class _StringListRule:
    min_items: int
    max_items: int | None
    choices: frozenset[str] | None
    max_item_length: int | None
    unique: bool
    required: bool

    def check(self, value: JsonValue) -> AcceptOutcomeKind | None:
        if not isinstance(value, JsonArray) or not all(isinstance(item, JsonString) for item in value):
            return AcceptOutcomeKind.WRONG_TYPE
        items = [item.value for item in value if isinstance(item, JsonString)]
        if not _within(len(items), self.min_items, self.max_items):
            return AcceptOutcomeKind.WRONG_LENGTH
        if self.max_item_length is not None and any(len(item) > self.max_item_length for item in items):
            return AcceptOutcomeKind.WRONG_LENGTH
        if self.choices is not None and not set(items).issubset(self.choices):
            return AcceptOutcomeKind.WRONG_VALUE
        if self.unique and len(set(items)) != len(items):
            return AcceptOutcomeKind.WRONG_VALUE
        return None


def _count(value: int | None, what: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"{what} must be an int >= 0")


def text_field(
    *, min_length: int = 0, max_length: int | None = None, pattern: str | None = None, required: bool = True
) -> FieldRule:
    """A string of ``min_length``..``max_length`` characters (code points), optionally fully matching
    ``pattern`` (a regular expression the application wrote)."""
    _count(min_length, "min_length")
    _count(max_length, "max_length")
    return _TextRule(min_length, max_length, None if pattern is None else re.compile(pattern), required)


def number_field(
    *,
    minimum: Decimal | int | None = None,
    maximum: Decimal | int | None = None,
    integer: bool = False,
    required: bool = True,
) -> FieldRule:
    """A number (compared exactly as ``Decimal``), optionally an integer, within ``minimum``..``maximum``."""
    low = None if minimum is None else Decimal(minimum)
    high = None if maximum is None else Decimal(maximum)
    return _NumberRule(low, high, integer, required)


def boolean_field(*, required: bool = True) -> FieldRule:
    """A boolean."""
    return _BooleanRule(required)


def exact_field(value: Any, *, required: bool = True) -> FieldRule:
    """Exactly ``value`` (JSON equality: ``1`` equals ``1.0``; a boolean never equals a number)."""
    return _ExactRule(JsonValue.from_python(value), required)


def choice_field(*choices: str, required: bool = True) -> FieldRule:
    """One of ``choices``."""
    return _ChoiceRule(frozenset(choices), required)


def string_list_field(
    *,
    min_items: int = 0,
    max_items: int | None = None,
    choices: Iterable[str] | None = None,
    max_item_length: int | None = None,
    unique: bool = True,
    required: bool = True,
) -> FieldRule:
    """An array of strings (a multi-select), ``min_items``..``max_items`` long, each item among ``choices`` if
    given and at most ``max_item_length`` characters; items distinct unless ``unique=False``."""
    for value, what in ((min_items, "min_items"), (max_items, "max_items"), (max_item_length, "max_item_length")):
        _count(value, what)
    allowed = None if choices is None else frozenset(choices)
    return _StringListRule(min_items, max_items, allowed, max_item_length, unique, required)


@dataclass(frozen=True, slots=True)
class AcceptOutcome:
    """The result of :func:`expect_accept`.

    ``content`` (``ACCEPTED`` only) holds exactly the expected fields that were present, values exact. ``field_name``
    names the expected field a ``MISSING_FIELD``/``WRONG_*`` outcome is about. ``unexpected_fields`` lists the
    names a client added (client input: kept out of ``repr``).
    """

    kind: AcceptOutcomeKind
    content: JsonObject | None = field(default=None, repr=False)
    field_name: str | None = None
    unexpected_fields: tuple[str, ...] = field(default=(), repr=False)

    @property
    def ok(self) -> bool:
        """Whether the answer was accepted and passed every rule."""
        return self.kind is AcceptOutcomeKind.ACCEPTED

    @property
    def is_normal_ending(self) -> bool:
        """Whether the user declined or cancelled: end the operation normally, not with an error."""
        return self.kind in (AcceptOutcomeKind.DECLINED, AcceptOutcomeKind.CANCELLED)

    def value(self, name: str) -> str | Decimal | bool | tuple[str, ...] | None:
        """The accepted value of ``name`` as plain Python (``str``, exact ``Decimal``, ``bool`` or a tuple of
        strings), or ``None`` if absent or not accepted."""
        item = self.content.get(name) if self.content is not None else None
        if item is None:
            return None
        if isinstance(item, JsonArray):
            return tuple(element.value for element in item if isinstance(element, JsonString))
        assert isinstance(item, JsonString | JsonNumber | JsonBoolean)
        return item.value


_NOT_ACCEPTED: Final = {
    ElicitationAction.DECLINE: AcceptOutcomeKind.DECLINED,
    ElicitationAction.CANCEL: AcceptOutcomeKind.CANCELLED,
}


def expect_accept(
    response: JsonValue | None, fields: Mapping[str, FieldRule] | None = None, *, allow_extra: bool = False
) -> AcceptOutcome:
    """Check an elicitation answer against the expected field set and rules.

    ``response`` is the value under the request's key (``InputResponses.find(key)``), ``None`` when the client
    sent none. Outcomes, in the order checked: ``MISSING`` (no response), ``MALFORMED`` (not an elicitation
    result), ``DECLINED``, ``CANCELLED``, ``UNEXPECTED_FIELDS`` (content beyond ``fields``, unless
    ``allow_extra``), then per expected field in order ``MISSING_FIELD`` or the rule's ``WRONG_TYPE`` /
    ``WRONG_LENGTH`` / ``WRONG_VALUE``; otherwise ``ACCEPTED`` with only the expected fields as ``content``.
    An accepted URL-mode answer has no content and passes with ``fields`` empty.
    """
    expected = dict(fields or {})
    if response is None:
        return AcceptOutcome(AcceptOutcomeKind.MISSING)
    if not matches_input_response(response, ELICITATION_CREATE):
        return AcceptOutcome(AcceptOutcomeKind.MALFORMED)
    answer = ElicitationResponse.from_json(response)
    if answer.action is not ElicitationAction.ACCEPT:
        return AcceptOutcome(_NOT_ACCEPTED[answer.action])
    content = answer.content if answer.content is not None else JsonObject.empty_instance()
    unexpected = tuple(name for name in content if name not in expected)
    if unexpected and not allow_extra:
        return AcceptOutcome(AcceptOutcomeKind.UNEXPECTED_FIELDS, unexpected_fields=unexpected)
    accepted = JsonObject.builder()
    for name, rule in expected.items():
        if name not in content:
            if rule.required:
                return AcceptOutcome(AcceptOutcomeKind.MISSING_FIELD, field_name=name)
            continue
        problem = rule.check(content[name])
        if problem is not None:
            return AcceptOutcome(problem, field_name=name)
        accepted.put(name, content[name])
    return AcceptOutcome(AcceptOutcomeKind.ACCEPTED, content=accepted.build(), unexpected_fields=unexpected)
