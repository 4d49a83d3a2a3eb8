"""The shipped Prometheus rules (deploy/prometheus/soklet.rules.yml): valid for ``promtool check rules``, each alert
proven by ``promtool test rules`` to fire on a one-minute incident and not on a healthy fleet
(tests/deploy/soklet.rules.test.yml), grouped ``by (job)``, and naming only metrics soklet exports (read from real
``soklet serve`` instances' ``/metrics``, one in store mode, one in file mode). promtool comes from Debian's
prometheus package (``scripts/prometheus``, run by ``scripts/test``); without it these tests fail, they are never
skipped."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from soklet_core.keys import ProtectionKey
from soklet_core.mcp.server.ops._metrics import RETIRED_KEY_REASON
from soklet_core.mcp.server.ops._readiness import NotReady
from soklet_core.protection import RequestStateProtectionReason
from tests.server.support_admin import write_keyring

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "soklet.rules.yml"
UNIT_TESTS = Path(__file__).with_name("soklet.rules.test.yml")
#: A metric name in a PromQL expression (soklet's names are lower case with underscores).
METRIC_NAME = re.compile(r"\bsoklet_[a-z_]+")
#: A ``reason`` matcher's literal (one value, or alternatives joined by ``|``).
REASON_MATCHER = re.compile(r'reason=~?"([a-z|-]+)"')
#: An alert a unit test evaluates.
ALERT_NAME = re.compile(r"alertname: (\w+)")
#: The metrics only a store-mode server exposes (``soklet serve --keyring-from-store``); a file-mode one lacks them.
STORE_MODE_ONLY = {"soklet_fleet_generation"}


def promtool() -> str:
    found = shutil.which("promtool")
    assert found is not None, "promtool is missing: run `bash scripts/prometheus` (Debian's prometheus package)"
    return found


def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_promtool_checks_the_rules() -> None:
    result = subprocess.run(
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_each_alert_fires_on_a_one_minute_incident_and_not_on_a_healthy_fleet() -> None:
    result = subprocess.run(
        [promtool(), "test", "rules", UNIT_TESTS.name],
        cwd=UNIT_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    # Every alert is exercised by the unit tests.
    tested = set(ALERT_NAME.findall(UNIT_TESTS.read_text()))
    assert tested == {rule["alert"] for rule in rules()}


def test_every_alert_is_grouped_by_job_and_waits_less_than_a_minute() -> None:
    for rule in rules():
        assert "by (job)" in rule["expr"], rule["alert"]
        assert rule["for"] == "30s", rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning"}


def test_reason_matchers_name_reasons_soklet_reports() -> None:
    known = {reason.value for reason in RequestStateProtectionReason} | {RETIRED_KEY_REASON}
    known |= {reason.value for reason in NotReady}
    seen: set[str] = set()
    for rule in rules():
        for literal in REASON_MATCHER.findall(rule["expr"]):
            seen.update(literal.split("|"))
    assert seen == {"unknown-key", RETIRED_KEY_REASON, NotReady.GENERATION_BEHIND.value}
    assert seen <= known


def _exported(text: str) -> set[str]:
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def _serve(folder: Path, *arguments: str) -> set[str]:
    """The metric names a real ``soklet serve ARGS`` exposes on its admin listener's ``/metrics``."""
    token = folder / "admin-token"
    token.write_text("prometheus:adminTestToken-rules-7a1c\n")
    token.chmod(0o600)
    command = [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--json", "--admin-port", "0"]
    log = (folder / "serve.log").open("w")
    process = subprocess.Popen(
        [*command, "--admin-token-file", str(token), *arguments], stdout=subprocess.PIPE, stderr=log, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("{"), (folder / "serve.log").read_text()[-2000:]
        admin_url = json.loads(line)["admin_url"]
        headers = {"Authorization": "Bearer adminTestToken-rules-7a1c"}
        answer = httpx.get(admin_url + "/metrics", headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        return _exported(answer.text)
    finally:
        process.terminate()
        process.wait(30)
        log.close()


@pytest.mark.slow
def test_every_metric_the_rules_name_is_one_soklet_exports(tmp_path: Path) -> None:
    named = {name for rule in rules() for name in METRIC_NAME.findall(rule["expr"])}
    assert len(named) >= 7
    # Store mode: the fleet keyring in a SQLite store, wrapped under a KEK.
    kek, store = tmp_path / "kek", f"sqlite:///{tmp_path / 'store.db'}"
    for command in (
        ["kek", "generate", "--output", str(kek)],
        ["keys", "generate", "--store", store, "--kek-file", str(kek)],
    ):
        made = subprocess.run(
            [sys.executable, "-m", "soklet_cli", *command], capture_output=True, text=True, timeout=120, check=False
        )
        assert made.returncode == 0, made.stderr
    (tmp_path / "store-mode").mkdir(mode=0o700)
    store_mode = _serve(tmp_path / "store-mode", "--store", store, "--keyring-from-store", "--kek-file", str(kek))
    assert named <= store_mode, sorted(named - store_mode)
    # File mode: the same, but the fleet generation (a store-mode figure) is absent.
    (tmp_path / "file-mode").mkdir(mode=0o700)
    write_keyring(tmp_path / "file-mode" / "keys.toml", ProtectionKey.generate("k1"))
    file_mode = _serve(
        tmp_path / "file-mode",
        "--keyring",
        str(tmp_path / "file-mode" / "keys.toml"),
        "--store",
        f"sqlite:///{tmp_path / 'file-mode' / 'store.db'}",
    )
    assert named - STORE_MODE_ONLY <= file_mode, sorted(named - STORE_MODE_ONLY - file_mode)
    assert STORE_MODE_ONLY.isdisjoint(file_mode)
