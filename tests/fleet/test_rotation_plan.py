"""The file-mode fleet rotation as a library caller drives it (soklet_core.fleet.rotation_plan): the request's
refusals as it is built, the planner's refusals before any change (rules only ``soklet keys rotate --fleet``
enforced before), the lock, and a whole rotation and its check on real ``soklet serve --admin-port 0`` members,
with the typed events it reports."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from soklet_core.files import KeyringFileError
from soklet_core.fleet import (
    AdminTarget,
    FleetRotator,
    FleetStatus,
    FleetVerified,
    InstanceOutcome,
    RecordWritten,
    RotationAbort,
    RotationAction,
    RotationEvent,
    RotationLocked,
    RotationRecord,
    RotationRefusal,
    RotationRefused,
    RotationRequest,
    RotationStep,
    StepDone,
    StepStarted,
    Waiting,
    default_record_path,
    read_record,
    record_path_for,
    write_record,
)
from soklet_core.keys import MAX_KEY_MATERIAL_BYTES, MIN_KEY_MATERIAL_BYTES, ProtectionKey, encode_base64url
from tests.fleet.support_served import TOKEN, Served, start_fleet, stop_all


def _closed_port_target(name: str = "a") -> AdminTarget:
    # An admin URL nobody answers: a refusal that must come before any instance is contacted cannot reach it.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return AdminTarget(name, f"http://127.0.0.1:{port}", TOKEN, timeout=5)


def _refusal(reason: RotationRefusal, **options: object) -> None:
    with pytest.raises(RotationRefused) as caught:
        RotationRequest(**options)  # type: ignore[arg-type]
    assert caught.value.reason is reason


def test_the_request_refuses_what_means_nothing_as_it_is_built(tmp_path: Path) -> None:
    record = tmp_path / "fleet.toml.rotation.json"
    key_file = tmp_path / "new-key"
    _refusal(RotationRefusal.KEY_TWICE, record_path=record, key_file=key_file, generate=True)
    _refusal(RotationRefusal.ABORT_OPTIONS, record_path=record, abort=True, resume=True)
    _refusal(RotationRefusal.ABORT_OPTIONS, record_path=record, abort=True, key_id="2026-09")
    _refusal(RotationRefusal.NOT_CONFIRMED, record_path=record, generate=True, yes=False)
    _refusal(RotationRefusal.RESUME_GENERATE, record_path=record, resume=True, generate=True)
    _refusal(RotationRefusal.NO_KEY, record_path=record)
    _refusal(RotationRefusal.INVALID_REQUEST, record_path=record, generate=True, key_id="a b")
    # A refusal is a ValueError too, and its message names no input it was given.
    with pytest.raises(ValueError, match="--id is no valid key id"):
        RotationRequest(record_path=record, generate=True, key_id="secret value")
    # What the CLI gets from a terminal, a library caller says: nobody to ask but a dry run, or asked.
    assert RotationRequest(record_path=record, generate=True, yes=False, dry_run=True).action is RotationAction.START
    assert RotationRequest(record_path=record, generate=True, yes=False, interactive=True).yes is False
    assert RotationRequest(record_path=record, resume=True).action is RotationAction.RESUME
    assert RotationRequest(record_path=str(record), abort=True, exclude=["b"]).exclude == ("b",)  # type: ignore[arg-type]


def test_the_material_size_bounds_at_their_edges(tmp_path: Path) -> None:
    record = tmp_path / "r.json"
    for size in (MIN_KEY_MATERIAL_BYTES, MAX_KEY_MATERIAL_BYTES):
        assert RotationRequest(record_path=record, generate=True, size=size).size == size
    for size in (MIN_KEY_MATERIAL_BYTES - 1, MAX_KEY_MATERIAL_BYTES + 1):
        _refusal(RotationRefusal.INVALID_REQUEST, record_path=record, generate=True, size=size)


def test_the_record_path_rule(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.toml"
    assert record_path_for(None, fleet) == default_record_path(fleet) == tmp_path / "fleet.toml.rotation.json"
    assert record_path_for(tmp_path / "r.json", fleet) == tmp_path / "r.json"
    assert record_path_for(None, None) == Path("soklet-fleet.rotation.json")


def _plan_refusal(request: RotationRequest, targets: list[AdminTarget]) -> RotationRefused:
    rotator = FleetRotator(request, targets, on_event=lambda event: None)
    with pytest.raises(RotationRefused) as caught:
        asyncio.run(rotator.plan())
    return caught.value


def test_the_planner_refuses_before_contacting_anyone(tmp_path: Path) -> None:
    # Each of these rules lived only in the CLI: a library caller could start over an unfinished rotation, resume
    # with another id or another key file, or resume without a record.
    targets = [_closed_port_target("a"), _closed_port_target("b")]
    path = tmp_path / "fleet.toml.rotation.json"
    new = ProtectionKey.generate("2026-09")
    unfinished = RotationRecord(("a", "b"), "2026-09", "2026-08", new.check_value_text, RotationStep.ACTIVATE)

    refused = _plan_refusal(RotationRequest(record_path=path, resume=True), targets)
    assert refused.reason is RotationRefusal.NO_RECORD
    refused = _plan_refusal(RotationRequest(record_path=path, abort=True), targets)
    assert refused.reason is RotationRefusal.NO_RECORD

    write_record(path, unfinished)
    refused = _plan_refusal(RotationRequest(record_path=path, generate=True), targets)
    assert (refused.reason, refused.done_step) == (RotationRefusal.UNFINISHED, "activate")
    refused = _plan_refusal(RotationRequest(record_path=path, resume=True, key_id="2026-10"), targets)
    assert refused.reason is RotationRefusal.ID_DIFFERS
    refused = _plan_refusal(RotationRequest(record_path=path, resume=True, exclude=("z",)), targets)
    assert (refused.reason, refused.message) == (
        RotationRefusal.UNKNOWN_MEMBER,
        "--resume: --exclude: no member is named z",
    )
    refused = _plan_refusal(RotationRequest(record_path=path, resume=True), [*targets, _closed_port_target("c")])
    assert refused.reason is RotationRefusal.RECORD_MEMBERS
    refused = _plan_refusal(RotationRequest(record_path=path, resume=True, exclude=("a", "b")), targets)
    assert refused.reason is RotationRefusal.RECORD_MEMBERS
    refused = _plan_refusal(RotationRequest(record_path=path, abort=True, exclude=("a", "b")), targets)
    assert refused.reason is RotationRefusal.NO_MEMBER_LEFT

    other = tmp_path / "other-key"
    other.write_text(encode_base64url(ProtectionKey.generate("x").material) + "\n")
    other.chmod(0o600)
    refused = _plan_refusal(RotationRequest(record_path=path, resume=True, key_file=other), targets)
    assert refused.reason is RotationRefusal.KEY_DIFFERS
    other.write_text("not base64url!\n")
    refused = _plan_refusal(RotationRequest(record_path=path, resume=True, key_file=other), targets)
    assert refused.reason is RotationRefusal.KEY_TEXT
    refused = _plan_refusal(RotationRequest(record_path=path, resume=True, key_file=tmp_path / "absent"), targets)
    assert refused.reason is RotationRefusal.KEY_FILE
    assert isinstance(refused.__cause__, KeyringFileError)
    # Nothing above touched the record.
    assert read_record(path) == unfinished


def test_a_new_rotation_on_an_unreachable_fleet_is_refused_with_its_verdict(tmp_path: Path) -> None:
    request = RotationRequest(record_path=tmp_path / "r.json", generate=True, dry_run=True)
    rotator = FleetRotator(request, [_closed_port_target()], on_event=lambda event: None)
    with pytest.raises(RotationAbort) as caught:
        asyncio.run(rotator.plan())
    assert caught.value.status is FleetStatus.UNREACHABLE
    assert not (tmp_path / "r.json").exists()


def test_one_run_at_a_time_a_dry_run_takes_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    targets = [_closed_port_target()]
    first = FleetRotator(RotationRequest(record_path=path, generate=True), targets, on_event=lambda event: None)
    second = FleetRotator(RotationRequest(record_path=path, resume=True), targets, on_event=lambda event: None)
    looking = FleetRotator(
        RotationRequest(record_path=path, generate=True, dry_run=True), targets, on_event=lambda event: None
    )
    with first.lock():
        with pytest.raises(RotationLocked), second.lock():
            pass
        with looking.lock():
            pass
    with second.lock():
        pass


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[dict[str, Served]]:
    """Two members with a 1 s request-state lifetime, one keyring file each (active key 2026-08)."""
    served = start_fleet(tmp_path, ("a", "b"), "--state-lifetime", "1s")
    yield served
    stop_all(served)


@pytest.mark.slow
def test_a_library_caller_rotates_a_fleet_and_reads_typed_events(tmp_path: Path, fleet: dict[str, Served]) -> None:
    targets = [AdminTarget(name, served.admin_url, TOKEN) for name, served in fleet.items()]
    path = tmp_path / "fleet.toml.rotation.json"
    events: list[RotationEvent] = []

    dry = FleetRotator(
        RotationRequest(record_path=path, generate=True, key_id="2026-09", dry_run=True),
        targets,
        on_event=events.append,
    )
    preview = asyncio.run(dry.plan())
    assert (preview.action, preview.record.new_key, preview.record.former_key) == (
        RotationAction.START,
        "2026-09",
        "2026-08",
    )
    assert preview.steps == tuple(RotationStep)[1:]
    assert preview.record.wait_ms == 1000
    assert preview.key is not None
    assert preview.record.material is not None
    assert preview.record.material not in repr(preview)
    with pytest.raises(RotationRefused) as caught:
        asyncio.run(dry.run(preview))
    assert caught.value.reason is RotationRefusal.DRY_RUN
    assert not path.exists()
    assert events == []

    rotator = FleetRotator(
        RotationRequest(record_path=path, generate=True, key_id="2026-09"), targets, on_event=events.append
    )
    with rotator.lock():
        plan = asyncio.run(rotator.plan())
        record = asyncio.run(rotator.run(plan))
    assert record.finished
    assert record.material is None
    assert read_record(path) == record
    for name in fleet:
        snapshot = fleet[name].snapshot()
        assert snapshot["active"] == "2026-09"
        assert (snapshot["active"], snapshot["verification"]) == ("2026-09", [])

    assert isinstance(events[0], RecordWritten)
    assert events[0].path == path
    started = [event.step for event in events if isinstance(event, StepStarted)]
    done = [event.step for event in events if isinstance(event, StepDone)]
    assert started == done == [step.label for step in tuple(RotationStep)[1:]]
    assert {event.instance for event in events if isinstance(event, InstanceOutcome) and event.ok} == {"a", "b"}
    assert all(event.status is FleetStatus.CONVERGED for event in events if isinstance(event, FleetVerified))
    waits = [event for event in events if isinstance(event, Waiting)]
    assert waits
    assert waits[-1].over
    # The events are what --json prints: plain JSON, never the material.
    material = preview.record.material
    lines = [json.dumps(event.to_json()) for event in events if not isinstance(event, RecordWritten)]
    assert material is not None
    assert not any(material in line for line in lines)

    # A resume of the finished record checks the fleet and changes nothing.
    events.clear()
    resumed = FleetRotator(RotationRequest(record_path=path, resume=True), targets, on_event=events.append)
    with resumed.lock():
        check = asyncio.run(resumed.plan())
        assert check.action is RotationAction.CHECK
        assert check.steps == ()
        assert asyncio.run(resumed.run(check)) == record
    assert not any(isinstance(event, (StepStarted, RecordWritten)) for event in events)
