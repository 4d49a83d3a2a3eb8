"""What a ``soklet`` call imports before it does anything: only what the command needs.

Each case runs the real command in a fresh interpreter (the console script's ``main``) and reads the modules it
had loaded at exit. ``soklet --version`` needs no Typer and no command; ``keys list`` and ``fingerprint`` read a
keyring file, with no server, store backend, HTTP client or pydantic (Typer's value coercion), nor the JSON codec,
the sealer or a KEK loader; the completion callback lists the keys group's commands the same way. Nothing here
measures time: the CPU each call costs is benchmarks/cli_startup.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Runs soklet's entry point as the console script does, then writes sys.modules to the file named in argv[1].
_RUNNER = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w", encoding="utf-8").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "soklet"
from soklet_cli.app import main
main()
"""

#: What no keyring command and no completion may load: the server (and the model it serves), a store backend,
#: the fleet's HTTP client, the ASGI stack, pydantic (Typer 0.29 builds an adapter per value unless spared).
NEVER_FOR_KEYRING_COMMANDS = (
    "soklet_core.mcp",
    "soklet_core.fleet.client",
    "soklet_core.store.sqlite",
    "soklet_core.store.postgres",
    "soklet_core.store.records",
    "soklet_core.store.repository",
    "soklet_cli.serve",
    "soklet_cli.fleet",
    "soklet_cli.tasks",
    "httpx",
    "uvicorn",
    "starlette",
    "pydantic",
    "typer._adapters",
)

#: Nor what reading a keyring file does not need, though the modules every command shares once imported it: the
#: JSON codec and canonical form (msgspec; ``keys list --json`` writes plain data), the sealer, its diagnosis (the
#: default lifetime is spelled by a leaf), the request binding, the envelope's key derivation, and what loads a KEK
#: or a fleet file (imported when an option names one).
NOT_FOR_READING_A_KEYRING = (
    "msgspec",
    "soklet_core.json.codec",
    "soklet_core.json.canonical",
    "soklet_core.json.digest",
    "soklet_core.protection.diagnosis",
    "soklet_core.protection.sealer",
    "soklet_core.protection.envelope",
    "soklet_core.protection.binding",
    "soklet_core.files.kek_source",
    "soklet_core.files.fleet_file",
    "soklet_core.keys.kek_command",
    "cryptography.hazmat.primitives.kdf",
)

#: Besides those, what ``soklet --version`` may not load: the CLI's libraries and any command.
NEVER_FOR_VERSION = (*NEVER_FOR_KEYRING_COMMANDS, "typer", "rich", "soklet_cli.commands", "soklet_cli.output")


def _loaded(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    listing = tmp_path / "modules.json"
    listing.unlink(missing_ok=True)
    result = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(listing), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "100", **(env or {})},
        check=False,
    )
    return result, set(json.loads(listing.read_text(encoding="utf-8")))


def _offending(modules: set[str], never: tuple[str, ...]) -> list[str]:
    return sorted(name for name in modules if any(name == top or name.startswith(top + ".") for top in never))


@pytest.fixture(scope="module")
def keyring(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real keyring file, written by ``soklet keys generate``."""
    path = tmp_path_factory.mktemp("keyring") / "keyring.toml"
    subprocess.run(
        [sys.executable, "-m", "soklet_cli", "keys", "generate", "--id", "2026-08", "--keyring", str(path)],
        capture_output=True,
        timeout=120,
        check=True,
    )
    return path


def test_version_imports_no_command_and_no_typer(tmp_path: Path) -> None:
    result, modules = _loaded(tmp_path, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("soklet ")
    assert _offending(modules, NEVER_FOR_VERSION) == []


def test_keys_list_imports_no_server_store_or_http_client(tmp_path: Path, keyring: Path) -> None:
    result, modules = _loaded(tmp_path, "keys", "list", "--keyring", str(keyring))
    assert result.returncode == 0, result.stderr
    assert "2026-08" in result.stdout
    assert _offending(modules, NEVER_FOR_KEYRING_COMMANDS) == []
    assert _offending(modules, NOT_FOR_READING_A_KEYRING) == []
    # Of the store, only the URL type its --store option is typed with (and the errors that URL raises).
    assert {name for name in modules if name.startswith("soklet_core.store")} <= {
        "soklet_core.store",
        "soklet_core.store.url",
        "soklet_core.store.errors",
    }


def test_keys_list_json_imports_no_server_store_or_http_client(tmp_path: Path, keyring: Path) -> None:
    result, modules = _loaded(tmp_path, "keys", "list", "--keyring", str(keyring), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)
    assert _offending(modules, NEVER_FOR_KEYRING_COMMANDS) == []
    assert _offending(modules, NOT_FOR_READING_A_KEYRING) == []
    # Only the human table needs rich's table layout.
    assert "rich.table" not in modules


def test_fingerprint_imports_no_server_store_or_http_client(tmp_path: Path, keyring: Path) -> None:
    result, modules = _loaded(tmp_path, "fingerprint", "--keyring", str(keyring))
    assert result.returncode == 0, result.stderr
    assert "soklet-mcp-protection-v1" in result.stdout
    assert _offending(modules, NEVER_FOR_KEYRING_COMMANDS) == []
    assert _offending(modules, NOT_FOR_READING_A_KEYRING) == []


def test_completion_of_a_group_imports_only_that_group(tmp_path: Path) -> None:
    # What bash's completion function runs on "soklet keys <TAB>" (completions/soklet.bash).
    completion = {"_SOKLET_COMPLETE": "complete_bash", "COMP_WORDS": "soklet keys ", "COMP_CWORD": "2"}
    result, modules = _loaded(tmp_path, env=completion)
    assert result.returncode == 0, result.stderr
    assert {"list", "generate", "rotate", "encrypt"} <= set(result.stdout.split())
    assert _offending(modules, NEVER_FOR_KEYRING_COMMANDS) == []
    assert _offending(modules, NOT_FOR_READING_A_KEYRING) == []
    assert "rich.table" not in modules
