"""The quick selection keeps the whole tree: every folder of tests keeps at least one test not marked ``slow``.

``bash scripts/test -m "not slow"`` is the developer's inner loop (docs/testing.md): it is only worth running if it
still touches every area, so marking a whole folder slow (or adding a folder whose tests are all slow) fails here.
The check reads what pytest itself selects (a ``--collect-only`` run in a subprocess: no test is run, nothing is
timed), so module marks, per-test marks and parametrized marks all count as pytest counts them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
#: The quick selection's marker expression, as docs/testing.md spells it.
QUICK = "not slow"
#: Seconds the collection of the whole tree may take (it imports every test module; about 10 s on two cores).
COLLECT_TIMEOUT = 300


def folders_with_tests() -> set[str]:
    """Every folder under tests/ (tests/ itself included) that holds a test module, relative to the repository."""
    return {path.parent.relative_to(ROOT).as_posix() for path in TESTS.rglob("test_*.py")}


def folders_without(selected_files: Iterable[str], folders: set[str]) -> list[str]:
    """The folders of ``folders`` none of whose test modules appears in ``selected_files``."""
    kept = {Path(name).parent.as_posix() for name in selected_files}
    return sorted(folders - kept)


def quick_selection_files() -> list[str]:
    """The test modules the quick selection runs at least one test of, as pytest lists them (``path: count``)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-qq", "-p", "no:cacheprovider", "-m", QUICK, "tests"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COLLECT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [line.partition(":")[0] for line in done.stdout.splitlines() if line.startswith("tests/") and ": " in line]


def test_every_test_folder_keeps_a_quick_test() -> None:
    files = quick_selection_files()
    assert files, "the quick selection collected nothing"
    missing = folders_without(files, folders_with_tests())
    assert not missing, f"every test in {missing} is marked slow: leave one quick test there (docs/testing.md)"


def test_the_check_sees_a_folder_whose_tests_are_all_slow() -> None:
    folders = {"tests", "tests/json", "tests/fuzz"}
    selected = ["tests/test_layers.py", "tests/json/test_json_limits.py"]
    assert folders_without(selected, folders) == ["tests/fuzz"]
    assert folders_without([*selected, "tests/fuzz/test_fuzz_cli.py"], folders) == []


def test_the_folders_are_the_tree() -> None:
    folders = folders_with_tests()
    assert {"tests", "tests/json", "tests/server", "tests/conformance", "tests/interop"} <= folders
    assert all(folder == "tests" or folder.startswith("tests/") for folder in folders)
