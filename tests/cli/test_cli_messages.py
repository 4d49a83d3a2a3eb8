"""What every ``soklet`` command says about what it was given, through the real command in subprocesses: paths
named in messages hidden where they look like key material, escaped, bounded; ``--keyring`` bounded for every
command; usage errors that never quote a pasted key; help without ``<bool>``; the library's quiet logger; and the
test helper that scans keyrings for material, on hostile files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer

from soklet_cli._common import MAX_FILE_NAME_BYTES, parse_keyring
from soklet_cli.output import MAX_SHOWN_PATH_CHARS, counted, shown_path
from soklet_core.keys import decode_base64url, looks_like_key_material
from tests.conftest import Result, Soklet, materials_in

RING = "soklet-keyring.toml"
REPOSITORY = Path(__file__).resolve().parents[2]
#: A key's base64url text, as if pasted; fixed so that the material-shape rule's rare misses cannot flake a test.
PASTED = "hJ3kQ9vZx2Lw7Rt5mN8bY1cF4gP6sD0aE-uW_qK3oIk"
#: Longest stderr a refusal naming a path may print: the bounded path, a bounded detail naming a folder or lock file
#: under it, and the fixed words around them.
MAX_REFUSAL_CHARS = 2 * MAX_SHOWN_PATH_CHARS + 250
#: Generous: a helper that blocked on a FIFO would never return; a working one answers in well under a second.
PROMPT = 20.0
TOKEN = "AQcyMDI2LTA4"  # a header fragment: enough for inspect-state to get as far as reading its files

CONTROL = "ring\x1b[31m\x07.toml"
NOT_UTF8 = os.fsdecode(b"ring\xff.toml")
MATERIAL_FOLDER = f"keys/{PASTED}/ring.toml"
LONG = "/".join(["a" * 200] * 20)  # 4,019 characters: within the FILE bound, far beyond what a message shows


@pytest.fixture
def pasted(soklet: Soklet) -> str:
    # The leak scan of every output then knows the pasted text as a secret, fragments and all.
    assert looks_like_key_material(PASTED)
    soklet.remember(decode_base64url(PASTED))
    return PASTED


def keyring_commands(path: str) -> list[tuple[str, ...]]:
    """Every command that takes ``--keyring``, each given ``path``."""
    keys = [
        ("keys", "generate", "--id", "k1"),
        ("keys", "list"),
        ("keys", "stage", "--generate", "--id", "k2"),
        ("keys", "activate", "k1"),
        ("keys", "remove", "k1"),
        ("keys", "rotate", "--id", "k3"),
        ("keys", "export", "k1"),
        ("fingerprint",),
        ("seal-state", "--request", "call.json", "--state", "state.json"),
        ("inspect-state", TOKEN),
    ]
    return [(*args, "--keyring", path) for args in keys]


def assert_bounded_and_clean(result: Result, *hidden: str) -> None:
    assert "Traceback" not in result.output
    assert result.returncode in (2, 3), (result.args[:3], result.stderr)
    assert len(result.stderr) <= MAX_REFUSAL_CHARS, (result.args[:3], len(result.stderr))
    assert "\x1b" not in result.output
    assert "\x07" not in result.output
    for text in hidden:
        assert text not in result.output, result.args[:3]


# --- a count in a message ----------------------------------------------------------------------------------------


def test_a_count_agrees_with_its_noun() -> None:
    assert counted(1, "instance") == "1 instance"
    assert counted(0, "instance") == "0 instances"
    assert counted(2, "key") == "2 keys"
    assert counted(1_024, "task") == "1,024 tasks"
    assert counted(1, "entry", "entries") == "1 entry"
    assert counted(3, "entry", "entries") == "3 entries"


# --- a path in a message -----------------------------------------------------------------------------------------


def test_shown_path_keeps_an_ordinary_path() -> None:
    assert shown_path("/etc/soklet/keyring-2026.toml") == "/etc/soklet/keyring-2026.toml"
    assert shown_path(Path("prod-2026-09-01.2/ring.toml")) == "prod-2026-09-01.2/ring.toml"


def test_shown_path_hides_material_and_escapes_what_a_terminal_acts_on() -> None:
    assert shown_path(MATERIAL_FOLDER) == "keys/<a file name that looks like key material>/ring.toml"
    assert shown_path(CONTROL) == "ring\\x1b[31m\\x07.toml"
    assert shown_path(NOT_UTF8) == "ring\\xff.toml"
    assert shown_path("a\u2028b\x9bc") == "a\\u2028b\\x9bc"


def test_shown_path_is_bounded_at_its_edge() -> None:
    exact = "d/" * (MAX_SHOWN_PATH_CHARS // 2)
    assert shown_path(exact) == exact
    over = exact + "x"
    shown = shown_path(over)
    assert len(shown) == MAX_SHOWN_PATH_CHARS
    assert shown.startswith("d/d/")
    assert shown.endswith("d/x")
    assert "…" in shown
    # A cut never splits an escape, and a 100 KB name costs no more.
    escaped = shown_path("\x1b" * 100_000)
    assert len(escaped) <= MAX_SHOWN_PATH_CHARS
    assert escaped.replace("…", "").replace("\\x1b", "") == ""


@pytest.mark.slow
@pytest.mark.parametrize("path", [MATERIAL_FOLDER, LONG, f"missing/{NOT_UTF8}"], ids=["material", "long", "not-utf8"])
def test_every_keyring_command_names_a_missing_keyring_safely(soklet: Soklet, pasted: str, path: str) -> None:
    (soklet.cwd / "call.json").write_text('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}')
    (soklet.cwd / "state.json").write_text("{}")
    for result in soklet.run_together(*keyring_commands(path)):
        assert_bounded_and_clean(result, pasted[:16], pasted[-16:], "a" * (MAX_SHOWN_PATH_CHARS + 1), "\udcff")
        assert result.returncode == 3, (result.args[:3], result.stderr)
    if path.endswith(NOT_UTF8):
        assert "missing/ring\\xff.toml" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("path", [MATERIAL_FOLDER, LONG, CONTROL, NOT_UTF8], ids=["material", "long", "ctl", "utf8"])
def test_input_files_are_named_safely(soklet: Soklet, pasted: str, path: str) -> None:
    (soklet.cwd / "call.json").write_text('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}')
    (soklet.cwd / "state.json").write_text("{}")
    assert soklet.run("keys", "generate", "--id", "k1").returncode == 0
    token = soklet.run("seal-state", "--request", "call.json", "--state", "state.json").stdout.strip()
    results = soklet.run_together(
        ("canonicalize", path),
        ("canonicalize", "--params-digest", "--", path),
        ("inspect-state", "--keyring", RING, "--request", path, token),
        ("inspect-state", "--keyring", RING, "--request", "call.json", "--original-request", path, token),
        ("seal-state", "--request", path, "--state", "state.json"),
        ("seal-state", "--request", "call.json", "--state", path),
    )
    for index, result in enumerate(results):
        assert_bounded_and_clean(result, pasted[:16], pasted[-16:], "a" * (MAX_SHOWN_PATH_CHARS + 1), "\udcff")
        if index < 2 or path != CONTROL:  # FILE options refuse a control character (exit 2) before any read
            assert result.returncode == 3, (result.args[:3], result.stderr)
    if path == CONTROL:
        assert "ring\\x1b[31m\\x07.toml" in results[0].stderr


@pytest.mark.slow
def test_a_10_kb_keyring_name_is_a_bounded_usage_error_everywhere(soklet: Soklet) -> None:
    name = "k" * 10_000
    results = soklet.run_together(*keyring_commands(name))
    results += soklet.run_together(
        *(soklet.call(*args[:-2], env={"SOKLET_KEYRING": name}) for args in keyring_commands(name))
    )
    for result in results:
        assert_bounded_and_clean(result, "k" * 100)
        assert result.returncode == 2, (result.args[:3], result.stderr)
        assert "--keyring" in result.stderr


@pytest.mark.slow
def test_keyring_names_are_bounded_at_the_edge(soklet: Soklet) -> None:
    # The longest name taken is MAX_FILE_NAME_BYTES bytes (then the file system says it is too long: exit 3).
    at_limit = "/".join(["k" * 200] * 20) + "/" + "k" * (MAX_FILE_NAME_BYTES - 4_020)
    assert len(at_limit.encode()) == MAX_FILE_NAME_BYTES
    assert parse_keyring(at_limit) == at_limit
    with pytest.raises(typer.BadParameter, match="4,096 bytes"):
        parse_keyring(at_limit + "k")
    results = soklet.run_together(*keyring_commands(at_limit), *keyring_commands(at_limit + "k"))
    for result in results:
        assert_bounded_and_clean(result)
    assert [result.returncode for result in results] == [3] * 10 + [2] * 10


@pytest.mark.slow
def test_control_characters_in_a_keyring_name_are_refused_everywhere(soklet: Soklet) -> None:
    results = soklet.run_together(*keyring_commands(CONTROL))
    for result in results:
        assert_bounded_and_clean(result)
        assert result.returncode == 2


# --- usage errors ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_usage_errors_never_quote_pasted_material(soklet: Soklet, pasted: str) -> None:
    results = soklet.run_together(
        ("keys", "list", f"--{pasted}"),
        ("keys", "list", f"--{pasted}=1"),
        ("keys", "list", f"--{pasted[:20]}"),  # a fragment of 20 characters is material-shaped too
        ("seal-state", f"--x{pasted}"),
        (pasted,),
        ("keys", pasted),
        ("keys", "list", "extra", pasted),
        ("fingerprint", "--version", pasted),
        ("canonicalize", "--max-bytes", pasted),
    )
    for result in results:
        assert result.returncode == 2, (result.args, result.stderr)
        assert "Traceback" not in result.output
        assert pasted[:16] not in result.output
        assert pasted[-16:] not in result.output
        assert result.stderr.count("\n") == 1
    assert "No such option" in results[0].stderr
    assert "No such command" in results[4].stderr


@pytest.mark.slow
def test_usage_errors_still_name_a_mistyped_option_or_command(soklet: Soklet) -> None:
    option, command, extra = soklet.run_together(("keys", "list", "--jsn"), ("keys", "lst"), ("keys", "list", "x"))
    assert "--jsn" in option.stderr
    assert "'lst'" in command.stderr
    assert "x" in extra.stderr
    assert {option.returncode, command.returncode, extra.returncode} == {2}


# --- help --------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_no_help_shows_a_bool_metavar(soklet: Soklet) -> None:
    keys = ("generate", "list", "stage", "activate", "remove", "rotate", "export")
    commands = ("canonicalize", "fingerprint", "inspect-state", "seal-state", "serve")
    results = soklet.run_together(
        ("--help",),
        ("keys", "--help"),
        *((name, "--help") for name in commands),
        *(("keys", name, "--help") for name in keys),
    )
    for result in results:
        assert result.returncode == 0, result.args
        assert "<bool>" not in result.stdout, result.args
        assert "--help" in result.stdout
    assert "--version" in results[0].stdout
    assert "--json" in results[2].stdout  # canonicalize: the flag itself is still listed


# --- the library's logger ------------------------------------------------------------------------------------------


def test_the_library_logs_nothing_to_stderr_unless_the_application_asks() -> None:
    # A refusal the sealer logs for operators reaches no last-resort stderr handler in a program that set none up.
    program = textwrap.dedent(
        """
        from soklet_core.json import parse
        from soklet_core.keys import ProtectionKey, ProtectionKeyring
        from soklet_core.protection import (
            ANONYMOUS_PARTITION, ProtectionConfig, RequestStateProtectionException, RequestStateSealer, bind_request,
        )
        ring = ProtectionKeyring(ProtectionKey.generate("k1"))
        sealer = RequestStateSealer(ProtectionConfig(keyring=ring))
        request = parse(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}')
        bound = bind_request(request, path="/mcp", partition=ANONYMOUS_PARTITION)
        try:
            sealer.seal(parse(b'"' + b"x" * 200_000 + b'"'), bound)
        except RequestStateProtectionException as error:
            print("refused", error.reason.value)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=REPOSITORY, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "refused too-large\n"
    assert done.stderr == ""


# --- the leak scanner on hostile files ---------------------------------------------------------------------------


def test_materials_in_skips_nesting_and_huge_numbers(tmp_path: Path) -> None:
    (tmp_path / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    (tmp_path / "digits.toml").write_text("a = " + "7" * 5_000 + "\n")
    (tmp_path / "ring.toml").write_text(f'[[keys]]\nid = "k1"\nmaterial = "{PASTED}"\n')
    assert materials_in(tmp_path) == {decode_base64url(PASTED)}


def test_materials_in_never_waits_on_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.toml")
    os.mkfifo(tmp_path / "material.fifo")
    (tmp_path / "ring.toml").write_text('[[keys]]\nid = "k1"\nmaterial_file = "material.fifo"\n')
    program = (
        f"from tests.conftest import materials_in; print(materials_in(__import__('pathlib').Path({str(tmp_path)!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=REPOSITORY, capture_output=True, text=True, timeout=PROMPT, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "set()\n"


# --- soklet serve: the same bounds before it listens ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("path", [MATERIAL_FOLDER, LONG, CONTROL], ids=["material", "long", "control"])
def test_serve_names_its_keyring_bounded_and_clean(soklet: Soklet, pasted: str, path: str) -> None:
    result = soklet.run("serve", "--port", "0", "--keyring", path, timeout=PROMPT)
    assert_bounded_and_clean(result, pasted, "\x1b[31m")


@pytest.mark.slow
def test_serve_refuses_an_empty_or_oversized_keyring_name(soklet: Soklet) -> None:
    for name in ("", "a" * (MAX_FILE_NAME_BYTES + 1)):
        result = soklet.run("serve", "--port", "0", "--keyring", name, timeout=PROMPT)
        assert result.returncode == 2, result.stderr
        assert_bounded_and_clean(result)


def test_serve_does_not_echo_a_pasted_app_reference(soklet: Soklet, pasted: str) -> None:
    result = soklet.run("serve", "--port", "0", "--app", f"{pasted}:registry", timeout=PROMPT)
    assert result.returncode == 2, result.stderr
    assert_bounded_and_clean(result, pasted)


@pytest.mark.slow
def test_serve_does_not_echo_control_characters_of_its_host(soklet: Soklet) -> None:
    result = soklet.run("serve", "--port", "0", "--host", "no\x1b[31mhost\x07", timeout=PROMPT)
    assert result.returncode == 3, result.stderr
    assert_bounded_and_clean(result)
