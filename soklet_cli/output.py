"""How commands speak: JSON for scripts, rich for people, one line on stderr for errors, and the one way a
message names a path the user gave."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NoReturn, TextIO

import typer
from rich.console import Console
from typer._click import Context, Parameter
from typer._coercion import RuntimeParam, build_runtime_param
from typer.core import TyperArgument, TyperCommand, TyperGroup, _TyperParameter

from soklet_core.files import KeyringFileError, KeyringFileErrorReason, read_regular_file
from soklet_core.json import JsonError, JsonErrorReason
from soklet_core.keys import printable_name

from .exit_codes import ExitCode

if TYPE_CHECKING:
    from soklet_core.json import PythonJson

#: The width of human output when it does not go to a terminal (a CI log, a file, a pipe) and ``$COLUMNS`` is not
#: set: wide enough that no table column of ids, names and times is cut or folded (rich's default there is 80);
#: tables are as wide as their content, never padded to it.
WIDE_OUTPUT_COLUMNS: Final = 320


def output_width(stream: TextIO | None) -> int | None:
    """The width human output to ``stream`` is laid out for: ``None`` (rich asks the terminal, or reads
    ``$COLUMNS``) on a terminal or when ``$COLUMNS`` is set, else :data:`WIDE_OUTPUT_COLUMNS`."""
    try:
        terminal = stream is not None and stream.isatty()
    except (OSError, ValueError):  # a closed stream: whatever is written fails anyway
        terminal = False
    if terminal or os.environ.get("COLUMNS", "").strip().isdigit():
        return None
    return WIDE_OUTPUT_COLUMNS


#: Human output; rich degrades to plain text when stdout is not a terminal, laid out :func:`output_width` wide.
console = Console(highlight=False, soft_wrap=True, width=output_width(sys.stdout))
error_console = Console(stderr=True, highlight=False, soft_wrap=True, width=output_width(sys.stderr))


#: Longest rendering of a path the user gave in any message: the start and the end (the file's own name) are
#: kept around a "…", so a 4 KB name cannot flood a terminal.
MAX_SHOWN_PATH_CHARS: Final = 200
# What a path component that looks like pasted key material is shown as.
_MATERIAL_COMPONENT: Final = "a file name"


def _escaped(char: str) -> str:
    # Bytes that are not UTF-8 (surrogate escapes) as \xNN, every other character a terminal could act on (C0,
    # DEL, C1, line and paragraph separators, format characters, lone surrogates) as Python would escape it;
    # printable text as it is.
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if char.isprintable():
        return char
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown_path(path: str | os.PathLike[str], *, limit: int | None = MAX_SHOWN_PATH_CHARS) -> str:
    r"""How a message names a path the user gave (or a text built on one): every ``/``-separated part that looks
    like key material replaced by a fixed stand-in (:func:`soklet_core.keys.printable_name`), control characters
    and bytes that are not UTF-8 escaped, and at most ``limit`` characters (start and end kept around ``…``).

    >>> shown_path("keys/ring\x1b[2J.toml")
    'keys/ring\\x1b[2J.toml'
    """
    text = os.fspath(path)
    parts = [printable_name(part, what=_MATERIAL_COMPONENT) for part in text.split("/")]
    pieces = [_escaped(char) for char in "/".join(parts)]
    if limit is None or sum(map(len, pieces)) <= limit:
        return "".join(pieces)
    # Whole escapes only: a cut never leaves half of one.
    budget = (limit - 1) // 2
    head: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) > budget:
            break
        head.append(piece)
        used += len(piece)
    tail: list[str] = []
    used = 0
    for piece in reversed(pieces[len(head) :]):
        if used + len(piece) > limit - 1 - budget:
            break
        tail.append(piece)
        used += len(piece)
    return "".join(head) + "…" + "".join(reversed(tail))


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """How a message says ``count`` things: ``1 instance``, ``2 instances``, ``1,024 keys`` (``plural`` for a noun
    that does not just take an ``s``).

    >>> counted(1, "item"), counted(0, "item"), counted(3, "entry", "entries")
    ('1 item', '0 items', '3 entries')
    """
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def file_error_text(error: KeyringFileError) -> str:
    """``error``'s message with its path, and the folder or lock file its detail may name, shown by
    :func:`shown_path` (the core message repeats the path as it was given)."""
    if error.path is None:
        return str(error)
    detail = shown_path(error.detail) if error.detail else None
    shown = KeyringFileError(error.reason, path=shown_path(error.path), key=error.key, field=error.field, detail=detail)
    return str(shown)


def emit_json(document: Any) -> None:
    """Write one JSON document of plain data (``str``, ``int``, ``bool``, ``None``, lists, dicts) and a newline
    to stdout, spaced as ``json.dumps`` writes it (the format scripts have parsed since the first release).

    A document holding exact values of the JSON model goes through :func:`emit_exact_json` instead."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False, sort_keys=False) + "\n")


def emit_exact_json(document: Mapping[str, PythonJson]) -> None:
    """Write ``document`` and a newline to stdout through the core codec (:func:`soklet_core.json.serialize`):
    compact, members in their order, and its values of the JSON model (a sealed state, a request id) spelled
    exactly as held, so no number passes through a float.

    The whole document is one value: nothing is substituted into text already serialized, so no value can stand in
    for another part."""
    # The codec brings msgspec and the scanner: only the commands that write exact values pay for them.
    from soklet_core.json import JsonValue, serialize

    sys.stdout.write(serialize(JsonValue.from_python(document)) + "\n")


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


@dataclass(frozen=True)
class _DirectValue(RuntimeParam):
    """Typer's coercion of a value already of the parameter's type (``str``, ``bool``, an unbounded ``int``), or of
    one value through the option's parser, without the pydantic adapter Typer 0.29 builds for it (importing
    pydantic costs a command about 0.1 s of CPU before it starts).

    The result is the one the adapter gives: the value itself, or what the parser returns (an error the parser
    raises as ``typer.BadParameter`` passes through it unchanged). Anything else (text for an ``int``, bytes, a
    parser's ``ValueError``, whose message the adapter words) goes to Typer's own coercion."""

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        parser = self.parameter_info.parser
        if parser is not None:
            try:
                return parser(value)
            except (ValueError, AssertionError):
                pass
        elif type(value) is self.annotation and self.parameter_info.min is None and self.parameter_info.max is None:
            return value
        return build_runtime_param(param.type_descriptor).coerce(value, param=param, ctx=ctx)


def _direct(param: _TyperParameter) -> bool:
    # A single value (not a list, a tuple or a file) typed str, bool (a flag left unset is None) or int (a
    # default), or read by a parser.
    descriptor = param.type_descriptor
    if descriptor.file_annotation is not None or descriptor.is_list or descriptor.is_tuple:
        return False
    return descriptor.parameter_info.parser is not None or descriptor.annotation in (str, bool, int)


def _without_bool_metavar(params: list[Parameter]) -> list[Parameter]:
    # Typer 0.29's rich help prints a flag's type (<bool>) beside it although a flag takes no value; an empty
    # metavar is what its help renderer shows instead. An argument gets its Python type (<str>, <list[str]>)
    # beside its metavar whatever the metavar says: the class below leaves the metavar alone to say it.
    for param in params:
        if isinstance(param, _TyperParameter) and param._runtime_param is None and _direct(param):
            descriptor = param.type_descriptor
            param._runtime_param = _DirectValue(descriptor.parameter_info, descriptor.annotation)
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
        elif type(param) is TyperArgument and param.metavar is not None:
            param.__class__ = _MetavarArgument
    return params


class _MetavarArgument(TyperArgument):
    """An argument whose help shows its metavar (``[TOKEN|-]``, ``URL``) without a Python type beside it."""

    def display_type_rich(self, ctx: Context) -> str | None:
        """Nothing: the metavar and the usage line (``[URL]...``) say what it takes."""
        return None


class SokletCommand(TyperCommand):
    """A Typer command whose help shows flags (``--json``, ``--help``) without a ``<bool>`` value, and arguments
    by their metavar without a ``<str>`` or ``<list[str]>`` beside it."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        """The command's parameters, flags without a ``<bool>`` metavar, arguments without a type."""
        return _without_bool_metavar(super().get_params(ctx))


class SokletGroup(TyperGroup):
    """A Typer group whose help shows flags (``--help``, ``--version``) without a ``<bool>`` value."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        """The group's parameters, flags without a ``<bool>`` metavar."""
        return _without_bool_metavar(super().get_params(ctx))
