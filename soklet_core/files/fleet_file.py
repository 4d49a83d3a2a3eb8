"""The fleet file: which admin endpoints ``soklet fleet check`` reads, and where each one's bearer token lives.

::

    [defaults]
    admin_token_env = "SOKLET_ADMIN_TOKEN"    # or admin_token_file = "/run/secrets/soklet-admin"
    ca_file = "/etc/soklet/admin-ca.pem"      # optional: the CA that signed the instances' admin certificates
    timeout = 5                               # optional: seconds per instance (default 5)

    [[instances]]
    name = "eu-1"
    url = "https://eu-1.internal:9443"        # the admin base URL (http or https)
    admin_token_file = "tokens/eu-1"          # optional when [defaults] names a token source

Parsing is strict: unknown fields, a second token source in one table, an instance without any token source, a
URL that is not a plain http(s) base URL, duplicate names and more than :data:`MAX_FLEET_INSTANCES` instances
are refused, each naming the table and field. Messages never repeat a value from the file (a URL may carry
credentials, a name may be pasted material): only field names and fixed text. Relative ``admin_token_file`` and
``ca_file`` paths are anchored to the fleet file's folder. Tokens are read only by :func:`read_admin_token`,
when the client needs them, by :func:`soklet_core.fleet.read_admin_token` (the admin listener's token format).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from soklet_core.errors import SokletError

from .errors import KeyringFileError
from .regular_file import read_regular_file
from .toml_text import ENV_NAME, field_label, syntax_error_position

__all__ = [
    "DEFAULT_FLEET_TIMEOUT_SECONDS",
    "MAX_ENV_NAME_CHARS",
    "MAX_FLEET_FILE_BYTES",
    "MAX_FLEET_INSTANCES",
    "MAX_FLEET_TIMEOUT_SECONDS",
    "MAX_INSTANCE_NAME_CHARS",
    "MAX_INSTANCE_URL_CHARS",
    "AdminTokenEnv",
    "AdminTokenFile",
    "AdminTokenSource",
    "FleetFile",
    "FleetFileError",
    "FleetInstance",
    "check_admin_url",
    "check_instance_name",
    "io_problem",
    "is_environment_name",
    "parse_fleet_file",
    "read_fleet_file",
]

#: A fleet file larger than this is refused before parsing: 1,000 instances take about 200 KB.
MAX_FLEET_FILE_BYTES: Final = 1024 * 1024
#: Most ``[[instances]]`` one fleet file may list (and one ``fleet check`` reads).
MAX_FLEET_INSTANCES: Final = 1_000
#: Longest instance ``name``, in characters.
MAX_INSTANCE_NAME_CHARS: Final = 128
#: Longest admin ``url``, in characters.
MAX_INSTANCE_URL_CHARS: Final = 2_048
#: Longest ``admin_token_env`` (and ``--token-env``) name.
MAX_ENV_NAME_CHARS: Final = 128
#: Seconds one instance gets to answer when neither the file nor the command line says.
DEFAULT_FLEET_TIMEOUT_SECONDS: Final = 5.0
#: Longest per-instance timeout, in seconds.
MAX_FLEET_TIMEOUT_SECONDS: Final = 300.0

_TOP_FIELDS: Final = frozenset({"defaults", "instances"})
_DEFAULT_FIELDS: Final = frozenset({"admin_token_env", "admin_token_file", "ca_file", "timeout"})
_INSTANCE_FIELDS: Final = frozenset({"name", "url", "admin_token_env", "admin_token_file", "ca_file"})
_TOKEN_FIELDS: Final = ("admin_token_env", "admin_token_file")


class FleetFileError(SokletError):
    """A fleet file (or an admin token it names) that could not be read or was refused.

    ``path`` is the file concerned, ``where`` the table and field (``instances[2].url``), ``problem`` fixed
    text. The message is built only from these, so it never carries a token, a URL or other file content.
    ``is_io`` is true for file-system problems (not found, unreadable, permissions), false for content.

    There is no closed reason enum (``reason`` is ``None``): a problem is a sentence for the operator that may
    carry a limit or a nested refusal (a keyring file's reason, an admin token's line), and what a caller
    switches on is ``is_io``.
    """

    __slots__ = ("is_io", "path", "problem", "where")

    def __init__(self, problem: str, *, path: str | None = None, where: str | None = None, is_io: bool = False) -> None:
        self.problem = problem
        self.path = path
        self.where = where
        self.is_io = is_io
        prefix = f"{path}: " if path is not None else ""
        located = f"{where}: " if where is not None else ""
        super().__init__(None, f"{prefix}{located}{problem}")


@dataclass(frozen=True, slots=True)
class AdminTokenEnv:
    """The admin token is the value of environment variable ``name``."""

    name: str


@dataclass(frozen=True, slots=True)
class AdminTokenFile:
    """The admin token is the content of the 0600 file at ``path``."""

    path: str


AdminTokenSource = AdminTokenEnv | AdminTokenFile


@dataclass(frozen=True, slots=True)
class FleetInstance:
    """One admin endpoint: its name, base URL, token source, optional CA file and timeout in seconds."""

    name: str
    url: str = field(repr=False)
    token: AdminTokenSource
    ca_file: str | None = None
    timeout: float = DEFAULT_FLEET_TIMEOUT_SECONDS


@dataclass(frozen=True, slots=True)
class FleetFile:
    """A parsed fleet file: its instances in file order (at least one, at most :data:`MAX_FLEET_INSTANCES`)."""

    instances: tuple[FleetInstance, ...]


def is_environment_name(name: object) -> bool:
    """Whether ``name`` is an environment variable name a token may come from: a letter or ``_``, then letters,
    digits and ``_`` (the keyring format's rule for ``material_env``), at most :data:`MAX_ENV_NAME_CHARS`."""
    return isinstance(name, str) and len(name) <= MAX_ENV_NAME_CHARS and ENV_NAME.fullmatch(name) is not None


def check_instance_name(name: object) -> str | None:
    """Why ``name`` is not an instance name (1 to :data:`MAX_INSTANCE_NAME_CHARS` printable characters), or
    ``None`` when it is one."""
    if not isinstance(name, str):
        return "must be a string"
    if not name or len(name) > MAX_INSTANCE_NAME_CHARS or not name.isprintable():
        return f"must be 1 to {MAX_INSTANCE_NAME_CHARS} printable characters"
    return None


def check_admin_url(url: object) -> str | None:
    """Why ``url`` is not an admin base URL, or ``None`` when it is one: ``http`` or ``https``, a host, an
    optional port, no credentials, query or fragment, ASCII, at most :data:`MAX_INSTANCE_URL_CHARS`
    characters. The reason never repeats the URL."""
    if not isinstance(url, str):
        return "must be a string"
    if not url or len(url) > MAX_INSTANCE_URL_CHARS or not url.isascii() or not url.isprintable() or " " in url:
        return f"must be 1 to {MAX_INSTANCE_URL_CHARS:,} visible ASCII characters"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is not a valid URL (check the host and port)"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "has no host"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials (use admin_token_env or admin_token_file)"
    if parts.query or parts.fragment or "?" in url or "#" in url:
        return "must not have a query or fragment"
    if port == 0:
        return "has port 0"
    return None


def parse_fleet_file(
    text: bytes | str, *, path: str | None = None, base_dir: str | os.PathLike[str] | None = None
) -> FleetFile:
    """Parse fleet file content. ``path`` labels errors; ``base_dir`` anchors relative ``admin_token_file`` and
    ``ca_file`` paths (default: the current folder). Raises :class:`FleetFileError`."""
    return _Parser(path, Path(base_dir) if base_dir is not None else None).fleet(text)


def read_fleet_file(path: str | os.PathLike[str]) -> FleetFile:
    """Read and parse the fleet file at ``path`` (a regular file of at most :data:`MAX_FLEET_FILE_BYTES`; never
    blocks on a FIFO). Relative paths inside it are anchored to its folder. Raises :class:`FleetFileError`."""
    label = os.fspath(path)
    try:
        data = read_regular_file(path, limit=MAX_FLEET_FILE_BYTES)
    except KeyringFileError as error:
        raise FleetFileError(io_problem(error), path=label, is_io=error.reason.is_io) from None
    return parse_fleet_file(data, path=label, base_dir=Path(label).parent)


def io_problem(error: KeyringFileError) -> str:
    """The fixed description (and detail) of a read failure, without the path: for messages about a file the
    fleet file names."""
    detail = f" ({error.detail})" if error.detail else ""
    return f"{error.reason.description}{detail}"


class _Parser:
    __slots__ = ("_base_dir", "_path")

    def __init__(self, path: str | None, base_dir: Path | None) -> None:
        self._path = path
        self._base_dir = base_dir

    def _error(self, problem: str, where: str | None = None) -> FleetFileError:
        return FleetFileError(problem, path=self._path, where=where)

    def fleet(self, text: bytes | str) -> FleetFile:
        if isinstance(text, bytes):
            if len(text) > MAX_FLEET_FILE_BYTES:
                raise self._error(f"the file is larger than {MAX_FLEET_FILE_BYTES:,} bytes")
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise self._error("the file is not UTF-8 text") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise self._error("the file is not valid TOML", syntax_error_position(error)) from None
        except RecursionError:
            raise self._error("the file is not valid TOML (values nested too deeply)") from None
        except ValueError:
            raise self._error("the file is not valid TOML (a number too long to read)") from None
        self._known(data, _TOP_FIELDS, None)
        defaults = data.get("defaults", {})
        if not isinstance(defaults, dict):
            raise self._error("must be a table", "defaults")
        self._known(defaults, _DEFAULT_FIELDS, "defaults")
        default_token = self._token(defaults, "defaults")
        default_ca = self._path_field(defaults, "ca_file", "defaults")
        timeout = self._timeout(defaults)
        tables = data.get("instances")
        if tables is None:
            raise self._error("missing: list at least one [[instances]] table", "instances")
        if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
            raise self._error("must be an array of [[instances]] tables", "instances")
        if not tables:
            raise self._error("list at least one [[instances]] table", "instances")
        if len(tables) > MAX_FLEET_INSTANCES:
            raise self._error(f"at most {MAX_FLEET_INSTANCES:,} instances ({len(tables):,} listed)", "instances")
        instances: list[FleetInstance] = []
        seen: dict[str, int] = {}
        for index, table in enumerate(tables):
            instance = self._instance(index, table, default_token, default_ca, timeout)
            if instance.name in seen:
                raise self._error(f"the same name as instances[{seen[instance.name]}]", f"instances[{index}].name")
            seen[instance.name] = index
            instances.append(instance)
        return FleetFile(tuple(instances))

    def _known(self, table: dict[str, Any], fields: frozenset[str], where: str | None) -> None:
        for name in sorted(table):
            if name not in fields:
                label = field_label(name)
                raise self._error(
                    f"unknown field (known: {', '.join(sorted(fields))})", f"{where}.{label}" if where else label
                )

    def _instance(
        self,
        index: int,
        table: dict[str, Any],
        default_token: AdminTokenSource | None,
        default_ca: str | None,
        timeout: float,
    ) -> FleetInstance:
        where = f"instances[{index}]"
        self._known(table, _INSTANCE_FIELDS, where)
        for name in ("name", "url"):
            if name not in table:
                raise self._error("missing", f"{where}.{name}")
        problem = check_instance_name(table["name"])
        if problem is not None:
            raise self._error(problem, f"{where}.name")
        problem = check_admin_url(table["url"])
        if problem is not None:
            raise self._error(problem, f"{where}.url")
        token = self._token(table, where) or default_token
        if token is None:
            raise self._error("no admin token: set admin_token_env or admin_token_file here or in [defaults]", where)
        ca_file = self._path_field(table, "ca_file", where) or default_ca
        return FleetInstance(table["name"], table["url"], token, ca_file, timeout)

    def _token(self, table: dict[str, Any], where: str) -> AdminTokenSource | None:
        present = [name for name in _TOKEN_FIELDS if name in table]
        if len(present) > 1:
            raise self._error("takes only one of admin_token_env and admin_token_file", where)
        if not present:
            return None
        if present[0] == "admin_token_env":
            value = table["admin_token_env"]
            if not is_environment_name(value):
                raise self._error("must be an environment variable name", f"{where}.admin_token_env")
            return AdminTokenEnv(value)
        path = self._path_field(table, "admin_token_file", where)
        assert path is not None
        return AdminTokenFile(path)

    def _path_field(self, table: dict[str, Any], name: str, where: str) -> str | None:
        if name not in table:
            return None
        value = table[name]
        if (
            not isinstance(value, str)
            or not value
            or len(value.encode("utf-8", "surrogatepass")) > _MAX_PATH_BYTES
            or _CONTROL.search(value)
        ):
            raise self._error(f"must be a file name of 1 to {_MAX_PATH_BYTES:,} bytes", f"{where}.{name}")
        if self._base_dir is not None and not os.path.isabs(value):
            return os.fspath(self._base_dir / value)
        return value

    def _timeout(self, defaults: dict[str, Any]) -> float:
        if "timeout" not in defaults:
            return DEFAULT_FLEET_TIMEOUT_SECONDS
        value = defaults["timeout"]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            # A chained comparison: NaN fails it and a huge integer is never turned into a float.
            or not 0 < value <= MAX_FLEET_TIMEOUT_SECONDS
        ):
            raise self._error(
                f"must be a number of seconds above 0 and at most {MAX_FLEET_TIMEOUT_SECONDS:g}", "defaults.timeout"
            )
        return float(value)


# Linux's PATH_MAX, as for every FILE soklet takes.
_MAX_PATH_BYTES: Final = 4_096
# C0, DEL and C1 controls: never part of a path soklet accepts.
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
