"""``soklet serve --app module:object`` as a real subprocess over real module files in the folder it runs in: the
current folder is importable, every failure is one sentence naming the module (exit 1 or 2, never 70 or a
traceback), the demo's example is printed only for the demo, and the banner names the protocol served."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from soklet_cli.serve import EXAMPLE_START, EXAMPLE_TOOL

pytestmark = pytest.mark.slow

#: Generous: a refusal comes before anything listens, in well under a second on an idle machine.
PROMPT = 60.0
#: Text an app's exception carries: it may be anything the app knows, so no message may repeat it.
SECRET = "postgresql://app:hunter2@db/prod"

APP = """
from soklet_core.json import JsonObject
from soklet_core.mcp import CallToolResult, Registry, RequestContext, tool


@tool(name="hello", description="Says hello.", input_schema={"type": "object"})
def hello(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    return CallToolResult.from_text("hello")
"""


def _command(*arguments: str) -> list[str]:
    # -P: like the installed ``soklet`` script, the current folder is not put on sys.path by Python itself
    # (``python -m`` alone would put it there and hide the bug).
    return [sys.executable, "-P", "-m", "soklet_cli", "serve", "--port", "0", *arguments]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    # soklet itself must stay importable without PYTHONPATH: the repository root is where the tests run from.
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def _write(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(APP) + textwrap.dedent(body))


def _refused(folder: Path, reference: str) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        _command("--app", reference), cwd=folder, env=_env(), capture_output=True, text=True, timeout=PROMPT
    )
    assert "Traceback" not in run.stderr
    assert SECRET not in run.stderr + run.stdout
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    return run


def test_a_factory_that_raises_exits_1_naming_the_module(tmp_path: Path) -> None:
    _write(tmp_path, "raising_app", f"\ndef build() -> Registry:\n    raise RuntimeError({SECRET!r})\n")
    run = _refused(tmp_path, "raising_app:build")
    assert run.returncode == 1, run.stderr
    assert "raising_app" in run.stderr
    assert "raised RuntimeError" in run.stderr


def test_a_factory_that_needs_arguments_exits_2(tmp_path: Path) -> None:
    factory = "\ndef build(database_url: str, *, pool: int = 4) -> Registry:\n    return Registry(hello)\n"
    _write(tmp_path, "needy_app", factory)
    run = _refused(tmp_path, "needy_app:build")
    assert run.returncode == 2, run.stderr
    assert "needy_app" in run.stderr
    assert "needs arguments (database_url)" in run.stderr


def test_a_module_that_raises_on_import_exits_1(tmp_path: Path) -> None:
    _write(tmp_path, "broken_app", f"\nraise KeyError({SECRET!r})\n")
    run = _refused(tmp_path, "broken_app:registry")
    assert run.returncode == 1, run.stderr
    assert "importing module broken_app raised KeyError" in run.stderr


def test_a_missing_module_or_object_exits_2(tmp_path: Path) -> None:
    _write(tmp_path, "plain_app", "\nregistry = Registry(hello)\nnumber = 3\n")
    for reference, words in (
        ("no_such_app:registry", "no module named no_such_app"),
        ("plain_app:missing", "module plain_app has no attribute missing"),
        ("plain_app:number", "not a Registry"),
    ):
        run = _refused(tmp_path, reference)
        assert run.returncode == 2, (reference, run.stderr)
        assert words in run.stderr, run.stderr


def test_a_module_of_the_current_folder_is_served_without_the_demo_example(tmp_path: Path) -> None:
    _write(tmp_path, "local_app", "\ndef registry() -> Registry:\n    return Registry(hello)\n")
    process = subprocess.Popen(
        _command("--app", "local_app:registry"),
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("inspect a token:"):
                break
        process.send_signal(signal.SIGTERM)
        rest, errors = process.communicate(timeout=PROMPT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    banner = "".join(lines) + rest
    assert process.returncode == 0, errors
    assert banner.startswith("soklet serve: MCP 2026-07-28 at http://127.0.0.1:"), banner
    assert EXAMPLE_START not in banner
    assert EXAMPLE_TOOL not in banner


def test_json_facts_carry_no_example_for_an_app(tmp_path: Path) -> None:
    _write(tmp_path, "json_app", "\nregistry = Registry(hello)\n")
    process = subprocess.Popen(
        _command("--app", "json_app:registry", "--json"),
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        facts = json.loads(process.stdout.readline())
        assert facts["example"] == []
        process.send_signal(signal.SIGTERM)
        assert process.wait(PROMPT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_legacy_banner_names_the_2025_version_it_serves(tmp_path: Path) -> None:
    process = subprocess.Popen(
        _command("--protocol", "legacy"),
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        headline = process.stdout.readline()
        protocol = process.stdout.readline()
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=PROMPT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert headline.startswith("soklet serve: MCP 2025-11-25 at http://127.0.0.1:"), headline
    assert "2026-07-28" not in headline + protocol
