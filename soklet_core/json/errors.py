"""The single refusal type of the JSON layer and its bounded reasons."""

from __future__ import annotations

import enum


class JsonErrorReason(enum.Enum):
    """Why a document or value was refused. The set is closed: callers may switch on it."""

    EMPTY_INPUT = "empty-input"
    BYTE_ORDER_MARK = "byte-order-mark"
    INVALID_UTF8 = "invalid-utf8"
    LONE_SURROGATE = "lone-surrogate"
    CONTROL_CHARACTER = "control-character"
    INVALID_ESCAPE = "invalid-escape"
    UNTERMINATED_STRING = "unterminated-string"
    INVALID_NUMBER = "invalid-number"
    NON_FINITE_NUMBER = "non-finite-number"
    NUMBER_TOO_LONG = "number-too-long"
    EXPONENT_OUT_OF_RANGE = "exponent-out-of-range"
    DUPLICATE_MEMBER = "duplicate-member"
    UNEXPECTED_CHARACTER = "unexpected-character"
    UNEXPECTED_END = "unexpected-end"
    TRAILING_CONTENT = "trailing-content"
    DEPTH_EXCEEDED = "depth-exceeded"
    TOO_MANY_NODES = "too-many-nodes"
    INPUT_TOO_LARGE = "input-too-large"
    CANONICAL_TOO_LARGE = "canonical-too-large"
    PARAMS_NOT_STRUCTURED = "params-not-structured"

    @property
    def description(self) -> str:
        """A fixed, human sentence for the reason; never contains input."""
        return _DESCRIPTIONS[self]


_DESCRIPTIONS: dict[JsonErrorReason, str] = {
    JsonErrorReason.EMPTY_INPUT: "the document is empty",
    JsonErrorReason.BYTE_ORDER_MARK: "a byte order mark is not allowed",
    JsonErrorReason.INVALID_UTF8: "the bytes are not valid UTF-8",
    JsonErrorReason.LONE_SURROGATE: "a string holds a lone UTF-16 surrogate",
    JsonErrorReason.CONTROL_CHARACTER: "a string holds an unescaped control character",
    JsonErrorReason.INVALID_ESCAPE: "a string holds an invalid escape",
    JsonErrorReason.UNTERMINATED_STRING: "a string is not terminated",
    JsonErrorReason.INVALID_NUMBER: "a number is not in JSON number syntax",
    JsonErrorReason.NON_FINITE_NUMBER: "NaN and Infinity are not JSON numbers",
    JsonErrorReason.NUMBER_TOO_LONG: "a number token is longer than 1,024 characters",
    JsonErrorReason.EXPONENT_OUT_OF_RANGE: "a number's exponent magnitude exceeds 10,000",
    JsonErrorReason.DUPLICATE_MEMBER: "an object repeats a member name",
    JsonErrorReason.UNEXPECTED_CHARACTER: "unexpected character",
    JsonErrorReason.UNEXPECTED_END: "the document ends too early",
    JsonErrorReason.TRAILING_CONTENT: "content follows the document",
    JsonErrorReason.DEPTH_EXCEEDED: "nesting is deeper than 256",
    JsonErrorReason.TOO_MANY_NODES: "the document holds too many values",
    JsonErrorReason.INPUT_TOO_LARGE: "the document is larger than allowed",
    JsonErrorReason.CANONICAL_TOO_LARGE: "the canonical params exceed the 32 MiB allowance",
    JsonErrorReason.PARAMS_NOT_STRUCTURED: "params must be a JSON object or array",
}


class JsonError(ValueError):
    """A refused JSON document or value.

    ``reason`` is one of a closed set; ``offset`` is the byte offset in the UTF-8 input where the problem starts,
    or ``None`` when the refusal is not about a position (a value built in code, a size allowance). The message is
    built only from these two, so it never repeats attacker-controlled input.
    """

    __slots__ = ("offset", "reason")

    def __init__(self, reason: JsonErrorReason, offset: int | None = None) -> None:
        self.reason = reason
        self.offset = offset
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"{reason.value}{where}: {reason.description}")

    def __reduce__(self) -> tuple[type[JsonError], tuple[JsonErrorReason, int | None]]:
        return (type(self), (self.reason, self.offset))
