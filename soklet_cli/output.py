"""How commands speak: JSON for scripts, rich for people, one line on stderr for errors."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console

from soklet_core.json import JsonError, JsonErrorReason

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
    """The bytes of FILE, or of stdin for ``-``, refusing more than ``max_bytes``."""
    try:
        if source == "-":
            data = sys.stdin.buffer.read(max_bytes + 1)
        else:
            with open(source, "rb") as handle:
                data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        fail(f"cannot read {source!r}: no such file", ExitCode.IO)
    except IsADirectoryError:
        fail(f"cannot read {source!r}: it is a directory", ExitCode.IO)
    except PermissionError:
        fail(f"cannot read {source!r}: permission denied", ExitCode.IO)
    except OSError as error:
        fail(f"cannot read {source!r}: {error.strerror or 'I/O error'}", ExitCode.IO)
    if len(data) > max_bytes:
        fail(f"refused: {JsonError(JsonErrorReason.INPUT_TOO_LARGE, max_bytes)}", ExitCode.REFUSED)
    return data
