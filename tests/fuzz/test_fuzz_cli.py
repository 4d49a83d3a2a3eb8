"""Fuzzing the ``soklet`` command line (issue 8: bounded errors, no traceback, no hang, no echo of key material).

For every command but ``serve``, hypothesis (derandomized, no shrinking, :data:`EXAMPLES_PER_COMMAND` examples
each: under a minute in all on two cores) gives one or two of its real options hostile values (the others keep
valid values, so that the run gets past them): huge, negative and non-ASCII numbers (``10**30``, ``-1``,
``١٢٣``), control characters, 10 KB strings, bytes that are not UTF-8, paths to a FIFO, a folder, character
devices like ``/dev/null`` and ``/dev/zero`` (made in the run folder), a 0644 keyring and a missing file, and
strings shaped like key material (43 base64url characters). Each run is the installed ``soklet`` console script
in a fresh 0700 folder holding a real keyring, with :data:`RUN_SECONDS` to finish (a hang is a failure). Every
run must:

* exit with a documented code: 0 done, 1 refused, 2 usage, 3 file or I/O problem, 4 no key opens the state;
  never 70 (internal error) and never a signal;
* print no ``Traceback``, and at most :data:`MAX_STDERR_BYTES` of errors (an error names the problem, it does not
  replay a 10 KB argument);
* never print a material-shaped value it was given (argument, environment variable or standard input), nor the
  keyring's own material (``keys export`` to standard output aside).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.support import FUZZ_SETTINGS, SOKLET, soklet_env

# Every test here runs soklet subprocesses and is marked slow; the folder's quick test is in test_fuzz_http.py
# (docs/testing.md).

#: Examples per command (11 commands; each example a subprocess of about 0.3 to 0.5 s).
EXAMPLES_PER_COMMAND = 5
#: Seconds one run may take.
RUN_SECONDS = 20
#: Documented exit codes (``soklet COMMAND --help``).
DOCUMENTED_EXITS = frozenset({0, 1, 2, 3, 4})
#: The most error output a run may print.
MAX_STDERR_BYTES = 16 * 1024

BASE64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
#: The environment variable ``--from-env`` is pointed at; it holds a material-shaped value.
MATERIAL_VAR = "SOKLET_FUZZ_MATERIAL"
KEY_ID = "fuzz-key"


def material_shaped(value: str | bytes) -> bool:
    """43 base64url characters: the text of a 32-byte key."""
    text = os.fsdecode(value) if isinstance(value, bytes) else value
    return len(text) == 43 and set(text) <= BASE64URL


materials = st.binary(min_size=32, max_size=32).map(lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=").decode())

Arg = str | bytes

# Hostile values by kind ------------------------------------------------------------------------------------------

HUGE = str(10**30)
NON_ASCII_DIGITS = "١٢٣"
CONTROL = "\x1b[31mred\x1b]0;title\x07\r\x08"
NOT_UTF8 = b"\xff\xfe\xc0\xaf"
LONG = "x" * 10_000

# Most hostile first: hypothesis draws early entries more often.
integers = st.one_of(
    st.sampled_from([HUGE, "99999999999999999999999", NON_ASCII_DIGITS, "-1", "0", "1025", "1000001", "2" * 5000]),
    st.sampled_from(["1e3", "0x10", "", " 5", "+5", "1", "32", "1024", "1000000", CONTROL, NOT_UTF8, b"1\xff"]),
)
durations = st.sampled_from(
    [
        *("99999999999h", f"{NON_ASCII_DIGITS}s", NON_ASCII_DIGITS, "9" * 5000 + "s", "-1s", "0s", "367d", "15"),
        *("", "1.5h", "1h1h", CONTROL, NOT_UTF8, "366d", "1h30m", "15m"),
    ]
)
times = st.sampled_from(
    [
        *("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "99999999999999999", HUGE, "-1", NON_ASCII_DIGITS),
        *("", "2026-13-45T99:99:99", CONTROL, NOT_UTF8, "0", "2026-01-01T00:00:00"),
    ]
)
endpoint_paths = st.sampled_from(
    ["/" + "a" * 40 + "%25", "/" + "a" * 5000, "/%" * 1000, "", "mcp", "/\x01", "/a/../../..", NOT_UTF8, "/mcp"]
)
texts = st.one_of(
    st.sampled_from([NOT_UTF8, LONG, CONTROL, "", "a" * 1025, "ü", "-x", "--json", "2026-07-28", "anonymous"]),
    materials,
)
key_ids = st.one_of(st.sampled_from([LONG, CONTROL, NOT_UTF8, "", "-", "ü", "a/b", "..", KEY_ID]), materials)
files = st.one_of(
    st.sampled_from(["fifo", "zero", "folder", "null", "", "loose.toml", "missing.toml", LONG, NOT_UTF8]),
    st.sampled_from(["-", "keyring.toml", "request.json", "state.json", "token.txt", "material.txt"]),
    materials,
)
env_names = st.sampled_from([MATERIAL_VAR, "", "1BAD", LONG, "UNSET_SOKLET_FUZZ", CONTROL, "PATH"])
roles = st.sampled_from(["", "ACTIVE", CONTROL, "active", "verification"])
versions = st.sampled_from(["3", "", "0", NON_ASCII_DIGITS[0], HUGE, "1", "2"])
tokens = st.one_of(st.sampled_from(["@long-token", "-", "", "v1.AAAA", "@token"]), materials, texts)
flag = st.just(None)


@dataclass(frozen=True)
class Option:
    """One option (or positional, upper-case name) of a command: its hostile values and the valid value it gets
    when it is not the one being fuzzed (None: left out)."""

    values: st.SearchStrategy[Arg | None]
    default: Arg | None = None


def keyring_options() -> dict[str, Option]:
    return {
        "--keyring": Option(files, "keyring.toml"),
        "--allow-insecure-permissions": Option(flag),
        "--json": Option(flag),
    }


# Every command but serve, with its real options (``soklet COMMAND --help``).
COMMANDS: dict[str, dict[str, Option]] = {
    "canonicalize": {
        "FILE": Option(files, "request.json"),
        "--params-digest": Option(flag),
        "--json": Option(flag),
        "--max-bytes": Option(integers),
    },
    "fingerprint": {"--version": Option(versions), **keyring_options()},
    "inspect-state": {
        "TOKEN": Option(tokens, "@token"),
        "--request": Option(files),
        "--original-request": Option(files),
        "--path": Option(endpoint_paths),
        "--partition": Option(texts),
        "--protocol-version": Option(texts),
        "--at": Option(times),
        "--max-rounds": Option(integers),
        "--lifetime": Option(durations),
        **keyring_options(),
    },
    "seal-state": {
        "--request": Option(files, "request.json"),
        "--state": Option(files, "state.json"),
        "--path": Option(endpoint_paths),
        "--partition": Option(texts),
        "--protocol-version": Option(texts),
        "--round": Option(integers),
        "--at": Option(times),
        "--lifetime": Option(durations),
        "--max-rounds": Option(integers),
        **keyring_options(),
    },
    "keys generate": {
        "--id": Option(key_ids),
        "--bytes": Option(integers),
        "--role": Option(roles),
        **keyring_options(),
    },
    "keys list": keyring_options(),
    "keys stage": {
        "--generate": Option(flag, ""),
        "--from-file": Option(files),
        "--from-env": Option(env_names),
        "--stdin": Option(flag),
        "--id": Option(key_ids),
        "--bytes": Option(integers),
        **keyring_options(),
    },
    "keys activate": {"ID": Option(key_ids, KEY_ID), **keyring_options()},
    "keys remove": {"ID": Option(key_ids, KEY_ID), **keyring_options()},
    "keys rotate": {
        "--id": Option(key_ids),
        "--bytes": Option(integers),
        "--state-lifetime": Option(durations),
        **keyring_options(),
    },
    "keys export": {
        "ID": Option(key_ids, KEY_ID),
        "--output": Option(files),
        "--force": Option(flag),
        **keyring_options(),
    },
}


def _argv(command: str, chosen: dict[str, Arg | None]) -> list[Arg]:
    argv: list[Arg] = list(command.split())
    for name, option in COMMANDS[command].items():
        if name in chosen:
            value = chosen[name]
        elif option.default is not None:
            value = None if option.default == "" else option.default
        else:
            continue
        if name.isupper():
            argv.append("" if value is None else value)
        elif value is None:
            argv.append(name)
        else:
            argv += [name, value]
    return argv


@st.composite
def invocations(draw: st.DrawFn, command: str) -> tuple[list[Arg], bytes]:
    """argv after ``soklet``: one or two options of ``command`` get hostile values, the others their valid
    defaults (so that the run gets past them); and standard input."""
    options = COMMANDS[command]
    targets = draw(st.lists(st.sampled_from(sorted(options)), min_size=1, max_size=2, unique=True))
    chosen = {name: draw(options[name].values) for name in targets}
    stdin = draw(st.sampled_from([b"MATERIAL\n", b"@deep", b"\xff\xfe", b"", b"{}", b'{"a":1}\n']))
    return _argv(command, chosen), stdin


# --- the runs ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Base:
    """A folder holding a real keyring and valid inputs, copied for every run."""

    folder: Path
    token: str
    env_material: str


def _run(argv: list[Arg], cwd: Path, env: dict[str, str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [SOKLET, *argv], cwd=cwd, env=env, input=stdin, capture_output=True, timeout=RUN_SECONDS, check=False
    )


@pytest.fixture(scope="module")
def base() -> Iterator[Base]:
    with tempfile.TemporaryDirectory(prefix="soklet-cli-fuzz-") as name:
        folder = Path(name) / "base"
        folder.mkdir(mode=0o700)
        env = soklet_env()
        made = _run(["keys", "generate", "--id", KEY_ID, "--keyring", "keyring.toml"], folder, env)
        assert made.returncode == 0, made.stderr
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "_meta": meta}}
        (folder / "request.json").write_text(json.dumps(request))
        (folder / "state.json").write_text('{"step": 1}')
        inputs = ["--request", "request.json", "--state", "state.json", "--keyring", "keyring.toml"]
        sealed = _run(["seal-state", *inputs], folder, env)
        assert sealed.returncode == 0, sealed.stderr
        token = sealed.stdout.decode().split()[-1]
        (folder / "token.txt").write_text(token)
        material_file = folder / "material.txt"
        material_file.write_text(base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode() + "\n")
        material_file.chmod(0o600)
        yield Base(folder, token, base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode())


def _keyring_materials(folder: Path) -> set[str]:
    try:
        data = tomllib.loads((folder / "keyring.toml").read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return set()
    keys = data.get("keys", [])
    return {key["material"] for key in keys if isinstance(key, dict) and isinstance(key.get("material"), str)}


def _prepare(base: Base) -> Path:
    run_folder = Path(tempfile.mkdtemp(prefix="run-", dir=base.folder.parent))
    for name in ("keyring.toml", "request.json", "state.json", "token.txt", "material.txt"):
        shutil.copy2(base.folder / name, run_folder / name)
    shutil.copy2(base.folder / "keyring.toml", run_folder / "loose.toml")
    (run_folder / "loose.toml").chmod(0o644)
    os.mkfifo(run_folder / "fifo", 0o600)
    (run_folder / "folder").mkdir()
    # Character devices like /dev/null and /dev/zero, but inside the run folder: a command that writes (or
    # atomically replaces) the file it is given must never reach the real ones (these tests may run as root).
    for name, minor in (("null", 3), ("zero", 5)):
        try:
            os.mknod(run_folder / name, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        except PermissionError:
            (run_folder / name).symlink_to(f"/dev/{name}")
    return run_folder


def check_run(base: Base, argv: list[Arg], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Run ``soklet ARGV`` in a fresh copy of ``base`` and check the contract of the module documentation."""
    # Large values are spelled short in the examples (readable failures) and expanded here.
    expand: dict[Arg, Arg] = {"@token": base.token, "@long-token": "A" * 100_000}
    argv = [expand.get(value, value) for value in argv]
    stdin = b"[" * 100_000 if stdin == b"@deep" else stdin.replace(b"MATERIAL", base.env_material.encode())
    run_folder = _prepare(base)
    env = {**soklet_env(), MATERIAL_VAR: base.env_material}
    try:
        completed = _run(argv, run_folder, env, stdin)
    except subprocess.TimeoutExpired:
        pytest.fail(f"soklet {argv!r:.300} did not finish in {RUN_SECONDS} s")
    out, err = completed.stdout.decode(errors="replace"), completed.stderr.decode(errors="replace")
    shown = f"soklet {argv!r:.400} -> {completed.returncode}\n{err[-2000:]}"
    assert completed.returncode in DOCUMENTED_EXITS, shown
    assert "Traceback" not in out + err, shown
    assert len(completed.stderr) <= MAX_STDERR_BYTES, shown
    given = {os.fsdecode(value) if isinstance(value, bytes) else value for value in argv if material_shaped(value)}
    given |= {base.env_material, (run_folder / "material.txt").read_text().strip()}
    keyring = _keyring_materials(run_folder) | _keyring_materials(base.folder)
    exported = argv[:2] == ["keys", "export"]
    for secret in given | keyring:
        assert secret not in err, f"material echoed on stderr: {shown}"
        if not (exported and secret in keyring):
            assert secret not in out, f"material echoed on stdout: {shown}"
    shutil.rmtree(run_folder, ignore_errors=True)
    return completed


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
@settings(FUZZ_SETTINGS, max_examples=EXAMPLES_PER_COMMAND)
@given(data=st.data())
def test_fuzz_cli(base: Base, command: str, data: st.DataObject) -> None:
    argv, stdin = data.draw(invocations(command), label="invocation")
    check_run(base, argv, stdin)


MATERIAL = "Qk9HVVMtbWF0ZXJpYWwtc2hhcGVkLTQzLWNoYXJzLXg"
SEAL = ["seal-state", "--request", "request.json", "--state", "state.json", "--keyring", "keyring.toml"]

#: The reproductions of issue 8 (items 6 to 9), with the exit codes that say "refused": the fuzz contract, plus
#: the refusal itself.
REPRODUCTIONS: list[tuple[list[Arg], frozenset[int]]] = [
    (["keys", "stage", "--generate", "--bytes", "800000", "--keyring", "keyring.toml"], frozenset({2})),
    (["keys", "list", "--keyring", "fifo"], frozenset({1, 2, 3})),
    (["keys", "stage", "--from-file", "fifo", "--keyring", "keyring.toml"], frozenset({1, 2, 3})),
    (["canonicalize", "--max-bytes", "99999999999999999999999", "request.json"], frozenset({2})),
    ([*SEAL, "--lifetime", "99999999999h"], frozenset({2})),
    ([*SEAL, "--lifetime", f"{NON_ASCII_DIGITS}s"], frozenset({2})),
    ([*SEAL, "--protocol-version", NOT_UTF8], frozenset({1, 2})),
    (["keys", "list", "--keyring", ""], frozenset({2, 3})),
    (["keys", "activate", MATERIAL, "--keyring", "keyring.toml"], frozenset({1, 2})),
    (["keys", "stage", "--generate", "--id", MATERIAL, "--keyring", "keyring.toml"], frozenset({1, 2})),
    (["keys", "list", "--keyring", MATERIAL], frozenset({1, 2, 3})),
]


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "refused"), REPRODUCTIONS, ids=lambda value: repr(value)[:60])
def test_issue_reproductions(base: Base, argv: list[Arg], refused: frozenset[int]) -> None:
    completed = check_run(base, argv)
    assert completed.returncode in refused, (argv, completed.returncode, completed.stderr[-500:])


@pytest.mark.slow
def test_setup_is_real(base: Base) -> None:
    # The base keyring is a real 0600 file in a 0700 folder, and soklet itself reads it.
    mode = stat.S_IMODE((base.folder / "keyring.toml").stat().st_mode)
    assert mode == 0o600
    listed = _run(["keys", "list", "--keyring", "keyring.toml", "--json"], base.folder, soklet_env())
    assert listed.returncode == 0, listed.stderr
    assert KEY_ID in listed.stdout.decode()
