"""Where a key-encryption key (KEK) comes from, and how it is loaded into a :class:`~soklet_core.keys.KeyWrapper`.

A :class:`KekSource` names exactly one of:

* a **file** holding the 32 KEK bytes as one line of base64url text without padding (what ``soklet kek generate``
  writes), read with the secret-file rules of :func:`read_secret_file` (owner-only mode, owned by this user or
  root, in folders no other user can change, at most :data:`MAX_KEK_FILE_BYTES`);
* an **environment variable** holding the same base64url text (at most :data:`MAX_KEK_TEXT_CHARS` characters);
* a **command** (an argument list, split from one command line by :func:`shlex.split`, run without a shell) that
  wraps and unwraps by itself (a KMS, an HSM): see :mod:`soklet_core.keys.kek_command` for its protocol.

No message built here repeats a KEK, an environment value or a command's output.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Final

from soklet_core.keys import (
    KEK_BYTES,
    KeyWrapError,
    KeyWrapErrorReason,
    KeyWrapper,
    LocalKek,
    decode_base64url,
    encode_base64url,
)
from soklet_core.keys.kek_command import CommandKek

from .atomic import atomic_write
from .errors import KeyringFileError
from .errors import KeyringFileErrorReason as Reason
from .fleet_file import is_environment_name
from .secret_file import check_folders, read_secret_file

__all__ = [
    "KEK_FILE_MODE",
    "MAX_KEK_COMMAND_CHARS",
    "MAX_KEK_COMMAND_WORDS",
    "MAX_KEK_FILE_BYTES",
    "MAX_KEK_TEXT_CHARS",
    "KekSource",
    "load_kek",
    "write_kek_file",
]

#: A KEK file is written owner read/write only.
KEK_FILE_MODE: Final = 0o600
#: A KEK file larger than this is refused unread (it holds one line of 43 base64url characters).
MAX_KEK_FILE_BYTES: Final = 1024
#: Longest KEK text taken from an environment variable, surrounding white space included.
MAX_KEK_TEXT_CHARS: Final = 1024
#: Longest ``--kek-command`` line, in characters.
MAX_KEK_COMMAND_CHARS: Final = 4096
#: Most words (program and arguments) a ``--kek-command`` line may split into.
MAX_KEK_COMMAND_WORDS: Final = 64


@dataclass(frozen=True, slots=True)
class KekSource:
    """Exactly one place a KEK comes from: ``file`` (a path), ``env`` (a variable name) or ``command`` (the
    argument list of a program speaking the KEK command protocol). Holds no secret: a name, never a KEK."""

    file: str | None = None
    env: str | None = None
    command: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        given = [value for value in (self.file, self.env, self.command) if value is not None]
        if len(given) != 1:
            raise ValueError("a KEK source is exactly one of a file, an environment variable or a command")
        if self.file is not None and (not isinstance(self.file, str) or not self.file or "\x00" in self.file):
            raise ValueError("a KEK file path must be a non-empty string")
        if self.env is not None and not is_environment_name(self.env):
            raise ValueError("a KEK environment variable name is a letter or _, then letters, digits and _")
        if self.command is not None and (
            not isinstance(self.command, tuple)
            or not 1 <= len(self.command) <= MAX_KEK_COMMAND_WORDS
            or not all(isinstance(word, str) and word and "\x00" not in word for word in self.command)
        ):
            raise ValueError(f"a KEK command is 1 to {MAX_KEK_COMMAND_WORDS} non-empty words")

    @classmethod
    def from_command_line(cls, line: str) -> KekSource:
        """The source running ``line``, split as a POSIX shell would split it (quotes, backslashes) but run
        without one. Raises ``ValueError`` (naming the rule, never the line) for an empty, unbalanced or
        overlong line."""
        if len(line) > MAX_KEK_COMMAND_CHARS:
            raise ValueError(f"a KEK command line is at most {MAX_KEK_COMMAND_CHARS} characters")
        try:
            words = shlex.split(line)
        except ValueError:
            raise ValueError("a KEK command line has an unbalanced quote or a trailing backslash") from None
        if not words:
            raise ValueError("a KEK command line is empty")
        return cls(command=tuple(words))

    @property
    def description(self) -> str:
        """How a message names this source: the file's path, ``$NAME``, or the command's program name."""
        if self.file is not None:
            return f"KEK file {self.file}"
        if self.env is not None:
            return f"KEK variable ${self.env}"
        assert self.command is not None
        return f"KEK command {os.path.basename(self.command[0])}"


def load_kek(source: KekSource, *, allow_insecure_permissions: bool = False) -> KeyWrapper:
    """The KEK ``source`` names, ready to wrap and unwrap.

    A file or variable must hold exactly :data:`~soklet_core.keys.KEK_BYTES` bytes as base64url text (white space
    around it ignored), else ``KeyWrapError(INVALID_KEK)``; a variable that is not set is
    ``KeyWrapError(KEK_UNAVAILABLE)``; a file that cannot be read or is refused raises the files layer's
    ``KeyringFileError`` (``not-found``, ``insecure-permissions``, ``too-large``, ...). A command is asked for its
    KEK id once here, so one that does not work is refused now (``KEK_UNAVAILABLE``), not at its first key.
    """
    if source.file is not None:
        raw = read_secret_file(
            source.file, limit=MAX_KEK_FILE_BYTES, allow_insecure_permissions=allow_insecure_permissions
        )
        return _local_kek(raw)
    if source.env is not None:
        value = os.environ.get(source.env)
        if value is None:
            raise KeyWrapError(KeyWrapErrorReason.KEK_UNAVAILABLE, detail=f"${source.env} is not set")
        if len(value) > MAX_KEK_TEXT_CHARS:
            raise KeyWrapError(KeyWrapErrorReason.INVALID_KEK, detail=f"more than {MAX_KEK_TEXT_CHARS} characters")
        return _local_kek(value.encode("utf-8", "surrogateescape"))
    assert source.command is not None
    wrapper = CommandKek(source.command)
    _ = wrapper.kek_id
    return wrapper


def _local_kek(raw: bytes) -> LocalKek:
    # The detail says what is wrong with the text, never any of it.
    try:
        material = decode_base64url(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise KeyWrapError(KeyWrapErrorReason.INVALID_KEK, detail="not base64url text without padding") from None
    if len(material) != KEK_BYTES:
        raise KeyWrapError(KeyWrapErrorReason.INVALID_KEK, detail=f"{len(material)} bytes given")
    return LocalKek(material)


def write_kek_file(path: str | os.PathLike[str], *, allow_insecure_permissions: bool = False) -> LocalKek:
    """Make a new random KEK, write it to a new file at ``path`` (mode 0600, atomically) and return it.

    Never overwrites: anything already at ``path`` (a file, a symlink) is ``KeyringFileError(already-exists)`` and
    nothing is written. Refuses a folder another user could change (``untrusted-folder``) unless
    ``allow_insecure_permissions``. The file holds one line: the KEK in base64url text.
    """
    label = str(path)
    if not allow_insecure_permissions:
        check_folders(path, label=label)
    if os.path.lexists(path):
        raise KeyringFileError(Reason.ALREADY_EXISTS, path=label)
    kek, material = LocalKek.generate()
    atomic_write(path, (encode_base64url(material) + "\n").encode("ascii"), mode=KEK_FILE_MODE, overwrite=False)
    return kek
