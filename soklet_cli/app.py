"""The ``soklet`` command: its groups and commands, and the guard that keeps tracebacks from users."""

from __future__ import annotations

import codecs
import os
import select
import sys
from typing import TYPE_CHECKING, Final

from soklet_core import __version__

from .exit_codes import ExitCode

if TYPE_CHECKING:
    import typer

# This module is what the ``soklet`` script imports first: it imports neither Typer nor a command, so that
# ``soklet --version`` is answered without them, and every other call builds only the command it runs
# (soklet_cli/commands.py holds the tree).

#: The one argument list answered before the command tree is built.
_VERSION_ARGUMENTS: Final = ["--version"]


def version_line() -> str:
    """What ``soklet --version`` prints: ``soklet`` and the version, one line."""
    return f"soklet {__version__}\n"


def __getattr__(name: str) -> typer.Typer:
    # ``soklet_cli.app.app``, the Typer app (for tools that read the tree, such as the generator of the man pages),
    # built when asked for.
    if name == "app":
        from .commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Longest command-line error printed: room for any message soklet writes, while an argument of 100 KB (which
#: Click may quote, as in "Got unexpected extra argument (...)") cannot flood the terminal.
MAX_ERROR_CHARS: Final = 300


def _one_line(text: str) -> str:
    # Bounded first, then every character a terminal could act on (controls, lone surrogates from argv bytes that
    # are not UTF-8, line breaks) shown as "?".
    cut = text[:MAX_ERROR_CHARS] + ("…" if len(text) > MAX_ERROR_CHARS else "")
    return "".join(char if char.isprintable() else "?" for char in cut)


#: An argument this long or longer is never repeated in an error (Click quotes the arguments it cannot place): it
#: may be key material pasted by mistake. Shorter ones (a mistyped command) are kept, for the hint.
MIN_WITHHELD_ARGUMENT_CHARS: Final = 16


def _withheld_texts(argument: str) -> list[str]:
    # What of one argument an error may quote: a value or command as it is; an option's name (Click reports
    # "No such option: --name" for "--name=value" too) and the whole argument.
    if not argument.startswith("-"):
        return [argument] if len(argument) >= MIN_WITHHELD_ARGUMENT_CHARS else []
    from soklet_core.keys.material_shape import looks_like_key_material

    name = argument.partition("=")[0]
    return [text for text in {argument, name} if looks_like_key_material(text)]


def _withheld(message: str) -> str:
    """``message`` with every argument Click may quote in it that could be pasted key material replaced by "…":
    values, commands and extra arguments from :data:`MIN_WITHHELD_ARGUMENT_CHARS` on, and option names that
    look like key material (the core rule)."""
    texts = {text for argument in set(sys.argv[1:]) for text in _withheld_texts(argument)}
    for text in sorted(texts, key=len, reverse=True):
        message = message.replace(text, "…")
    return message


def _say(message: str, hint: str = "") -> None:
    try:
        sys.stderr.write(f"soklet: {_one_line(message)}{hint}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr itself is gone: the exit status is all that is left
        pass


def _usage_error(error: typer.TyperException) -> int:
    """Report a command-line error (a Click/Typer usage error) in one bounded line; its exit code."""
    if type(error).__name__ == "NoArgsIsHelpError":  # the help is already printed: nothing to add
        return int(error.exit_code)
    context = getattr(error, "ctx", None)
    command = getattr(context, "command_path", "") or "soklet"
    hint = f" (see: {command} --help)" if error.exit_code == ExitCode.USAGE else ""
    _say(_withheld(error.format_message()), hint)
    return int(error.exit_code)


def _stdout_identity() -> tuple[int, int] | None:
    try:
        status = os.fstat(1)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _run() -> int:
    if sys.argv[1:] == _VERSION_ARGUMENTS:
        try:
            sys.stdout.write(version_line())
        except OSError as error:
            return _write_failure(error)
        return int(ExitCode.OK)
    import typer

    from .commands import app

    stdout = sys.stdout
    try:
        result = app(prog_name="soklet", standalone_mode=False)
    except typer.TyperException as error:
        return _usage_error(error)
    except typer.Abort:
        _say("aborted")
        return int(ExitCode.REFUSED)
    except SystemExit:
        # Click answers a broken pipe by swapping stdout for a wrapper and exiting 1 ("refused"): the reader left.
        if sys.stdout is not stdout:
            return _reader_gone(ExitCode.OK)
        raise
    except OSError as error:
        return _write_failure(error)
    except UnicodeEncodeError as error:
        if not _is_output_encoding(error.encoding):
            raise
        # A terminal or PYTHONIOENCODING that is not UTF-8, and output (a state, a name) it cannot spell.
        _say(
            f"the output holds characters that the output encoding ({error.encoding}) cannot write; "
            "set PYTHONIOENCODING=utf-8"
        )
        return int(ExitCode.IO)
    return result if isinstance(result, int) and not isinstance(result, bool) else int(ExitCode.OK)


def _write_failure(error: OSError) -> int:
    """The exit code for an I/O failure no command turned into its own message (such as a full disk), said in one
    line; a broken pipe because the reader of stdout left ends quietly."""
    if isinstance(error, BrokenPipeError):
        if _stdout_reader_is_gone():
            return _reader_gone(ExitCode.OK)
        _say("I/O error: a connection or pipe was closed by its other end")
        return int(ExitCode.IO)
    _say(f"I/O error: {error.strerror or type(error).__name__}")
    return int(ExitCode.IO)


def _is_output_encoding(encoding: str) -> bool:
    # Only an encoding other than UTF-8 that stdout or stderr uses; anything else is a bug, reported as such.
    try:
        name = codecs.lookup(encoding).name
        streams = {codecs.lookup(stream.encoding).name for stream in (sys.stdout, sys.stderr) if stream is not None}
    except (LookupError, AttributeError, TypeError):
        return False
    return name != "utf-8" and name in streams


def _stdout_reader_is_gone() -> bool:
    """Whether standard output is a pipe or socket whose reader has gone (``soklet … | head``), so that a broken
    pipe raised elsewhere (a connection) is not mistaken for it."""
    try:
        poller = select.poll()
        poller.register(sys.__stdout__.fileno() if sys.__stdout__ is not None else 1, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def _reader_gone(code: int) -> int:
    """The exit code when standard output's reader went away (``soklet … | head``): nothing is said and ``code``
    stands (0 when the command had not failed), as ``git log | head`` does; what is still buffered is dropped."""
    _silence_stdout()
    return int(code)


def _silence_stdout() -> None:
    # Whatever is still buffered would fail again when the interpreter flushes at exit, with a message of its own.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _flushed(code: int) -> int:
    """``code``, unless what is buffered for stdout cannot be written: then one line and the I/O exit code."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        return _reader_gone(code)
    except (OSError, ValueError) as error:
        _say(f"cannot write the output: {getattr(error, 'strerror', None) or type(error).__name__}")
        _silence_stdout()
        return int(ExitCode.IO)
    return code


def main() -> None:
    """Console-script entry point: run the app; whatever happens, one bounded line on stderr and a documented
    exit code, never a traceback.

    Command-line errors exit 2; an output that cannot be written (a closed stdout, a full disk) exits 3; a reader
    of standard output that goes away (``soklet … | head``) ends the command quietly with its own code (0 unless it
    had failed); a bug exits 70.
    """
    if sys.stderr is None:  # started with stderr closed: errors can only be told by the exit status
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115  # lives as long as the process
    if sys.stdout is None:  # started with stdout closed: no command's output could be written
        _say("standard output is closed")
        sys.exit(int(ExitCode.IO))
    stdout = _stdout_identity()
    try:
        code = _run()
    except KeyboardInterrupt:
        _say("interrupted")
        code = 130
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 0
        if exit_.code is not None and not isinstance(exit_.code, int):  # sys.exit(message): Python prints it, exits 1
            _say(str(exit_.code))
            code = 1
    except Exception as error:  # the last guard: users get one line, never a traceback
        _say(f"internal error ({type(error).__name__}); please report it")
        code = int(ExitCode.INTERNAL)
    if code != ExitCode.IO and _stdout_identity() != stdout:
        # rich answers a broken pipe by pointing stdout at /dev/null and exiting 1 ("refused"): the reader left.
        code = _reader_gone(ExitCode.OK)
    sys.exit(_flushed(code))
