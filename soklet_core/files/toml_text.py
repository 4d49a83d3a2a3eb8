"""What soklet's two TOML files, the keyring file and the fleet file, read the same way.

Both formats refuse a syntax error by its position only, show a field name only when it looks like a name, and
name environment variables by the same rule; each rule is written here once and used by both parsers.
"""

from __future__ import annotations

import re
import tomllib
from typing import Final

from soklet_core.keys import looks_like_key_material

__all__ = ["ENV_NAME", "field_label", "syntax_error_position"]

#: An environment variable name, as ``material_env`` and a fleet file's ``token_env`` may give it.
ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_POSITION: Final = re.compile(r"\(at line (\d+), column (\d+)\)")
_FIELD_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,31}")


def syntax_error_position(error: tomllib.TOMLDecodeError) -> str | None:
    """``"line L, column C"`` of a TOML syntax error, or ``None``.

    tomllib's messages can quote a character of the file, so only the position is ever kept from them.
    """
    found = _POSITION.search(str(error))
    return f"line {found.group(1)}, column {found.group(2)}" if found else None


def field_label(name: str) -> str:
    """How a field name read from a file is shown in a message.

    A field name is file content too: it is shown only if it looks like a name, not like pasted key material.
    """
    if looks_like_key_material(name):
        return "<a name that looks like key material>"
    return name if _FIELD_NAME.fullmatch(name) else "<unprintable>"
