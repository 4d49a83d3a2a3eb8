"""What several ``soklet`` commands share, so each command module is only its arguments, a call into core and
its rendering: the option checkers and their bounds (the one duration parser, FILE names, rounds, times, endpoint
paths, partitions, protocol versions), the options seal-state and inspect-state both take, the clock they read,
how a JSON-RPC request file becomes a bound request, and the admin targets of a fleet (``fleet check`` and
``keys rotate --fleet``).

Durations carry a unit: a bare ``15`` is refused rather than silently taken as seconds, except by an option
whose name or help says seconds (``fleet check --timeout S``); only ASCII digits count (``str.isdigit`` would
take other scripts' digits too). Spelling a duration is the core's (:mod:`soklet_core.protection.durations`), since
the diagnosis's explanations use the same words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final
from urllib.parse import urlsplit

import typer

from soklet_core.json import MAX_REQUEST_BODY_BYTES
from soklet_core.keys import printable_name
from soklet_core.protection import MAX_ENDPOINT_PATH_CHARS, ProtectionUsageError, normalize_endpoint_path
from soklet_core.protection.durations import duration_text
from soklet_core.protocol import (
    DEFAULT_ENDPOINT_PATH,
    DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME,
    PROTOCOL_VERSION,
    PROTOCOL_VERSION_META_KEY,
)

from .exit_codes import ExitCode
from .output import fail, read_input, shown_path

if TYPE_CHECKING:
    # The fleet's HTTP client and its fleet file, the JSON codec and the request binding are imported by the
    # commands that reach a fleet or read a request, when they do: every command imports this module.
    from soklet_core.files import AdminTokenSource, FleetFileError
    from soklet_core.fleet import AdminTarget
    from soklet_core.json import JsonValue
    from soklet_core.protection import BoundRequest

__all__ = [
    "DEFAULT_LIFETIME",
    "DEFAULT_PATH",
    "DURATION_HELP",
    "MAX_DURATION",
    "MAX_FILE_NAME_BYTES",
    "MAX_PARTITION_CHARS",
    "MAX_PROTOCOL_VERSION_CHARS",
    "MAX_ROUNDS",
    "MAX_TIME_CHARS",
    "MAX_TIME_MS",
    "MIN_TIME_MS",
    "AtOption",
    "LifetimeOption",
    "MaxRoundsOption",
    "PartitionOption",
    "PathOption",
    "ProtocolVersionOption",
    "bind",
    "check_duration",
    "duration_text",
    "fleet_targets",
    "load_request",
    "now_ms",
    "parse_duration",
    "parse_endpoint_path",
    "parse_file",
    "parse_keyring",
    "parse_partition",
    "parse_protocol_version",
    "parse_rounds",
    "parse_time",
]

#: The longest duration any option takes: far beyond any sensible request-state lifetime or wait.
MAX_DURATION: Final = timedelta(days=366)
#: What the error messages and ``--help`` say a duration looks like.
DURATION_HELP: Final = "a duration with a unit, such as 15m, 900s, 1h or 1h30m"

_UNITS: Final = (("h", 3600), ("m", 60), ("s", 1))
#: The units of an option that also takes days (``--if-older-than 30d``).
_UNITS_WITH_DAYS: Final = (("d", 86400), *_UNITS)
_DIGITS: Final = frozenset("0123456789")
#: Digits of one part: 366 days is 8,784 hours or 527,040 minutes or 31,622,400 seconds, so 9 digits is ample.
_MAX_PART_DIGITS: Final = 9
#: Digits after the point of fractional seconds: durations are kept in whole milliseconds.
_FRACTION_DIGITS: Final = 3
#: Longest text looked at (three 9-digit parts and their units, and a fraction); anything longer is refused unread.
_MAX_TEXT: Final = len(_UNITS_WITH_DAYS) * (_MAX_PART_DIGITS + 1) + 1 + _FRACTION_DIGITS


def parse_duration(
    text: str,
    *,
    maximum: timedelta = MAX_DURATION,
    fractional: bool = False,
    bare_seconds: bool = False,
    days: bool = False,
    zero: bool = False,
    message: str | None = None,
) -> timedelta:
    """``15m``, ``900s``, ``1h``, ``1h30m`` or ``1h30m15s``: positive (or zero, with ``zero``) and at most
    ``maximum``. The one duration and
    seconds parser of the CLI: every option that takes a span of time calls it, with its own bounds.

    ``fractional`` also takes milliseconds on the seconds part (``0.5s``, ``1m2.25s``); ``bare_seconds`` takes a
    number without a unit as seconds, for options documented in seconds (``--timeout 5``); ``days`` also takes
    the unit ``d`` first (``30d``, ``1d12h``); ``zero`` also takes a zero span (``0s``), for a tolerance that may be
    none. ``message`` replaces
    every refusal message (an option's own words, which must state its bounds).

    Raises ``typer.BadParameter`` with a message that never repeats the input.
    """
    if not isinstance(text, str) or not text or len(text) > _MAX_TEXT:
        raise typer.BadParameter(message or DURATION_HELP)
    units = _UNITS_WITH_DAYS if days else _UNITS
    milliseconds = 0
    position = 0
    unit_index = 0
    while position < len(text):
        part_start = position
        while position < len(text) and text[position] in _DIGITS:
            position += 1
        whole = text[part_start:position]
        fraction = ""
        if fractional and position < len(text) and text[position] == ".":
            position += 1
            fraction_start = position
            while position < len(text) and text[position] in _DIGITS:
                position += 1
            fraction = text[fraction_start:position]
            if not fraction or len(fraction) > _FRACTION_DIGITS:
                raise typer.BadParameter(message or DURATION_HELP)
        if not whole or len(whole) > _MAX_PART_DIGITS:
            raise typer.BadParameter(message or DURATION_HELP)
        if position == len(text):
            # A bare number: seconds where the option says so, and only as the whole text.
            if not bare_seconds or part_start != 0:
                raise typer.BadParameter(message or f"{DURATION_HELP} (a bare number has no unit)")
            unit = "s"
        else:
            unit = text[position]
            position += 1
        # Units in the order h, m, s, each at most once; a fraction only on seconds.
        while unit_index < len(units) and units[unit_index][0] != unit:
            unit_index += 1
        if unit_index == len(units) or (fraction and unit != "s"):
            raise typer.BadParameter(message or DURATION_HELP)
        milliseconds += int(whole) * units[unit_index][1] * 1000
        milliseconds += int(fraction.ljust(_FRACTION_DIGITS, "0")) if fraction else 0
        unit_index += 1
    span = timedelta(milliseconds=milliseconds)
    if milliseconds < 0 or (milliseconds == 0 and not zero) or span > maximum:
        least = "zero or more" if zero else "positive"
        raise typer.BadParameter(message or f"the duration must be {least} and at most {_spell(maximum)}")
    return span


def check_duration(value: str) -> str:
    """A Typer callback: refuse a malformed duration at parse time, keep the text."""
    parse_duration(value)
    return value


#: The server's maximum request-state lifetime as the options take it, when they are not given: the server default.
DEFAULT_LIFETIME: Final = duration_text(DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME)


def _spell(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    if seconds % 86400 == 0:
        return f"{seconds // 86400} days"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds} s"


# ------------------------------------------------------------------------------------------ option values

#: Largest ``--round`` and ``--max-rounds``: far beyond any flow a person answers, and far inside the integers
#: a sealed state may hold, so no typo can seal a number the opener refuses.
MAX_ROUNDS: Final = 1_000_000
#: Earliest ``--at``: the Unix epoch (sealed times are epoch milliseconds; nothing is sealed before it).
MIN_TIME_MS: Final = 0
#: Latest ``--at``: 9999-12-31T23:59:59.999Z, the last moment an ISO 8601 date-time can spell.
MAX_TIME_MS: Final = 253_402_300_799_999
#: Longest ``--at`` text: an ISO 8601 date-time with microseconds and an offset is 32 characters.
MAX_TIME_CHARS: Final = 40
#: Longest ``--partition``, in characters (partitions are tenant or principal names).
MAX_PARTITION_CHARS: Final = 1_024
#: Longest ``--protocol-version`` (MCP versions are dates, such as :data:`~soklet_core.protocol.PROTOCOL_VERSION`).
MAX_PROTOCOL_VERSION_CHARS: Final = 64
#: Longest FILE name an option takes, in bytes: Linux's PATH_MAX.
MAX_FILE_NAME_BYTES: Final = 4_096

_TIME_HELP: Final = (
    "a time is epoch milliseconds (ASCII digits) or an ISO 8601 date-time such as 2026-08-01T12:00:00Z, "
    "from 1970 to 9999"
)
_VISIBLE_ASCII: Final = frozenset(chr(code) for code in range(0x21, 0x7F))
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
# C0, DEL and C1 controls: what a terminal would act on.
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
# Controls, and lone surrogates: how argv bytes that are not UTF-8 arrive.
_UNFIT_TEXT: Final = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

# Every parser below is a Typer ``parser=``: it gets the raw argument text (non-UTF-8 bytes arrive as lone
# surrogates) and refuses with a fixed message, never the value itself: a value can be 100 KB or hold terminal
# escapes. Typer may also hand back a value already converted (a default), which passes through.


def parse_rounds(text: str | int) -> int:
    """``--round`` / ``--max-rounds``: ASCII digits, 1 to :data:`MAX_ROUNDS`."""
    if isinstance(text, int):
        return text
    digits = len(str(MAX_ROUNDS))
    if not text or len(text) > digits or not _DIGITS.issuperset(text) or not 1 <= int(text) <= MAX_ROUNDS:
        raise typer.BadParameter(f"a round count is a whole number from 1 to {MAX_ROUNDS:,}")
    return int(text)


def parse_time(text: str | int | None) -> int | None:
    """``--at``: epoch milliseconds (ASCII digits) or an ISO 8601 date-time (no offset means UTC), within
    :data:`MIN_TIME_MS` … :data:`MAX_TIME_MS`."""
    if text is None or isinstance(text, int):
        return text
    stripped = text.strip(" ")
    if not stripped or len(stripped) > MAX_TIME_CHARS or not stripped.isascii() or not stripped.isprintable():
        raise typer.BadParameter(_TIME_HELP)
    if _DIGITS.issuperset(stripped):
        ms = int(stripped)
    else:
        try:
            moment = datetime.fromisoformat(stripped)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            ms = (moment - _EPOCH) // timedelta(milliseconds=1)
        except (ValueError, OverflowError):
            raise typer.BadParameter(_TIME_HELP) from None
    if not MIN_TIME_MS <= ms <= MAX_TIME_MS:
        raise typer.BadParameter(_TIME_HELP)
    return ms


def parse_endpoint_path(text: str) -> str:
    """``--path``: an endpoint path the normalizer takes (starts with ``/``, no ``?`` or ``#``, bounded)."""
    message = f"an endpoint path starts with /, holds no ? or # and is at most {MAX_ENDPOINT_PATH_CHARS:,} characters"
    # The length first: nothing longer is looked at.
    if len(text) > MAX_ENDPOINT_PATH_CHARS or not text.isprintable():
        raise typer.BadParameter(message)
    try:
        normalize_endpoint_path(text)
    except ProtectionUsageError:
        raise typer.BadParameter(message) from None
    return text


def parse_partition(text: str) -> str:
    """``--partition``: 1 to :data:`MAX_PARTITION_CHARS` characters of valid UTF-8 with no control character."""
    if not text or len(text) > MAX_PARTITION_CHARS or _UNFIT_TEXT.search(text):
        raise typer.BadParameter(
            f"a partition is 1 to {MAX_PARTITION_CHARS:,} characters of valid UTF-8 with no control character"
        )
    return text


def parse_protocol_version(text: str) -> str:
    """``--protocol-version``: 1 to :data:`MAX_PROTOCOL_VERSION_CHARS` visible ASCII characters."""
    if not text or len(text) > MAX_PROTOCOL_VERSION_CHARS or not _VISIBLE_ASCII.issuperset(text):
        raise typer.BadParameter(
            f"a protocol version is 1 to {MAX_PROTOCOL_VERSION_CHARS} visible ASCII characters, such as "
            f"{PROTOCOL_VERSION}"
        )
    return text


def parse_file(text: str | Path) -> Path:
    """A FILE option (``-`` where it means stdin): 1 to :data:`MAX_FILE_NAME_BYTES` bytes, no control character.

    Names that are not UTF-8 are file names all the same (they arrive as surrogate escapes) and are kept.
    """
    if isinstance(text, Path):
        return text
    if not text or len(text) > MAX_FILE_NAME_BYTES or _CONTROL.search(text):
        raise typer.BadParameter(f"a file name is 1 to {MAX_FILE_NAME_BYTES:,} bytes with no control character")
    try:
        size = len(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:  # a lone surrogate that no byte could have produced
        size = MAX_FILE_NAME_BYTES + 1
    if size > MAX_FILE_NAME_BYTES:
        raise typer.BadParameter(f"a file name is 1 to {MAX_FILE_NAME_BYTES:,} bytes with no control character")
    return Path(text)


def parse_keyring(text: str) -> str:
    """``--keyring``: a FILE name as :func:`parse_file` bounds it, never empty (as a path, ``""`` would silently
    become ``.``, the current folder). Also checks a name taken from ``$SOKLET_KEYRING``."""
    if not text:
        raise typer.BadParameter("the keyring path is empty")
    return str(parse_file(text))


# ------------------------------------------------------------------------------------------ shared options

# The same words and bounds for inspect-state (the retry's values) and seal-state (the emitting request's).
PathOption = Annotated[
    str,
    typer.Option(
        "--path",
        metavar="PATH",
        parser=parse_endpoint_path,
        help=f"The request's endpoint path (at most {MAX_ENDPOINT_PATH_CHARS:,} characters).",
    ),
]
PartitionOption = Annotated[
    str,
    typer.Option(
        "--partition",
        metavar="PARTITION",
        parser=parse_partition,
        help=f"The caller's admitted authorization partition (1 to {MAX_PARTITION_CHARS:,} characters).",
    ),
]
ProtocolVersionOption = Annotated[
    str | None,
    typer.Option(
        "--protocol-version",
        metavar="VERSION",
        parser=parse_protocol_version,
        help=f"The request's protocol version; default: its params._meta member {PROTOCOL_VERSION_META_KEY}, "
        f"else {PROTOCOL_VERSION}.",
    ),
]
MaxRoundsOption = Annotated[
    int,
    typer.Option(
        "--max-rounds", metavar="N", parser=parse_rounds, help=f"The server's maximum rounds (1 to {MAX_ROUNDS:,})."
    ),
]
AtOption = Annotated[
    int | None,
    typer.Option(
        "--at",
        metavar="TIME",
        parser=parse_time,
        help="Use TIME as now: ISO 8601 (no offset means UTC) or epoch milliseconds, 1970 to 9999.",
    ),
]
LifetimeOption = Annotated[
    str,
    typer.Option(
        "--lifetime",
        metavar="DURATION",
        callback=check_duration,
        help=f"The server's maximum request-state lifetime: {DURATION_HELP}; at most {MAX_DURATION.days} days.",
    ),
]


# ------------------------------------------------------------------------------------------ requests and the clock

#: The endpoint path assumed when --path is not given: the server's default.
DEFAULT_PATH: Final = DEFAULT_ENDPOINT_PATH


def now_ms(at: int | None = None) -> int:
    """``--at`` when given, else the wall clock, in epoch milliseconds: the "now" a command seals or opens at."""
    return at if at is not None else int(datetime.now(UTC).timestamp() * 1000)


def load_request(path: Path, label: str, *, code: ExitCode) -> JsonValue:
    """A JSON-RPC request file (or ``-``), parsed strictly; exits with ``code`` if it is not JSON."""
    from soklet_core.json import JsonError, parse

    data = read_input(str(path), max_bytes=MAX_REQUEST_BODY_BYTES)
    try:
        return parse(data)
    except JsonError as error:
        fail(f"{label}: not strict JSON: {error}", code)


def bind(
    request: JsonValue, label: str, *, path: str, partition: str, protocol_version: str | None, code: ExitCode
) -> BoundRequest:
    """The request's binding and id as the server binds it (:func:`soklet_core.protection.bind_request`), or exit
    with ``code``."""
    from soklet_core.protection import bind_request

    try:
        return bind_request(request, path=path, partition=partition, protocol_version=protocol_version)
    except ProtectionUsageError as error:
        fail(f"{label}: {error}", code)


# ------------------------------------------------------------------------------------------ fleet targets

# Longest --resolve host, in characters: a DNS name is at most 253.
_MAX_HOST_CHARS: Final = 253


def fleet_targets(
    urls: Sequence[str],
    fleet: Path | None,
    resolve: str | None,
    token_env: str | None,
    token_file: Path | None,
    ca_file: Path | None,
    timeout: float | None,
) -> list[AdminTarget]:
    """The instances to read, from exactly one source (URLs, a fleet file or a name to resolve), with their tokens.

    Shared by ``fleet check`` and ``keys rotate --fleet`` so a fleet file is read one way only.
    """
    import asyncio

    from soklet_core.files import (
        DEFAULT_FLEET_TIMEOUT_SECONDS,
        MAX_FLEET_INSTANCES,
        AdminTokenEnv,
        AdminTokenFile,
        FleetFileError,
        check_admin_url,
        read_fleet_file,
    )
    from soklet_core.fleet import AdminTarget, resolve_targets

    if fleet is not None:
        if token_env is not None or token_file is not None or ca_file is not None:
            fail("with --fleet the fleet file names the tokens and CA files", ExitCode.USAGE)
        try:
            document = read_fleet_file(fleet)
        except FleetFileError as error:
            fail(_fleet_error_text(error), ExitCode.IO if error.is_io else ExitCode.USAGE)
        tokens: dict[AdminTokenSource, str] = {}
        targets = []
        for instance in document.instances:
            if instance.token not in tokens:
                tokens[instance.token] = _token(instance.token)
            targets.append(
                AdminTarget(
                    instance.name,
                    instance.url,
                    tokens[instance.token],
                    instance.ca_file,
                    timeout if timeout is not None else instance.timeout,
                )
            )
        return targets
    source: AdminTokenSource | None = (
        AdminTokenEnv(token_env) if token_env is not None else AdminTokenFile(str(token_file)) if token_file else None
    )
    if source is None:
        fail("give the admin token with --token-env VAR or --token-file FILE", ExitCode.USAGE)
    seconds = timeout if timeout is not None else DEFAULT_FLEET_TIMEOUT_SECONDS
    ca = str(ca_file) if ca_file is not None else None
    if resolve is not None:
        scheme, host, port = _parse_resolve(resolve)
        token = _token(source)
        try:
            found = asyncio.run(resolve_targets(host, port, token=token, scheme=scheme, timeout=seconds, ca_file=ca))
        except (OSError, UnicodeError):
            fail(f"--resolve: the name {printable_name(host)} does not resolve", ExitCode.IO)
        return list(found)
    if len(urls) > MAX_FLEET_INSTANCES:
        fail(f"at most {MAX_FLEET_INSTANCES:,} URLs", ExitCode.USAGE)
    for index, url in enumerate(urls, start=1):
        problem = check_admin_url(url)
        if problem is not None:
            fail(f"URL {index}: the admin URL {problem}", ExitCode.USAGE)
    token = _token(source)
    names = _url_names(urls)
    return [AdminTarget(name, url, token, ca, seconds) for name, url in zip(names, urls, strict=True)]


def _url_names(urls: Sequence[str]) -> list[str]:
    # The host, port and path of each URL (they hold no credentials: check_admin_url refuses those); a
    # repeated one gets #2, #3.
    names: list[str] = []
    seen: dict[str, int] = {}
    for url in urls:
        parts = urlsplit(url)
        base = parts.netloc + parts.path.rstrip("/")
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return names


def _parse_resolve(text: str) -> tuple[str, str, int]:
    message = "--resolve takes HOST:PORT or https://HOST:PORT (PORT 1 to 65535)"
    scheme = "http"
    for prefix in ("https://", "http://"):
        if text.startswith(prefix):
            scheme, text = prefix[:-3], text[len(prefix) :]
    host, _, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if (
        not host
        or len(host) > _MAX_HOST_CHARS
        or not host.isascii()
        or not all(char.isalnum() or char in ".-_:" for char in host)
        or not port_text.isascii()
        or not port_text.isdigit()
        or len(port_text) > 5
        or not 1 <= int(port_text) <= 65535
    ):
        fail(message, ExitCode.USAGE)
    return scheme, host, int(port_text)


def _token(source: AdminTokenSource) -> str:
    from soklet_core.files import FleetFileError
    from soklet_core.fleet import read_admin_token

    try:
        return read_admin_token(source)
    except FleetFileError as error:
        fail(_fleet_error_text(error), ExitCode.IO if error.is_io else ExitCode.USAGE)


def _fleet_error_text(error: FleetFileError) -> str:
    prefix = f"{shown_path(error.path)}: " if error.path is not None else ""
    where = f"{error.where}: " if error.where is not None else ""
    return f"{prefix}{where}{error.problem}"
