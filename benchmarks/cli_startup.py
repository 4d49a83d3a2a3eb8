"""The CPU a ``soklet`` call costs as a whole process, against ``python -c pass`` in the same run.

Run: ``.venv/bin/python benchmarks/cli_startup.py [--rounds 15] [--quick] [--json]``.

Every case is a real process of the installed console script (the ``soklet`` beside this Python), its CPU read
from the kernel when it ends (user + system, ``os.wait4``), so start-up and imports count as a user pays them:

* ``python -c pass`` -- the interpreter's own start (the same site packages): the baseline;
* ``soklet --version``;
* ``soklet keys list`` of a keyring file made in a temporary folder (``soklet keys generate``);
* ``soklet fleet check`` of one running instance (``soklet serve --dev-key --admin-port 0``, started first and
  stopped at the end; its own CPU is not counted);
* the completion callback, what bash runs on ``soklet keys <TAB>`` (``_SOKLET_COMPLETE=complete_bash``).

Rounds are interleaved (each round runs every case once, in a rotated order) so that other load on the machine
falls on every case alike; each case reports its best and median, and its median against the baseline's median,
with the range of the per-round ratios. Targets: ``--version`` <= 4x, ``keys list`` <= 6x the baseline.

To compare with other code (such as an older commit in a git worktree), run this file with ``PYTHONPATH`` set to
that tree: the processes it starts inherit it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: Rounds of the full run, and of --quick.
ROUNDS: Final = 15
QUICK_ROUNDS: Final = 3
#: Seconds a case or the server's start may take before the run is abandoned (a bound, not a measurement).
STEP_TIMEOUT: Final = 120.0
#: The targets, as multiples of the baseline's CPU.
TARGETS: Final = {"soklet --version": 4.0, "soklet keys list": 6.0}
TOKEN: Final = "benchCliStartupToken-7d2f0c94a1e3"


@dataclass(frozen=True, slots=True)
class Case:
    """One command line to measure, with the environment it adds."""

    name: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


def _soklet() -> str:
    beside = Path(sys.executable).with_name("soklet")
    found = str(beside) if beside.exists() else shutil.which("soklet")
    if found is None:
        raise SystemExit("no soklet console script beside this Python or on PATH: pip install -e . first")
    return found


def _check(case: Case, cwd: Path) -> None:
    """Run ``case`` once, uncounted: it must exit 0 (a failing command would measure its error path)."""
    env = {**os.environ, **dict(case.env)}
    result = subprocess.run(case.argv, cwd=cwd, env=env, capture_output=True, timeout=STEP_TIMEOUT, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{case.name}: exit {result.returncode}: {result.stderr.decode(errors='replace')[-500:]}")


def _cpu_seconds(case: Case, cwd: Path) -> float:
    """The user + system CPU of one run of ``case``, read from the kernel as the process is reaped."""
    env = {**os.environ, **dict(case.env)}
    process = subprocess.Popen(case.argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{case.name}: exit {process.returncode}")
    return usage.ru_utime + usage.ru_stime


def _serve(folder: Path, soklet: str) -> tuple[subprocess.Popen[str], str]:
    token = folder / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    command = [soklet, "serve", "--dev-key", "--port", "0", "--json", "--admin-port", "0"]
    command += ["--admin-token-file", str(token), "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()  # the start-up JSON document: written once the listeners are up
    if not line.startswith("{"):
        process.kill()
        raise SystemExit("soklet serve did not start")
    admin_url = json.loads(line).get("admin_url")
    if not admin_url:
        process.kill()
        raise SystemExit("soklet serve --admin-port 0 named no admin URL")
    return process, str(admin_url)


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> None:
    """Measure every case, print the table and whether the targets are met."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds: a smoke run of seconds")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    options = parser.parse_args()
    rounds = QUICK_ROUNDS if options.quick else options.rounds
    soklet = _soklet()
    with tempfile.TemporaryDirectory(prefix="soklet-cli-startup-") as name:
        folder = Path(name)
        keyring = folder / "keyring.toml"
        subprocess.run(
            [soklet, "keys", "generate", "--keyring", str(keyring)], cwd=folder, capture_output=True, check=True
        )
        server, admin_url = _serve(folder, soklet)
        try:
            cases = [
                Case("python -c pass", (sys.executable, "-c", "pass")),
                Case("soklet --version", (soklet, "--version")),
                Case("soklet keys list", (soklet, "keys", "list", "--keyring", str(keyring))),
                Case("soklet fleet check (1)", (soklet, "fleet", "check", admin_url, "--token-file", "token")),
                Case(
                    "completion: soklet keys <TAB>",
                    (soklet,),
                    (("_SOKLET_COMPLETE", "complete_bash"), ("COMP_WORDS", "soklet keys "), ("COMP_CWORD", "2")),
                ),
            ]
            for case in cases:
                _check(case, folder)
            samples: dict[str, list[float]] = {case.name: [] for case in cases}
            for round_ in range(rounds):
                shift = round_ % len(cases)
                for case in cases[shift:] + cases[:shift]:
                    samples[case.name].append(_cpu_seconds(case, folder))
        finally:
            _stop(server)
    _report(samples, rounds, options.json)


def _report(samples: dict[str, list[float]], rounds: int, as_json: bool) -> None:
    base_name = "python -c pass"
    base = samples[base_name]
    rows = []
    for name, values in samples.items():
        ratios = [value / baseline for value, baseline in zip(values, base, strict=True)]
        rows.append(
            {
                "case": name,
                "best_ms": round(min(values) * 1000, 1),
                "median_ms": round(statistics.median(values) * 1000, 1),
                "ratio": round(statistics.median(values) / statistics.median(base), 2),
                "ratio_range": [round(min(ratios), 2), round(max(ratios), 2)],
                "target": TARGETS.get(name),
            }
        )
    if as_json:
        print(json.dumps({"rounds": rounds, "cases": rows}))
        return
    print(f"CPU per process (user + system), {rounds} interleaved rounds; ratio = median / median of {base_name}")
    print(f"{'case':34} {'best ms':>8} {'median ms':>10} {'ratio':>7} {'per-round range':>16}  target")
    for row in rows:
        low, high = row["ratio_range"]
        target = row["target"]
        verdict = "" if target is None else f"<= {target:g}x {'met' if row['ratio'] <= target else 'MISSED'}"
        print(
            f"{row['case']:34} {row['best_ms']:8.1f} {row['median_ms']:10.1f} {row['ratio']:6.2f}x "
            f"{low:7.2f}-{high:<7.2f}  {verdict}"
        )


if __name__ == "__main__":
    main()
