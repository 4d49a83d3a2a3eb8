"""``soklet tasks``: list, show and cancel the tasks a store holds (the operator's side of the tasks extension)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Final

import typer
from rich.table import Table
from rich.text import Text

from soklet_core.mcp import Identity, Registry
from soklet_core.mcp.server.admission import Admission
from soklet_core.mcp.server.durable._tasks import TaskError, TaskManager, TaskRun, detailed_task, task_run
from soklet_core.store import MAX_KEY_CHARS, MAX_LIST_LIMIT, DurableStore, TaskRecord, TaskStatus

from .exit_codes import ExitCode
from .keyring_path import JsonOption
from .output import SokletCommand, SokletGroup, console, emit_json, fail, shown_path
from .store_option import StoreOption, resolve_store_url, run_on_store, shown_store, store_facts, time_text

__all__ = ["DEFAULT_LIST_LIMIT", "MAX_SHOWN_TEXT_CHARS", "tasks_app"]

#: How many tasks ``soklet tasks list`` prints when --limit is not given.
DEFAULT_LIST_LIMIT: Final = 100
#: Longest rendering of a tool name or status message in text output (JSON carries them whole).
MAX_SHOWN_TEXT_CHARS: Final = 200

tasks_app = typer.Typer(
    name="tasks",
    help=(
        "Tasks in a store (**soklet serve --store**): list them, show one, cancel one, purge the expired ones.\n\n"
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
    if not text or len(text) > MAX_KEY_CHARS or not text.isascii() or not text.isprintable() or " " in text:
        raise typer.BadParameter(f"a task id is 1 to {MAX_KEY_CHARS} visible ASCII characters")
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
                **store_facts(url),
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


TaskIdArgument = Annotated[
    str,
    typer.Argument(
        metavar="TASK_ID",
        parser=parse_task_id,
        help="The task's id (as tasks/get names it); one that begins with '-' goes after '--' (soklet tasks show "
        "-- -Fj2p...).",
    ),
]


def _outstanding(detailed: dict[str, Any]) -> list[dict[str, str]]:
    """The outstanding input requests of a DetailedTask: each key and the method it asks (never its params)."""
    requests = detailed.get("inputRequests")
    if not isinstance(requests, dict):
        return []
    return [{"key": key, "method": str(request.get("method", ""))} for key, request in requests.items()]


def _run_facts(run: TaskRun) -> dict[str, Any]:
    """Who runs the task's step: the lease holder and its expiry (``null`` when free), attempts, round."""
    return {
        "lease_holder": run.holder,
        "lease_expires_at": time_text(run.lease_expires_at),
        "attempts": run.attempts,
        "round": run.round,
    }


def _content(detailed: dict[str, Any]) -> dict[str, Any]:
    """What a DetailedTask holds of user data: the outstanding requests' params, the result or the error."""
    return {name: detailed[name] for name in ("inputRequests", "result", "error") if name in detailed}


@tasks_app.command("show", cls=SokletCommand)
def show(
    task_id: TaskIdArgument,
    show_content: Annotated[
        bool,
        typer.Option(
            "--show-content",
            help="Also print what the task holds of user data: its input requests' params, its result or error.",
        ),
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one task: status, times, tool, status message, whose it is, the input requests it waits for (key
    and method), and who runs its step: the lease holder, when its lease expires, the attempts and the round.

    The task is read as tasks/get would answer it, without running anything. Its arguments, state and result may
    be user data: they are printed only with **--show-content** (the arguments and state never are).

    **Examples**

      soklet tasks show 3kq2V0mZ9W8xYpL1 --store sqlite:///var/lib/soklet/soklet.db

      soklet tasks show 3kq2V0mZ9W8xYpL1 --json --show-content

    **Exit codes**: 0 shown; 1 the store's schema, or the task's stored document, is not one this soklet reads;
    2 usage; 3 the store is unreachable or its SQLite file does not exist; 5 no such task.
    """
    url = resolve_store_url(store)

    async def work(opened: DurableStore) -> TaskRecord | None:
        return await opened.get_task(task_id)

    record = run_on_store(url, work)
    if record is None:
        fail(f"no task {task_id} in the store", ExitCode.NOT_FOUND)
    try:
        detailed = json.loads(detailed_task(record))
    except ValueError:
        # A document written by another program, or edited by hand: said in one line, never quoted.
        fail(f"task {task_id}: its stored document is not one this soklet reads", ExitCode.REFUSED)
    run = task_run(record)
    outstanding = _outstanding(detailed)
    error = detailed.get("error")
    error_code = error.get("code") if isinstance(error, dict) else None
    if as_json:
        document: dict[str, Any] = {
            **store_facts(url),
            "task": {
                **_summary(record),
                "input_requests": outstanding,
                "error_code": error_code,
                "run": _run_facts(run),
            },
        }
        if show_content:
            document["content"] = _content(detailed)
        emit_json(document)
        return
    table = Table(show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = [
        ("task id", record.task_id),
        ("status", record.status.value),
        ("tool", _shown(record.tool)),
        ("message", _shown(record.status_message) or "-"),
        ("created", time_text(record.created_at) or ""),
        ("updated", time_text(record.updated_at) or ""),
        ("expires", time_text(record.expires_at) or "never"),
        ("partition", _shown(record.partition)),
        ("subject", "(anonymous)" if record.subject is None else _shown(record.subject)),
        ("round", str(run.round)),
        ("attempts", str(run.attempts)),
        # Checked against the shape soklet writes (tasks.task_run): shown whole, even a host name of hex digits.
        ("lease holder", "-" if run.holder is None else run.holder),
        ("lease expires", time_text(run.lease_expires_at) or "-"),
    ]
    rows += [("waiting for", f"{_shown(item['key'])} ({_shown(item['method'])})") for item in outstanding]
    if error_code is not None:
        rows.append(("error code", str(error_code)))
    for name, value in rows:
        table.add_row(name, Text(value))
    console.print(table)
    if show_content:
        console.print(Text(json.dumps(_content(detailed), ensure_ascii=True, indent=2)))


@dataclass(frozen=True, slots=True)
class _Cancel:
    """What an operator cancel found and left."""

    before: TaskRecord | None
    after: TaskRecord | None
    expired: bool


async def _cancel(store: DurableStore, task_id: str) -> _Cancel:
    before = await store.get_task(task_id)
    if before is None:
        return _Cancel(None, None, expired=False)
    # The task manager's own cancel, as the task's owner: the same compare-and-swap and the same transitions as a
    # tasks/cancel from its client (a terminal task is left as it is). It runs no step: its registry is empty.
    manager = TaskManager(store, registry=Registry())
    owner = Admission(Identity(before.subject), before.partition)
    try:
        await manager.cancel(task_id, owner)
    except TaskError:  # expired (or gone meanwhile): the same not-found answer either way
        return _Cancel(before, await store.get_task(task_id), expired=True)
    finally:
        await manager.close()
    return _Cancel(before, await store.get_task(task_id), expired=False)


@tasks_app.command("cancel", cls=SokletCommand)
def cancel(
    task_id: TaskIdArgument,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel one task, as its client's tasks/cancel would: a working or input_required task becomes cancelled at
    once; a completed, failed or cancelled one is left as it is (exit 0 all the same).

    The server running the task's step notices within a few seconds and stops it; a result it finishes later is
    dropped (the change is a compare-and-swap on the task's version).

    **Examples**

      soklet tasks cancel 3kq2V0mZ9W8xYpL1 --store postgresql://soklet@db.internal/soklet

      soklet tasks cancel 3kq2V0mZ9W8xYpL1 --json

    **Exit codes**: 0 cancelled, or already finished; 1 the store's schema is not one this soklet reads; 2 usage;
    3 the store is unreachable or its SQLite file does not exist; 5 no such task (or it expired).
    """
    url = resolve_store_url(store)

    async def work(opened: DurableStore) -> _Cancel:
        return await _cancel(opened, task_id)

    outcome = run_on_store(url, work)
    if outcome.before is None or outcome.expired:
        fail(f"no task {task_id} in the store{' (it expired)' if outcome.expired else ''}", ExitCode.NOT_FOUND)
    before = outcome.before.status
    after = outcome.after.status if outcome.after is not None else before
    cancelled = not before.terminal and after is TaskStatus.CANCELLED
    if as_json:
        emit_json({"task_id": task_id, "status_before": before.value, "status": after.value, "cancelled": cancelled})
        return
    if cancelled:
        console.print(f"cancelled task {task_id} (was {before.value})", markup=False)
    else:
        console.print(f"task {task_id} is {after.value}: left as it is", markup=False)


@dataclass(frozen=True, slots=True)
class _TaskPurge:
    """What one purge of expired tasks saw and did."""

    at: datetime
    purged: int
    counts: dict[TaskStatus, int]


async def _purge(store: DurableStore) -> _TaskPurge:
    # The task manager's own purge (the same rule as the purges a server runs on its own); it runs no step.
    manager = TaskManager(store, registry=Registry())
    try:
        purged = await manager.purge_expired()
    finally:
        await manager.close()
    return _TaskPurge(datetime.now(UTC), purged, await store.count_tasks())


@tasks_app.command("purge-expired", cls=SokletCommand)
def purge_expired(
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete every task whose time to live (ttlMs) has passed; print how many went and how many tasks remain,
    by status.

    Expired tasks already answer not-found to every client; purging only frees their rows. Servers also purge on
    their own as they create tasks, and may keep serving while this runs.

    **Examples**

      soklet tasks purge-expired --store sqlite:///var/lib/soklet/soklet.db

      SOKLET_STORE=postgresql://soklet@db.internal/soklet soklet tasks purge-expired --json

    **Exit codes**: 0 purged (perhaps nothing); 1 the store's schema is not one this soklet reads; 2 usage (a
    malformed store URL); 3 the store is unreachable or its SQLite file does not exist.
    """
    url = resolve_store_url(store)
    result = run_on_store(url, _purge)
    if as_json:
        emit_json(
            {
                **store_facts(url),
                "at": time_text(result.at),
                "purged": result.purged,
                "remaining": {status.value: count for status, count in result.counts.items()},
            }
        )
        return
    console.print(f"store      {shown_store(url)}", markup=False)
    console.print(f"purged     {result.purged} expired", markup=False)
    remaining = ", ".join(f"{status.value} {count}" for status, count in result.counts.items())
    console.print(f"remaining  {remaining}", markup=False)
