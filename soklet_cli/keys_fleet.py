"""``soklet keys stage|activate|remove|rotate --fleet``: the keys of every member of a fleet, through their admin
APIs; imported by those commands only when --fleet or --resolve is given (it brings the fleet's HTTP client)."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import typer
from rich.status import Status

from soklet_core.files import (
    KeyringFileError,
    utc_now,
)
from soklet_core.fleet import (
    AdminTarget,
    FleetChange,
    FleetRotator,
    FleetStatus,
    RecordError,
    RecordMismatch,
    RecordWritten,
    RotationAbort,
    RotationAction,
    RotationEvent,
    RotationLocked,
    RotationPlan,
    RotationRecord,
    RotationRefusal,
    RotationRefused,
    RotationRequest,
    Waiting,
    change_fleet,
    read_snapshots,
    record_path_for,
    removal_refusal,
    select_members,
)
from soklet_core.keys import (
    KeyringError,
    ProtectionKey,
    encode_base64url,
    printable_name,
)

from .exit_codes import ExitCode
from .keyring_path import (
    fail_for,
)
from .keys import _FleetSource, _say, _shown_argument, _unique_id, warn_if_unignored
from .output import (
    console,
    counted,
    emit_json,
    error_console,
    fail,
    file_error_text,
    shown_path,
)


def _members(source: _FleetSource, exclude: list[str] | None) -> tuple[tuple[AdminTarget, ...], tuple[str, ...]]:
    try:
        return select_members(source.targets(), exclude or [])
    except ValueError as error:
        fail(str(error), ExitCode.USAGE)


# ------------------------------------------------------------------------------- keys stage|activate|remove --fleet


def _stage_fleet(
    source: _FleetSource,
    exclude: list[str] | None,
    key_id: str | None,
    material: bytes | None,
    size: int,
    as_json: bool,
) -> None:
    targets, excluded = _members(source, exclude)
    if key_id is None:
        # --generate without --id: an id no member holds.
        readings = asyncio.run(read_snapshots(targets))
        held = {key.id for reading in readings if reading.snapshot is not None for key in reading.snapshot.keys}
        key_id = _unique_id(None, held, utc_now())
    key = (
        ProtectionKey.generate(key_id, size) if material is None else ProtectionKey.from_id_and_bytes(key_id, material)
    )
    body = {"id": key.id, "material": encode_base64url(key.material)}
    _report_repair("stage", key.id, asyncio.run(change_fleet(targets, "stage", body)), excluded, as_json, key)


def _remove_fleet(source: _FleetSource, exclude: list[str] | None, key_id: str, force: bool, as_json: bool) -> None:
    targets, excluded = _members(source, exclude)
    if not force:
        readings = asyncio.run(read_snapshots(targets))
        refusal = removal_refusal(readings, key_id, round(time.time() * 1000))
        if refusal is not None:
            fail(f"refused: {refusal}; remove it later (or now with --force)", ExitCode.REFUSED)
    _report_repair("remove", key_id, asyncio.run(change_fleet(targets, "remove", {"id": key_id})), excluded, as_json)


def _repair(
    source: _FleetSource, exclude: list[str] | None, action: str, body: dict[str, str], key_id: str, as_json: bool
) -> None:
    targets, excluded = _members(source, exclude)
    _report_repair(action, key_id, asyncio.run(change_fleet(targets, action, body)), excluded, as_json)


def _report_repair(
    action: str,
    key_id: str,
    outcomes: Sequence[FleetChange],
    excluded: Sequence[str],
    as_json: bool,
    key: ProtectionKey | None = None,
) -> None:
    unreachable = [outcome for outcome in outcomes if not outcome.done and outcome.status is None]
    refused = [outcome for outcome in outcomes if not outcome.done and outcome.status is not None]
    code = ExitCode.IO if unreachable else ExitCode.REFUSED if refused else ExitCode.OK
    conflicting = [outcome for outcome in refused if outcome.problem and "conflicting-material" in outcome.problem]
    if as_json:
        document: dict[str, Any] = {
            "action": action,
            "id": key_id,
            "ok": code is ExitCode.OK,
            "exit_code": int(code),
            "instances": [{"name": o.name, "ok": o.done, "status": o.status, "problem": o.problem} for o in outcomes],
            "excluded": list(excluded),
        }
        if key is not None:
            document["check_value"] = key.check_value_text
        emit_json(document)
    else:
        check = f" (check {key.check_value_text[:8]})" if key is not None else ""
        _say(f"{action} {key_id}{check} on {counted(len(outcomes), 'instance')}:")
        for outcome in outcomes:
            _say(f"  {printable_name(outcome.name)}: {'ok' if outcome.done else f'failed: {outcome.problem}'}")
        if excluded:
            _say(f"  excluded (not contacted): {', '.join(printable_name(name) for name in excluded)}")
        if code is ExitCode.OK:
            _say("done on every instance; check the fleet with soklet fleet check")
    if conflicting:
        error_console.print("soklet: that id already holds other bytes; choose another --id", markup=False)
    if code is not ExitCode.OK:
        failed = ", ".join(printable_name(outcome.name) for outcome in (*unreachable, *refused))
        error_console.print(f"soklet: {action} failed on {failed}", markup=False)
        raise typer.Exit(int(code))


# ------------------------------------------------------------------------------------------ keys rotate --fleet

_FLEET_EXIT: Final = {
    FleetStatus.CONVERGED: ExitCode.OK,
    FleetStatus.DIVERGED: ExitCode.REFUSED,
    FleetStatus.UNREACHABLE: ExitCode.IO,
    FleetStatus.INCOMPARABLE: ExitCode.IO,
    FleetStatus.DUPLICATED: ExitCode.USAGE,
}
#: The exit code of each refusal before any change (the core decides the refusal, the CLI its code).
_REFUSAL_EXIT: Final = {
    RotationRefusal.KEY_TWICE: ExitCode.USAGE,
    RotationRefusal.ABORT_OPTIONS: ExitCode.USAGE,
    RotationRefusal.NOT_CONFIRMED: ExitCode.USAGE,
    RotationRefusal.RESUME_GENERATE: ExitCode.USAGE,
    RotationRefusal.NO_KEY: ExitCode.USAGE,
    RotationRefusal.INVALID_REQUEST: ExitCode.USAGE,
    RotationRefusal.NO_RECORD: ExitCode.USAGE,
    RotationRefusal.ID_DIFFERS: ExitCode.USAGE,
    RotationRefusal.UNKNOWN_MEMBER: ExitCode.USAGE,
    RotationRefusal.NO_MEMBER_LEFT: ExitCode.USAGE,
    RotationRefusal.RECORD_MEMBERS: ExitCode.REFUSED,
    RotationRefusal.KEY_FILE: ExitCode.IO,
    RotationRefusal.KEY_TEXT: ExitCode.REFUSED,
    RotationRefusal.KEY_DIFFERS: ExitCode.REFUSED,
    RotationRefusal.KEY_NEEDED: ExitCode.USAGE,
    RotationRefusal.UNFINISHED: ExitCode.REFUSED,
    RotationRefusal.ALREADY_ACTIVE: ExitCode.REFUSED,
    RotationRefusal.ID_TAKEN: ExitCode.REFUSED,
    RotationRefusal.DRY_RUN: ExitCode.USAGE,
}
#: Seconds between two "waiting" lines when the output is not a terminal.
_WAIT_LINE_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True)
class _RotateOptions:
    key_id: str | None
    size: int
    key_file: Path | None
    generate: bool
    yes: bool
    dry_run: bool
    resume: bool
    abort: bool
    exclude: list[str]


def _rotate_fleet(
    source: _FleetSource, options: _RotateOptions, record_option: Path | None, allow_insecure: bool, as_json: bool
) -> None:
    # The rules are the core's (soklet_core.fleet.rotation_plan): this builds the request, renders the events
    # and maps the refusals to exit codes.
    record_path = record_path_for(record_option, source.fleet)
    again = _Again(source, record_option)
    with _refusals(record_path, again):
        request = RotationRequest(
            record_path=record_path,
            key_id=options.key_id,
            size=options.size,
            key_file=options.key_file,
            allow_insecure_key_file=allow_insecure,
            generate=options.generate,
            resume=options.resume,
            abort=options.abort,
            dry_run=options.dry_run,
            exclude=tuple(options.exclude),
            yes=options.yes,
            interactive=sys.stdin.isatty(),
        )
    emit = _Progress(as_json, again)
    rotator = FleetRotator(request, source.targets(), on_event=emit)
    try:
        with rotator.lock():
            _rotate_locked(rotator, request, source, again, emit)
    except RotationLocked as locked:
        fail(f"refused: {locked}", ExitCode.REFUSED)
    except OSError as error:
        fail(f"the lock file beside {shown_path(record_path)} could not be opened ({error.strerror})", ExitCode.IO)


@dataclass(frozen=True, slots=True)
class _Again:
    """The command lines that continue or abandon a rotation, as the operator would type them."""

    source: _FleetSource
    record_option: Path | None

    def line(self, action: str, exclude: Sequence[str] = ()) -> str:
        arguments = ["soklet", "keys", "rotate", *self.source.arguments()]
        if self.record_option is not None:
            arguments += ["--record", _shown_argument(self.record_option)]
        arguments.append(action)
        for name in exclude:
            arguments += ["--exclude", name]
        return shlex.join(arguments)


@contextlib.contextmanager
def _refusals(record_path: Path, again: _Again, action: RotationAction | None = None) -> Iterator[None]:
    """Exit with the documented code for a refusal before any change (the request, the record, the key file)."""
    try:
        yield
    except RotationRefused as refused:
        fail(_refusal_text(refused, record_path, again, action), _REFUSAL_EXIT[refused.reason])
    except RecordError as error:
        fail(f"{shown_path(record_path)}: {error}", ExitCode.IO)
    except KeyringFileError as error:
        fail(file_error_text(error), ExitCode.IO)
    except KeyringError as error:
        fail_for(error)


def _refusal_text(refused: RotationRefused, record_path: Path, again: _Again, action: RotationAction | None) -> str:
    # The core's message, but for the paths (shown as the CLI shows every path) and the command lines to run.
    if refused.reason is RotationRefusal.KEY_FILE and isinstance(refused.__cause__, KeyringFileError):
        fail_for(refused.__cause__)
    if refused.reason is RotationRefusal.NO_RECORD:
        option = "--abort" if action is RotationAction.ABORT else "--resume"
        return f"{option}: no rotation record at {shown_path(record_path)}"
    if refused.reason is RotationRefusal.UNFINISHED:
        return (
            f"a rotation is unfinished (step {refused.done_step} done) per {shown_path(record_path)}: "
            f"finish it with {again.line('--resume')} or abandon it with {again.line('--abort')}"
        )
    return refused.message


def _rotate_locked(
    rotator: FleetRotator, request: RotationRequest, source: _FleetSource, again: _Again, emit: _Progress
) -> None:
    plan = _planned(rotator, request, again, emit)
    if plan.action is RotationAction.ABORT:
        _confirm_abort(request.yes, plan.record)
        _abort(rotator, plan, emit)
        return
    if plan.action is RotationAction.CHECK:
        # A finished record is checked against the fleet too: the former key must be gone everywhere.
        _run_rotation(rotator, plan, emit)
        emit({"event": "finished", "step": plan.record.step.label, "new_key": plan.record.new_key})
        return
    emit(_plan(plan, source))
    if plan.dry_run:
        return
    _confirm(request.yes, plan.record)
    finished = _run_rotation(rotator, plan, emit)
    emit(
        {
            "event": "finished",
            "step": finished.step.label,
            "new_key": finished.new_key,
            "removed": finished.former_key,
            "record": str(plan.record_path),
            "excluded": list(finished.excluded),
        }
    )


def _planned(rotator: FleetRotator, request: RotationRequest, again: _Again, emit: _Progress) -> RotationPlan:
    with _refusals(request.record_path, again, request.action):
        try:
            return asyncio.run(rotator.plan())
        except RotationAbort as refusal:
            # The fleet before a new rotation: not converged, or not with v2 fingerprints everywhere.
            report = refusal.report
            differences = report.differences if report is not None else ()
            unreachable = report.unreachable if report is not None else ()
            emit(
                {
                    "event": "abort",
                    "step": "preflight",
                    "status": refusal.status.value,
                    "message": refusal.message,
                    "differences": [difference.to_json() for difference in differences],
                    "details": [difference.describe() for difference in differences]
                    + [f"{printable_name(r.name)}: {r.problem}" for r in unreachable],
                    "unreachable": [{"name": r.name, "problem": r.problem} for r in unreachable],
                }
            )
            raise typer.Exit(int(_FLEET_EXIT[refusal.status])) from None


def _abort(rotator: FleetRotator, plan: RotationPlan, emit: _Progress) -> None:
    try:
        asyncio.run(rotator.run(plan))
    except RotationAbort as refused:
        emit({"event": "abort", "status": refused.status.value, "message": refused.message, "details": []})
        raise typer.Exit(int(_FLEET_EXIT[refused.status])) from None
    except KeyringFileError as error:
        fail(file_error_text(error), ExitCode.IO)
    finally:
        emit.close()
    emit(
        {
            "event": "aborted",
            "new_key": plan.record.new_key,
            "record": str(plan.record_path),
            "excluded": list(plan.excluded),
        }
    )


def _run_rotation(rotator: FleetRotator, plan: RotationPlan, emit: _Progress) -> RotationRecord:
    try:
        return asyncio.run(rotator.run(plan))
    except RotationAbort as abort:
        # A record that does not match the fleet is no way to finish: --resume would refuse it again. A removed
        # record (a refused stage, rolled back) has nothing left to finish.
        kept = not isinstance(abort, RecordMismatch) and not abort.record_removed
        emit(
            {
                "event": "abort",
                "status": abort.status.value,
                "message": abort.message,
                "differences": [d.to_json() for d in abort.report.differences] if abort.report else [],
                "details": [d.describe() for d in abort.report.differences] if abort.report else [],
                "record": str(plan.record_path) if kept else None,
                "lost": list(abort.lost),
                "resume": emit.again.line("--resume") if kept else None,
                "resume_without_lost": emit.again.line("--resume", abort.lost) if kept and abort.lost else None,
            }
        )
        raise typer.Exit(int(_FLEET_EXIT[abort.status])) from None
    except KeyringFileError as error:
        fail(file_error_text(error), ExitCode.IO)
    except KeyboardInterrupt:
        emit.close()
        # The step under way may be half done on some instances; every step is idempotent, so --resume redoes it.
        error_console.print(
            f"soklet: the record {shown_path(plan.record_path)} is kept: finish with {emit.again.line('--resume')}",
            markup=False,
        )
        raise
    finally:
        emit.close()


def _plan(plan: RotationPlan, source: _FleetSource) -> dict[str, Any]:
    state = plan.record
    return {
        "event": "plan",
        "dry_run": plan.dry_run,
        "fleet": str(source.fleet) if source.fleet is not None else None,
        "resolve": source.resolve,
        "record": str(plan.record_path),
        "instances": list(state.instances),
        "excluded": list(state.excluded),
        "new_key": state.new_key,
        "check_value": state.check_value,
        "former_key": state.former_key,
        "done": state.step.label,
        "steps": [step.label for step in plan.steps],
        "wait_ms": state.wait_ms,
        "skew_ms": state.skew_ms,
    }


def _confirm(yes: bool, state: RotationRecord) -> None:
    if yes:
        return
    instances = counted(len(state.instances), "instance")
    question = f"Rotate {instances} to key {state.new_key} and remove {state.former_key}?"
    if not typer.confirm(question, default=False):
        fail("not confirmed; nothing changed", ExitCode.USAGE)


def _confirm_abort(yes: bool, state: RotationRecord) -> None:
    if yes:
        return
    if not typer.confirm(f"Abandon the rotation to {state.new_key} and remove it where it is staged?", default=False):
        fail("not confirmed; nothing changed", ExitCode.USAGE)


class _Progress:
    """Prints rotation events: JSON lines for scripts, lines for people. On a terminal the remaining wait counts
    down in place (a rich status line); a log gets a waiting line every _WAIT_LINE_SECONDS and the last one."""

    def __init__(self, as_json: bool, again: _Again) -> None:
        self._json = as_json
        self.again = again
        self._last_wait = float("-inf")
        self._status: Status | None = None

    def __call__(self, event: RotationEvent | dict[str, Any]) -> None:
        # The core's events arrive typed; the CLI's own (plan, abort, finished) as the documents it prints.
        if isinstance(event, RecordWritten):
            warn_if_unignored(event.path)
            return
        document = event if isinstance(event, dict) else event.to_json()
        if self._json:
            emit_json(document)
            sys.stdout.flush()
            return
        if isinstance(event, Waiting):
            last = event.over
            if console.is_terminal and not last:
                text = _event_lines(document, self.again)[0].strip()
                if self._status is None:
                    self._status = console.status(text)
                    self._status.start()
                else:
                    self._status.update(text)
                return
            now = time.monotonic()
            if now - self._last_wait < _WAIT_LINE_SECONDS and not last:
                return
            self._last_wait = now
        self.close()
        for line in _event_lines(document, self.again):
            _say(line)

    def close(self) -> None:
        """Stop the status line, if any (the terminal gets its cursor back)."""
        if self._status is not None:
            self._status.stop()
            self._status = None


def _event_lines(event: dict[str, Any], again: _Again) -> list[str]:
    kind = event["event"]
    if kind == "plan":
        title = "plan (dry run: nothing changes)" if event["dry_run"] else "plan"
        instances = ", ".join(printable_name(name) for name in event["instances"])
        steps = ", ".join(event["steps"]) or "every step is done"
        lines = [f"{title}: rotate {counted(len(event['instances']), 'instance')} ({instances})"]
        if event["excluded"]:
            left_out = ", ".join(printable_name(name) for name in event["excluded"])
            lines.append(f"  excluded (not contacted, stale afterwards): {left_out}")
        lifetime, skew = event["wait_ms"] / 1000, event["skew_ms"] / 1000
        return [
            *lines,
            f"  new key {event['new_key']} (check {event['check_value'][:8]}), former key {event['former_key']}",
            f"  steps: {steps}",
            f"  wait: {lifetime + skew:g} s after the activation, the longest state lifetime ({lifetime:g} s) plus "
            f"the largest clock skew measured between members ({skew:g} s)",
            f"  record: {shown_path(event['record'])}",
        ]
    if kind == "step":
        return [f"step {event['step']}"]
    if kind == "instance":
        outcome = "ok" if event["ok"] else f"failed: {event['problem']}"
        return [f"  {printable_name(event['instance'])}: {outcome}"]
    if kind == "lost":
        return [
            f"  lost: {printable_name(event['instance'])} ({event['problem']}); the wait goes on and stops at its "
            "end if it does not come back"
        ]
    if kind == "back":
        return [f"  back: {printable_name(event['instance'])} answers again"]
    if kind == "verified":
        fingerprint = event["fingerprint"]
        shown = f" (fingerprint v{fingerprint['version']}:{fingerprint['value']})" if fingerprint else ""
        return [f"  fleet {event['status']}{shown}"]
    if kind == "waiting":
        reserved = event["reserved_on"]
        held = f"; reservations on the former key: {', '.join(reserved)}" if reserved else ""
        lost = f"; not answering: {', '.join(event['lost'])}" if event.get("lost") else ""
        left, total = event["remaining_ms"] / 1000, (event["wait_ms"] + event.get("skew_ms", 0)) / 1000
        return [f"  waiting: {left:.0f} s of {total:.0f} s left{held}{lost}"]
    if kind == "abort":
        lines = [f"aborted: {event['message']}"]
        lines += [f"  - {text}" for text in event.get("details", [])]
        if event.get("record"):
            lines.append(f"the record is kept: finish with {event['resume']}")
        if event.get("resume_without_lost"):
            lines.append(f"or, leaving out what was lost: {event['resume_without_lost']}")
        return lines
    if kind == "aborted":
        excluded = event.get("excluded") or []
        left = f"; not contacted: {', '.join(excluded)}" if excluded else ""
        return [f"abandoned: {event['new_key']} removed wherever it was staged, the record deleted{left}"]
    if kind == "finished":
        removed = f", {event['removed']} removed everywhere" if event.get("removed") else ""
        lines = [f"rotated: {event['new_key']} is active everywhere{removed}"]
        if event.get("excluded"):
            stale = ", ".join(printable_name(name) for name in event["excluded"])
            lines.append(f"excluded and now stale: {stale} (rejoin: see docs/fleet.md, then soklet fleet check)")
        return lines
    return []
