"""The first hour on a fresh clone, README in hand: the two commands read relative paths from the caller's folder,
the walkthrough runs as written, keyrings cannot be committed by accident, and the licence and the completion and
man-page install steps are there. Everything runs for real: `bash scripts/run` serves on loopback, the README's
blocks run in bash, git answers the ignore questions."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
README = ROOT / "README.md"
#: sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the canonical Apache License 2.0 text.
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
#: Bound on `bash scripts/run` printing its start facts (it may first refresh .venv).
SERVE_START_TIMEOUT = 120

# What runs the scripts or the walkthrough is marked slow; the checks of files stay in the quick selection
# (docs/testing.md).


def section(title: str) -> str:
    """The README text under the `## title` heading, up to the next `## ` heading."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def path_without_soklet() -> str:
    """The caller's PATH minus every folder holding a `soklet`, as on a fresh clone before any set-up."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if f and not (Path(f) / "soklet").exists())


@pytest.fixture
def served_by_scripts_run(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, object]]]:
    soklet = str(VENV_BIN / "soklet")
    subprocess.run(
        [soklet, "keys", "generate", "--id", "first-hour", "--keyring", "soklet-keyring.toml"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=60,
    )
    process = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "run"), "--keyring", "soklet-keyring.toml", "--port", "0", "--json"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout = process.stdout
        assert stdout is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(SERVE_START_TIMEOUT)
        if reader.is_alive():
            process.kill()  # closes its stdout, which ends the blocked readline
            reader.join(30)
        first = lines[0] if lines else ""
        if not first.startswith("{"):
            process.kill()
            _, err = process.communicate(timeout=30)
            pytest.fail(f"bash scripts/run printed no start facts (exit {process.returncode}):\n{first}{err[-3000:]}")
        yield process, json.loads(first)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(15)


@pytest.mark.slow
def test_scripts_run_reads_a_relative_keyring_from_the_callers_folder(
    served_by_scripts_run: tuple[subprocess.Popen[str], dict[str, object]], tmp_path: Path
) -> None:
    process, facts = served_by_scripts_run
    assert facts["development_key"] is False
    expected = subprocess.run(
        [str(VENV_BIN / "soklet"), "fingerprint", "--json", "--keyring", "soklet-keyring.toml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert facts["fingerprint"] == json.loads(expected.stdout)
    # The server answers one real request on the printed URL.
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }}}).encode()  # fmt: skip
    request = urllib.request.Request(
        str(facts["url"]),
        data=body,
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/list",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        tools = [tool["name"] for tool in json.loads(response.read())["result"]["tools"]]
    assert "catalog.continue" in tools
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0


@pytest.mark.slow
def test_scripts_test_reads_pytest_arguments_from_the_callers_folder(tmp_path: Path) -> None:
    (tmp_path / "test_in_the_callers_folder.py").write_text("def test_found() -> None:\n    pass\n")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "test"), "test_in_the_callers_folder.py"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout


def test_readme_keeps_exactly_two_commands() -> None:
    assert [block.strip() for block in sh_blocks(section("Two commands"))] == ["bash scripts/run", "bash scripts/test"]


@pytest.mark.slow
def test_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """The first-key-to-rotation block, verbatim, in a folder where `.venv` is the project's, soklet not on PATH."""
    (block,) = sh_blocks(section("First key to rotation"))
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    env = {**os.environ, "PATH": path_without_soklet()}
    env.pop("VIRTUAL_ENV", None)
    env.pop("SOKLET_KEYRING", None)
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    written = sorted(p.name for p in tmp_path.iterdir() if p.name != ".venv")
    assert {"instance-a.toml", "instance-b.toml"} <= set(written)
    # Everything the walkthrough leaves in the repository folder is ignored by git there.
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *written], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert sorted(ignored.stdout.split()) == written


@pytest.mark.parametrize(
    "name", ["soklet-keyring.toml", "dev-keyring.toml", "instance-a.toml", "a.toml.lock", ".soklet-tmp-x1.tmp"]
)
def test_keyring_files_are_ignored_by_git(name: str) -> None:
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", name], cwd=ROOT, check=False)
    assert done.returncode == 0, f"{name} is not in .gitignore"


def test_pyproject_is_not_ignored_by_git() -> None:
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", "pyproject.toml"], cwd=ROOT, check=False)
    assert done.returncode == 1


def test_license_is_the_apache_2_text_pyproject_names() -> None:
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"


@pytest.mark.slow
def test_readme_completion_and_man_page_steps_install(tmp_path: Path) -> None:
    """The README's install block, run with a throw-away HOME (the zsh line names a placeholder path: checked apart)."""
    (block,) = sh_blocks(section("The commands"))
    zsh = [line for line in block.splitlines() if line.startswith("source ")]
    assert zsh == ["source /path/to/soklet/completions/_soklet"]
    assert (ROOT / "completions" / "_soklet").is_file()
    if shutil.which("man") is None:
        pytest.skip("no man on this machine")
    runnable = "\n".join(line for line in block.splitlines() if not line.startswith("source "))
    env = {**os.environ, "HOME": str(tmp_path), "MANPAGER": "cat", "PAGER": "cat"}
    env.pop("MANPATH", None)
    done = subprocess.run(
        ["bash", "-e", "-c", runnable + '\nman -w soklet-keys\nsource "$HOME"/.local/share/bash-completion/'
         "completions/soklet\ncomplete -p soklet"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{tmp_path}/.local/share/man/man1/soklet-keys.1" in done.stdout
    assert "complete -o default -F _soklet_completion soklet" in done.stdout
    assert (tmp_path / ".config" / "fish" / "completions" / "soklet.fish").is_file()
    assert "SOKLET-KEYS(1)" in done.stdout
