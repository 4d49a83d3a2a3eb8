"""How commands speak: JSON for scripts, rich for people, one line on stderr for errors."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from typer._click import Context, Parameter
from typer.core import TyperCommand, TyperGroup

from soklet_core.files import KeyringFileError, KeyringFileErrorReason, read_regular_file
from soklet_core.json import JsonError, JsonErrorReason

from ._common import shown_path
from .exit_codes import ExitCode

#: Human output; rich degrades to plain text when stdout is not a terminal.
console = Console(highlight=False, soft_wrap=True)
error_console = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(document: Any) -> None:
    """Write one JSON document and a newline to stdout."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False, sort_keys=False) + "\n")


def fail(message: str, code: ExitCode) -> NoReturn:
    """Print ``soklet: message`` on stderr and exit with ``code``. ``message`` must hold no secret."""
    error_console.print(f"soklet: {message}", markup=False)
    raise typer.Exit(int(code))


def read_input(source: str, *, max_bytes: int) -> bytes:
    """The bytes of FILE, or of stdin for ``-``, refusing more than ``max_bytes``.

    FILE must be a regular file: a FIFO, socket or device is refused at once (exit 3) rather than waited on;
    use ``-`` to read a pipe.
    """
    if source == "-":
        try:
            data = sys.stdin.buffer.read(max_bytes + 1)
        except OSError as error:
            fail(f"cannot read standard input: {error.strerror or 'I/O error'}", ExitCode.IO)
    else:
        try:
            data = read_regular_file(source, limit=max_bytes)
        except KeyringFileError as error:
            if error.reason is KeyringFileErrorReason.TOO_LARGE:
                _too_large(max_bytes)
            hint = "; use - to read standard input" if error.reason is KeyringFileErrorReason.NOT_A_FILE else ""
            detail = error.detail or error.reason.description
            fail(f"cannot read {shown_path(source)}: {shown_path(detail)}{hint}", ExitCode.IO)
    if len(data) > max_bytes:
        _too_large(max_bytes)
    return data


def _too_large(max_bytes: int) -> NoReturn:
    fail(f"refused: {JsonError(JsonErrorReason.INPUT_TOO_LARGE, max_bytes)}", ExitCode.REFUSED)


def _without_bool_metavar(params: list[Parameter]) -> list[Parameter]:
    # Typer 0.29's rich help prints a flag's type (<bool>) beside it although a flag takes no value; an empty
    # metavar is what its help renderer shows instead.
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class SokletCommand(TyperCommand):
    """A Typer command whose help shows flags (``--json``, ``--help``) without a ``<bool>`` value."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        """The command's parameters, flags without a ``<bool>`` metavar."""
        return _without_bool_metavar(super().get_params(ctx))


class SokletGroup(TyperGroup):
    """A Typer group whose help shows flags (``--help``, ``--version``) without a ``<bool>`` value."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        """The group's parameters, flags without a ``<bool>`` metavar."""
        return _without_bool_metavar(super().get_params(ctx))
