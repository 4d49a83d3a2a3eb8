"""Shell completions and man pages: generated from the Typer app, and the committed copies must be current."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ("completions", "man")
#: What `bash scripts/gen-docs` runs, with this python (the project's .venv one).
GENERATOR = ROOT / "tools" / "gen_docs.py"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("generated")
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(out)], check=True, capture_output=True)
    return out


def test_committed_completions_and_man_pages_are_current(fresh: Path) -> None:
    for folder in GENERATED:
        want = sorted(path.name for path in (fresh / folder).iterdir())
        have = sorted(path.name for path in (ROOT / folder).iterdir() if not path.name.startswith("."))
        assert have == want, f"{folder}/ differs from a fresh generation: run bash scripts/gen-docs"
        for name in want:
            assert (ROOT / folder / name).read_text() == (fresh / folder / name).read_text(), (
                f"{folder}/{name} is stale: run bash scripts/gen-docs"
            )


def test_generation_is_deterministic(fresh: Path, tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "33", "SOKLET_KEYRING": "/elsewhere.toml", "TZ": "Pacific/Kiritimati"}
    subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(tmp_path)],
        check=True,
        env=env,
        capture_output=True,
    )
    for folder in GENERATED:
        for path in (fresh / folder).iterdir():
            assert (tmp_path / folder / path.name).read_bytes() == path.read_bytes()


@pytest.mark.slow
def test_check_mode_reports_a_stale_file(fresh: Path, tmp_path: Path) -> None:
    for folder in GENERATED:
        shutil.copytree(fresh / folder, tmp_path / folder)
    command = [sys.executable, str(GENERATOR), "--check", "--out", str(tmp_path)]
    assert subprocess.run(command, capture_output=True, check=False).returncode == 0
    page = tmp_path / "man" / "soklet-keys.1"
    page.write_text(page.read_text().replace("keys rotate", "keys spin"))
    stale = subprocess.run(command, capture_output=True, text=True, check=False)
    assert stale.returncode == 1
    assert "man/soklet-keys.1" in stale.stderr


def test_man_pages_cover_every_command(fresh: Path) -> None:
    root = (fresh / "man" / "soklet.1").read_text()
    for command in ("canonicalize", "fingerprint", "keys"):
        assert f"soklet\\-{command}\\fR(1)" in root
        assert (fresh / "man" / f"soklet-{command}.1").is_file()
    keys = (fresh / "man" / "soklet-keys.1").read_text()
    for sub in ("generate", "list", "stage", "activate", "remove", "rotate", "export"):
        assert f'.SS "soklet keys {sub}"' in keys
    assert "Exit codes" in keys
    assert ".SH EXIT STATUS" in keys


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_man_pages_render_without_warnings(fresh: Path) -> None:
    pages = sorted(str(path) for path in (fresh / "man").iterdir())
    result = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-z", *pages], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stderr == ""


def test_completion_scripts_call_back_into_soklet(fresh: Path) -> None:
    assert "_SOKLET_COMPLETE=complete_bash" in (fresh / "completions" / "soklet.bash").read_text()
    assert (fresh / "completions" / "_soklet").read_text().startswith("#compdef soklet\n")
    env = {**os.environ, "_SOKLET_COMPLETE": "complete_bash", "COMP_WORDS": "soklet keys ", "COMP_CWORD": "2"}
    result = subprocess.run([sys.executable, "-m", "soklet_cli"], env=env, capture_output=True, text=True, check=False)
    candidates = set(result.stdout.split())
    assert {"generate", "list", "stage", "activate", "remove", "rotate", "export"} <= candidates


@pytest.mark.slow
def test_the_script_runs_the_generator(tmp_path: Path) -> None:
    # `bash scripts/gen-docs` hands its arguments and the exit code through, and reads --out from the caller's folder.
    script = ROOT / "scripts" / "gen-docs"
    done = subprocess.run(
        ["bash", str(script), "--out", "here"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "here" / "man" / "soklet.1").is_file()
    stale = subprocess.run(
        ["bash", str(script), "--check", "--out", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert stale.returncode == 1
    assert "stale: man/soklet.1 (run bash scripts/gen-docs)" in stale.stderr
