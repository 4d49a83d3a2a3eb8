"""A command that writes a secret file inside a git work tree that does not ignore it warns, in one sentence;
ignored, outside a work tree, or without git, it says nothing. Real ``git init`` work trees, the real CLI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from soklet_core.files import unignored_secret
from tests.conftest import Soklet

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

WARNING = "holds secrets and is inside the git work tree"


def _git_init(folder: Path) -> None:
    subprocess.run(["git", "init", "-q", str(folder)], check=True, capture_output=True, timeout=60)


def test_the_core_answers_from_git(tmp_path: Path) -> None:
    tree = tmp_path / "repo"
    (tree / "deep" / "er").mkdir(parents=True)
    _git_init(tree)
    secret = tree / "deep" / "er" / "keys.toml"
    secret.write_text("x")
    found = unignored_secret(secret)
    assert found is not None
    assert found.work_tree == tree.resolve()
    (tree / ".gitignore").write_text("keys.toml\n")
    assert unignored_secret(secret) is None
    outside = tmp_path / "elsewhere.toml"
    outside.write_text("x")
    assert unignored_secret(outside) is None


@pytest.mark.slow
def test_keys_commands_warn_about_an_unignored_secret_file(soklet: Soklet) -> None:
    _git_init(soklet.cwd)
    generated = soklet.run("keys", "generate", "--id", "k1", "--keyring", "keys.toml")
    assert generated.returncode == 0, generated.stderr
    warnings = [line for line in generated.stderr.splitlines() if WARNING in line]
    assert len(warnings) == 1
    assert "keys.toml" in warnings[0]
    assert ".gitignore" in warnings[0]
    for args in (
        ("keys", "stage", "--generate", "--id", "k2", "--keyring", "keys.toml"),
        ("keys", "rotate", "--id", "k3", "--keyring", "keys.toml"),
        ("keys", "export", "k3", "--output", "k3.key", "--keyring", "keys.toml"),
    ):
        result = soklet.run(*args)
        assert result.returncode == 0, result.stderr
        assert WARNING in result.stderr, args
    exported = [line for line in result.stderr.splitlines() if WARNING in line]
    assert "k3.key" in exported[0]
    # Ignored: nothing to say.
    (soklet.cwd / ".gitignore").write_text("keys.toml\n*.key\n")
    quiet = soklet.run("keys", "stage", "--generate", "--id", "k4", "--keyring", "keys.toml")
    assert quiet.returncode == 0, quiet.stderr
    assert WARNING not in quiet.stderr
    assert "warning" not in soklet.run("keys", "export", "k4", "-o", "k4.key", "--keyring", "keys.toml").stderr


@pytest.mark.slow
def test_no_warning_outside_a_work_tree_or_without_git(soklet: Soklet, tmp_path: Path) -> None:
    outside = soklet.run("keys", "generate", "--id", "k1")
    assert outside.returncode == 0, outside.stderr
    assert WARNING not in outside.stderr
    _git_init(soklet.cwd)
    # A PATH without git (the interpreter is called by its full path): silent, and the command still works.
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    result = soklet.run("keys", "stage", "--generate", "--id", "k2", env={"PATH": str(empty)})
    assert result.returncode == 0, result.stderr
    assert WARNING not in result.stderr


def test_the_repository_ignores_the_walkthroughs_secrets() -> None:
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        pytest.skip("not a git work tree")
    names = ["keys.toml", "admin-token", "fleet.toml.rotation.json", "store.kek", "soklet-keyring.toml"]
    checked = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "--no-index", "--", *names],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert sorted(checked.stdout.split()) == sorted(names)
