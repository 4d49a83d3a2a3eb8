"""A store that goes away under a running ``soklet serve``: a SQLite file unlinked or replaced stops every write
(503 with ``Retry-After``, one ERROR line, ``soklet_store_up 0``, ``/v1/ready`` not ready: ``store-file-lost``, which
only a restart mends), and a store that cannot be reached answers durable handle requests 503 as it answers task
requests while the instance stays ready (an outage alone keeps it in traffic). Real subprocesses, real files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.support_serve import TASK_CAPS, Served, shared_keyring, wait_until
from tests.server.support import Reply
from tests.server.support_admin import TOKEN

pytestmark = pytest.mark.slow

FORM: dict[str, Any] = {"elicitation": {}}


@pytest.fixture
def instances() -> Iterator[list[Served]]:
    """Every instance a test starts, killed afterwards if the test did not stop it."""
    started: list[Served] = []
    yield started
    for instance in started:
        instance.kill()


def _serve(instances: list[Served], folder: Path, store_url: str) -> Served:
    token_file = folder / "admin-token"
    token_file.write_text(f"ops:{TOKEN}\n")
    token_file.chmod(0o600)
    served = Served(
        folder,
        *("--fixtures", "conformance", "--keyring", str(shared_keyring(folder)), "--store", store_url),
        *("--admin-port", "0", "--admin-token-file", str(token_file)),
        name=f"serve-{len(instances)}",
    )
    instances.append(served)
    return served


def _store_up(served: Served) -> str:
    reply = httpx.get(served.facts["admin_url"] + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert reply.status_code == 200
    lines = [line for line in reply.text.splitlines() if line.startswith("soklet_store_up ")]
    return lines[0].rsplit(" ", 1)[1]


def _ready(served: Served) -> httpx.Response:
    return httpx.get(served.facts["admin_url"] + "/v1/ready")  # a probe carries no token


def _unavailable(reply: Reply) -> None:
    assert reply.status == 503, reply.body
    assert reply.headers.get("retry-after") == "1"
    assert reply.error["code"] == -32603


@pytest.mark.parametrize("how", ["unlinked", "replaced"])
def test_a_store_file_removed_while_serving_refuses_writes(tmp_path: Path, instances: list[Served], how: str) -> None:
    database = tmp_path / "store.db"
    served = _serve(instances, tmp_path, f"sqlite://{database}")
    assert _ready(served).status_code == 200
    assert _ready(served).json() == {"status": "ready"}
    assert _store_up(served) == "1.0"
    task_id = served.call_task("confirm_delete", {"filename": "a.txt"})
    served.wait_for_status(task_id, "input_required")
    started = served.client.call("order.checkout", {}, capabilities=FORM)
    assert started.result["resultType"] == "input_required"

    database.unlink()
    if how == "replaced":
        database.write_bytes(b"")
        database.chmod(0o600)

    # Every write is refused from now on: a task creation, a task update, a handle rotation.
    _unavailable(served.client.call("confirm_delete", {"filename": "b.txt"}, capabilities=TASK_CAPS))
    _unavailable(served.client.call("order.checkout", {}, capabilities=FORM))
    _unavailable(served.tasks("tasks/cancel", task_id))
    assert _store_up(served) == "0.0"
    not_ready = _ready(served)
    assert not_ready.status_code == 503
    assert not_ready.json() == {"status": "not-ready", "reason": "store-file-lost"}
    # Held back, the MCP endpoint refuses every request before its body, with the same documented answer.
    _unavailable(served.client.call("catalog.continue", {}, capabilities=FORM))
    health = httpx.get(served.facts["admin_url"] + "/v1/health")
    assert (health.status_code, health.json()) == (503, {"status": "failing", "reason": "store-file-lost"})
    log = served.stop()
    errors = [line for line in log.splitlines() if "ERROR" in line and "store file" in line]
    assert len(errors) == 1, log[-3000:]
    assert str(database) in errors[0]
    assert TOKEN not in log


def test_a_stopped_postgresql_answers_handle_requests_503(tmp_path: Path, instances: list[Served]) -> None:
    from tools.postgres import PostgresCluster

    with PostgresCluster() as cluster:
        served = _serve(instances, tmp_path, cluster.url)
        started = served.client.call("order.checkout", {}, capabilities=FORM)
        assert started.result["resultType"] == "input_required"
        cluster.stop()
        # The handle request and a task request get the same documented answer.
        _unavailable(served.client.call("order.checkout", {}, capabilities=FORM))
        _unavailable(served.client.call("confirm_delete", {"filename": "b.txt"}, capabilities=TASK_CAPS))
        assert wait_until(lambda: {"up": _store_up(served)}, lambda seen: seen["up"] == "0.0", 30)
        # An outage alone keeps the instance in traffic: what needs no store is served.
        assert _ready(served).status_code == 200
        assert _ready(served).json() == {"status": "ready"}
        flow = served.client.call("catalog.continue", {}, capabilities=FORM)
        assert flow.result["resultType"] == "input_required"
        served.stop()
