"""A real uvicorn (uvloop + httptools) on loopback for the server tests, and a small MCP client over httpx."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from soklet_core.mcp import McpServer
from soklet_core.mcp.server.http import uvicorn_config, uvicorn_server_class
from soklet_core.protocol import TASKS_EXTENSION

VERSION = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
FORM_CAPS: dict[str, Any] = {"elicitation": {}}
#: What the conformance suite's task scenarios declare on every request: the tasks extension, elicitation, sampling.
TASK_CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "extensions": {TASKS_EXTENSION: {}}}
#: The tasks extension alone, and with form elicitation (what the task tests declare).
TASKS: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
TASKS_FORM: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
#: A bound on waiting for a task to reach a status (tasks here settle within about a second; it stops a hung test).
TASK_SETTLE_SECONDS = 60.0


@contextlib.contextmanager
def running(server: McpServer, *, on_start: list[uvicorn.Server] | None = None) -> Iterator[str]:
    """Serve ``server`` on a free loopback port in a thread; yield the base URL (``http://127.0.0.1:PORT``).

    The server runs with its own ``HttpLimits`` through ``soklet_core.mcp.uvicorn_config``, as in production.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    port = sock.getsockname()[1]
    # The production settings: the same limits, protocol and draining server as ``soklet serve``.
    userver = uvicorn_server_class()(uvicorn_config(server, log_level="warning"))
    if on_start is not None:
        on_start.append(userver)
    thread = threading.Thread(target=userver.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not userver.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        userver.should_exit = True
        thread.join(10)
        sock.close()


@dataclass
class Reply:
    """One HTTP answer: status, headers and the JSON-RPC message (the last SSE frame for a stream)."""

    status: int
    headers: httpx.Headers
    body: dict[str, Any]
    frames: list[dict[str, Any]]

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.body, self.body
        result: dict[str, Any] = self.body["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.body, self.body
        error: dict[str, Any] = self.body["error"]
        return error

    @property
    def state(self) -> str | None:
        state: str | None = self.result.get("requestState")
        return state

    @property
    def text(self) -> str:
        text: str = self.result["content"][0]["text"]
        return text


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The ``data:`` frames of an SSE body."""
    return [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]


class Client:
    """Sends MCP 2026-07-28 requests with every required header and ``_meta`` (each overridable)."""

    def __init__(self, base_url: str, *, path: str = "/mcp", token: str | None = None) -> None:
        self.url = base_url + path
        self.http = httpx.Client(timeout=20)
        self.token = token
        self._next_id = 0

    def close(self) -> None:
        self.http.close()

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def post(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        request_id: Any = None,
        capabilities: dict[str, Any] | None = None,
        version: str = VERSION,
        headers: Mapping[str, str | None] | None = None,
        meta: dict[str, Any] | None = None,
        raw: bytes | None = None,
    ) -> Reply:
        params = dict(params or {})
        full_meta = {PV: version, CAPS: capabilities if capabilities is not None else {}}
        full_meta.update(meta or {})
        params["_meta"] = full_meta
        rid = self.next_id() if request_id is None else request_id
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        sent = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": version,
            "Mcp-Method": method,
        }
        if method in ("tools/call", "prompts/get"):
            sent["Mcp-Name"] = params["name"]
        elif method == "resources/read":
            sent["Mcp-Name"] = params["uri"]
        if self.token is not None:
            sent["Authorization"] = f"Bearer {self.token}"
        for name, value in (headers or {}).items():
            for existing in [key for key in sent if key.lower() == name.lower()]:
                del sent[existing]
            if value is not None:
                sent[name] = value
        content = raw if raw is not None else json.dumps(body).encode()
        response = self.http.post(self.url, content=content, headers=sent)
        frames: list[dict[str, Any]] = []
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            frames = parse_sse(response.text)
            parsed = frames[-1]
        else:
            parsed = response.json() if response.content else {}
        return Reply(response.status_code, response.headers, parsed, frames)

    def call(self, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Reply:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        extra = kwargs.pop("params", None)
        if extra:
            params.update(extra)
        return self.post("tools/call", params, **kwargs)

    def retry(
        self, name: str, arguments: dict[str, Any] | None, state: str | None, responses: dict[str, Any], **kwargs: Any
    ) -> Reply:
        params: dict[str, Any] = {"inputResponses": responses}
        if state is not None:
            params["requestState"] = state
        return self.call(name, arguments, params=params, **kwargs)


# --- the test app ------------------------------------------------------------------------------------------------

import asyncio  # noqa: E402
import collections  # noqa: E402
from decimal import Decimal  # noqa: E402

from soklet_core.json import JsonObject, serialize  # noqa: E402
from soklet_core.mcp import (  # noqa: E402
    CallToolResult,
    GetPromptResult,
    InputRequest,
    InputRequestDeclaration,
    InputRequiredResult,
    InputRequirement,
    PromptMessage,
    Registry,
    RequestContext,
    RequestStateMode,
    form_request,
    prompt,
    tool,
    url_request,
)

FORM = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
URL = InputRequestDeclaration.from_elicitation_url(InputRequirement.CONDITIONAL)
SAMPLING_REQUIRED = InputRequestDeclaration.from_sampling(InputRequirement.REQUIRED)
OBJECT = {"type": "object"}


class Entries:
    """How often each handler was entered (thread-safe), and the cancellation signal of ``slow``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[str] = collections.Counter()
        self.cancelled = threading.Event()
        self.sync_cancelled = threading.Event()

    def enter(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def __getitem__(self, name: str) -> int:
        with self._lock:
            return self._counts[name]


def ask(message: str = "Continue?") -> InputRequest:
    return form_request(FORM, message, {"type": "object", "properties": {}})


def build_test_registry(entries: Entries) -> Registry:
    """Tools (and one prompt) that expose what the server hands them."""

    @tool(name="probe", description="Counts rounds in framework state.", input_schema=OBJECT,
          input_request_declarations=[FORM], request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED)  # fmt: skip
    def probe(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        entries.enter("probe")
        state = context.framework_request_state
        n = 0 if state is None else int(state["n"].value)  # type: ignore[index]
        if "done" in context.input_responses:
            return CallToolResult.from_text(f"done after {n} rounds; owner={context.partition}")
        return InputRequiredResult.with_input_request("ask", ask()).framework_request_state({"n": n + 1}).build()

    @prompt(name="probe", description="Same name as the tool.", input_request_declarations=[FORM],
            request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED)  # fmt: skip
    def probe_prompt(context: RequestContext, arguments: Any) -> GetPromptResult | InputRequiredResult:
        entries.enter("probe-prompt")
        if context.framework_request_state is None:
            return InputRequiredResult.with_input_request("ask", ask()).framework_request_state({"n": 1}).build()
        return GetPromptResult.of([PromptMessage.user("prompt done")])

    @tool(
        name="echo.responses",
        description="Echoes the responses.",
        input_schema=OBJECT,
        input_request_declarations=[FORM],
    )
    def echo(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        entries.enter("echo")
        responses = context.input_responses
        if "order" not in responses:
            return InputRequiredResult.with_input_request("order", ask("Order?")).build()
        price = responses.find_content("order", "price", Decimal)
        body = {"keys": list(responses.as_map()), "price": str(price), "state": context.is_retry}
        body["extra"] = serialize(responses.find("extra")) if "extra" in responses else None
        return CallToolResult.from_text(json.dumps(body))

    @tool(name="needs.sampling", description="REQUIRED sampling.", input_schema=OBJECT,
          input_request_declarations=[SAMPLING_REQUIRED])  # fmt: skip
    def needs_sampling(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        entries.enter("needs.sampling")
        return CallToolResult.from_text("had sampling")

    @tool(name="asks.both", description="CONDITIONAL form and URL.", input_schema=OBJECT,
          input_request_declarations=[FORM, URL])  # fmt: skip
    def asks_both(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        entries.enter("asks.both")
        context.invocation.report_progress(1, total=2, message="half")
        if arguments.get("emit") is None:
            return CallToolResult.from_text("emitted nothing")
        link = url_request(URL, "Open it.", "https://example.com/approve/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        return InputRequiredResult.with_input_request("form", ask()).with_input_request("url", link).build()

    @tool(name="big.state", description="Emits a state of the requested size.", input_schema=OBJECT,
          input_request_declarations=[FORM], request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED)  # fmt: skip
    def big_state(context: RequestContext, arguments: JsonObject) -> InputRequiredResult:
        entries.enter("big.state")
        size = int(arguments["size"].value)  # type: ignore[union-attr]
        return InputRequiredResult.with_input_request("ask", ask()).framework_request_state("x" * size).build()

    @tool(name="app.state", description="Application-protected state.", input_schema=OBJECT,
          request_state_mode=RequestStateMode.APPLICATION_PROTECTED)  # fmt: skip
    def app_state(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        entries.enter("app.state")
        state = context.application_request_state
        if state is None:
            size = int(arguments["size"].value)  # type: ignore[union-attr]
            return InputRequiredResult.builder().application_request_state("é" * (size // 2) + "a" * (size % 2)).build()
        assert context.framework_request_state is None
        return CallToolResult.from_text(f"{len(state.encode())}:{state[:3]}")

    @tool(name="plain", description="No state.", input_schema=OBJECT)
    def plain(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        entries.enter("plain")
        return CallToolResult.from_text("x" * int(arguments.get("size", 0) and arguments["size"].value))  # type: ignore[union-attr]

    @tool(name="slow", description="Waits until cancelled.", input_schema=OBJECT)
    async def slow(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        entries.enter("slow")
        try:
            for _ in range(200):
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            entries.cancelled.set()
            raise
        return CallToolResult.from_text("finished")

    @tool(name="pause", description="Sleeps 0.5 s, then answers.", input_schema=OBJECT)
    def pause(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        entries.enter("pause")
        time.sleep(0.5)
        return CallToolResult.from_text("paused")

    @tool(name="slow.sync", description="A sync handler that polls the cancelled flag.", input_schema=OBJECT)
    def slow_sync(context: RequestContext, arguments: JsonObject) -> CallToolResult:
        entries.enter("slow.sync")
        for _ in range(200):
            if context.invocation.cancelled:
                entries.sync_cancelled.set()
                return CallToolResult.from_text("stopped")
            time.sleep(0.02)
        return CallToolResult.from_text("finished")

    return Registry(
        probe, probe_prompt, echo, needs_sampling, asks_both, big_state, app_state, plain, slow, pause, slow_sync
    )


def task_request(client: Client, method: str, task_id: str, *, capabilities: Any = TASK_CAPS, **params: Any) -> Reply:
    """``tasks/get|update|cancel`` with ``capabilities`` declared (the extension, by default) and ``Mcp-Name`` = the
    task id, as the conformance suite sends them."""
    return client.post(method, {"taskId": task_id, **params}, capabilities=capabilities, headers={"Mcp-Name": task_id})


def wait_for_task(client: Client, task_id: str, *statuses: str, capabilities: Any = TASK_CAPS) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task's status is one of ``statuses``; the DetailedTask. Fails the test after
    :data:`TASK_SETTLE_SECONDS`."""
    deadline = time.monotonic() + TASK_SETTLE_SECONDS
    while True:
        task: dict[str, Any] = task_request(client, "tasks/get", task_id, capabilities=capabilities).result
        assert task["resultType"] == "complete", task
        if task["status"] in statuses:
            return task
        assert time.monotonic() < deadline, f"the task stayed {task['status']}, not {statuses}"
        time.sleep(0.05)
