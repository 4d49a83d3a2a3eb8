"""docs/durable.md's task tool runs as written: served with a real store, it asks through the task and completes."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from soklet_core.mcp import McpServer, Registry
from soklet_core.store import open_store
from tests.server.support import TASK_CAPS, Client, running, task_request, wait_for_task

DOC = Path(__file__).resolve().parents[2] / "docs" / "durable.md"


def test_the_task_tool_of_the_doc_asks_through_the_task_and_completes(sqlite_store_url: str) -> None:
    first = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)[0]
    namespace: dict[str, Any] = {"__name__": "durable_doc"}
    exec(compile(first, str(DOC), "exec"), namespace)
    store = open_store(sqlite_store_url)
    try:
        with running(McpServer(Registry(namespace["build"]), store=store)) as url:
            client = Client(url)
            created = client.call("report.build", {}, capabilities=TASK_CAPS).result
            assert created["resultType"] == "task"
            task_id = created["taskId"]
            waiting = wait_for_task(client, task_id, "input_required")
            assert list(waiting["inputRequests"]) == ["title"]
            answer = {"title": {"action": "accept", "content": {"title": "Q3"}}}
            assert task_request(client, "tasks/update", task_id, inputResponses=answer).status == 200
            done = wait_for_task(client, task_id, "completed")
            assert done["result"]["content"][0]["text"] == "Report Q3 built."
            # Without the extension the same tool runs within the request (OPTIONAL): the step cannot ask there.
            inline = client.call("report.build", {}, capabilities={"elicitation": {}})
            assert inline.status == 200
            assert inline.error is not None
            assert inline.error["code"] == -32603
            client.close()
    finally:
        asyncio.run(store.close())
