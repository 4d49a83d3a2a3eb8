"""``soklet serve --store`` as real subprocesses on real SQLite files and a real PostgreSQL cluster: the default
stores, refusals, a restart between ``tasks/update`` and ``tasks/get``, two instances sharing one PostgreSQL
store, and the store figures on ``/metrics``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from soklet_core.store import MAX_QUOTA_VALUE
from tests.cli.store_seed import PASSWORD
from tests.cli.support_serve import CONFIRM, Served, shared_keyring
from tests.server.support import TASK_CAPS
from tests.server.support_admin import TOKEN

pytestmark = pytest.mark.slow


@pytest.fixture
def instances() -> Iterator[list[Served]]:
    """Every instance a test starts, killed afterwards if the test did not stop it."""
    started: list[Served] = []
    yield started
    for instance in started:
        instance.kill()


def _serve(instances: list[Served], folder: Path, *arguments: str, **keywords: object) -> Served:
    instance = Served(folder, *arguments, name=f"serve-{len(instances)}", **keywords)  # type: ignore[arg-type]
    instances.append(instance)
    return instance


def test_development_store_dies_with_the_process(tmp_path: Path, instances: list[Served]) -> None:
    served = _serve(instances, tmp_path)
    facts = served.facts
    folder = Path(facts["keyring_file"]).parent
    assert facts["development_store"] is True
    assert facts["store_backend"] == "sqlite"
    assert facts["store"] == f"sqlite://{folder / 'store.db'}"
    assert (folder / "store.db").is_file()
    served.stop()
    assert not folder.exists()


def test_keyring_without_store_uses_the_data_folder(tmp_path: Path, instances: list[Served]) -> None:
    env = {**os.environ, "SOKLET_DATA_DIR": str(tmp_path / "data")}
    env.pop("SOKLET_STORE", None)
    served = _serve(instances, tmp_path, "--keyring", str(shared_keyring(tmp_path)), env=env)
    assert served.facts["development_store"] is False
    assert served.facts["store"] == f"sqlite://{tmp_path / 'data' / 'soklet.db'}"
    served.stop()
    assert (tmp_path / "data" / "soklet.db").is_file()  # durable: it outlives the process
    assert (tmp_path / "data").stat().st_mode & 0o077 == 0


def test_bad_store_is_one_line_and_an_exit_code(tmp_path: Path) -> None:
    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", *arguments],
            capture_output=True,
            text=True,
            timeout=60,
        )

    unreachable = run("--store", f"postgresql://ops:{PASSWORD}@127.0.0.1:1/soklet")
    assert unreachable.returncode == 3, unreachable.stderr
    assert unreachable.stdout == ""
    assert unreachable.stderr.count("\n") == 1
    assert unreachable.stderr.startswith("soklet: store postgresql://ops:***@127.0.0.1:1/soklet: unavailable")
    assert PASSWORD not in unreachable.stderr
    malformed = run("--store", f"postgresql://ops:{PASSWORD}@127.0.0.1:99999/soklet")
    assert malformed.returncode == 2
    assert PASSWORD not in malformed.stderr + malformed.stdout
    assert run("--store", "sqlite://relative.db").returncode == 2
    # A file where the store's folder should be: the store cannot be made.
    (tmp_path / "blocker").write_text("")
    blocked = run("--store", f"sqlite://{tmp_path / 'blocker' / 'store.db'}")
    assert blocked.returncode == 3, blocked.stderr
    assert blocked.stderr.count("\n") == 1


def test_restart_between_update_and_get_loses_nothing(tmp_path: Path, store_url: str, instances: list[Served]) -> None:
    keyring = str(shared_keyring(tmp_path))
    arguments = ("--fixtures", "conformance", "--keyring", keyring, "--store", store_url)
    first = _serve(instances, tmp_path, *arguments)
    assert PASSWORD not in first.facts["store"]
    task_id = first.call_task("confirm_delete", {"filename": "report.txt"})
    waiting = first.wait_for_status(task_id, "input_required")
    assert list(waiting["inputRequests"]) == ["confirm"]
    ack = first.tasks("tasks/update", task_id, inputResponses=CONFIRM)
    assert ack.result["resultType"] == "complete"
    first.stop()
    second = _serve(instances, tmp_path, *arguments)
    done = second.wait_for_status(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "Deleted report.txt"
    assert done["taskId"] == task_id
    second.stop()


def test_two_instances_share_one_postgresql_store(tmp_path: Path, postgres_url: str, instances: list[Served]) -> None:
    keyring = str(shared_keyring(tmp_path))
    arguments = ("--fixtures", "conformance", "--keyring", keyring, "--store", postgres_url)
    a = _serve(instances, tmp_path, *arguments, "--instance", "a")
    b = _serve(instances, tmp_path, *arguments, "--instance", "b")
    task_id = a.call_task("multi_input", {})
    on_b = b.wait_for_status(task_id, "input_required")
    assert sorted(on_b["inputRequests"]) == ["confirm", "user_name"]
    # Half the answers through B, the rest through A; each read on the other instance.
    name = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
    assert b.tasks("tasks/update", task_id, inputResponses=name).result["resultType"] == "complete"
    on_a = a.wait_for_status(task_id, "input_required")
    assert list(on_a["inputRequests"]) == ["confirm"]
    assert a.tasks("tasks/update", task_id, inputResponses=CONFIRM).result["resultType"] == "complete"
    done_b = b.wait_for_status(task_id, "completed")
    assert done_b["result"]["content"][0]["text"] == "name: Ada; confirmed"
    assert a.get(task_id) == done_b
    # A cancel on one instance is seen on the other; an unknown id is the same -32602 on both.
    other = b.call_task("slow_compute", {"seconds": 60})
    assert a.tasks("tasks/cancel", other).result["resultType"] == "complete"
    assert b.wait_for_status(other, "cancelled")["status"] == "cancelled"
    assert a.tasks("tasks/get", "no-such-task").error["code"] == -32602
    assert b.tasks("tasks/get", "no-such-task").error == a.tasks("tasks/get", "no-such-task").error
    a.stop()
    b.stop()


def test_metrics_show_the_store_figures(tmp_path: Path, store_url: str, instances: list[Served]) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(f"ops:{TOKEN}\n")
    token_file.chmod(0o600)
    served = _serve(
        instances,
        tmp_path,
        *("--fixtures", "conformance", "--keyring", str(shared_keyring(tmp_path)), "--store", store_url),
        *("--admin-port", "0", "--admin-token-file", str(token_file)),
    )
    task_id = served.call_task("confirm_delete", {"filename": "a.txt"})
    served.wait_for_status(task_id, "input_required")

    def scrape() -> dict[str, str]:
        reply = httpx.get(served.facts["admin_url"] + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert reply.status_code == 200
        lines = [
            line
            for line in reply.text.splitlines()
            if line.startswith(("soklet_store", "soklet_tasks", "soklet_handles"))
        ]
        return dict(line.rsplit(" ", 1) for line in lines)

    figures = scrape()
    assert figures["soklet_store_up"] == "1.0"
    assert figures['soklet_tasks{status="input_required"}'] == "1.0"
    assert figures['soklet_tasks{status="completed"}'] == "0.0"
    assert figures["soklet_handles_live"] == "0.0"
    assert PASSWORD not in served.stop()


def test_task_ttl_option_is_every_new_task_s_ttl(tmp_path: Path, instances: list[Served]) -> None:
    served = _serve(instances, tmp_path, "--fixtures", "conformance", "--task-ttl", "2h")
    task_id = served.call_task("confirm_delete", {"filename": "report.txt"})
    assert served.get(task_id)["ttlMs"] == 7_200_000
    served.stop()
    refused = subprocess.run(
        [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--task-ttl", "soon"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "--task-ttl" in refused.stderr


def test_task_bounds_per_partition_are_options(tmp_path: Path, instances: list[Served]) -> None:
    served = _serve(
        instances,
        tmp_path,
        "--fixtures",
        "conformance",
        "--task-max-per-partition",
        "1",
        "--task-max-mib-per-partition",
        "1",
    )
    served.call_task("confirm_delete", {"filename": "report.txt"})
    refused = served.client.call("confirm_delete", {"filename": "other.txt"}, capabilities=TASK_CAPS)
    assert refused.error == {"code": -32603, "message": "Too many stored tasks"}
    served.stop()
    for option, value in (
        ("--task-max-per-partition", "0"),
        ("--task-max-per-partition", str(MAX_QUOTA_VALUE + 1)),
        ("--task-max-mib-per-partition", "0"),
        ("--task-max-mib-per-partition", str(MAX_QUOTA_VALUE // 2**20 + 1)),
    ):
        bad = subprocess.run(
            [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", option, value],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 2, (option, value)
        assert option in bad.stderr
        assert "Traceback" not in bad.stderr
