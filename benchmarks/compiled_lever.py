"""The mypyc lever, measured: soklet's hot modules compiled against the same tree pure, in one run, in a scratch copy.

Run: ``.venv/bin/python benchmarks/compiled_lever.py [--quick] [--sets json,protection,...] [--pairs N] [--tests]``.
Needs mypyc (in the dev lock: ``mypy`` ships it) and a C compiler with the Python headers; without them it says so
and exits 0. Nothing in the repository is built or changed: ``git archive HEAD`` extracts the packages, the
tools, ``benchmarks``, ``tests`` and ``docs`` into a scratch folder once per variant (the commit is printed), and
each module set is compiled there with ``mypyc.build.mypycify`` (``build_ext --inplace``, opt level 3). A module
mypyc refuses (its error names the file), whose C fails to compile, or whose compiled form fails to import is left
pure and the build is retried without it; the kinds already met are found from the source before the first
build (:func:`known_refusals`). The report says which modules stayed pure and why. A build of the larger sets takes
minutes on a busy 2-core machine: ``--keep`` keeps the scratch folder and ``--reuse`` measures it again.

Each variant is then measured in its own subprocess (``PYTHONPATH`` = that copy and its ``benchmarks``; the child
checks that ``soklet_core`` really comes from the copy and lists the modules that are compiled), pure and compiled
variants interleaved in ``--pairs`` rounds so a noisy moment hits both alike:

* **seal + open**: a 1 KiB state sealed for a 1 KiB request and opened for its retry, as
  ``benchmarks/protection_seal_open.py`` times "soklet seal" + "soklet open" (its request, state and ``best``);
* **round trip**: the demo's ``catalog.continue`` call + retry posted straight into the ASGI app, CPU per round
  trip, as ``benchmarks/engine_path.py`` measures it (its ``cpu_per_round_trip``);
* **params digest**: ``params_digest`` of the 1 KiB request's bytes (whole request);
* **parse**: ``parse`` of the same bytes into the value model.

It prints per set the build time, the modules compiled and left pure, and each measure's ratio compiled / pure
(median and range over the pairs; below 1 is faster). ``--tests`` also runs ``tests/json``, ``tests/protection``
and ``tests/mcp`` against every compiled copy (pytest from the copy) and prints the outcome line.
``--quick`` builds the json set only, with one pair of short runs (about a minute: the build dominates).
``--adapt`` first rewrites the surrogate string literals mypyc refuses (:data:`ADAPTATIONS`, same behaviour) in the
compiled copies only, to see what compiling ``json/codec.py`` and ``json/scanner.py`` would add.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: The module sets, each the previous one plus more folders (paths relative to the copy).
SETS: dict[str, tuple[str, ...]] = {
    "json": ("soklet_core/json",),
    "json+protection": ("soklet_core/json", "soklet_core/protection"),
    "json+protection+model": ("soklet_core/json", "soklet_core/protection", "soklet_core/mcp/model"),
    "json+protection+model+engine": (
        "soklet_core/json",
        "soklet_core/protection",
        "soklet_core/mcp/model",
        "soklet_core/mcp/server/engine",
    ),
    "json+protection+model+engine+http": (
        "soklet_core/json",
        "soklet_core/protection",
        "soklet_core/mcp/model",
        "soklet_core/mcp/server/engine",
        "soklet_core/mcp/server/http",
    ),
}
DEFAULT_SETS = ("json", "json+protection", "json+protection+model", "json+protection+model+engine")
#: What ``git archive`` extracts into each copy.
TREES = ("soklet_core", "soklet_apps", "soklet_cli", "tools", "benchmarks", "tests", "docs", "pyproject.toml")
#: The test folders run against each compiled copy with ``--tests``.
TEST_FOLDERS = ("tests/json", "tests/protection", "tests/mcp")
#: ``--adapt``: behaviour-preserving source rewrites applied to the scratch copy only, to see what compiling the
#: modules they unlock would add: mypyc refuses a lone surrogate in a string literal (use ``chr``), and ``re``
#: reads the same ``\\uXXXX`` escapes in a raw pattern as Python does in a plain one.
ADAPTATIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r'"\\u(d[89a-f][0-9a-f]{2})"'), r"chr(0x\1)"),
    (re.compile(r'\("(\[\\ud[89a-f][0-9a-f]{2}-\\ud[89a-f][0-9a-f]{2}\])"\)'), r'(r"\1")'),
)
#: Bounded retries of a build, each dropping the files mypyc named in its errors.
MAX_BUILD_ATTEMPTS = 16
#: Imported after each build (with every compiled module): what the measurements load.
IMPORTED = ("soklet_core.mcp", "soklet_core.protection", "soklet_apps.demo", "engine_path", "protection_seal_open")
TRACEBACK_FILE = re.compile(r'File "(?:[^"]*/)?(soklet_core/[\w/]+\.py)", line \d+')
MEASURES = ("seal_open_us", "round_trip_us", "digest_us", "parse_us")
ERROR_LINE = re.compile(r"^(soklet_core/[\w/]+\.py):\d+: error: (.+)$", re.MULTILINE)
MYPY_INI = "[mypy]\npython_version = 3.11\nstrict = True\nwarn_unreachable = True\n"
SETUP = """\
import sys
from setuptools import setup
from mypyc.build import mypycify
paths = sys.argv[1:]
setup(
    name="compiled_lever",
    ext_modules=mypycify(["--config-file", "mypy.ini", *paths], opt_level="3"),
    script_args=["build_ext", "--inplace"],
)
"""


# ---------------------------------------------------------------- the child: measures one copy, prints JSON


def child(quick: bool) -> int:
    """Measure the copy on ``PYTHONPATH`` and print one JSON line."""
    import engine_path
    import protection_seal_open as pso

    import soklet_core
    from soklet_core.json import params_digest, parse
    from soklet_core.keys import ProtectionKey, ProtectionKeyring
    from soklet_core.protection import (
        ANONYMOUS_PARTITION,
        BoundRequest,
        ProtectionConfig,
        RequestStateSealer,
        bind_request,
    )
    from soklet_core.protocol import PROTOCOL_VERSION

    number, rounds, trips = (200, 3, 200) if quick else (2000, 5, 1000)
    first, retry = pso.request_document(41, retry=False), pso.request_document(42, retry=True)
    first_bytes = json.dumps(first, ensure_ascii=False).encode()
    retry_bytes = json.dumps(retry, ensure_ascii=False).encode()
    state = pso.state_value()
    sealer = RequestStateSealer(ProtectionConfig(keyring=ProtectionKeyring(ProtectionKey.generate("2026-08"))))
    first_request, retry_request = parse(first_bytes), parse(retry_bytes)

    def bound(data: bytes, request: Any) -> BoundRequest:
        digest = params_digest(data, whole_request=True)
        return bind_request(
            request, path="/mcp", partition=ANONYMOUS_PARTITION, protocol_version=PROTOCOL_VERSION, params_digest=digest
        )

    token = sealer.seal(state, bound(first_bytes, first_request))
    assert sealer.open(token, bound(retry_bytes, retry_request)).state == state
    contenders = {
        "seal_us": lambda: sealer.seal(state, bound(first_bytes, first_request)),
        "open_us": lambda: sealer.open(token, bound(retry_bytes, retry_request)).state,
        "digest_us": lambda: params_digest(first_bytes, whole_request=True),
        "parse_us": lambda: parse(first_bytes),
    }
    times = {name: float("inf") for name in contenders}
    for _ in range(rounds):  # interleaved, as protection_seal_open.py does
        for name, function in contenders.items():
            times[name] = min(times[name], pso.best(function, number, 1))
    out: dict[str, Any] = {name: seconds * 1e6 for name, seconds in times.items()}
    out["seal_open_us"] = out["seal_us"] + out["open_us"]
    out["round_trip_us"] = engine_path.cpu_per_round_trip(trips, rounds) * 1e6
    out["soklet_core"] = str(Path(soklet_core.__file__).parent)
    out["compiled"] = sorted(
        name
        for name, module in sys.modules.items()
        if name.startswith("soklet_") and str(getattr(module, "__file__", "")).endswith((".so", ".pyd"))
    )
    print(json.dumps(out))
    return 0


# ---------------------------------------------------------------- the parent: copies, builds, runs, reports


def toolchain_missing() -> str | None:
    """Why mypyc cannot build here, or None."""
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed (it ships with mypy: the dev lock has it)"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler}) on PATH"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "the Python headers (Python.h) are missing"
    return None


def extract(commit: str, into: Path) -> None:
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, *TREES], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)


def known_refusals(copy: Path, candidates: list[str]) -> dict[str, str]:
    """The candidates whose compiled form fails at import for a reason seen before, found from the source.

    * an exception class with ``__slots__``: mypyc compiles a subclass of a built-in exception as a plain
      (non-extension) class and raises "mypyc classes can't have __slots__" when the module is imported;
    * a ``@runtime_checkable`` protocol: mypyc compiles it as a class, which ``typing`` then refuses.

    Class names are resolved across the whole package by name. Found ahead so the build need not discover them
    one (minutes-long) rebuild at a time; the import check after each build still catches what this misses."""
    trees = {str(path.relative_to(copy)): ast.parse(path.read_text()) for path in (copy / "soklet_core").rglob("*.py")}
    bases: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, set()).update(ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases)
    builtin = {
        name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
    }

    def is_exception(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in builtin:
            return True
        return name not in seen and any(is_exception(base, seen | {name}) for base in bases.get(name, ()))

    found: dict[str, str] = {}
    for path in candidates:
        for node in ast.walk(trees[path]):
            slotted = isinstance(node, ast.ClassDef) and any(
                isinstance(item, (ast.Assign, ast.AnnAssign)) and "__slots__" in ast.unparse(item).split("=", 1)[0]
                for item in node.body
            )
            if slotted and isinstance(node, ast.ClassDef) and is_exception(node.name):
                found[path] = f'exception class {node.name} has __slots__ (mypyc: "classes can\'t have __slots__")'
                break
            if isinstance(node, ast.ClassDef) and any(
                "runtime_checkable" in ast.unparse(d) for d in node.decorator_list
            ):
                found[path] = f"@runtime_checkable protocol {node.name} (compiled, typing refuses it as a protocol)"
                break
    return found


def refused_by_c(output: str, copy: Path, candidates: list[str]) -> dict[str, str]:
    """The candidates a C compile error points at: the module and class in mypyc's static name on the error's line
    or the source line the compiler quotes below it (``CPyStatic_<module>___<Class>___...``)."""
    found: dict[str, str] = {}
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if ": error:" not in line:
            continue
        for match in re.finditer(r"CPyStatic_(\w+?)___([A-Za-z]\w*?)___", " ".join(lines[index : index + 2])):
            short, name = match.group(1).replace("___", "/"), match.group(2)
            for path in candidates:
                if path.removesuffix(".py").endswith(short) and f"class {name}" in (copy / path).read_text():
                    found.setdefault(path, f"the C compile fails on {name} (a mypyc code generation bug)")
    return found


def adapt(copy: Path, candidates: list[str]) -> list[str]:
    """Apply :data:`ADAPTATIONS` to the candidates in the copy; the files changed, with the count of rewrites."""
    changed = []
    for path in candidates:
        text = (copy / path).read_text()
        total = 0
        for pattern, replacement in ADAPTATIONS:
            text, count = pattern.subn(replacement, text)
            total += count
        if total:
            (copy / path).write_text(text)
            changed.append(f"{path} ({total})")
    return changed


def build(copy: Path, folders: tuple[str, ...], *, adapted: bool = False) -> dict[str, Any]:
    """Compile the ``.py`` files of ``folders`` in ``copy``; drop what mypyc refuses and retry."""
    candidates = sorted(str(path.relative_to(copy)) for folder in folders for path in (copy / folder).glob("*.py"))
    rewritten = adapt(copy, candidates) if adapted else []
    pure: dict[str, str] = known_refusals(copy, candidates)
    # setuptools would read the project's pyproject.toml in the build folder: it is set aside for the build.
    pyproject = copy / "pyproject.toml"
    pyproject.rename(copy / "pyproject.toml.aside")
    (copy / "mypy.ini").write_text(MYPY_INI)
    (copy / "compiled_lever_setup.py").write_text(SETUP)
    started = time.monotonic()
    try:
        for _ in range(MAX_BUILD_ATTEMPTS):
            paths = [path for path in candidates if path not in pure]
            if not paths:
                break
            for stale in [*copy.glob("*.so"), *(copy / "soklet_core").rglob("*.so")]:
                stale.unlink()  # a module dropped since the last attempt must import from its source
            result = subprocess.run(
                [sys.executable, "compiled_lever_setup.py", *paths], cwd=copy, capture_output=True, text=True
            )
            if result.returncode == 0:
                failure = import_check(copy, paths)
                if failure is None:
                    return {
                        "seconds": time.monotonic() - started,
                        "compiled": paths,
                        "pure": pure,
                        "error": None,
                        "adapted": rewritten,
                    }
                path, reason = failure
                pure[path] = f"compiles, but importing it fails: {reason}"
                continue
            refused: dict[str, list[str]] = {}
            for path, reason in ERROR_LINE.findall(result.stdout + result.stderr):
                if reason not in refused.setdefault(path, []):
                    refused[path].append(reason)
            if not refused:
                refused = {
                    path: [reason] for path, reason in refused_by_c(result.stdout + result.stderr, copy, paths).items()
                }
            if not refused:
                tail = (result.stdout + result.stderr).strip().splitlines()[-5:]
                return {"seconds": time.monotonic() - started, "compiled": [], "pure": pure, "error": tail}
            for path, reasons in refused.items():
                pure[path] = "; ".join(reasons[:3])
        return {"seconds": time.monotonic() - started, "compiled": [], "pure": pure, "error": ["too many attempts"]}
    finally:
        (copy / "pyproject.toml.aside").rename(pyproject)


def import_check(copy: Path, compiled: list[str]) -> tuple[str, str] | None:
    """Import the compiled modules and what the measurements use; the compiled module a failure points at."""
    modules = [path.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for path in compiled]
    code = "import importlib, sys\nfor name in sys.argv[1:]: importlib.import_module(name)"
    result = subprocess.run(
        [sys.executable, "-c", code, *modules, *IMPORTED],
        cwd=copy,
        env=environment(copy),
        capture_output=True,
        text=True,
    )
    if result.returncode == 0:
        return None
    frames = [path for path in TRACEBACK_FILE.findall(result.stderr) if path in compiled]
    last = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "no message"
    if not frames:
        raise RuntimeError(f"importing the compiled copy fails outside the compiled modules: {last}")
    return frames[-1], last


def environment(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join((str(copy), str(copy / "benchmarks")))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(copy: Path, quick: bool) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, __file__, "--child", *(["--quick"] if quick else [])],
        cwd=copy,
        env=environment(copy),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-3:]}
    out: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    if Path(out["soklet_core"]) != copy / "soklet_core":
        raise RuntimeError(f"the child imported soklet_core from {out['soklet_core']}, not from {copy}")
    return out


def run_tests(copy: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TEST_FOLDERS],
        cwd=copy,
        env=environment(copy),
        capture_output=True,
        text=True,
    )
    lines = result.stdout.strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    return "\n".join(
        [*(f"      {line[:160]}" for line in failed[:12]), f"      {lines[-1] if lines else result.stderr}"]
    )


def spread(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f}× ({min(values):.2f}–{max(values):.2f})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="the json set only, one pair of short runs")
    parser.add_argument("--sets", help=f"comma-separated, of: {', '.join(SETS)} (default: {', '.join(DEFAULT_SETS)})")
    parser.add_argument("--pairs", type=int, help="interleaved pure/compiled rounds (default 3; 1 with --quick)")
    parser.add_argument("--tests", action="store_true", help="also run tests/json, protection, mcp on each copy")
    parser.add_argument(
        "--adapt", action="store_true", help="rewrite surrogate literals in the compiled copies (see ADAPTATIONS)"
    )
    parser.add_argument(
        "--reuse", type=Path, help="measure the copies a kept scratch folder holds (no extraction, no build)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (its path is printed)")
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.quick)
    missing = toolchain_missing()
    if missing is not None:
        print(f"compiled lever not measured: {missing}")
        return 0
    names = args.sets.split(",") if args.sets else (["json"] if args.quick else list(DEFAULT_SETS))
    unknown = [name for name in names if name not in SETS]
    if unknown:
        parser.error(f"unknown set(s): {', '.join(unknown)}")
    pairs = args.pairs or (1 if args.quick else 3)
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    scratch = args.reuse.resolve() if args.reuse else Path(tempfile.mkdtemp(prefix="compiled-lever-"))
    if args.reuse:
        commit = (scratch / "commit").read_text().strip()
    print(f"commit {commit[:12]}, scratch {scratch}; {pairs} pair(s), {'quick' if args.quick else 'full'} runs")
    try:
        builds: dict[str, dict[str, Any]] = {}
        if not args.reuse:
            extract(commit, scratch / "pure")
            (scratch / "commit").write_text(commit)
        for name in names:
            if args.reuse:
                builds[name] = result = json.loads((scratch / name / "compiled_lever_build.json").read_text())
            else:
                extract(commit, scratch / name)
                builds[name] = result = build(scratch / name, SETS[name], adapted=args.adapt)
                (scratch / name / "compiled_lever_build.json").write_text(json.dumps(result))
            print(
                f"built {name}: {len(result['compiled'])} modules compiled, {len(result['pure'])} left pure, "
                f"{result['seconds']:.0f} s" + (f"; FAILED: {result['error']}" if result["error"] else "")
            )
            for path in result.get("adapted", []):
                print(f"    adapted: {path}")
            for path, reason in result["pure"].items():
                print(f"    pure: {path}: {reason}")
        variants = ["pure", *(name for name in names if not builds[name]["error"])]
        runs: dict[str, list[dict[str, Any]]] = {variant: [] for variant in variants}
        for pair in range(pairs):
            order = variants if pair % 2 == 0 else list(reversed(variants))
            for variant in order:
                runs[variant].append(measure(scratch / variant, args.quick))
        errors = {variant: run["error"] for variant in variants for run in runs[variant] if "error" in run}
        for variant, error in errors.items():
            print(f"  {variant}: the measurement failed: {error}")
        pure_runs = runs["pure"]
        print(f"\n{'set':<36} {'build s':>7}  {'modules':>7}  " + "  ".join(f"{m:>22}" for m in MEASURES))
        if "error" not in pure_runs[0]:
            pure_row = "  ".join(f"{statistics.median(r[m] for r in pure_runs):>19.1f} µs" for m in MEASURES)
            print(f"{'pure (absolute, median)':<36} {'':>7}  {'':>7}  {pure_row}")
        table: dict[str, Any] = {"commit": commit, "sets": {}}
        for name in variants[1:]:
            if name in errors or "pure" in errors:
                continue
            ratios = {m: [c[m] / p[m] for c, p in zip(runs[name], pure_runs, strict=True)] for m in MEASURES}
            loaded = runs[name][0]["compiled"]
            print(
                f"{name:<36} {builds[name]['seconds']:>7.0f}  {len(loaded):>7}  "
                + "  ".join(f"{spread(ratios[m]):>22}" for m in MEASURES)
            )
            table["sets"][name] = {"build": builds[name], "loaded_compiled": loaded, "ratios": ratios}
        print("ratios are compiled / pure (median, range over the pairs); below 1 is faster")
        if args.tests:
            for name in ["pure", *variants[1:]]:
                print(f"tests ({', '.join(TEST_FOLDERS)}) against {name}:")
                print(run_tests(scratch / name))
        if args.json:
            print(json.dumps(table, indent=2))
    finally:
        if args.keep or args.reuse:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
