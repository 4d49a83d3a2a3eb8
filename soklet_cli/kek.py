"""``soklet kek``: key-encryption keys. ``kek generate`` writes a new KEK file; the KEK's other commands (``kek
rewrap``) join this group."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from soklet_core.files import KeyringFileError, write_kek_file

from ._common import parse_file
from .exit_codes import ExitCode
from .keyring_path import InsecureOption, JsonOption
from .output import SokletCommand, SokletGroup, console, emit_json, fail, file_error_text, shown_path

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


# `soklet kek rewrap` (re-wrap every key of a store or file under a new KEK) is registered on `kek_app` here.
