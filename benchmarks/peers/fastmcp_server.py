"""fastmcp (``fastmcp`` 4.1.6) serving the spec's two-leg ``catalog.continue`` tool, statelessly.

Started by ``benchmarks/server_round_trips.py`` as ``python benchmarks/peers/fastmcp_server.py --port N``. The same
tool as ``benchmarks/peers/mcp_sdk_server.py``, written with fastmcp's own API: a ``FastMCP`` server whose guard tool
reads ``ctx.request_state`` / ``ctx.input_responses`` and, on the first leg, returns an ``InputRequiredResult`` from
its body (fastmcp wraps it in an ``InputRequiredToolResult`` and hands it to the wire as ``resultType:
"input_required"``). fastmcp 4.x runs on the MCP SDK 2.3.0's low-level server and installs the SDK's
``RequestStateBoundary`` itself; ``request_state_security`` passes it the same fixed key and TTL as the SDK peer, so
the state ``{"phase":"waiting-for-approval"}`` is sealed (AES-256-GCM, request binding, expiry, audience) on the
first leg and verified before the tool runs on the retry, which completes after checking the protected phase and the
``approval`` response. ``http_app(stateless_http=True, json_response=True)`` keeps every POST independent and answers
with one JSON body; fastmcp's Host/Origin guard is left at its default, as a user would. Same uvicorn settings as the
other servers: uvloop, httptools, no access log.
"""

from __future__ import annotations

import argparse
import json
import logging

import uvicorn
from fastmcp import Context, FastMCP
from mcp.server.request_state import RequestStateSecurity
from mcp_types import CallToolResult, ElicitRequest, ElicitRequestFormParams, InputRequiredResult, TextContent

STATE = json.dumps({"phase": "waiting-for-approval"}, separators=(",", ":"))

server: FastMCP = FastMCP(
    name="bench-fastmcp",
    request_state_security=RequestStateSecurity(keys=[b"0123456789abcdef0123456789abcdef"], ttl=900.0),
)


@server.tool(name="catalog.continue", description="Approve catalog access, then continue.")
async def catalog_continue(ctx: Context) -> CallToolResult | InputRequiredResult:
    if ctx.request_state is None:
        approval = ElicitRequest(
            params=ElicitRequestFormParams(
                message="Approve catalog access?", requested_schema={"type": "object", "properties": {}}
            )
        )
        return InputRequiredResult(input_requests={"approval": approval}, request_state=STATE)
    state = json.loads(ctx.request_state)
    responses = ctx.input_responses or {}
    answer = responses.get("approval")
    if state.get("phase") != "waiting-for-approval" or answer is None:
        return CallToolResult(content=[TextContent(type="text", text="Approval missing.")], is_error=True)
    action = getattr(answer, "action", None)
    text = "Catalog access approved." if action == "accept" else f"Catalog access {action}."
    return CallToolResult(content=[TextContent(type="text", text=text)])


app = server.http_app(path="/mcp", stateless_http=True, json_response=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    for name in ("mcp", "fastmcp"):
        logging.getLogger(name).setLevel(logging.WARNING)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        lifespan="on",
    )


if __name__ == "__main__":
    main()
