"""The ``soklet`` command tree: the root group, and the module behind each of its commands, imported only when that
command is run, completed or listed in a help page.

A command module brings its core layer with it (``serve`` the whole server, ``fleet`` an HTTP client, ``tasks`` a
store): built eagerly, every call (``soklet keys list``, a tab completion) would pay for all of them before doing
anything. A group's own commands are built the same way, when first used: ``soklet keys list`` reads the options
of ``list`` only. The help pages and the completion are the same as for a tree built eagerly, in the same order.
"""

from __future__ import annotations

import copy
import importlib
import sys
from collections.abc import Callable, Iterator, MutableMapping
from functools import partial
from typing import Any, Final

import typer
from typer._click import Command
from typer.main import get_command_from_info, get_command_name, get_group_from_info
from typer.models import TyperInfo

from .app import version_line
from .output import SokletCommand, SokletGroup

#: Every top-level command, in the order of the help page (commands, then groups, as Typer lists them): its name,
#: the module that defines it and the name there of its function (a command) or Typer app (a group).
COMMANDS: Final = (
    ("canonicalize", "soklet_cli.canonicalize", "canonicalize"),
    ("fingerprint", "soklet_cli.fingerprint", "fingerprint"),
    ("inspect-state", "soklet_cli.inspect_state", "inspect_state"),
    ("seal-state", "soklet_cli.seal_state", "seal_state"),
    ("serve", "soklet_cli.serve", "serve"),
    # keys_encrypt adds ``keys encrypt`` to the keys app defined in soklet_cli.keys.
    ("keys", "soklet_cli.keys_encrypt", "keys_app"),
    ("kek", "soklet_cli.kek", "kek_app"),
    ("fleet", "soklet_cli.fleet", "fleet_app"),
    ("tasks", "soklet_cli.tasks", "tasks_app"),
    ("handles", "soklet_cli.handles", "handles_app"),
)


def _built(name: str, module: str, attribute: str) -> Command:
    """The Click command ``name``, built from its module as Typer builds a registered command or group."""
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        # The group without its commands, which are then added unbuilt, in the same order: reading a command's
        # signature and options is most of a group's build (about 10 ms for the keys group's eight), and a call
        # runs one of them. Its help page and the completion build them all, as before.
        shell = copy.copy(target)
        shell.registered_commands = []
        group = get_group_from_info(
            TyperInfo(shell, name=name),
            pretty_exceptions_short=app.pretty_exceptions_short,
            rich_markup_mode=app.rich_markup_mode,
            suggest_commands=app.suggest_commands,
        )
        builders: dict[str, Callable[[], Command]] = {
            info.name or get_command_name(info.callback.__name__): partial(
                get_command_from_info,
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
            for info in target.registered_commands
            if info.callback is not None
        }
        lazy = _LazyCommands(builders)
        lazy.update(group.commands)  # its subgroups, built, after the commands as Typer orders them
        group.commands = lazy
        return group
    # The same registration as app.command(name, cls=SokletCommand), on an app of its own.
    holder = typer.Typer()
    holder.command(name, cls=SokletCommand)(target)
    return get_command_from_info(
        holder.registered_commands[0],
        pretty_exceptions_short=app.pretty_exceptions_short,
        rich_markup_mode=app.rich_markup_mode,
    )


class _LazyCommands(MutableMapping[str, Command]):
    """A group's commands by name: every name known at once, each command built on first use."""

    def __init__(self, builders: dict[str, Callable[[], Command]]) -> None:
        self._where = dict(builders)
        self._built: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            self._built[name] = self._where[name]()
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._where.setdefault(name, partial(self._built.__getitem__, name))
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._where[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


class _RootGroup(SokletGroup):
    """The ``soklet`` group, whose commands are :class:`_LazyCommands`."""

    def __init__(self, *, commands: dict[str, Command] | None = None, **attrs: Any) -> None:
        # Typer passes the commands registered on the app itself (none: COMMANDS names them all), built.
        lazy = _LazyCommands({name: partial(_built, name, module, attribute) for name, module, attribute in COMMANDS})
        lazy.update(commands or {})
        super().__init__(commands=lazy, **attrs)  # type: ignore[arg-type]


app = typer.Typer(
    name="soklet",
    help=(
        "Seal, bind, expire and rotate MCP input-required request state across a fleet.\n\n"
        "Run **soklet COMMAND --help** for a command's options, an example and its exit codes."
    ),
    no_args_is_help=True,
    cls=_RootGroup,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(version_line())
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """soklet."""
