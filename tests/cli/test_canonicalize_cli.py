"""``soklet canonicalize`` end to end, as real subprocesses (``python -m soklet_cli``)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MAX_REQUEST_BODY = 16 * 1024 * 1024

REQUEST = (
    '{"jsonrpc": "2.0", "id": 7, "method": "tools/call",\n'
    ' "params": {"name": "catalog.continue", "arguments": {"sku": "A-100", "quantity": 100, "price": 3.50,'
    ' "note": "café \U0001f600"},\n'
    '  "requestState": "opaque",\n'
    '  "_meta": {"progressToken": "p1", "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}\n'
).encode()
REQUEST_CANONICAL = (
    '{"id":7,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{'
    '"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"p1"},'
    '"arguments":{"note":"café \U0001f600","price":3.5,"quantity":1E+2,"sku":"A-100"},'
    '"name":"catalog.continue","requestState":"opaque"}}'
).encode()
# The stable params: requestState and _meta.progressToken removed.
STABLE_PARAMS_CANONICAL = (
    '{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},'
    '"arguments":{"note":"café \U0001f600","price":3.5,"quantity":1E+2,"sku":"A-100"},"name":"catalog.continue"}'
).encode()


def expected_digest(canonical: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()


def soklet(*args: str, stdin: bytes = b"", cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "soklet_cli", "canonicalize", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        env=env,
        cwd=cwd,
        check=False,
    )


def one_line(stderr: bytes) -> str:
    text = stderr.decode("utf-8")
    assert "Traceback" not in text
    lines = text.splitlines()
    assert len(lines) == 1, text
    return lines[0]


@pytest.fixture
def request_file(tmp_path: Path) -> Path:
    path = tmp_path / "request.json"
    path.write_bytes(REQUEST)
    return path


def test_canonical_form_of_a_file(request_file: Path) -> None:
    result = soklet(str(request_file))
    assert result.returncode == 0, result.stderr
    assert result.stdout == REQUEST_CANONICAL + b"\n"
    assert result.stderr == b""


def test_canonical_form_of_stdin() -> None:
    result = soklet("-", stdin=REQUEST)
    assert result.returncode == 0, result.stderr
    assert result.stdout == REQUEST_CANONICAL + b"\n"


@pytest.mark.slow
def test_params_digest_of_a_request_and_of_bare_params(tmp_path: Path, request_file: Path) -> None:
    want = expected_digest(STABLE_PARAMS_CANONICAL)
    result = soklet("--params-digest", str(request_file))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == want + "\n"
    bare = tmp_path / "params.json"
    bare.write_bytes(
        b' {"name":"catalog.continue","arguments":{"quantity":1E2,"price":3.5,"sku":"A-100",'
        b'"note":"caf\\u00e9 \\ud83d\\ude00"},'
        b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}'
    )
    result = soklet("--params-digest", str(bare))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == want + "\n"


@pytest.mark.slow
def test_json_output(request_file: Path) -> None:
    result = soklet("--json", str(request_file))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"canonical", "params_digest", "bytes"}
    assert document["canonical"].encode("utf-8") == REQUEST_CANONICAL
    assert document["bytes"] == len(document["canonical"].encode("utf-8"))
    assert document["bytes"] != len(document["canonical"])  # non-ASCII: bytes, not characters
    assert document["params_digest"] == expected_digest(STABLE_PARAMS_CANONICAL)


def test_params_digest_as_json(request_file: Path) -> None:
    result = soklet("--params-digest", "--json", str(request_file))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["params_digest"] == expected_digest(STABLE_PARAMS_CANONICAL)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("doc", "reason", "offset"),
    [
        pytest.param('{"é": 1, "\\u00e9": 2}'.encode(), "duplicate-member", 10, id="duplicate"),
        pytest.param(b"\xef\xbb\xbf{}", "byte-order-mark", 0, id="bom"),
        pytest.param(b'["\xe2\x82\xac", "\xff"]', "invalid-utf8", 9, id="invalid-utf8"),
        pytest.param(b'["\\ud800\\\\\\udc00"]', "lone-surrogate", 2, id="escaped-lone-surrogates"),
        pytest.param(b"[1, 01]", "invalid-number", 4, id="leading-zero"),
        pytest.param(b"[" * 257 + b"]" * 257, "depth-exceeded", 256, id="depth"),
        pytest.param(b"[12e10000]", "exponent-out-of-range", 1, id="exponent"),
        pytest.param(b"[1e1000000000000000000]", "exponent-out-of-range", 1, id="huge-exponent"),
        pytest.param(b"", "empty-input", 0, id="empty"),
    ],
)
def test_refused_input_exits_1_with_one_line_naming_reason_and_offset(doc: bytes, reason: str, offset: int) -> None:
    result = soklet("-", stdin=doc)
    assert result.returncode == 1
    line = one_line(result.stderr)
    assert reason in line
    assert f"byte {offset}" in line
    assert result.stdout == b""


def test_refused_input_with_params_digest_exits_1() -> None:
    result = soklet("--params-digest", "-", stdin=b'{"a":1,"a":2}')
    assert result.returncode == 1
    line = one_line(result.stderr)
    assert "duplicate-member" in line
    assert "byte 7" in line


@pytest.mark.slow
def test_params_digest_of_unstructured_params_is_refused() -> None:
    result = soklet("--params-digest", "-", stdin=b'{"jsonrpc":"2.0","method":"x","params":"text"}')
    assert result.returncode == 1
    assert "params-not-structured" in one_line(result.stderr)
    assert result.stdout == b""


@pytest.mark.slow
def test_missing_file_exits_3(tmp_path: Path) -> None:
    result = soklet(str(tmp_path / "does-not-exist.json"))
    assert result.returncode == 3
    one_line(result.stderr)
    result = soklet(str(tmp_path))  # a directory
    assert result.returncode == 3
    one_line(result.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--no-such-option", "x.json"], ["--max-bytes", "0", "-"], ["--max-bytes", "lots"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = soklet(*args, stdin=b"{}")
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr
    assert result.stdout == b""


@pytest.mark.slow
def test_help_mentions_an_example() -> None:
    result = soklet("--help")
    assert result.returncode == 0
    text = result.stdout.decode()
    assert "Example" in text
    assert "soklet canonicalize request.json" in text or "soklet canonicalize -" in text
    assert "--params-digest" in text
    assert "--json" in text


@pytest.mark.slow
def test_max_bytes_edge(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    doc = '{"b": 100, "a": "é"}'.encode()
    path.write_bytes(doc)
    at_limit = soklet("--max-bytes", str(len(doc)), str(path))
    assert at_limit.returncode == 0, at_limit.stderr
    assert at_limit.stdout == '{"a":"é","b":1E+2}\n'.encode()
    over = soklet("--max-bytes", str(len(doc) - 1), str(path))
    assert over.returncode == 1
    one_line(over.stderr)
    assert over.stdout == b""
    over_stdin = soklet("--max-bytes", str(len(doc) - 1), "-", stdin=doc)
    assert over_stdin.returncode == 1
    one_line(over_stdin.stderr)


@pytest.mark.slow
def test_max_bytes_refusal_names_its_reason_and_offset(tmp_path: Path) -> None:
    """Refused input: one line naming the reason and byte offset (issue 2), for over-large input too."""
    doc = b'{"a": [1, 2, 3]}'
    result = soklet("--max-bytes", str(len(doc) - 1), "-", stdin=doc)
    assert result.returncode == 1
    line = one_line(result.stderr)
    assert "input-too-large" in line
    assert f"byte {len(doc) - 1}" in line


# ------------------------------------------------------------------------------------------------ bounds (issue 8)


@pytest.mark.slow
@pytest.mark.parametrize("value", [str(MAX_REQUEST_BODY + 1), "99999999999999999999999"])
def test_max_bytes_beyond_the_largest_request_body_is_a_usage_error(value: str) -> None:
    result = soklet("--max-bytes", value, "-", stdin=b"{}")
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr
    assert b"--max-bytes" in result.stderr
    assert result.stdout == b""


@pytest.mark.slow
def test_max_bytes_at_the_largest_request_body_is_accepted() -> None:
    result = soklet("--max-bytes", str(MAX_REQUEST_BODY), "-", stdin=b'{"b": 100}')
    assert result.returncode == 0, result.stderr
    assert result.stdout == b'{"b":1E+2}\n'


@pytest.mark.slow
def test_json_output_streams_escapes_exactly_like_json_dumps(tmp_path: Path) -> None:
    doc = '{"t": "tab\\t quote\\" back\\\\ nul\\u0000 \\u2028 é \\ud83d\\ude00", "n": [1.50, -0, 1e400]}'
    path = tmp_path / "doc.json"
    path.write_text(doc, encoding="utf-8")
    result = soklet("--json", str(path))
    assert result.returncode == 0, result.stderr
    canonical = '{"n":[1.5,0,1E+400],"t":"tab\\t quote\\" back\\\\ nul\\u0000 \u2028 é \U0001f600"}'
    expected = {"canonical": canonical, "params_digest": expected_digest(canonical.encode()), "bytes": 0}
    expected["bytes"] = len(canonical.encode())
    assert result.stdout == (json.dumps(expected, ensure_ascii=False) + "\n").encode()


#: Peak RSS of ``canonicalize --json`` on 16 MiB of distinct decimals (2.3 million, so that no sharing of equal
#: tokens helps), in MiB. Measured (docs/benchmarks.md): 880 MiB before (value model, a second tree for the
#: canonical form, a third for the digest, the text and its escaped copy whole), about 280 MiB after (one
#: canonical-ready tree, output written piece by piece). 500 leaves 75 % headroom and still fails the old code.
PEAK_RSS_BOUND_MIB = 500


@pytest.mark.slow
def test_json_output_of_16_mib_keeps_memory_bounded(tmp_path: Path) -> None:
    head = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"rows":['
    tail = b"]}}}"
    items: list[bytes] = []
    size, index = len(head) + len(tail), 0
    while True:
        token = b"%d.%04d" % (index // 10_000 + 1, index % 10_000)
        if size + len(token) + 1 > MAX_REQUEST_BODY:
            break
        items.append(token)
        size += len(token) + 1
        index += 1
    doc = head + b",".join(items) + tail
    assert MAX_REQUEST_BODY - 16 < len(doc) <= MAX_REQUEST_BODY
    path = tmp_path / "big.json"
    path.write_bytes(doc)
    output = tmp_path / "out.json"
    # A fresh parent, so that RUSAGE_CHILDREN is this one command's peak alone.
    probe = (
        "import resource, subprocess, sys\n"
        "with open(sys.argv[2], 'wb') as out:\n"
        "    done = subprocess.run([sys.executable, '-m', 'soklet_cli', 'canonicalize', '--json', sys.argv[1]],"
        " stdout=out, check=False)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe, str(path), str(output)], capture_output=True, text=True, timeout=300, check=True
    )
    returncode, peak_kib = map(int, run.stdout.split())
    assert returncode == 0
    assert peak_kib / 1024 < PEAK_RSS_BOUND_MIB, f"peak {peak_kib / 1024:.0f} MiB for a 16 MiB input"
    document = json.loads(output.read_bytes())
    assert document["canonical"].startswith('{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"arguments"')
    assert document["bytes"] == len(document["canonical"].encode())
    stable = document["canonical"].split('"params":', 1)[1][:-1].encode()
    assert document["params_digest"] == expected_digest(stable)
