"""Whether a secret file soklet just wrote lies in a git work tree that does not ignore it (one ``git add .``
from being committed).

The enclosing work tree is found by climbing from the file's folder to the first one holding ``.git``; git
itself then answers (``git check-ignore``: every ``.gitignore``, ``info/exclude`` and ``core.excludesFile``
counts, and a tracked file counts as not ignored). The answer is advice, never a refusal: without git, outside a
work tree, or when git fails or takes longer than ``GIT_CHECK_TIMEOUT_SECONDS``, there is nothing to say.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["GIT_CHECK_TIMEOUT_SECONDS", "MAX_WORK_TREE_DEPTH", "UnignoredSecret", "unignored_secret"]

#: ``git check-ignore`` gets this long to answer; a slower git (a huge repository, a hung network mount) is
#: left unanswered rather than holding the command.
GIT_CHECK_TIMEOUT_SECONDS: Final = 5.0
#: At most this many folders are climbed looking for ``.git``.
MAX_WORK_TREE_DEPTH: Final = 64
# `git check-ignore` exits 0 when the path is ignored, 1 when it is not, 128 on an error.
_NOT_IGNORED: Final = 1


@dataclass(frozen=True, slots=True)
class UnignoredSecret:
    """A secret file (``path``) inside the git work tree ``work_tree`` that does not ignore it."""

    path: Path
    work_tree: Path


def unignored_secret(path: str | os.PathLike[str]) -> UnignoredSecret | None:
    """The work tree that holds the secret file ``path`` without ignoring it, or ``None`` (ignored, no work tree,
    no git, or no answer in ``GIT_CHECK_TIMEOUT_SECONDS``)."""
    target = Path(os.path.realpath(path))
    work_tree = _enclosing_work_tree(target.parent)
    if work_tree is None:
        return None
    git = shutil.which("git")
    if git is None:
        return None
    try:
        # An argument list (no shell), git from the PATH the user runs soklet with, the path after "--".
        completed = subprocess.run(  # noqa: S603
            [git, "-C", str(work_tree), "check-ignore", "--quiet", "--", str(target)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=GIT_CHECK_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if completed.returncode != _NOT_IGNORED:
        return None
    return UnignoredSecret(target, work_tree)


def _enclosing_work_tree(folder: Path) -> Path | None:
    for depth, candidate in enumerate((folder, *folder.parents)):
        if depth >= MAX_WORK_TREE_DEPTH:
            return None
        if candidate.name == ".git":
            # A file inside the repository's own folder is not part of the work tree.
            return None
        if os.path.lexists(candidate / ".git"):
            return candidate
    return None
