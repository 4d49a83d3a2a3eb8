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
from .output import SokletCommand, SokletGroup, console, counted, emit_json, fail

__all__ = ["WAIT_INTERVAL_SECONDS", "fleet_app"]

#: Seconds between two checks under ``--wait``.
WAIT_INTERVAL_SECONDS: Final = 1.0
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
) -> None:
    """Read every instance's keyring snapshot at once and tell whether the fleet converged.

    Converged: every instance answered, with fingerprints of one version that are all equal, the same active
    key, and every key id holding the same bytes everywhere. Otherwise the report names each difference: a
    different active key, a key missing on some instances, or the same key id with other bytes on some.

    Instances are counted by what their snapshot reports (the serving process's random identity; from an older
    build, its **soklet serve --instance** name), not by how they are listed: listings that report one instance
    are named as duplicates, and a fleet that agrees but has duplicates is not converged but duplicated (exit
    2). Distinct instances reporting one name (such as the default) are counted each, with a warning.

    **Examples**

      SOKLET_ADMIN_TOKEN=... soklet fleet check --token-env SOKLET_ADMIN_TOKEN http://10.0.0.5:9001 http://10.0.0.6:9001

      soklet fleet check --fleet fleet.toml --expect v2:Tq3cU... --json

      soklet fleet check --resolve soklet-admin.prod.svc:9001 --token-file /run/secrets/admin --wait 5m

    **Exit codes**: 0 converged (and equal to --expect when given; a shared name is only a warning); 1
    diverged; 2 usage, or duplicated (several listings report one instance); 3 an instance is unreachable or
    the fingerprints are of different versions (incomparable).
    """
    sources = sum((bool(urls), fleet is not None, resolve is not None))
    if sources != 1:
        fail("give admin URLs, --fleet FILE or --resolve HOST:PORT (exactly one of them)", ExitCode.USAGE)
    if token_env is not None and token_file is not None:
        fail("give --token-env or --token-file, not both", ExitCode.USAGE)
    deadline_seconds = parse_duration(wait).total_seconds() if wait is not None else None
    targets = fleet_targets(urls or [], fleet, resolve, token_env, token_file, ca_file, timeout)
    started = time.monotonic()
    report, checks = asyncio.run(_run(targets, expect, deadline_seconds, live=not as_json))
    elapsed_ms = round((time.monotonic() - started) * 1000)
    if as_json:
        emit_json(_json(report, checks, elapsed_ms))
    raise typer.Exit(int(_EXIT[report.status]))


async def _run(
    targets: Sequence[AdminTarget], expect: Fingerprint | None, wait_seconds: float | None, *, live: bool
) -> tuple[FleetReport, int]:
    deadline = time.monotonic() + wait_seconds if wait_seconds is not None else None
    checks = 0

    async def once() -> FleetReport:
        nonlocal checks
        checks += 1
        return compare_fleet(await read_snapshots(targets), expect=expect)

    report = await once()
    if deadline is None or report.status in _FINAL:
        if live:
            console.print(_render(report, None))
        return report, checks
    if not live:
        # Not converged yet (checked above): check again until it is or the deadline passes.
        while time.monotonic() < deadline:
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
    for column in ("instance", "reachable", "fingerprint", "active", "verification", "check values"):
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
    parts.append(Text(_summary(report)))
    if deadline is not None:
        remaining = max(deadline - time.monotonic(), 0)
        parts.append(Text(f"waiting for convergence: {remaining:.0f} s left"))
    return Group(*parts)


def _row(reading: InstanceReading) -> list[Text]:
    name = printable_name(reading.name)
    snapshot = reading.snapshot
    if snapshot is None:
        return [Text(name), Text(f"no: {reading.problem}"), Text(""), Text(""), Text(""), Text("")]
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
    ]


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
    return {
        "status": report.status.value,
        "exit_code": int(_EXIT[report.status]),
        "checks": checks,
        "elapsed_ms": elapsed_ms,
        "expected": report.expected.to_json() if report.expected is not None else None,
        "instances": [
            {
                "name": reading.name,
                "url": reading.url,
                "reachable": reading.reachable,
                "problem": reading.problem,
                "elapsed_ms": round(reading.elapsed_ms, 1),
                "snapshot": reading.snapshot.to_json() if reading.snapshot is not None else None,
            }
            for reading in report.readings
        ],
        "differences": [difference.to_json() for difference in report.differences],
        "duplicates": [duplicate.to_json() for duplicate in report.duplicates],
        "shared_names": [shared.to_json() for shared in report.shared_names],
    }
