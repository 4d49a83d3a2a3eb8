"""The ``--store URL`` option every store command shares, and how a store is opened, used and closed from the CLI.

A PostgreSQL URL carries its password: no message, table or JSON document here ever shows more than
:attr:`~soklet_core.store.StoreUrl.redacted`, and a refused URL is never repeated (the parser names only the rule
it broke).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Final, NoReturn, TypeVar

import typer

# The URL and the errors only: a command names its options without loading a store backend (imported when a
# store is opened).
from soklet_core.store.errors import StoreError, StoreErrorReason
from soklet_core.store.url import StoreUrl, default_store_url

from ._common import parse_duration
from .exit_codes import ExitCode
from .output import fail, shown_path

if TYPE_CHECKING:
    from soklet_core.store import DurableStore

__all__ = [
    "IF_OLDER_THAN_MAXIMUM",
    "STORE_ENV",
    "IfOlderThanOption",
    "StoreModeOption",
    "StoreOption",
    "parse_store_url",
    "resolve_store_url",
    "run_on_store",
    "shown_store",
    "store_failure",
    "time_text",
]

#: The environment variable that names the store when ``--store`` is not given.
STORE_ENV: Final = "SOKLET_STORE"

_T = TypeVar("_T")

#: How each store refusal ends a command.
_EXIT: Final = {
    StoreErrorReason.BAD_URL: ExitCode.USAGE,
    StoreErrorReason.UNAVAILABLE: ExitCode.IO,
    StoreErrorReason.SCHEMA: ExitCode.REFUSED,
    StoreErrorReason.TOO_LARGE: ExitCode.REFUSED,
    StoreErrorReason.CONFLICT: ExitCode.REFUSED,
    StoreErrorReason.INSECURE: ExitCode.IO,
    StoreErrorReason.QUOTA: ExitCode.REFUSED,
}


def parse_store_url(text: str | StoreUrl | None) -> StoreUrl | None:
    """``--store``: ``sqlite:///absolute/path`` or ``postgresql://user:password@host:port/database``.

    The refusal names the rule the URL broke, never the URL (it may hold a password)."""
    if text is None or isinstance(text, StoreUrl):
        return text
    try:
        return StoreUrl.parse(text)
    except StoreError as error:
        raise typer.BadParameter(str(error)) from None


StoreOption = Annotated[
    StoreUrl | None,
    typer.Option(
        "--store",
        metavar="URL",
        envvar=STORE_ENV,
        parser=parse_store_url,
        show_default=False,
        help=(
            "The durable store: sqlite:///absolute/path or postgresql://user:password@host:port/database; "
            "else $SOKLET_STORE, else the SQLite file soklet.db in the data folder ($SOKLET_DATA_DIR, else "
            "$XDG_STATE_HOME/soklet, else ~/.local/state/soklet)."
        ),
    ),
]


#: The longest ``--if-older-than`` (a key older than a year should have been rotated long ago).
IF_OLDER_THAN_MAXIMUM: Final = timedelta(days=366)
_IF_OLDER_THAN_HELP: Final = "--if-older-than is a duration such as 30d, 12h or 90m (above 0, at most 366d)"


# Unlike the store option of soklet serve, this one is not read from $SOKLET_STORE: a variable set for the
# server must not turn every keys command away from the keyring file it names.
StoreModeOption = Annotated[
    StoreUrl | None,
    typer.Option(
        "--store",
        metavar="URL",
        parser=parse_store_url,
        show_default=False,
        help=(
            "Work on the fleet keyring in this store (sqlite:///absolute/path or postgresql://...) instead of a "
            "keyring file; needs --kek-file, --kek-env or --kek-command (see docs/fleet.md)."
        ),
    ),
]


def _check_if_older_than(value: str | None) -> str | None:
    if value is not None:
        parse_duration(value, maximum=IF_OLDER_THAN_MAXIMUM, days=True, message=_IF_OLDER_THAN_HELP)
    return value


IfOlderThanOption = Annotated[
    str | None,
    typer.Option(
        "--if-older-than",
        metavar="DURATION",
        callback=_check_if_older_than,
        help=(
            "With --store: rotate only when the active key is older than this (such as 30d; for a scheduled job), "
            "else exit 0 doing nothing; an unfinished rotation is resumed."
        ),
    ),
]


def resolve_store_url(option: StoreUrl | None) -> StoreUrl:
    """``option`` if given (Typer fills it from ``$SOKLET_STORE`` too), else the embedded default."""
    return option if option is not None else default_store_url()


def shown_store(url: StoreUrl) -> str:
    """How a message names a store: its redacted URL, a SQLite path shown as every path the user gave."""
    return f"sqlite://{shown_path(url.sqlite_path)}" if url.backend == "sqlite" else url.redacted


def store_failure(url: StoreUrl, error: StoreError) -> NoReturn:
    """End the command with one line naming the (redacted) store and the refusal, and the refusal's exit code."""
    fail(f"store {shown_store(url)}: {error}", _EXIT.get(error.reason, ExitCode.IO))


def run_on_store(url: StoreUrl, work: Callable[[DurableStore], Awaitable[_T]], *, must_exist: bool = True) -> _T:
    """Open the store at ``url``, run ``work`` on it and close it, on a fresh event loop; a store refusal ends the
    command (:func:`store_failure`).

    With ``must_exist`` a SQLite file that is not there is refused (exit 3) instead of being created: an operator
    command that reads a store never leaves an empty one behind a mistyped path."""
    if must_exist and url.backend == "sqlite" and not url.sqlite_path.is_file():
        fail(f"store {shown_store(url)}: no such database file", ExitCode.IO)
    # The driver's pool logs each failed connection attempt (a warning with the driver's own text); a command
    # says what went wrong in its one line instead.
    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    import asyncio

    from soklet_core.store import open_store

    async def session() -> _T:
        store = open_store(url)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(session())
    except StoreError as error:
        store_failure(url, error)


def time_text(moment: datetime | None) -> str | None:
    """A store time as the CLI prints it: ISO 8601 UTC with milliseconds and ``Z``; ``None`` stays ``None``."""
    from soklet_core.mcp.server.durable._tasks import iso_time

    return None if moment is None else iso_time(moment)


def store_facts(url: StoreUrl) -> dict[str, str]:
    """How a ``--json`` document names its store: the redacted URL and the backend."""
    return {"store": url.redacted, "backend": url.backend}
