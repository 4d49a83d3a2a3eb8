"""A tiny app for ``soklet serve --app support_app:registry`` in the subprocess tests (shutdown edges)."""

from __future__ import annotations

import asyncio

from soklet_core.json import JsonObject
from soklet_core.mcp import CallToolResult, Registry, RequestContext, tool

OBJECT = {"type": "object"}


@tool(name="sleepy", description="Sleeps a minute unless cancelled.", input_schema=OBJECT)
async def sleepy(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    await asyncio.sleep(60)
    return CallToolResult.from_text("woke up")


@tool(name="sleepy.progress", description="Reports progress, then sleeps a minute.", input_schema=OBJECT)
async def sleepy_progress(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    context.invocation.report_progress(1, total=2, message="started")
    await asyncio.sleep(60)
    return CallToolResult.from_text("woke up")


@tool(name="quick", description="Answers at once.", input_schema=OBJECT)
def quick(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    return CallToolResult.from_text("quick")


def registry() -> Registry:
    """The registry served."""
    return Registry(sleepy, sleepy_progress, quick)
