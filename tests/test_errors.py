"""One error tree: every exception soklet_core defines is a SokletError, every reason enum an ErrorReason.

The walks below import every module of soklet_core, so a class added anywhere is held to the rule without this
file naming it; the pickling test names one instance per class and fails when a class has none.
"""

from __future__ import annotations

import enum
import importlib
import pickle
import pkgutil
import types
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pytest

import soklet_core
from soklet_core import ErrorReason, SokletError
from soklet_core.files import (
    FleetFileError,
    KeyringFileError,
    KeyringFileErrorReason,
    read_fleet_file,
    read_keyring_file,
)
from soklet_core.fleet import (
    FleetStatus,
    RecordError,
    RecordMismatch,
    RotationAbort,
    RotationLocked,
    RotationRefusal,
    RotationRefused,
    SnapshotError,
    parse_admin_snapshot,
    read_record,
)
from soklet_core.fleet.store_rotation import StoreRotationAbort
from soklet_core.json import JsonError, JsonErrorReason, JsonString, parse
from soklet_core.keys import (
    KeyInUse,
    KeyringError,
    KeyringErrorReason,
    KeyWrapError,
    KeyWrapErrorReason,
    ProtectionKey,
    RetiredTooRecently,
)
from soklet_core.mcp.model import (
    ArgumentsError,
    CapabilitiesError,
    FormPolicyViolation,
    InputRequestError,
    InputRequiredResultError,
    InputResponseError,
    McpModelError,
    McpModelErrorReason,
    RegistrationError,
    RequestContextError,
    ResultError,
    check_elicitation_url,
    tool,
)
from soklet_core.mcp.server import BearerTokenAdmission, McpError, ServeError
from soklet_core.mcp.server._serve_config import ServeErrorReason
from soklet_core.mcp.server.durable import HandleRejected, TaskError, TaskErrorReason
from soklet_core.mcp.server.engine import AdmissionRefused, AdmissionRefusedReason, AdmissionRequest
from soklet_core.mcp.server.http import parse_authority
from soklet_core.mcp.server.http._transport import MalformedAuthority
from soklet_core.mcp.server.legacy import SessionLimitReason, SessionsFull
from soklet_core.mcp.server.ops import AdminTokenError, LiveKeyringError, LiveKeyringRefusal, read_admin_tokens
from soklet_core.protection import (
    EnvelopeHeader,
    ProtectionError,
    ProtectionUsageError,
    ProtectionUsageReason,
    RequestStateProtectionException,
    normalize_endpoint_path,
)
from soklet_core.store import StoreError, StoreErrorReason
from soklet_core.tracing_setup import TracingSetupError, TracingSetupErrorReason


def _core_modules() -> list[types.ModuleType]:
    modules = [soklet_core]
    for info in pkgutil.walk_packages(soklet_core.__path__, prefix="soklet_core."):
        modules.append(importlib.import_module(info.name))
    return modules


def _defined_classes(modules: Iterable[types.ModuleType]) -> set[type]:
    """The classes each module defines itself (not those it imports)."""
    return {
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type) and value.__module__ == module.__name__
    }


def _stray_exceptions(modules: Iterable[types.ModuleType]) -> list[str]:
    """Public exception classes outside the tree.

    A private class (``_Doubt``, ``_Refused``, ``_Busy``) is control flow caught inside its own module and never
    reaches a caller, so it is left out; everything a caller can see must be a SokletError.
    """
    return sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _defined_classes(modules)
        if issubclass(cls, BaseException) and not cls.__name__.startswith("_") and not issubclass(cls, SokletError)
    )


def _reason_enums(modules: Iterable[types.ModuleType]) -> set[type[enum.Enum]]:
    return {
        cls
        for cls in _defined_classes(modules)
        if issubclass(cls, enum.Enum) and cls.__name__.endswith(("Reason", "Refusal"))
    }


CORE_MODULES = _core_modules()
ERROR_CLASSES = sorted(
    (
        cls
        for cls in _defined_classes(CORE_MODULES)
        if issubclass(cls, SokletError) and not cls.__name__.startswith("_")
    ),
    key=lambda cls: cls.__qualname__,
)


def test_every_public_exception_is_a_soklet_error() -> None:
    assert _stray_exceptions(CORE_MODULES) == []


def test_the_walk_sees_an_exception_outside_the_tree() -> None:
    # The test above must be able to fail: a module defining a plain Exception subclass is reported.
    module = types.ModuleType("soklet_core.stray")
    exec("class Stray(Exception):\n    pass\n\nclass _Private(Exception):\n    pass\n", vars(module))
    assert _stray_exceptions([module]) == ["soklet_core.stray.Stray"]


def test_the_walk_finds_every_layer() -> None:
    # A walk that imported nothing would pass the tests above vacuously.
    assert {JsonError, KeyringFileError, ProtectionUsageError, McpModelError, McpError, RotationAbort} <= set(
        ERROR_CLASSES
    )


def test_value_errors_stay_value_errors() -> None:
    for cls in (JsonError, KeyringError, ProtectionUsageError, McpModelError, MalformedAuthority, AdminTokenError):
        assert issubclass(cls, ValueError), cls
    for cls in (KeyringFileError, FleetFileError, RequestStateProtectionException, McpError, AdmissionRefused):
        assert not issubclass(cls, ValueError), cls


def test_every_reason_enum_is_an_error_reason_with_sentences_and_unique_slugs() -> None:
    enums = _reason_enums(CORE_MODULES)
    assert {JsonErrorReason, KeyringErrorReason, LiveKeyringRefusal, AdmissionRefusedReason} <= enums
    for cls in enums:
        assert issubclass(cls, ErrorReason), cls
        # A repeated slug would silently make the second member an alias of the first.
        assert len(cls.__members__) == len(list(cls)), cls
        for member in cls:
            assert isinstance(member.value, str), member
            assert member.value, member
            assert isinstance(member.description, str), member
            assert member.description.strip(), member
            assert cls(member.value) is member


def test_a_reason_without_a_sentence_is_refused() -> None:
    with pytest.raises(ValueError, match="NAME = 'slug', 'sentence'"):

        class Broken(ErrorReason):
            ONLY_SLUG = "only-slug"


def test_the_enum_walk_sees_a_reason_outside_the_tree() -> None:
    module = types.ModuleType("soklet_core.stray")
    exec("import enum\n\nclass StrayReason(enum.Enum):\n    A = 'a'\n", vars(module))
    [found] = _reason_enums([module])
    assert not issubclass(found, ErrorReason)


#: One instance of every error class, with every constructor argument (keyword-only ones included) given.
EXAMPLES: list[SokletError] = [
    SokletError(JsonErrorReason.EMPTY_INPUT),
    JsonError(JsonErrorReason.DEPTH_EXCEEDED, 7),
    KeyringError(KeyringErrorReason.UNKNOWN_KEY, "k-2026"),
    KeyInUse("k-2026"),
    RetiredTooRecently("k-2026", datetime(2026, 8, 1, tzinfo=UTC), recorded=False),
    KeyWrapError(KeyWrapErrorReason.WRONG_KEK, "k-2026", "wrapped under kek-AAAA"),
    KeyringFileError(
        KeyringFileErrorReason.INVALID_FIELD, path="/etc/keys.toml", key="k-2026", field="created", detail="line 3"
    ),
    FleetFileError("must be a string", path="fleet.toml", where="instances[0].url", is_io=False),
    ProtectionError(ProtectionUsageReason.INVALID_CLOCK, "a message of its own"),
    RequestStateProtectionException(RequestStateProtectionException.Reason.BINDING_PATH),
    ProtectionUsageError(ProtectionUsageReason.INVALID_CLOCK),
    McpModelError(McpModelErrorReason.INVALID_FIELD, "title", "a fixed detail"),
    RegistrationError(McpModelErrorReason.INVALID_NAME, "my_tool"),
    ArgumentsError(McpModelErrorReason.INVALID_PROMPT_ARGUMENTS, "city"),
    CapabilitiesError(McpModelErrorReason.INVALID_CAPABILITIES),
    InputRequestError(McpModelErrorReason.INVALID_URL, "verify"),
    FormPolicyViolation("password", "password", "name"),
    InputRequiredResultError(McpModelErrorReason.DUPLICATE_INPUT_REQUEST_KEY, "ask"),
    InputResponseError(McpModelErrorReason.CONVERSION_FAILED, "answer"),
    ResultError(McpModelErrorReason.INVALID_CONTENT),
    RequestContextError(McpModelErrorReason.INVALID_REQUEST_CONTEXT),
    McpError(
        -32602,
        "Invalid params",
        JsonString.from_value("why"),
        http_status=400,
        log_reason="bad-params",
        headers=(("retry-after", "1"),),
    ),
    AdmissionRefused(AdmissionRefusedReason.UNKNOWN_CREDENTIALS),
    MalformedAuthority("malformed port"),
    AdminTokenError("line 3: the label is used twice"),
    LiveKeyringError(LiveKeyringRefusal.FILE_REFUSED, KeyringFileErrorReason.NOT_FOUND),
    SessionsFull(SessionLimitReason.SESSIONS),
    TaskError(TaskErrorReason.NOT_FOUND),
    HandleRejected(),
    ServeError(ServeErrorReason.APP_FACTORY_NEEDS_ARGUMENTS, detail="TypeError", names=("settings",)),
    TracingSetupError(TracingSetupErrorReason.SDK_REFUSED, variable="OTEL_TRACES_EXPORTER", detail="ValueError"),
    SnapshotError("missing", "keys[0].id"),
    StoreError(StoreErrorReason.UNAVAILABLE, "insert_task: sqlite3.OperationalError"),
    RecordError("not JSON"),
    RotationAbort(FleetStatus.DIVERGED, "stage: refused on a, b; nothing was activated"),
    StoreRotationAbort(StoreRotationAbort.Kind.LOCKED, "the rotation lock is held by 'ops@host pid 7' since now"),
    RecordMismatch(FleetStatus.DIVERGED, "the record does not match the fleet: it says activate is done, but a"),
    RotationLocked("pid 4242 since 2026-12-03T16:02:11Z"),
    RotationRefused(RotationRefusal.UNFINISHED, "a rotation is unfinished (step activate done)", done_step="activate"),
]


def test_every_error_class_has_a_pickling_example() -> None:
    assert sorted({type(error) for error in EXAMPLES}, key=lambda cls: cls.__qualname__) == ERROR_CLASSES


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda error: type(error).__name__)
def test_errors_pickle(error: SokletError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.reason == error.reason
    assert vars(copy) == vars(error)
    for name in ("offset", "key_id", "path", "key", "field", "detail", "subject", "concept", "where", "problem"):
        assert getattr(copy, name, None) == getattr(error, name, None), name
    for name in ("is_io", "code", "message", "data", "http_status", "log_reason", "headers", "file_reason", "status"):
        assert getattr(copy, name, None) == getattr(error, name, None), name


def test_a_pickle_carries_notes() -> None:
    error = JsonError(JsonErrorReason.EMPTY_INPUT)
    error.add_note("while reading the request")
    assert pickle.loads(pickle.dumps(error)).__notes__ == ["while reading the request"]


def test_a_pickle_carries_only_the_filtered_subject() -> None:
    # The message drops a subject that is not a plain identifier; the pickle must drop it too.
    error = McpModelError(McpModelErrorReason.INVALID_FIELD, "hunter2 is my password")
    assert error.subject is None
    assert b"hunter2" not in pickle.dumps(error)


def _refusals(tmp_path: Path) -> list[tuple[str, object]]:
    """(layer, what each layer's public API raised) for one bad input per layer."""

    def bad_registration() -> None:
        @tool(name="not a name!", description="d", input_schema={"type": "object"})
        def handler() -> None: ...

    record = tmp_path / "rotation.record"
    record.write_text("{", encoding="utf-8")
    record.chmod(0o600)
    attempts = [
        ("json", lambda: parse(b"{")),
        ("keys", lambda: ProtectionKey.from_id_and_bytes("not an id!", bytes(32))),
        ("files", lambda: read_keyring_file(tmp_path / "missing.toml")),
        ("files", lambda: read_fleet_file(tmp_path / "missing-fleet.toml")),
        ("protection", lambda: EnvelopeHeader.read("not base64url!")),
        ("protection", lambda: normalize_endpoint_path("no-slash")),
        ("mcp.model", bad_registration),
        ("mcp.model", lambda: check_elicitation_url("ftp://example.com/x")),
        ("mcp.server", lambda: parse_authority("a host")),
        ("mcp.server", lambda: BearerTokenAdmission({"t" * 32: ("alice", "p")}).admit(AdmissionRequest("/mcp", {}))),
        ("mcp.server", lambda: read_admin_tokens(token_file=None, token_env=None)),
        ("fleet", lambda: parse_admin_snapshot(b"{")),
        ("fleet", lambda: read_record(record)),
    ]
    caught: list[tuple[str, object]] = []
    for layer, attempt in attempts:
        try:
            attempt()
        except SokletError as error:
            caught.append((layer, error))
        else:
            caught.append((layer, None))
    return caught


def test_except_soklet_error_catches_every_layer(tmp_path: Path) -> None:
    caught = _refusals(tmp_path)
    assert [layer for layer, error in caught if error is None] == []
    expected = [
        JsonError,
        KeyringError,
        KeyringFileError,
        FleetFileError,
        RequestStateProtectionException,
        ProtectionUsageError,
        RegistrationError,
        InputRequestError,
        MalformedAuthority,
        AdmissionRefused,
        AdminTokenError,
        SnapshotError,
        RecordError,
    ]
    assert [type(error) for _, error in caught] == expected
