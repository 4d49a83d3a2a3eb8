"""Fleet rotation through the store: one command, members from the heartbeats, one rotation at a time.

In store mode the keyring is the store's (wrapped under the KEK), so a step is one transaction that raises the
fleet generation, and "every instance holds it" is read from the heartbeats, never from a fleet file. Steps:

1. ``stage``: the new key as a verification key (generation g1);
2. ``staged``: every live member applied g1 (a member whose heartbeat stopped is reported and excluded: when it
   comes back it loads the current keyring before it is ready, so it cannot seal with the former key);
3. ``activate``: the new key seals, the former one opens only (g2; the store records when it stopped sealing);
4. ``active``: every live member applied g2;
5. ``wait``: the longest state lifetime any member reports plus the largest clock skew measured between members,
   counted from the activation, so no state the former key sealed can still be opened when it goes;
6. ``remove``: the former key (g3);
7. ``removed``: every live member applied g3; the record is deleted.

The rotation holds the store's rotation lock for its whole run (a PostgreSQL advisory lock: a second rotation is
refused at once naming the holder and since when, and a killed holder frees it). Its record lives in the store
(JSON, no material: the key is already in the store, wrapped), so ``--resume`` from any machine continues it and
``--abort`` clears it, removing a new key that was never activated. A record never claims more than the store
shows: every step re-reads the keyring before it acts.
"""

from __future__ import annotations

import asyncio
import enum
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from soklet_core.errors import SokletError
from soklet_core.keys import KeyringError, ProtectionKey, is_valid_key_id, new_key_id
from soklet_core.protocol import DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME
from soklet_core.store.fleet_keyring import FleetKeyring
from soklet_core.store.keyring_records import Heartbeat, RotationRecord, StoredKeyring, StoredKeyRole

__all__ = [
    "MEMBER_TIMEOUT_SECONDS",
    "STEP_TIMEOUT_SECONDS",
    "STORE_RECORD_FORMAT",
    "FleetMember",
    "StoreFleetReport",
    "StoreFleetStatus",
    "StorePlan",
    "StoreRotation",
    "StoreRotationAbort",
    "StoreRotationStep",
    "StoreRotator",
    "drain_wait_ms",
    "fleet_members",
    "judge_store_fleet",
    "largest_skew_ms",
    "removal_lifetime",
]

#: A member whose last heartbeat is older than this is gone: reported and excluded from the waits.
MEMBER_TIMEOUT_SECONDS: Final = 15.0
#: The longest a step waits for every live member to apply its generation before the rotation stops (resumable).
STEP_TIMEOUT_SECONDS: Final = 120.0
#: Seconds between two reads of the heartbeats while waiting.
WAIT_POLL_SECONDS: Final = 0.5
#: The record document's format name.
STORE_RECORD_FORMAT: Final = "soklet-store-rotation-v1"


class StoreRotationStep(enum.IntEnum):
    """The last step a store rotation completed (``NONE``: nothing yet)."""

    NONE = 0
    STAGE = 1
    STAGED = 2
    ACTIVATE = 3
    ACTIVE = 4
    WAIT = 5
    REMOVE = 6
    REMOVED = 7

    @property
    def label(self) -> str:
        """The step's name in events and the record."""
        return self.name.lower()


class StoreRotationAbort(SokletError):
    """The rotation stopped or was refused; ``kind`` is a closed slug a script switches on, ``message`` fixed
    text naming instances and key ids, never material. The record (if any) stays at the last step done."""

    class Kind(enum.StrEnum):
        """Why a store rotation stopped."""

        #: Another rotation holds the lock.
        LOCKED = "locked"
        #: A record exists and neither --resume nor --abort was asked (or one was asked and there is none).
        RECORD = "record"
        #: The new key id is taken, or the store refused a change.
        REFUSED = "refused"
        #: A live member did not apply a generation within the step's bound.
        STALLED = "stalled"
        #: The store has no keyring, or the record does not match it.
        MISMATCH = "mismatch"

    def __init__(self, kind: StoreRotationAbort.Kind, message: str) -> None:
        super().__init__(None, message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True, slots=True)
class StoreRotation:
    """A store rotation's record: the key ids, the step reached, the generations it raised, the wait."""

    new_key: str
    former_key: str
    check_value: str
    step: StoreRotationStep = StoreRotationStep.NONE
    staged_generation: int | None = None
    activated_generation: int | None = None
    activated_at_ms: int | None = None
    wait_ms: int = 0
    #: The largest clock skew between members measured when the wait began (ms; part of ``wait_ms``).
    skew_ms: int = 0
    removed_generation: int | None = None
    excluded: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not is_valid_key_id(self.new_key) or not is_valid_key_id(self.former_key):
            raise ValueError("key ids")
        if self.new_key == self.former_key:
            raise ValueError("the new key must differ from the former one")

    def to_json(self) -> str:
        """The record's document (stored as text)."""
        return json.dumps(
            {
                "format": STORE_RECORD_FORMAT,
                "step": self.step.label,
                "new_key": self.new_key,
                "former_key": self.former_key,
                "check_value": self.check_value,
                "staged_generation": self.staged_generation,
                "activated_generation": self.activated_generation,
                "activated_at_ms": self.activated_at_ms,
                "wait_ms": self.wait_ms,
                "skew_ms": self.skew_ms,
                "removed_generation": self.removed_generation,
                "excluded": list(self.excluded),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> StoreRotation:
        """The record a document holds; ``StoreRotationAbort(MISMATCH)`` when it is not one."""
        try:
            document = json.loads(text)
            if not isinstance(document, dict) or document.get("format") != STORE_RECORD_FORMAT:
                raise ValueError("format")
            step = StoreRotationStep[str(document["step"]).upper()]
            excluded = document.get("excluded", [])
            if not isinstance(excluded, list) or not all(isinstance(name, str) for name in excluded):
                raise ValueError("excluded")
            return cls(
                new_key=_text(document["new_key"]),
                former_key=_text(document["former_key"]),
                check_value=_text(document["check_value"]),
                step=step,
                staged_generation=_count(document.get("staged_generation")),
                activated_generation=_count(document.get("activated_generation")),
                activated_at_ms=_count(document.get("activated_at_ms")),
                wait_ms=_count(document.get("wait_ms")) or 0,
                skew_ms=_count(document.get("skew_ms")) or 0,
                removed_generation=_count(document.get("removed_generation")),
                excluded=tuple(excluded),
            )
        except (ValueError, KeyError, TypeError):
            raise StoreRotationAbort(
                StoreRotationAbort.Kind.MISMATCH, "the store's rotation record is not one this soklet reads"
            ) from None


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("text")
    return value


def _count(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError("count")
    return value


@dataclass(frozen=True, slots=True)
class FleetMember:
    """One instance as its heartbeat shows it."""

    instance: str
    generation: int
    fingerprint: str | None
    #: The instance's clock minus the store's when it beat (ms): its offset, within the beat's latency.
    offset_ms: int
    #: Seconds since its last heartbeat (on this process's clock).
    age_seconds: float
    live: bool
    admin_url: str | None
    max_state_lifetime_ms: int

    def to_json(self) -> dict[str, Any]:
        """The member as a JSON-ready document (what ``--json`` prints of it)."""
        return {
            "instance": self.instance,
            "live": self.live,
            "generation": self.generation,
            "fingerprint": self.fingerprint,
            "offset_ms": self.offset_ms,
            "last_beat_age_s": round(self.age_seconds, 1),
            "admin_url": self.admin_url,
            "max_state_lifetime_ms": self.max_state_lifetime_ms,
        }


def fleet_members(
    heartbeats: Sequence[Heartbeat], *, now: datetime, timeout_seconds: float = MEMBER_TIMEOUT_SECONDS
) -> list[FleetMember]:
    """The members the heartbeats show, each live iff it beat within ``timeout_seconds`` of ``now``."""
    members = []
    for beat in heartbeats:
        age = (now - beat.seen_at).total_seconds()
        members.append(
            FleetMember(
                instance=beat.instance,
                generation=beat.generation,
                fingerprint=beat.fingerprint,
                offset_ms=round((beat.clock - beat.seen_at).total_seconds() * 1000),
                age_seconds=max(0.0, age),
                live=age <= timeout_seconds,
                admin_url=beat.admin_url,
                max_state_lifetime_ms=beat.max_state_lifetime_ms,
            )
        )
    return members


def largest_skew_ms(members: Sequence[FleetMember]) -> int:
    """The largest clock difference between two live members (ms; 0 with fewer than two)."""
    offsets = [member.offset_ms for member in members if member.live]
    return max(offsets) - min(offsets) if len(offsets) > 1 else 0


Emit = Callable[[dict[str, Any]], None]
#: What a key that never sealed must wait before it goes: nothing.
_NEVER: Final = timedelta(0)


@dataclass(frozen=True, slots=True)
class StorePlan:
    """What a rotation would do now (``--dry-run``), or what it found when it had nothing to do."""

    former_key: str
    new_key: str
    members: tuple[FleetMember, ...]
    wait_ms: int
    skew_ms: int
    #: The active key's age, when the store records its creation.
    active_age: timedelta | None


def _utc(clock: Callable[[], float]) -> datetime:
    return datetime.fromtimestamp(clock(), UTC)


def _active(keyring: StoredKeyring) -> str:
    for key in keyring.keys:
        if key.role is StoredKeyRole.ACTIVE:
            return key.key_id
    raise StoreRotationAbort(StoreRotationAbort.Kind.MISMATCH, "the store's keyring has no active key")


def drain_wait_ms(members: Sequence[FleetMember]) -> tuple[int, int]:
    """The drain wait (longest lifetime a live member reports, else the default, plus the largest skew) and the
    skew alone."""
    lifetimes = [member.max_state_lifetime_ms for member in members if member.live and member.max_state_lifetime_ms]
    default = int(DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME.total_seconds() * 1000)
    skew = largest_skew_ms(members)
    return max(lifetimes, default=default) + skew, skew


async def removal_lifetime(
    fleet: FleetKeyring, at_least: timedelta, *, clock: Callable[[], float] = time.time
) -> timedelta:
    """How long a key must have stopped sealing before ``keys remove --store`` may remove it: ``at_least``, or, when
    longer, the drain wait a rotation would take (the longest lifetime a live member reports plus the largest
    clock skew between members). Without a live member, ``at_least``."""
    members = fleet_members(await fleet.store.heartbeats(), now=_utc(clock))
    if not any(member.live for member in members):
        return at_least
    return max(at_least, timedelta(milliseconds=drain_wait_ms(members)[0]))


class StoreRotator:
    """One store rotation run: ``plan``, ``start``, ``resume`` or ``abort``, under the store's rotation lock
    (taken by the caller: ``async with store.rotation_lock(owner)``). Every event goes to ``emit`` as a
    JSON-ready dict with ``event``."""

    def __init__(
        self,
        keyring: FleetKeyring,
        *,
        owner: str,
        emit: Emit,
        clock: Callable[[], float] = time.time,
        step_timeout_seconds: float = STEP_TIMEOUT_SECONDS,
        member_timeout_seconds: float = MEMBER_TIMEOUT_SECONDS,
        poll_seconds: float = WAIT_POLL_SECONDS,
    ) -> None:
        self._store = keyring.store
        self._keyring = keyring
        self._owner = owner
        self._emit = emit
        self._clock = clock
        self._step_timeout = step_timeout_seconds
        self._member_timeout = member_timeout_seconds
        self._poll = poll_seconds

    async def members(self) -> list[FleetMember]:
        """Every member the heartbeats show, live or not."""
        beats = await self._store.heartbeats()
        return fleet_members(beats, now=_utc(self._clock), timeout_seconds=self._member_timeout)

    async def _keyring_now(self) -> StoredKeyring:
        keyring = await self._store.read_keyring()
        if keyring is None or not keyring.keys:
            raise StoreRotationAbort(
                StoreRotationAbort.Kind.MISMATCH,
                "the store holds no keyring: create one with soklet keys generate --store URL first",
            )
        return keyring

    async def plan(self, new_key: str | None) -> StorePlan:
        """What a rotation would do now; refuses an id the store's keyring already holds."""
        keyring = await self._keyring_now()
        former = _active(keyring)
        taken = [key.key_id for key in keyring.keys]
        key_id = new_key if new_key is not None else new_key_id(taken)
        if key_id in taken:
            raise StoreRotationAbort(
                StoreRotationAbort.Kind.REFUSED,
                f"key id {key_id} is already in the store's keyring; choose another --id",
            )
        members = await self.members()
        wait, skew = drain_wait_ms(members)
        created = next(key.created_at for key in keyring.keys if key.key_id == former)
        return StorePlan(former, key_id, tuple(members), wait, skew, _utc(self._clock) - created)

    async def record(self) -> tuple[StoreRotation, int] | None:
        """The rotation in progress and its record version, or ``None``."""
        stored = await self._store.read_rotation()
        if stored is None:
            return None
        return StoreRotation.from_json(stored.document), stored.version

    async def start(self, key: ProtectionKey) -> StoreRotation:
        """Begin a rotation to ``key`` and run it to the end. Refused when a record exists."""
        if await self.record() is not None:
            raise StoreRotationAbort(
                StoreRotationAbort.Kind.RECORD,
                "a rotation is already in progress in this store: finish it with --resume, or clear it with --abort",
            )
        # Unwrap every key before the record is written: a wrong KEK is refused with nothing written, never
        # leaving a record behind that blocks the next rotation.
        await self._keyring.load()
        keyring = await self._keyring_now()
        if any(stored.key_id == key.id for stored in keyring.keys):
            raise StoreRotationAbort(
                StoreRotationAbort.Kind.REFUSED,
                f"key id {key.id} is already in the store's keyring; choose another --id",
            )
        rotation = StoreRotation(new_key=key.id, former_key=_active(keyring), check_value=key.check_value_text)
        version = await self._save(rotation, 0)
        return await self._run(rotation, version, key)

    async def resume(self) -> StoreRotation:
        """Continue the rotation the store records, from its first step not done."""
        found = await self.record()
        if found is None:
            raise StoreRotationAbort(StoreRotationAbort.Kind.RECORD, "no rotation is in progress in this store")
        rotation, version = found
        self._emit({"event": "resume", "step": rotation.step.label, "new_key": rotation.new_key})
        return await self._run(rotation, version, None)

    async def abort(self) -> StoreRotation:
        """Clear the record; a new key that was never activated is removed from the store's keyring first."""
        found = await self.record()
        if found is None:
            raise StoreRotationAbort(StoreRotationAbort.Kind.RECORD, "no rotation is in progress in this store")
        rotation, version = found
        keyring = await self._keyring_now()
        held = {key.key_id: key for key in keyring.keys}
        new = held.get(rotation.new_key)
        if new is not None and new.role is StoredKeyRole.VERIFICATION and new.retired_at is None:
            # Never activated: nothing was sealed under it, so it goes at once.
            generation = (
                await self._keyring.remove(rotation.new_key, max_state_lifetime=_NEVER, force=True)
            ).generation
            self._emit({"event": "removed", "key": rotation.new_key, "generation": generation})
        if not await self._store.delete_rotation(expected_version=version):
            raise StoreRotationAbort(StoreRotationAbort.Kind.RECORD, "the record changed meanwhile; run --abort again")
        self._emit({"event": "aborted", "new_key": rotation.new_key})
        return rotation

    async def _save(self, rotation: StoreRotation, version: int) -> int:
        record = RotationRecord(
            owner=self._owner, started_at=_utc(self._clock), document=rotation.to_json(), version=version
        )
        stored = await self._store.write_rotation(record, expected_version=version)
        if stored is None:
            raise StoreRotationAbort(
                StoreRotationAbort.Kind.RECORD, "another process changed the rotation record; run --resume"
            )
        return stored.version

    async def _run(self, rotation: StoreRotation, version: int, key: ProtectionKey | None) -> StoreRotation:
        steps: tuple[tuple[StoreRotationStep, Callable[[StoreRotation, ProtectionKey | None], Any]], ...] = (
            (StoreRotationStep.STAGE, self._stage),
            (StoreRotationStep.STAGED, lambda r, _k: self._converge(r, r.staged_generation)),
            (StoreRotationStep.ACTIVATE, self._activate),
            (StoreRotationStep.ACTIVE, lambda r, _k: self._converge(r, r.activated_generation)),
            (StoreRotationStep.WAIT, self._drain),
            (StoreRotationStep.REMOVE, self._remove),
            (StoreRotationStep.REMOVED, lambda r, _k: self._converge(r, r.removed_generation)),
        )
        for step, action in steps:
            if rotation.step >= step:
                continue
            self._emit({"event": "step", "step": step.label, "new_key": rotation.new_key})
            updated: StoreRotation = await action(rotation, key)
            rotation = replace(updated, step=step)
            if step is StoreRotationStep.REMOVED:
                await self._store.delete_rotation(expected_version=version)
            else:
                version = await self._save(rotation, version)
            self._emit({"event": "done", "step": step.label})
        return rotation

    async def _stage(self, rotation: StoreRotation, key: ProtectionKey | None) -> StoreRotation:
        keyring = await self._keyring_now()
        held = next((stored for stored in keyring.keys if stored.key_id == rotation.new_key), None)
        if held is not None:
            if held.check_value != rotation.check_value:
                raise StoreRotationAbort(
                    StoreRotationAbort.Kind.REFUSED,
                    f"key id {rotation.new_key} already holds other bytes in the store;"
                    " --abort, then choose another --id",
                )
            return replace(rotation, staged_generation=keyring.generation)
        if key is None:
            raise StoreRotationAbort(
                StoreRotationAbort.Kind.MISMATCH,
                f"the record says key {rotation.new_key} is staged but the store does not hold it; run --abort",
            )
        try:
            generation = (await self._keyring.stage(key)).generation
        except KeyringError as error:
            raise StoreRotationAbort(StoreRotationAbort.Kind.REFUSED, f"stage: {error.reason.value}") from None
        return replace(rotation, staged_generation=generation)

    async def _activate(self, rotation: StoreRotation, _key: ProtectionKey | None) -> StoreRotation:
        keyring = await self._keyring_now()
        if _active(keyring) == rotation.new_key:
            generation = keyring.generation
        else:
            generation = (await self._keyring.activate(rotation.new_key)).generation
        return replace(rotation, activated_generation=generation, activated_at_ms=round(self._clock() * 1000))

    async def _drain(self, rotation: StoreRotation, _key: ProtectionKey | None) -> StoreRotation:
        members = await self.members()
        wait, skew = drain_wait_ms(members)
        keyring = await self._keyring_now()
        former = next((key for key in keyring.keys if key.key_id == rotation.former_key), None)
        starts = [rotation.activated_at_ms or 0]
        if former is not None and former.retired_at is not None:
            starts.append(round(former.retired_at.timestamp() * 1000))
        until_ms = max(starts) + wait
        self._emit({"event": "wait", "wait_ms": wait, "skew_ms": skew, "until_ms": until_ms})
        while (remaining := until_ms / 1000 - self._clock()) > 0:
            await asyncio.sleep(min(remaining, 5.0))
        return replace(rotation, wait_ms=wait, skew_ms=skew)

    async def _remove(self, rotation: StoreRotation, _key: ProtectionKey | None) -> StoreRotation:
        keyring = await self._keyring_now()
        if all(key.key_id != rotation.former_key for key in keyring.keys):
            return replace(rotation, removed_generation=keyring.generation)
        try:
            # The drain above waited the longest lifetime plus the skew; the store's own rule checks it again.
            lifetime = timedelta(milliseconds=max(rotation.wait_ms - rotation.skew_ms, 0))
            generation = (await self._keyring.remove(rotation.former_key, max_state_lifetime=lifetime)).generation
        except KeyringError as error:
            raise StoreRotationAbort(StoreRotationAbort.Kind.REFUSED, f"remove: {error.reason.value}") from None
        return replace(rotation, removed_generation=generation)

    async def _converge(self, rotation: StoreRotation, generation: int | None) -> StoreRotation:
        """Wait until every live member applied ``generation``; members that stopped beating are excluded."""
        target = generation or 0
        deadline = self._clock() + self._step_timeout
        excluded = set(rotation.excluded)
        while True:
            members = await self.members()
            for member in members:
                if not member.live and member.instance not in excluded:
                    excluded.add(member.instance)
                    self._emit(
                        {"event": "excluded", "instance": member.instance, "age_s": round(member.age_seconds, 1)}
                    )
            behind = [member.instance for member in members if member.live and member.generation < target]
            if not behind:
                self._emit({"event": "converged", "generation": target, "members": sum(m.live for m in members)})
                return replace(rotation, excluded=tuple(sorted(excluded)))
            if self._clock() >= deadline:
                raise StoreRotationAbort(
                    StoreRotationAbort.Kind.STALLED,
                    f"{', '.join(behind)} did not apply generation {target} within {self._step_timeout:g} s;"
                    " check them, then run --resume",
                )
            await asyncio.sleep(self._poll)


class StoreFleetStatus(enum.StrEnum):
    """What ``fleet check --store`` found: a closed set a script switches on."""

    #: Every live member applied the store's current generation, with one fingerprint, clocks within bound.
    CONVERGED = "converged"
    #: A live member has not applied the store's current generation (yet).
    BEHIND = "behind"
    #: Live members at the current generation report different fingerprints.
    DIVERGED = "diverged"
    #: Two live members' clocks are further apart than allowed.
    CLOCK_SKEW = "clock-skew"
    #: No member beat recently: nothing serves from this store (or nothing heartbeats).
    NO_MEMBER = "no-member"


@dataclass(frozen=True, slots=True)
class StoreFleetReport:
    """A fleet judged from the store: its generation (the target), the members, the verdict."""

    generation: int
    members: tuple[FleetMember, ...]
    status: StoreFleetStatus
    skew_ms: int
    #: The fleet's fingerprint when every live member reports the same one.
    fingerprint: str | None
    #: The live members not at the store's generation.
    behind: tuple[str, ...]


def judge_store_fleet(members: Sequence[FleetMember], *, generation: int, max_skew_ms: int) -> StoreFleetReport:
    """Converged iff there is a live member and every live member applied ``generation`` (the store's current
    one: the target, so this proves more than "equal now") with one fingerprint, and no two live members' clocks
    are more than ``max_skew_ms`` apart. Members that stopped beating are reported, never counted."""
    live = [member for member in members if member.live]
    behind = tuple(member.instance for member in live if member.generation != generation)
    prints = {member.fingerprint for member in live}
    skew = largest_skew_ms(members)
    fingerprint = next(iter(prints)) if len(prints) == 1 else None
    if not live:
        status = StoreFleetStatus.NO_MEMBER
    elif behind:
        status = StoreFleetStatus.BEHIND
    elif fingerprint is None:
        status = StoreFleetStatus.DIVERGED
    elif skew > max_skew_ms:
        status = StoreFleetStatus.CLOCK_SKEW
    else:
        status = StoreFleetStatus.CONVERGED
    return StoreFleetReport(generation, tuple(members), status, skew, fingerprint, behind)
