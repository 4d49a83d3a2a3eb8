"""``soklet tasks list|show|cancel`` on real stores (SQLite files and a throwaway PostgreSQL cluster)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from soklet_core.store import TaskStatus
from tests.cli.store_seed import PASSWORD, seed_tasks, task
from tests.cli.support_serve import Served, shared_keyring
from tests.conftest import Soklet

STATUSES = [TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED, TaskStatus.COMPLETED, TaskStatus.FAILED]


def _seed(url: str) -> None:
    seed_tasks(url, [task(f"task-{index}", status, offset_s=index) for index, status in enumerate(STATUSES)])


@pytest.mark.slow
def test_list_json_pages_and_filters(soklet: Soklet, store_url: str) -> None:
    _seed(store_url)
    result = soklet.run("tasks", "list", "--store", store_url, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert [entry["task_id"] for entry in document["tasks"]] == ["task-0", "task-1", "task-2", "task-3"]
    assert [entry["status"] for entry in document["tasks"]] == [status.value for status in STATUSES]
    first = document["tasks"][0]
    assert first["tool"] == "deploy.approve"
    assert first["created_at"] == "2026-08-01T12:00:00.000Z"
    assert first["expires_at"] is None
    assert document["next_after"] is None
    assert "user-data-7c1e" not in result.output  # the task's content is never listed
    page = json.loads(soklet.run("tasks", "list", "--store", store_url, "--json", "--limit", "2").stdout)
    assert [entry["task_id"] for entry in page["tasks"]] == ["task-0", "task-1"]
    assert page["next_after"] == "task-1"
    rest = soklet.run("tasks", "list", "--store", store_url, "--json", "--limit", "2", "--after", "task-1")
    assert [entry["task_id"] for entry in json.loads(rest.stdout)["tasks"]] == ["task-2", "task-3"]
    only = soklet.run("tasks", "list", "--store", store_url, "--json", "--status", "input_required")
    assert [entry["task_id"] for entry in json.loads(only.stdout)["tasks"]] == ["task-1"]


def test_list_text_shows_ids_whole_and_escapes_tool_names(soklet: Soklet) -> None:
    url = f"sqlite://{soklet.cwd / 'tasks.db'}"
    seed_tasks(url, [task("a-long-task-id-0123456789abcdef", TaskStatus.WORKING, tool="[bold]x\x1b[2J")])
    result = soklet.run("tasks", "list", "--store", url)
    assert result.returncode == 0, result.stderr
    assert "a-long-task-id-0123456789abcdef" in result.stdout
    assert "\x1b" not in result.stdout
    assert "[bold]x\\x1b[2J" in result.stdout  # shown as written, never read as markup or a terminal escape
    empty = soklet.run("tasks", "list", "--store", url, "--status", "failed")
    assert empty.returncode == 0
    assert "no tasks failed in sqlite://" in empty.stdout


#: A stored task document as the server writes it (a working task, nobody holding its lease).
DOCUMENT = json.dumps(
    {"v": 1, "arguments": {}, "capabilities": {}, "ttlMs": None, "pollIntervalMs": 500, "round": 1, "issued": []}
)


def test_an_id_that_begins_with_a_dash_goes_after_double_dash(soklet: Soklet) -> None:
    # Older stores may hold such ids (new ones never begin with '-'): '--' ends the options.
    url = f"sqlite://{soklet.cwd / 'tasks.db'}"
    seed_tasks(url, [replace(task("-Fj2pG-dash-first", TaskStatus.WORKING), document=DOCUMENT)])
    as_option = soklet.run("tasks", "show", "-Fj2pG-dash-first", "--store", url)
    assert as_option.returncode == 2
    shown = soklet.run("tasks", "show", "--store", url, "--json", "--", "-Fj2pG-dash-first")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["task"]["task_id"] == "-Fj2pG-dash-first"
    cancelled = soklet.run("tasks", "cancel", "--store", url, "--json", "--", "-Fj2pG-dash-first")
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["status"] == "cancelled"


def test_show_of_a_document_this_soklet_cannot_read_is_one_line(soklet: Soklet) -> None:
    url = f"sqlite://{soklet.cwd / 'tasks.db'}"
    seed_tasks(url, [task("foreign", TaskStatus.WORKING)])  # its document is another program's
    shown = soklet.run("tasks", "show", "foreign", "--store", url)
    assert shown.returncode == 1
    assert shown.stderr == "soklet: task foreign: its stored document is not one this soklet reads\n"
    assert "user-data-7c1e" not in shown.output


@pytest.mark.slow
def test_list_usage_errors(soklet: Soklet) -> None:
    url = f"sqlite://{soklet.cwd / 'tasks.db'}"
    for arguments in (
        ("--limit", "0"),
        ("--limit", "1001"),
        ("--status", "sleeping"),
        ("--after", "has space"),
    ):
        result = soklet.run("tasks", "list", "--store", url, *arguments)
        assert result.returncode == 2, arguments
        assert result.stderr.count("\n") == 1, arguments


@pytest.mark.slow
def test_bad_and_unreachable_store_urls_never_show_the_password(soklet: Soklet) -> None:
    malformed = soklet.run("tasks", "list", "--store", f"postgresql://ops:{PASSWORD}@127.0.0.1:99999/soklet")
    assert malformed.returncode == 2
    assert "bad-url" in malformed.stderr
    assert PASSWORD not in malformed.output
    relative = soklet.run("tasks", "list", "--store", "sqlite://relative/path.db")
    assert relative.returncode == 2
    # Port 1 on loopback: nothing listens, the connection is refused at once.
    unreachable = soklet.run("tasks", "list", "--store", f"postgresql://ops:{PASSWORD}@127.0.0.1:1/soklet")
    assert unreachable.returncode == 3, unreachable.stderr
    assert unreachable.stderr.count("\n") == 1
    assert "unavailable" in unreachable.stderr
    assert "postgresql://ops:***@127.0.0.1:1/soklet" in unreachable.stderr
    assert PASSWORD not in unreachable.output
    via_env = soklet.run("tasks", "list", env={"SOKLET_STORE": f"postgresql://ops:{PASSWORD}@127.0.0.1:1/soklet"})
    assert via_env.returncode == 3
    assert PASSWORD not in via_env.output


@pytest.mark.slow
def test_show_and_cancel_a_served_task(soklet: Soklet, store_url: str) -> None:
    served = Served(
        soklet.cwd, "--fixtures", "conformance", "--keyring", str(shared_keyring(soklet.cwd)), "--store", store_url
    )
    try:
        task_id = served.call_task("confirm_delete", {"filename": "secret-plans.txt"})
        served.wait_for_status(task_id, "input_required")
        shown = soklet.run("tasks", "show", task_id, "--store", store_url)
        assert shown.returncode == 0, shown.stderr
        assert "confirm (elicitation/create)" in shown.stdout
        assert "input_required" in shown.stdout
        assert "Waiting for confirmation" in shown.stdout
        assert "secret-plans" not in shown.output  # the request's params are user data
        document = json.loads(soklet.run("tasks", "show", task_id, "--store", store_url, "--json").stdout)
        assert document["task"]["input_requests"] == [{"key": "confirm", "method": "elicitation/create"}]
        assert document["task"]["tool"] == "confirm_delete"
        assert "content" not in document
        assert "secret-plans" not in json.dumps(document)
        content = json.loads(
            soklet.run("tasks", "show", task_id, "--store", store_url, "--json", "--show-content").stdout
        )["content"]
        assert "secret-plans.txt" in content["inputRequests"]["confirm"]["params"]["message"]
        cancelled = soklet.run("tasks", "cancel", task_id, "--store", store_url, "--json")
        assert cancelled.returncode == 0, cancelled.stderr
        assert json.loads(cancelled.stdout) == {
            "task_id": task_id,
            "status_before": "input_required",
            "status": "cancelled",
            "cancelled": True,
        }
        assert served.get(task_id)["status"] == "cancelled"
        again = soklet.run("tasks", "cancel", task_id, "--store", store_url)
        assert again.returncode == 0
        assert "cancelled: left as it is" in again.stdout
        # A working task: cancelled at once in the store; the serving instance stops its step.
        working = served.call_task("slow_compute", {"seconds": 60})
        assert soklet.run("tasks", "cancel", working, "--store", store_url).returncode == 0
        assert served.wait_for_status(working, "cancelled")["status"] == "cancelled"
        listed = json.loads(soklet.run("tasks", "list", "--store", store_url, "--json").stdout)
        assert {entry["task_id"]: entry["status"] for entry in listed["tasks"]} == {
            task_id: "cancelled",
            working: "cancelled",
        }
        for command in ("show", "cancel"):
            missing = soklet.run("tasks", command, "no-such-task", "--store", store_url)
            assert missing.returncode == 5
            assert missing.stderr == "soklet: no task no-such-task in the store\n"
    finally:
        served.stop()


@pytest.mark.slow
def test_purge_expired_deletes_only_expired_tasks(soklet: Soklet, store_url: str) -> None:
    past = datetime.now(UTC) - timedelta(minutes=1)
    future = datetime.now(UTC) + timedelta(hours=1)
    seed_tasks(
        store_url,
        [
            replace(task("gone-0", TaskStatus.COMPLETED), expires_at=past),
            replace(task("gone-1", TaskStatus.WORKING, offset_s=1), expires_at=past),
            replace(task("kept-0", TaskStatus.INPUT_REQUIRED, offset_s=2), expires_at=future),
            task("kept-1", TaskStatus.FAILED, offset_s=3),  # no time to live: never purged
        ],
    )
    result = soklet.run("tasks", "purge-expired", "--store", store_url, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["purged"] == 2
    assert document["remaining"] == {
        "working": 0,
        "input_required": 1,
        "completed": 0,
        "failed": 1,
        "cancelled": 0,
    }
    assert PASSWORD not in result.output
    listed = json.loads(soklet.run("tasks", "list", "--store", store_url, "--json").stdout)
    assert [entry["task_id"] for entry in listed["tasks"]] == ["kept-0", "kept-1"]
    again = soklet.run("tasks", "purge-expired", "--store", store_url)
    assert again.returncode == 0, again.stderr
    assert "purged     0 expired" in again.stdout


@pytest.mark.slow
def test_show_of_a_working_task_names_its_lease_holder_expiry_and_attempts(
    soklet: Soklet, sqlite_store_url: str
) -> None:
    served = Served(
        soklet.cwd,
        "--fixtures",
        "conformance",
        "--keyring",
        str(shared_keyring(soklet.cwd)),
        "--store",
        sqlite_store_url,
    )
    try:
        working = served.call_task("slow_compute", {"seconds": 120})
        document = json.loads(soklet.run("tasks", "show", working, "--store", sqlite_store_url, "--json").stdout)
        run = document["task"]["run"]
        assert document["task"]["status"] == "working"
        assert isinstance(run["lease_holder"], str)
        assert run["lease_holder"].count("/") == 2  # host/pid/suffix
        assert datetime.fromisoformat(run["lease_expires_at"]) > datetime.now(UTC) - timedelta(minutes=1)
        assert run["attempts"] == 1
        assert run["round"] == 1
        shown = soklet.run("tasks", "show", working, "--store", sqlite_store_url)
        assert shown.returncode == 0, shown.stderr
        rows = {
            line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in shown.stdout.splitlines()
            if line.count("│") >= 3
        }
        assert rows["lease holder"] == run["lease_holder"]
        assert rows["lease expires"] == run["lease_expires_at"]
        assert rows["attempts"] == "1"
        # Once finished, nobody holds it.
        task_request_done = soklet.run("tasks", "cancel", working, "--store", sqlite_store_url)
        assert task_request_done.returncode == 0
        after = json.loads(soklet.run("tasks", "show", working, "--store", sqlite_store_url, "--json").stdout)
        assert after["task"]["run"]["lease_holder"] is None
        assert after["task"]["run"]["lease_expires_at"] is None
    finally:
        served.stop()


@pytest.mark.slow
def test_show_prints_a_hex_host_holder_whole_and_an_edited_one_never(soklet: Soklet, sqlite_store_url: str) -> None:
    def document(owner: str) -> str:
        return json.dumps(
            {
                "v": 1,
                "arguments": {},
                "capabilities": {},
                "ttlMs": None,
                "pollIntervalMs": 500,
                "round": 2,
                "issued": [],
                "lease": 1_790_000_000_000,
                "owner": owner,
                "attempts": 3,
            }
        )

    container = "a1b2c3d4e5f6/1234/deadbeef"  # a container's host name is hex digits: still shown whole
    edited = "[red]x\x1b[2J/1/zz"
    seed_tasks(
        sqlite_store_url,
        [
            replace(task("held", TaskStatus.WORKING), document=document(container)),
            replace(task("edited", TaskStatus.WORKING, offset_s=1), document=document(edited)),
        ],
    )
    held = json.loads(soklet.run("tasks", "show", "held", "--store", sqlite_store_url, "--json").stdout)["task"]
    assert held["run"] == {
        "lease_holder": container,
        "lease_expires_at": "2026-09-21T14:13:20.000Z",
        "attempts": 3,
        "round": 2,
    }
    assert container in soklet.run("tasks", "show", "held", "--store", sqlite_store_url).stdout
    shown = soklet.run("tasks", "show", "edited", "--store", sqlite_store_url)
    assert "(unrecognised)" in shown.stdout
    assert "\x1b" not in shown.output
