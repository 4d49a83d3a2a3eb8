"""The ``soklet`` command: its groups and commands, and the guard that keeps tracebacks from users."""

from __future__ import annotations

import sys

import typer

from soklet_core import __version__

from .canonicalize import canonicalize
from .exit_codes import ExitCode
from .fingerprint import fingerprint
from .inspect_state import inspect_state
from .keys import keys_app
from .seal_state import seal_state
from .serve import serve

app = typer.Typer(
    name="soklet",
    help=(
        "Seal, bind, expire and rotate MCP input-required request state across a fleet.\n\n"
        "Run **soklet COMMAND --help** for a command's options, an example and its exit codes."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"soklet {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """soklet."""


app.command("canonicalize")(canonicalize)
app.command("fingerprint")(fingerprint)
app.add_typer(keys_app, name="keys")
app.command("inspect-state")(inspect_state)
app.command("seal-state")(seal_state)
app.command("serve")(serve)


def main() -> None:
    """Console-script entry point: run the app; report any unexpected error in one line, never a traceback."""
    try:
        app(prog_name="soklet")
    except KeyboardInterrupt:
        sys.stderr.write("soklet: interrupted\n")
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as error:  # the last guard: users get one line, never a traceback
        sys.stderr.write(f"soklet: internal error ({type(error).__name__}); please report it\n")
        sys.exit(int(ExitCode.INTERNAL))
