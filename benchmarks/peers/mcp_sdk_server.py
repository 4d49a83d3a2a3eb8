"""The official MCP Python SDK (``mcp`` 2.3.0) serving the spec's two-leg ``catalog.continue`` tool, statelessly.

Started by ``benchmarks/server_round_trips.py`` as ``python benchmarks/peers/mcp_sdk_server.py --port N``. The SDK's
``MCPServer`` answers 2026-07-28 requests (``MCP-Protocol-Version`` header + ``params._meta``) on its modern
single-exchange path; ``stateless_http=True, json_response=True`` keeps every POST independent and answers with one
JSON body. The first leg returns an ``InputRequiredResult`` asking for form approval with the state
``{"phase":"waiting-for-approval"}``; the SDK's built-in ``RequestStateBoundary`` seals that state (AES-256-GCM,
request binding, expiry, audience) and verifies it on the retry, which completes after checking the protected phase
and the ``approval`` response. Same uvicorn settings as the other servers: uvloop, httptools, no access log.
"""

from __future__ import annotations

import argparse
import json
import logging

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp_types import CallToolResult, ElicitRequest, ElicitRequestFormParams, InputRequiredResult, TextContent

STATE = json.dumps({"phase": "waiting-for-approval"}, separators=(",", ":"))

server = MCPServer(
    name="bench-sdk",
    log_level="WARNING",
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


app = server.streamable_http_app(stateless_http=True, json_response=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    logging.getLogger("mcp").setLevel(logging.WARNING)
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
