"""The demo's messages agree with their counts: one stage, one item (real uvicorn on loopback, httpx)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from soklet_apps import demo
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer
from soklet_core.protection import ProtectionConfig
from tests.server.support import FORM_CAPS, Client, running

KEYRING = ProtectionKeyring(ProtectionKey.generate("wording-key"))


@pytest.fixture
def client() -> Iterator[Client]:
    registry = demo.build_registry(link_base_url="http://127.0.0.1:9/link", development=True)
    with running(McpServer(registry, protection=ProtectionConfig(keyring=KEYRING))) as url:
        c = Client(url)
        yield c
        c.close()


def test_a_single_stage_is_not_all_1_stages(client: Client) -> None:
    first = client.call("deploy.approve", {"stages": 1}, capabilities=FORM_CAPS)
    assert "stage 1 of 1" in first.result["inputRequests"]["stage"]["params"]["message"]
    right = {"stage": {"action": "accept", "content": {"approve": True}}}
    done = client.retry("deploy.approve", {"stages": 1}, first.state, right, capabilities=FORM_CAPS)
    assert done.text == "The stage is approved; deploying."
