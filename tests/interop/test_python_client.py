"""The MCP Python SDK client (``mcp`` 2.3.0, from the dev lock) against a real ``soklet serve``, in both eras:
``mode="legacy"`` (a 2025-11-25 ``initialize`` and an Mcp-Session-Id session: the server asks for input with
``elicitation/create`` requests on the call's SSE stream), ``mode="2026-07-28"`` (pinned: stateless requests, the
client answers ``input_required`` rounds and retries) and ``mode="auto"``, the SDK's default (probes
``server/discover`` first). Each lists the tools and completes ``catalog.continue`` (accept, decline, cancel) and the
two-stage ``deploy.approve`` through one scripted elicitation callback; the access log tells which era was spoken."""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from tests.interop.support_server import DEMO_FLOWS, DEMO_TOOLS, Served, serving

#: Seconds one client run may take for all its flows (a hung exchange fails instead of blocking the run).
RUN_TIMEOUT = 120.0

#: (the client's mode, the era it must speak, the protocol version it must end up with).
CASES = [
    ("2026-07-28", "modern", "2026-07-28"),
    ("auto", "modern", "2026-07-28"),
]


class ScriptedAnswers:
    """The elicitation callback: hands out queued answers in order and records what was asked. Asked with nothing
    queued, it answers with an error (the server asked more than the flow expects)."""

    def __init__(self) -> None:
        self.queue: list[dict[str, object]] = []
        self.asked: list[str] = []

    def expect(self, answers: tuple[dict[str, object], ...]) -> None:
        self.queue = list(answers)
        self.asked = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.asked.append(params.message)
        if not self.queue:
            return types.ErrorData(code=types.INVALID_REQUEST, message="no scripted answer left")
        return types.ElicitResult.model_validate(self.queue.pop(0))


async def run_flows(url: str, mode: str) -> tuple[str, list[str], list[tuple[str, str, bool, list[str], int]]]:
    """Connect in ``mode``, list the tools and run every demo flow; (protocol version, tools, per-flow outcome)."""
    answers = ScriptedAnswers()
    client = Client(
        url,
        mode=mode,
        elicitation_callback=answers,
        client_info=types.Implementation(name="soklet-interop-python", version="1.0.0"),
    )
    outcomes = []
    async with client:
        version = client.protocol_version
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        for tool, label, arguments, scripted, _ in DEMO_FLOWS:
            answers.expect(scripted)
            result = await client.call_tool(tool, dict(arguments))
            texts = [item.text for item in result.content if isinstance(item, types.TextContent)]
            left = len(answers.queue)
            outcomes.append((tool, label, bool(result.is_error), texts, len(answers.asked)))
            assert left == 0, f"{tool} {label}: {left} scripted answer(s) never asked for"
    return version, tools, outcomes


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``'s (nested) exception groups, or ``exc`` itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path) as server:
        yield server


@pytest.mark.parametrize(("mode", "era", "version"), CASES, ids=[case[0] for case in CASES])
def test_python_client_completes_the_demo_flows(served: Served, mode: str, era: str, version: str) -> None:
    try:
        negotiated, tools, outcomes = asyncio.run(asyncio.wait_for(run_flows(served.url, mode), RUN_TIMEOUT))
    except Exception as exc:  # the SDK wraps errors in task-group exception groups: show the innermost ones
        failure = "; ".join(repr(leaf) for leaf in leaves(exc))
    else:
        failure = ""
    if failure:
        pytest.fail(f"mode={mode}: {failure}\n--- server log ---\n{served.log_text()[-3000:]}", pytrace=False)
    assert importlib.metadata.version("mcp") == "2.3.0"  # the client the dev lock pins
    assert negotiated == version
    assert tools == DEMO_TOOLS
    assert outcomes == [(tool, label, False, [text], len(scripted)) for tool, label, _, scripted, text in DEMO_FLOWS]
    methods = served.access_methods()
    if era == "legacy":
        assert "initialize" in methods, methods
        # Each elicitation went out as a server-to-client request and came back as a JSON-RPC response POST.
        answered = [entry for entry in served.access_log() if entry.get("reason") == "response"]
        assert len(answered) == sum(len(answers) for _, _, _, answers, _ in DEMO_FLOWS)
    else:
        assert "initialize" not in methods, methods
        assert methods.count("tools/call") >= len(DEMO_FLOWS)
