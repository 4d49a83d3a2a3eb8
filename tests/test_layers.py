"""soklet's layers: imports only point down, and the core never imports the CLI's libraries.

The order is the one drawn in docs/architecture.md, bottom first. Inside ``soklet_core`` a module may import its own
layer and any layer below it: ``protocol``, then ``errors`` (the root of every error, so it imports nothing else of
soklet's but the protocol constants), ``json``, ``keys``, ``files``, ``protection``, then ``mcp`` in three steps (the
model an app author writes against, the server machinery that runs it, and the ``soklet_core.mcp`` surface that
re-exports both), and ``fleet`` on top. Above the core, ``soklet_apps`` (the demo and conformance apps) may import
the core only, and ``soklet_cli`` may import both; the core imports neither, nor typer or rich, and no package
imports the tests or the tools. An import that breaks a rule fails with the file and the import named.

The same rules are import-linter contracts in pyproject.toml, which ``lint-imports`` in the test command checks on
the whole import graph (chains of imports too); the last test here proves the contracts can fail.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("soklet_core", "soklet_apps", "soklet_cli")
#: The core's layers, bottom first: each may import the ones before it.
LAYERS = (
    "lazy_exports",
    "tracing",
    "json_logs",
    "protocol",
    "errors",
    "tracing_setup",
    "json",
    "keys",
    "files",
    "protection",
    "store",
    "mcp.model",
    "mcp.server",
    "mcp",
    "fleet",
)
#: Top-level names each package must never import.
FORBIDDEN = {
    "soklet_core": ("soklet_apps", "soklet_cli", "typer", "rich", "tests", "tools"),
    "soklet_apps": ("soklet_cli", "typer", "rich", "tests", "tools"),
    "soklet_cli": ("tests", "tools"),
}


def _module_name(path: Path, root: Path) -> str:
    """``soklet_core/mcp/model/registry.py`` -> ``soklet_core.mcp.model.registry`` (a package is its folder)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str:
    """The core layer a ``soklet_core`` module (or an import of one) belongs to. The package itself counts as
    ``errors``: its ``__init__`` holds the version and re-exports the error root, and imports nothing else."""
    parts = module.split(".")[1:]
    if not parts:
        return "errors"
    if parts[0] == "mcp" and len(parts) > 1 and parts[1] in ("model", "server"):
        return f"mcp.{parts[1]}"
    return parts[0]


def _imports(path: Path, root: Path) -> list[tuple[str, int]]:
    """Every module ``path`` imports, made absolute, with the import's relative level (0 for an absolute one)."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, 0))
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            # `from . import x` imports the module x of the package, and x decides the layer.
            names = [node.module] if node.module else [alias.name for alias in node.names]
            found.extend((".".join([*base, name]), node.level) for name in names)
    return found


def violations(path: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with the imports of ``path`` (a module of one of :data:`PACKAGES` under ``root``)."""
    module = _module_name(path, root)
    top = module.split(".")[0]
    problems: list[str] = []
    for name, level in _imports(path, root):
        if name.split(".")[0] in FORBIDDEN[top]:
            problems.append(f"{name} imported by {top}")
        if top != "soklet_core":
            continue
        if level > 1:
            problems.append(f"{'.' * level}: reach another package by its absolute name ({name})")
        if module == "soklet_core" or name.split(".")[0] != "soklet_core":
            continue
        own, imported = _layer(module), _layer(name)
        if imported not in LAYERS or LAYERS.index(imported) > LAYERS.index(own):
            problems.append(f"{name} ({imported}) is above {own}")
    return problems


def _modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_every_core_package_has_a_layer() -> None:
    layers = {_layer(_module_name(path, ROOT)) for path in (ROOT / "soklet_core").rglob("*.py")}
    assert layers <= set(LAYERS), f"add {sorted(layers - set(LAYERS))} to LAYERS and docs/architecture.md"


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_imports_point_down(path: Path) -> None:
    assert violations(path) == []


def _tree(tmp_path: Path, module: str, source: str) -> Path:
    """A module at dotted name ``module`` in a scratch tree under ``tmp_path``, holding ``source``."""
    path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    return path


# The check must be able to fail: each rule, broken once in a scratch tree.
@pytest.mark.parametrize(
    ("module", "source", "problem"),
    [
        ("soklet_core.json.upward", "from soklet_core.mcp import McpServer\n", "soklet_core.mcp (mcp) is above json"),
        (
            "soklet_core.mcp.model.registry",
            "from soklet_core.mcp.server.engine._dispatcher import Dispatcher\n",
            "soklet_core.mcp.server.engine._dispatcher (mcp.server) is above mcp.model",
        ),
        (
            "soklet_core.mcp.model.registry",
            "from ..server import dispatcher\n",
            "soklet_core.mcp.server (mcp.server) is above mcp.model",
        ),
        (
            "soklet_core.mcp.model.registry",
            "from soklet_core.mcp import tool\n",
            "soklet_core.mcp (mcp) is above mcp.model",
        ),
        ("soklet_core.errors", "from soklet_core.json import JsonError\n", "soklet_core.json (json) is above errors"),
        (
            "soklet_core.protocol",
            "from soklet_core.errors import SokletError\n",
            "soklet_core.errors (errors) is above protocol",
        ),
        (
            "soklet_core.protocol",
            "from soklet_core import __version__\n",
            "soklet_core (errors) is above protocol",
        ),
        ("soklet_core.fleet.check", "import rich\n", "rich imported by soklet_core"),
        ("soklet_core.mcp.server._server", "from soklet_apps import demo\n", "soklet_apps imported by soklet_core"),
        (
            "soklet_core.mcp.server._server",
            "from soklet_cli.serve import serve\n",
            "soklet_cli.serve imported by soklet_core",
        ),
        ("soklet_apps.demo", "from soklet_cli.serve import serve\n", "soklet_cli.serve imported by soklet_apps"),
        ("soklet_apps.demo", "import typer\n", "typer imported by soklet_apps"),
        (
            "soklet_cli.serve",
            "from tests.server.support import running\n",
            "tests.server.support imported by soklet_cli",
        ),
    ],
)
def test_the_check_sees_a_broken_rule(tmp_path: Path, module: str, source: str, problem: str) -> None:
    assert problem in violations(_tree(tmp_path, module, source), tmp_path)


@pytest.mark.parametrize(
    ("module", "source"),
    [
        (
            "soklet_core.mcp.server._server",
            "from soklet_core.mcp.model.registry import Registry\nfrom . import _jsonrpc\n",
        ),
        ("soklet_core.mcp.__init__", "from .model import tool\nfrom .server import McpServer\n"),
        ("soklet_core.fleet.tokens", "from soklet_core.mcp.server.ops._admin import AdminTokens\n"),
        ("soklet_core.errors", "from soklet_core.protocol import DEFAULT_ENDPOINT_PATH\n"),
        ("soklet_apps.demo", "from soklet_core.mcp import tool\n"),
        ("soklet_cli.serve", "from soklet_apps import demo\nfrom soklet_core.mcp import McpServer\nimport typer\n"),
    ],
)
def test_the_check_allows_what_points_down(tmp_path: Path, module: str, source: str) -> None:
    assert violations(_tree(tmp_path, module, source), tmp_path) == []


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the project's contracts on a scratch tree holding every package and layer they name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    lines = [f"root_packages = {json.dumps(config['root_packages'])}", "include_external_packages = true"]
    for contract in config["contracts"]:
        lines.append("[[tool.importlinter.contracts]]")
        lines.extend(f"{key} = {json.dumps(value)}" for key, value in contract.items())
        for container in contract.get("containers", []):
            for layer in contract["layers"]:
                _tree(tree, f"{container}.{layer}.__init__", "")
    for package in config["root_packages"]:
        _tree(tree, f"{package}.__init__", "")
    (tree / "contracts.toml").write_text("[tool.importlinter]\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--config", "contracts.toml", "--no-cache"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_import_contracts_can_fail(tmp_path: Path) -> None:
    # A scratch tree shaped as the project passes the contracts, and one upward import breaks the one it should.
    clean = _lint_imports(tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    _tree(tmp_path, "soklet_core.mcp.model.registry", "from soklet_core.mcp import server\n")
    broken = _lint_imports(tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "The MCP model never imports the server machinery BROKEN" in broken.stdout


def test_a_circle_between_the_server_rooms_breaks_the_contract(tmp_path: Path) -> None:
    # Two rooms of mcp/server that import each other: the acyclic contract names the circle.
    _tree(tmp_path, "soklet_core.mcp.server.engine.__init__", "")
    _tree(tmp_path, "soklet_core.mcp.server.http.__init__", "")
    _tree(tmp_path, "soklet_core.mcp.server.engine._engine", "from soklet_core.mcp.server.http import _transport\n")
    _tree(tmp_path, "soklet_core.mcp.server.http._transport", "from soklet_core.mcp.server.engine import _engine\n")
    broken = _lint_imports(tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "The server's rooms import each other without a circle BROKEN" in broken.stdout
