"""The quick selection keeps the whole tree: every folder of tests keeps at least one test not marked ``slow``.

``bash scripts/test -m "not slow"`` is the developer's inner loop (docs/testing.md): it is only worth running if it
still touches every area, so marking a whole folder slow (or adding a folder whose tests are all slow) fails here.
The check reads the marks as the tests write them (``pytestmark = pytest.mark.slow`` on a module or a class,
``@pytest.mark.slow`` on a test or a class) from the source, without importing or running anything: a full
``--collect-only`` of the tree would cost the quick selection a tenth of its time. No conftest adds the mark.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def _is_slow_mark(node: ast.expr) -> bool:
    """Whether ``node`` is ``pytest.mark.slow`` (or a list or tuple holding it, as ``pytestmark`` may be)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return any(_is_slow_mark(item) for item in node.elts)
    return ast.unparse(node) == "pytest.mark.slow"


def _marks_slow(body: Iterable[ast.stmt]) -> bool:
    """Whether ``body`` (a module's or a class's) assigns ``pytestmark`` a slow mark."""
    return any(
        isinstance(stmt, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "pytestmark" for target in stmt.targets)
        and _is_slow_mark(stmt.value)
        for stmt in body
    )


def _decorated_slow(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    return any(_is_slow_mark(decorator) for decorator in node.decorator_list)


def quick_tests(source: str) -> list[str]:
    """The tests of a test module's ``source`` that no ``slow`` mark reaches."""
    tree = ast.parse(source)
    if _marks_slow(tree.body):
        return []
    quick: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            if not _decorated_slow(node):
                quick.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            if _decorated_slow(node) or _marks_slow(node.body):
                continue
            quick.extend(
                f"{node.name}.{method.name}"
                for method in node.body
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
                and method.name.startswith("test")
                and not _decorated_slow(method)
            )
    return quick


def folders_without_quick_tests(modules: dict[str, str]) -> list[str]:
    """The folders (of the ``path: source`` test modules given) none of whose modules has a quick test."""
    folders = {Path(path).parent.as_posix() for path in modules}
    kept = {Path(path).parent.as_posix() for path, source in modules.items() if quick_tests(source)}
    return sorted(folders - kept)


def test_every_test_folder_keeps_a_quick_test() -> None:
    modules = {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8") for path in TESTS.rglob("test_*.py")}
    assert {"tests", "tests/json", "tests/server", "tests/conformance", "tests/interop"} <= {
        Path(path).parent.as_posix() for path in modules
    }
    missing = folders_without_quick_tests(modules)
    assert not missing, f"every test in {missing} is marked slow: leave one quick test there (docs/testing.md)"


def test_the_check_sees_every_way_of_marking_slow() -> None:
    quick = "import pytest\n\ndef test_a() -> None:\n    pass\n"
    module = "import pytest\n\npytestmark = pytest.mark.slow\n\ndef test_a() -> None:\n    pass\n"
    listed = "import pytest\n\npytestmark = [pytest.mark.slow, pytest.mark.usefixtures('x')]\n\ndef test_a(): ...\n"
    decorated = "import pytest\n\n@pytest.mark.slow\n@pytest.mark.parametrize('n', [1])\ndef test_a(n): ...\n"
    in_class = "import pytest\n\n@pytest.mark.slow\nclass TestA:\n    def test_a(self) -> None: ...\n"
    class_mark = "import pytest\n\nclass TestA:\n    pytestmark = pytest.mark.slow\n\n    def test_a(self): ...\n"
    assert quick_tests(quick) == ["test_a"]
    for source in (module, listed, decorated, in_class, class_mark):
        assert quick_tests(source) == [], source
    assert quick_tests(in_class.replace("@pytest.mark.slow\n", "")) == ["TestA.test_a"]
    other = "import pytest\n\n@pytest.mark.skipif(True, reason='x')\ndef test_a(): ...\n"
    assert quick_tests(other) == ["test_a"]


def test_the_check_sees_a_folder_whose_tests_are_all_slow() -> None:
    quick = "def test_a() -> None:\n    pass\n"
    slow = "import pytest\n\npytestmark = pytest.mark.slow\n\ndef test_a() -> None:\n    pass\n"
    modules = {"tests/test_a.py": quick, "tests/json/test_b.py": quick, "tests/fuzz/test_c.py": slow}
    assert folders_without_quick_tests(modules) == ["tests/fuzz"]
    assert folders_without_quick_tests({**modules, "tests/fuzz/test_d.py": quick}) == []
