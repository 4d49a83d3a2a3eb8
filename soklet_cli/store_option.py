"""The ``--store URL`` option every store command shares, and how a store is opened, used and closed from the CLI.

A PostgreSQL URL carries its password: no message, table or JSON document here ever shows more than
:attr:`~soklet_core.store.StoreUrl.redacted`, and a refused URL is never repeated (the parser names only the rule
it broke).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Final, NoReturn, TypeVar

import typer

from soklet_core.mcp.server.durable._tasks import iso_time
from soklet_core.store import (
    DurableStore,
    StoreError,
    StoreErrorReason,
    StoreUrl,
    default_store_url,
    open_store,
)

from .exit_codes import ExitCode
from .output import fail, shown_path

__all__ = [
    "STORE_ENV",
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
    return None if moment is None else iso_time(moment)


def store_facts(url: StoreUrl) -> dict[str, str]:
    """How a ``--json`` document names its store: the redacted URL and the backend."""
    return {"store": url.redacted, "backend": url.backend}
