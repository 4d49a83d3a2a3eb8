"""``soklet kek``: key-encryption keys. ``kek generate`` writes a new KEK file; the KEK's other commands (``kek
rewrap``) join this group."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, cast

import typer

from soklet_core.files import KeyringDocument, KeyringFileError, update_keyring_file, write_kek_file
from soklet_core.files.kek_source import KekSource
from soklet_core.keys import Fingerprint, KeyringError, KeyWrapError, KeyWrapper
from soklet_core.store import DurableStore, FleetKeyring, KeyringRepository, StoreUrl

from ._common import parse_file
from .exit_codes import ExitCode
from .kek_option import KekCommandOption, KekEnvOption, KekFileOption, kek_failure, kek_source, load_kek_or_exit
from .keyring_path import InsecureOption, JsonOption, fail_for
from .output import SokletCommand, SokletGroup, console, emit_json, fail, file_error_text, shown_path
from .store_option import StoreModeOption, run_on_store, shown_store, store_facts

__all__ = ["kek_app"]

kek_app = typer.Typer(
    help=(
        "Key-encryption keys (KEKs): they wrap the keys of an encrypted keyring file or of the store (see docs/kek.md)."
    ),
    no_args_is_help=True,
    cls=SokletGroup,
    rich_markup_mode="markdown",
)


@kek_app.command("generate", cls=SokletCommand)
def generate(
    output: Annotated[
        Path,
        typer.Option(
            "--output", metavar="FILE", parser=parse_file, help="The new KEK file (must not exist yet; mode 0600)."
        ),
    ],
    allow_insecure: InsecureOption = False,
    as_json: JsonOption = False,
) -> None:
    """Generate a key-encryption key (32 bytes from the system's CSPRNG) into a new file.

    The file holds one line of base64url text and is written atomically, mode 0600; a file (or a symlink)
    already at FILE is refused and left as it is. Prints the KEK id (public: it is stored beside every key the
    KEK wraps), never the KEK. Keep the KEK apart from the keyring it protects.

    **Examples**

      soklet kek generate --output /etc/soklet/kek

      soklet kek generate --output kek --json

    **Exit codes**: 0 written; 2 usage; 3 the file exists already or could not be written.
    """
    try:
        kek = write_kek_file(output, allow_insecure_permissions=allow_insecure)
    except KeyringFileError as error:
        fail(file_error_text(error), ExitCode.IO)
    if as_json:
        emit_json({"kek_file": str(output), "kek_id": kek.kek_id, "mode": "0600"})
        return
    console.print(
        f"created KEK file {shown_path(output)} (mode 0600), KEK id {kek.kek_id}", markup=False, highlight=False
    )


NewKekFileOption = Annotated[
    Path | None,
    typer.Option(
        "--new-kek-file", metavar="FILE", parser=parse_file, show_default=False, help="The new KEK: a 0600 file."
    ),
]
NewKekEnvOption = Annotated[
    str | None,
    typer.Option("--new-kek-env", metavar="VAR", show_default=False, help="The new KEK from environment variable VAR."),
]
NewKekCommandOption = Annotated[
    str | None,
    typer.Option(
        "--new-kek-command", metavar="CMD", show_default=False, help="The new KEK held by a program (as --kek-command)."
    ),
]


def _new_source(new_file: Path | None, new_env: str | None, new_command: str | None) -> KekSource:
    given = [
        name
        for name, value in (
            ("--new-kek-file", new_file),
            ("--new-kek-env", new_env),
            ("--new-kek-command", new_command),
        )
        if value is not None
    ]
    if len(given) != 1:
        fail("usage: give exactly one of --new-kek-file, --new-kek-env and --new-kek-command", ExitCode.USAGE)
    source = kek_source(new_file, new_env, new_command)
    assert source is not None
    return source


@kek_app.command("rewrap", cls=SokletCommand)
def rewrap(
    store: StoreModeOption = None,
    keyring: Annotated[
        Path | None,
        typer.Option(
            "--keyring", metavar="FILE", parser=parse_file, help="An encrypted keyring file instead of a store."
        ),
    ] = None,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    new_kek_file: NewKekFileOption = None,
    new_kek_env: NewKekEnvOption = None,
    new_kek_command: NewKekCommandOption = None,
    allow_insecure: InsecureOption = False,
    as_json: JsonOption = False,
) -> None:
    """Wrap every key of the store's fleet keyring (or of an encrypted keyring file) under a new KEK.

    One change (in a store: one transaction, one generation): every key is unwrapped under the current KEK
    (--kek-file, --kek-env or --kek-command) and wrapped again under the new one (--new-kek-file, --new-kek-env
    or --new-kek-command). No data key, check value, role, time or fingerprint changes: the fingerprint is
    printed before and after, equal. A KEK that does not unwrap every key is refused in one line before
    anything is written. Serving instances (soklet serve --keyring-from-store) need the new KEK before their
    next restart; a running one keeps the keys it holds and is not ready until it can unwrap the new
    generation, so give every instance the new KEK first (see docs/kek.md).

    **Examples**

      soklet kek rewrap --store postgresql://soklet@db/soklet --kek-file old-kek --new-kek-file new-kek

      soklet kek rewrap --keyring keyring.toml --kek-file old-kek --new-kek-command "kms-wrap --key prod" --json

    **Exit codes**: 0 re-wrapped; 1 refused (the current KEK does not unwrap a key, a KEK cannot be loaded, the
    store holds no fleet keyring); 2 usage; 3 the store or the file could not be read or written.
    """
    if (store is None) == (keyring is None):
        fail("usage: give --store URL or --keyring FILE (one of them)", ExitCode.USAGE)
    old_source = kek_source(kek_file, kek_env, kek_command)
    if old_source is None:
        fail("usage: give the current KEK: --kek-file FILE, --kek-env VAR or --kek-command CMD", ExitCode.USAGE)
    new_source = _new_source(new_kek_file, new_kek_env, new_kek_command)
    old = load_kek_or_exit(old_source, allow_insecure=allow_insecure)
    new = load_kek_or_exit(new_source, allow_insecure=allow_insecure)
    assert old is not None
    assert new is not None
    if store is not None:
        before, after, where, facts = _rewrap_store(store, old_source, old, new)
    else:
        assert keyring is not None
        before, after = _rewrap_file(keyring, old_source, old, new, allow_insecure)
        where, facts = shown_path(keyring), {"keyring": str(keyring)}
    if as_json:
        emit_json(
            {
                **facts,
                "old_kek_id": old.kek_id,
                "new_kek_id": new.kek_id,
                "fingerprint_before": before.to_json(),
                "fingerprint_after": after.to_json(),
            }
        )
        return
    console.print(f"re-wrapped every key of {where} under KEK {new.kek_id} (was {old.kek_id})", markup=False)
    console.print(f"fingerprint before v{before.version} {before.value}", markup=False)
    console.print(f"fingerprint after  v{after.version} {after.value}", markup=False)


def _rewrap_store(
    url: StoreUrl, source: KekSource, old: KeyWrapper, new: KeyWrapper
) -> tuple[Fingerprint, Fingerprint, str, dict[str, Any]]:
    async def work(store: DurableStore) -> tuple[Fingerprint, Fingerprint] | None:
        # open_store's backends are both a DurableStore and a KeyringRepository.
        repository = cast(KeyringRepository, store)
        loaded = await FleetKeyring(repository, old).load()
        if loaded is None:
            return None
        await FleetKeyring(repository, old).rewrap(new)
        # Read back under the new KEK: what the instances will unwrap.
        again = await FleetKeyring(repository, new).load()
        assert again is not None
        return loaded.keyring.fingerprint(), again.keyring.fingerprint()

    try:
        result = run_on_store(url, work)
    except KeyWrapError as error:
        kek_failure(source, error)
    if result is None:
        fail(f"store {shown_store(url)} holds no fleet keyring yet: nothing to re-wrap", ExitCode.REFUSED)
    return result[0], result[1], f"store {shown_store(url)}", dict(store_facts(url))


def _rewrap_file(
    path: Path, source: KekSource, old: KeyWrapper, new: KeyWrapper, allow_insecure: bool
) -> tuple[Fingerprint, Fingerprint]:
    def change(document: KeyringDocument | None) -> KeyringDocument:
        if document is None:
            fail(f"{shown_path(path)}: not-found: no such file", ExitCode.IO)
        return document.wrapped(new)

    try:
        update = update_keyring_file(path, change, allow_insecure_permissions=allow_insecure, kek=old)
    except KeyWrapError as error:
        kek_failure(source, error)
    except (KeyringFileError, KeyringError) as error:
        fail_for(error)
    before = update.before
    assert before is not None
    return before.keyring().fingerprint(), update.after.keyring().fingerprint()
