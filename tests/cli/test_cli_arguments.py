"""Every numeric, time and text option of ``seal-state`` and ``inspect-state`` has bounds: an out-of-bounds value
exits 2 with one bounded line that does not repeat it, never 70 or a traceback. Also the one duration parser at its
edges, and the CLI's last guard (usage errors with bytes that are not UTF-8, a closed pipe, a closed stdout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from soklet_cli._common import (
    DURATION_HELP,
    MAX_DURATION,
    MAX_FILE_NAME_BYTES,
    MAX_PARTITION_CHARS,
    MAX_PROTOCOL_VERSION_CHARS,
    MAX_ROUNDS,
    MAX_TIME_MS,
    duration_text,
    parse_duration,
    parse_endpoint_path,
    parse_file,
    parse_partition,
    parse_protocol_version,
    parse_rounds,
    parse_time,
)
from soklet_cli.app import MAX_ERROR_CHARS, MIN_WITHHELD_ARGUMENT_CHARS
from soklet_cli.fleet import parse_timeout
from soklet_core.files import MAX_FLEET_TIMEOUT_SECONDS, read_keyring_file
from soklet_core.protection import (
    MAX_ENDPOINT_PATH_CHARS,
    ProtectionConfig,
    RequestStateSealer,
    SealedStateContents,
    partition_digest,
)
from tests.conftest import Call, Result, Soklet

RING = "soklet-keyring.toml"
T0 = "2026-08-01T00:00:00Z"
LATER = "2026-08-01T00:05:00Z"

HUGE = "1" + "0" * 30  # 10**30
BIG = "9" * 100_000  # 100 KB
NOT_UTF8 = os.fsdecode(b"\xff\xfe")  # argv bytes that are not UTF-8 arrive as surrogate escapes
CONTROL = "\x1b[31mred\x07"
ARABIC = "١٢٣"  # Arabic-Indic digits: str.isdigit() and int() take them
#: Values that must never come back in an error message (a prefix stands for the 100 KB one).
SECRET_LOOKING = {HUGE: HUGE, BIG: BIG[:64], NOT_UTF8: "\udcff", CONTROL: "\x1b", ARABIC: ARABIC}

# ------------------------------------------------------------------------------------------ parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("8784h", 366 * 86400),  # the maximum, in each unit
        ("527040m", 366 * 86400),
        ("31622400s", 366 * 86400),
        ("1s", 1),
        ("15m", 900),
        ("1h30m", 5400),
        ("1h0m1s", 3601),
        ("0h1s", 1),
        ("00000001h00000001m000000001s", 3661),  # 28 characters
        ("000000001h000000001m000000001s", 3661),  # 30 characters: the longest text looked at
    ],
)
def test_parse_duration_accepts(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text",
    [
        "8785h",  # 366 days + 1 h
        "527041m",
        "31622401s",
        "0s",
        "0h0m0s",
        "1m1h",  # units out of order
        "1h1h",
        "١٢٣s",
        "١٢٣",
        "15",  # no unit
        "",
        "h",
        "1x",
        " 15m",
        "15m ",
        "-15m",
        "+15m",
        "1.5h",
        "1_0s",
        "1e3s",
        "99999999999h",  # 11 digits
        "0000000001s",  # 10 digits in one part
        "000000001h000000001m000000001s1",  # 31 characters
        "9" * 100_000 + "s",
    ],
)
def test_parse_duration_refuses_without_repeating_the_text(text: str) -> None:
    with pytest.raises(typer.BadParameter) as caught:
        parse_duration(text)
    if len(text) >= 3 and text not in DURATION_HELP:
        assert text not in str(caught.value)
    assert len(str(caught.value)) < 120


def test_parse_duration_takes_zero_only_when_asked() -> None:
    assert parse_duration("0s", zero=True) == timedelta(0)
    assert parse_duration("0h0m0s", zero=True, maximum=timedelta(minutes=5)) == timedelta(0)
    assert parse_duration("5m", zero=True, maximum=timedelta(minutes=5)) == timedelta(minutes=5)
    with pytest.raises(typer.BadParameter, match="positive"):
        parse_duration("0s")
    with pytest.raises(typer.BadParameter, match="zero or more and at most 300 s"):
        parse_duration("5m1s", zero=True, maximum=timedelta(minutes=5))


def test_parse_duration_says_a_bare_number_has_no_unit_and_takes_a_maximum() -> None:
    with pytest.raises(typer.BadParameter, match="no unit"):
        parse_duration("15")
    assert timedelta(days=366) == MAX_DURATION
    assert parse_duration("5m", maximum=timedelta(minutes=5)) == timedelta(minutes=5)
    with pytest.raises(typer.BadParameter, match=r"at most (5 m|300 s)"):
        parse_duration("301s", maximum=timedelta(minutes=5))


@pytest.mark.parametrize(
    ("text", "milliseconds"),
    [
        ("0.5s", 500),
        ("0.001s", 1),
        ("1m2.25s", 62_250),
        ("1h0.999s", 3_600_999),
        ("2s", 2000),
        ("000000001h000000001m000000001.125s", 3_661_125),  # 34 characters: the longest text looked at
    ],
)
def test_parse_duration_takes_milliseconds_on_seconds_when_asked(text: str, milliseconds: int) -> None:
    assert parse_duration(text, fractional=True) == timedelta(milliseconds=milliseconds)
    if "." in text:
        with pytest.raises(typer.BadParameter):
            parse_duration(text.replace(".", ","), fractional=True)
        with pytest.raises(typer.BadParameter):
            parse_duration(text)  # without the flag a fraction is refused, as before


@pytest.mark.parametrize(
    "text", ["0.0001s", "1.s", ".5s", "1.5m", "1.5h", "0.000s", "1.5", "1..5s", "1.5s5", "0000000001.5s"]
)
def test_parse_duration_refuses_malformed_fractions(text: str) -> None:
    with pytest.raises(typer.BadParameter) as caught:
        parse_duration(text, fractional=True)
    assert text not in str(caught.value)


def test_parse_duration_takes_a_bare_number_as_seconds_only_when_asked_and_only_whole() -> None:
    assert parse_duration("5", bare_seconds=True) == timedelta(seconds=5)
    assert parse_duration("0.25", bare_seconds=True, fractional=True) == timedelta(milliseconds=250)
    assert parse_duration("1m", bare_seconds=True) == timedelta(minutes=1)  # units still work
    for text in ("1m5", "1h30", "0.25"):  # a trailing number is not seconds; a fraction needs the flag
        with pytest.raises(typer.BadParameter):
            parse_duration(text, bare_seconds=True)
    with pytest.raises(typer.BadParameter, match="no unit"):
        parse_duration("5")


def test_parse_duration_takes_the_options_own_message() -> None:
    for text in ("", "x", "0", "99999999999h", "9" * 100_000, "8785h"):
        with pytest.raises(typer.BadParameter) as caught:
            parse_duration(text, message="the wait is 1s to 1h")
        assert str(caught.value) == "the wait is 1s to 1h"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5", 5.0), ("0.5", 0.5), ("0.001", 0.001), (f"{MAX_FLEET_TIMEOUT_SECONDS:g}", MAX_FLEET_TIMEOUT_SECONDS)],
)
def test_fleet_timeout_is_the_one_parser_in_seconds(text: str, seconds: float) -> None:
    assert parse_timeout(text) == seconds
    assert parse_timeout(text + "s") == seconds


@pytest.mark.parametrize("text", ["0", "0.0", "0.0001", f"{MAX_FLEET_TIMEOUT_SECONDS:g}.001", "5.", ".5", "1e3", "-1"])
def test_fleet_timeout_refuses_outside_its_bounds(text: str) -> None:
    with pytest.raises(typer.BadParameter, match="number of seconds above 0"):
        parse_timeout(text)


@given(st.integers(min_value=1, max_value=366 * 86_400_000))
def test_duration_text_is_read_back_exactly(milliseconds: int) -> None:
    span = timedelta(milliseconds=milliseconds)
    text = duration_text(span)
    assert parse_duration(text, fractional=True) == span
    if milliseconds % 1000 == 0:
        assert parse_duration(text) == span


def test_duration_text_is_the_shortest_spelling() -> None:
    cases = {
        timedelta(minutes=15): "15m",
        timedelta(seconds=10): "10s",
        timedelta(seconds=5400): "1h30m",
        timedelta(seconds=3601): "1h1s",
        timedelta(milliseconds=1500): "1.5s",
        timedelta(milliseconds=60_001): "1m0.001s",
        timedelta(days=2): "48h",
    }
    assert {span: duration_text(span) for span in cases} == cases
    for bad in (timedelta(0), timedelta(seconds=-1), timedelta(microseconds=1500)):
        with pytest.raises(ValueError, match="milliseconds"):
            duration_text(bad)


# ------------------------------------------------------------------------------------------ the table


@dataclass(frozen=True)
class Case:
    """One command line and the exit code it must end with."""

    id: str
    args: tuple[str, ...]
    code: int


def seal(*extra: str) -> tuple[str, ...]:
    return ("seal-state", "--request", "call.json", "--state", "state.json", "--at", T0, *extra)


def inspect(*extra: str) -> tuple[str, ...]:
    return ("inspect-state", "--keyring", RING, "--request", "retry.json", "--at", LATER, *extra, "{token}")


def replaced(args: tuple[str, ...], option: str, value: str) -> tuple[str, ...]:
    """``args`` with the value of ``option`` replaced by ``value``."""
    index = args.index(option)
    return (*args[: index + 1], value, *args[index + 2 :])


CASES = [
    # --lifetime: the one duration parser (item 8: 99999999999h and ١٢٣ were exit 70 and 123 s)
    Case("lifetime-11-digits", seal("--lifetime", "99999999999h"), 2),
    Case("lifetime-arabic-digits", seal("--lifetime", ARABIC), 2),
    Case("lifetime-no-unit", seal("--lifetime", "15"), 2),
    Case("lifetime-100kb", seal("--lifetime", BIG), 2),
    Case("lifetime-max", seal("--lifetime", "8784h"), 0),
    Case("lifetime-max+1", seal("--lifetime", "8785h"), 2),
    Case("inspect-lifetime-no-unit", inspect("--lifetime", "15"), 2),
    Case("inspect-lifetime-100kb", inspect("--lifetime", BIG), 2),
    Case("inspect-lifetime-max", inspect("--lifetime", "8784h"), 0),
    Case("inspect-lifetime-max+1", inspect("--lifetime", "8785h"), 2),
    # --protocol-version: bytes that are not UTF-8 were exit 70
    Case("protocol-not-utf8", seal("--protocol-version", NOT_UTF8), 2),
    Case("protocol-control", seal("--protocol-version", CONTROL), 2),
    Case("protocol-100kb", seal("--protocol-version", BIG), 2),
    Case("protocol-empty", seal("--protocol-version", ""), 2),
    Case("protocol-max", seal("--protocol-version", "v" * MAX_PROTOCOL_VERSION_CHARS), 0),
    Case("protocol-max+1", seal("--protocol-version", "v" * (MAX_PROTOCOL_VERSION_CHARS + 1)), 2),
    Case("inspect-protocol-not-utf8", inspect("--protocol-version", NOT_UTF8), 2),
    # --round / --max-rounds
    Case("round-10**30", seal("--round", HUGE), 2),
    Case("round-arabic", seal("--round", ARABIC), 2),
    Case("round-negative", seal("--round", "-5"), 2),
    Case("round-max", seal("--round", str(MAX_ROUNDS), "--max-rounds", str(MAX_ROUNDS)), 0),
    Case("round-max+1", seal("--round", str(MAX_ROUNDS + 1)), 2),
    Case("max-rounds-10**30", seal("--max-rounds", HUGE), 2),
    Case("max-rounds-zero", seal("--max-rounds", "0"), 2),
    Case("inspect-max-rounds-10**30", inspect("--max-rounds", HUGE), 2),
    Case("inspect-max-rounds-control", inspect("--max-rounds", CONTROL), 2),
    # --at: 5,000 digits were exit 70 (int() refuses more than 4,300); 10**30, -5 and ١٢٣ were sealed as times
    Case("at-100kb", replaced(seal(), "--at", BIG), 2),
    Case("at-10**30", replaced(seal(), "--at", HUGE), 2),
    Case("at-negative", replaced(seal(), "--at", "-5"), 2),
    Case("at-arabic-digits", replaced(seal(), "--at", ARABIC), 2),
    Case("at-empty", replaced(seal(), "--at", ""), 2),
    Case("at-max", replaced(seal(), "--at", str(MAX_TIME_MS)), 0),
    Case("at-max+1", replaced(seal(), "--at", str(MAX_TIME_MS + 1)), 2),
    Case("at-iso-before-1970", replaced(seal(), "--at", "0001-01-01T00:00:00+01:00"), 2),
    Case("inspect-at-100kb", replaced(inspect(), "--at", BIG), 2),
    Case("inspect-at-not-utf8", replaced(inspect(), "--at", NOT_UTF8), 2),
    # --partition: bytes that are not UTF-8 were a misleading "--request: invalid-binding"
    Case("partition-not-utf8", seal("--partition", NOT_UTF8), 2),
    Case("partition-control", seal("--partition", CONTROL), 2),
    Case("partition-100kb", seal("--partition", BIG), 2),
    Case("partition-empty", seal("--partition", ""), 2),
    Case("partition-max", seal("--partition", "p" * MAX_PARTITION_CHARS), 0),
    Case("partition-max+1", seal("--partition", "p" * (MAX_PARTITION_CHARS + 1)), 2),
    Case("inspect-partition-not-utf8", inspect("--partition", NOT_UTF8), 2),
    # --path: the normalizer's bound
    Case("path-max", seal("--path", "/" + "a" * (MAX_ENDPOINT_PATH_CHARS - 1)), 0),
    Case("path-max+1", seal("--path", "/" + "a" * MAX_ENDPOINT_PATH_CHARS), 2),
    Case("path-not-utf8", seal("--path", "/" + NOT_UTF8), 2),
    Case("path-control", seal("--path", "/" + CONTROL), 2),
    Case("inspect-path-100kb", inspect("--path", "/" + BIG), 2),
    # FILE options: "" was "." (a directory, exit 3); 100 KB names were repeated whole
    Case("request-empty", replaced(seal(), "--request", ""), 2),
    Case("state-100kb", replaced(seal(), "--state", BIG), 2),
    Case("inspect-keyring-control", replaced(inspect(), "--keyring", CONTROL), 2),
    Case("inspect-original-empty", inspect("--original-request", ""), 2),
    Case("inspect-file-name-max+1", replaced(inspect(), "--request", "f" * (MAX_FILE_NAME_BYTES + 1)), 2),
    # the guard: usage errors that Click itself reports
    Case("unknown-command-not-utf8", (NOT_UTF8,), 2),
    Case("unknown-option-control", ("seal-state", "--x" + CONTROL + NOT_UTF8), 2),
    Case("extra-argument-100kb", ("inspect-state", "a", BIG), 2),
]
#: At most this many commands run at once (the machine is shared).
BATCH = 6


@pytest.fixture(scope="module")
def table_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("arguments")


@pytest.fixture(scope="module")
def table(table_folder: Path) -> Iterator[dict[str, Result]]:
    folder = table_folder
    env = {name: value for name, value in os.environ.items() if name not in {"SOKLET_KEYRING"}}
    env.update(COLUMNS="200", NO_COLOR="1")
    soklet = Soklet(folder, env)
    assert soklet.run("keys", "generate", "--id", "k1").returncode == 0
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "arguments": {}}}
    (folder / "call.json").write_text(json.dumps(request))
    (folder / "retry.json").write_text(json.dumps({**request, "id": 2}))
    (folder / "state.json").write_text('{"step": 1}')
    sealed = soklet.run(*seal())
    assert sealed.returncode == 0, sealed.stderr
    token = sealed.stdout.strip()
    results: dict[str, Result] = {}
    for start in range(0, len(CASES), BATCH):
        batch = CASES[start : start + BATCH]
        calls = [Call(tuple(token if arg == "{token}" else arg for arg in case.args)) for case in batch]
        for case, result in zip(batch, soklet.run_together(*calls, timeout=60), strict=True):
            results[case.id] = result
    yield results
    soklet.assert_no_leak()


def test_the_table_is_reasonable() -> None:
    assert 40 <= len(CASES) <= 60
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_option_bounds(table: dict[str, Result], case: Case) -> None:
    result = table[case.id]
    assert result.returncode == case.code, (case.id, result.stderr[:400])
    assert "Traceback" not in result.output
    if case.code != 2:
        return
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[:400]
    assert lines[0].startswith("soklet: ")
    assert len(lines[0]) <= MAX_ERROR_CHARS + 100
    assert result.stdout == ""
    for value, shown in SECRET_LOOKING.items():
        if any(value in arg for arg in case.args):
            assert shown not in result.output, case.id
    assert "internal error" not in result.stderr


@pytest.mark.slow
def test_bounded_values_are_used_as_given(table: dict[str, Result], table_folder: Path) -> None:
    # The edge values that pass are taken exactly: the core library reads them back from the tokens.
    keyring = read_keyring_file(table_folder / RING).keyring()
    sealer = RequestStateSealer(ProtectionConfig(keyring=keyring), clock=lambda: 0)

    def contents(case: str) -> SealedStateContents:
        opened = sealer.diagnose(table[case].stdout.strip()).contents
        assert opened is not None, case
        return opened

    assert contents("round-max").round == MAX_ROUNDS
    assert contents("at-max").issued_at_ms == MAX_TIME_MS
    lifetime = contents("lifetime-max")
    assert lifetime.expires_at_ms - lifetime.issued_at_ms == 366 * 86_400_000
    assert contents("protocol-max").binding.protocol_version == "v" * MAX_PROTOCOL_VERSION_CHARS
    assert contents("partition-max").binding.partition_digest == partition_digest("p" * MAX_PARTITION_CHARS)
    assert contents("path-max").binding.path == "/" + "a" * (MAX_ENDPOINT_PATH_CHARS - 1)


# ------------------------------------------------------------------------------------------ the last guard


def soklet_process(folder: Path, *args: str, **options: object) -> subprocess.Popen[bytes]:
    env = {name: value for name, value in os.environ.items() if name != "SOKLET_KEYRING"}
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "soklet_cli", *args], cwd=folder, env={**env, "NO_COLOR": "1"}, **options
    )


@pytest.fixture(scope="module")
def token(table: dict[str, Result]) -> str:
    return table["lifetime-max"].stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("inspect-state", "--json", "{token}"),  # sys.stdout.write, flushed at the end
        ("inspect-state", "--keyring", RING, "--at", LATER, "{token}"),  # rich: writes and flushes as it goes
        ("--help",),
    ],
    ids=["json", "rich-table", "help"],
)
def test_a_reader_gone_before_any_write_ends_quietly(table_folder: Path, token: str, args: tuple[str, ...]) -> None:
    # `soklet ... | head -c0`: the reader is gone before the first write. As with `git log | head`: exit 0, no word.
    process = soklet_process(
        table_folder,
        *(token if arg == "{token}" else arg for arg in args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0
    assert stderr == ""


def test_a_reader_gone_mid_output_ends_quietly(table_folder: Path) -> None:
    # `soklet canonicalize big.json | head -c 16`: a megabyte of output cannot fit in the pipe, so the writer is
    # still writing when its reader leaves, whatever the machine's speed.
    document = "[" + ",".join(f'"{index:07d}"' for index in range(100_000)) + "]"
    process = soklet_process(
        table_folder, "canonicalize", "-", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdin.write(document.encode())
    process.stdin.close()
    assert process.stdout.read(16) == b'["0000000","0000'
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0
    assert stderr == ""


@pytest.mark.slow
def test_a_closed_stdout_and_a_full_disk_are_exit_3(table_folder: Path, token: str) -> None:
    closed = soklet_process(
        table_folder, "inspect-state", "--json", token, stderr=subprocess.PIPE, preexec_fn=close_stdout
    )
    _, closed_err = closed.communicate(timeout=60)
    assert closed.returncode == 3
    assert closed_err.decode() == "soklet: standard output is closed\n"
    with open("/dev/full", "wb") as full:
        process = soklet_process(table_folder, "inspect-state", "--json", token, stdout=full, stderr=subprocess.PIPE)
        _, full_err = process.communicate(timeout=60)
    assert process.returncode == 3
    assert full_err.decode().count("\n") == 1
    assert "Traceback" not in full_err.decode()
    assert full_err.decode().startswith("soklet: ")


def close_stdout() -> None:
    os.close(1)


def test_no_arguments_still_print_the_help(table_folder: Path) -> None:
    process = soklet_process(table_folder, "keys", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert b"soklet keys" in out
    assert err == b""


# ------------------------------------------------------------------------------------------ fuzzing


#: Text that reaches the parsers' corners: digits of other scripts, units, signs, separators, controls, the
#: surrogate escapes of argv bytes that are not UTF-8, and anything else.
fuzz_text = st.text(
    alphabet=st.sampled_from(list("0123456789hms-+:.TZ/ %?#~١٢٣\x00\x1b\x7f\x85\udcff\udc80é😀")), max_size=40
) | st.text(max_size=60)

PARSERS = {
    "duration": parse_duration,
    "rounds": parse_rounds,
    "time": parse_time,
    "path": parse_endpoint_path,
    "partition": parse_partition,
    "protocol-version": parse_protocol_version,
    "file": parse_file,
    "timeout": parse_timeout,
}


def refusal_of(parser: object, text: str) -> str | None:
    try:
        parser(text)  # type: ignore[operator]
    except typer.BadParameter as error:
        return str(error)
    return None


#: What each parser says when it refuses: a fixed text, whatever the input.
MESSAGES = {
    name: {refusal_of(parser, bad) for bad in ("", "\x1b", "9" * 100_000, "0", "0h", "15", "99999999999h")} - {None}
    for name, parser in PARSERS.items()
}


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(PARSERS)), text=fuzz_text)
def test_parsers_accept_within_bounds_or_refuse_with_a_fixed_message(name: str, text: str) -> None:
    parser = PARSERS[name]
    message = refusal_of(parser, text)
    if message is not None:
        assert message in MESSAGES[name]
        return
    value = parser(text)  # type: ignore[operator]
    if name == "duration":
        assert timedelta(0) < value <= MAX_DURATION
    elif name == "rounds":
        assert 1 <= value <= MAX_ROUNDS
    elif name == "time":
        assert 0 <= value <= MAX_TIME_MS
    elif name == "file":
        assert 0 < len(os.fsencode(str(value))) <= MAX_FILE_NAME_BYTES
    elif name == "timeout":
        assert 0 < value <= MAX_FLEET_TIMEOUT_SECONDS
    else:
        assert value == text
        text.encode("utf-8")  # valid UTF-8: the binding can digest it


FUZZED_OPTIONS = ("--round", "--max-rounds", "--at", "--lifetime", "--path", "--partition", "--protocol-version")


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(
    option=st.sampled_from(FUZZED_OPTIONS),
    value=fuzz_text.filter(lambda text: "\x00" not in text and can_be_argv(text)),
)
def test_seal_state_options_never_end_in_an_internal_error(
    table: dict[str, Result], table_folder: Path, option: str, value: str
) -> None:
    args = (*seal(), option, value)
    process = soklet_process(table_folder, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = process.communicate(timeout=60)
    assert process.returncode in (0, 1, 2), err[-400:]
    assert b"Traceback" not in out + err
    assert len(err.splitlines()) <= 1


def can_be_argv(text: str) -> bool:
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


@pytest.mark.slow
def test_a_refusal_the_core_also_logs_is_one_line(table: dict[str, Result], table_folder: Path) -> None:
    # The sealer logs "request state not sealed: too-large" for operators; the command says it once.
    request = {"jsonrpc": "2.0", "id": "x" * 60_000, "method": "tools/call", "params": {}}
    (table_folder / "big-id.json").write_text(json.dumps(request))
    args = replaced(seal(), "--request", "big-id.json")
    process = soklet_process(table_folder, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert err.decode() == "soklet: refused: too-large: the sealed state would exceed a size limit\n"
    assert out == b""


@pytest.mark.slow
def test_long_unplaced_arguments_are_withheld_short_ones_kept(table_folder: Path) -> None:
    # Click quotes the arguments it cannot place; a long one may be key material pasted by mistake.
    kept = "k" * (MIN_WITHHELD_ARGUMENT_CHARS - 1)
    withheld = "w" * MIN_WITHHELD_ARGUMENT_CHARS
    material = "c2VjcmV0IHNlY3JldCBzZWNyZXQgc2VjcmV0IHNlY3JldA"  # 43 characters, shaped like a key's material
    for extra, shown in ((kept, True), (withheld, False), (material, False)):
        process = soklet_process(
            table_folder, "inspect-state", "token", extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        _, err = process.communicate(timeout=60)
        assert process.returncode == 2
        assert (extra in err.decode()) is shown, err
        assert err.decode().count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "rich-table"])
def test_output_the_encoding_cannot_spell_is_one_line_and_exit_3(
    table: dict[str, Result], table_folder: Path, as_json: bool
) -> None:
    (table_folder / "zoe.json").write_text('{"who": "Zoë 😀"}', encoding="utf-8")
    token = subprocess.run(
        [sys.executable, "-m", "soklet_cli", *replaced(seal(), "--state", "zoe.json")],
        cwd=table_folder,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    args = ("inspect-state", "--keyring", RING, "--at", LATER, *(("--json",) if as_json else ()), token)
    env = {name: value for name, value in os.environ.items() if name != "SOKLET_KEYRING"}
    process = subprocess.run(
        [sys.executable, "-m", "soklet_cli", *args],
        cwd=table_folder,
        env={**env, "PYTHONIOENCODING": "ascii"},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert process.returncode == 3
    assert process.stderr.decode() == (
        "soklet: the output holds characters that the output encoding (ascii) cannot write; "
        "set PYTHONIOENCODING=utf-8\n"
    )
