"""A static audit for regular expressions that can backtrack without bound (ReDoS).

Two halves:

* :func:`audit_pattern` parses one pattern with :mod:`re._parser` (the parser ``re.compile`` itself uses, so the
  tree is exactly what runs) and reports overlapping repetition:

  - ``nested``: a repeat that may run more than once (``*``, ``+``, ``{n,}``, ``{n,m}`` with ``m > 1``) whose body
    holds something of variable length: another variable repeat (``(a+)*``, ``(x[y]*)*``, ``(?:a?b)*``), an
    alternation whose branches differ in length (``(a|ab)*``, which the parser factors into ``a(?:|b)``) or a
    back-reference. Star height 2 is refused outright, even where a delimiter makes it unambiguous: the rule is
    simple to keep and the safe spelling (split first, then match each piece) is always available. The one
    exception is a possessive repeat (``(?:,[0-9]+)*+``, or an atomic group holding just a repeat,
    ``(?>(?:,[0-9]+)*)``, which means the same): it never goes back into an iteration it has finished, so how its
    body could be split across iterations cannot multiply the work; the rules still apply inside its body
    (``(?:(?:a+)*)*+`` is flagged for the inner repeat).
  - ``alternation``: a repeat that may run more than once whose body holds an alternation with two branches that
    can start with the same character, or two branches that can match the empty string (``(a|a)*``,
    ``(?:ab|[ab]c)*``).
  - ``adjacent``: two unbounded repeats (``*``, ``+``, ``{n,}``) in sequence where a character could end the first
    and start the second, and everything mandatory between them can be matched by such characters
    (``\\s*\\s*``, ``a*a+``, ``\\d+\\d+``, ``(?:x\\s*)?\\s*``, ``(.+?)/(.+?)``: the split points are ambiguous, so
    a failing match costs a power of the input's length).

  Character sets are exact: each is a bit mask over all code points, and ``\\d``, ``\\s``, ``\\w`` are computed by
  ``re`` itself over every code point (ASCII-only for bytes patterns or ``re.ASCII``).

* :func:`regex_sites` finds every regular expression in a Python file: the pattern argument of ``re.compile``,
  ``match``, ``fullmatch``, ``search``, ``sub``, ``subn``, ``split``, ``findall``, ``finditer`` (under any alias of
  ``re`` or its functions) and of hypothesis' ``from_regex``. A pattern built from literals, module-level constants
  (also imported ones), ``+``, f-strings, ``str()`` and ``re.escape`` is folded to its text; a pattern that depends
  on anything else (a parameter, a local variable) is reported as *computed* (its :attr:`Site.pattern` is None).
"""

from __future__ import annotations

import ast
import functools
import importlib
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

__all__ = ["Finding", "Site", "audit_pattern", "project_python_files", "regex_sites", "regex_sites_in_source"]

_UNICODE_LIMIT = 0x110000
_FULL = (1 << _UNICODE_LIMIT) - 1
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)
_RE_FUNCTIONS = frozenset({"compile", "match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer"})
# Where the flags argument sits, positionally, for each function (the pattern is always first).
_FLAGS_POSITION = {"compile": 1, "match": 2, "fullmatch": 2, "search": 2, "findall": 2, "finditer": 2}
_FLAGS_POSITION |= {"sub": 4, "subn": 4, "split": 3}
# Folders that are not the project's own Python code.
_SKIPPED_DIRS = frozenset({".venv", ".git", ".cache", "node_modules", "__pycache__", "build", "dist"})


@dataclass(frozen=True, slots=True)
class Finding:
    """One overlapping repetition in a pattern: which rule, and the offending piece of the parse tree."""

    rule: str
    detail: str


@dataclass(frozen=True, slots=True)
class Site:
    """One regular expression in the source: where, the call's pattern expression, and its folded text."""

    path: str
    line: int
    source: str
    pattern: str | bytes | None
    flags: int


# --- character sets as bit masks --------------------------------------------------------------------------------


def _span(low: int, high: int) -> int:
    return ((1 << (high + 1)) - 1) ^ ((1 << low) - 1)


# Runs of each positive category, Unicode and ASCII-only, for _category_mask.
_CATEGORY_RUNS = {
    (sre.CATEGORY_DIGIT, False): re.compile(r"\d+"),
    (sre.CATEGORY_SPACE, False): re.compile(r"\s+"),
    (sre.CATEGORY_WORD, False): re.compile(r"\w+"),
    (sre.CATEGORY_DIGIT, True): re.compile(r"\d+", re.ASCII),
    (sre.CATEGORY_SPACE, True): re.compile(r"\s+", re.ASCII),
    (sre.CATEGORY_WORD, True): re.compile(r"\w+", re.ASCII),
}
_POSITIVE = {
    sre.CATEGORY_NOT_DIGIT: sre.CATEGORY_DIGIT,
    sre.CATEGORY_NOT_SPACE: sre.CATEGORY_SPACE,
    sre.CATEGORY_NOT_WORD: sre.CATEGORY_WORD,
}


@functools.cache
def _category_mask(category: Any, ascii_only: bool) -> int:
    # Let re say which code points \d, \s and \w match: exact, and cheap as one scan over a string of them all.
    everything = "".join(map(chr, range(128 if ascii_only else _UNICODE_LIMIT)))
    runs = _CATEGORY_RUNS[_POSITIVE.get(category, category), ascii_only]
    mask = 0
    for match in runs.finditer(everything):
        mask |= _span(match.start(), match.end() - 1)
    return _FULL ^ mask if category in _POSITIVE else mask


def _with_case(mask: int) -> int:
    # IGNORECASE: add the other case of every ASCII letter (enough for an over-approximation of overlap).
    for low in range(ord("a"), ord("z") + 1):
        up = low - 32
        if mask >> low & 1 or mask >> up & 1:
            mask |= (1 << low) | (1 << up)
    return mask


@dataclass(frozen=True, slots=True)
class _Mode:
    dotall: bool
    ignorecase: bool
    ascii_only: bool

    def adjusted(self, add: int, remove: int) -> _Mode:
        def flag(bit: int, current: bool) -> bool:
            return True if add & bit else False if remove & bit else current

        return _Mode(
            flag(re.DOTALL, self.dotall), flag(re.IGNORECASE, self.ignorecase), flag(re.ASCII, self.ascii_only)
        )


def _set_mask(items: Sequence[tuple[Any, Any]], mode: _Mode) -> int:
    mask = 0
    negate = False
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            mask |= 1 << av
        elif op is sre.RANGE:
            mask |= _span(av[0], av[1])
        elif op is sre.CATEGORY:
            mask |= _category_mask(av, mode.ascii_only)
        else:  # CHARSET / BIGCHARSET only appear after compilation; be conservative if they ever show up.
            mask = _FULL
    if mode.ignorecase:
        mask = _with_case(mask)
    return _FULL ^ mask if negate else mask


# --- the parse tree ----------------------------------------------------------------------------------------------

Node = tuple[Any, Any]


def _width(nodes: Any) -> tuple[int, int]:
    pattern = nodes if isinstance(nodes, sre_parse.SubPattern) else sre_parse.SubPattern(sre_parse.State(), list(nodes))
    low, high = pattern.getwidth()
    return int(low), int(high)


def _node_width(node: Node, state: Any) -> tuple[int, int]:
    if node[0] is sre.GROUPREF or node[0] is sre.GROUPREF_EXISTS:
        return (0, sre.MAXREPEAT)
    low, high = sre_parse.SubPattern(state, [node]).getwidth()
    return int(low), int(high)


class _Analyser:
    """Walks one parsed pattern and collects :class:`Finding` values."""

    def __init__(self, parsed: Any, flags: int, is_bytes: bool) -> None:
        self.state = parsed.state
        self.findings: list[Finding] = []
        all_flags = flags | parsed.state.flags
        self.mode = _Mode(
            bool(all_flags & re.DOTALL), bool(all_flags & re.IGNORECASE), is_bytes or bool(all_flags & re.ASCII)
        )

    # Character masks ------------------------------------------------------------------------------------------

    def atom_mask(self, op: Any, av: Any, mode: _Mode) -> int | None:
        """The characters a single-character node matches, or None for anything else."""
        if op is sre.LITERAL:
            return _with_case(1 << av) if mode.ignorecase else 1 << av
        if op is sre.NOT_LITERAL:
            return _FULL ^ (_with_case(1 << av) if mode.ignorecase else 1 << av)
        if op is sre.ANY:
            return _FULL if mode.dotall else _FULL ^ (1 << 10)
        if op is sre.IN:
            return _set_mask(av, mode)
        return None

    def chars(self, nodes: Sequence[Node], mode: _Mode) -> int:
        """Every character ``nodes`` can consume."""
        mask = 0
        for op, av in nodes:
            atom = self.atom_mask(op, av, mode)
            if atom is not None:
                mask |= atom
            elif op in _REPEATS:
                mask |= self.chars(av[2], mode)
            elif op is sre.SUBPATTERN:
                mask |= self.chars(av[3], mode.adjusted(av[1], av[2]))
            elif op is sre.ATOMIC_GROUP:
                mask |= self.chars(av, mode)
            elif op is sre.BRANCH:
                for branch in av[1]:
                    mask |= self.chars(branch, mode)
            elif op is sre.GROUPREF_EXISTS:
                mask |= self.chars(av[1], mode) | (self.chars(av[2], mode) if av[2] is not None else 0)
            elif op is sre.GROUPREF:
                mask = _FULL
        return mask

    def first(self, nodes: Sequence[Node], mode: _Mode, *, last: bool = False) -> tuple[int, bool]:
        """The characters a match of ``nodes`` can start (or end) with, and whether it can be empty."""
        mask = 0
        for op, av in reversed(nodes) if last else nodes:
            atom = self.atom_mask(op, av, mode)
            if atom is not None:
                return mask | atom, False
            if op in _REPEATS:
                inner, empty = self.first(av[2], mode, last=last)
                mask |= inner
                if av[0] > 0 and not empty:
                    return mask, False
            elif op is sre.SUBPATTERN or op is sre.ATOMIC_GROUP:
                inner_nodes, inner_mode = (av[3], mode.adjusted(av[1], av[2])) if op is sre.SUBPATTERN else (av, mode)
                inner, empty = self.first(inner_nodes, inner_mode, last=last)
                mask |= inner
                if not empty:
                    return mask, False
            elif op is sre.BRANCH or op is sre.GROUPREF_EXISTS:
                branches = av[1] if op is sre.BRANCH else [av[1], av[2] if av[2] is not None else []]
                any_empty = False
                for branch in branches:
                    inner, empty = self.first(branch, mode, last=last)
                    mask |= inner
                    any_empty = any_empty or empty
                if not any_empty:
                    return mask, False
            elif op is sre.GROUPREF:
                mask = _FULL
            # AT, ASSERT, ASSERT_NOT: zero width, nothing consumed.
        return mask, True

    def loops(self, nodes: Sequence[Node], mode: _Mode, *, at_end: bool) -> int:
        """Characters of the unbounded repeats that can stand at the start (or end) of a match of ``nodes`` with
        nothing mandatory before (or after) them inside ``nodes``."""
        mask = 0
        ordered = list(reversed(nodes)) if at_end else list(nodes)
        for node in ordered:
            mask |= self.node_loops(node, mode, at_end=at_end)
            if _node_width(node, self.state)[0] > 0:
                break
        return mask

    def node_loops(self, node: Node, mode: _Mode, *, at_end: bool) -> int:
        op, av = node
        if op in _REPEATS:
            if av[1] == sre.MAXREPEAT:
                # Where two loops meet, a character either could take makes the split point ambiguous.
                return self.first(av[2], mode, last=at_end)[0]
            return self.loops(av[2], mode, at_end=at_end)
        if op is sre.SUBPATTERN:
            return self.loops(av[3], mode.adjusted(av[1], av[2]), at_end=at_end)
        if op is sre.ATOMIC_GROUP:
            return self.loops(av, mode, at_end=at_end)
        if op is sre.BRANCH:
            mask = 0
            for branch in av[1]:
                mask |= self.loops(branch, mode, at_end=at_end)
            return mask
        return 0

    # The rules ------------------------------------------------------------------------------------------------

    def walk(self, nodes: Sequence[Node], mode: _Mode) -> None:
        self.check_adjacent(nodes, mode)
        for op, av in nodes:
            if op in _REPEATS:
                if av[1] > 1 and op is not sre.POSSESSIVE_REPEAT:
                    self.check_repeated_body(av[2], mode)
                self.walk(av[2], mode)
            elif op is sre.SUBPATTERN:
                self.walk(av[3], mode.adjusted(av[1], av[2]))
            elif op is sre.ATOMIC_GROUP and len(av) == 1 and av[0][0] in _REPEATS:
                # (?>X{m,n}) is X{m,n}+ by definition: the possessive repeat spelled for CPython before 3.11.5
                # (soklet_core/json/regex_support.py). Exempt as a possessive repeat is; its body's rules hold.
                self.walk(av[0][1][2], mode)
            elif op is sre.ATOMIC_GROUP:
                self.walk(av, mode)
            elif op is sre.BRANCH:
                for branch in av[1]:
                    self.walk(branch, mode)
            elif op is sre.ASSERT or op is sre.ASSERT_NOT:
                self.walk(av[1], mode)
            elif op is sre.GROUPREF_EXISTS:
                self.walk(av[1], mode)
                if av[2] is not None:
                    self.walk(av[2], mode)

    def check_adjacent(self, nodes: Sequence[Node], mode: _Mode) -> None:
        for index, node in enumerate(nodes):
            tail = self.node_loops(node, mode, at_end=True)
            between: list[Node] = []
            for later in nodes[index + 1 :] if tail else ():
                overlap = tail & self.node_loops(later, mode, at_end=False)
                if overlap and all(self.fits(item, overlap, mode) for item in between):
                    self.findings.append(Finding("adjacent", f"{_show([node])} then {_show([later])}"))
                    break
                if not self.fits(later, tail, mode):
                    break
                between.append(later)

    def fits(self, node: Node, allowed: int, mode: _Mode) -> bool:
        """Whether ``node`` can match using only characters of ``allowed`` (True for what can match empty)."""
        op, av = node
        atom = self.atom_mask(op, av, mode)
        if atom is not None:
            return bool(atom & allowed)
        if op in _REPEATS:
            return av[0] == 0 or all(self.fits(item, allowed, mode) for item in av[2])
        if op is sre.SUBPATTERN:
            inner = mode.adjusted(av[1], av[2])
            return all(self.fits(item, allowed, inner) for item in av[3])
        if op is sre.ATOMIC_GROUP:
            return all(self.fits(item, allowed, mode) for item in av)
        if op is sre.BRANCH:
            return any(all(self.fits(item, allowed, mode) for item in branch) for branch in av[1])
        return True

    def check_repeated_body(self, body: Sequence[Node], mode: _Mode) -> None:
        for op, av, inner_mode in self.body_nodes(body, mode):
            if op in _REPEATS:
                high = _width(av[2])[1]
                if av[0] != av[1] and high > 0:
                    self.findings.append(Finding("nested", f"{_show([(op, av)])} inside a repeat"))
            elif op is sre.BRANCH:
                branches = av[1]
                widths = {_width(branch) for branch in branches}
                if len(widths) > 1 or any(low != high for low, high in widths):
                    self.findings.append(Finding("nested", f"alternation of varying length {_show([(op, av)])}"))
                seen = 0
                empties = 0
                for branch in branches:
                    mask, empty = self.first(branch, inner_mode)
                    empties += empty
                    if mask & seen or empties > 1:
                        self.findings.append(Finding("alternation", f"overlapping branches {_show([(op, av)])}"))
                        break
                    seen |= mask
            elif op is sre.GROUPREF or op is sre.GROUPREF_EXISTS:
                self.findings.append(Finding("nested", "back-reference inside a repeat"))

    def body_nodes(self, nodes: Sequence[Node], mode: _Mode) -> Iterator[tuple[Any, Any, _Mode]]:
        """Every node inside a repeated body, lookarounds aside (they consume nothing)."""
        for op, av in nodes:
            yield op, av, mode
            if op in _REPEATS:
                yield from self.body_nodes(av[2], mode)
            elif op is sre.SUBPATTERN:
                yield from self.body_nodes(av[3], mode.adjusted(av[1], av[2]))
            elif op is sre.ATOMIC_GROUP:
                yield from self.body_nodes(av, mode)
            elif op is sre.BRANCH:
                for branch in av[1]:
                    yield from self.body_nodes(branch, mode)
            elif op is sre.GROUPREF_EXISTS:
                yield from self.body_nodes(av[1], mode)
                if av[2] is not None:
                    yield from self.body_nodes(av[2], mode)


def _show(nodes: Sequence[Node]) -> str:
    text = repr(list(nodes))
    return text if len(text) <= 160 else text[:157] + "..."


def audit_pattern(pattern: str | bytes, flags: int = 0) -> list[Finding]:
    """Every overlapping repetition in ``pattern`` (empty when it is safe by the three rules of this module)."""
    parsed = sre_parse.parse(pattern, flags)
    analyser = _Analyser(parsed, flags, isinstance(pattern, bytes))
    analyser.walk(list(parsed), analyser.mode)
    return analyser.findings


# --- finding the patterns in the source --------------------------------------------------------------------------


class _Unresolved(Exception):
    pass


class _Namespace(dict[str, Any]):
    """Module-level names of one file, folded on demand; anything not a constant raises :class:`_Unresolved`."""

    def __init__(self, tree: ast.Module, module: str | None, local: frozenset[str]) -> None:
        super().__init__()
        self.module = module
        self.local = local
        self.assigned: dict[str, ast.expr] = {}
        self.imported: dict[str, tuple[str, str]] = {}
        for statement in tree.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                if isinstance(target, ast.Name):
                    self.assigned[target.id] = statement.value
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                if isinstance(statement.target, ast.Name):
                    self.assigned[statement.target.id] = statement.value
            elif isinstance(statement, ast.ImportFrom):
                source = self.absolute(statement)
                for alias in statement.names:
                    self.imported[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(statement, ast.Import):
                for alias in statement.names:
                    self.imported[alias.asname or alias.name] = (alias.name, "")

    def absolute(self, statement: ast.ImportFrom) -> str:
        if not statement.level:
            return statement.module or ""
        package = (self.module or "").split(".")
        base = package[: len(package) - statement.level]
        return ".".join([*base, statement.module] if statement.module else base)

    def __missing__(self, name: str) -> Any:
        if name in self.local:
            raise _Unresolved(name)
        if name in {"str", "int", "len", "repr"}:
            return {"str": str, "int": int, "len": len, "repr": repr}[name]
        if name in self.imported:
            module, attribute = self.imported[name]
            try:
                loaded = importlib.import_module(module)
            except ImportError as error:
                raise _Unresolved(name) from error
            value = getattr(loaded, attribute) if attribute else loaded
            if attribute == "" and value is not re:
                raise _Unresolved(name)
            return value
        if name in self.assigned:
            value = _fold(self.assigned[name], self)
            self[name] = value
            return value
        raise _Unresolved(name)


def _fold(expression: ast.expr, namespace: _Namespace) -> Any:
    code = compile(ast.Expression(expression), "<regex audit>", "eval")
    try:
        return eval(code, {"__builtins__": {}}, namespace)  # the project's own constant expressions
    except _Unresolved:
        raise
    except Exception as error:
        raise _Unresolved(type(error).__name__) from error


def _function_locals(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    names = {arg.arg for arg in ast.walk(function.args) if isinstance(arg, ast.arg)}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _re_aliases(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    modules: set[str] = set()
    functions: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "re":
                    modules.add(alias.asname or "re")
        elif isinstance(node, ast.ImportFrom) and node.module == "re" and not node.level:
            for alias in node.names:
                if alias.name in _RE_FUNCTIONS:
                    functions[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module in ("hypothesis.strategies", "hypothesis"):
            for alias in node.names:
                if alias.name == "from_regex":
                    functions[alias.asname or alias.name] = "from_regex"
    return modules, functions


def _called(call: ast.Call, modules: set[str], functions: dict[str, str]) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr == "from_regex":
            return "from_regex"
        if func.attr in _RE_FUNCTIONS and isinstance(func.value, ast.Name) and func.value.id in modules:
            return func.attr
    elif isinstance(func, ast.Name) and func.id in functions:
        return functions[func.id]
    return None


def regex_sites_in_source(source: str, label: str, module: str | None = None) -> list[Site]:
    """The regular expressions in Python ``source`` (named ``label`` in the results; ``module`` is its dotted
    module name, for relative imports)."""
    tree = ast.parse(source)
    modules, functions = _re_aliases(tree)
    enclosing: dict[ast.AST, frozenset[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            names = frozenset(_function_locals(node))
            for inner in ast.walk(node):
                enclosing[inner] = enclosing.get(inner, frozenset()) | names
    sites: list[Site] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _called(node, modules, functions)
        if name is None:
            continue
        keywords = {keyword.arg: keyword.value for keyword in node.keywords if keyword.arg}
        expression = node.args[0] if node.args else keywords.get("pattern", keywords.get("regex"))
        if expression is None:
            continue
        namespace = _Namespace(tree, module, enclosing.get(node, frozenset()))
        position = _FLAGS_POSITION.get(name)
        flag_expression = keywords.get("flags")
        if flag_expression is None and position is not None and len(node.args) > position:
            flag_expression = node.args[position]
        try:
            value = _fold(expression, namespace)
        except _Unresolved:
            value = None
        if isinstance(value, re.Pattern):
            continue  # compiled elsewhere: audited where it was compiled
        flags = 0
        if flag_expression is not None:
            try:
                flags = int(_fold(flag_expression, namespace))
            except (_Unresolved, TypeError, ValueError):
                flags = 0
        text = value if isinstance(value, str | bytes) else None
        sites.append(Site(label, node.lineno, ast.unparse(expression), text, flags))
    return sites


def _module_name(path: Path, root: Path) -> str | None:
    relative = path.relative_to(root)
    if relative.parts[0] in ("soklet_core", "soklet_cli") and path.suffix == ".py":
        parts = list(relative.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)
    return None


def regex_sites(path: Path, root: Path) -> list[Site]:
    """The regular expressions in the Python file ``path`` of the project at ``root``."""
    return regex_sites_in_source(path.read_text(), path.relative_to(root).as_posix(), _module_name(path, root))


def _is_python(path: Path) -> bool:
    if path.suffix == ".py":
        return True
    if path.suffix:
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(200)
    except OSError:
        return False
    # An extension-less script is Python when its shebang names python (scripts/ holds bash today).
    shebang = head.split(b"\n", 1)[0]
    return shebang.startswith(b"#!") and b"python" in shebang


def project_python_files(root: Path) -> list[Path]:
    """Every Python file of the project (packages, tools, scripts, benchmarks, tests, examples), virtualenvs aside."""
    found: list[Path] = []
    for folder, subfolders, names in os.walk(root):
        # Pruned in place, so that .venv and node_modules are never walked.
        subfolders[:] = sorted(
            name for name in subfolders if name not in _SKIPPED_DIRS and not name.endswith(".egg-info")
        )
        found += [Path(folder) / name for name in sorted(names) if _is_python(Path(folder) / name)]
    return sorted(found)


if __name__ == "__main__":  # pragma: no cover - a manual report
    project = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(project))
    for file in project_python_files(project):
        for site in regex_sites(file, project):
            verdict = "computed" if site.pattern is None else audit_pattern(site.pattern, site.flags) or "ok"
            print(f"{site.path}:{site.line}: {site.source[:80]} -> {verdict}")
