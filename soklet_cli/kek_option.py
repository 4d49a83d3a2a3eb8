"""The ``--kek-file FILE``, ``--kek-env VAR`` and ``--kek-command CMD`` options every command that reads or writes
wrapped keys shares (at most one of them), and how the key-encryption key they name is loaded or the command ends.

No message here shows a KEK, an environment variable's value or what a KEK command printed: the core's errors
never carry them, and a command line is named by its program only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, NoReturn

import typer

from soklet_core.files import KeyringFileError

from ._common import parse_file
from .exit_codes import ExitCode
from .output import fail, file_error_text, shown_path

if TYPE_CHECKING:
    # What loads a KEK (from its file, variable or command, and the key wrap) is imported only once an option names
    # one: most calls of the commands that offer these options (keys list of a plain keyring) give none.
    from soklet_core.files.kek_source import KekSource
    from soklet_core.keys import KeyWrapError, KeyWrapper

__all__ = [
    "KEK_OPTIONS_HELP",
    "KekCommandOption",
    "KekEnvOption",
    "KekFileOption",
    "kek_failure",
    "kek_from_options",
    "kek_source",
    "load_kek_or_exit",
]

#: What ``--help`` texts say about the three options, once.
KEK_OPTIONS_HELP: Final = "Give at most one of --kek-file, --kek-env and --kek-command."


def _parse_env_name(text: str) -> str:
    from soklet_core.files.kek_source import KekSource

    try:
        KekSource(env=text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    return text


def _parse_command(text: str) -> str:
    from soklet_core.files.kek_source import KekSource

    try:
        KekSource.from_command_line(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    return text


KekFileOption = Annotated[
    Path | None,
    typer.Option(
        "--kek-file",
        metavar="FILE",
        parser=parse_file,
        show_default=False,
        help=(
            "The key-encryption key: a 0600 file holding 32 bytes as one line of base64url text "
            "(soklet kek generate writes one)."
        ),
    ),
]
KekEnvOption = Annotated[
    str | None,
    typer.Option(
        "--kek-env",
        metavar="VAR",
        parser=_parse_env_name,
        show_default=False,
        help="The key-encryption key from environment variable VAR (32 bytes as base64url text).",
    ),
]
KekCommandOption = Annotated[
    str | None,
    typer.Option(
        "--kek-command",
        metavar="CMD",
        parser=_parse_command,
        show_default=False,
        help=(
            "A program that wraps and unwraps keys itself (a KMS, an HSM), run without a shell; JSON on its "
            "stdin and stdout, 10 s and 64 KiB per call (see docs/kek.md)."
        ),
    ),
]


def kek_source(kek_file: Path | None, kek_env: str | None, kek_command: str | None) -> KekSource | None:
    """The KEK source the options name, ``None`` when none is given; two or three given is a usage error
    (exit 2)."""
    given = [
        name
        for name, value in (("--kek-file", kek_file), ("--kek-env", kek_env), ("--kek-command", kek_command))
        if value is not None
    ]
    if len(given) > 1:
        fail(f"give one of {', '.join(given)}, not several", ExitCode.USAGE)
    if not given:
        return None
    from soklet_core.files.kek_source import KekSource

    try:
        if kek_file is not None:
            return KekSource(file=str(kek_file))
        if kek_env is not None:
            return KekSource(env=kek_env)
        if kek_command is not None:
            return KekSource.from_command_line(kek_command)
    except ValueError as error:
        fail(f"usage: {error}", ExitCode.USAGE)
    return None


def kek_failure(source: KekSource, error: KeyWrapError | KeyringFileError) -> NoReturn:
    """End the command (exit 1) with one line naming ``source`` and why its KEK could not be used."""
    if isinstance(error, KeyringFileError):
        fail(f"KEK file: {file_error_text(error)}", ExitCode.REFUSED)
    fail(f"{shown_path(source.description)}: {error}", ExitCode.REFUSED)


def load_kek_or_exit(source: KekSource | None, *, allow_insecure: bool = False) -> KeyWrapper | None:
    """The KEK ``source`` names (``None`` for no source), or end the command with exit 1 and one line on stderr
    (a missing, insecure or malformed file, an unset variable, a command that fails)."""
    if source is None:
        return None
    from soklet_core.files.kek_source import load_kek
    from soklet_core.keys import KeyWrapError

    try:
        return load_kek(source, allow_insecure_permissions=allow_insecure)
    except (KeyWrapError, KeyringFileError) as error:
        kek_failure(source, error)


def kek_from_options(
    kek_file: Path | None, kek_env: str | None, kek_command: str | None, *, allow_insecure: bool = False
) -> KeyWrapper | None:
    """:func:`kek_source` then :func:`load_kek_or_exit`: what a command calls with its three options."""
    return load_kek_or_exit(kek_source(kek_file, kek_env, kek_command), allow_insecure=allow_insecure)
