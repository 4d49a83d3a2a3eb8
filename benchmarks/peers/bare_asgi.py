"""The floor: a raw ASGI app on the same uvicorn (uvloop, httptools, no access log) that answers both legs of the
round trip with fixed JSON. It reads the whole body and looks for ``"requestState"`` to tell the retry from the
first call; it parses nothing, seals nothing and checks nothing, so its CPU per round trip is what the HTTP stack
alone costs. Started by ``benchmarks/server_round_trips.py`` as ``python benchmarks/peers/bare_asgi.py --port N``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import uvicorn

STATE = "AAAAbareFloorStateToken0123456789abcdefghijklmnopqrstuvwxyz"
FIRST = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {
            "resultType": "input_required",
            "inputRequests": {
                "approval": {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": "Approve catalog access?",
                        "requestedSchema": {"type": "object", "properties": {}},
                    },
                }
            },
            "requestState": STATE,
        },
    },
    separators=(",", ":"),
).encode()
SECOND = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {"resultType": "complete", "content": [{"type": "text", "text": "Catalog access approved."}]},
    },
    separators=(",", ":"),
).encode()
HEADERS_FIRST = [(b"content-type", b"application/json"), (b"content-length", str(len(FIRST)).encode())]
HEADERS_SECOND = [(b"content-type", b"application/json"), (b"content-length", str(len(SECOND)).encode())]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    retry = b'"requestState"' in body
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS_SECOND if retry else HEADERS_FIRST})
    await send({"type": "http.response.body", "body": SECOND if retry else FIRST})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        lifespan="off",
    )


if __name__ == "__main__":
    main()
