"""A throwaway PostgreSQL cluster for the tests and benchmarks: ``initdb`` into a private folder, one server on
127.0.0.1 at a free port, stopped and deleted at the end.

    with PostgresCluster() as cluster:
        url = cluster.create_database("case_1")   # postgresql://soklet:<password>@127.0.0.1:<port>/case_1

The server binaries are found on PATH, else in /usr/lib/postgresql/<version>/bin (newest first); without them the
cluster refuses to start and names ``bash scripts/postgres``, which installs them (never a silent skip). The user
``soklet`` has a random password (SCRAM-SHA-256 authentication, also over the unix socket, which lives inside the
private data folder). PostgreSQL refuses to run as root, so as root every server binary runs as the ``postgres`` OS
user (``runuser -u postgres --``) and the folder is given to it. A run killed before it could stop its cluster
leaves it behind; the next cluster started on the machine stops and deletes it (its owner process is gone).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Final

__all__ = ["POSTGRES_USER", "PostgresCluster", "PostgresMissing", "find_postgres_bin"]

#: The database user (the cluster's superuser) and its first database.
POSTGRES_USER: Final = "soklet"
#: How long ``pg_ctl`` waits for the server to start or stop.
START_TIMEOUT_SECONDS: Final = 60
#: The OS user the server runs as when the tests run as root.
_SERVER_OS_USER: Final = "postgres"
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
_FOLDER_PREFIX: Final = "soklet-pg-"
_OWNER_FILE: Final = "owner.pid"
_INSTALL_HINT: Final = "run `bash scripts/postgres` (it installs PostgreSQL's server binaries), then try again"
#: Where util-linux puts runuser when the PATH has no sbin folder (a root shell's PATH usually has one; not every).
_RUNUSER_FOLDERS: Final = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries (initdb, pg_ctl) on this machine, or, as root, no runuser to start them."""


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in path.name.split(".") if part.isdigit())


def find_postgres_bin(root: Path = Path("/usr/lib/postgresql")) -> Path:
    """The folder holding ``initdb`` and ``pg_ctl``: from PATH, else the newest ``root``/*/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted((path for path in root.glob("*") if path.name[:1].isdigit()), key=_version_key, reverse=True)
    for version in versions:
        folder = version / "bin"
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise PostgresMissing(f"no PostgreSQL server binaries (initdb, pg_ctl) were found; {_INSTALL_HINT}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _check_name(name: str) -> None:
    if not 1 <= len(name) <= 63 or not set(name) <= _NAME_CHARS or name[0].isdigit():
        raise ValueError("a database name here is 1 to 63 of a-z, 0-9 and _, not starting with a digit")


def _runuser() -> str:
    """The ``runuser`` program that starts the server binaries as the ``postgres`` user when the tests run as root."""
    found = shutil.which("runuser") or next(
        (str(Path(folder) / "runuser") for folder in _RUNUSER_FOLDERS if (Path(folder) / "runuser").is_file()), None
    )
    if found is None:
        raise PostgresMissing("running as root needs util-linux's runuser to start PostgreSQL as its own user")
    return found


class PostgresCluster:
    """One private PostgreSQL server for a test run; a context manager (``stop()`` on exit)."""

    def __init__(self) -> None:
        self._bin = find_postgres_bin()
        self._password = secrets.token_urlsafe(24)
        self._base: Path | None = None
        self._running = False
        self.port = 0

    @property
    def folder(self) -> Path | None:
        """The private folder holding the cluster's data (``None`` when stopped)."""
        return self._base

    def __repr__(self) -> str:
        return f"PostgresCluster(port={self.port}, running={self._running})"

    @property
    def url(self) -> str:
        """The URL of the ``soklet`` database (it carries the password: never print it)."""
        return self.url_of(POSTGRES_USER)

    def url_of(self, database: str) -> str:
        """The URL of ``database`` on this cluster."""
        _check_name(database)
        return f"postgresql://{POSTGRES_USER}:{self._password}@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> PostgresCluster:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def _command(self, name: str, *args: str) -> list[str]:
        command = [str(self._bin / name), *args]
        if os.geteuid() == 0:
            return [_runuser(), "-u", _SERVER_OS_USER, "--", *command]
        return command

    def _run(self, name: str, *args: str) -> None:
        completed = subprocess.run(
            self._command(name, *args),
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_SECONDS + 30,
            check=False,
        )
        if completed.returncode != 0:
            log = self._log_tail()
            raise RuntimeError(f"{name} failed ({completed.returncode}): {completed.stderr.strip()}{log}")

    def _log_tail(self) -> str:
        if self._base is None:
            return ""
        with contextlib.suppress(OSError):
            lines = (self._base / "postgres.log").read_text(encoding="utf-8", errors="replace").splitlines()
            return "\nserver log:\n" + "\n".join(lines[-20:])
        return ""

    def start(self) -> None:
        """initdb into a fresh private folder, start the server, create the ``soklet`` database."""
        if self._running:
            return
        self._reap_orphans()
        base = Path(tempfile.mkdtemp(prefix=_FOLDER_PREFIX))  # 0700
        self._base = base
        try:
            # Who owns the cluster: a later run stops it if this process died without stopping it (a killed run).
            (base / _OWNER_FILE).write_text(str(os.getpid()), encoding="ascii")
            data = base / "data"
            password_file = base / "password"
            descriptor = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(self._password + "\n")
            if os.geteuid() == 0:
                server_user = pwd.getpwnam(_SERVER_OS_USER)
                for path in (base, password_file):
                    os.chown(path, server_user.pw_uid, server_user.pw_gid)
            self._run(
                "initdb",
                "-D",
                str(data),
                "-U",
                POSTGRES_USER,
                "-A",
                "scram-sha-256",
                f"--pwfile={password_file}",
                "-E",
                "UTF8",
                "--no-sync",
            )
            password_file.unlink()
            for attempt in range(3):
                self.port = _free_port()
                options = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={data}"
                try:
                    self._run(
                        "pg_ctl",
                        "start",
                        "-D",
                        str(data),
                        "-l",
                        str(base / "postgres.log"),
                        "-w",
                        "-t",
                        str(START_TIMEOUT_SECONDS),
                        "-o",
                        options,
                    )
                    break
                except RuntimeError:
                    # Another process may have taken the free port between the probe and the start.
                    if attempt == 2:
                        raise
            self._running = True
            self._create(POSTGRES_USER)
        except BaseException:
            self.stop()
            raise

    def _reap_orphans(self) -> None:
        """Stop and delete the clusters of earlier runs whose process is gone (killed before it could stop them)."""
        for folder in Path(tempfile.gettempdir()).glob(f"{_FOLDER_PREFIX}*"):
            try:
                owner = int((folder / _OWNER_FILE).read_text(encoding="ascii"))
            except (OSError, ValueError):
                continue  # not one of ours, or still being made
            if _alive(owner):
                continue
            if (folder / "data" / "postmaster.pid").exists():
                with contextlib.suppress(subprocess.SubprocessError, OSError):
                    subprocess.run(
                        self._command("pg_ctl", "stop", "-D", str(folder / "data"), "-m", "immediate", "-w"),
                        capture_output=True,
                        timeout=START_TIMEOUT_SECONDS,
                        check=False,
                    )
            shutil.rmtree(folder, ignore_errors=True)

    def _create(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url_of("postgres"), autocommit=True, connect_timeout=10) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')  # the name was checked: a-z, 0-9, _ only

    def create_database(self, name: str) -> str:
        """Create the empty database ``name``; its URL."""
        _check_name(name)
        if not self._running:
            raise RuntimeError("the cluster is not running")
        self._create(name)
        return self.url_of(name)

    def drop_database(self, name: str) -> None:
        """Drop the database ``name``, closing any connection still open to it."""
        _check_name(name)
        if not self._running:
            return
        import psycopg

        with psycopg.connect(self.url_of("postgres"), autocommit=True, connect_timeout=10) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # the name was checked

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its folder."""
        base, self._base = self._base, None
        if base is None:
            return
        try:
            if self._running:
                self._running = False
                with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                    self._base = base
                    self._run("pg_ctl", "stop", "-D", str(base / "data"), "-m", "fast", "-w")
        finally:
            self._base = None
            shutil.rmtree(base, ignore_errors=True)
