"""What a file-mode fleet rotation is asked, what it will do, and the run that does it: every rule of
``soklet keys rotate --fleet|--resolve`` lives here, the CLI only parses options and renders.

A library caller rotates a fleet as the CLI does::

    request = RotationRequest(record_path=default_record_path("fleet.toml"), generate=True)
    rotator = FleetRotator(request, targets, on_event=print)
    with rotator.lock():
        plan = await rotator.plan()       # refusals before any change; plan.record is what --dry-run prints
        record = await rotator.run(plan)  # the steps of soklet_core.fleet.rotation, each recorded

* :class:`RotationRequest` holds what was asked (the new key from a file or generated, ``resume``, ``abort``,
  ``dry_run``, ``exclude``, the record file) and refuses a combination that means nothing as it is built.
* :meth:`FleetRotator.plan` reads the record and the fleet and refuses, before any change: a record in the way,
  members that are not the record's, a key file other than the recorded key, an id taken or already active, a
  fleet that is not converged with v2 fingerprints (:class:`~soklet_core.fleet.rotation.RotationAbort`).
* :meth:`FleetRotator.run` writes the record and runs the steps, or abandons the recorded rotation, reporting
  typed events (:mod:`soklet_core.fleet.rotation_events`).
* :meth:`FleetRotator.lock` holds the one-run-at-a-time lock beside the record (not for a dry run, which may look
  while a rotation runs).

Refusals are :class:`RotationRefused` with a closed :class:`RotationRefusal`; the fleet's verdicts stay
:class:`~soklet_core.fleet.rotation.RotationAbort`, the record's :class:`~soklet_core.fleet.rotation.RecordError`
and ``KeyringFileError``, the lock's :class:`RotationLocked` (or ``OSError`` when its file cannot be opened).
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from soklet_core.errors import ErrorReason, SokletError
from soklet_core.files import MAX_MATERIAL_FILE_BYTES, KeyringFileError, read_secret_file, utc_now
from soklet_core.keys import (
    DEFAULT_KEY_MATERIAL_BYTES,
    MAX_KEY_MATERIAL_BYTES,
    MIN_KEY_MATERIAL_BYTES,
    ProtectionKey,
    decode_base64url,
    encode_base64url,
    key_id_problem,
    new_key_id,
    printable_name,
)

from .client import AdminTarget, InstanceReading, apply_changes, read_snapshots
from .compare import compare_fleet
from .rotation import (
    RESOLVED_RECORD_NAME,
    RotationRecord,
    RotationStep,
    abort_rotation,
    default_record_path,
    read_record,
    rotate_fleet,
    rotation_refusal,
    skew_of,
    write_record,
)
from .rotation_events import RecordWritten, RotationEventSink

__all__ = [
    "LOCK_SUFFIX",
    "MAX_LOCK_BYTES",
    "FleetChange",
    "FleetRotator",
    "RotationAction",
    "RotationLocked",
    "RotationPlan",
    "RotationRefusal",
    "RotationRefused",
    "RotationRequest",
    "change_fleet",
    "id_taken",
    "lock_path",
    "record_path_for",
    "rotation_lock",
    "select_members",
]


class RotationRefusal(ErrorReason):
    """Why a rotation was refused before any change (the CLI maps each to its exit code)."""

    KEY_TWICE = "key-twice", "the new key was both given in a file and to be generated"
    ABORT_OPTIONS = "abort-options", "an abort takes no new key, no resume and no dry run"
    NOT_CONFIRMED = "not-confirmed", "a run that changes the fleet was not confirmed and nobody can be asked"
    RESUME_GENERATE = "resume-generate", "a resumed rotation continues with the recorded key: it generates none"
    NO_KEY = "no-key", "a new rotation needs its new key, from a file or generated"
    INVALID_REQUEST = "invalid-request", "a key id or a material size is out of bounds"
    NO_RECORD = "no-record", "there is no rotation record to resume or abort"
    ID_DIFFERS = "id-differs", "the id given is not the recorded new key"
    UNKNOWN_MEMBER = "unknown-member", "an excluded name is no member of the fleet"
    NO_MEMBER_LEFT = "no-member-left", "every member is excluded"
    RECORD_MEMBERS = "record-members", "the members listed, less the exclusions, are not the record's"
    KEY_FILE = "key-file", "the key file could not be read"
    KEY_TEXT = "key-text", "the key file does not hold base64url text"
    KEY_DIFFERS = "key-differs", "the key file holds other material than the recorded new key"
    KEY_NEEDED = "key-needed", "the recorded key is still to be staged and its material is not at hand"
    UNFINISHED = "unfinished", "an unfinished rotation's record is in the way"
    ALREADY_ACTIVE = "already-active", "the new key is already the active key"
    ID_TAKEN = "id-taken", "a member holds the new key's id with other bytes"
    DRY_RUN = "dry-run", "a dry run's plan changes nothing and is not run"


class RotationRefused(SokletError, ValueError):
    """A rotation refused before any change: ``reason`` says why, ``message`` is fixed text naming options, key
    ids, members and paths the operator gave (never material). ``done_step`` is the step an unfinished record
    reached (``UNFINISHED``). A key file that could not be read (``KEY_FILE``) carries the file's own
    ``KeyringFileError`` as its ``__cause__``."""

    def __init__(self, reason: RotationRefusal, message: str, *, done_step: str | None = None) -> None:
        super().__init__(reason, message)
        self.message = message
        self.done_step = done_step


def _refuse(reason: RotationRefusal, message: str) -> RotationRefused:
    return RotationRefused(reason, message)


@dataclass(frozen=True, slots=True, kw_only=True)
class RotationRequest:
    """What a file-mode rotation was asked; a combination that means nothing is refused
    (:class:`RotationRefused`) as it is built, in the order the CLI has always reported them.

    ``key_file`` (base64url material, a 0600 file unless ``allow_insecure_key_file``) or ``generate`` (``size``
    bytes from the CSPRNG) give a new rotation its key; ``key_id`` its id (default: a fresh one no member holds).
    ``resume`` finishes the recorded rotation, ``abort`` abandons it, ``dry_run`` plans and changes nothing.
    ``exclude`` names members left out, uncontacted. ``yes``: the caller will not ask for a confirmation; without
    it, ``interactive`` must say somebody can be asked (the CLI: standard input is a terminal)."""

    record_path: Path
    key_id: str | None = None
    size: int = DEFAULT_KEY_MATERIAL_BYTES
    key_file: Path | None = None
    allow_insecure_key_file: bool = False
    generate: bool = False
    resume: bool = False
    abort: bool = False
    dry_run: bool = False
    exclude: tuple[str, ...] = ()
    yes: bool = True
    interactive: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "record_path", Path(self.record_path))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        if self.key_file is not None and self.generate:
            raise _refuse(RotationRefusal.KEY_TWICE, "give --key-file PATH or --generate, not both")
        if self.abort and (self.resume or self.generate or self.key_file is not None or self.dry_run or self.key_id):
            raise _refuse(
                RotationRefusal.ABORT_OPTIONS,
                "--abort abandons the recorded rotation: --resume, --generate, --key-file, --id and --dry-run do "
                "not apply",
            )
        if not (self.yes or self.dry_run or self.interactive):
            # Refused before any instance is contacted: a script must say --yes.
            raise _refuse(
                RotationRefusal.NOT_CONFIRMED,
                "standard input is not a terminal: give --yes to rotate the fleet (or --dry-run)",
            )
        if self.resume and self.generate:
            raise _refuse(
                RotationRefusal.RESUME_GENERATE, "--resume continues with the recorded key: --generate does not apply"
            )
        if not (self.resume or self.abort) and self.key_file is None and not self.generate:
            raise _refuse(
                RotationRefusal.NO_KEY, "give the new key with --key-file PATH or --generate (or --resume a rotation)"
            )
        if self.key_id is not None and key_id_problem(self.key_id) is not None:
            # The id is not repeated: a mistyped id could be a pasted secret.
            raise _refuse(RotationRefusal.INVALID_REQUEST, "--id is no valid key id")
        if not MIN_KEY_MATERIAL_BYTES <= self.size <= MAX_KEY_MATERIAL_BYTES:
            raise _refuse(
                RotationRefusal.INVALID_REQUEST,
                f"--bytes is {MIN_KEY_MATERIAL_BYTES} to {MAX_KEY_MATERIAL_BYTES}",
            )

    @property
    def action(self) -> RotationAction:
        """What the run does: abort, resume (or check a finished record), or start."""
        if self.abort:
            return RotationAction.ABORT
        return RotationAction.RESUME if self.resume else RotationAction.START


def record_path_for(record: str | os.PathLike[str] | None, fleet_file: str | os.PathLike[str] | None) -> Path:
    """The record file a rotation uses: ``record`` when given, else the fleet file's path plus
    :data:`~soklet_core.fleet.RECORD_SUFFIX`, else (members found by ``--resolve``)
    :data:`~soklet_core.fleet.RESOLVED_RECORD_NAME` in the working folder."""
    if record is not None:
        return Path(record)
    if fleet_file is not None:
        return default_record_path(fleet_file)
    return Path(RESOLVED_RECORD_NAME)


class RotationAction(enum.Enum):
    """What a plan does when it is run."""

    #: A new rotation: the record is written, then every step runs.
    START = "start"
    #: The recorded rotation, from its first step not done.
    RESUME = "resume"
    #: The record says every step is done: the fleet is checked against it (the former key gone), nothing changes.
    CHECK = "check"
    #: The recorded rotation is abandoned: the staged key removed everywhere, then the record.
    ABORT = "abort"


@dataclass(frozen=True, slots=True)
class RotationPlan:
    """What a run will do: the record it starts from (ids, check value, wait, step done), the members it contacts
    and those it leaves out, and the new key when staging may need it (never in the repr)."""

    action: RotationAction
    record: RotationRecord
    targets: tuple[AdminTarget, ...]
    excluded: tuple[str, ...]
    record_path: Path
    dry_run: bool
    key: ProtectionKey | None = field(default=None, repr=False)

    @property
    def steps(self) -> tuple[RotationStep, ...]:
        """The steps still to run."""
        return tuple(step for step in RotationStep if step > self.record.step)


class FleetRotator:
    """One file-mode rotation run for ``request`` over ``targets`` (every member listed, exclusions not yet
    applied): :meth:`lock`, :meth:`plan`, then :meth:`run`. Events go to ``on_event``."""

    def __init__(
        self,
        request: RotationRequest,
        targets: Sequence[AdminTarget],
        *,
        on_event: RotationEventSink,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._request = request
        self._targets = tuple(targets)
        self._emit = on_event
        self._clock = clock

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the rotation lock for the block (:func:`rotation_lock`); a dry run takes none: it changes nothing
        and may look while a rotation runs."""
        if self._request.dry_run:
            yield
            return
        with rotation_lock(self._request.record_path, clock=self._clock):
            yield

    async def plan(self) -> RotationPlan:
        """Read the record and the fleet and decide what the run will do; every refusal comes before any change.

        Raises :class:`RotationRefused`, :class:`~soklet_core.fleet.rotation.RotationAbort` (a new rotation on a
        fleet not converged with v2 fingerprints), :class:`~soklet_core.fleet.rotation.RecordError` or
        ``KeyringFileError`` (the record file)."""
        action = self._request.action
        if action is RotationAction.ABORT:
            return self._abort_plan()
        if action is RotationAction.RESUME:
            return await self._resume_plan()
        return await self._start_plan()

    async def run(self, plan: RotationPlan) -> RotationRecord:
        """Carry ``plan`` out and return the record it ends with (for an abort: the record abandoned, now gone).

        A new or resumed rotation first writes its record (0600; reported by :class:`RecordWritten`). Raises
        :class:`~soklet_core.fleet.rotation.RotationAbort` (the record stays at the last step done, unless the
        abort says it was removed), ``KeyringFileError`` (the record file) or :class:`RotationRefused`
        (``DRY_RUN``: only a check of a finished record runs in a dry run, since it changes nothing)."""
        path = plan.record_path
        if plan.dry_run and plan.action is not RotationAction.CHECK:
            raise _refuse(RotationRefusal.DRY_RUN, "a dry run changes nothing: its plan is not run")
        if plan.action is RotationAction.ABORT:
            await abort_rotation(plan.targets, plan.record, path, emit=self._emit)
            return plan.record
        if plan.action is not RotationAction.CHECK:
            write_record(path, plan.record)
            self._emit(RecordWritten(path))
        return await rotate_fleet(plan.targets, plan.record, path, key=plan.key, emit=self._emit, clock=self._clock)

    def _existing_record(self, option: str) -> RotationRecord:
        path = self._request.record_path
        if not path.exists():
            raise _refuse(RotationRefusal.NO_RECORD, f"{option}: no rotation record at {path}")
        return read_record(path)

    def _plan(
        self,
        action: RotationAction,
        record: RotationRecord,
        targets: tuple[AdminTarget, ...],
        excluded: tuple[str, ...],
        key: ProtectionKey | None = None,
    ) -> RotationPlan:
        request = self._request
        return RotationPlan(action, record, targets, excluded, request.record_path, request.dry_run, key)

    def _abort_plan(self) -> RotationPlan:
        record = self._existing_record("--abort")
        # Every member not excluded now or by the record: a key staged anywhere is to be taken back.
        remaining = [target for target in self._targets if target.name not in record.excluded]
        targets, excluded = select_members(remaining, self._request.exclude)
        return self._plan(RotationAction.ABORT, record, targets, (*record.excluded, *excluded))

    async def _resume_plan(self) -> RotationPlan:
        request = self._request
        record = self._existing_record("--resume")
        if request.key_id is not None and request.key_id != record.new_key:
            raise _refuse(RotationRefusal.ID_DIFFERS, "--resume: --id differs from the recorded new key")
        try:
            targets, excluded = select_members(self._targets, request.exclude, record)
        except RotationRefused as refused:
            raise _refuse(RotationRefusal(refused.reason), f"--resume: {refused.message}") from None
        if excluded != record.excluded:
            record = replace(record, instances=tuple(target.name for target in targets), excluded=excluded)
        key = None
        if request.key_file is not None:
            key = ProtectionKey.from_id_and_bytes(record.new_key, self._material())
            if key.check_value_text != record.check_value:
                raise _refuse(
                    RotationRefusal.KEY_DIFFERS,
                    "--key-file holds other material than the recorded new key (check values differ)",
                )
        if key is None and record.material is None and record.step < RotationStep.VERIFY_STAGED:
            lacking = await _lacking(targets, record)
            if lacking:
                raise _refuse(
                    RotationRefusal.KEY_NEEDED,
                    f"--resume: key {record.new_key} is still to be staged on {', '.join(lacking)}: "
                    "give the same --key-file again",
                )
        action = RotationAction.CHECK if record.finished else RotationAction.RESUME
        return self._plan(action, record, targets, excluded, key)

    async def _start_plan(self) -> RotationPlan:
        request = self._request
        targets, excluded = select_members(self._targets, request.exclude)
        if request.record_path.exists():
            previous = read_record(request.record_path)
            if not previous.finished:
                raise RotationRefused(
                    RotationRefusal.UNFINISHED,
                    f"a rotation is unfinished (step {previous.step.label} done) per {request.record_path}: "
                    "finish it with --resume or abandon it with --abort",
                    done_step=previous.step.label,
                )
        readings = await read_snapshots(targets)
        refusal = rotation_refusal(compare_fleet(readings), "before the rotation")
        if refusal is not None:
            raise refusal
        snapshots = [reading.snapshot for reading in readings if reading.snapshot is not None]
        former = snapshots[0].active
        held = {key.id for snapshot in snapshots for key in snapshot.keys}
        new_id = request.key_id if request.key_id is not None else new_key_id(held, now=utc_now())
        if new_id == former:
            raise _refuse(RotationRefusal.ALREADY_ACTIVE, f"key {new_id} is already the active key")
        if request.key_file is not None:
            key = ProtectionKey.from_id_and_bytes(new_id, self._material())
        else:
            key = ProtectionKey.generate(new_id, request.size)
        taken = id_taken(readings, new_id, key.check_value_text)
        if taken:
            raise _refuse(
                RotationRefusal.ID_TAKEN,
                f"refused: key {new_id} is already on {', '.join(printable_name(name) for name in taken)}: that id "
                "already holds other bytes; choose another --id",
            )
        record = RotationRecord(
            tuple(target.name for target in targets),
            new_id,
            former,
            key.check_value_text,
            wait_ms=max(snapshot.max_state_lifetime_ms for snapshot in snapshots),
            material=encode_base64url(key.material) if request.generate else None,
            excluded=excluded,
            skew_ms=skew_of(readings),
        )
        return self._plan(RotationAction.START, record, targets, excluded, key)

    def _material(self) -> bytes:
        # The key file is read only once the plan needs it: a refusal before leaves it unread.
        request = self._request
        assert request.key_file is not None
        try:
            raw = read_secret_file(
                request.key_file,
                limit=MAX_MATERIAL_FILE_BYTES,
                allow_insecure_permissions=request.allow_insecure_key_file,
            )
        except KeyringFileError as error:
            raise RotationRefused(RotationRefusal.KEY_FILE, str(error)) from error
        try:
            return decode_base64url(raw.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            raise _refuse(
                RotationRefusal.KEY_TEXT, "refused: the key material must be base64url text without padding"
            ) from None


async def _lacking(targets: Sequence[AdminTarget], record: RotationRecord) -> list[str]:
    # The instances that answer without the recorded key (absent or other bytes); an unreachable one is left for
    # the stage step to report.
    lacking = []
    for reading in await read_snapshots(targets):
        held = reading.snapshot.key(record.new_key) if reading.snapshot is not None else None
        if reading.snapshot is not None and (held is None or held.check_value != record.check_value):
            lacking.append(printable_name(reading.name))
    return lacking


# ------------------------------------------------------------------------------------------------------ the lock

#: The lock file is the record's path plus this suffix (it holds the holder's pid and start, no secret).
LOCK_SUFFIX: Final = ".lock"
#: Largest lock file content read when naming the holder.
MAX_LOCK_BYTES: Final = 256


def lock_path(record_path: str | os.PathLike[str]) -> Path:
    """The lock file beside a record: its path plus :data:`LOCK_SUFFIX`."""
    path = Path(record_path)
    return path.with_name(path.name + LOCK_SUFFIX)


class RotationLocked(SokletError):
    """Another run holds the rotation's lock; ``holder`` names its pid and since when (what its lock file says).

    There is no reason enum (``reason`` is ``None``): one meaning, another rotation is running.
    """

    def __init__(self, holder: str) -> None:
        self.holder = holder
        super().__init__(None, f"another rotation of this fleet is running ({holder}); it holds {LOCK_SUFFIX}")


@contextlib.contextmanager
def rotation_lock(record_path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time) -> Iterator[None]:
    """Hold the exclusive lock beside ``record_path`` (``flock`` on :func:`lock_path`, mode 0600) for the block,
    or raise :class:`RotationLocked` at once, naming the holder's pid and since when.

    The kernel releases the lock when its holder exits, even by ``kill -9``: a lock file left behind blocks
    nothing. The holder removes the file before it lets go, so a finished run leaves its folder as it found it;
    a run that locked a file already unlinked this way (it opened the path just before) sees that the path no
    longer names its file and tries again.
    """
    path = lock_path(record_path)
    for _ in range(_LOCK_ATTEMPTS):
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RotationLocked(_holder(os.pread(descriptor, MAX_LOCK_BYTES, 0))) from None
            held = os.fstat(descriptor)
            try:
                current = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if (current.st_dev, current.st_ino) != (held.st_dev, held.st_ino):
                continue
            since = datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, f"pid {os.getpid()} since {since}\n".encode("ascii"), 0)
            try:
                yield
            finally:
                # Unlinked while still held: no other run can lock this file and find it named by the path.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            return
        finally:
            os.close(descriptor)
    raise RotationLocked("the lock file kept changing under it")


#: Attempts at locking a lock file that another run removed meanwhile.
_LOCK_ATTEMPTS: Final = 5


def _holder(content: bytes) -> str:
    # What the holder wrote: "pid N since TIME"; anything else is not repeated.
    text = content.decode("ascii", "replace").strip()
    parts = text.split(" ")
    if len(parts) == 4 and parts[0] == "pid" and parts[1].isdigit() and parts[2] == "since" and parts[3].isprintable():
        return text
    return "its holder did not say who it is yet"


def select_members(
    targets: Sequence[AdminTarget], exclude: Sequence[str], record: RotationRecord | None = None
) -> tuple[tuple[AdminTarget, ...], tuple[str, ...]]:
    """The members a rotation contacts and the ones it leaves out: ``exclude`` plus, on a resume, what the record
    already excluded. Raises :class:`RotationRefused` (a ``ValueError``; fixed text naming the problem) for an
    excluded name that is no member (``UNKNOWN_MEMBER``), when nothing is left (``NO_MEMBER_LEFT``; on a resume
    ``RECORD_MEMBERS``), or for a record whose members are not the listed ones less the exclusions
    (``RECORD_MEMBERS``)."""
    names = [target.name for target in targets]
    unknown = [name for name in exclude if name not in names]
    if unknown:
        raise RotationRefused(RotationRefusal.UNKNOWN_MEMBER, f"--exclude: no member is named {unknown[0]}")
    left_out = set(exclude) | set(record.excluded if record is not None else ())
    kept = tuple(target for target in targets if target.name not in left_out)
    excluded = tuple(name for name in names if name in left_out)
    if not kept:
        # On a resume the record's members are what is left out: the record cannot go on with these members.
        reason = RotationRefusal.NO_MEMBER_LEFT if record is None else RotationRefusal.RECORD_MEMBERS
        raise RotationRefused(reason, "every member is excluded: nothing to rotate")
    if record is not None:
        # Exclusions only shrink the recorded members: an instance cannot join a rotation under way.
        expected = tuple(name for name in record.instances if name not in left_out)
        if tuple(target.name for target in kept) != expected:
            raise RotationRefused(
                RotationRefusal.RECORD_MEMBERS, "the members listed are not the record's (less the exclusions)"
            )
    return kept, excluded


def id_taken(readings: Sequence[InstanceReading], key_id: str, check_value: str) -> tuple[str, ...]:
    """The instances that hold ``key_id`` with other bytes than ``check_value`` (staging it there is refused with
    409 conflicting-material)."""
    taken = []
    for reading in readings:
        held = reading.snapshot.key(key_id) if reading.snapshot is not None else None
        if held is not None and held.check_value != check_value:
            taken.append(reading.name)
    return tuple(taken)


@dataclass(frozen=True, slots=True)
class FleetChange:
    """One instance's outcome of a repair step (``keys stage|activate|remove --fleet``): ``done`` (including a
    no-op: already staged, already active, already absent), the HTTP status (``None``: no answer) and the
    problem (fixed text)."""

    name: str
    done: bool
    status: int | None
    problem: str | None = None


async def change_fleet(targets: Sequence[AdminTarget], action: str, body: dict[str, str]) -> tuple[FleetChange, ...]:
    """Apply one keyring step (``stage``, ``activate`` or ``remove``) to every target through the admin API; a
    removal of a key an instance does not hold counts as done."""
    if action not in {"stage", "activate", "remove"}:
        raise ValueError("unknown repair step")
    outcomes = await apply_changes(targets, action, [body] * len(targets))
    return tuple(
        FleetChange(
            outcome.name,
            done := (outcome.snapshot is not None or (action == "remove" and outcome.reason == "unknown-key")),
            outcome.status,
            None if done else outcome.problem,
        )
        for outcome in outcomes
    )
