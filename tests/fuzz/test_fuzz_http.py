"""Fuzzing the HTTP edge of a real ``soklet serve`` (issue 8: one request must never stop the server).

One ``soklet serve --port 0 --json`` subprocess (the console script, the demo app, an ephemeral key, short header
and body timeouts) serves the whole module. Hypothesis (derandomized, no shrinking, bounded example counts: about
a minute in all on two cores) writes raw HTTP/1.1 requests on raw sockets: methods, request targets (long runs of
path characters ending in ``%25``, escapes, dot segments, absolute form, a few KB), missing, repeated and
malformed ``Host`` and ``Origin`` (``[::1]evil.com``), odd headers (values up to 200 KB, hundreds of fields,
broken names, obs-fold, conflicting framing), heads that never complete, bodies that lie about their length,
and JSON-RPC bodies (deep nesting, long numbers, huge exponents, lone surrogates, invalid UTF-8, duplicate
members, wrong types in ``_meta`` and ``params``, batches, large valid calls).

What every example must get, within :data:`ANSWER_SECONDS`:

* a well-formed ``HTTP/1.1`` status line with a status in :data:`DOCUMENTED_STATUSES` (``docs/server.md``: the
  validation order's 200/202/400/401/403/404/405/413, 408 for a body that stops, 431 for an oversized head, 503
  while draining or over the connection cap). Never 500, never silence;
* a JSON body, when there is one, that is a JSON-RPC response (result or error with an int code and a message);
  a body that is not JSON is accepted only for HTTP-layer refusals (400 from the HTTP parser, 408, 413, 431, 503);
* or, only for a request the HTTP layer may refuse before any application code runs (a head that is not
  well-formed HTTP/1.1, or is over the head limit, or a body that never comes), the connection closed without an
  answer: closing is a bounded error too. A connection left open past the bound is a failure.

After every example a valid ``tools/list`` on a new connection gets 200 within :data:`HEALTH_SECONDS`, and the
server's stderr holds no ``Traceback``. At the end its peak resident memory (``VmHWM`` of the server and of its
live worker processes) is under :data:`MAX_PEAK_RSS_BYTES`: 52 MiB at rest after start; before issue 8 the
9 MiB calls of many small values took it to about 600 MiB.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from soklet_core.protection import ProtectionUsageError, normalize_endpoint_path
from tests.fuzz.support import (
    FUZZ_SETTINGS,
    SOKLET,
    Closed,
    Response,
    exchange,
    jsonrpc_shape_problem,
    peak_rss_bytes,
    soklet_env,
)

# The fuzzing is marked slow; one valid request against the served instance stays in the quick selection
# (docs/testing.md).

VERSION = "2026-07-28"
#: Every status the server documents (docs/server.md and ``soklet serve --help``).
DOCUMENTED_STATUSES = frozenset({200, 202, 400, 401, 403, 404, 405, 408, 413, 431, 503})
#: HTTP-layer refusals that may carry a body that is not JSON-RPC (uvicorn's own 400 for an unparsable head).
PLAIN_BODY_STATUSES = frozenset({400, 408, 413, 431, 503})
#: Seconds any example may take to be answered (or closed).
ANSWER_SECONDS = 10.0
#: Seconds a large (up to 11 MiB) call may take to be answered; other clients must not wait meanwhile.
LARGE_ANSWER_SECONDS = 30.0
#: Seconds the health check may take.
HEALTH_SECONDS = 5.0
#: The server's header and body timeouts for this module (short, so lies cost little).
SERVER_TIMEOUT = "2s"
TIMEOUT_OPTIONS = ("--header-timeout", SERVER_TIMEOUT, "--body-timeout", SERVER_TIMEOUT)
#: The bound on the server's peak RSS over the whole module.
MAX_PEAK_RSS_BYTES = 400 * 1024 * 1024

# Stand-ins replaced at send time: the server's authority and port are only known once it runs.
HOST = b"\x00HOST\x00"
PORT = b"\x00PORT\x00"

PATH_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@"


@dataclass(frozen=True)
class Raw:
    """One raw request: method, target, header lines and body. ``may_close``: the HTTP layer may close the
    connection without an answer (the head is not well-formed HTTP/1.1, over the limit, or the body lies)."""

    method: bytes = b"POST"
    target: bytes = b"/mcp"
    headers: tuple[bytes, ...] = ()
    body: bytes = b""
    content_length: int | None = -1  # -1: the true length; None: no Content-Length line
    may_close: bool = False
    pause_after: float = 0.0
    extra_lines: tuple[bytes, ...] = field(default=())

    def encode(self, port: int) -> bytes:
        lines = [self.method + b" " + self.target + b" HTTP/1.1", *self.headers]
        if self.content_length is not None:
            length = len(self.body) if self.content_length == -1 else self.content_length
            lines.append(b"Content-Length: " + str(length).encode())
        lines += [*self.extra_lines, b"Connection: close"]
        head = b"\r\n".join(lines) + b"\r\n\r\n"
        authority = b"127.0.0.1:" + str(port).encode()
        return head.replace(HOST, authority).replace(PORT, str(port).encode()) + self.body


def meta(version: str = VERSION, capabilities: Any = None) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {} if capabilities is None else capabilities,
    }


def mcp_headers(method: str = "tools/list", name: str | None = None) -> tuple[bytes, ...]:
    lines = [
        b"Host: " + HOST,
        b"Content-Type: application/json",
        b"Accept: application/json, text/event-stream",
        b"MCP-Protocol-Version: " + VERSION.encode(),
        b"Mcp-Method: " + method.encode("utf-8", "surrogateescape"),
    ]
    if name is not None:
        lines.append(b"Mcp-Name: " + name.encode("utf-8", "surrogateescape"))
    return tuple(lines)


TOOLS_LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}).encode()
VALID = Raw(headers=mcp_headers(), body=TOOLS_LIST)


# --- strategies --------------------------------------------------------------------------------------------------

path_runs = st.builds(
    lambda char, count, tail: ("/" + char * count + tail).encode(),
    st.sampled_from(list(PATH_CHARS)),
    st.integers(1, 3000),
    st.sampled_from(["%25", "%", "%2", "%zz", "/%25", "/", ""]),
)
path_pieces = st.lists(
    st.sampled_from(
        ["a", "mcp", ".", "..", "%2e", "%2E%2E", "%2F", "%25", "%", "%G1", "%ff", "%00", "~", "@", ":", ";", "="]
    ),
    max_size=60,
).map(lambda pieces: ("/" + "/".join(pieces)).encode())
dot_paths = st.lists(st.sampled_from(["..", ".", "mcp", "", "%2e%2e"]), min_size=1, max_size=400).map(
    lambda parts: ("/" + "/".join(parts)).encode()
)
targets = st.one_of(
    st.just(b"/mcp"),
    path_runs,
    path_pieces,
    dot_paths,
    st.sampled_from([b"/mcp/", b"//mcp", b"/MCP", b"/mcp?x=1", b"/mcp#f", b"*", b"http://evil.com/mcp"]),
    st.builds(lambda host: b"http://" + host + b"/mcp", st.sampled_from([HOST, b"evil.com", b"[::1]evil.com"])),
    st.binary(min_size=1, max_size=64).map(lambda raw: b"/" + raw.replace(b" ", b"").replace(b"\r", b"")),
)

host_lines = st.sampled_from(
    [
        (),
        (b"Host: " + HOST,),
        (b"Host: [::1]evil.com",),
        (b"Host: [::1]:" + PORT,),
        (b"Host: localhost:" + PORT,),
        (b"Host: evil.com",),
        (b"Host: 127.0.0.1:" + PORT + b", evil.com",),
        (b"Host: " + HOST, b"Host: " + HOST),
        (b"Host: " + HOST, b"Host: evil.com"),
        (b"Host: 127.0.0.1:99999999999999999999",),
        (b"Host: ",),
        (b"Host: [::1",),
        (b"Host: 127.0.0.1:" + PORT + b"@evil.com",),
        (b"Host: 127.0.0.1:-1",),
        (b"Host: \xff\xfe",),
        (b"HOST: " + HOST,),
    ]
)
origin_lines = st.sampled_from(
    [
        (),
        (b"Origin: http://[::1]evil.com",),
        (b"Origin: http://127.0.0.1:" + PORT,),
        (b"Origin: http://localhost:" + PORT + b"/path",),
        (b"Origin: null",),
        (b"Origin: https://evil.com",),
        (b"Origin: http://127.0.0.1:" + PORT, b"Origin: http://127.0.0.1:" + PORT),
        (b"Origin: http://[::1]:" + PORT,),
        (b"Origin: http://127.0.0.1:" + PORT + b"@evil.com",),
        (b"Origin: ",),
        (b"Origin: http://" + b"a" * 5000 + b".com",),
    ]
)
methods = st.one_of(
    st.sampled_from([b"POST", b"GET", b"PUT", b"DELETE", b"OPTIONS", b"HEAD", b"PATCH", b"TRACE", b"post"]),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=40).map(str.encode),
)


@st.composite
def odd_headers(draw: st.DrawFn) -> tuple[tuple[bytes, ...], bool]:
    """Header lines beyond the MCP ones, and whether they may make the HTTP layer close without an answer."""
    kind = draw(st.sampled_from(["none", "huge", "many", "bad-name", "fold", "framing", "expect", "binary"]))
    if kind == "huge":
        size = draw(st.sampled_from([1_000, 60_000, 70_000, 200_000]))
        return (b"X-Big: " + b"v" * size,), size > 60_000
    if kind == "many":
        count = draw(st.integers(50, 3000))
        return tuple(b"X-H" + str(index).encode() + b": " + b"x" * 20 for index in range(count)), count > 1500
    if kind == "bad-name":
        name = draw(st.sampled_from([b"X Y", b"X\x00Y", b"", b"(X)", b"X\x7f", b"\xff\xfe"]))
        return (name + b": 1",), True
    if kind == "fold":
        return (b"X-Folded: a", b" b"), True
    if kind == "framing":
        choice = draw(
            st.sampled_from(
                [
                    (b"Transfer-Encoding: chunked",),
                    (b"Transfer-Encoding: gzip, chunked",),
                    (b"Content-Length: 5",),
                    (b"Content-Length: -1",),
                    (b"Content-Length: \xd9\xa1\xd9\xa2",),
                    (b"Content-Length: 99999999999999999999999",),
                ]
            )
        )
        return choice, True
    if kind == "expect":
        return (b"Expect: 100-continue",), False
    if kind == "binary":
        return (b"X-Bin: " + draw(st.binary(max_size=200)).replace(b"\r", b"").replace(b"\n", b""),), True
    return (), False


@st.composite
def raw_requests(draw: st.DrawFn) -> Raw:
    """A request with fuzzed method, target, Host, Origin and odd headers, and a valid tools/list body."""
    method = draw(methods)
    target = draw(targets)
    hosts = draw(host_lines)
    origins = draw(origin_lines)
    extra, may_close = draw(odd_headers())
    base = [line for line in mcp_headers() if not line.startswith(b"Host:")]
    headers = (*hosts, *origins, *base, *extra)
    wellformed_target = target.startswith((b"/", b"http://", b"*")) and all(32 < byte < 127 for byte in target)
    wellformed_method = method.isalpha() and method.isascii()
    framing = any(line.lower().startswith((b"content-length", b"transfer-encoding")) for line in extra)
    return Raw(
        method=method,
        target=target,
        headers=headers,
        body=TOOLS_LIST,
        may_close=may_close or framing or not wellformed_target or not wellformed_method,
    )


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=20,
)


def envelope(method: str, params: Any, request_id: Any = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()


META = json.dumps(meta())


def document(request_id: str = "1", method: str = '"tools/list"', params: str = "", meta_text: str = META) -> str:
    """A JSON-RPC request spelled by hand (so that it can hold what json.dumps would never write)."""
    return f'{{"jsonrpc":"2.0","id":{request_id},"method":{method},"params":{{{params}"_meta":{meta_text}}}}}'


def call_document(arguments: str) -> str:
    """A hand-spelled tools/call of catalog.continue with ``arguments`` (JSON text) and the capability it needs."""
    params = f'"name":"catalog.continue","arguments":{arguments},'
    return document(method='"tools/call"', params=params, meta_text=json.dumps(meta(capabilities={"elicitation": {}})))


@st.composite
def jsonrpc_bodies(draw: st.DrawFn) -> Raw:
    """A well-formed MCP head (Host, version, method headers) with a hostile or odd JSON-RPC body."""
    kind = draw(
        st.sampled_from(
            [
                "nesting",
                "long-number",
                "exponent",
                "surrogate",
                "invalid-utf8",
                "duplicate",
                "wrong-meta",
                "wrong-params",
                "wrong-envelope",
                "random-call",
                "state",
                "batch",
                "not-json",
            ]
        )
    )
    method, name = "tools/list", None
    if kind == "nesting":
        depth = draw(st.sampled_from([10, 64, 65, 1_000, 100_000, 1_000_000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        inner = opener * depth + "1" + closer * depth
        body = call_document(f'{{"x":{inner}}}')
        method, name = "tools/call", "catalog.continue"
    elif kind == "long-number":
        digits = draw(st.sampled_from([20, 400, 401, 5_000, 1_000_000]))
        number = draw(st.sampled_from(["1" * digits, "-0." + "9" * digits, "1" + "0" * digits + "e1"]))
        where = draw(st.sampled_from(["id", "argument"]))
        if where == "id":
            body = document(request_id=number)
        else:
            body = call_document(f'{{"n":{number}}}')
            method, name = "tools/call", "catalog.continue"
    elif kind == "exponent":
        number = draw(st.sampled_from(["1e999999999", "-1E-999999999", "1e+400", "0e99999999999999999999", "1.5E308"]))
        body = document(request_id=number)
    elif kind == "surrogate":
        text = draw(st.sampled_from([r"\ud800", r"\udfff", r"\ud800\u0041", r"\udc00\ud800", r"\\ud800"]))
        where = draw(st.sampled_from(["method", "member", "value"]))
        if where == "method":
            body = document(method=f'"tools/{text}"')
        elif where == "member":
            body = document(params=f'"{text}":1,')
        else:
            body = document(request_id=f'"{text}"')
    elif kind == "invalid-utf8":
        raw = draw(st.sampled_from([b"\xed\xa0\x80", b"\xff", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe2\x82"]))
        return Raw(headers=mcp_headers(), body=b'{"jsonrpc":"2.0","id":"' + raw + b'","method":"tools/list"}')
    elif kind == "duplicate":
        body = draw(
            st.sampled_from(
                [
                    document(request_id='1,"jsonrpc":"2.0"'),
                    document(request_id='1,"id":2'),
                    document(params='"_meta":{},'),
                    document(method='"tools/call","method":"tools/list"'),
                ]
            )
        )
    elif kind == "wrong-meta":
        value = draw(st.one_of(json_values, st.builds(meta, st.text(max_size=20), json_values)))
        body = envelope("tools/list", {"_meta": value}).decode()
    elif kind == "wrong-params":
        body = envelope("tools/list", draw(json_values)).decode()
    elif kind == "wrong-envelope":
        fields = {"jsonrpc": draw(json_values), "id": draw(json_values), "method": draw(json_values)}
        if draw(st.booleans()):
            fields["params"] = {"_meta": meta()}
        body = json.dumps(fields)
    elif kind == "random-call":
        name = draw(st.sampled_from(["catalog.continue", "account.link", "deploy.approve", "nope", "x" * 300]))
        params = {"name": name, "arguments": draw(json_values), "_meta": meta(capabilities=draw(json_values))}
        if draw(st.booleans()):
            params["inputResponses"] = draw(json_values)
        body = envelope("tools/call", params, draw(json_values)).decode()
        method = "tools/call"
    elif kind == "state":
        state = draw(
            st.one_of(
                st.text(max_size=100),
                st.sampled_from(["A" * 43, "A" * 100_000, "v1." + "A" * 200]),
                json_values,
            )
        )
        params = {
            "name": "catalog.continue",
            "arguments": {},
            "inputResponses": {"approval": {"action": "accept", "content": {}}},
            "requestState": state,
            "_meta": meta(capabilities={"elicitation": {}}),
        }
        body = envelope("tools/call", params).decode()
        method, name = "tools/call", "catalog.continue"
    elif kind == "batch":
        body = "[" + ",".join([TOOLS_LIST.decode()] * draw(st.integers(0, 50))) + "]"
    else:
        body = draw(st.sampled_from(["", " ", "{", "null", "[]", '"x"', "\ufeff{}", "{}" * 1000]))
    return Raw(
        headers=mcp_headers(method, name),
        body=body.encode("utf-8", "surrogatepass"),
    )


# --- the server --------------------------------------------------------------------------------------------------


@dataclass
class Served:
    """The running server: its process, port, stderr file, and whether it stopped answering."""

    process: subprocess.Popen[bytes]
    port: int
    stderr: Path
    baseline_rss: int
    dead: str | None = None

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with tempfile.TemporaryDirectory(prefix="soklet-fuzz-") as folder:
        stderr_path = Path(folder) / "stderr.log"
        with stderr_path.open("wb") as stderr:
            process = subprocess.Popen(
                [SOKLET, "serve", "--port", "0", "--json", "--log-level", "warning", *TIMEOUT_OPTIONS],
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=soklet_env(),
                cwd=folder,
            )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert first.startswith(b"{"), (first, stderr_path.read_text(errors="replace"))
            port = int(json.loads(first)["port"])
            server = Served(process, port, stderr_path, 0)
            health_check(server)
            server.baseline_rss = peak_rss_bytes(process.pid)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def health_check(server: Served) -> None:
    """A valid tools/list on a new connection gets 200 within HEALTH_SECONDS, and stderr has no traceback."""
    if server.dead is not None:
        pytest.fail(f"the server stopped answering earlier: {server.dead}")
    try:
        response = exchange(server.address, VALID.encode(server.port), timeout=HEALTH_SECONDS)
    except (Closed, TimeoutError, OSError) as error:
        server.dead = f"health check: {type(error).__name__}: {error}"
        pytest.fail(server.dead)
    if response.status != 200:
        server.dead = f"health check got {response.status}"
        pytest.fail(server.dead)
    assert server.process.poll() is None, "the server exited"
    assert "Traceback" not in server.log(), server.log()[-3000:]


def check_answer(server: Served, request: Raw, *, bound: float = ANSWER_SECONDS) -> Response | None:
    """Send ``request`` and check the answer within ``bound`` seconds (see the module documentation); then the
    health check."""
    if server.dead is not None:
        pytest.fail(f"the server stopped answering earlier: {server.dead}")
    started = time.monotonic()
    try:
        response: Response | None = exchange(
            server.address,
            request.encode(server.port),
            timeout=bound,
            head_request=request.method == b"HEAD",
            pause_after=request.pause_after,
        )
    except Closed:
        response = None
        assert request.may_close, "the connection closed without an answer to a well-formed request"
    except TimeoutError:
        health_check(server)  # tells a frozen server from one connection held open
        pytest.fail(f"no answer in {bound} s to {request.encode(server.port)[:200]!r}")
    elapsed = time.monotonic() - started
    assert elapsed < bound + 1
    if response is not None:
        assert response.status in DOCUMENTED_STATUSES, (response.status, response.body[:300])
        content_type = (response.header(b"content-type") or b"").split(b";")[0].strip()
        if response.body and content_type == b"application/json":
            problem = jsonrpc_shape_problem(response.body)
            assert problem is None, (problem, response.body[:300])
        elif response.body and content_type != b"text/event-stream":
            assert response.status in PLAIN_BODY_STATUSES, (response.status, response.body[:300])
    health_check(server)
    return response


# --- the tests ---------------------------------------------------------------------------------------------------


def test_valid_request_is_answered(served: Served) -> None:
    response = check_answer(served, VALID)
    assert response is not None
    assert response.status == 200
    assert jsonrpc_shape_problem(response.body) is None


@pytest.mark.slow
@settings(FUZZ_SETTINGS, max_examples=600)
@given(request=raw_requests())
@example(request=Raw(target=b"/" + b"a" * 40 + b"%25", headers=mcp_headers(), body=TOOLS_LIST))
@example(request=Raw(target=b"/" + b"a" * 2049, headers=mcp_headers(), body=TOOLS_LIST))
@example(request=Raw(headers=(b"Host: [::1]evil.com", *mcp_headers()[1:]), body=TOOLS_LIST))
@example(request=Raw(headers=(*mcp_headers(), b"Origin: http://[::1]evil.com"), body=TOOLS_LIST))
@example(request=Raw(headers=(*mcp_headers(), b"Host: " + HOST), body=TOOLS_LIST))
@example(request=Raw(headers=(*mcp_headers(), b"X-Big: " + b"v" * 200_000), body=TOOLS_LIST, may_close=True))
def test_fuzz_request_heads(served: Served, request: Raw) -> None:
    response = check_answer(served, request)
    if response is not None and response.status == 200:
        # Only a POST to a spelling of the endpoint, with exactly one loopback Host and no Origin or exactly one
        # loopback Origin, may succeed.
        assert request.method == b"POST"
        assert _is_endpoint(request.target), request.target
        hosts = [line.partition(b":")[2].strip() for line in request.headers if line.lower().startswith(b"host:")]
        assert hosts in ([HOST], [b"localhost:" + PORT], [b"[::1]:" + PORT]), hosts
        origins = [line.partition(b":")[2].strip() for line in request.headers if line.lower().startswith(b"origin:")]
        assert origins in ([], [b"http://127.0.0.1:" + PORT], [b"http://[::1]:" + PORT]), origins


def _is_endpoint(target: bytes) -> bool:
    """Whether request target ``target`` names ``/mcp`` (origin or absolute form, any spelling the endpoint-path
    rules of soklet_core.protection accept as the same path)."""
    if target.startswith(b"http://" + HOST + b"/"):
        target = target[len(b"http://" + HOST) :]
    path = target.split(b"?", 1)[0]
    try:
        return normalize_endpoint_path(path.decode("ascii")) == "/mcp"
    except (UnicodeDecodeError, ProtectionUsageError):
        return False


@pytest.mark.slow
@settings(FUZZ_SETTINGS, max_examples=500)
@given(request=jsonrpc_bodies())
def test_fuzz_jsonrpc_bodies(served: Served, request: Raw) -> None:
    response = check_answer(served, request)
    assert response is not None
    assert response.status != 202 or b'"id"' not in request.body[:64]


@pytest.mark.slow
@settings(FUZZ_SETTINGS, max_examples=4)
@given(
    declared=st.sampled_from([1_000, 50_000, 10_000_000]),
    sent=st.sampled_from([0, 1, 50]),
)
def test_fuzz_bodies_shorter_than_declared(served: Served, declared: int, sent: int) -> None:
    # The body never completes: the server must time it out (408, or close) within its body timeout, not hold
    # the connection open.
    request = Raw(headers=mcp_headers(), body=TOOLS_LIST[:sent], content_length=declared, may_close=True)
    response = check_answer(served, request)
    assert response is None or response.status in (400, 408, 413)


@pytest.mark.slow
@settings(FUZZ_SETTINGS, max_examples=3)
@given(cut=st.sampled_from(["request-line", "mid-header", "no-blank-line"]))
def test_fuzz_unfinished_heads(served: Served, cut: str) -> None:
    # A head that never completes: the server closes the connection within its header timeout (with or without
    # an answer), it does not hold it open.
    head = VALID.encode(served.port).split(b"\r\n\r\n")[0]
    partial = {
        "request-line": head.split(b"\r\n")[0],
        "mid-header": head[: len(head) // 2],
        "no-blank-line": head + b"\r\n",
    }[cut]
    started = time.monotonic()
    try:
        response: Response | None = exchange(served.address, partial, timeout=ANSWER_SECONDS)
    except Closed:
        response = None
    except TimeoutError:
        health_check(served)
        pytest.fail(f"an unfinished head ({cut}) was held open for {ANSWER_SECONDS} s")
    assert time.monotonic() - started < ANSWER_SECONDS + 1
    assert response is None or response.status in (400, 408, 431), response
    health_check(served)


@pytest.mark.slow
@settings(FUZZ_SETTINGS, max_examples=6)
@given(size=st.sampled_from([9 << 20, 1 << 20, 11 << 20]), shape=st.sampled_from(["numbers", "objects", "string"]))
def test_fuzz_large_valid_calls(served: Served, size: int, shape: str) -> None:
    # A valid tools/call whose arguments fill ``size`` bytes with many small numbers, many small objects or one
    # string: answered (or refused 413 over the 10 MiB limit) within LARGE_ANSWER_SECONDS, while a tools/list
    # sent meanwhile is answered within HEALTH_SECONDS (the body is not parsed on the event loop), and without
    # multiplying the server's memory (checked at the end of the module).
    piece = {"numbers": "17,", "objects": '{"a":1.5},', "string": "x"}[shape]
    filler = piece * (size // len(piece))
    value = f'"{filler}"' if shape == "string" else "[" + filler.rstrip(",") + "]"
    body = call_document(f'{{"note":{value}}}').encode()
    request = Raw(headers=mcp_headers("tools/call", "catalog.continue"), body=body, may_close=size > 10 << 20)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(check_answer, served, request, bound=LARGE_ANSWER_SECONDS)
        # While the big call is read, parsed and digested, another client is served at once.
        time.sleep(0.2)
        started = time.monotonic()
        health_check(served)
        waited = time.monotonic() - started
        response = pending.result()
    assert waited < HEALTH_SECONDS, f"a tools/list waited {waited:.1f} s behind a {size >> 20} MiB call"
    if response is not None:
        assert response.status in ((413,) if len(body) > 10 << 20 else (200, 400))


@pytest.mark.slow
def test_server_survived_with_bounded_memory(served: Served) -> None:
    health_check(served)
    peak = peak_rss_bytes(served.process.pid)
    assert peak < MAX_PEAK_RSS_BYTES, f"peak RSS {peak / 2**20:.0f} MiB (at rest {served.baseline_rss / 2**20:.0f})"
    assert "Traceback" not in served.log()
    if os.environ.get("SOKLET_FUZZ_REPORT"):
        print(f"peak RSS {peak / 2**20:.0f} MiB, at rest {served.baseline_rss / 2**20:.0f} MiB")
