"""The MCP Python SDK client (``mcp`` 2.3.0, from the dev lock) against a real ``soklet serve``, in both eras:
``mode="legacy"`` (a 2025-11-25 ``initialize`` and an Mcp-Session-Id session: the server asks for input with
``elicitation/create`` requests on the call's SSE stream), ``mode="2026-07-28"`` (pinned: stateless requests, the
client answers ``input_required`` rounds and retries) and ``mode="auto"``, the SDK's default (probes
``server/discover`` first). Each lists the tools and completes ``catalog.continue`` (accept, decline, cancel) and the
two-stage ``deploy.approve`` through one scripted elicitation callback; the access log tells which era was spoken.
The same client launches ``soklet serve --stdio`` in both eras, and a client of an era the server was told not to
speak (``--protocol modern|legacy``) gets -32022 with a sentence that says what to do."""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client
from mcp.client import Transport
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.interop.support_server import (
    DEMO_FLOWS,
    DEMO_TOOLS,
    STDIO_FLOWS,
    VISIT,
    Flows,
    Served,
    complete_link_page,
    serving,
)

pytestmark = pytest.mark.slow

#: Seconds one client run may take for all its flows (a hung exchange fails instead of blocking the run).
RUN_TIMEOUT = 120.0

#: (the client's mode, the era it must speak, the protocol version it must end up with).
CASES = [
    ("legacy", "legacy", "2025-11-25"),
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
        answer = self.queue.pop(0)
        if answer is VISIT:
            assert isinstance(params, types.ElicitRequestURLParams), params
            await complete_link_page(params.url)
            return types.ElicitResult(action="accept")
        return types.ElicitResult.model_validate(answer)


async def run_flows(
    server: str | Transport, mode: str, flows: Flows = DEMO_FLOWS
) -> tuple[str, list[str], list[tuple[str, str, bool, list[str], int]]]:
    """Connect to ``server`` (a URL or a transport) in ``mode``, list the tools and run every demo flow; (protocol
    version, tools, per-flow outcome)."""
    answers = ScriptedAnswers()
    client = Client(
        server,
        mode=mode,
        elicitation_callback=answers,
        client_info=types.Implementation(name="soklet-interop-python", version="1.0.0"),
    )
    outcomes = []
    async with client:
        version = client.protocol_version
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        for tool, label, arguments, scripted, _ in flows:
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


@pytest.mark.parametrize(
    ("mode", "protocol", "code", "sentence"),
    [
        ("legacy", "modern", -32022, "This server speaks MCP 2026-07-28 only"),
        ("2026-07-28", "legacy", -32022, "This server speaks the 2025-era MCP protocol only"),
    ],
    ids=["legacy-to-modern-only", "pinned-to-legacy-only"],
)
def test_python_client_of_the_other_era_is_refused_clearly(
    tmp_path: Path, mode: str, protocol: str, code: int, sentence: str
) -> None:
    with serving(tmp_path, "--protocol", protocol) as server:
        try:
            asyncio.run(asyncio.wait_for(run_flows(server.url, mode), RUN_TIMEOUT))
        except Exception as exc:
            errors = [leaf for leaf in leaves(exc) if isinstance(leaf, MCPError)]
        else:
            errors = []
    assert errors, f"mode={mode} against --protocol {protocol} was not refused"
    assert errors[0].error.code == code
    assert errors[0].error.message.startswith(sentence)
    assert "--protocol both" in errors[0].error.message


@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")])
def test_python_client_over_stdio(tmp_path: Path, mode: str, version: str) -> None:
    """``soklet serve --stdio`` launched by the SDK as a desktop host would (its log to a file, stdout the wire)."""
    command = StdioServerParameters(
        command=sys.executable, args=["-m", "soklet_cli", "serve", "--stdio", "--dev-key"], cwd=tmp_path
    )
    log = tmp_path / "server.log"
    with log.open("w") as errlog:
        try:
            negotiated, tools, outcomes = asyncio.run(
                asyncio.wait_for(run_flows(stdio_client(command, errlog=errlog), mode, STDIO_FLOWS), RUN_TIMEOUT)
            )
        except Exception as exc:
            failure = "; ".join(repr(leaf) for leaf in leaves(exc))
        else:
            failure = ""
    if failure:
        pytest.fail(f"stdio mode={mode}: {failure}\n--- server log ---\n{log.read_text()[-3000:]}", pytrace=False)
    assert negotiated == version
    assert tools == DEMO_TOOLS
    assert outcomes == [(tool, label, False, [text], len(scripted)) for tool, label, _, scripted, text in STDIO_FLOWS]
