"""Key rotation across a fleet, the spec's steps with a check between each, resumable from a record file.

Steps (each idempotent, so a resumed rotation simply runs again from the first step not recorded as done):

1. ``stage`` the identical new key on every instance (re-staging identical material is a no-op);
2. ``verify-staged``: v2 convergence, the new key everywhere with the expected check value; else abort before
   anything is activated;
3. ``activate`` everywhere (activating the active key is a no-op); the moment the last instance answered is
   recorded;
4. ``verify-active``: converged, the new key active everywhere;
5. ``wait``: at least the longest ``max_state_lifetime_ms`` any instance reports, counted from the latest moment
   known to bound the former key's last seal (see below), and until no instance holds a reservation on it;
6. ``remove`` the former key everywhere (an absent key counts as removed);
7. ``verify-removed``: converged, the former key gone everywhere.

The record file (JSON, 0600, written atomically) holds the step reached, the key ids, the new key's check value
and the activation time. Material is kept in it only for a *generated* key and only until every instance holds
it (step 2 passed): after that no step needs it. A key read from a file is never written to the record; a resume
that must stage again asks for the same file (its check value must match the record's).

**The record is never trusted alone.** A resumed rotation first reads every instance and refuses
(:class:`RecordMismatch`) a record claiming a step the instances do not show: the new key held everywhere
(``verify-staged``), active everywhere (``activate``), the wait over (``wait``: no instance reports a reservation
on the former key, or a fact that lets a state sealed under it live on), the former key gone (``remove``). The
wait counts from the latest of: the recorded activation, when each instance says the new key was created (it
was staged before it was activated), when each says the former key stopped sealing (its ``retired`` time) and
when each says the former key last sealed a state. Only an activation this process saw itself is taken without
such a report: when no instance reports any of these (keyrings held in memory only, no seal since they started),
a resumed wait counts from the resume. So an edited ``activated_at_ms`` can lengthen the wait but never shorten
it.

This module holds the steps, the record and the checks between steps; what a rotation is asked, which members it
contacts, the refusals before any change, the lock and the plan live in :mod:`soklet_core.fleet.rotation_plan`, and
the events it reports in :mod:`soklet_core.fleet.rotation_events`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from soklet_core.errors import SokletError
from soklet_core.files import atomic_write, read_secret_file
from soklet_core.keys import (
    CURRENT_FINGERPRINT_VERSION,
    KeyringError,
    ProtectionKey,
    decode_base64url,
    encode_base64url,
    is_valid_key_id,
)
from soklet_core.mcp.server.ops._snapshot import AdminSnapshot

from .client import AdminTarget, ChangeOutcome, InstanceReading, apply_changes, read_snapshots
from .clock import fleet_skew
from .compare import FleetReport, FleetStatus, compare_fleet
from .record_names import RECORD_SUFFIX, RESOLVED_RECORD_NAME
from .rotation_events import (
    FleetVerified,
    InstanceOutcome,
    MemberBack,
    MemberLost,
    RotationEventSink,
    StepDone,
    StepStarted,
    Waiting,
)

__all__ = [
    "MAX_RECORD_BYTES",
    "RECORD_FORMAT",
    "RECORD_SUFFIX",
    "RESOLVED_RECORD_NAME",
    "WAIT_POLL_SECONDS",
    "RecordError",
    "RecordMismatch",
    "RotationAbort",
    "RotationRecord",
    "RotationStep",
    "abort_rotation",
    "default_record_path",
    "read_record",
    "removal_refusal",
    "rotate_fleet",
    "rotation_refusal",
    "skew_of",
    "write_record",
]

#: The record file's format name.
RECORD_FORMAT: Final = "soklet-fleet-rotation-v1"
#: Largest record file read, in bytes (a record is about 600 bytes).
MAX_RECORD_BYTES: Final = 64 * 1024
#: Seconds between two snapshot reads while waiting.
WAIT_POLL_SECONDS: Final = 1.0


class RotationStep(enum.IntEnum):
    """The last step a rotation completed (``NONE``: nothing yet)."""

    NONE = 0
    STAGE = 1
    VERIFY_STAGED = 2
    ACTIVATE = 3
    VERIFY_ACTIVE = 4
    WAIT = 5
    REMOVE = 6
    VERIFY_REMOVED = 7

    @property
    def label(self) -> str:
        """The step's name in events and the record (``verify-staged``)."""
        return self.name.lower().replace("_", "-")

    @classmethod
    def from_label(cls, label: str) -> RotationStep:
        """The step named ``label``; ``ValueError`` otherwise."""
        for step in cls:
            if step.label == label:
                return step
        raise ValueError("unknown step")


class RecordError(SokletError):
    """The record file is unusable; the message is fixed text (never the file's content).

    There is no reason enum (``reason`` is ``None``): every refusal means the same to a caller, the record
    cannot resume a rotation, and the message tells the operator which part failed.
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(None, message)


@dataclass(frozen=True, slots=True)
class RotationRecord:
    """Where a rotation stands. ``material`` (base64url) is set only for a generated key until step 2 passed."""

    instances: tuple[str, ...]
    new_key: str
    former_key: str
    check_value: str
    step: RotationStep = RotationStep.NONE
    activated_at_ms: int | None = None
    wait_ms: int = 0
    material: str | None = field(default=None, repr=False)
    #: Fleet members left out of this rotation (``--exclude``, or lost): never contacted, stale once it ends.
    excluded: tuple[str, ...] = ()
    #: The largest clock skew between members measured so far (upper bound, ms): the wait adds it.
    skew_ms: int = 0

    @property
    def finished(self) -> bool:
        """Whether every step is done."""
        return self.step is RotationStep.VERIFY_REMOVED

    def to_json(self) -> dict[str, Any]:
        """The record as written to its file."""
        document: dict[str, Any] = {
            "format": RECORD_FORMAT,
            "step": self.step.label,
            "instances": list(self.instances),
            "new_key": self.new_key,
            "former_key": self.former_key,
            "check_value": self.check_value,
            "activated_at_ms": self.activated_at_ms,
            "wait_ms": self.wait_ms,
            "skew_ms": self.skew_ms,
            "excluded": list(self.excluded),
        }
        if self.material is not None:
            document["material"] = self.material
        return document


def default_record_path(fleet_file: str | os.PathLike[str]) -> Path:
    """``FLEET`` + :data:`RECORD_SUFFIX`, next to the fleet file."""
    path = Path(fleet_file)
    return path.with_name(path.name + RECORD_SUFFIX)


def write_record(path: str | os.PathLike[str], record: RotationRecord) -> None:
    """Write ``record`` atomically with mode 0600 (it may hold material). Raises ``KeyringFileError``."""
    atomic_write(path, (json.dumps(record.to_json(), indent=2) + "\n").encode("ascii"), mode=0o600)


def read_record(path: str | os.PathLike[str]) -> RotationRecord:
    """Read a record file (a regular 0600 file, at most :data:`MAX_RECORD_BYTES`). Raises ``KeyringFileError``
    (unreadable, insecure) or :class:`RecordError` (not a record)."""
    data = read_secret_file(path, limit=MAX_RECORD_BYTES)
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise RecordError("not JSON") from None
    if not isinstance(document, dict) or document.get("format") != RECORD_FORMAT:
        raise RecordError(f"not a {RECORD_FORMAT} record")
    try:
        instances = document["instances"]
        new_key, former_key = document["new_key"], document["former_key"]
        check_value = document["check_value"]
        step = RotationStep.from_label(document["step"])
        activated = document["activated_at_ms"]
        wait_ms = document["wait_ms"]
        material = document.get("material")
        # Absent from records an earlier soklet wrote.
        skew_ms = document.get("skew_ms", 0)
        excluded = document.get("excluded", [])
    except (KeyError, TypeError, ValueError):
        raise RecordError("a member is missing or has the wrong type") from None
    if (
        not isinstance(instances, list)
        or not all(isinstance(name, str) for name in instances)
        or not is_valid_key_id(new_key)
        or not is_valid_key_id(former_key)
        or not isinstance(check_value, str)
        or not (activated is None or (isinstance(activated, int) and activated >= 0))
        or not (isinstance(wait_ms, int) and wait_ms >= 0)
        or not (material is None or isinstance(material, str))
        or not (isinstance(skew_ms, int) and skew_ms >= 0)
        or not isinstance(excluded, list)
        or not all(isinstance(name, str) for name in excluded)
    ):
        raise RecordError("a member is missing or has the wrong type")
    if material is not None:
        # Kept material must be the recorded key: staged as it is, it would be the key every instance seals with.
        try:
            key = ProtectionKey.from_id_and_bytes(new_key, decode_base64url(material))
        except (KeyringError, ValueError):
            raise RecordError("the kept material is not a key") from None
        if key.check_value_text != check_value:
            raise RecordError("the kept material is not the recorded key (check values differ)")
    return RotationRecord(
        tuple(instances),
        new_key,
        former_key,
        check_value,
        step,
        activated,
        wait_ms,
        material,
        tuple(excluded),
        skew_ms,
    )


class RotationAbort(SokletError):
    """The rotation stopped: ``status`` is the fleet verdict that stopped it (the CLI's exit code follows it as
    ``fleet check``'s does), ``message`` fixed text naming instances and key ids, never material.

    ``reason`` is ``status`` (a closed :class:`~soklet_core.fleet.compare.FleetStatus`, not an error reason):
    the verdict is what a caller switches on.
    """

    def __init__(
        self,
        status: FleetStatus,
        message: str,
        report: FleetReport | None = None,
        *,
        lost: tuple[str, ...] = (),
        record_removed: bool = False,
    ) -> None:
        super().__init__(status, message)
        self.status = status
        self.message = message
        self.report = report
        #: Instances that stopped answering during the wait: exclude them (``--exclude``) to resume.
        self.lost = lost
        #: The record was removed: nothing was left to finish (a refused stage was rolled back).
        self.record_removed = record_removed


class RecordMismatch(RotationAbort):
    """The record claims a step the instances do not show (an edited or stale record): refused before any change,
    with ``status`` diverged. ``message`` names the step, the instances and what they show instead."""


@dataclass(frozen=True, slots=True)
class _Run:
    targets: tuple[AdminTarget, ...]
    record_path: Path
    emit: RotationEventSink
    key: ProtectionKey | None


async def rotate_fleet(
    targets: Sequence[AdminTarget],
    record: RotationRecord,
    record_path: str | os.PathLike[str],
    *,
    key: ProtectionKey | None,
    emit: RotationEventSink,
    clock: Callable[[], float] = time.time,
) -> RotationRecord:
    """Run ``record``'s rotation from the first step not done to the end, writing the record after each step.

    ``key`` is the new key when staging may be needed (``None``: every instance must already hold it, or the
    record carries generated material). Each event goes to ``emit`` as a typed value
    (:mod:`~soklet_core.fleet.rotation_events`). Raises
    :class:`RotationAbort` (the record stays at the last step done) or ``KeyringFileError`` (the record file).
    """
    run = _Run(tuple(targets), Path(record_path), emit, key)
    if record.step > RotationStep.STAGE:
        # Every step after staging is checked against the instances before it is skipped (staging is redone).
        readings = await read_snapshots(run.targets)
        _require_reachable(readings, None)
        mismatch = _mismatch(record, readings, round(clock() * 1000))
        if mismatch is not None:
            raise RecordMismatch(FleetStatus.DIVERGED, f"the record does not match the fleet: {mismatch}")
    # The activation moment this process saw itself: the one wait start taken without an instance's report.
    activated_here: list[int] = []

    async def activate(run: _Run, record: RotationRecord) -> RotationRecord:
        updated = await _activate(run, record, clock)
        assert updated.activated_at_ms is not None
        activated_here.append(updated.activated_at_ms)
        return updated

    steps: tuple[tuple[RotationStep, Callable[[_Run, RotationRecord], Any]], ...] = (
        (RotationStep.STAGE, _stage),
        (RotationStep.VERIFY_STAGED, _verify_staged),
        (RotationStep.ACTIVATE, activate),
        (RotationStep.VERIFY_ACTIVE, _verify_active),
        (RotationStep.WAIT, lambda run, record: _wait(run, record, clock, activated_here[-1:])),
        (RotationStep.REMOVE, _remove),
        (RotationStep.VERIFY_REMOVED, _verify_removed),
    )
    for step, action in steps:
        # Staging is checked again until its verification passed: an instance may have lost the key meanwhile.
        if record.step >= step and not (step is RotationStep.STAGE and record.step < RotationStep.VERIFY_STAGED):
            continue
        emit(StepStarted(step.label, tuple(target.name for target in run.targets)))
        updated: RotationRecord = await action(run, record)
        record = replace(updated, step=step)
        if step is RotationStep.VERIFY_STAGED:
            # Every instance holds the key now: no later step needs its material.
            record = replace(record, material=None)
        write_record(run.record_path, record)
        emit(StepDone(step.label))
    return record


async def _stage(run: _Run, record: RotationRecord) -> RotationRecord:
    readings = await read_snapshots(run.targets)
    _require_reachable(readings, RotationStep.STAGE)
    lacking = [
        target
        for target, reading in zip(run.targets, readings, strict=True)
        if reading.snapshot is not None and _held(reading, record) is not True
    ]
    if not lacking:
        return record
    key = run.key
    if key is None and record.material is not None:
        key = ProtectionKey.from_id_and_bytes(record.new_key, decode_base64url(record.material))
    if key is None:
        names = ", ".join(target.name for target in lacking)
        raise RotationAbort(
            FleetStatus.UNREACHABLE,
            f"key {record.new_key} is to be staged on {names} and its material is not at hand: give --key-file again",
        )
    body = {"id": key.id, "material": encode_base64url(key.material)}
    outcomes = await apply_changes(lacking, "stage", [body] * len(lacking))
    refused = _report_changes(run, RotationStep.STAGE, outcomes)
    if refused:
        # Such as the same id with other bytes (409): the comparison names exactly what differs where.
        report = compare_fleet(await read_snapshots(run.targets))
        names = ", ".join(outcome.name for outcome in refused)
        if any(outcome.reason == _CONFLICTING_MATERIAL for outcome in refused):
            # The id is taken: this rotation cannot go on under it. Nothing was activated, so what was staged is
            # taken back and the record removed: it would only block the next rotation.
            left = await _unstage(run, record)
            with contextlib.suppress(FileNotFoundError):
                run.record_path.unlink()
            # The refusing instances hold their own bytes under the id: not this rotation's to take back.
            kept = [name for name in left if name not in {outcome.name for outcome in refused}]
            taken_back = (
                f"it could not be removed again from {', '.join(kept)} (remove it there: keys remove "
                f"{record.new_key} --force)"
                if kept
                else "the key staged elsewhere was removed again"
            )
            raise RotationAbort(
                FleetStatus.DIVERGED,
                f"stage: key {record.new_key} on {names}: that id already holds other bytes; choose another --id "
                f"(nothing was activated, {taken_back}, and the record is gone)",
                report,
                record_removed=True,
            )
        raise RotationAbort(FleetStatus.DIVERGED, f"stage: refused on {names}; nothing was activated", report)
    return record


#: The admin API's refusal of a key id that holds other bytes.
_CONFLICTING_MATERIAL: Final = "conflicting-material"


async def _unstage(run: _Run, record: RotationRecord) -> list[str]:
    """Remove the new key (the recorded bytes only, never active) from every instance that holds it; the names
    of the instances it could not be removed from (unreachable, or a refusal)."""
    readings = await read_snapshots(run.targets)
    holding = []
    left = []
    for target, reading in zip(run.targets, readings, strict=True):
        if reading.snapshot is None:
            left.append(target.name)
        elif _held(reading, record) is True and reading.snapshot.active != record.new_key:
            holding.append(target)
    outcomes = await apply_changes(holding, "remove", [{"id": record.new_key}] * len(holding))
    for outcome in outcomes:
        done = outcome.snapshot is not None or outcome.reason == "unknown-key"
        run.emit(InstanceOutcome("unstage", outcome.name, done, outcome.status, None if done else outcome.problem))
        if not done:
            left.append(outcome.name)
    return left


def _held(reading: InstanceReading, record: RotationRecord) -> bool | None:
    # True: the new key with the recorded check value; False: the same id with other bytes (staging it again
    # is refused with 409 and named by the verification); None: absent.
    assert reading.snapshot is not None
    key = reading.snapshot.key(record.new_key)
    return None if key is None else key.check_value == record.check_value


async def _verify_staged(run: _Run, record: RotationRecord) -> RotationRecord:
    report = await _verified(run, RotationStep.VERIFY_STAGED)
    for reading in report.readings:
        assert reading.snapshot is not None
        held = reading.snapshot.key(record.new_key)
        if held is None or held.check_value != record.check_value:
            raise RotationAbort(
                FleetStatus.DIVERGED,
                f"{reading.name} does not hold key {record.new_key} with check value {record.check_value[:8]}",
                report,
            )
    return record


async def _activate(run: _Run, record: RotationRecord, clock: Callable[[], float]) -> RotationRecord:
    outcomes = await apply_changes(run.targets, "activate", [{"id": record.new_key}] * len(run.targets))
    # Counted from the moment the last instance answered its activation (a resumed run counts from its own).
    activated_at = round(clock() * 1000)
    _report_changes(run, RotationStep.ACTIVATE, outcomes)
    wait_ms = max([record.wait_ms, *(o.snapshot.max_state_lifetime_ms for o in outcomes if o.snapshot is not None)])
    updated = replace(record, activated_at_ms=activated_at, wait_ms=wait_ms)
    write_record(run.record_path, updated)
    return updated


async def _verify_active(run: _Run, record: RotationRecord) -> RotationRecord:
    report = await _verified(run, RotationStep.VERIFY_ACTIVE)
    for reading in report.readings:
        assert reading.snapshot is not None
        if reading.snapshot.active != record.new_key:
            raise RotationAbort(FleetStatus.DIVERGED, f"{reading.name} does not seal with {record.new_key}", report)
    lifetimes = [reading.snapshot.max_state_lifetime_ms for reading in report.readings if reading.snapshot is not None]
    return replace(record, wait_ms=max([record.wait_ms, *lifetimes]))


async def _wait(
    run: _Run, record: RotationRecord, clock: Callable[[], float], activated_here: list[int]
) -> RotationRecord:
    resumed_at = round(clock() * 1000)
    lost: dict[str, str] = {}
    while True:
        readings = await read_snapshots(run.targets)
        for reading in readings:
            # Reported once per loss, and kept waiting: an instance restarting comes back; one that does not is
            # named at the end of the wait, for the operator to exclude.
            if reading.snapshot is None and reading.name not in lost:
                lost[reading.name] = reading.problem or "no answer"
                run.emit(MemberLost(RotationStep.WAIT.label, reading.name, lost[reading.name]))
            elif reading.snapshot is not None and reading.name in lost:
                del lost[reading.name]
                run.emit(MemberBack(RotationStep.WAIT.label, reading.name))
        lifetimes = [reading.snapshot.max_state_lifetime_ms for reading in readings if reading.snapshot is not None]
        skew = skew_of(readings)
        if max(lifetimes, default=0) > record.wait_ms or skew > record.skew_ms:
            record = replace(record, wait_ms=max([record.wait_ms, *lifetimes]), skew_ms=max(record.skew_ms, skew))
            write_record(run.record_path, record)
        reserved = []
        for reading in readings:
            former = reading.snapshot.key(record.former_key) if reading.snapshot is not None else None
            if former is not None and former.reservations > 0:
                reserved.append(reading.name)
        reported = _reported_start(readings, record)
        if activated_here:
            floor = activated_here[0]
        elif reported is not None:
            floor = reported[0]
        else:
            # Nothing any instance reports bounds the former key's last seal: count from the resume.
            floor = resumed_at
        start = max(floor, record.activated_at_ms or 0, reported[0] if reported is not None else 0)
        remaining_ms = max(start + record.wait_ms + record.skew_ms - round(clock() * 1000), 0)
        run.emit(Waiting(remaining_ms, record.wait_ms, record.skew_ms, tuple(reserved), tuple(sorted(lost))))
        if remaining_ms == 0 and not reserved:
            if lost:
                # What a lost instance holds (a reservation, a late seal) is unknown: the wait cannot end for it.
                shown = ", ".join(f"{name} ({problem})" for name, problem in lost.items())
                raise RotationAbort(
                    FleetStatus.UNREACHABLE,
                    f"wait: unreachable: {shown}; the wait is over for the others: resume when it answers, or "
                    "exclude it (--exclude) and resume",
                    lost=tuple(lost),
                )
            return record
        await asyncio.sleep(min(WAIT_POLL_SECONDS, remaining_ms / 1000) if remaining_ms else WAIT_POLL_SECONDS)


def _reported_start(readings: Sequence[InstanceReading], record: RotationRecord) -> tuple[int, str] | None:
    """The latest moment (Unix ms) and the instance reporting it, of what the instances say bounds the wait's
    start from below: the new key's creation (it was staged before it was activated), the former key's
    retirement (when it stopped sealing there) and its last seal (a reservation taken before the activation may
    seal after it). ``None`` when no instance reports one."""
    latest: tuple[int, str] | None = None
    for reading in readings:
        snapshot = reading.snapshot
        if snapshot is None:
            continue
        new, former = snapshot.key(record.new_key), snapshot.key(record.former_key)
        moments = (
            _moment_ms(None if new is None else new.created),
            _moment_ms(None if former is None else former.retired),
            None if former is None else former.last_sealed_ms,
        )
        for moment in moments:
            if moment is not None and (latest is None or moment > latest[0]):
                latest = (moment, reading.name)
    return latest


def _moment_ms(text: str | None) -> int | None:
    # A snapshot's ISO 8601 time (created, retired) as Unix milliseconds.
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        # An instance's own text, not ours to repair: it then bounds nothing.
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


def _mismatch(record: RotationRecord, readings: Sequence[InstanceReading], now_ms: int) -> str | None:
    """Which step ``record`` says is done that the instances do not show, and what they show; ``None`` when
    they show every one."""
    snapshots = [(reading.name, reading.snapshot) for reading in readings if reading.snapshot is not None]

    def names(where: Callable[[AdminSnapshot], bool]) -> str:
        return ", ".join(name for name, snapshot in snapshots if where(snapshot))

    def lacks_new(snapshot: AdminSnapshot) -> bool:
        held = snapshot.key(record.new_key)
        return held is None or held.check_value != record.check_value

    said = f"it says {record.step.label} is done, but"
    lacking = names(lacks_new)
    if lacking:
        return f"{said} {lacking} hold no key {record.new_key} with check value {record.check_value[:8]}"
    if record.step >= RotationStep.ACTIVATE:
        other = names(lambda snapshot: snapshot.active != record.new_key)
        if other:
            return f"{said} {other} do not seal with {record.new_key}"
    if record.step >= RotationStep.REMOVE:
        holding = names(lambda snapshot: snapshot.key(record.former_key) is not None)
        if holding:
            return f"{said} {holding} still hold {record.former_key}"
    elif record.step >= RotationStep.WAIT:
        reserved = names(
            lambda snapshot: (former := snapshot.key(record.former_key)) is not None and former.reservations > 0
        )
        if reserved:
            return f"{said} {reserved} hold reservations on {record.former_key}"
        reported = _reported_start(readings, record)
        wait_ms = max([record.wait_ms, *(snapshot.max_state_lifetime_ms for _, snapshot in snapshots)])
        wait_ms += max(record.skew_ms, skew_of(readings))
        if reported is not None and reported[0] + wait_ms > now_ms:
            until = datetime.fromtimestamp((reported[0] + wait_ms) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return (
                f"{said} per {reported[1]} a state sealed under {record.former_key} may live until {until} "
                "(run --resume again after then)"
            )
    return None


async def _remove(run: _Run, record: RotationRecord) -> RotationRecord:
    outcomes = await apply_changes(run.targets, "remove", [{"id": record.former_key}] * len(run.targets))
    # An instance that no longer holds the former key (404 unknown-key) is done.
    _report_changes(run, RotationStep.REMOVE, outcomes, absent_is_done=True)
    return record


async def _verify_removed(run: _Run, record: RotationRecord) -> RotationRecord:
    report = await _verified(run, RotationStep.VERIFY_REMOVED)
    for reading in report.readings:
        assert reading.snapshot is not None
        if reading.snapshot.active != record.new_key or reading.snapshot.key(record.former_key) is not None:
            raise RotationAbort(
                FleetStatus.DIVERGED,
                f"{reading.name} still holds {record.former_key} or does not seal with {record.new_key}",
                report,
            )
    return record


async def _verified(run: _Run, step: RotationStep) -> FleetReport:
    report = compare_fleet(await read_snapshots(run.targets))
    run.emit(FleetVerified(step.label, report))
    problem = rotation_refusal(report, step.label)
    if problem is not None:
        raise problem
    return report


def rotation_refusal(report: FleetReport, when: str) -> RotationAbort | None:
    """Why ``report`` is no evidence that a rotation may go on, or ``None``: the fleet must be converged, with
    fingerprints of the current version (2) everywhere. ``when`` names the step in the message."""
    if report.status is not FleetStatus.CONVERGED:
        named = "".join(f"; {duplicate.describe()}" for duplicate in report.duplicates)
        return RotationAbort(report.status, f"{when}: the fleet is {report.status.value}{named}", report)
    versions = {reading.snapshot.fingerprint.version for reading in report.readings if reading.snapshot is not None}
    if versions != {CURRENT_FINGERPRINT_VERSION}:
        # Equal v1 fingerprints can equate different keys: they are no evidence of convergence.
        return RotationAbort(
            FleetStatus.INCOMPARABLE,
            f"{when}: the fleet reports v1 fingerprints (finish the software rollout first)",
            report,
        )
    return None


def _require_reachable(readings: Sequence[InstanceReading], step: RotationStep | None) -> None:
    # step None: the check of the record against the fleet, before any step.
    down = [reading for reading in readings if not reading.reachable]
    if down:
        shown = ", ".join(f"{reading.name} ({reading.problem})" for reading in down)
        when = step.label if step is not None else "checking the record"
        raise RotationAbort(FleetStatus.UNREACHABLE, f"{when}: unreachable: {shown}")


def _report_changes(
    run: _Run, step: RotationStep, outcomes: Sequence[ChangeOutcome], *, absent_is_done: bool = False
) -> list[ChangeOutcome]:
    """Emit each instance's outcome; raise on an unreachable instance (or, past staging, any failure); return
    the refused stage changes."""
    failed = []
    for outcome in outcomes:
        done = outcome.snapshot is not None or (absent_is_done and outcome.reason == "unknown-key")
        run.emit(InstanceOutcome(step.label, outcome.name, done, outcome.status, None if done else outcome.problem))
        if not done:
            failed.append(outcome)
    if not failed:
        return []
    shown = ", ".join(f"{outcome.name} ({outcome.problem})" for outcome in failed)
    unreachable = any(outcome.status is None for outcome in failed)
    if step is RotationStep.STAGE and not unreachable:
        return failed
    raise RotationAbort(FleetStatus.UNREACHABLE if unreachable else FleetStatus.DIVERGED, f"{step.label}: {shown}")


def skew_of(readings: Sequence[InstanceReading]) -> int:
    """The largest clock skew between the members that answered that their answers allow (ms, the upper bound of
    :func:`~soklet_core.fleet.clock.fleet_skew`): what a wait adds, since a state's expiry is judged on another
    member's clock. 0 with fewer than two clocks read."""
    clocks = [(reading.name, reading.clock) for reading in readings if reading.snapshot and reading.clock]
    return round(fleet_skew(clocks).upper_ms) if len(clocks) > 1 else 0


async def abort_rotation(
    targets: Sequence[AdminTarget],
    record: RotationRecord,
    record_path: str | os.PathLike[str],
    *,
    emit: RotationEventSink,
) -> None:
    """Abandon ``record``'s rotation: drop its material at once, remove the new key (the recorded bytes, never an
    active one) from every instance that holds it, then remove the record.

    Refused (:class:`RotationAbort`, diverged) when an instance shows the new key active or once active: an
    activation is not undone (finish it with ``--resume``). When an instance cannot be reached or refuses the
    removal, the record is kept (without material) and :class:`RotationAbort` names it: run the abort again.
    """
    path = Path(record_path)
    if record.material is not None:
        record = replace(record, material=None)
        write_record(path, record)
    run = _Run(tuple(targets), path, emit, None)
    readings = await read_snapshots(run.targets)
    activated = []
    for reading in readings:
        held = reading.snapshot.key(record.new_key) if reading.snapshot is not None else None
        if (
            held is not None
            and reading.snapshot is not None
            and (reading.snapshot.active == record.new_key or held.retired is not None)
        ):
            activated.append(reading.name)
    if activated:
        raise RotationAbort(
            FleetStatus.DIVERGED,
            f"abort: key {record.new_key} was activated on {', '.join(activated)}: an activation is not undone; "
            "finish the rotation with --resume",
        )
    emit(StepStarted("unstage", tuple(target.name for target in run.targets)))
    left = await _unstage(run, record)
    if left:
        raise RotationAbort(
            FleetStatus.UNREACHABLE,
            f"abort: key {record.new_key} may still be staged on {', '.join(left)}; the record is kept without "
            "material: run --abort again when they answer",
        )
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def removal_refusal(readings: Sequence[InstanceReading], key_id: str, now_ms: int) -> str | None:
    """Why removing ``key_id`` everywhere would break a state still open, or ``None``: an instance seals with it,
    holds a reservation on it, or reports it stopped sealing (or last sealed) less than the longest state
    lifetime plus the largest clock skew ago. A key no instance reports a moment for (staged, never active) may
    go."""
    lifetime = max((r.snapshot.max_state_lifetime_ms for r in readings if r.snapshot is not None), default=0)
    wait_ms = lifetime + skew_of(readings)
    for reading in readings:
        snapshot = reading.snapshot
        held = snapshot.key(key_id) if snapshot is not None else None
        if snapshot is None or held is None:
            continue
        if snapshot.active == key_id:
            return f"{reading.name} seals with {key_id} (activate another key first)"
        if held.reservations > 0:
            return f"{reading.name} holds reservations on {key_id}"
        moments = [moment for moment in (_moment_ms(held.retired), held.last_sealed_ms) if moment is not None]
        if moments and max(moments) + wait_ms > now_ms:
            until = datetime.fromtimestamp((max(moments) + wait_ms) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return f"per {reading.name} a state sealed under {key_id} may live until {until}"
    return None
