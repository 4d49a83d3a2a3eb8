"""Where a server round trip's microseconds go: the demo's input-required flow through the ASGI app, in process.

Run: ``.venv/bin/python benchmarks/server_profile.py [--quick] [--round-trips N] [--top N]``.

One round trip is the flow ``benchmarks/server_round_trips.py`` measures over HTTP (``catalog.continue``: call →
``input_required`` with a sealed state → retry with the answer and the state → complete), driven straight into
:class:`soklet_core.mcp.McpAsgiApp` with prebuilt ASGI messages, so that no HTTP server or client is in the
figures. It prints the CPU time per round trip, then a cProfile of the same loop with the time spent in each
function (its own time, not its callees') summed by the part of soklet that holds it, and the costliest functions.
The shares are of the profiled run, whose per-call overhead inflates small functions: read them as proportions.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import re
import time
from collections import defaultdict

from support.asgi_post import post as asgi_post

from soklet_apps.demo import build_registry
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer
from soklet_core.protection import ProtectionConfig
from soklet_core.protocol import PROTOCOL_VERSION

VERSION = PROTOCOL_VERSION.encode()
META = (
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"' + VERSION + b'",'
    b'"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},'
    b'"io.modelcontextprotocol/clientInfo":{"name":"soklet-profile","version":"1"}}'
)
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"mcp-protocol-version", VERSION),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"catalog.continue"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
]
STATE = re.compile(rb'"requestState":"([A-Za-z0-9_.-]{1,65536})"')
#: Path fragments, most specific first: the part of soklet (or of Python) a function's file belongs to.
PARTS = (
    ("soklet_core/json/", "json (parse, digest, canonical form, encoding)"),
    ("soklet_core/protection/", "protection (binding, seal, open)"),
    ("soklet_core/keys/", "keys (key lookup, base64url)"),
    ("soklet_core/mcp/server/http/", "mcp HTTP side and transport (ASGI, validation steps 6-15)"),
    ("soklet_core/mcp/server/engine/", "mcp engine (method table, state wrapper)"),
    ("soklet_core/mcp/", "mcp model (capabilities, responses, results)"),
    ("soklet_apps/", "the demo handler"),
    ("asyncio", "asyncio"),
    ("cryptography", "cryptography (AES-GCM)"),
)


def first(request_id: int) -> bytes:
    """The call."""
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",' % request_id
    return head + b'"params":{"name":"catalog.continue","arguments":{},' + META + b"}}"


def retry(request_id: int, state: bytes) -> bytes:
    """The retry with the answer and the state."""
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",' % request_id
    answer = b'"inputResponses":{"approval":{"action":"accept","content":{}}},'
    return (
        head
        + b'"params":{"name":"catalog.continue","arguments":{},'
        + answer
        + b'"requestState":"'
        + state
        + b'",'
        + META
        + b"}}"
    )


class Driver:
    """Posts prebuilt bodies into one app and returns the response bodies."""

    def __init__(self) -> None:
        ring = ProtectionKeyring(ProtectionKey.generate("profile"))
        config = ProtectionConfig(keyring=ring)
        server = McpServer(build_registry(development=True), protection=config)
        self.app = server.asgi_app()

    async def post(self, body: bytes) -> bytes:
        return await asgi_post(self.app, body, HEADERS)

    async def round_trips(self, count: int) -> None:
        for index in range(count):
            answer = await self.post(first(2 * index))
            found = STATE.search(answer)
            if found is None:
                raise RuntimeError("the call was not answered input_required with a state")
            done = await self.post(retry(2 * index + 1, found.group(1)))
            if b'"resultType":"complete"' not in done or b'"isError":true' in done:
                raise RuntimeError("the retry did not complete")


def part_of(filename: str) -> str:
    """The part of soklet (or of Python) that holds a function defined in ``filename``."""
    for fragment, name in PARTS:
        if fragment in filename:
            return name
    return "other (builtins, C calls, the driver)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=2000, help="round trips per measurement (default 2000)")
    parser.add_argument("--top", type=int, default=15, help="costliest functions to list (default 15)")
    parser.add_argument("--quick", action="store_true", help="a short smoke run (200 round trips)")
    arguments = parser.parse_args()
    count = 200 if arguments.quick else max(1, min(arguments.round_trips, 100_000))

    driver = Driver()
    asyncio.run(driver.round_trips(200))  # warm up: caches, lazily built tables
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        asyncio.run(driver.round_trips(count))
        best = min(best, (time.process_time() - started) / count)
    print(f"in-process round trip (call + retry) through McpAsgiApp: {best * 1e6:.0f} us of CPU, best of 3 x {count}")

    profile = cProfile.Profile()
    profile.runcall(asyncio.run, driver.round_trips(count))
    stats = pstats.Stats(profile)
    own: dict[str, float] = defaultdict(float)
    rows = []
    for (filename, line, function), (_, _, self_time, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        own[part_of(filename)] += self_time
        rows.append((self_time, f"{filename.rsplit('/', 2)[-2:][-1]}:{line}({function})"))
    total = sum(own.values())
    print(f"\nown time by part (profiled run, {total / count * 1e6:.0f} us per round trip under the profiler)")
    for name, seconds in sorted(own.items(), key=lambda item: -item[1]):
        print(f"  {seconds / total:6.1%}  {name}")
    print(f"\ncostliest {arguments.top} functions by own time")
    for seconds, name in sorted(rows, reverse=True)[: arguments.top]:
        print(f"  {seconds / total:6.1%}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
