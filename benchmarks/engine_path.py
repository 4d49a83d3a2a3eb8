"""The 2026-07-28 request path in process: CPU per round trip, JSON passes per request, frames from ASGI to handler.

Run: ``.venv/bin/python benchmarks/engine_path.py [--round-trips N] [--rounds R] [--json]``. Run it from another
checkout (``git worktree add /tmp/base <commit>``; ``cd /tmp/base && PYTHONPATH=/tmp/base
/work/main/.venv/bin/python /work/main/benchmarks/engine_path.py``) to compare two commits side by side: it only
uses what every version has (``McpServer(registry, protection=...)``, ``asgi_app()``).

* **CPU per round trip**: the demo's ``catalog.continue`` flow (call -> ``input_required`` with a sealed state ->
  retry with the answer and the state -> complete) posted straight into the ASGI app with prebuilt messages (no
  HTTP server or client), process CPU time over ``--round-trips`` round trips, best of ``--rounds``.
* **JSON passes per request**: how often one request calls soklet's JSON entry points (``parse``, ``encode_wire``,
  ``params_digest``, ``stable_params``), counted by wrapping them in every loaded module for the measured requests
  only (instrumentation here, none in the product), for the call leg, the retry leg and ``tools/list``.
* **Frames to the handler**: ``len(inspect.stack(0))`` inside an ``async`` handler minus the same count at the
  ASGI entry (the frames soklet puts between ``app(scope, receive, send)`` and the handler).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from support.asgi_post import post as asgi_post

from soklet_apps.demo import build_registry
from soklet_core import json as soklet_json
from soklet_core.json import JsonObject
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import CallToolResult, McpServer, Registry, RequestContext, tool
from soklet_core.protection import ProtectionConfig
from soklet_core.protocol import PROTOCOL_VERSION

VERSION = PROTOCOL_VERSION.encode()
META = (
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"' + VERSION + b'",'
    b'"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}'
)
STATE = re.compile(rb'"requestState":"([A-Za-z0-9_.-]{1,65536})"')
#: The JSON entry points counted.
COUNTED = ("parse", "encode_wire", "params_digest", "stable_params")
DEPTH: list[int] = []


def headers(method: bytes, name: bytes | None) -> list[tuple[bytes, bytes]]:
    out = [
        (b"host", b"127.0.0.1:8000"),
        (b"mcp-protocol-version", VERSION),
        (b"mcp-method", method),
        (b"content-type", b"application/json"),
    ]
    return [*out, (b"mcp-name", name)] if name is not None else out


def call_body(request_id: int, name: bytes = b"catalog.continue") -> bytes:
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",' % request_id
    return head + b'"params":{"name":"' + name + b'","arguments":{},' + META + b"}}"


def retry_body(request_id: int, state: bytes) -> bytes:
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


def list_body(request_id: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{' % request_id + META + b"}}"


async def post(app: Any, body: bytes, head: list[tuple[bytes, bytes]], *, count_frames: bool = False) -> bytes:
    """``body`` posted into ``app``; ``count_frames`` notes the frame count at the ASGI entry (``inspect.stack``
    costs more than the request itself: only the frames measurement asks for it)."""
    if not count_frames:
        return await asgi_post(app, body, head)
    return await asgi_post(
        app, body, head, at_entry=lambda: DEPTH.append(len(inspect.stack(0)) - 1)
    )  # less this lambda


def demo_app() -> Any:
    config = ProtectionConfig(keyring=ProtectionKeyring(ProtectionKey.generate("engine-path")))
    return McpServer(build_registry(development=True), protection=config).asgi_app()


async def round_trip(app: Any, index: int) -> None:
    head = headers(b"tools/call", b"catalog.continue")
    found = STATE.search(await post(app, call_body(2 * index), head))
    if found is None:
        raise RuntimeError("the call was not answered input_required with a state")
    done = await post(app, retry_body(2 * index + 1, found.group(1)), head)
    if b'"resultType":"complete"' not in done:
        raise RuntimeError("the retry did not complete")


def cpu_per_round_trip(count: int, rounds: int) -> float:
    app = demo_app()
    best = float("inf")

    async def loop() -> None:
        for index in range(count):
            await round_trip(app, index)

    asyncio.run(loop())  # warm-up
    for _ in range(rounds):
        started = time.process_time()
        asyncio.run(loop())
        best = min(best, (time.process_time() - started) / count)
    return best


class Counting:
    """Wraps soklet's JSON entry points in every loaded module while active; counts the calls."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._patched: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> Counting:
        for name in COUNTED:
            original = getattr(soklet_json, name)
            wrapper = self._wrap(name, original)
            for module in list(sys.modules.values()):
                if module is None or not getattr(module, "__name__", "").startswith("soklet_"):
                    continue
                for attribute, value in list(vars(module).items()):
                    if value is original:
                        self._patched.append((module, attribute, value))
                        setattr(module, attribute, wrapper)
        return self

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.counts[name] += 1
            return original(*args, **kwargs)

        return counted

    def __exit__(self, *_exc: object) -> None:
        for module, attribute, value in self._patched:
            setattr(module, attribute, value)


def passes() -> dict[str, dict[str, int]]:
    app = demo_app()
    out: dict[str, dict[str, int]] = {}

    async def scenario() -> None:
        head = headers(b"tools/call", b"catalog.continue")
        await round_trip(app, 0)  # warm-up: lazily built parts are not counted
        with Counting() as counting:
            answer = await post(app, call_body(10), head)
        out["call (input_required)"] = dict(counting.counts)
        found = STATE.search(answer)
        assert found is not None
        with Counting() as counting:
            await post(app, retry_body(11, found.group(1)), head)
        out["retry (complete)"] = dict(counting.counts)
        with Counting() as counting:
            await post(app, list_body(12), headers(b"tools/list", None))
        out["tools/list"] = dict(counting.counts)

    asyncio.run(scenario())
    return out


@tool(name="frames", description="Counts its frames.", input_schema={"type": "object"}, blocking=False)
async def frames(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    DEPTH.append(len(inspect.stack(0)))
    return CallToolResult.from_text("frames")


def frames_to_handler() -> int:
    app = McpServer(Registry(frames)).asgi_app()
    DEPTH.clear()
    asyncio.run(post(app, call_body(1, b"frames"), headers(b"tools/call", b"frames"), count_frames=True))
    entry, handler = DEPTH[0], DEPTH[-1]
    # post() counted itself before the call; the handler's count includes its own frame: the difference is the
    # frames from the app's __call__ down to the handler's caller, plus the handler.
    return handler - entry


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--round-trips", type=int, default=2000, help="round trips per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the best is kept (default 5)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 round trips, 1 round")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.round_trips, args.rounds = 200, 1
    results = {
        "cpu_us_per_round_trip": round(cpu_per_round_trip(args.round_trips, args.rounds) * 1e6, 1),
        "json_passes_per_request": passes(),
        "frames_asgi_to_handler": frames_to_handler(),
    }
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"CPU per round trip: {results['cpu_us_per_round_trip']} us")
        for leg, counts in results["json_passes_per_request"].items():  # type: ignore[union-attr]
            print(f"JSON passes, {leg}: {counts}")
        print(f"frames from the ASGI entry to the handler: {results['frames_asgi_to_handler']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
