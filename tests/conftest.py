"""Fixtures shared by the keys, files and CLI tests: a real ``soklet`` subprocess runner that scans every output
for leaked key material; and the durable stores' URLs: a throwaway PostgreSQL cluster for the whole run (a fresh
database per test) and a fresh SQLite file per test, with ``store_url`` running a test once on each."""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from soklet_core.files import MAX_KEYRING_FILE_BYTES, MAX_MATERIAL_FILE_BYTES, KeyringFileError, read_regular_file
from soklet_core.keys import ProtectionKey, decode_base64url
from soklet_core.store import sqlite_url
from tools.postgres import PostgresCluster


@pytest.fixture(autouse=True, scope="session")
def _run_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every soklet the tests start (in process or as a subprocess) keeps its default store in a folder of this
    run, never in the user's data folder: a store left there by another build must not decide a test."""
    folder = tmp_path_factory.mktemp("soklet-data")
    folder.chmod(0o700)
    previous = os.environ.get("SOKLET_DATA_DIR")
    os.environ["SOKLET_DATA_DIR"] = str(folder)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("SOKLET_DATA_DIR", None)
        else:
            os.environ["SOKLET_DATA_DIR"] = previous


#: A leaked fragment this long of a key's base64url text fails the scan (a chance match is ~64**-16).
FRAGMENT_CHARS = 16


def secret_forms(material: bytes) -> set[str]:
    """Every text form of ``material`` a leak could take: base64url, padded base64, hex, and 16-char fragments."""
    url = base64.urlsafe_b64encode(material).rstrip(b"=").decode()
    std = base64.b64encode(material).decode()
    forms = {url, std, std.rstrip("="), material.hex(), material.hex().upper()}
    forms.update(url[start : start + FRAGMENT_CHARS] for start in range(len(url) - FRAGMENT_CHARS + 1))
    forms.update(std[start : start + FRAGMENT_CHARS] for start in range(len(std) - FRAGMENT_CHARS + 1))
    return forms


def materials_in(folder: Path) -> set[bytes]:
    """The material of every key in every keyring TOML file under ``folder`` (inline or via material_file).

    Files are read as soklet reads them (regular files only, never blocking on a FIFO, size-bounded); what is not
    a readable keyring (a FIFO named ``*.toml``, nesting deep enough for tomllib's RecursionError, a huge number
    its ValueError) is skipped.
    """
    found: set[bytes] = set()
    for path in folder.rglob("*.toml"):
        try:
            data = tomllib.loads(read_regular_file(path, limit=MAX_KEYRING_FILE_BYTES).decode())
        except (KeyringFileError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError, ValueError):
            continue
        for table in data.get("keys", []) if isinstance(data.get("keys"), list) else []:
            if not isinstance(table, dict):
                continue
            text = table.get("material")
            if isinstance(table.get("material_file"), str):
                try:
                    raw = read_regular_file(path.parent / table["material_file"], limit=MAX_MATERIAL_FILE_BYTES)
                    text = raw.decode().strip()
                except (KeyringFileError, UnicodeDecodeError, ValueError):
                    text = None
            if isinstance(text, str):
                try:
                    found.add(decode_base64url(text))
                except ValueError:
                    continue
    return found


@dataclass
class Result:
    """One finished ``soklet`` process."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """stdout and stderr together."""
        return self.stdout + self.stderr


@dataclass(frozen=True)
class Call:
    """One command for :meth:`Soklet.run_together`: arguments, standard input, extra environment."""

    args: tuple[str, ...]
    input: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Soklet:
    """Runs ``python -m soklet_cli`` in ``cwd`` and checks that no output ever carries key material.

    Material is learnt from every keyring file under ``cwd`` after each run and from :meth:`remember`; every
    output seen so far is rescanned whenever a new secret is learnt. Only ``keys export`` may print material.
    """

    cwd: Path
    env: dict[str, str]
    secrets: set[bytes] = field(default_factory=set)
    results: list[Result] = field(default_factory=list)

    def remember(self, material: bytes | ProtectionKey) -> None:
        """Treat ``material`` as secret from now on (and for everything already printed)."""
        self.secrets.add(material.material if isinstance(material, ProtectionKey) else bytes(material))
        self.assert_no_leak()

    def run(
        self, *args: str, input: str | None = None, env: Mapping[str, str] | None = None, timeout: float = 60
    ) -> Result:
        """Run ``soklet ARGS``; returns its result (never raises on a non-zero exit)."""
        completed = subprocess.run(
            [sys.executable, "-m", "soklet_cli", *args],
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        result = Result(tuple(args), completed.returncode, completed.stdout, completed.stderr)
        self.results.append(result)
        self.secrets |= materials_in(self.cwd)
        self.assert_no_leak()
        return result

    @staticmethod
    def call(*args: str, input: str | None = None, env: Mapping[str, str] | None = None) -> Call:
        """A command for :meth:`run_together` that needs standard input or extra environment."""
        return Call(tuple(args), input, dict(env or {}))

    def run_together(self, *calls: tuple[str, ...] | Call, timeout: float = 120) -> list[Result]:
        """Start every call at once (each a tuple of arguments or a :class:`Call`), wait for all, and return
        their results in order. Use it for runs that do not depend on each other: they share the CPUs."""
        prepared = [call if isinstance(call, Call) else Call(tuple(call)) for call in calls]
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "soklet_cli", *call.args],
                cwd=self.cwd,
                env={**self.env, **call.env},
                stdin=subprocess.PIPE if call.input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for call in prepared
        ]
        results = []
        for call, process in zip(prepared, processes, strict=True):
            stdout, stderr = process.communicate(call.input, timeout=timeout)
            results.append(Result(call.args, process.returncode, stdout, stderr))
        self.results.extend(results)
        self.secrets |= materials_in(self.cwd)
        self.assert_no_leak()
        return results

    def assert_no_leak(self) -> None:
        """Fail if any output (``keys export`` stdout aside) holds any form of any known secret."""
        forms = set().union(*(secret_forms(material) for material in self.secrets)) if self.secrets else set()
        for result in self.results:
            exported = len(result.args) >= 2 and result.args[0] == "keys" and result.args[1] == "export"
            texts = [result.stderr] if exported else [result.stdout, result.stderr]
            for text in texts:
                leaked = [form for form in forms if form in text]
                assert not leaked, f"key material leaked by soklet {' '.join(result.args)}"


@pytest.fixture
def soklet(tmp_path: Path) -> Iterator[Soklet]:
    """A ``soklet`` runner in a fresh folder, with ``$SOKLET_KEYRING`` unset and a wide terminal."""
    # Bytecode caches are allowed: each run would otherwise compile soklet's modules again.
    dropped = {"SOKLET_KEYRING", "PYTHONDONTWRITEBYTECODE"}
    env = {name: value for name, value in os.environ.items() if name not in dropped}
    env.update(COLUMNS="200", NO_COLOR="1")
    runner = Soklet(tmp_path, env)
    yield runner
    runner.secrets |= materials_in(tmp_path)
    runner.assert_no_leak()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """One throwaway PostgreSQL cluster for the whole run (``bash scripts/postgres`` installs its binaries)."""
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database (dropped after the test); it carries a password."""
    name = f"t_{secrets.token_hex(8)}"
    url = postgres_cluster.create_database(name)
    yield url
    postgres_cluster.drop_database(name)


@pytest.fixture
def sqlite_store_url(tmp_path: Path) -> str:
    """The URL of a fresh SQLite store file (its folder is not made yet: the store makes it 0700)."""
    return sqlite_url(tmp_path / "store" / "soklet.db").text


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A fresh store's URL, once for each backend: the test runs against SQLite and against PostgreSQL."""
    name = "sqlite_store_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(name)
    return url
