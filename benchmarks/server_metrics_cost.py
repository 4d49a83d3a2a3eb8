"""What the admin listener's metrics (``ServerMetrics``) add to a request: round trips and server CPU with and without.

Run: ``.venv/bin/python benchmarks/server_metrics_cost.py [--rounds 5] [--duration 3] [--clients 8]`` (the options of
``benchmarks/server_round_trips.py``, whose client and measurement this reuses). Two servers are built like
``soklet serve --dev-key`` (the demo's ``catalog.continue``), one with ``.metrics(ServerMetrics(...))`` and one
without; each runs as its own process (this file, called with ``serve on`` or ``serve off``) and both are measured in
interleaved rounds by the same client, so the ratio is taken under the same machine load.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

VARIANTS = {"off": "soklet, no metrics", "on": "soklet + metrics"}


def serve(variant: str) -> None:
    """Serve one variant on a free loopback port; print its URL first (the client reads it)."""
    from soklet_apps import demo
    from soklet_core.keys import ProtectionKey, ProtectionKeyring
    from soklet_core.mcp import McpServer
    from soklet_core.mcp.server.http import uvicorn_config, uvicorn_server_class
    from soklet_core.mcp.server.ops._metrics import ServerMetrics
    from soklet_core.protection import ProtectionConfig

    ring = ProtectionKeyring(ProtectionKey.generate("bench"))
    metrics = ServerMetrics(instance="bench") if variant == "on" else None
    server = McpServer(demo.build_registry(), protection=ProtectionConfig(keyring=ring), metrics=metrics)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    uvicorn_server_class()(uvicorn_config(server, log_level="warning")).run(sockets=[sock])


def compare(argv: list[str]) -> int:
    """Both variants through ``server_round_trips``'s client, interleaved; its table and ratios."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import server_round_trips as bench

    def starter(variant: str) -> bench.ServerProcess:
        return bench.ServerProcess(variant, [sys.executable, __file__, "serve", variant], None)

    bench.SERVERS = {variant: (lambda variant=variant: starter(variant)) for variant in VARIANTS}
    bench.LABELS = dict(VARIANTS)
    return bench.main(["--servers", ",".join(VARIANTS), *argv])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve" and sys.argv[2] in VARIANTS:
        serve(sys.argv[2])
    else:
        sys.exit(compare(sys.argv[1:]))
