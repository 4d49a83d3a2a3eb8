"""Log records as JSON lines: one object per record, for a log pipeline rather than a person.

:class:`JsonLogFormatter` writes ``time`` (RFC 3339, UTC, milliseconds), ``level``, ``logger`` and ``message``, then
the structured fields a soklet log call passes as ``extra={"soklet": {...}}`` (the access log, protection refusals,
the admin audit), then ``trace_id`` and ``span_id`` of the span the record belongs to: the one a call names as
``extra={"soklet_trace": TraceIds}`` (when that span is no longer current), else the current span while tracing is
on; neither is written otherwise.

What reaches the line is bounded: a field is kept only when its name is text and its value is text, a number, a
flag or null (anything else is skipped, never an error), neither a field nor the message is longer than
:data:`MAX_LOG_TEXT_CHARS` (cut, with ``"truncated": true``), and an exception is named by its type alone: a traceback
quotes source lines and messages, which may quote client input.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping
from typing import Final

from soklet_core.tracing import TraceIds, current_trace_ids

__all__ = ["MAX_LOG_FIELDS", "MAX_LOG_TEXT_CHARS", "RESERVED_LOG_KEYS", "JsonLogFormatter"]

#: Longest message, and longest text field, written whole (8 KiB of characters); longer ones are cut to it.
MAX_LOG_TEXT_CHARS: Final = 8 * 1024
#: Most structured fields written from one record; the rest are skipped.
MAX_LOG_FIELDS: Final = 64
#: The members the formatter writes itself: a structured field of the same name is skipped.
RESERVED_LOG_KEYS: Final = frozenset(
    {"time", "level", "logger", "message", "trace_id", "span_id", "exception", "truncated"}
)

_Value = str | int | float | bool | None


class JsonLogFormatter(logging.Formatter):
    """Formats each record as one JSON object on one line (ASCII, no spaces); never raises for a bad extra."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON line: the fixed members, its structured fields, its span's ids, an exception's
        type name, and ``"truncated": true`` when a text was cut."""
        try:
            return _line(record)
        except Exception as error:  # a record broken past its extras still gives one line, never an exception
            return json.dumps(
                {
                    "time": _timestamp(None),
                    "level": "error",
                    "logger": "soklet",
                    "message": "log record not formatted",
                    "exception": type(error).__name__,
                },
                ensure_ascii=True,
                separators=(",", ":"),
            )


def _line(record: logging.LogRecord) -> str:
    message, cut = _bounded(_message(record))
    line: dict[str, _Value] = {
        "time": _timestamp(record),
        "level": str(record.levelname).lower(),
        "logger": str(record.name),
        "message": message,
    }
    cut = _add_fields(line, getattr(record, "soklet", None)) or cut
    ids = _trace_ids(record)
    if ids is not None:
        line["trace_id"] = ids.trace_id
        line["span_id"] = ids.span_id
    if record.exc_info and record.exc_info[0] is not None:
        line["exception"] = record.exc_info[0].__name__
    if cut:
        line["truncated"] = True
    return json.dumps(line, ensure_ascii=True, separators=(",", ":"))


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # arguments that do not fit the format: the format alone, as written in the code
        return str(record.msg) if isinstance(record.msg, str) else type(record.msg).__name__


def _timestamp(record: logging.LogRecord | None) -> str:
    created = time.time() if record is None else record.created
    # The record's own milliseconds, as logging computed them (the text format's asctime shows the same).
    millis = int((created - int(created)) * 1000) if record is None else int(record.msecs)
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{min(max(millis, 0), 999):03d}Z"


def _bounded(text: str) -> tuple[str, bool]:
    if len(text) <= MAX_LOG_TEXT_CHARS:
        return text, False
    return text[:MAX_LOG_TEXT_CHARS], True


def _add_fields(line: dict[str, _Value], fields: object) -> bool:
    """Copy the usable fields of ``fields`` into ``line``; whether a text was cut."""
    if not isinstance(fields, Mapping):
        return False
    cut = False
    taken = 0
    try:
        items = list(fields.items())
    except Exception:  # a mapping that cannot be read is skipped like any other bad extra
        return False
    for name, value in items:
        if taken >= MAX_LOG_FIELDS:
            break
        if not isinstance(name, str):
            continue
        key = str.__str__(name)
        usable, kept = _value(value)
        if not usable or key in RESERVED_LOG_KEYS or key in line:
            continue
        if isinstance(kept, str):
            kept, shortened = _bounded(kept)
            cut = cut or shortened
        line[key] = kept
        taken += 1
    return cut


#: The integers written: a count or a status fits; a huge one would cost its decimal conversion on every line.
_INT_BOUND: Final = (-(2**63), 2**64)


def _value(value: object) -> tuple[bool, _Value]:
    """Whether ``value`` is written, and as what: a subclass as its base type, so its own methods never run."""
    if value is None:
        return True, None
    if isinstance(value, bool):
        return True, value is True
    if isinstance(value, str):
        return True, str.__str__(value)
    if isinstance(value, int):
        whole = int.__index__(value)
        return _INT_BOUND[0] <= whole < _INT_BOUND[1], whole
    if isinstance(value, float):
        number = float.__float__(value)
        return math.isfinite(number), number  # NaN and infinities are not JSON
    return False, None


def _trace_ids(record: logging.LogRecord) -> TraceIds | None:
    named = getattr(record, "soklet_trace", None)
    if isinstance(named, TraceIds):
        return named
    try:
        return current_trace_ids()
    except Exception:  # a tracer provider that fails must not cost the log line
        return None
