"""Store URLs: ``sqlite:///absolute/path`` or ``postgresql://user:password@host:port/database``, parsed once.

A PostgreSQL URL carries its password, so :class:`StoreUrl` keeps the full text out of its repr and str and offers
:attr:`StoreUrl.redacted` (the password replaced by ``***``) for every message and log line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal
from urllib.parse import SplitResult, urlsplit

from .errors import StoreError, StoreErrorReason

__all__ = ["MAX_STORE_URL_CHARS", "StoreUrl", "default_data_dir", "default_store_url", "sqlite_url"]

#: The longest store URL soklet accepts.
MAX_STORE_URL_CHARS: Final = 4096
#: The file name of the default SQLite store inside the data folder.
DEFAULT_SQLITE_FILE: Final = "soklet.db"

_SQLITE_PREFIX: Final = "sqlite://"
_POSTGRES_SCHEMES: Final = ("postgresql", "postgres")
_REDACTED: Final = "***"


def _bad(detail: str) -> StoreError:
    return StoreError(StoreErrorReason.BAD_URL, detail)


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A parsed store URL. ``text`` is the full, secret-bearing URL; show :attr:`redacted` instead."""

    backend: Literal["sqlite", "postgresql"]
    text: str = field(repr=False)

    def __post_init__(self) -> None:
        # Every instance went through the same rules, whichever constructor made it.
        parsed = StoreUrl.parse(self.text)
        if parsed.backend != self.backend:
            raise _bad("the backend does not match the URL's scheme")

    @classmethod
    def parse(cls, text: str) -> StoreUrl:
        """Parse ``text``; raises ``StoreError(BAD_URL)`` naming only the rule broken (never the text)."""
        if not isinstance(text, str):
            raise _bad("a store URL is text")
        if len(text) > MAX_STORE_URL_CHARS:
            raise _bad(f"longer than {MAX_STORE_URL_CHARS} characters")
        if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in text):
            raise _bad("spaces and control characters are not allowed")
        if text.startswith(_SQLITE_PREFIX):
            _sqlite_path(text)
            return _make(cls, "sqlite", text)
        scheme, _, _ = text.partition("://")
        if scheme in _POSTGRES_SCHEMES:
            _check_postgres(text)
            return _make(cls, "postgresql", text)
        raise _bad("the scheme must be sqlite or postgresql")

    @property
    def redacted(self) -> str:
        """The URL with its password (and any password in the query) replaced by ``***``; safe to print and log."""
        if self.backend == "sqlite":
            return self.text
        parts = urlsplit(self.text)
        netloc = parts.netloc
        userinfo, at, hostport = netloc.rpartition("@")
        if at:
            user, colon, _ = userinfo.partition(":")
            netloc = f"{user}:{_REDACTED}@{hostport}" if colon else f"{user}@{hostport}"
        query = parts.query
        if "password" in query.lower():
            query = _REDACTED
        return SplitResult(parts.scheme, netloc, parts.path, query, "").geturl()

    @property
    def sqlite_path(self) -> Path:
        """The database file of a ``sqlite:`` URL; ``ValueError`` for another backend."""
        if self.backend != "sqlite":
            raise ValueError("sqlite_path: not a sqlite URL")
        return _sqlite_path(self.text)

    def __repr__(self) -> str:
        return f"StoreUrl({self.redacted!r})"

    def __str__(self) -> str:
        return self.redacted


def _make(cls: type[StoreUrl], backend: Literal["sqlite", "postgresql"], text: str) -> StoreUrl:
    # Skips __post_init__ (which calls parse): parse has just checked the text.
    url = object.__new__(cls)
    object.__setattr__(url, "backend", backend)
    object.__setattr__(url, "text", text)
    return url


def _sqlite_path(text: str) -> Path:
    rest = text[len(_SQLITE_PREFIX) :]
    if not rest.startswith("/"):
        raise _bad("a sqlite URL is sqlite:///absolute/path (three slashes, no host)")
    if "?" in rest or "#" in rest or "%" in rest:
        raise _bad("a sqlite URL takes no query, fragment or percent-escape")
    path = Path(rest)
    if not path.is_absolute() or path.name in ("", ".", "..") or ".." in path.parts:
        raise _bad("a sqlite URL names an absolute file path without '..'")
    return path


def _check_postgres(text: str) -> None:
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise _bad("the host or port of the postgresql URL is malformed") from None
    if parts.fragment:
        raise _bad("a postgresql URL takes no fragment")
    if not parts.hostname and "host=" not in parts.query:
        raise _bad("a postgresql URL names a host")
    if port == 0:
        raise _bad("the port of the postgresql URL is 0")
    if parts.path.count("/") > 1:
        raise _bad("a postgresql URL's path is one database name")


def default_data_dir() -> Path:
    """soklet's data folder: ``$SOKLET_DATA_DIR``, else ``$XDG_STATE_HOME/soklet``, else ``~/.local/state/soklet``."""
    explicit = os.environ.get("SOKLET_DATA_DIR")
    if explicit:
        return Path(explicit).absolute()
    state = os.environ.get("XDG_STATE_HOME")
    if state and Path(state).is_absolute():
        return Path(state) / "soklet"
    return Path.home() / ".local" / "state" / "soklet"


def sqlite_url(path: Path) -> StoreUrl:
    """The store URL of the SQLite file ``path`` (made absolute)."""
    return StoreUrl.parse(f"{_SQLITE_PREFIX}{Path(path).absolute()}")


def default_store_url() -> StoreUrl:
    """The embedded default: ``sqlite:///<default_data_dir()>/soklet.db``."""
    return sqlite_url(default_data_dir() / DEFAULT_SQLITE_FILE)
