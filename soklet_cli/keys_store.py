"""``soklet keys ... --store URL``: the keys commands on a fleet keyring kept in a store (store mode).

``soklet_cli/keys.py`` parses every option and hands the store-mode commands here; the policy is the core's
(:class:`~soklet_core.store.FleetKeyring` for each change, :class:`~soklet_core.fleet.store_rotation.StoreRotator`
for a fleet rotation). Every command needs the key-encryption key (``--kek-file``, ``--kek-env`` or
``--kek-command``): material is unwrapped in memory only and never printed, except by ``keys export``.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, NoReturn, TypeVar, cast

import typer
from rich.table import Table
from typer._click.core import ParameterSource
from typer._click.globals import get_current_context

from soklet_core.files import KeyringDocument
from soklet_core.files.kek_source import KekSource
from soklet_core.fleet.store_rotation import (
    FleetMember,
    StorePlan,
    StoreRotation,
    StoreRotationAbort,
    StoreRotator,
    removal_lifetime,
)
from soklet_core.keys import (
    KeyringError,
    KeyWrapError,
    KeyWrapper,
    ProtectionKey,
    ProtectionKeyring,
    RetiredTooRecently,
    new_key_id,
    printable_name,
)
from soklet_core.store import (
    MAX_KEY_CHARS,
    DurableStore,
    FleetKeyring,
    KeyringRepository,
    LoadedFleetKeyring,
    StoreError,
    StoreErrorReason,
    StoreUrl,
)

from ._common import parse_duration
from .exit_codes import ExitCode
from .kek_option import kek_failure, kek_source, load_kek_or_exit
from .keyring_path import fail_for
from .output import console, emit_json, error_console, fail
from .store_option import IF_OLDER_THAN_MAXIMUM, run_on_store, shown_store, store_facts, time_text

__all__ = [
    "RotateRequest",
    "StoreSession",
    "activate",
    "check_store_mode",
    "document",
    "generate",
    "list_keys",
    "remove",
    "rotate",
    "rotation_owner",
    "stage",
]

_T = TypeVar("_T")


#: The keys options of file mode and of a fleet file (parameter names) that --store excludes.
_FILE_MODE_OPTIONS: Final = ("keyring", "fleet", "resolve", "exclude", "record", "token_env", "token_file", "ca_file")


@dataclass(frozen=True, slots=True)
class StoreSession:
    """The store a command works on and the KEK (with its source, for messages)."""

    url: StoreUrl
    source: KekSource
    kek: KeyWrapper
    as_json: bool


def check_store_mode(
    url: StoreUrl,
    kek_file: Path | None,
    kek_env: str | None,
    kek_command: str | None,
    *,
    allow_insecure: bool,
    as_json: bool,
    rotating: bool = False,
) -> StoreSession:
    """The session for ``--store URL``: a keyring-file or fleet-file option given with it (with ``rotating``, also
    ``--state-lifetime``: the members report their own), or no KEK, is a usage error (exit 2); a KEK that cannot
    be loaded ends the command (exit 1)."""
    context = get_current_context(silent=True)
    if context is not None:
        names = (*_FILE_MODE_OPTIONS, "state_lifetime") if rotating else _FILE_MODE_OPTIONS
        clashing = [
            "--" + name.replace("_", "-")
            for name in names
            if context.get_parameter_source(name) is ParameterSource.COMMANDLINE
        ]
        if clashing:
            fail(f"usage: --store cannot be used with {', '.join(clashing)}", ExitCode.USAGE)
    source = kek_source(kek_file, kek_env, kek_command)
    if source is None:
        fail(
            "usage: --store needs the key-encryption key: --kek-file FILE, --kek-env VAR or --kek-command CMD",
            ExitCode.USAGE,
        )
    kek = load_kek_or_exit(source, allow_insecure=allow_insecure)
    assert kek is not None
    return StoreSession(url, source, kek, as_json)


def _say(text: str) -> None:
    console.print(text, markup=False, highlight=False)


def _note(text: str) -> None:
    error_console.print(text, markup=False, highlight=False)


def _on_store(session: StoreSession, work: Callable[[FleetKeyring], Awaitable[_T]], *, must_exist: bool = True) -> _T:
    """Run ``work`` on the store's fleet keyring; the KEK's, the keyring's and the store's refusals end the
    command in one line. A SQLite store is created only with ``must_exist=False`` (``keys generate``)."""

    async def run(store: DurableStore) -> _T:
        # open_store's backends are both a DurableStore and a KeyringRepository.
        fleet = FleetKeyring(cast(KeyringRepository, store), session.kek)
        try:
            return await work(fleet)
        except StoreError as error:
            if error.reason is StoreErrorReason.NO_KEYRING:
                _no_keyring(session)
            if error.reason is StoreErrorReason.LOCKED:
                # The detail names the holder and since when (or that it is taking or leaving the lock).
                _refused(session, StoreRotationAbort.Kind.LOCKED, f"another rotation runs: {error.detail}")
            raise

    try:
        return run_on_store(session.url, run, must_exist=must_exist)
    except KeyWrapError as error:
        kek_failure(session.source, error)
    except RetiredTooRecently:
        raise
    except KeyringError as error:
        fail_for(error)
    except StoreRotationAbort as error:
        _refused(session, error.kind, error.message)


def _no_keyring(session: StoreSession) -> NoReturn:
    fail(
        f"store {shown_store(session.url)} holds no fleet keyring yet: create it with soklet keys generate --store URL"
        " --kek-file FILE",
        ExitCode.REFUSED,
    )


def _refused(session: StoreSession, kind: StoreRotationAbort.Kind, message: str) -> NoReturn:
    """End a rotation refused or stopped: one line on stderr naming ``kind``, and a JSON document with --json."""
    if session.as_json:
        emit_json({**store_facts(session.url), "status": "refused", "kind": kind.value, "message": message})
    fail(f"{kind.value}: {message}", ExitCode.REFUSED)


def _loaded(session: StoreSession, loaded: LoadedFleetKeyring | None) -> LoadedFleetKeyring:
    if loaded is None:
        _no_keyring(session)
    return loaded


def _fingerprint(loaded: LoadedFleetKeyring) -> dict[str, Any]:
    fingerprint: dict[str, Any] = loaded.keyring.fingerprint().to_json()
    return fingerprint


def _fingerprint_line(loaded: LoadedFleetKeyring) -> None:
    fingerprint = loaded.keyring.fingerprint()
    _say(f"fingerprint v{fingerprint.version} {fingerprint.value} (generation {loaded.generation})")


def _where(session: StoreSession) -> str:
    return f"store {shown_store(session.url)}"


# -- keys generate, list, stage, activate, remove, export -------------------------------------------------------


def generate(session: StoreSession, key_id: str | None, size: int, *, verification: bool) -> None:
    """``keys generate --store``: the store's first fleet keyring, one new active key."""
    if verification:
        fail(
            "usage: with --store, keys generate creates the fleet keyring's first (active) key; stage one with "
            "soklet keys stage --store URL --generate",
            ExitCode.USAGE,
        )

    async def work(fleet: FleetKeyring) -> LoadedFleetKeyring:
        if await fleet.store.read_keyring() is not None:
            fail(
                f"refused: {_where(session)} holds a fleet keyring already; rotate it with soklet keys rotate "
                "--store URL",
                ExitCode.REFUSED,
            )
        key = ProtectionKey.generate(key_id if key_id is not None else new_key_id((), now=datetime.now(UTC)), size)
        return await fleet.initialize(ProtectionKeyring(key))

    loaded = _on_store(session, work, must_exist=False)
    key = loaded.keyring.active_key
    if session.as_json:
        emit_json(
            {
                **store_facts(session.url),
                "id": key.id,
                "role": "active",
                "check_value": key.check_value_text,
                "kek_id": session.kek.kek_id,
                "generation": loaded.generation,
                "fingerprint": _fingerprint(loaded),
            }
        )
        return
    _say(
        f"created the fleet keyring in {_where(session)} with active key {key.id} "
        f"(check {key.check_value_text[:8]}), wrapped under KEK {session.kek.kek_id}"
    )
    _fingerprint_line(loaded)


def list_keys(session: StoreSession) -> None:
    """``keys list --store``: ids, roles, times, check values, the KEK id wrapping each; never material."""
    loaded = _loaded(session, _on_store(session, lambda fleet: fleet.load()))
    rows = loaded.stored.keys
    if session.as_json:
        emit_json(
            {
                **store_facts(session.url),
                "generation": loaded.generation,
                "profile": loaded.stored.profile,
                "changed": time_text(loaded.changed_at),
                "active": loaded.keyring.active_key.id,
                "keys": [
                    {
                        "id": row.key_id,
                        "role": row.role.value,
                        "created": time_text(row.created_at),
                        "retired": time_text(row.retired_at),
                        "check_value": row.check_value,
                        "kek_id": row.wrapped.kek_id,
                    }
                    for row in rows
                ],
                "fingerprint": _fingerprint(loaded),
            }
        )
        return
    table = Table(title=f"{_where(session)}, generation {loaded.generation}", title_justify="left")
    for column in ("id", "role", "created", "retired", "check", "kek"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row.key_id,
            row.role.value,
            time_text(row.created_at) or "",
            time_text(row.retired_at) or "-",
            row.check_value[:8],
            row.wrapped.kek_id,
        )
    console.print(table)
    _fingerprint_line(loaded)


def document(session: StoreSession) -> KeyringDocument:
    """The store's fleet keyring as a keyring document (unwrapped in memory), for ``keys export --store``."""
    return _loaded(session, _on_store(session, lambda fleet: fleet.load())).document


def stage(session: StoreSession, key_id: str | None, material: bytes | None, size: int) -> None:
    """``keys stage --store``: a key for verification in one generation; the same key again changes nothing."""
    staged: list[ProtectionKey] = []

    async def work(fleet: FleetKeyring) -> tuple[LoadedFleetKeyring, LoadedFleetKeyring]:
        before = _loaded(session, await fleet.load())
        chosen = key_id if key_id is not None else new_key_id(before.keyring.key_ids, now=datetime.now(UTC))
        key = (
            ProtectionKey.generate(chosen, size)
            if material is None
            else ProtectionKey.from_id_and_bytes(chosen, material)
        )
        staged.append(key)
        return before, await fleet.stage(key)

    before, after = _on_store(session, work)
    key = staged[-1]
    changed = after.generation != before.generation
    role = "active" if after.keyring.active_key.id == key.id else "verification"
    if session.as_json:
        emit_json(
            {
                **store_facts(session.url),
                "id": key.id,
                "role": role,
                "check_value": key.check_value_text,
                "changed": changed,
                "generation": after.generation,
                "fingerprint": _fingerprint(after),
            }
        )
        return
    if changed:
        _say(f"staged {key.id} (check {key.check_value_text[:8]}) for verification in {_where(session)}")
    else:
        _say(f"{key.id} is already in {_where(session)} as {role} with the same bytes: nothing changed")
    _fingerprint_line(after)


def activate(session: StoreSession, key_id: str) -> None:
    """``keys activate --store``: the key seals; the former active key stays for verification."""

    async def work(fleet: FleetKeyring) -> tuple[LoadedFleetKeyring, LoadedFleetKeyring]:
        before = _loaded(session, await fleet.load())
        return before, await fleet.activate(key_id)

    before, after = _on_store(session, work)
    changed = after.generation != before.generation
    former = before.keyring.active_key.id
    if session.as_json:
        emit_json(
            {
                **store_facts(session.url),
                "active": key_id,
                "former_active": former if changed else None,
                "changed": changed,
                "generation": after.generation,
                "fingerprint": _fingerprint(after),
            }
        )
        return
    if changed:
        _say(f"activated {key_id} in {_where(session)}; former active key {former} now only verifies")
    else:
        _say(f"{key_id} is already the active key in {_where(session)}: nothing changed")
    _fingerprint_line(after)


def remove(session: StoreSession, key_id: str, lifetime: timedelta, lifetime_text: str, *, force: bool) -> None:
    """``keys remove --store``: a verification key, once the state lifetime passed since it stopped sealing.

    The lifetime is ``lifetime`` or, when longer, the longest one a live member's heartbeat reports plus the
    largest clock skew between members (as a store rotation waits)."""
    waited: list[timedelta] = []

    async def work(fleet: FleetKeyring) -> LoadedFleetKeyring:
        chosen = await removal_lifetime(fleet, lifetime)
        waited.append(chosen)
        return await fleet.remove(key_id, max_state_lifetime=chosen, force=force)

    try:
        after = _on_store(session, work)
    except RetiredTooRecently as early:
        shown = printable_name(early.key_id or "", what="a key id")
        used = (
            lifetime_text
            if not waited or waited[-1] == lifetime
            else f"{round(waited[-1].total_seconds())}s: the longest a live member reports plus the clock skew"
        )
        since = "stopped sealing" if early.recorded else "never sealed and the keyring changed"
        fail(
            f"refused: key {shown} {since} less than the state lifetime ({used}) ago: state it sealed may still "
            f"be open; it can be removed after {time_text(early.removable_at)} (or now with --force)",
            ExitCode.REFUSED,
        )
    if session.as_json:
        emit_json(
            {
                **store_facts(session.url),
                "removed": key_id,
                "generation": after.generation,
                "fingerprint": _fingerprint(after),
            }
        )
        return
    _say(f"removed {key_id} from {_where(session)}")
    _fingerprint_line(after)


# -- keys rotate --store ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RotateRequest:
    """What ``keys rotate --store`` was asked: the new key (``material`` from --key-file, else generated), and
    the mode."""

    key_id: str | None
    size: int
    material: bytes | None
    generate: bool
    yes: bool
    dry_run: bool
    resume: bool
    abort: bool
    if_older_than: str | None

    def check(self) -> None:
        """Refuse a combination that means nothing (exit 2)."""
        modes = [
            name
            for name, given in (("--dry-run", self.dry_run), ("--resume", self.resume), ("--abort", self.abort))
            if given
        ]
        if len(modes) > 1:
            fail(f"usage: give one of {', '.join(modes)}", ExitCode.USAGE)
        if self.generate and self.material is not None:
            fail("usage: give --generate or --key-file, not both", ExitCode.USAGE)
        if (self.resume or self.abort) and (self.generate or self.material is not None or self.key_id is not None):
            fail("usage: --resume and --abort take no new key (--generate, --key-file, --id)", ExitCode.USAGE)
        if (self.resume or self.abort) and self.if_older_than is not None:
            fail("usage: --if-older-than starts or resumes a rotation itself: drop --resume or --abort", ExitCode.USAGE)
        if not self.dry_run and not self.yes and not sys.stdin.isatty():
            fail("usage: pass --yes to rotate without a terminal to confirm on", ExitCode.USAGE)


def rotation_owner() -> str:
    """Who holds the rotation lock, as the refusal of a second rotation names it: ``user@host pid N``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    text = f"{user}@{socket.gethostname()} pid {os.getpid()}"
    printable = "".join(char if char.isprintable() else "?" for char in text)
    return printable[:MAX_KEY_CHARS]


def _event_line(event: dict[str, Any]) -> str | None:
    kind = event.get("event")
    if kind == "step":
        return f"step {event['step']}: key {event['new_key']}"
    if kind == "resume":
        return f"resuming the rotation to key {event['new_key']} after step {event['step']}"
    if kind == "converged":
        return f"  every live member ({event['members']}) applied generation {event['generation']}"
    if kind == "excluded":
        return f"  member {event['instance']} is gone (no heartbeat for {event['age_s']} s): excluded"
    if kind == "wait":
        seconds = max(0, round(event["until_ms"] / 1000 - datetime.now(UTC).timestamp()))
        return (
            f"  waiting {seconds} s more: the longest state lifetime plus the largest clock skew "
            f"({event['skew_ms']} ms), {event['wait_ms']} ms from the activation"
        )
    if kind == "removed":
        return f"removed never-activated key {event['key']} (generation {event['generation']})"
    if kind == "aborted":
        return f"rotation to key {event['new_key']} abandoned; the record is cleared"
    return None


def _members_json(members: Sequence[FleetMember]) -> list[dict[str, Any]]:
    return [member.to_json() for member in members]


def _members_table(members: Sequence[FleetMember]) -> Table:
    table = Table(title="members (from the heartbeats)", title_justify="left")
    for column in ("instance", "status", "generation", "offset", "last beat", "state lifetime"):
        table.add_column(column)
    for member in members:
        table.add_row(
            member.instance,
            "live" if member.live else "gone: excluded",
            str(member.generation),
            f"{member.offset_ms:+d} ms",
            f"{member.age_seconds:.1f} s ago",
            f"{member.max_state_lifetime_ms // 1000} s",
        )
    return table


def _age_text(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    if seconds >= 86400:
        return f"{seconds // 86400}d{(seconds % 86400) // 3600}h"
    return f"{seconds // 3600}h{(seconds % 3600) // 60}m{seconds % 60}s"


@dataclass(frozen=True, slots=True)
class _Outcome:
    status: str
    plan: StorePlan | None = None
    rotation: StoreRotation | None = None
    record: StoreRotation | None = None
    loaded: LoadedFleetKeyring | None = None


def rotate(session: StoreSession, request: RotateRequest) -> None:
    """``keys rotate --store``: a fleet rotation through the store under its rotation lock (see
    :mod:`soklet_core.fleet.store_rotation`): progress on stderr, the outcome on stdout."""
    request.check()
    owner = rotation_owner()
    events: list[dict[str, Any]] = []

    def emit(event: dict[str, Any]) -> None:
        events.append(event)
        line = _event_line(event)
        if line is not None:
            _note(line)

    async def work(fleet: FleetKeyring) -> _Outcome:
        rotator = StoreRotator(fleet, owner=owner, emit=emit)
        if request.dry_run:
            found = await rotator.record()
            plan = await rotator.plan(request.key_id)
            return _Outcome("plan", plan=plan, record=None if found is None else found[0])
        async with fleet.store.rotation_lock(owner):
            found = await rotator.record()
            if request.abort:
                return _Outcome("aborted", rotation=await rotator.abort(), loaded=await fleet.load())
            if request.resume or (request.if_older_than is not None and found is not None):
                return _Outcome("rotated", rotation=await rotator.resume(), loaded=await fleet.load())
            if found is not None:
                raise StoreRotationAbort(
                    StoreRotationAbort.Kind.RECORD,
                    f"a rotation to key {found[0].new_key} is in progress in this store (step {found[0].step.label}):"
                    " finish it with --resume, or abandon it with --abort",
                )
            plan = await rotator.plan(request.key_id)
            if request.if_older_than is not None:
                bound = parse_duration(request.if_older_than, maximum=IF_OLDER_THAN_MAXIMUM, days=True)
                if plan.active_age is not None and plan.active_age < bound:
                    return _Outcome("young", plan=plan)
            if not request.yes:
                error_console.print(_members_table(plan.members))
                _show_plan(plan, None)
                if not await asyncio.to_thread(typer.confirm, "rotate now?", default=False, err=True):
                    return _Outcome("cancelled", plan=plan)
            material = request.material
            key = (
                ProtectionKey.generate(plan.new_key, request.size)
                if material is None
                else ProtectionKey.from_id_and_bytes(plan.new_key, material)
            )
            return _Outcome("rotated", plan=plan, rotation=await rotator.start(key), loaded=await fleet.load())

    outcome = _on_store(session, work)
    _report(session, request, outcome, events)


def _show_plan(plan: StorePlan, record: StoreRotation | None, say: Callable[[str], None] = _note) -> None:
    """The plan in words: on stderr before a confirmation, on stdout for ``--dry-run`` (``say=_say``)."""
    live = sum(member.live for member in plan.members)
    say(f"new key {plan.new_key} would replace {plan.former_key} ({live} live member(s))")
    say(
        f"wait before the former key goes: {plan.wait_ms} ms after the activation (the longest state lifetime plus "
        f"the largest clock skew, {plan.skew_ms} ms); each step waits until every live member applied it"
    )
    if plan.active_age is not None:
        say(f"active key age: {_age_text(plan.active_age)}")
    if record is not None:
        say(f"a rotation to key {record.new_key} is in progress (step {record.step.label}): --resume or --abort")


def _report(session: StoreSession, request: RotateRequest, outcome: _Outcome, events: list[dict[str, Any]]) -> None:
    facts = store_facts(session.url)
    if outcome.status == "plan":
        plan = outcome.plan
        assert plan is not None
        if session.as_json:
            emit_json(
                {
                    **facts,
                    "status": "plan",
                    "former_key": plan.former_key,
                    "new_key": plan.new_key,
                    "wait_ms": plan.wait_ms,
                    "skew_ms": plan.skew_ms,
                    "active_age_s": None if plan.active_age is None else int(plan.active_age.total_seconds()),
                    "in_progress": None if outcome.record is None else outcome.record.step.label,
                    "members": _members_json(plan.members),
                }
            )
        else:
            console.print(_members_table(plan.members))
            _show_plan(plan, outcome.record, _say)
        return
    if outcome.status in {"young", "cancelled"}:
        plan = outcome.plan
        assert plan is not None
        if outcome.status == "young":
            assert plan.active_age is not None
            message = (
                f"nothing to do: active key {plan.former_key} is {_age_text(plan.active_age)} old, younger than "
                f"{request.if_older_than}"
            )
        else:
            message = "nothing changed: the rotation was not confirmed"
        if session.as_json:
            emit_json(
                {
                    **facts,
                    "status": "skipped" if outcome.status == "young" else "cancelled",
                    "active": plan.former_key,
                    "message": message,
                }
            )
        else:
            _say(message)
        if outcome.status == "cancelled":
            raise typer.Exit(int(ExitCode.REFUSED))
        return
    rotation = outcome.rotation
    loaded = outcome.loaded
    assert rotation is not None
    assert loaded is not None
    if session.as_json:
        emit_json(
            {
                **facts,
                "status": outcome.status,
                "new_key": rotation.new_key,
                "former_key": rotation.former_key,
                "active": loaded.keyring.active_key.id,
                "generation": loaded.generation,
                "excluded": list(rotation.excluded),
                "wait_ms": rotation.wait_ms,
                "skew_ms": rotation.skew_ms,
                "fingerprint": _fingerprint(loaded),
                "events": events,
            }
        )
        return
    if outcome.status == "aborted":
        _say(f"abandoned the rotation to key {rotation.new_key}; active key {loaded.keyring.active_key.id}")
    else:
        _say(
            f"rotated {_where(session)}: active key {rotation.new_key}, former key {rotation.former_key} removed"
            + (f"; excluded: {', '.join(rotation.excluded)}" if rotation.excluded else "")
        )
    _fingerprint_line(loaded)
