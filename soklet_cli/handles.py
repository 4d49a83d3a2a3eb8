"""``soklet handles``: operator work on the durable application handles of a store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import typer

from soklet_core.store import DurableStore

from .keyring_path import JsonOption
from .output import SokletCommand, SokletGroup, console, emit_json
from .store_option import StoreOption, resolve_store_url, run_on_store, shown_store, store_facts, time_text

__all__ = ["handles_app"]

handles_app = typer.Typer(
    name="handles",
    help=(
        "Durable application handles in a store (**soklet serve --store**).\n\n"
        "A handle and its state are never printed: only counts."
    ),
    no_args_is_help=True,
    cls=SokletGroup,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


@dataclass(frozen=True, slots=True)
class _Purge:
    """What one purge saw and did."""

    at: datetime
    live_before: int
    purged: int
    live_after: int


async def _purge(store: DurableStore) -> _Purge:
    now = datetime.now(UTC)
    before = await store.count_live_handles(now)
    purged = await store.purge_expired_handles(now)
    after = await store.count_live_handles(now)
    return _Purge(now, before, purged, after)


@handles_app.command("purge-expired", cls=SokletCommand)
def purge_expired(
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete every handle whose expiry has passed; print how many went and how many live ones remain.

    Expired handles are already refused by every server (they never resume); purging only frees their rows. Live
    handles are never touched, and servers may keep serving while this runs. The counts of live handles before
    and after may differ when servers issue or consume handles meanwhile.

    **Examples**

      soklet handles purge-expired --store sqlite:///var/lib/soklet/soklet.db

      SOKLET_STORE=postgresql://soklet@db.internal/soklet soklet handles purge-expired --json

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
                "live_before": result.live_before,
                "purged": result.purged,
                "live_after": result.live_after,
            }
        )
        return
    console.print(f"store       {shown_store(url)}", markup=False)
    console.print(f"live before {result.live_before}", markup=False)
    console.print(f"purged      {result.purged} expired", markup=False)
    console.print(f"live after  {result.live_after}", markup=False)
