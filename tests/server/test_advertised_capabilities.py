"""A server advertises only what its registry holds, and caches its lists privately and briefly by default.

The demo has tools only: it used to advertise prompts, resources and completions as well, and its lists were
cacheable ``public`` for five minutes, so a pinned client kept a redeployed server's old tools. The conformance
fixtures hold every kind, so they keep every capability.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from soklet_apps import conformance, demo
from soklet_core.json import JsonObject
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    McpServer,
    PromptMessage,
    ReadResourceResult,
    Registry,
    RequestContext,
    ServerOptions,
    completion,
    prompt,
    resource,
    resource_template,
    tool,
)
from soklet_core.mcp.model import (
    CacheHint,
    CacheScope,
    CompletionArguments,
    PromptArgument,
    ResourceArguments,
    TextResourceContents,
)
from soklet_core.mcp.server.options import DEFAULT_LIST_CACHE_HINT, DEFAULT_LIST_CACHE_TTL_MS, ProtocolOptions
from soklet_core.protection import ProtectionConfig
from tests.cli.support_serve import Served
from tests.server.support import Client, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("caps"))
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")


@tool(name="only.tool", description="A tool.", input_schema={"type": "object"})
def only_tool(context: RequestContext, arguments: JsonObject) -> CallToolResult:
    return CallToolResult.from_text("ok")


@prompt(name="only.prompt", description="A prompt.", arguments=[PromptArgument("topic", "A topic")])
def only_prompt(context: RequestContext, arguments: Mapping[str, str]) -> GetPromptResult:
    return GetPromptResult.of([PromptMessage.user("hello")])


@resource(uri="test://only", name="only.resource", description="A resource.", mime_type="text/plain")
def only_resource(context: RequestContext, arguments: ResourceArguments) -> ReadResourceResult:
    return ReadResourceResult.of([TextResourceContents(uri=arguments.uri, text="data", mime_type="text/plain")])


@resource_template(uri_template="test://item/{id}", name="only.template", description="A template.")
def only_template(context: RequestContext, arguments: ResourceArguments) -> ReadResourceResult:
    return ReadResourceResult.of([TextResourceContents(uri=arguments.uri, text="item", mime_type="text/plain")])


@completion(prompt="only.prompt", argument="topic")
def complete_topic(context: RequestContext, arguments: CompletionArguments) -> CompleteResult:
    return CompleteResult.of(["weather"])


def discover(registry: Registry, **options: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``server/discover`` and the four list results of a real server over ``registry``."""
    server = McpServer(registry, protection=ProtectionConfig(keyring=KEYRING), **options)
    with running(server) as base:
        client = Client(base)
        try:
            found = client.post("server/discover").result
            lists = {method: client.post(method).result for method in LISTS}
        finally:
            client.close()
    return found, lists


def test_the_demo_advertises_tools_only_and_its_lists_are_private_and_brief() -> None:
    found, lists = discover(demo.build_registry())
    assert found["capabilities"] == {"tools": {}}
    for result in (found, *lists.values()):
        assert result["cacheScope"] == "private"
        assert 0 < result["ttlMs"] <= 60_000
    assert CacheHint(DEFAULT_LIST_CACHE_TTL_MS, CacheScope.PRIVATE) == DEFAULT_LIST_CACHE_HINT
    assert DEFAULT_LIST_CACHE_TTL_MS == 60_000


def test_each_kind_is_advertised_only_when_registered() -> None:
    assert Registry().server_capabilities() == JsonObject.empty_instance()
    assert Registry(only_tool).server_capabilities().keys() == {"tools"}
    assert Registry(only_prompt).server_capabilities().keys() == {"prompts"}
    assert Registry(only_resource).server_capabilities().keys() == {"resources"}
    assert Registry(only_template).server_capabilities().keys() == {"resources"}
    # A prompt alone completes nothing: completions only with a completion registration.
    completing = Registry(only_prompt, complete_topic)
    assert completing.server_capabilities().keys() == {"prompts", "completions"}
    found, _ = discover(Registry(only_prompt, only_template))
    assert found["capabilities"] == {"prompts": {}, "resources": {}}


def test_the_conformance_fixtures_keep_every_capability() -> None:
    found, _ = discover(conformance.build_registry(tasks=False))
    assert found["capabilities"] == {"tools": {}, "prompts": {}, "resources": {}, "completions": {}}
    merged, _ = discover(Registry.merge(conformance.build_registry(tasks=False), demo.build_registry()))
    assert set(merged["capabilities"]) == {"tools", "prompts", "resources", "completions"}


def test_the_list_cache_hint_stays_configurable() -> None:
    hint = CacheHint(300_000, CacheScope.PUBLIC)
    found, lists = discover(
        demo.build_registry(), options=ServerOptions(protocol=ProtocolOptions(list_cache_hint=hint))
    )
    assert (found["ttlMs"], found["cacheScope"]) == (300_000, "public")
    assert all((item["ttlMs"], item["cacheScope"]) == (300_000, "public") for item in lists.values())


@pytest.mark.slow
def test_served_demo_both_eras_advertise_what_it_has(tmp_path: Path) -> None:
    served = Served(tmp_path, "--store", f"sqlite:///{tmp_path / 'soklet.db'}")
    try:
        found = served.client.post("server/discover").result
        assert set(found["capabilities"]) - {"extensions"} == {"tools"}
        assert found["cacheScope"] == "private"
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        answer = httpx.post(
            served.facts["url"],
            content=json.dumps(initialize).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        text = answer.text
        payload = json.loads(text[text.index("{") :].splitlines()[0]) if not text.startswith("{") else answer.json()
        assert payload["result"]["capabilities"] == {"tools": {}}
    finally:
        served.stop()
