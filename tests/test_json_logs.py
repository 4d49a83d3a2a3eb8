"""``JsonLogFormatter`` on real log records: one JSON object per line, bounded, never raising."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from soklet_core import tracing
from soklet_core.json_logs import MAX_LOG_FIELDS, MAX_LOG_TEXT_CHARS, RESERVED_LOG_KEYS, JsonLogFormatter
from soklet_core.tracing import TraceIds

IDS = TraceIds("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")


def _record(
    message: str = "hello %s",
    args: tuple[object, ...] = ("world",),
    *,
    level: int = logging.INFO,
    exc_info: Any = None,
    **extra: object,
) -> logging.LogRecord:
    record = logging.LogRecord("soklet.test", level, __file__, 1, message, args, exc_info)
    for name, value in extra.items():
        setattr(record, name, value)
    return record


def _format(record: logging.LogRecord) -> dict[str, Any]:
    line = JsonLogFormatter().format(record)
    assert "\n" not in line
    assert "\r" not in line
    assert line.isascii()
    document: dict[str, Any] = json.loads(line)
    return document


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    """An SDK provider for soklet's spans alone (tracing on), removed after the test."""
    installed = TracerProvider()
    tracing.use_provider(installed)
    try:
        yield installed
    finally:
        tracing.use_provider(None)
        installed.shutdown()


def test_the_fixed_members_then_the_fields() -> None:
    record = _record(soklet={"event": "access", "status": 200, "duration_ms": 1.5, "ok": True, "reason": None})
    record.created = 1_767_225_600.042  # 2026-01-01T00:00:00.042Z
    record.msecs = 42.0
    document = _format(record)
    assert list(document)[:4] == ["time", "level", "logger", "message"]
    assert document["time"] == "2026-01-01T00:00:00.042Z"
    assert (document["level"], document["logger"], document["message"]) == ("info", "soklet.test", "hello world")
    assert {name: document[name] for name in ("event", "status", "duration_ms", "ok", "reason")} == {
        "event": "access",
        "status": 200,
        "duration_ms": 1.5,
        "ok": True,
        "reason": None,
    }
    assert "trace_id" not in document
    assert "span_id" not in document
    assert "truncated" not in document
    assert "exception" not in document


def test_a_field_never_overwrites_a_reserved_member() -> None:
    fields = dict.fromkeys(RESERVED_LOG_KEYS, "forged")
    document = _format(_record(level=logging.WARNING, soklet={**fields, "event": "x"}))
    assert document == {
        "time": document["time"],
        "level": "warning",
        "logger": "soklet.test",
        "message": "hello world",
        "event": "x",
    }


def test_bad_extras_are_skipped() -> None:
    class Loud(str):
        def __str__(self) -> str:
            raise AssertionError("a field's own __str__ must not run")

    fields: dict[object, object] = {
        "kept": "yes",
        "object": object(),
        "list": [1, 2],
        "dict": {"a": 1},
        "bytes": b"raw",
        "nan": float("nan"),
        "infinite": float("inf"),
        "huge": 10**400,
        1: "a key that is not text",
        "loud": Loud("shown as its text"),
    }
    document = _format(_record(soklet=fields))
    assert document["kept"] == "yes"
    assert document["loud"] == "shown as its text"
    for name in ("object", "list", "dict", "bytes", "nan", "infinite", "huge", "1"):
        assert name not in document
    for extra in ("not a mapping", 42, None, ["event", "x"]):
        assert set(_format(_record(soklet=extra))) == {"time", "level", "logger", "message"}
    many = {f"field{index}": index for index in range(MAX_LOG_FIELDS + 10)}
    assert len(_format(_record(soklet=many))) == 4 + MAX_LOG_FIELDS


def test_arguments_that_do_not_fit_the_format_give_the_format() -> None:
    document = _format(_record("%d items", ("not a number",)))
    assert document["message"] == "%d items"


def test_an_exception_is_named_by_its_type_only() -> None:
    try:
        raise ValueError("client said: secret-input-7f3a")
    except ValueError:
        record = _record(level=logging.ERROR, exc_info=sys.exc_info())
    line = JsonLogFormatter().format(record)
    assert json.loads(line)["exception"] == "ValueError"
    assert "secret-input-7f3a" not in line
    assert "Traceback" not in line


def test_a_multi_line_message_stays_one_line() -> None:
    document = _format(_record("first\nsecond\r\nthird \u2028 é \x00", ()))
    assert document["message"] == "first\nsecond\r\nthird \u2028 é \x00"


def test_the_message_bound_at_its_edge() -> None:
    kept = _format(_record("a" * MAX_LOG_TEXT_CHARS, ()))
    assert kept["message"] == "a" * MAX_LOG_TEXT_CHARS
    assert "truncated" not in kept
    cut = _format(_record("a" * (MAX_LOG_TEXT_CHARS + 1), ()))
    assert cut["message"] == "a" * MAX_LOG_TEXT_CHARS
    assert cut["truncated"] is True
    assert MAX_LOG_TEXT_CHARS == 8192


def test_a_long_field_is_cut_too() -> None:
    document = _format(_record(soklet={"reason": "b" * (MAX_LOG_TEXT_CHARS + 1)}))
    assert document["reason"] == "b" * MAX_LOG_TEXT_CHARS
    assert document["truncated"] is True


def test_trace_ids_from_the_record() -> None:
    document = _format(_record(soklet_trace=IDS))
    assert (document["trace_id"], document["span_id"]) == (IDS.trace_id, IDS.span_id)
    assert "soklet_trace" not in document
    # Anything but TraceIds is not taken for one.
    assert "trace_id" not in _format(_record(soklet_trace={"trace_id": "0" * 32, "span_id": "0" * 16}))


@pytest.mark.usefixtures("provider")
def test_trace_ids_of_the_current_span() -> None:
    with tracing.span("soklet.test") as current:
        ids = tracing.trace_ids(current)
        document = _format(_record())
    assert ids is not None
    assert (document["trace_id"], document["span_id"]) == (ids.trace_id, ids.span_id)
    assert "trace_id" not in _format(_record())  # no span current any more


@pytest.mark.usefixtures("provider")
def test_the_named_span_wins_over_the_current_one() -> None:
    with tracing.span("soklet.test"):
        document = _format(_record(soklet_trace=IDS))
    assert (document["trace_id"], document["span_id"]) == (IDS.trace_id, IDS.span_id)


def test_no_trace_ids_while_tracing_is_off() -> None:
    assert tracing.tracer() is None
    with tracing.span("soklet.test") as current:
        assert current is None
        document = _format(_record())
    assert "trace_id" not in document
    assert "span_id" not in document


def test_a_handler_writes_one_line_per_record() -> None:
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(JsonLogFormatter())
    logger = logging.getLogger("soklet.test.json_logs")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("refused: %s", "expired", extra={"soklet": {"event": "state-refused", "reason": "expired"}})
    finally:
        logger.removeHandler(handler)
    [line] = lines
    document = json.loads(line)
    assert (document["event"], document["reason"], document["level"]) == ("state-refused", "expired", "warning")
