"""The single refusal type of the JSON layer and its bounded reasons."""

from __future__ import annotations

from soklet_core.errors import ErrorReason, SokletError


class JsonErrorReason(ErrorReason):
    """Why a document or value was refused. The set is closed: callers may switch on it."""

    EMPTY_INPUT = "empty-input", "the document is empty"
    BYTE_ORDER_MARK = "byte-order-mark", "a byte order mark is not allowed"
    INVALID_UTF8 = "invalid-utf8", "the bytes are not valid UTF-8"
    LONE_SURROGATE = "lone-surrogate", "a string holds a lone UTF-16 surrogate"
    CONTROL_CHARACTER = "control-character", "a string holds an unescaped control character"
    INVALID_ESCAPE = "invalid-escape", "a string holds an invalid escape"
    UNTERMINATED_STRING = "unterminated-string", "a string is not terminated"
    INVALID_NUMBER = "invalid-number", "a number is not in JSON number syntax"
    NON_FINITE_NUMBER = "non-finite-number", "NaN and Infinity are not JSON numbers"
    NUMBER_TOO_LONG = "number-too-long", "a number token is longer than 1,024 characters"
    EXPONENT_OUT_OF_RANGE = "exponent-out-of-range", "a number's exponent magnitude exceeds 10,000"
    DUPLICATE_MEMBER = "duplicate-member", "an object repeats a member name"
    UNEXPECTED_CHARACTER = "unexpected-character", "unexpected character"
    UNEXPECTED_END = "unexpected-end", "the document ends too early"
    TRAILING_CONTENT = "trailing-content", "content follows the document"
    DEPTH_EXCEEDED = "depth-exceeded", "nesting is deeper than 256"
    TOO_MANY_NODES = "too-many-nodes", "the document holds too many values"
    INPUT_TOO_LARGE = "input-too-large", "the document is larger than allowed"
    CANONICAL_TOO_LARGE = "canonical-too-large", "the canonical params exceed the 32 MiB allowance"
    PARAMS_NOT_STRUCTURED = "params-not-structured", "params must be a JSON object or array"


class JsonError(SokletError, ValueError):
    """A refused JSON document or value.

    ``reason`` is one of a closed set; ``offset`` is the byte offset in the UTF-8 input where the problem starts,
    or ``None`` when the refusal is not about a position (a value built in code, a size allowance). The message is
    built only from these two, so it never repeats attacker-controlled input.
    """

    __slots__ = ("offset",)

    reason: JsonErrorReason

    def __init__(self, reason: JsonErrorReason, offset: int | None = None) -> None:
        self.offset = offset
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(reason, f"{reason.value}{where}: {reason.description}")
