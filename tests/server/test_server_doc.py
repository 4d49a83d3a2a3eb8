"""docs/server.md runs as written, and the server it builds answers a real two-request flow."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.server.support import FORM_CAPS, Client, running

DOC = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def test_doc_runs_and_its_server_serves() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert blocks
    namespace: dict[str, Any] = {"__name__": "server_doc"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    with running(namespace["server"]) as url:
        client = Client(url, token="s3cret-token")
        first = client.call("greet", {}, capabilities=FORM_CAPS)
        assert first.result["resultType"] == "input_required"
        answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
        assert client.retry("greet", {}, first.state, answer, capabilities=FORM_CAPS).text == "Hello, Ada!"
        assert Client(url).call("greet", {}, capabilities=FORM_CAPS).status == 401
        client.close()
