"""What several ``soklet`` commands share: the option checkers and their bounds (the one duration parser,
FILE names, rounds, times, endpoint paths, partitions, protocol versions), the options seal-state and
inspect-state both take, and the one way a message names a path the user gave.

Durations carry a unit: a bare ``15`` is refused rather than silently taken as seconds, except by an option
whose name or help says seconds (``fleet check --timeout S``); only ASCII digits count (``str.isdigit`` would
take other scripts' digits too).
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Final

import typer

from soklet_core.files import KeyringFileError
from soklet_core.keys import printable_name
from soklet_core.protection import MAX_ENDPOINT_PATH_CHARS, ProtectionUsageError, normalize_endpoint_path
from soklet_core.protocol import DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME, PROTOCOL_VERSION, PROTOCOL_VERSION_META_KEY

__all__ = [
    "DEFAULT_LIFETIME",
    "DURATION_HELP",
    "MAX_DURATION",
    "MAX_FILE_NAME_BYTES",
    "MAX_PARTITION_CHARS",
    "MAX_PROTOCOL_VERSION_CHARS",
    "MAX_ROUNDS",
    "MAX_SHOWN_PATH_CHARS",
    "MAX_TIME_CHARS",
    "MAX_TIME_MS",
    "MIN_TIME_MS",
    "AtOption",
    "LifetimeOption",
    "MaxRoundsOption",
    "PartitionOption",
    "PathOption",
    "ProtocolVersionOption",
    "check_duration",
    "duration_text",
    "file_error_text",
    "parse_duration",
    "parse_endpoint_path",
    "parse_file",
    "parse_keyring",
    "parse_partition",
    "parse_protocol_version",
    "parse_rounds",
    "parse_time",
    "shown_path",
]

#: The longest duration any option takes: far beyond any sensible request-state lifetime or wait.
MAX_DURATION: Final = timedelta(days=366)
#: What the error messages and ``--help`` say a duration looks like.
DURATION_HELP: Final = "a duration with a unit, such as 15m, 900s, 1h or 1h30m"

_UNITS: Final = (("h", 3600), ("m", 60), ("s", 1))
_DIGITS: Final = frozenset("0123456789")
#: Digits of one part: 366 days is 8,784 hours or 527,040 minutes or 31,622,400 seconds, so 9 digits is ample.
_MAX_PART_DIGITS: Final = 9
#: Digits after the point of fractional seconds: durations are kept in whole milliseconds.
_FRACTION_DIGITS: Final = 3
#: Longest text looked at (three 9-digit parts and their units, and a fraction); anything longer is refused unread.
_MAX_TEXT: Final = 3 * (_MAX_PART_DIGITS + 1) + 1 + _FRACTION_DIGITS
_MILLISECOND: Final = timedelta(milliseconds=1)


def parse_duration(
    text: str,
    *,
    maximum: timedelta = MAX_DURATION,
    fractional: bool = False,
    bare_seconds: bool = False,
    message: str | None = None,
) -> timedelta:
    """``15m``, ``900s``, ``1h``, ``1h30m`` or ``1h30m15s``: positive and at most ``maximum``. The one duration and
    seconds parser of the CLI: every option that takes a span of time calls it, with its own bounds.

    ``fractional`` also takes milliseconds on the seconds part (``0.5s``, ``1m2.25s``); ``bare_seconds`` takes a
    number without a unit as seconds, for options documented in seconds (``--timeout 5``). ``message`` replaces
    every refusal message (an option's own words, which must state its bounds).

    Raises ``typer.BadParameter`` with a message that never repeats the input.
    """
    if not isinstance(text, str) or not text or len(text) > _MAX_TEXT:
        raise typer.BadParameter(message or DURATION_HELP)
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
        while unit_index < len(_UNITS) and _UNITS[unit_index][0] != unit:
            unit_index += 1
        if unit_index == len(_UNITS) or (fraction and unit != "s"):
            raise typer.BadParameter(message or DURATION_HELP)
        milliseconds += int(whole) * _UNITS[unit_index][1] * 1000
        milliseconds += int(fraction.ljust(_FRACTION_DIGITS, "0")) if fraction else 0
        unit_index += 1
    span = timedelta(milliseconds=milliseconds)
    if milliseconds <= 0 or span > maximum:
        raise typer.BadParameter(message or f"the duration must be positive and at most {_spell(maximum)}")
    return span


def check_duration(value: str) -> str:
    """A Typer callback: refuse a malformed duration at parse time, keep the text."""
    parse_duration(value)
    return value


def duration_text(span: timedelta) -> str:
    """``span`` as :func:`parse_duration` reads it back, shortest first: ``15m``, ``10s``, ``1h30m``, ``0.5s``.

    How help texts and defaults spell a duration held as a constant, so the text cannot drift from the value.
    """
    milliseconds = span // _MILLISECOND
    if milliseconds <= 0 or timedelta(milliseconds=milliseconds) != span:
        raise ValueError("a positive whole number of milliseconds")
    seconds, fraction = divmod(milliseconds, 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    if fraction:
        text += f"{seconds}.{fraction:03d}".rstrip("0") + "s"
    elif seconds or not text:
        text += f"{seconds}s"
    return text


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


# ------------------------------------------------------------------------------------------ paths in messages

#: Longest rendering of a path the user gave in any message: the start and the end (the file's own name) are
#: kept around a "…", so a 4 KB name cannot flood a terminal.
MAX_SHOWN_PATH_CHARS: Final = 200
# What a path component that looks like pasted key material is shown as.
_MATERIAL_COMPONENT: Final = "a file name"


def _escaped(char: str) -> str:
    # Bytes that are not UTF-8 (surrogate escapes) as \xNN, every other character a terminal could act on (C0,
    # DEL, C1, line and paragraph separators, format characters, lone surrogates) as Python would escape it;
    # printable text as it is.
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if char.isprintable():
        return char
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown_path(path: str | os.PathLike[str], *, limit: int | None = MAX_SHOWN_PATH_CHARS) -> str:
    r"""How a message names a path the user gave (or a text built on one): every ``/``-separated part that looks
    like key material replaced by a fixed stand-in (:func:`soklet_core.keys.printable_name`), control characters
    and bytes that are not UTF-8 escaped, and at most ``limit`` characters (start and end kept around ``…``).

    >>> shown_path("keys/ring\x1b[2J.toml")
    'keys/ring\\x1b[2J.toml'
    """
    text = os.fspath(path)
    parts = [printable_name(part, what=_MATERIAL_COMPONENT) for part in text.split("/")]
    pieces = [_escaped(char) for char in "/".join(parts)]
    if limit is None or sum(map(len, pieces)) <= limit:
        return "".join(pieces)
    # Whole escapes only: a cut never leaves half of one.
    budget = (limit - 1) // 2
    head: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) > budget:
            break
        head.append(piece)
        used += len(piece)
    tail: list[str] = []
    used = 0
    for piece in reversed(pieces[len(head) :]):
        if used + len(piece) > limit - 1 - budget:
            break
        tail.append(piece)
        used += len(piece)
    return "".join(head) + "…" + "".join(reversed(tail))


def file_error_text(error: KeyringFileError) -> str:
    """``error``'s message with its path, and the folder or lock file its detail may name, shown by
    :func:`shown_path` (the core message repeats the path as it was given)."""
    if error.path is None:
        return str(error)
    detail = shown_path(error.detail) if error.detail else None
    shown = KeyringFileError(error.reason, path=shown_path(error.path), key=error.key, field=error.field, detail=detail)
    return str(shown)


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
