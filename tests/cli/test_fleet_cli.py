"""``soklet fleet check`` end to end: real ``soklet serve --admin-port 0`` processes on loopback, each with its
own copy of a keyring file, checked by a real ``soklet`` subprocess."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from soklet_core.files import MAX_FLEET_INSTANCES, read_keyring_file
from soklet_core.keys import FingerprintComparison, ProtectionKey
from tests.conftest import Soklet
from tests.fleet.support_served import Relay, Served
from tests.fleet.support_served import soklet as run_soklet
from tests.server.support_admin import self_signed_certificate

pytestmark = pytest.mark.slow

TOKEN = "fleetCheckToken-7d2a9c41e08b35f6"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """a, b, c: one keyring (active key plus staged key ``next``) in three copies; d: the same active key and
    ``next`` staged separately, so with other bytes; v1: a copy of a's reporting v1 fingerprints."""
    folder = tmp_path_factory.mktemp("fleet")
    token = folder / "token"
    token.write_text(f"# the fleet's admin token\nops:{TOKEN}\n")
    token.chmod(0o600)
    base = folder / "base.toml"
    assert run_soklet(folder, "keys", "generate", "--id", "2026-08", "--keyring", str(base)).returncode == 0
    shutil.copy2(base, folder / "d.toml")
    assert run_soklet(folder, "keys", "stage", "--generate", "--id", "next", "--keyring", str(base)).returncode == 0
    assert (
        run_soklet(
            folder, "keys", "stage", "--generate", "--id", "next", "--keyring", str(folder / "d.toml")
        ).returncode
        == 0
    )
    for name in ("a", "b", "c", "v1"):
        shutil.copy2(base, folder / f"{name}.toml")
    served: dict[str, Served] = {}
    try:
        for name in ("a", "b", "c", "d"):
            served[name] = Served(folder, name, folder / f"{name}.toml")
        served["v1"] = Served(folder, "v1", folder / "v1.toml", "--fingerprint-version", "1")
        yield served
    finally:
        for instance in served.values():
            instance.stop()


@pytest.fixture
def check(soklet: Soklet, fleet: dict[str, Served]) -> Iterator[Soklet]:
    """The leak-scanning runner, told every key of the fleet; each output is checked for the token too."""
    for instance in fleet.values():
        for entry in read_keyring_file(instance.keyring).entries:
            soklet.remember(entry.key)
    (soklet.cwd / "token").write_text(f"ops:{TOKEN}\n")
    (soklet.cwd / "token").chmod(0o600)
    yield soklet
    assert not any(TOKEN in result.output for result in soklet.results)


def _urls(fleet: dict[str, Served], *names: str) -> list[str]:
    return [fleet[name].admin_url for name in names]


def test_three_converged_instances_exit_0(check: Soklet, fleet: dict[str, Served]) -> None:
    result = check.run("fleet", "check", "--token-file", "token", *_urls(fleet, "a", "b", "c"))
    assert result.returncode == 0, result.output
    assert "converged: 3 instances; fingerprint v2:soklet-mcp-protection-v1:" in result.stdout
    for name in ("(a)", "(b)", "(c)"):
        assert name in result.stdout
    assert "next=" in result.stdout


def test_same_id_other_bytes_exit_1_names_key_and_instance(check: Soklet, fleet: dict[str, Served]) -> None:
    result = check.run("fleet", "check", "--token-file", "token", *_urls(fleet, "a", "b", "d"))
    assert result.returncode == 1, result.output
    assert "key next: the same id with other bytes" in result.stdout
    assert "diverged: 3 instances" in result.stdout
    odd = fleet["d"].admin_url.removeprefix("http://")
    line = next(line for line in result.stdout.splitlines() if "key next:" in line)
    assert line.rstrip().endswith(f"on {odd}); a v1 fingerprint, which digests ids only, would call these equal")
    # v1 equal, v2 different: the keys layer's fingerprints of the two files, and what the instances reported.
    ours, theirs = (read_keyring_file(fleet[name].keyring).keyring() for name in ("a", "d"))
    assert ours.fingerprint(1).compare(theirs.fingerprint(1)) is FingerprintComparison.EQUAL
    document = json.loads(
        check.run("fleet", "check", "--json", "--token-file", "token", *_urls(fleet, "a", "d")).stdout
    )
    a, d = (instance["snapshot"]["fingerprint"] for instance in document["instances"])
    assert (a["version"], d["version"]) == (2, 2)
    assert a["value"] != d["value"]
    assert a["value"] == ours.fingerprint(2).value


def test_v1_instance_is_incomparable_exit_3(check: Soklet, fleet: dict[str, Served]) -> None:
    result = check.run("fleet", "check", "--token-file", "token", *_urls(fleet, "a", "b", "v1"))
    assert result.returncode == 3, result.output
    assert "fingerprint versions differ (incomparable): v2 on" in result.stdout
    assert "incomparable: the instances report fingerprints of different versions" in result.stdout


def test_stopped_instance_exit_3(check: Soklet, fleet: dict[str, Served], tmp_path: Path) -> None:
    shutil.copy2(fleet["a"].keyring, tmp_path / "stopped.toml")
    (tmp_path / "token").chmod(0o600)
    stopped = Served(tmp_path, "stopped", tmp_path / "stopped.toml")
    stopped.stop()
    result = check.run("fleet", "check", "--token-file", "token", *_urls(fleet, "a", "b"), stopped.admin_url)
    assert result.returncode == 3, result.output
    assert "no: connection refused" in result.stdout
    assert "unreachable: 1 of 3 instances did not answer" in result.stdout


def test_wrong_token_is_unreachable_and_never_shown(check: Soklet, fleet: dict[str, Served]) -> None:
    wrong = "wrongToken-0123456789abcdef"
    result = check.run("fleet", "check", "--token-env", "T", fleet["a"].admin_url, env={"T": wrong})
    assert result.returncode == 3
    assert "HTTP 401: the admin token was refused" in result.stdout
    assert wrong not in result.output


def test_json_shape(check: Soklet, fleet: dict[str, Served]) -> None:
    result = check.run("fleet", "check", "--json", "--token-file", "token", *_urls(fleet, "a", "d"))
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert set(document) == {
        "status", "exit_code", "fingerprint", "checks", "elapsed_ms", "expected", "clock_skew", "instances",
        "differences", "duplicates", "shared_names",
    }  # fmt: skip
    assert document["fingerprint"] is None
    assert document["duplicates"] == []
    assert document["shared_names"] == []
    assert (document["status"], document["exit_code"], document["checks"]) == ("diverged", 1, 1)
    first = document["instances"][0]
    assert set(first) == {"name", "url", "reachable", "problem", "elapsed_ms", "clock", "snapshot"}
    assert set(first["clock"]) == {"offset_ms", "uncertainty_ms"}
    assert first["snapshot"]["instance"] == "a"
    assert set(first["snapshot"]) == {
        "instance", "profile", "generation", "active", "verification", "keys",
        "max_state_lifetime_ms", "max_state_rounds", "fingerprint", "process_id",
    }  # fmt: skip
    (difference,) = document["differences"]
    assert difference["kind"] == "same-id-other-bytes"
    assert difference["key"] == "next"
    assert [group["instances"] for group in difference["groups"]] == [
        [fleet["a"].admin_url.removeprefix("http://")],
        [fleet["d"].admin_url.removeprefix("http://")],
    ]


def test_fleet_file_and_expect(check: Soklet, fleet: dict[str, Served]) -> None:
    instances = "".join(
        f'[[instances]]\nname = "{name}"\nurl = "{fleet[name].admin_url}"\n' for name in ("a", "b", "c")
    )
    (check.cwd / "fleet.toml").write_text(f'[defaults]\nadmin_token_file = "token"\ntimeout = 5\n\n{instances}')
    value = read_keyring_file(fleet["a"].keyring).keyring().fingerprint().value
    result = check.run("fleet", "check", "--fleet", "fleet.toml", "--expect", f"v2:{value}")
    assert result.returncode == 0, result.output
    assert "│ a " in result.stdout
    other = read_keyring_file(fleet["d"].keyring).keyring().fingerprint().value
    result = check.run("fleet", "check", "--fleet", "fleet.toml", "--expect", other)
    assert result.returncode == 1
    assert "not the expected fingerprint" in result.stdout
    result = check.run("fleet", "check", "--fleet", "fleet.toml", "--expect", f"v1:{value}")
    assert result.returncode == 3


def test_one_instance_listed_twice_is_named_and_not_converged(check: Soklet, fleet: dict[str, Served]) -> None:
    """A fleet file listing a twice, under two names and two spellings of its URL: instances are counted by the
    process identity their snapshots report, the duplicate is named, and the verdict is duplicated (exit 2), not
    converged."""
    url = fleet["a"].admin_url
    listed = (("a", url), ("a-again", url + "/"), ("b", fleet["b"].admin_url))
    instances = "".join(f'[[instances]]\nname = "{name}"\nurl = "{address}"\n' for name, address in listed)
    (check.cwd / "twice.toml").write_text(f'[defaults]\nadmin_token_file = "token"\n\n{instances}')
    result = check.run("fleet", "check", "--fleet", "twice.toml")
    assert result.returncode == 2, result.output
    assert "a, a-again report one instance, a (the same process): one instance listed 2 times" in result.stdout
    assert "duplicated: 3 listings are 2 instances; list each instance once" in result.stdout
    assert "converged" not in result.stdout
    document = json.loads(check.run("fleet", "check", "--fleet", "twice.toml", "--json").stdout)
    assert (document["status"], document["exit_code"]) == ("duplicated", 2)
    process_id = document["instances"][0]["snapshot"]["process_id"]
    assert document["duplicates"] == [{"instance": "a", "process_id": process_id, "names": ["a", "a-again"]}]
    assert document["shared_names"] == []
    # --wait does not check again: waiting does not mend a listing.
    document = json.loads(check.run("fleet", "check", "--fleet", "twice.toml", "--json", "--wait", "5m").stdout)
    assert (document["status"], document["checks"]) == ("duplicated", 1)
    # Two URLs on the command line to one instance: the same.
    result = check.run("fleet", "check", "--token-file", "token", url, url + "/")
    assert result.returncode == 2, result.output
    assert "duplicated: 2 listings are 1 instance" in result.stdout
    # A diverged fleet stays diverged, its duplicates named, the instances counted once each.
    result = check.run("fleet", "check", "--token-file", "token", url, url + "/", fleet["d"].admin_url)
    assert result.returncode == 1, result.output
    assert "diverged: 2 instances do not hold the same keyring" in result.stdout
    assert "report one instance, a (the same process): one instance listed 2 times" in result.stdout


def test_distinct_instances_on_the_default_name_converge(
    check: Soklet, fleet: dict[str, Served], tmp_path: Path
) -> None:
    """Two served instances both left on the default --instance name are two processes, not one listed twice:
    converged (exit 0), counted twice, the shared name a warning (in the text and in --json)."""
    (tmp_path / "token").write_text(f"ops:{TOKEN}\n")
    (tmp_path / "token").chmod(0o600)
    served: list[Served] = []
    try:
        for name in ("x", "y"):
            shutil.copy2(fleet["a"].keyring, tmp_path / f"{name}.toml")
            served.append(Served(tmp_path, name, tmp_path / f"{name}.toml", named=False))
        urls = [instance.admin_url for instance in served]
        result = check.run("fleet", "check", "--token-file", "token", *urls)
        assert result.returncode == 0, result.output
        assert "converged: 2 instances; fingerprint v2:" in result.stdout
        assert "duplicat" not in result.stdout
        assert "warning: shared names:" in result.stdout
        assert "are 2 instances reporting one name, soklet" in result.stdout
        document = json.loads(check.run("fleet", "check", "--token-file", "token", "--json", *urls).stdout)
        assert (document["status"], document["exit_code"], document["duplicates"]) == ("converged", 0, [])
        snapshots = [instance["snapshot"] for instance in document["instances"]]
        assert [snapshot["instance"] for snapshot in snapshots] == ["soklet", "soklet"]
        assert snapshots[0]["process_id"] != snapshots[1]["process_id"]
        names = [instance["name"] for instance in document["instances"]]
        assert document["shared_names"] == [{"instance": "soklet", "names": names, "instances": 2}]
        # One of them listed twice among them is still a duplicate.
        result = check.run("fleet", "check", "--token-file", "token", *urls, urls[0] + "/")
        assert result.returncode == 2, result.output
        assert "duplicated: 3 listings are 2 instances" in result.stdout
    finally:
        for instance in served:
            instance.stop()


def test_resolve_localhost_checks_every_address(check: Soklet, fleet: dict[str, Served]) -> None:
    port = fleet["a"].admin_url.rsplit(":", 1)[1]
    addresses = {info[4][0] for info in socket.getaddrinfo("localhost", int(port), type=socket.SOCK_STREAM)}
    result = check.run("fleet", "check", "--json", "--token-file", "token", "--resolve", f"localhost:{port}")
    document = json.loads(result.stdout)
    rows = {instance["name"]: instance for instance in document["instances"]}
    assert len(rows) == len(addresses)
    assert rows[f"127.0.0.1:{port}"]["reachable"] is True
    # The admin listener is on 127.0.0.1 only: a ::1 that localhost also resolves to does not answer.
    assert result.returncode == (0 if addresses == {"127.0.0.1"} else 3)


def test_wait_converges_after_a_change(check: Soklet, fleet: dict[str, Served], tmp_path: Path) -> None:
    # The moving instance lacks a's staged key "next" (a reload that gave "next" other bytes would be refused).
    moving = tmp_path / "moving.toml"
    shutil.copy2(fleet["a"].keyring, moving)
    assert run_soklet(tmp_path, "keys", "remove", "next", "--force", "--keyring", str(moving)).returncode == 0
    instance = Served(tmp_path, "moving", moving)
    # The check reads the moving instance through a relay, so the test changes the file only once the check has
    # read the diverged keyring: on a busy machine the check may take longer to start than any sleep.
    relay = Relay(int(instance.admin_url.rsplit(":", 1)[1]))
    try:
        command = [sys.executable, "-m", "soklet_cli", "fleet", "check", "--json", "--wait", "5m"]
        command += ["--token-file", "token", fleet["a"].admin_url, relay.url]
        waiting = subprocess.Popen(command, cwd=check.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert relay.wait_for(1, timeout=120)
        assert waiting.poll() is None
        # Configuration management rolls the file: an atomic replace with a's keyring; the instance reloads it.
        staged = tmp_path / "moving.toml.new"
        shutil.copy2(fleet["a"].keyring, staged)
        os.replace(staged, moving)
        stdout, stderr = waiting.communicate(timeout=360)
        assert waiting.returncode == 0, stderr
        document = json.loads(stdout)
        assert document["status"] == "converged"
        assert document["checks"] > 1
        assert TOKEN not in stdout + stderr
    finally:
        relay.close()
        instance.stop()


def test_wait_gives_up_with_the_last_verdict(check: Soklet, fleet: dict[str, Served]) -> None:
    result = check.run("fleet", "check", "--wait", "2s", "--token-file", "token", *_urls(fleet, "a", "d"))
    assert result.returncode == 1
    assert "key next: the same id with other bytes" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "exactly one of them"),
        (("--fleet", "f.toml", "http://127.0.0.1:1"), "exactly one of them"),
        (("http://127.0.0.1:1",), "--token-env VAR or --token-file FILE"),
        (("--token-file", "token", "--token-env", "T", "http://127.0.0.1:1"), "not both"),
        (("--token-file", "token", "http://ops:hunter2secret@127.0.0.1:1"), "URL 1: the admin URL must not carry"),
        (("--token-file", "token", "ftp://127.0.0.1:1"), "URL 1: the admin URL must start with"),
        (("--token-file", "token", "--timeout", "0", "http://127.0.0.1:1"), "number of seconds"),
        (("--token-file", "token", "--timeout", "301", "http://127.0.0.1:1"), "number of seconds"),
        (("--token-file", "token", "--wait", "15", "http://127.0.0.1:1"), "a bare number has no unit"),
        (("--token-file", "token", "--expect", "hunter2secret", "http://127.0.0.1:1"), "a fingerprint is VALUE"),
        (("--token-file", "token", "--resolve", "localhost", "http://127.0.0.1:1"), "exactly one of them"),
        (("--token-file", "token", "--resolve", "localhost:0"), "HOST:PORT"),
        (("--token-env", "UNSET_FLEET_TOKEN", "http://127.0.0.1:1"), "not set"),
    ],
)
def test_usage_errors_exit_2(check: Soklet, args: tuple[str, ...], message: str) -> None:
    result = check.run("fleet", "check", *args)
    assert result.returncode == 2, result.output
    assert message in result.stderr
    assert "hunter2secret" not in result.output


def test_fleet_file_errors(check: Soklet) -> None:
    result = check.run("fleet", "check", "--fleet", "absent.toml")
    assert (result.returncode, result.stderr.strip()) == (3, "soklet: absent.toml: no such file")
    (check.cwd / "bad.toml").write_text('[[instances]]\nname = "a"\nurl = "http://u:hunter2secret@h:1"\n')
    result = check.run("fleet", "check", "--fleet", "bad.toml")
    assert result.returncode == 2
    assert "bad.toml: instances[0].url: must not carry credentials" in result.stderr
    assert "hunter2secret" not in result.output


def test_help_has_examples_and_exit_codes(check: Soklet) -> None:
    result = check.run("fleet", "check", "--help")
    assert result.returncode == 0
    assert "Examples" in result.stdout
    assert "Exit codes: 0 converged" in result.stdout
    assert ProtectionKey.__name__ not in result.stdout


def test_limits_on_the_command_line(check: Soklet) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
        result = check.run("fleet", "check", "--token-file", "token", "--timeout", "300", closed)
        assert result.returncode == 3
        assert "connection refused" in result.stdout
        urls = [f"{closed}/{index}" for index in range(MAX_FLEET_INSTANCES)]
        assert check.run("fleet", "check", "--token-file", "token", "--timeout", "0.5", *urls).returncode == 3
        result = check.run("fleet", "check", "--token-file", "token", *urls, f"{closed}/one-more")
        assert result.returncode == 2
        assert f"at most {MAX_FLEET_INSTANCES:,} URLs" in result.stderr


def test_https_with_a_ca_file_and_resolve_over_tls(check: Soklet, fleet: dict[str, Served], tmp_path: Path) -> None:
    cert, key = self_signed_certificate(tmp_path)
    shutil.copy2(fleet["a"].keyring, tmp_path / "tls.toml")
    (tmp_path / "token").write_text(f"ops:{TOKEN}\n")
    (tmp_path / "token").chmod(0o600)
    served = Served(tmp_path, "tls", tmp_path / "tls.toml", "--admin-tls-cert", str(cert), "--admin-tls-key", str(key))
    try:
        assert served.admin_url.startswith("https://127.0.0.1:")
        result = check.run(
            "fleet", "check", "--token-file", "token", "--ca-file", str(cert), served.admin_url, fleet["a"].admin_url
        )
        assert result.returncode == 0, result.output
        result = check.run("fleet", "check", "--token-file", "token", served.admin_url)
        assert result.returncode == 3
        assert "TLS: the certificate was not trusted" in result.stdout
        # --resolve over https: each address is reached directly, the certificate checked against the name.
        port = served.admin_url.rsplit(":", 1)[1]
        resolve = ("--resolve", f"https://localhost:{port}", "--ca-file", str(cert), "--json")
        document = json.loads(check.run("fleet", "check", "--token-file", "token", *resolve).stdout)
        rows = {instance["name"]: instance for instance in document["instances"]}
        assert rows[f"127.0.0.1:{port}"]["reachable"] is True, rows
        # A fleet file's ca_file, relative to the file.
        shutil.copy2(cert, check.cwd / "ca.pem")
        defaults = '[defaults]\nadmin_token_file = "token"\nca_file = "ca.pem"\n\n'
        (check.cwd / "tls.toml").write_text(f'{defaults}[[instances]]\nname = "tls"\nurl = "{served.admin_url}"\n')
        assert check.run("fleet", "check", "--fleet", "tls.toml").returncode == 0
    finally:
        served.stop()
