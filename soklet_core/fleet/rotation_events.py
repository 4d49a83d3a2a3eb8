"""What a file-mode fleet rotation reports while it runs: one frozen value per event, for a callback.

The runner (:class:`~soklet_core.fleet.rotation_plan.FleetRotator`, and :func:`~soklet_core.fleet.rotate_fleet`
below it) calls its ``on_event`` with these values; a caller switches on their type. :meth:`to_json` is each
event as ``soklet keys rotate --fleet --json`` prints it (one JSON object per line, ``event`` naming the kind),
so the CLI renders the core's values and never builds the wire shape itself. No event carries key material.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .compare import FleetReport, FleetStatus

__all__ = [
    "FleetVerified",
    "InstanceOutcome",
    "MemberBack",
    "MemberLost",
    "RecordWritten",
    "RotationEvent",
    "RotationEventSink",
    "StepDone",
    "StepStarted",
    "Waiting",
]


@dataclass(frozen=True, slots=True)
class StepStarted:
    """A step begins on ``instances`` (``step`` is a step's label, or ``unstage`` for an abort)."""

    step: str
    instances: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The event as ``--json`` prints it."""
        return {"event": "step", "step": self.step, "instances": list(self.instances)}


@dataclass(frozen=True, slots=True)
class StepDone:
    """A step is done everywhere and recorded."""

    step: str

    def to_json(self) -> dict[str, Any]:
        """The event as ``--json`` prints it."""
        return {"event": "done", "step": self.step}


@dataclass(frozen=True, slots=True)
class InstanceOutcome:
    """One instance's answer to a change (``ok`` includes a no-op); ``status`` is ``None`` without an answer,
    ``problem`` fixed text when not ``ok``."""

    step: str
    instance: str
    ok: bool
    status: int | None
    problem: str | None

    def to_json(self) -> dict[str, Any]:
        """The event as ``--json`` prints it."""
        return {
            "event": "instance",
            "step": self.step,
            "instance": self.instance,
            "ok": self.ok,
            "status": self.status,
            "problem": self.problem,
        }


@dataclass(frozen=True, slots=True)
class FleetVerified:
    """The fleet was read and compared after ``step``: the verdict and what differs."""

    step: str
    report: FleetReport

    @property
    def status(self) -> FleetStatus:
        """The fleet's verdict."""
        return self.report.status

    def to_json(self) -> dict[str, Any]:
        """The event as ``--json`` prints it."""
        report = self.report
        first = report.readings[0].snapshot if report.readings else None
        converged = report.status is FleetStatus.CONVERGED and first is not None
        return {
            "event": "verified",
            "step": self.step,
            "status": report.status.value,
            "fingerprint": first.fingerprint.to_json() if converged and first is not None else None,
            "differences": [difference.to_json() for difference in report.differences],
            "unreachable": [{"name": r.name, "problem": r.problem} for r in report.unreachable],
        }


@dataclass(frozen=True, slots=True)
class MemberLost:
    """A member stopped answering during the wait (reported once per loss; the wait goes on)."""

    step: str
    instance: str
    problem: str

    def to_json(self) -> dict[str, Any]:
        """The event as ``--json`` prints it."""
        return {"event": "lost", "step": self.step, "instance": self.instance, "problem": self.problem}


@dataclass(frozen=True, slots=True)
class MemberBack:
    """A member lost during the wait answers again."""

    step: str
    instance: str

    def to_json(self) -> dict[str, Any]:
        """The event as ``--json`` prints it."""
        return {"event": "back", "step": self.step, "instance": self.instance}


@dataclass(frozen=True, slots=True)
class Waiting:
    """The wait before the former key goes: ``remaining_ms`` left of ``wait_ms`` plus ``skew_ms``, the members
    holding reservations on the former key and those not answering (each poll reports one)."""

    remaining_ms: int
    wait_ms: int
    skew_ms: int
    reserved_on: tuple[str, ...]
    lost: tuple[str, ...]

    @property
    def over(self) -> bool:
        """Whether this is the wait's last report (nothing left, nothing reserved)."""
        return self.remaining_ms == 0 and not self.reserved_on

    def to_json(self) -> dict[str, Any]:
        """The event as ``--json`` prints it."""
        return {
            "event": "waiting",
            "step": "wait",
            "remaining_ms": self.remaining_ms,
            "wait_ms": self.wait_ms,
            "skew_ms": self.skew_ms,
            "reserved_on": list(self.reserved_on),
            "lost": list(self.lost),
        }


@dataclass(frozen=True, slots=True)
class RecordWritten:
    """The record file was written for the first time by this run (it may hold material: mode 0600). Not
    printed by ``--json``; the CLI warns when it sits unignored in a git work tree."""

    path: Path

    def to_json(self) -> None:
        """Nothing: a script learns the record's path from the plan."""
        return None


#: Every event a file-mode rotation reports.
RotationEvent = (
    StepStarted | StepDone | InstanceOutcome | FleetVerified | MemberLost | MemberBack | Waiting | RecordWritten
)
#: The callback a rotation reports its events to.
RotationEventSink = Callable[[RotationEvent], None]
