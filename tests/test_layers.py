"""soklet_core's layers: imports only point down, and the core never imports the CLI's libraries.

The order is the one drawn in docs/architecture.md, bottom first. A module may import its own package and any
package below it; an import of a package above it (or of typer, rich or soklet_cli) fails this test with the
file and the import named.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "soklet_core"
#: Bottom first: each layer may import the ones before it.
LAYERS = ("protocol", "errors", "json", "keys", "files", "protection", "mcp", "fleet")
FORBIDDEN_IN_CORE = ("typer", "rich", "soklet_cli")


def _layer_of(path: Path) -> str:
    parts = path.relative_to(CORE).parts
    return parts[0].removesuffix(".py") if len(parts) == 1 else parts[0]


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 1:
            names.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def _modules() -> list[Path]:
    return sorted(path for path in CORE.rglob("*.py") if _layer_of(path) in LAYERS)


def test_every_core_package_has_a_layer() -> None:
    packages = {_layer_of(path) for path in CORE.rglob("*.py")} - {"__init__"}
    assert packages <= set(LAYERS), f"add {sorted(packages - set(LAYERS))} to LAYERS and docs/architecture.md"


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(CORE)))
def test_imports_point_down(path: Path) -> None:
    layer = LAYERS.index(_layer_of(path))
    allowed = {f"soklet_core.{name}" for name in LAYERS[: layer + 1]}
    for name in _imports(path):
        assert name.split(".")[0] not in FORBIDDEN_IN_CORE, f"{name} imported by the core"
        assert not name.startswith(".."), f"{name}: reach another package by its absolute name"
        if name.startswith("soklet_core."):
            package = ".".join(name.split(".")[:2])
            assert package in allowed, f"{package} is above {LAYERS[layer]}"


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    # The test above must be able to fail: a json module importing mcp is caught.
    module = tmp_path / "upward.py"
    module.write_text("from soklet_core.mcp import McpServer\n", encoding="utf-8")
    assert _imports(module) == ["soklet_core.mcp"]
    assert "soklet_core.mcp" not in {f"soklet_core.{name}" for name in LAYERS[: LAYERS.index("json") + 1]}
