"""``soklet tasks``: list, show and cancel the tasks a store holds (the operator's side of the tasks extension)."""

from __future__ import annotations

from typing import Annotated, Any, Final

import typer
from rich.table import Table
from rich.text import Text

from soklet_core.store import MAX_LIST_LIMIT, DurableStore, TaskRecord, TaskStatus

from .keyring_path import JsonOption
from .output import SokletCommand, SokletGroup, console, emit_json, shown_path
from .store_option import StoreOption, resolve_store_url, run_on_store, shown_store, time_text

__all__ = ["DEFAULT_LIST_LIMIT", "MAX_SHOWN_TEXT_CHARS", "tasks_app"]

#: How many tasks ``soklet tasks list`` prints when --limit is not given.
DEFAULT_LIST_LIMIT: Final = 100
#: Longest rendering of a tool name or status message in text output (JSON carries them whole).
MAX_SHOWN_TEXT_CHARS: Final = 200
#: Longest task id ``--after`` and TASK_ID take (the store's bound on every id).
_MAX_TASK_ID_CHARS: Final = 256

tasks_app = typer.Typer(
    name="tasks",
    help=(
        "Tasks in a store (**soklet serve --store**): list them, show one, cancel one.\n\n"
        "Arguments, states and results may be user data: they are never printed unless asked for with "
        "**--show-content**."
    ),
    no_args_is_help=True,
    cls=SokletGroup,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def parse_task_id(text: str) -> str:
    """TASK_ID and ``--after``: 1 to 256 visible ASCII characters (task ids are URL-safe tokens)."""
    if not text or len(text) > _MAX_TASK_ID_CHARS or not text.isascii() or not text.isprintable() or " " in text:
        raise typer.BadParameter(f"a task id is 1 to {_MAX_TASK_ID_CHARS} visible ASCII characters")
    return text


def _shown(text: str | None) -> str:
    # Tool names and status messages come from apps: escaped and bounded as every user-given text is shown.
    return "" if text is None else shown_path(text, limit=MAX_SHOWN_TEXT_CHARS)


def _summary(record: TaskRecord) -> dict[str, Any]:
    """A task's JSON form without its content: ids, status, tool, times."""
    return {
        "task_id": record.task_id,
        "status": record.status.value,
        "tool": record.tool,
        "partition": record.partition,
        "subject": record.subject,
        "status_message": record.status_message,
        "created_at": time_text(record.created_at),
        "updated_at": time_text(record.updated_at),
        "expires_at": time_text(record.expires_at),
    }


@tasks_app.command("list", cls=SokletCommand)
def list_tasks(
    status: Annotated[
        TaskStatus | None,
        typer.Option("--status", metavar="STATUS", help="Only tasks in this status.", case_sensitive=False),
    ] = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit", metavar="N", min=1, max=MAX_LIST_LIMIT, help=f"At most N tasks (1 to {MAX_LIST_LIMIT})."
        ),
    ] = DEFAULT_LIST_LIMIT,
    after: Annotated[
        str | None,
        typer.Option(
            "--after",
            metavar="TASK_ID",
            parser=parse_task_id,
            help="Start after this task (the last one a previous page printed).",
        ),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List tasks, oldest first: id, status, tool and times (never their arguments, state or result).

    A page holds at most --limit tasks; when it is full, the next page starts with **--after** the last id
    printed (the JSON document names it as next_after).

    **Examples**

      soklet tasks list --store sqlite:///var/lib/soklet/soklet.db

      soklet tasks list --status input_required --limit 20 --json

    **Exit codes**: 0 listed (perhaps none); 1 the store's schema is not one this soklet reads; 2 usage (a
    malformed store URL, an unknown status, a limit out of bounds); 3 the store is unreachable or its SQLite file
    does not exist.
    """
    url = resolve_store_url(store)

    async def work(opened: DurableStore) -> list[TaskRecord]:
        return await opened.list_tasks(status=status, limit=limit, after=after)

    records = run_on_store(url, work)
    next_after = records[-1].task_id if len(records) == limit else None
    if as_json:
        emit_json(
            {
                "store": url.redacted,
                "backend": url.backend,
                "tasks": [_summary(record) for record in records],
                "next_after": next_after,
            }
        )
        return
    if not records:
        console.print(f"no tasks{'' if status is None else ' ' + status.value} in {shown_store(url)}", markup=False)
        return
    table = Table(title=None, show_lines=False)
    for column in ("task id", "status", "tool", "created", "updated", "expires"):
        table.add_column(column, overflow="fold")  # folded, never cut: an id must stay whole to be pasted
    for record in records:
        cells = (
            record.task_id,
            record.status.value,
            _shown(record.tool),
            time_text(record.created_at) or "",
            time_text(record.updated_at) or "",
            time_text(record.expires_at) or "never",
        )
        table.add_row(*(Text(cell) for cell in cells))  # Text: no cell is ever read as rich markup
    console.print(table)
    if next_after is not None:
        console.print(f"more may follow: --after {next_after}", markup=False)
