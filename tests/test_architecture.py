"""docs/architecture.md stays the map of the repository: every module has a row, and every row names a real file.

A newcomer finds the home of a rule in one step only if the map is whole; these tests fail when a module is added
without its row, when a row outlives its file, or when a rule's home in "Where each rule lives" is gone.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
MAPPED = ("soklet_core", "soklet_apps", "soklet_cli", "tools")


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _first_cells(section: str) -> set[str]:
    """The backticked paths in the first column of each table row of ``section``."""
    cells: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            cells.update(part for part in first.split("`")[1::2] if part.endswith(".py"))
    return cells


def _modules() -> set[str]:
    found: set[str] = set()
    for package in MAPPED:
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "__main__.py" or path.name == "__init__.py":
                continue
            found.add(path.relative_to(ROOT).as_posix())
    return found


def test_every_module_has_a_row() -> None:
    rows = _first_cells(_section(DOC.read_text(encoding="utf-8"), "Every module"))
    missing = sorted(_modules() - rows)
    assert not missing, f"add a row to docs/architecture.md 'Every module' for {missing}"


def test_every_row_names_a_file_that_exists() -> None:
    rows = _first_cells(_section(DOC.read_text(encoding="utf-8"), "Every module"))
    gone = sorted(row for row in rows if not (ROOT / row).is_file())
    assert not gone, f"docs/architecture.md names modules that are gone: {gone}"


def test_every_rule_home_exists() -> None:
    section = _section(DOC.read_text(encoding="utf-8"), "Where each rule lives")
    homes = {
        part
        for line in section.splitlines()
        if line.startswith("| ") and line.count("|") >= 3
        for part in line.split("|")[2].split("`")[1::2]
        if part.endswith(".py")
    }
    assert homes, "the rules table lost its homes"
    gone = sorted(home for home in homes if not (ROOT / home).is_file())
    assert not gone, f"docs/architecture.md names rule homes that are gone: {gone}"


def test_the_check_sees_a_module_without_a_row() -> None:
    # The map check must be able to fail: a module list with one extra file is not covered by the rows.
    rows = _first_cells(_section(DOC.read_text(encoding="utf-8"), "Every module"))
    assert "soklet_core/json/not_mapped.py" not in rows
    assert "soklet_core/json/not_mapped.py" in (_modules() | {"soklet_core/json/not_mapped.py"}) - rows


def test_the_error_tree_is_drawn_the_same_in_both_places() -> None:
    from soklet_core import errors

    assert errors.__doc__ is not None
    lines = errors.__doc__.splitlines()
    start = next(index for index, line in enumerate(lines) if line.strip().startswith("SokletError "))
    end = next(index for index in range(start, len(lines)) if not lines[index].strip())
    in_code = [line.removeprefix("    ") for line in lines[start:end]]
    section = _section(DOC.read_text(encoding="utf-8"), "The error tree")
    block = section.split("```\n")[1].splitlines()
    assert block == in_code, "redraw the tree in docs/architecture.md from soklet_core/errors.py's docstring"


#: The longest module the server's rooms may hold: past it, a room has two concerns in one file.
MAX_SERVER_MODULE_LINES = 800


def test_no_server_module_is_over_the_bound() -> None:
    long = sorted(
        f"{path.relative_to(ROOT).as_posix()} ({lines} lines)"
        for path in (ROOT / "soklet_core" / "mcp" / "server").rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_SERVER_MODULE_LINES
    )
    assert not long, f"split these modules of mcp/server (at most {MAX_SERVER_MODULE_LINES} lines): {long}"
