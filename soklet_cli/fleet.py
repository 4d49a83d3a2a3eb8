"""``soklet fleet``: check that every instance of a fleet holds the same keyring, through their admin APIs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from soklet_core.files import (
    DEFAULT_FLEET_TIMEOUT_SECONDS,
    MAX_ENV_NAME_CHARS,
    MAX_FLEET_TIMEOUT_SECONDS,
    is_environment_name,
)
from soklet_core.fleet import (
    DEFAULT_MAX_SKEW_SECONDS,
    AdminTarget,
    FleetReport,
    FleetStatus,
    InstanceReading,
    compare_fleet,
    parse_expected_fingerprint,
    read_snapshots,
)
from soklet_core.keys import Fingerprint, printable_name

from ._common import DURATION_HELP, check_duration, fleet_targets, parse_duration, parse_file
from .exit_codes import ExitCode
from .fleet_store import check_store
from .output import SokletCommand, SokletGroup, console, counted, emit_json, error_console, fail
from .store_option import StoreModeOption

__all__ = ["PROGRESS_LINE_SECONDS", "WAIT_INTERVAL_SECONDS", "fleet_app"]

#: Seconds between two checks under ``--wait``.
WAIT_INTERVAL_SECONDS: Final = 1.0
#: Under ``--wait`` without a terminal (a CI log), a progress line on stderr when the verdict changes, else at
#: most one per this many seconds.
PROGRESS_LINE_SECONDS: Final = 10.0
#: What ``--wait`` can prove without a target; said on stderr.
EQUAL_NOW_NOTE: Final = (
    "soklet: note: --wait without --expect can only prove that the instances are equal now, not that they hold "
    "the keyring meant (a change that reached no instance yet is equal too): give --expect FINGERPRINT"
)
_MAX_TIMEOUT: Final = timedelta(seconds=MAX_FLEET_TIMEOUT_SECONDS)
_TIMEOUT_HELP: Final = (
    f"the timeout is a number of seconds above 0 and at most {MAX_FLEET_TIMEOUT_SECONDS:g}, such as 5 or 0.5 "
    "(at most 3 decimals)"
)

fleet_app = typer.Typer(
    name="fleet",
    help=(
        "Fleet operations over the instances' admin APIs (**soklet serve --admin-port**).\n\n"
        "Admin tokens are read from environment variables or 0600 files, never from the command line, and are "
        "never printed."
    ),
    no_args_is_help=True,
    cls=SokletGroup,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)

_EXIT: Final = {
    FleetStatus.CONVERGED: ExitCode.OK,
    FleetStatus.DIVERGED: ExitCode.REFUSED,
    FleetStatus.UNREACHABLE: ExitCode.IO,
    FleetStatus.INCOMPARABLE: ExitCode.IO,
    # Several listings report one instance: the listing is wrong, and waiting does not mend it.
    FleetStatus.DUPLICATED: ExitCode.USAGE,
}


def parse_timeout(text: str | float) -> float:
    """``--timeout``: seconds, a number above 0 and at most :data:`MAX_FLEET_TIMEOUT_SECONDS` (``5``, ``0.5``), or
    a duration (``1m``): the one duration parser, taking bare seconds and milliseconds here."""
    if isinstance(text, float):
        return text
    return parse_duration(
        text, maximum=_MAX_TIMEOUT, fractional=True, bare_seconds=True, message=_TIMEOUT_HELP
    ).total_seconds()


def parse_expect(text: str | Fingerprint | None) -> Fingerprint | None:
    """``--expect``: ``VALUE``, ``v2:VALUE`` or a fingerprint as soklet prints it (``v2:PROFILE:VALUE``)."""
    if text is None or isinstance(text, Fingerprint):
        return text
    try:
        return parse_expected_fingerprint(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def _parse_env_name(text: str | None) -> str | None:
    if text is not None and not is_environment_name(text):
        raise typer.BadParameter(
            f"an environment variable name is letters, digits and _, not starting with a digit "
            f"(at most {MAX_ENV_NAME_CHARS} characters)"
        )
    return text


def _check_wait(value: str | None) -> str | None:
    return None if value is None else check_duration(value)


_MAX_SKEW_HELP: Final = "--max-skew is a duration such as 5s, 2.5s or 1m (above 0, at most 1h, at most 3 decimals)"


def _check_max_skew(value: str) -> str:
    _max_skew_ms(value)
    return value


def _max_skew_ms(value: str) -> int:
    span = parse_duration(value, maximum=timedelta(hours=1), fractional=True, message=_MAX_SKEW_HELP)
    return round(span.total_seconds() * 1000)


def _target_given(expect: Fingerprint | None) -> bool:
    # What --wait converges to besides "equal": --expect's fingerprint (a store's generation will be the other
    # target when fleet check learns --store; add it here).
    return expect is not None


@fleet_app.command("check", cls=SokletCommand)
def check(
    urls: Annotated[
        list[str] | None,
        typer.Argument(metavar="URL", help="Admin base URLs (http:// or https://), such as http://127.0.0.1:9001."),
    ] = None,
    fleet: Annotated[
        Path | None,
        typer.Option("--fleet", metavar="FILE", parser=parse_file, help="A fleet file (TOML; see docs/fleet.md)."),
    ] = None,
    resolve: Annotated[
        str | None,
        typer.Option(
            "--resolve",
            metavar="HOST:PORT",
            help="Check every address HOST resolves to (all pods behind a headless service); "
            "https://HOST:PORT checks each over TLS against HOST's certificate.",
        ),
    ] = None,
    token_env: Annotated[
        str | None,
        typer.Option("--token-env", metavar="VAR", parser=_parse_env_name, help="The admin token is in this variable."),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", metavar="FILE", parser=parse_file, help="The admin token is in this 0600 file."),
    ] = None,
    ca_file: Annotated[
        Path | None,
        typer.Option("--ca-file", metavar="FILE", parser=parse_file, help="Trust this CA for https URLs."),
    ] = None,
    expect: Annotated[
        Fingerprint | None,
        typer.Option(
            "--expect",
            metavar="FINGERPRINT",
            parser=parse_expect,
            help="Converged only if every instance reports this fingerprint (VALUE or v2:VALUE).",
        ),
    ] = None,
    wait: Annotated[
        str | None,
        typer.Option(
            "--wait",
            metavar="DURATION",
            callback=_check_wait,
            help=f"Re-check until converged (or duplicated) or DURATION passes ({DURATION_HELP}).",
        ),
    ] = None,
    max_skew: Annotated[
        str,
        typer.Option(
            "--max-skew",
            metavar="DURATION",
            callback=_check_max_skew,
            help="Fail (kind clock-skew) when members' clocks are proven further apart than this "
            "(from each admin answer's Date header; such as 5s or 1m).",
        ),
    ] = f"{DEFAULT_MAX_SKEW_SECONDS}s",
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="S",
            parser=parse_timeout,
            help=f"Seconds each instance gets to answer, such as 5 or 0.5 (at most {MAX_FLEET_TIMEOUT_SECONDS:g}; "
            f"default {DEFAULT_FLEET_TIMEOUT_SECONDS:g}, or the fleet file's).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document instead of a table.")] = False,
    store: StoreModeOption = None,
) -> None:
    """Read every instance's keyring snapshot at once and tell whether the fleet converged.

    Converged: every instance answered, with fingerprints of one version that are all equal, the same active
    key, and every key id holding the same bytes everywhere. Otherwise the report names each difference: a
    different active key, a key missing on some instances, or the same key id with other bytes on some.

    Instances are counted by what their snapshot reports (the serving process's random identity; from an older
    build, its **soklet serve --instance** name), not by how they are listed: listings that report one instance
    are named as duplicates, and a fleet that agrees but has duplicates is not converged but duplicated (exit
    2). Distinct instances reporting one name (such as the default) are counted each, with a warning.

    Each member's clock offset is measured from its answer's Date header against this host's clock (uncertain by
    half the round trip plus a second: the header has whole seconds and a server may cache it for one); members
    proven further apart than **--max-skew** (default 5s) fail the check with kind clock-skew: an expiry is
    judged on another instance's clock.

    **--wait** re-checks until converged. Without **--expect** it can only prove the instances are equal now,
    and says so on stderr. Progress lines go to stderr (standard output keeps the --json document), and a
    failure is described on stderr even with --json; a converged --json result carries the fleet fingerprint at
    its top level.

    **With --store URL** the members are the instances whose heartbeats the store holds (no admin token; a
    member silent for 15 s is shown gone and not counted), and the target is the store's current fleet
    generation: converged when every live member applied it with one fingerprint and their clocks (as their
    heartbeats show them) are within --max-skew, so --wait proves the fleet holds the keyring meant (else exit 1).

    **Examples**

      SOKLET_ADMIN_TOKEN=... soklet fleet check --token-env SOKLET_ADMIN_TOKEN http://10.0.0.5:9001 http://10.0.0.6:9001

      soklet fleet check --fleet fleet.toml --expect v2:Tq3cU... --json

      soklet fleet check --resolve soklet-admin.prod.svc:9001 --token-file /run/secrets/admin --wait 5m

      soklet fleet check --store postgresql://soklet@db/soklet --wait 5m --json

    **Exit codes**: 0 converged (and equal to --expect when given; a shared name is only a warning); 1
    diverged (including clocks skewed beyond --max-skew); 2 usage, or duplicated (several listings report one
    instance); 3 an instance is unreachable or the fingerprints are of different versions (incomparable).
    """
    if store is not None:
        others = (urls, fleet, resolve, token_env, token_file, ca_file, expect, timeout)
        if any(value for value in others):
            fail("usage: --store reads the members from the store: no admin URL or admin option", ExitCode.USAGE)
        waited = parse_duration(wait).total_seconds() if wait is not None else None
        check_store(store, wait_seconds=waited, max_skew_ms=_max_skew_ms(max_skew), as_json=as_json)
    sources = sum((bool(urls), fleet is not None, resolve is not None))
    if sources != 1:
        fail("give admin URLs, --fleet FILE or --resolve HOST:PORT (exactly one of them)", ExitCode.USAGE)
    if token_env is not None and token_file is not None:
        fail("give --token-env or --token-file, not both", ExitCode.USAGE)
    deadline_seconds = parse_duration(wait).total_seconds() if wait is not None else None
    targets = fleet_targets(urls or [], fleet, resolve, token_env, token_file, ca_file, timeout)
    if wait is not None and not _target_given(expect):
        error_console.print(EQUAL_NOW_NOTE, markup=False)
    started = time.monotonic()
    report, checks = asyncio.run(
        _run(targets, expect, _max_skew_ms(max_skew), deadline_seconds, live=not as_json and console.is_terminal)
    )
    elapsed_ms = round((time.monotonic() - started) * 1000)
    if as_json:
        emit_json(_json(report, checks, elapsed_ms))
        if report.status is not FleetStatus.CONVERGED:
            # A CI log shows stderr: what failed is said there too, not only inside the JSON.
            for line in _failure_lines(report):
                error_console.print(line, markup=False)
    elif not console.is_terminal:
        console.print(_render(report, None))
    raise typer.Exit(int(_EXIT[report.status]))


def _failure_lines(report: FleetReport) -> list[str]:
    lines = [f"soklet: {_summary(report)}"]
    lines += [f"  - {difference.describe()}" for difference in report.differences]
    lines += [f"  - {duplicate.describe()}" for duplicate in report.duplicates]
    lines += [f"  - {printable_name(r.name)}: {r.problem}" for r in report.unreachable]
    return lines


async def _run(
    targets: Sequence[AdminTarget],
    expect: Fingerprint | None,
    max_skew_ms: int,
    wait_seconds: float | None,
    *,
    live: bool,
) -> tuple[FleetReport, int]:
    deadline = time.monotonic() + wait_seconds if wait_seconds is not None else None
    checks = 0

    async def once() -> FleetReport:
        nonlocal checks
        checks += 1
        return compare_fleet(await read_snapshots(targets), expect=expect, max_skew_ms=max_skew_ms)

    report = await once()
    if deadline is None or report.status in _FINAL:
        if live:
            console.print(_render(report, None))
        return report, checks
    if not live:
        # Not converged yet (checked above): check again until it is or the deadline passes, with progress on
        # stderr (stdout keeps the table or the JSON document for the end).
        last_summary, last_at = "", float("-inf")
        while True:
            summary = _summary(report)
            if summary != last_summary or time.monotonic() - last_at >= PROGRESS_LINE_SECONDS:
                left = max(deadline - time.monotonic(), 0)
                error_console.print(f"soklet: check {checks}: {summary}; {left:.0f} s left", markup=False)
                last_summary, last_at = summary, time.monotonic()
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(min(WAIT_INTERVAL_SECONDS, max(deadline - time.monotonic(), 0)))
            report = await once()
            if report.status in _FINAL:
                break
        return report, checks
    # People watch the table change in place (as kubectl rollout status gates a deploy); a log or pipe gets
    # the final table only.
    with Live(_render(report, deadline), console=console, auto_refresh=False) as display:
        while report.status not in _FINAL and time.monotonic() < deadline:
            await asyncio.sleep(min(WAIT_INTERVAL_SECONDS, max(deadline - time.monotonic(), 0)))
            report = await once()
            display.update(_render(report, deadline), refresh=True)
        display.update(_render(report, None), refresh=True)
    return report, checks


# Verdicts --wait does not check again: converged, and duplicated (the listing is wrong; time does not mend it).
_FINAL: Final = frozenset({FleetStatus.CONVERGED, FleetStatus.DUPLICATED})


def _render(report: FleetReport, deadline: float | None) -> Group:
    table = Table(title=None, show_lines=False)
    for column in ("instance", "reachable", "fingerprint", "active", "verification", "check values", "clock"):
        table.add_column(column)
    for reading in report.readings:
        table.add_row(*_row(reading))
    parts: list[Any] = [table]
    if report.differences:
        parts.append(Text("differences:"))
        parts += [Text(f"  - {difference.describe()}") for difference in report.differences]
    if report.duplicates:
        parts.append(Text("duplicates:"))
        parts += [Text(f"  - {duplicate.describe()}") for duplicate in report.duplicates]
    if report.shared_names:
        parts.append(Text("warning: shared names:"))
        parts += [Text(f"  - {shared.describe()}") for shared in report.shared_names]
    parts.append(Text(_skew_line(report)))
    parts.append(Text(_summary(report)))
    if deadline is not None:
        remaining = max(deadline - time.monotonic(), 0)
        parts.append(Text(f"waiting for convergence: {remaining:.0f} s left"))
    return Group(*parts)


def _row(reading: InstanceReading) -> list[Text]:
    name = printable_name(reading.name)
    snapshot = reading.snapshot
    if snapshot is None:
        return [Text(name), Text(f"no: {reading.problem}"), Text(""), Text(""), Text(""), Text(""), Text("")]
    reported = printable_name(snapshot.instance)
    shown = name if reported == name else f"{name} ({reported})"
    fingerprint = f"v{snapshot.fingerprint.version} {snapshot.fingerprint.value}"
    checks = " ".join(f"{key.id}={key.short_check_value}" for key in snapshot.keys)
    return [
        Text(shown),
        Text("yes"),
        Text(fingerprint),
        Text(snapshot.active),
        Text(", ".join(snapshot.verification) or "-"),
        Text(checks),
        Text(_offset(reading)),
    ]


def _offset(reading: InstanceReading) -> str:
    if reading.clock is None:
        return "-"
    return f"{reading.clock.offset_ms / 1000:+.1f} s ±{reading.clock.uncertainty_ms / 1000:.1f}"


def _skew_line(report: FleetReport) -> str:
    skew = report.skew
    limit = f"; at most {report.max_skew_ms / 1000:g} s allowed" if report.max_skew_ms is not None else ""
    if skew.behind is None or skew.ahead is None:
        return f"clock skew: not measured ({counted(skew.measured, 'clock')} read){limit}"
    return (
        f"clock skew: {skew.skew_ms / 1000:.1f} s between {printable_name(skew.behind)} and "
        f"{printable_name(skew.ahead)} (at least {skew.lower_ms / 1000:.1f} s, at most {skew.upper_ms / 1000:.1f} s)"
        f"{limit}"
    )


def _summary(report: FleetReport) -> str:
    count = report.instance_count
    instances = counted(count, "instance")
    if report.status is FleetStatus.DUPLICATED:
        return f"duplicated: {counted(len(report.readings), 'listing')} are {instances}; list each instance once"
    if report.status is FleetStatus.CONVERGED:
        first = report.readings[0].snapshot if report.readings else None
        shown = f"; fingerprint {first.fingerprint}" if first is not None else ""
        return f"converged: {instances}{shown}"
    if report.status is FleetStatus.UNREACHABLE:
        down = ", ".join(printable_name(reading.name) for reading in report.unreachable)
        return f"unreachable: {len(report.unreachable)} of {instances} did not answer ({down})"
    if report.status is FleetStatus.INCOMPARABLE:
        return "incomparable: the instances report fingerprints of different versions"
    return f"diverged: {instances} do not hold the same keyring"


def _json(report: FleetReport, checks: int, elapsed_ms: int) -> dict[str, Any]:
    fingerprint = report.fingerprint
    return {
        "status": report.status.value,
        "exit_code": int(_EXIT[report.status]),
        "fingerprint": fingerprint.to_json() if fingerprint is not None else None,
        "checks": checks,
        "elapsed_ms": elapsed_ms,
        "expected": report.expected.to_json() if report.expected is not None else None,
        "clock_skew": {**report.skew.to_json(), "max_skew_ms": report.max_skew_ms},
        "instances": [
            {
                "name": reading.name,
                "url": reading.url,
                "reachable": reading.reachable,
                "problem": reading.problem,
                "elapsed_ms": round(reading.elapsed_ms, 1),
                "clock": reading.clock.to_json() if reading.clock is not None else None,
                "snapshot": reading.snapshot.to_json() if reading.snapshot is not None else None,
            }
            for reading in report.readings
        ],
        "differences": [difference.to_json() for difference in report.differences],
        "duplicates": [duplicate.to_json() for duplicate in report.duplicates],
        "shared_names": [shared.to_json() for shared in report.shared_names],
    }
