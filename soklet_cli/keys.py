"""``soklet keys``: create, list, stage, activate, remove, rotate and export the keys of a keyring file."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from soklet_core.files import (
    MAX_MATERIAL_FILE_BYTES,
    KeyringDocument,
    KeyringFileError,
    KeyringFileErrorReason,
    atomic_write,
    check_folders,
    check_removal,
    file_written_at,
    read_secret_file,
    unignored_secret,
    update_keyring_file,
    utc_now,
)
from soklet_core.fleet.record_names import RECORD_SUFFIX, RESOLVED_RECORD_NAME
from soklet_core.keys import (
    DEFAULT_KEY_MATERIAL_BYTES,
    MAX_KEY_MATERIAL_BYTES,
    MIN_KEY_MATERIAL_BYTES,
    KeyringError,
    KeyringErrorReason,
    KeyWrapper,
    ProtectionKey,
    ProtectionKeyring,
    RetiredTooRecently,
    decode_base64url,
    encode_base64url,
    is_valid_key_id,
    key_id_problem,
    new_key_id,
    printable_name,
)

from ._common import (
    DEFAULT_LIFETIME,
    DURATION_HELP,
    check_duration,
    fleet_targets,
    parse_duration,
    parse_file,
)
from .exit_codes import ExitCode
from .kek_option import KekCommandOption, KekEnvOption, KekFileOption, kek_from_options
from .keyring_path import (
    DEFAULT_KEYRING_FILE,
    InsecureOption,
    JsonOption,
    KeyringOption,
    fail_for,
    load_document,
    resolve_keyring_path,
)
from .output import (
    SokletCommand,
    SokletGroup,
    console,
    emit_json,
    error_console,
    fail,
    file_error_text,
    shown_path,
)
from .store_option import IfOlderThanOption, StoreModeOption

if TYPE_CHECKING:
    from soklet_core.fleet import AdminTarget

#: The request-state lifetime ``keys rotate`` assumes when told nothing: the server's default maximum.
DEFAULT_STATE_LIFETIME: Final = DEFAULT_LIFETIME

keys_app = typer.Typer(
    name="keys",
    help=(
        "Manage the keys of a keyring file (or, with **--store URL**, of the fleet keyring in a store): one active "
        "key seals, verification keys only open.\n\n"
        "Key material never appears on the command line or in output, except through **keys export**."
    ),
    no_args_is_help=True,
    cls=SokletGroup,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Role(StrEnum):
    """The role a new key takes."""

    active = "active"
    verification = "verification"


def _check_id(value: str | None) -> str | None:
    # The rejected value is not echoed: a mistyped id could be a pasted secret. The rule is the core's.
    problem = None if value is None else key_id_problem(value)
    if problem is KeyringErrorReason.INVALID_KEY_ID:
        raise typer.BadParameter("a key id is 1 to 64 RFC 9110 token characters (letters, digits, !#$%&'*+-.^_`|~)")
    if problem is not None:
        raise typer.BadParameter(
            "the id looks like key material (a long run of mixed-case letters and digits, or of hex digits); "
            "choose words and numbers between separators, such as 2026-09 or prod-2026-09-01.2"
        )
    return value


IdOption = Annotated[
    str | None,
    typer.Option(
        "--id",
        metavar="ID",
        callback=_check_id,
        help="The new key's id; default: the UTC date and time and a random suffix, such as 2026-09-01.120000.k3f9x.",
    ),
]
BytesOption = Annotated[
    int,
    typer.Option(
        "--bytes",
        metavar="N",
        min=MIN_KEY_MATERIAL_BYTES,
        max=MAX_KEY_MATERIAL_BYTES,
        help=f"Material size in bytes ({MIN_KEY_MATERIAL_BYTES} to {MAX_KEY_MATERIAL_BYTES}).",
    ),
]
KeyIdArgument = Annotated[str, typer.Argument(metavar="ID", help="The key's id.")]

# The fleet options shared by keys rotate, stage, activate and remove (with --fleet or --resolve they work on
# every member through the admin API, as fleet check reads them: one way to list a fleet, _common.fleet_targets).
FleetOption = Annotated[
    Path | None,
    typer.Option(
        "--fleet",
        metavar="FILE",
        parser=parse_file,
        help="Every instance of this fleet file, through their admin APIs (see docs/fleet.md).",
    ),
]
ResolveOption = Annotated[
    str | None,
    typer.Option(
        "--resolve",
        metavar="HOST:PORT",
        help="Every address HOST resolves to, each an admin API on PORT (as fleet check --resolve); with "
        "--token-env or --token-file.",
    ),
]
ExcludeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        metavar="NAME",
        help="With --fleet or --resolve: leave this member out, uncontacted (repeatable); it is named in the output.",
    ),
]
TokenEnvOption = Annotated[
    str | None,
    typer.Option("--token-env", metavar="VAR", help="With --resolve: the admin token is in this variable."),
]
TokenFileOption = Annotated[
    Path | None,
    typer.Option(
        "--token-file", metavar="FILE", parser=parse_file, help="With --resolve: the admin token file (0600)."
    ),
]
CaFileOption = Annotated[
    Path | None,
    typer.Option("--ca-file", metavar="FILE", parser=parse_file, help="With --resolve: trust this CA for https."),
]


@dataclass(frozen=True, slots=True)
class _FleetSource:
    """Where the members come from (a fleet file or a name to resolve) and the token options, as given."""

    fleet: Path | None
    resolve: str | None
    token_env: str | None
    token_file: Path | None
    ca_file: Path | None

    @property
    def given(self) -> bool:
        return self.fleet is not None or self.resolve is not None

    def check(self) -> None:
        if self.fleet is not None and self.resolve is not None:
            fail("give --fleet FILE or --resolve HOST:PORT, not both", ExitCode.USAGE)
        tokens = self.token_env is not None or self.token_file is not None or self.ca_file is not None
        if self.fleet is None and self.resolve is None and tokens:
            fail("--token-env, --token-file and --ca-file need --resolve HOST:PORT", ExitCode.USAGE)

    def targets(self) -> list[AdminTarget]:
        return fleet_targets([], self.fleet, self.resolve, self.token_env, self.token_file, self.ca_file, None)

    def arguments(self) -> list[str]:
        """The options that name these members again, for a command line to run later."""
        if self.fleet is not None:
            return ["--fleet", _shown_argument(self.fleet)]
        assert self.resolve is not None
        arguments = ["--resolve", self.resolve]
        if self.token_env is not None:
            arguments += ["--token-env", self.token_env]
        if self.token_file is not None:
            arguments += ["--token-file", _shown_argument(self.token_file)]
        if self.ca_file is not None:
            arguments += ["--ca-file", _shown_argument(self.ca_file)]
        return arguments


def _shown_argument(path: Path) -> str:
    # The path as given; one that cannot be shown as it is (key-material-shaped, control characters) is left
    # for the user to fill.
    return str(path) if shown_path(path, limit=None) == str(path) else "FILE"


def _unique_id(requested: str | None, keyring: ProtectionKeyring | Iterable[str] | None, today: datetime) -> str:
    if requested is not None:
        return requested
    taken = keyring.key_ids if isinstance(keyring, ProtectionKeyring) else keyring or ()
    return new_key_id(taken, now=today)


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _say(text: str) -> None:
    console.print(text, markup=False, highlight=False)


def _update(
    path: Path,
    change: Callable[[KeyringDocument | None], KeyringDocument],
    allow_insecure: bool,
    kek: KeyWrapper | None = None,
) -> tuple[KeyringDocument | None, KeyringDocument, bool]:
    try:
        result = update_keyring_file(path, change, allow_insecure_permissions=allow_insecure, kek=kek)
    except RetiredTooRecently:
        raise
    except (KeyringFileError, KeyringError) as error:
        fail_for(error)
    return result.before, result.after, result.written


def warn_if_unignored(path: Path) -> None:
    """One sentence on stderr when the secret file just written at ``path`` sits in a git work tree that does
    not ignore it (the core decides; silent without git)."""
    exposed = unignored_secret(path)
    if exposed is not None:
        error_console.print(
            f"soklet: warning: {shown_path(path)} holds secrets and is inside the git work tree "
            f"{shown_path(exposed.work_tree)} without being ignored: add it to .gitignore",
            markup=False,
            highlight=False,
        )


def _existing(document: KeyringDocument | None, path: Path) -> KeyringDocument:
    if document is None:
        fail(f"{shown_path(path)}: not-found: no such file; create one with: soklet keys generate", ExitCode.IO)
    return document


def _fingerprint_lines(document: KeyringDocument) -> None:
    fingerprint = document.keyring().fingerprint()
    _say(f"fingerprint v{fingerprint.version} {fingerprint.value}")


def _role_of(document: KeyringDocument, key_id: str) -> str:
    entry = document.entry(key_id)
    return entry.role.value if entry is not None else "absent"


@keys_app.command("generate", cls=SokletCommand)
def generate(
    key_id: IdOption = None,
    size: BytesOption = DEFAULT_KEY_MATERIAL_BYTES,
    role: Annotated[
        Role | None,
        typer.Option(
            "--role",
            help="active, or verification (staged only). Default: active in a new file, else verification.",
        ),
    ] = None,
    keyring: KeyringOption = DEFAULT_KEYRING_FILE,
    allow_insecure: InsecureOption = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    as_json: JsonOption = False,
    store: StoreModeOption = None,
) -> None:
    """Generate a key from the system's CSPRNG and add it to the keyring file.

    Creates the file (mode 0600) if it is missing; its first key is the active key. In an existing file the
    new key is staged for verification, unless **--role active** also activates it.

    **Examples**

      soklet keys generate

      soklet keys generate --id 2026-08 --bytes 64 --keyring /etc/soklet/keyring.toml

      soklet keys generate --role verification --json

    **Exit codes**: 0 generated; 1 refused (the id is taken, or --role verification for a new file);
    2 usage; 3 the keyring file could not be read or written.
    """
    if store is not None:
        from . import keys_store

        session = keys_store.check_store_mode(
            store, kek_file, kek_env, kek_command, allow_insecure=allow_insecure, as_json=as_json
        )
        keys_store.generate(session, key_id, size, verification=role is Role.verification)
        return
    path = resolve_keyring_path(keyring)
    created: list[str] = []
    former: list[str] = []

    def change(document: KeyringDocument | None) -> KeyringDocument:
        now = utc_now()
        current = document.keyring() if document is not None else None
        key = ProtectionKey.generate(_unique_id(key_id, current, now), size)
        created.append(key.id)
        if document is None or current is None:
            if role is Role.verification:
                raise KeyringError(KeyringErrorReason.NO_ACTIVE_KEY, key.id)
            return KeyringDocument.new(key, created=now)
        # An explicit --id that is taken meets fresh random bytes: refused as conflicting material.
        changed = current.with_staged(key)
        if role is Role.active:
            former.append(current.active_key.id)
            changed = changed.with_activated(key.id)
        return document.with_keyring(changed, now=now)

    kek = kek_from_options(kek_file, kek_env, kek_command, allow_insecure=allow_insecure)
    before, after, _written = _update(path, change, allow_insecure, kek)
    warn_if_unignored(path)
    new_id = created[-1]
    entry = after.entry(new_id)
    assert entry is not None
    if as_json:
        emit_json(
            {
                "keyring": str(path),
                "id": new_id,
                "role": entry.role.value,
                "check_value": entry.key.check_value_text,
                "created_file": before is None,
                "former_active": former[-1] if former else None,
                "fingerprint": after.keyring().fingerprint().to_json(),
            }
        )
        return
    verb = "created keyring with" if before is None else "added"
    _say(f"{verb} {entry.role.value} key {new_id} (check {entry.key.check_value_text[:8]}) in {shown_path(path)}")
    if former:
        _say(f"former active key {former[-1]} now only verifies")
    _fingerprint_lines(after)


@keys_app.command("list", cls=SokletCommand)
def list_keys(
    keyring: KeyringOption = DEFAULT_KEYRING_FILE,
    allow_insecure: InsecureOption = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    as_json: JsonOption = False,
    store: StoreModeOption = None,
) -> None:
    """List the keys of the keyring file: id, role, created, check value, material source; never material.

    The check value is HMAC-SHA256(material, "soklet key check value v2"), base64url: equal check values mean
    equal material. The table shows its first 8 characters; --json gives it whole, with the v2 fingerprint.

    **Examples**

      soklet keys list

      SOKLET_KEYRING=/etc/soklet/keyring.toml soklet keys list --json

    **Exit codes**: 0 listed; 1 the file is malformed; 2 usage; 3 the file is missing, unreadable or
    readable by group/others.
    """
    if store is not None:
        from . import keys_store

        session = keys_store.check_store_mode(
            store, kek_file, kek_env, kek_command, allow_insecure=allow_insecure, as_json=as_json
        )
        keys_store.list_keys(session)
        return
    path = resolve_keyring_path(keyring)
    kek = kek_from_options(kek_file, kek_env, kek_command, allow_insecure=allow_insecure)
    document = load_document(path, allow_insecure_permissions=allow_insecure, kek=kek)
    fingerprint = document.keyring().fingerprint()
    if as_json:
        emit_json(
            {
                "keyring": str(path),
                "profile": document.profile,
                "active": document.active_entry.key.id,
                "keys": [
                    {
                        "id": entry.key.id,
                        "role": entry.role.value,
                        "created": _time(entry.created),
                        "check_value": entry.key.check_value_text,
                        "source": entry.source.kind,
                    }
                    for entry in document.entries
                ],
                "fingerprint": fingerprint.to_json(),
            }
        )
        return
    # Only the table needs rich's table layout: --json and the completion of a keys command do without it.
    from rich.table import Table

    table = Table(title=str(path), title_justify="left")
    for column in ("id", "role", "created", "check", "source"):
        table.add_column(column)
    for entry in document.entries:
        table.add_row(
            entry.key.id,
            entry.role.value,
            _time(entry.created),
            entry.key.check_value_text[:8],
            entry.source.kind,
        )
    console.print(table)
    _fingerprint_lines(document)


def _material_from(from_file: Path | None, from_env: str | None, from_stdin: bool, allow_insecure: bool) -> bytes:
    try:
        if from_file is not None:
            raw = read_secret_file(from_file, limit=MAX_MATERIAL_FILE_BYTES, allow_insecure_permissions=allow_insecure)
        elif from_env is not None:
            if from_env not in os.environ:
                shown = printable_name(from_env, what="a name")
                fail(f"refused: the environment variable {shown} is not set", ExitCode.REFUSED)
            raw = os.environ[from_env].encode("utf-8", "surrogateescape")
            if len(raw) > MAX_MATERIAL_FILE_BYTES:
                fail("refused: the variable is larger than a key's base64url text can be", ExitCode.REFUSED)
        else:
            raw = sys.stdin.buffer.read(MAX_MATERIAL_FILE_BYTES + 1)
            if len(raw) > MAX_MATERIAL_FILE_BYTES:
                fail("refused: standard input is larger than a key's base64url text can be", ExitCode.REFUSED)
    except KeyringFileError as error:
        fail_for(error)
    try:
        return decode_base64url(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        fail("refused: the key material must be base64url text without padding", ExitCode.REFUSED)


@keys_app.command("stage", cls=SokletCommand)
def stage(
    from_file: Annotated[
        Path | None,
        typer.Option("--from-file", metavar="PATH", help="Read base64url material from this file (mode 0600)."),
    ] = None,
    from_env: Annotated[
        str | None,
        typer.Option("--from-env", metavar="VAR", help="Read base64url material from this environment variable."),
    ] = None,
    from_stdin: Annotated[bool, typer.Option("--stdin", help="Read base64url material from standard input.")] = False,
    generate_new: Annotated[bool, typer.Option("--generate", help="Generate new material.")] = False,
    key_id: IdOption = None,
    size: BytesOption = DEFAULT_KEY_MATERIAL_BYTES,
    keyring: KeyringOption = DEFAULT_KEYRING_FILE,
    allow_insecure: InsecureOption = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    as_json: JsonOption = False,
    fleet: FleetOption = None,
    resolve: ResolveOption = None,
    exclude: ExcludeOption = None,
    token_env: TokenEnvOption = None,
    token_file: TokenFileOption = None,
    ca_file: CaFileOption = None,
    store: StoreModeOption = None,
) -> None:
    """Stage a key for verification: it opens state but does not seal until **keys activate**.

    Stage the identical key (same id, same bytes) on every instance before activating it anywhere. Give
    exactly one source of material; material is never taken as a command-line argument, since process lists
    show arguments. Staging a key that is already present with the same bytes changes nothing; the same id
    with other bytes is refused.

    **Examples**

      soklet keys stage --id 2026-09 --from-file /run/secrets/soklet-2026-09

      soklet keys export 2026-09 --keyring a.toml | soklet keys stage --id 2026-09 --stdin --keyring b.toml

      soklet keys stage --generate

      soklet keys stage --id 2026-09 --from-file /run/secrets/soklet-2026-09 --fleet fleet.toml

    With **--fleet FILE** or **--resolve HOST:PORT** (a repair) the key is staged on every member through its
    admin API, not in a keyring file; each member's outcome is reported. An id a member holds with other bytes
    is refused there (409).

    **Exit codes**: 0 staged (or already staged; with --fleet: on every member); 1 refused (other bytes under
    this id, bad or short material, unset variable; with --fleet: a member refused); 2 usage (not exactly one
    source); 3 a file is missing, unreadable or readable by group/others, or could not be written (with --fleet:
    a member is unreachable).
    """
    sources = [from_file is not None, from_env is not None, from_stdin, generate_new]
    if sum(sources) != 1:
        fail("usage: give exactly one of --from-file, --from-env, --stdin, --generate", ExitCode.USAGE)
    if key_id is None and not generate_new:
        fail("usage: --id is required unless --generate is given", ExitCode.USAGE)
    if store is not None:
        from . import keys_store

        session = keys_store.check_store_mode(
            store, kek_file, kek_env, kek_command, allow_insecure=allow_insecure, as_json=as_json
        )
        material = None if generate_new else _material_from(from_file, from_env, from_stdin, allow_insecure)
        keys_store.stage(session, key_id, material, size)
        return
    source = _FleetSource(fleet, resolve, token_env, token_file, ca_file)
    source.check()
    if source.given:
        from .keys_fleet import _stage_fleet

        material = None if generate_new else _material_from(from_file, from_env, from_stdin, allow_insecure)
        _stage_fleet(source, exclude, key_id, material, size, as_json)
        return
    _need_fleet(exclude)
    path = resolve_keyring_path(keyring)
    material = None if generate_new else _material_from(from_file, from_env, from_stdin, allow_insecure)
    staged: list[ProtectionKey] = []

    def change(document: KeyringDocument | None) -> KeyringDocument:
        document = _existing(document, path)
        current = document.keyring()
        now = utc_now()
        if material is None:
            key = ProtectionKey.generate(_unique_id(key_id, current, now), size)
        else:
            key = ProtectionKey.from_id_and_bytes(_unique_id(key_id, current, now), material)
        staged.append(key)
        return document.with_keyring(current.with_staged(key), now=now)

    kek = kek_from_options(kek_file, kek_env, kek_command, allow_insecure=allow_insecure)
    _before, after, written = _update(path, change, allow_insecure, kek)
    if written:
        warn_if_unignored(path)
    key = staged[-1]
    role = _role_of(after, key.id)
    if as_json:
        emit_json(
            {
                "keyring": str(path),
                "id": key.id,
                "role": role,
                "check_value": key.check_value_text,
                "changed": written,
                "fingerprint": after.keyring().fingerprint().to_json(),
            }
        )
        return
    if written:
        _say(f"staged {key.id} (check {key.check_value_text[:8]}) for verification in {shown_path(path)}")
    else:
        _say(f"{key.id} is already in {shown_path(path)} as {role} with the same bytes: nothing changed")
    _fingerprint_lines(after)


@keys_app.command("activate", cls=SokletCommand)
def activate(
    key_id: KeyIdArgument,
    keyring: KeyringOption = DEFAULT_KEYRING_FILE,
    allow_insecure: InsecureOption = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    as_json: JsonOption = False,
    fleet: FleetOption = None,
    resolve: ResolveOption = None,
    exclude: ExcludeOption = None,
    token_env: TokenEnvOption = None,
    token_file: TokenFileOption = None,
    ca_file: CaFileOption = None,
    store: StoreModeOption = None,
) -> None:
    """Make a staged key the active key; the former active key stays, for verification only.

    Activate only after every instance has staged the key and their v2 fingerprints match.

    **Examples**

      soklet keys activate 2026-09

      soklet keys activate 2026-09 --keyring /etc/soklet/keyring.toml --json

      soklet keys activate 2026-09 --fleet fleet.toml --exclude pod-3

    With **--fleet FILE** or **--resolve HOST:PORT** (a repair) the key is activated on every member through
    its admin API; each member's outcome is reported.

    **Exit codes**: 0 active (or already active; with --fleet: on every member); 1 refused (no such key; with
    --fleet: a member refused); 2 usage; 3 the keyring file could not be read or written (with --fleet: a member
    is unreachable).
    """
    if store is not None:
        from . import keys_store

        session = keys_store.check_store_mode(
            store, kek_file, kek_env, kek_command, allow_insecure=allow_insecure, as_json=as_json
        )
        keys_store.activate(session, key_id)
        return
    source = _FleetSource(fleet, resolve, token_env, token_file, ca_file)
    source.check()
    if source.given:
        from .keys_fleet import _repair

        _repair(source, exclude, "activate", {"id": key_id}, key_id, as_json)
        return
    _need_fleet(exclude)
    path = resolve_keyring_path(keyring)

    def change(document: KeyringDocument | None) -> KeyringDocument:
        document = _existing(document, path)
        return document.with_keyring(document.keyring().with_activated(key_id))

    kek = kek_from_options(kek_file, kek_env, kek_command, allow_insecure=allow_insecure)
    before, after, written = _update(path, change, allow_insecure, kek)
    former = before.active_entry.key.id if before is not None else None
    if as_json:
        emit_json(
            {
                "keyring": str(path),
                "active": key_id,
                "former_active": former if written else None,
                "changed": written,
                "fingerprint": after.keyring().fingerprint().to_json(),
            }
        )
        return
    if written:
        _say(f"activated {key_id} in {shown_path(path)}; former active key {former} now only verifies")
    else:
        _say(f"{key_id} is already the active key in {shown_path(path)}: nothing changed")
    _fingerprint_lines(after)


StateLifetimeOption = Annotated[
    str,
    typer.Option(
        "--state-lifetime",
        metavar="DURATION",
        callback=check_duration,
        help=f"The maximum request-state lifetime ({DURATION_HELP}): how long the former key must stay.",
    ),
]


@keys_app.command("remove", cls=SokletCommand)
def remove(
    key_id: KeyIdArgument,
    state_lifetime: StateLifetimeOption = DEFAULT_STATE_LIFETIME,
    force: Annotated[
        bool,
        typer.Option("--force", help="Remove it even if it stopped sealing less than the state lifetime ago."),
    ] = False,
    keyring: KeyringOption = DEFAULT_KEYRING_FILE,
    allow_insecure: InsecureOption = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    as_json: JsonOption = False,
    fleet: FleetOption = None,
    resolve: ResolveOption = None,
    exclude: ExcludeOption = None,
    token_env: TokenEnvOption = None,
    token_file: TokenFileOption = None,
    ca_file: CaFileOption = None,
    store: StoreModeOption = None,
) -> None:
    """Remove a verification key. The active key cannot be removed.

    State a key sealed cannot be opened once it is gone, so a key is removed only after the maximum
    request-state lifetime (**--state-lifetime**, default the protocol's) has passed since it stopped sealing:
    the keyring file records that time when a key is demoted (**keys activate**, **keys rotate**). A key without
    a recorded time (staged and never activated, or retired by an older soklet) counts from the file's last
    change. **--force** removes it anyway. Do this on every instance.

    **Examples**

      soklet keys remove 2026-08

      soklet keys remove 2026-08 --state-lifetime 30m --keyring /etc/soklet/keyring.toml --json

      soklet keys remove 2026-09-staged-by-mistake --force

      soklet keys remove 2026-08 --fleet fleet.toml

    With **--fleet FILE** or **--resolve HOST:PORT** (a repair) the key is removed from every member through its
    admin API (a member without it counts as done). Unless --force, it is refused while any member seals with
    it, holds a reservation on it, or reports it stopped sealing less than the longest state lifetime the
    members report plus the largest clock skew between them ago.

    **Exit codes**: 0 removed (with --fleet: from every member); 1 refused (no such key, it is the active key,
    or it stopped sealing less than the state lifetime ago and --force was not given; with --fleet: a member
    refused); 2 usage; 3 the keyring file could not be read or written (with --fleet: a member is unreachable).
    """
    if store is not None:
        from . import keys_store

        session = keys_store.check_store_mode(
            store, kek_file, kek_env, kek_command, allow_insecure=allow_insecure, as_json=as_json
        )
        keys_store.remove(session, key_id, parse_duration(state_lifetime), state_lifetime, force=force)
        return
    source = _FleetSource(fleet, resolve, token_env, token_file, ca_file)
    source.check()
    if source.given:
        if state_lifetime != DEFAULT_STATE_LIFETIME:
            fail("--state-lifetime does not apply with --fleet: the instances report their own", ExitCode.USAGE)
        from .keys_fleet import _remove_fleet

        _remove_fleet(source, exclude, key_id, force, as_json)
        return
    _need_fleet(exclude)
    lifetime = parse_duration(state_lifetime)
    path = resolve_keyring_path(keyring)

    def change(document: KeyringDocument | None) -> KeyringDocument:
        document = _existing(document, path)
        if not force:
            check_removal(document, key_id, lifetime=lifetime, written=file_written_at(path))
        return document.with_keyring(document.keyring().without(key_id))

    try:
        kek = kek_from_options(kek_file, kek_env, kek_command, allow_insecure=allow_insecure)
        _before, after, _written = _update(path, change, allow_insecure, kek)
    except RetiredTooRecently as early:
        fail(_too_early(early, state_lifetime), ExitCode.REFUSED)
    if as_json:
        emit_json({"keyring": str(path), "removed": key_id, "fingerprint": after.keyring().fingerprint().to_json()})
        return
    _say(f"removed {key_id} from {shown_path(path)}")
    _fingerprint_lines(after)


def _too_early(early: RetiredTooRecently, lifetime: str) -> str:
    shown = printable_name(early.key_id or "", what="a key id")
    since = (
        f"key {shown} stopped sealing less than the state lifetime ({lifetime}) ago"
        if early.recorded
        else f"the keyring file does not record when key {shown} stopped sealing, and it last changed less than "
        f"the state lifetime ({lifetime}) ago"
    )
    return (
        f"refused: {since}: state it sealed may still be open; it can be removed after "
        f"{_time(early.removable_at)} (or now with --force)"
    )


@keys_app.command("rotate", cls=SokletCommand)
def rotate(
    key_id: IdOption = None,
    size: BytesOption = DEFAULT_KEY_MATERIAL_BYTES,
    state_lifetime: StateLifetimeOption = DEFAULT_STATE_LIFETIME,
    keyring: KeyringOption = DEFAULT_KEYRING_FILE,
    allow_insecure: InsecureOption = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON document (with --fleet: one JSON event per line; with --store: one at the end).",
        ),
    ] = False,
    fleet: FleetOption = None,
    resolve: ResolveOption = None,
    exclude: ExcludeOption = None,
    token_env: TokenEnvOption = None,
    token_file: TokenFileOption = None,
    ca_file: CaFileOption = None,
    key_file: Annotated[
        Path | None,
        typer.Option("--key-file", metavar="PATH", help="With --fleet: the new key's base64url material (0600 file)."),
    ] = None,
    generate: Annotated[
        bool, typer.Option("--generate", help="With --fleet: generate the new key (CSPRNG, --bytes).")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="With --fleet: do not ask for confirmation.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --fleet: print the plan and change nothing.")
    ] = False,
    resume: Annotated[
        bool, typer.Option("--resume", help="With --fleet: finish the rotation the record file describes.")
    ] = False,
    abort: Annotated[
        bool,
        typer.Option(
            "--abort",
            help="With --fleet: abandon the recorded rotation before its activation: remove the staged key "
            "everywhere, then the record.",
        ),
    ] = False,
    record: Annotated[
        Path | None,
        typer.Option(
            "--record",
            metavar="FILE",
            parser=parse_file,
            help=f"With --fleet: the rotation record (default: the fleet file's path + {RECORD_SUFFIX}; with "
            f"--resolve: {RESOLVED_RECORD_NAME} in the working folder).",
        ),
    ] = None,
    store: StoreModeOption = None,
    if_older_than: IfOlderThanOption = None,
) -> None:
    """Generate a key, stage it and activate it in one atomic change of one keyring file; or, with --fleet,
    rotate every instance of a fleet step by step.

    Prints the former active key and the earliest time it may be removed: now plus the maximum request-state
    lifetime.

    **With --fleet FILE** (or **--resolve HOST:PORT**: every address the name resolves to, as fleet check finds
    them) the spec's steps run with a check between each: stage the identical key on every instance; verify v2
    convergence (abort before activation on any divergence, unreachable instance or v1/mixed fingerprints);
    activate everywhere; verify; wait the longest max_state_lifetime_ms any instance reports plus the largest
    clock skew measured between members, from the moment the last instance activated (on --resume: from what
    the instances report, never earlier than the record says), and until no instance holds a reservation on the
    former key; remove the former key everywhere; verify. Each step is recorded in a 0600 record file, so an
    interrupted rotation finishes with **--resume**, which first refuses a record claiming a step the instances
    do not show. A generated key's material stays in the record only until every instance holds it; a
    --key-file key is never written there: a resume that must stage again needs the same --key-file. Material
    is sent only in the stage request's body and never printed.

    One run at a time: a lock file beside the record (its path + .lock) refuses a second run at once, naming the
    holder's pid and since when. An id that some instance already holds with other bytes is refused before any
    change (also by --dry-run, which shows the wait). **--exclude NAME** leaves a dead or stale member out (it is
    not contacted, and named in the output and the record; rejoin it afterwards, see docs/fleet.md); an
    instance lost during the wait is reported, and the rotation stops at the wait's end naming the command that
    resumes it without that instance. **--abort** abandons a rotation not yet activated: the staged key is
    removed from every instance and the record deleted (its material is dropped first).

    **With --store URL** (and the KEK: --kek-file, --kek-env or --kek-command) the fleet keyring in the store
    rotates with one command and no fleet file: the members are the instances whose heartbeats the store holds
    (one silent for 15 s is reported and excluded; when it comes back it loads the current keyring before it is
    ready); each step (stage, activate, remove) is one generation, and the next waits until every live member
    applied it; the former key goes after the longest state lifetime the members report plus the largest clock
    skew between them. One rotation at a time: a second one is refused at once naming the holder (user@host pid
    N) and since when (exit 1, kind locked). The record (no material) lives in the store, so **--resume** from
    any machine finishes a rotation whose process died, and **--abort** abandons one not yet activated.
    **--if-older-than DURATION** (such as 30d, for a scheduled job) exits 0 doing nothing while the active key
    is younger, and otherwise rotates, first resuming an unfinished rotation: a scheduled job finishes its own.
    Progress goes to stderr; --json prints one document on stdout.

    **Examples**

      soklet keys rotate

      soklet keys rotate --id 2026-09 --state-lifetime 30m --json

      soklet keys rotate --fleet fleet.toml --generate --dry-run

      soklet keys rotate --fleet fleet.toml --key-file /run/secrets/new-key --id 2026-09 --yes

      soklet keys rotate --fleet fleet.toml --resume --yes --json

      soklet keys rotate --fleet fleet.toml --resume --exclude pod-3 --yes

      soklet keys rotate --fleet fleet.toml --abort --yes

      soklet keys rotate --resolve soklet-admin.prod.svc:9001 --token-file /run/secrets/admin --generate --yes

      soklet keys rotate --store postgresql://soklet@db/soklet --kek-file /etc/soklet/kek --generate --yes

      soklet keys rotate --store postgresql://soklet@db/soklet --kek-file /etc/soklet/kek --if-older-than 30d --yes

    **Exit codes**: 0 rotated (with --dry-run: the plan can start; with --abort: abandoned; with
    --if-older-than: also nothing to do); 1 refused (the id is taken; with --store: kind locked, record, refused,
    stalled or mismatch; with --fleet: the fleet diverged, an instance refused a change, an unfinished
    rotation's record is in the way, another run holds the lock, the record does not match the fleet, or --abort
    found the key activated); 2 usage
    (with --fleet: also no --yes while standard input is not a terminal); 3 the keyring file could not be read or
    written (with --fleet: an instance is unreachable, fingerprints are v1 or of mixed versions, or the record
    file is unusable).
    """
    if store is not None:
        from . import keys_store

        session = keys_store.check_store_mode(
            store, kek_file, kek_env, kek_command, allow_insecure=allow_insecure, as_json=as_json, rotating=True
        )
        material = None if key_file is None else _material_from(key_file, None, False, allow_insecure)
        request = keys_store.RotateRequest(key_id, size, material, generate, yes, dry_run, resume, abort, if_older_than)
        keys_store.rotate(session, request)
        return
    if if_older_than is not None:
        fail("usage: --if-older-than needs --store URL", ExitCode.USAGE)
    source = _FleetSource(fleet, resolve, token_env, token_file, ca_file)
    source.check()
    if source.given:
        if state_lifetime != DEFAULT_STATE_LIFETIME:
            fail("--state-lifetime does not apply with --fleet: the instances report their own", ExitCode.USAGE)
        from .keys_fleet import _rotate_fleet, _RotateOptions

        options = _RotateOptions(key_id, size, key_file, generate, yes, dry_run, resume, abort, exclude or [])
        _rotate_fleet(source, options, record, allow_insecure, as_json)
        return
    if key_file is not None or generate or yes or dry_run or resume or abort or record is not None or exclude:
        fail(
            "--key-file, --generate, --yes, --dry-run, --resume, --abort, --exclude and --record need --fleet FILE",
            ExitCode.USAGE,
        )
    lifetime = parse_duration(state_lifetime)
    path = resolve_keyring_path(keyring)
    rotated: list[ProtectionKey] = []

    def change(document: KeyringDocument | None) -> KeyringDocument:
        document = _existing(document, path)
        current = document.keyring()
        now = utc_now()
        key = ProtectionKey.generate(_unique_id(key_id, current, now), size)
        rotated.append(key)
        return document.with_keyring(current.with_rotated(key), now=now)

    kek = kek_from_options(kek_file, kek_env, kek_command, allow_insecure=allow_insecure)
    before, after, _written = _update(path, change, allow_insecure, kek)
    assert before is not None
    warn_if_unignored(path)
    key = rotated[-1]
    former = before.active_entry.key.id
    # The time the file records the former key stopped sealing: what keys remove counts from.
    demoted = after.entry(former)
    retired = demoted.retired if demoted is not None and demoted.retired is not None else utc_now()
    remove_after = retired + lifetime
    if as_json:
        emit_json(
            {
                "keyring": str(path),
                "active": key.id,
                "check_value": key.check_value_text,
                "former_active": former,
                "remove_after": _time(remove_after),
                "state_lifetime_seconds": int(lifetime.total_seconds()),
                "fingerprint": after.keyring().fingerprint().to_json(),
            }
        )
        return
    _say(f"activated new key {key.id} (check {key.check_value_text[:8]}) in {shown_path(path)}")
    _say(f"former active key {former} now only verifies; remove it after {_time(remove_after)}:")
    import shlex

    # The exact command to run later, with the keyring it was given, quoted for a POSIX shell.
    # A name that cannot be shown as it is (key-material-shaped, control characters) is left for the user to fill.
    keyring_argument = str(path) if shown_path(path, limit=None) == str(path) else "FILE"
    told = [] if state_lifetime == DEFAULT_STATE_LIFETIME else ["--state-lifetime", state_lifetime]
    _say("  " + shlex.join(["soklet", "keys", "remove", former, *told, "--keyring", keyring_argument]))
    _fingerprint_lines(after)


@keys_app.command("export", cls=SokletCommand)
def export(
    key_id: KeyIdArgument,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the material to this new file, mode 0600 (refused if it exists, unless --force).",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="With --output: replace an existing file.")] = False,
    keyring: KeyringOption = DEFAULT_KEYRING_FILE,
    allow_insecure: InsecureOption = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    as_json: JsonOption = False,
    store: StoreModeOption = None,
) -> None:
    """Print one key's material (base64url, no padding), or write it to a new 0600 file: the only command that
    shows a secret.

    Use it to copy a staged key to other instances without the material touching a command line: pipe it to
    **keys stage --stdin**, or write it with **--output** for **keys stage --from-file**. --output creates the
    file with mode 0600, atomically, and refuses an existing file unless --force. When standard output is a
    regular file (a shell redirect), soklet makes it mode 0600 before writing the secret, and refuses (writing
    nothing) when it cannot.

    **Examples**

      soklet keys export 2026-09 --output /run/secrets/soklet-2026-09

      soklet keys export 2026-09 | ssh host2 soklet keys stage --id 2026-09 --stdin

    **Exit codes**: 0 printed or written; 1 refused (no such key); 2 usage; 3 the keyring file could not be
    read, the output file exists (without --force) or could not be written, or standard output could not be
    made owner-only.
    """
    path = resolve_keyring_path(keyring)
    if force and output is None:
        fail("usage: --force only goes with --output", ExitCode.USAGE)
    if output is not None and not str(output):
        fail("usage: --output: the path is empty", ExitCode.USAGE)
    if store is not None:
        from . import keys_store

        session = keys_store.check_store_mode(
            store, kek_file, kek_env, kek_command, allow_insecure=allow_insecure, as_json=as_json
        )
        document = keys_store.document(session)
    else:
        kek = kek_from_options(kek_file, kek_env, kek_command, allow_insecure=allow_insecure)
        document = load_document(path, allow_insecure_permissions=allow_insecure, kek=kek)
    entry = document.entry(key_id)
    if entry is None:
        fail_for(KeyringError(KeyringErrorReason.UNKNOWN_KEY, key_id if is_valid_key_id(key_id) else None))
    material = encode_base64url(entry.key.material)
    if output is not None:
        try:
            if not allow_insecure:
                check_folders(output)
            atomic_write(output, (material + "\n").encode("ascii"), mode=0o600, overwrite=force)
        except KeyringFileError as error:
            hint = " (pass --force to replace it)" if error.reason is KeyringFileErrorReason.ALREADY_EXISTS else ""
            fail(f"{file_error_text(error)}{hint}", ExitCode.IO)
        warn_if_unignored(output)
        if as_json:
            emit_json({"id": entry.key.id, "output": str(output), "check_value": entry.key.check_value_text})
        else:
            _say(f"wrote {entry.key.id} (check {entry.key.check_value_text[:8]}) to {shown_path(output)} (mode 0600)")
        return
    _protect_stdout()
    if as_json:
        emit_json({"id": entry.key.id, "material": material})
        return
    sys.stdout.write(material + "\n")


def _protect_stdout() -> None:
    # `keys export ID > file` would leave the secret in a file the shell created 0644: make it owner-only
    # first, or write nothing.
    try:
        descriptor = sys.stdout.fileno()
        status = os.fstat(descriptor)
    except (OSError, ValueError):
        return
    if not stat.S_ISREG(status.st_mode) or stat.S_IMODE(status.st_mode) & 0o077 == 0:
        return
    try:
        os.fchmod(descriptor, stat.S_IMODE(status.st_mode) & 0o700)
    except OSError as error:
        fail(
            f"refused: standard output is a file that group or others may read, and it could not be made "
            f"owner-only ({error.strerror or 'I/O error'}); use --output FILE",
            ExitCode.IO,
        )


def _need_fleet(exclude: list[str] | None) -> None:
    if exclude:
        fail("--exclude needs --fleet FILE or --resolve HOST:PORT", ExitCode.USAGE)
