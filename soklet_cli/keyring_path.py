"""Where the keyring file is, the options every keyring command shares, and how file errors become exits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final, NoReturn

import typer

from soklet_core.files import KeyringDocument, KeyringFileError, KeyringFileErrorReason, read_keyring_file
from soklet_core.keys import KeyringError, KeyWrapper, ProtectionKeyring

from ._common import parse_keyring
from .exit_codes import ExitCode
from .output import fail, file_error_text

#: The environment variable that names the keyring file when ``--keyring`` is not given.
KEYRING_ENV: Final = "SOKLET_KEYRING"
#: The keyring file used when neither ``--keyring`` nor ``$SOKLET_KEYRING`` is given.
DEFAULT_KEYRING_FILE: Final = "soklet-keyring.toml"


KeyringOption = Annotated[
    str,
    typer.Option(
        "--keyring",
        metavar="FILE",
        envvar=KEYRING_ENV,
        show_default=True,
        parser=parse_keyring,
        help="The keyring file; else $SOKLET_KEYRING, else ./soklet-keyring.toml.",
    ),
]
InsecureOption = Annotated[
    bool,
    typer.Option(
        "--allow-insecure-permissions",
        help=(
            "Read key files that group or others may access, that another user owns, or that sit in a folder "
            "others can write (all normally refused)."
        ),
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document (for scripts) instead of text.")]


_INSECURE: Final = frozenset(
    {
        KeyringFileErrorReason.INSECURE_PERMISSIONS,
        KeyringFileErrorReason.UNTRUSTED_OWNER,
        KeyringFileErrorReason.UNTRUSTED_FOLDER,
        KeyringFileErrorReason.MATERIAL_FILE_INSECURE,
    }
)


def resolve_keyring_path(option: str | Path | None) -> Path:
    """``option`` if given (Typer fills it from ``$SOKLET_KEYRING`` too), else ``./soklet-keyring.toml``.

    An empty path is a usage error (exit 2), never the current folder.
    """
    if option is None:
        return Path(DEFAULT_KEYRING_FILE)
    if not str(option):
        fail("usage: --keyring: the keyring path is empty", ExitCode.USAGE)
    return Path(option)


def fail_for(error: KeyringFileError | KeyringError) -> NoReturn:
    """Exit with the documented code for ``error``: 3 for file-system problems, 1 for everything refused."""
    if isinstance(error, KeyringFileError):
        hint = ""
        if error.reason is KeyringFileErrorReason.NOT_FOUND:
            hint = "; create one with: soklet keys generate"
        elif error.reason in _INSECURE:
            hint = " (or pass --allow-insecure-permissions)"
        fail(f"{file_error_text(error)}{hint}", ExitCode.IO if error.reason.is_io else ExitCode.REFUSED)
    fail(f"refused: {error}", ExitCode.REFUSED)


def load_document(path: Path, *, allow_insecure_permissions: bool, kek: KeyWrapper | None = None) -> KeyringDocument:
    """Read the keyring file at ``path`` (its wrapped keys unwrapped with ``kek``) or exit with its error."""
    try:
        return read_keyring_file(path, allow_insecure_permissions=allow_insecure_permissions, kek=kek)
    except (KeyringFileError, KeyringError) as error:
        fail_for(error)


def load_keyring(path: Path, *, allow_insecure: bool, kek: KeyWrapper | None = None) -> ProtectionKeyring:
    """The keyring of the keyring file at ``path``, or exit 3 (I/O) / 1 (refused) with the file's error."""
    return load_document(path, allow_insecure_permissions=allow_insecure, kek=kek).keyring()
