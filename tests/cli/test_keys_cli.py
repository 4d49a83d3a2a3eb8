"""``soklet keys`` through the real command in subprocesses; every output is scanned for key material."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import time
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer
from typer._click import Command
from typer.core import TyperGroup

from soklet_cli._common import parse_duration
from soklet_cli.app import app
from soklet_core.files import read_keyring_file
from soklet_core.keys import GENERATED_ID_SUFFIX_CHARS, ProtectionKey, decode_base64url, encode_base64url

RING = "soklet-keyring.toml"


def keyring_ids(path: Path) -> list[str]:
    return [entry.key.id for entry in read_keyring_file(path).entries]


def roles(path: Path) -> dict[str, str]:
    return {entry.key.id: entry.role.value for entry in read_keyring_file(path).entries}


def write_secret(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


@pytest.mark.slow
def test_generate_creates_an_owner_only_file_with_a_dated_active_key(soklet) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    result = soklet.run("keys", "generate", "--json")
    after = datetime.now(UTC)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    # The UTC date and time to the second, then a random suffix: 2026-09-01.120000.k3f9x.
    stem, suffix = document["id"].rsplit(".", 1)
    assert before <= datetime.strptime(stem, "%Y-%m-%d.%H%M%S").replace(tzinfo=UTC) <= after
    assert len(suffix) == GENERATED_ID_SUFFIX_CHARS
    assert document["role"] == "active"
    assert document["created_file"] is True
    assert document["fingerprint"]["version"] == 2
    path = soklet.cwd / RING
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert roles(path) == {document["id"]: "active"}
    # The next one is staged, under another id.
    second = json.loads(soklet.run("keys", "generate", "--json").stdout)
    assert second["id"] != document["id"]
    assert second["role"] == "verification"
    third = json.loads(soklet.run("keys", "generate", "--bytes", "64", "--json").stdout)
    assert third["id"] not in {document["id"], second["id"]}
    assert read_keyring_file(path).entry(third["id"]).key.size == 64  # type: ignore[union-attr]


@pytest.mark.slow
def test_a_generated_id_never_repeats_one_removed_moments_ago(soklet) -> None:
    assert soklet.run("keys", "generate", "--id", "k1").returncode == 0
    seen: set[str] = set()
    for _ in range(3):
        staged = json.loads(soklet.run("keys", "stage", "--generate", "--json").stdout)
        assert staged["id"] not in seen
        seen.add(staged["id"])
        removed = soklet.run("keys", "remove", staged["id"], "--force")
        assert removed.returncode == 0, removed.stderr
    rotated = json.loads(soklet.run("keys", "rotate", "--json").stdout)
    assert rotated["active"] not in seen


@pytest.mark.slow
def test_generate_refusals(soklet) -> None:
    secret_looking = "c2VjcmV0IHNlY3JldCBzZWNyZXQgc2VjcmV0/+="
    fresh, short, bad_id = soklet.run_together(
        ("keys", "generate", "--role", "verification"),
        ("keys", "generate", "--bytes", "31"),
        ("keys", "generate", "--id", secret_looking),
    )
    assert fresh.returncode == 1
    assert "soklet: refused" in fresh.stderr
    assert not (soklet.cwd / RING).exists()
    assert short.returncode == 2
    assert bad_id.returncode == 2
    assert secret_looking not in bad_id.output
    assert soklet.run("keys", "generate", "--id", "k1").returncode == 0
    taken = soklet.run("keys", "generate", "--id", "k1")
    assert taken.returncode == 1
    assert "conflicting-material" in taken.stderr
    active = soklet.run("keys", "generate", "--id", "k2", "--role", "active", "--json")
    assert active.returncode == 0
    assert json.loads(active.stdout)["former_active"] == "k1"
    assert roles(soklet.cwd / RING) == {"k1": "verification", "k2": "active"}


@pytest.mark.slow
def test_list_shows_ids_roles_short_check_values_and_fingerprint(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    soklet.run("keys", "stage", "--generate", "--id", "k2")
    human = soklet.run("keys", "list")
    assert human.returncode == 0
    document = read_keyring_file(soklet.cwd / RING)
    for entry in document.entries:
        assert entry.key.id in human.stdout
        assert entry.key.check_value_text[:8] in human.stdout
        assert entry.key.check_value_text not in human.stdout
    fingerprint = document.keyring().fingerprint()
    assert f"fingerprint v2 {fingerprint.value}" in human.stdout
    listed = json.loads(soklet.run("keys", "list", "--json").stdout)
    assert listed["active"] == "k1"
    assert [(key["id"], key["role"], key["source"]) for key in listed["keys"]] == [
        ("k1", "active", "inline"),
        ("k2", "verification", "inline"),
    ]
    assert listed["keys"][1]["check_value"] == document.entry("k2").key.check_value_text  # type: ignore[union-attr]
    assert listed["fingerprint"] == fingerprint.to_json()


@pytest.mark.slow
def test_stage_from_every_source(soklet, tmp_path: Path) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    keys = {name: ProtectionKey.generate(name) for name in ("file", "env", "stdin")}
    for key in keys.values():
        soklet.remember(key)
    secret_file = write_secret(tmp_path / "file.secret", encode_base64url(keys["file"].material))
    assert soklet.run("keys", "stage", "--id", "file", "--from-file", str(secret_file)).returncode == 0
    env = {"SOKLET_TEST_MATERIAL": encode_base64url(keys["env"].material)}
    result = soklet.run("keys", "stage", "--id", "env", "--from-env", "SOKLET_TEST_MATERIAL", env=env)
    assert result.returncode == 0
    stdin = encode_base64url(keys["stdin"].material) + "\n"
    assert soklet.run("keys", "stage", "--id", "stdin", "--stdin", input=stdin).returncode == 0
    generated = soklet.run("keys", "stage", "--generate", "--json")
    assert generated.returncode == 0
    assert json.loads(generated.stdout)["changed"] is True
    document = read_keyring_file(soklet.cwd / RING)
    for name, key in keys.items():
        assert document.entry(name).key == key  # type: ignore[union-attr]
        assert document.entry(name).role.value == "verification"  # type: ignore[union-attr]
    assert len(document.entries) == 5


@pytest.mark.slow
def test_stage_is_idempotent_and_refuses_other_bytes(soklet, tmp_path: Path) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    key = ProtectionKey.generate("k2")
    soklet.remember(key)
    text = encode_base64url(key.material)
    assert soklet.run("keys", "stage", "--id", "k2", "--stdin", input=text).returncode == 0
    before = (soklet.cwd / RING).stat().st_ino
    again = soklet.run("keys", "stage", "--id", "k2", "--stdin", "--json", input=text)
    assert again.returncode == 0
    assert json.loads(again.stdout)["changed"] is False
    assert (soklet.cwd / RING).stat().st_ino == before
    other = ProtectionKey.generate("k2")
    soklet.remember(other)
    refused = soklet.run("keys", "stage", "--id", "k2", "--stdin", input=encode_base64url(other.material))
    assert refused.returncode == 1
    assert "conflicting-material (key 'k2')" in refused.stderr
    assert read_keyring_file(soklet.cwd / RING).entry("k2").key == key  # type: ignore[union-attr]


STAGE_REFUSALS = [
    ((), None, 2, "exactly one of"),
    (("--generate", "--stdin"), "", 2, "exactly one of"),
    (("--stdin",), encode_base64url(bytes(32)), 2, "--id is required"),
    (("--id", "k2", "--stdin"), "not base64!", 1, "base64url"),
    (("--id", "k2", "--stdin"), encode_base64url(bytes(31)), 1, "material-too-short"),
    (("--id", "k2", "--from-env", "SOKLET_TEST_UNSET_VARIABLE"), None, 1, "is not set"),
    (("--id", "k2", "--from-file", "missing.secret"), None, 3, "not-found"),
]


@pytest.mark.slow
def test_stage_refusals(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    results = soklet.run_together(
        *(soklet.call("keys", "stage", *args, input=stdin) for args, stdin, _, _ in STAGE_REFUSALS)
    )
    for (args, _, code, needle), result in zip(STAGE_REFUSALS, results, strict=True):
        assert result.returncode == code, (args, result.stderr)
        assert needle in result.stderr
        assert result.stderr.startswith("soklet: ")
        assert result.stderr.count("\n") == 1
        assert "Traceback" not in result.stderr
    assert keyring_ids(soklet.cwd / RING) == ["k1"]


@pytest.mark.slow
def test_stage_from_an_insecure_file_is_refused_unless_allowed(soklet, tmp_path: Path) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    key = ProtectionKey.generate("k2")
    soklet.remember(key)
    secret = write_secret(tmp_path / "k2.secret", encode_base64url(key.material), mode=0o644)
    refused = soklet.run("keys", "stage", "--id", "k2", "--from-file", str(secret))
    assert refused.returncode == 3
    assert "insecure-permissions" in refused.stderr
    allowed = soklet.run("keys", "stage", "--id", "k2", "--from-file", str(secret), "--allow-insecure-permissions")
    assert allowed.returncode == 0


def test_stage_without_a_keyring_file(soklet) -> None:
    result = soklet.run("keys", "stage", "--generate")
    assert result.returncode == 3
    assert "soklet keys generate" in result.stderr


@pytest.mark.slow
def test_activate_and_remove(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    soklet.run("keys", "stage", "--generate", "--id", "k2")
    activated = soklet.run("keys", "activate", "k2", "--json")
    assert activated.returncode == 0
    assert json.loads(activated.stdout) | {"fingerprint": None} == {
        "keyring": RING,
        "active": "k2",
        "former_active": "k1",
        "changed": True,
        "fingerprint": None,
    }
    again, unknown, active = soklet.run_together(
        ("keys", "activate", "k2"), ("keys", "activate", "k9"), ("keys", "remove", "k2")
    )
    assert again.returncode == 0
    assert "nothing changed" in again.stdout
    assert unknown.returncode == 1
    assert "unknown-key" in unknown.stderr
    assert active.returncode == 1
    assert "active-key-removal" in active.stderr
    removed = soklet.run("keys", "remove", "k1", "--force")  # demoted a moment ago: see the retirement tests
    assert removed.returncode == 0
    assert "removed k1" in removed.stdout
    assert keyring_ids(soklet.cwd / RING) == ["k2"]
    assert soklet.run("keys", "remove", "k1", "--force").returncode == 1


@pytest.mark.slow
def test_rotate_prints_former_key_and_safe_removal_time(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    former = "k1"
    for lifetime, seconds in ((None, 900), ("1h30m", 5400)):
        args = ["keys", "rotate", "--json"] + (["--state-lifetime", lifetime] if lifetime else [])
        start = datetime.now(UTC).replace(microsecond=0)
        result = soklet.run(*args)
        end = datetime.now(UTC)
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        assert document["former_active"] == former
        assert document["state_lifetime_seconds"] == seconds
        remove_after = datetime.strptime(document["remove_after"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert start + timedelta(seconds=seconds) <= remove_after <= end + timedelta(seconds=seconds)
        assert roles(soklet.cwd / RING)[document["active"]] == "active"
        assert roles(soklet.cwd / RING)[former] == "verification"
        former = document["active"]
    human = soklet.run("keys", "rotate", "--id", "k9")
    assert human.returncode == 0
    assert f"former active key {former} now only verifies; remove it after" in human.stdout
    assert f"soklet keys remove {former}" in human.stdout
    for bad in ("0m", "fifteen"):
        assert soklet.run("keys", "rotate", "--state-lifetime", bad).returncode == 2
    assert roles(soklet.cwd / RING)["k9"] == "active"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15m", 900), ("900s", 900), ("1h", 3600), ("1h30m", 5400), ("2h0m5s", 7205), ("8784h", 8784 * 3600)],
)
def test_duration_parser_accepts(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text",
    ["0m", "0", "60", "15 m", "fifteen", "-5s", "", "1d", "m", "5m1h", "\u00b2", "\u0664m", "367d", "8785h", "9" * 13],
)
def test_duration_parser_refuses(text: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_duration(text)


@pytest.mark.slow
def test_export_is_the_only_way_to_see_material(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    material = read_keyring_file(soklet.cwd / RING).keyring().active_key.material
    exported = soklet.run("keys", "export", "k1")
    assert exported.returncode == 0
    assert decode_base64url(exported.stdout.strip()) == material
    as_json = json.loads(soklet.run("keys", "export", "k1", "--json").stdout)
    assert as_json == {"id": "k1", "material": encode_base64url(material)}
    assert soklet.run("keys", "export", "k9").returncode == 1


@pytest.mark.slow
def test_keyring_path_resolution(soklet, tmp_path: Path) -> None:
    named = tmp_path / "named.toml"
    from_env = tmp_path / "env.toml"
    assert soklet.run("keys", "generate", "--id", "dflt").returncode == 0
    assert soklet.run("keys", "generate", "--id", "env", env={"SOKLET_KEYRING": str(from_env)}).returncode == 0
    result = soklet.run(
        "keys", "generate", "--id", "opt", "--keyring", str(named), env={"SOKLET_KEYRING": str(from_env)}
    )
    assert result.returncode == 0
    assert keyring_ids(soklet.cwd / RING) == ["dflt"]
    assert keyring_ids(from_env) == ["env"]
    assert keyring_ids(named) == ["opt"]


@pytest.mark.slow
def test_insecure_keyring_file_is_refused_by_every_reader(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    (soklet.cwd / RING).chmod(0o644)
    readers = (("keys", "list"), ("keys", "export", "k1"), ("fingerprint",), ("keys", "rotate"))
    for args, result in zip(readers, soklet.run_together(*readers), strict=True):
        assert result.returncode == 3, args
        assert "insecure-permissions" in result.stderr
        assert "--allow-insecure-permissions" in result.stderr
    assert soklet.run("keys", "list", "--allow-insecure-permissions").returncode == 0
    assert soklet.run("keys", "stage", "--generate", "--id", "k2", "--allow-insecure-permissions").returncode == 0
    # A rewrite makes the file owner-only again.
    assert stat.S_IMODE((soklet.cwd / RING).stat().st_mode) == 0o600
    assert keyring_ids(soklet.cwd / RING) == ["k1", "k2"]


@pytest.mark.slow
def test_malformed_keyring_file_names_key_and_field(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    path = soklet.cwd / RING
    text = path.read_text().replace('role = "active"', 'role = "primary"')
    path.write_text(text)
    result = soklet.run("keys", "list")
    assert result.returncode == 1
    assert "invalid-role (key 'k1' (keys[0]), field 'role')" in result.stderr
    path.write_text(text.replace("soklet-keyring/1", "soklet-keyring/9"))
    assert "unknown-format" in soklet.run("fingerprint").stderr


@pytest.mark.slow
def test_eight_concurrent_stage_processes_lose_no_key(soklet) -> None:
    assert soklet.run("keys", "generate", "--id", "k0").returncode == 0
    results = soklet.run_together(*[("keys", "stage", "--generate", "--json") for _ in range(8)])
    assert [result.returncode for result in results] == [0] * 8, [result.stderr for result in results]
    staged = {json.loads(result.stdout)["id"] for result in results}
    assert len(staged) == 8
    assert set(keyring_ids(soklet.cwd / RING)) == {"k0", *staged}
    raw = tomllib.loads((soklet.cwd / RING).read_text())
    assert len(raw["keys"]) == 9


@pytest.mark.slow
def test_walkthrough_first_key_to_rotation_across_two_instances(soklet, tmp_path: Path) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"

    def fingerprint(path: Path) -> dict[str, object]:
        return read_keyring_file(path).keyring().fingerprint().to_json()

    # The first key, copied to the second instance through standard input, never as an argument.
    assert soklet.run("keys", "generate", "--id", "2026-08", "--keyring", str(a)).returncode == 0
    first = soklet.run("keys", "export", "2026-08", "--keyring", str(a)).stdout
    soklet.run("keys", "generate", "--id", "seed", "--keyring", str(b))
    soklet.run("keys", "stage", "--id", "2026-08", "--stdin", "--keyring", str(b), input=first)
    soklet.run("keys", "activate", "2026-08", "--keyring", str(b))
    soklet.run("keys", "remove", "seed", "--force", "--keyring", str(b))
    assert fingerprint(a) == fingerprint(b)
    # Rotation: stage the same new key everywhere, compare, activate everywhere, wait, remove the old one.
    assert soklet.run("keys", "stage", "--generate", "--id", "2026-09", "--keyring", str(a)).returncode == 0
    new = soklet.run("keys", "export", "2026-09", "--keyring", str(a)).stdout
    assert fingerprint(a) != fingerprint(b)
    soklet.run("keys", "stage", "--id", "2026-09", "--stdin", "--keyring", str(b), input=new)
    shown = [soklet.run("fingerprint", "--json", "--keyring", str(path)) for path in (a, b)]
    assert json.loads(shown[0].stdout) == json.loads(shown[1].stdout) == fingerprint(a)
    for path in (a, b):
        assert soklet.run("keys", "activate", "2026-09", "--keyring", str(path)).returncode == 0
    assert fingerprint(a) == fingerprint(b)
    for path in (a, b):
        # (the wait for the state lifetime is skipped: nothing was sealed)
        assert soklet.run("keys", "remove", "2026-08", "--force", "--keyring", str(path)).returncode == 0
        assert roles(path) == {"2026-09": "active"}
    assert fingerprint(a) == fingerprint(b)


def _commands() -> list[tuple[str, Command]]:
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    found = []
    for name, command in sorted(root.commands.items()):
        if isinstance(command, TyperGroup):
            found += [(f"{name} {sub}", child) for sub, child in sorted(command.commands.items())]
        else:
            found.append((name, command))
    return found


def test_every_command_documents_json_an_example_and_exit_codes() -> None:
    commands = dict(_commands())
    for name in (
        "keys generate",
        "keys list",
        "keys stage",
        "keys activate",
        "keys remove",
        "keys rotate",
        "keys export",
        "fingerprint",
    ):
        command = commands[name]
        help_text = command.help or ""
        assert "**Examples**" in help_text, name
        assert f"soklet {name}" in help_text, name
        assert "**Exit codes**" in help_text, name
        assert any("--json" in param.opts for param in command.params), name


@pytest.mark.slow
def test_help_runs_in_a_real_process(soklet) -> None:
    result = soklet.run("keys", "stage", "--help")
    assert result.returncode == 0
    assert "Examples" in result.stdout
    assert "Exit codes" in result.stdout


@pytest.mark.slow
def test_material_is_never_taken_as_an_argument(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    key = ProtectionKey.generate("k2")
    soklet.remember(key)
    result = soklet.run("keys", "stage", "--id", "k2", "--material", encode_base64url(key.material))
    assert result.returncode == 2
    assert keyring_ids(soklet.cwd / RING) == ["k1"]


@pytest.mark.slow
def test_the_leak_scan_catches_every_form(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    exported = soklet.run("keys", "export", "k1")
    material = decode_base64url(exported.stdout.strip())
    for text in (exported.stdout, material.hex(), material.hex().upper(), exported.stdout[5:25]):
        soklet.results.append(dataclasses.replace(exported, args=("keys", "list"), stdout=f"x{text}y"))
        with pytest.raises(AssertionError, match="key material leaked"):
            soklet.assert_no_leak()
        soklet.results.pop()


def _moment(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


@pytest.mark.slow
def test_remove_refuses_a_key_retired_less_than_the_state_lifetime_ago(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    rotated = soklet.run("keys", "rotate", "--id", "k2", "--json")
    assert rotated.returncode == 0, rotated.stderr
    remove_after = json.loads(rotated.stdout)["remove_after"]
    # The file records when k1 stopped sealing.
    entry = read_keyring_file(soklet.cwd / RING).entry("k1")
    assert entry is not None
    assert entry.retired is not None
    assert _moment(remove_after) == entry.retired + timedelta(minutes=15)
    early = soklet.run("keys", "remove", "k1")
    assert early.returncode == 1
    assert "stopped sealing less than the state lifetime (15m) ago" in early.stderr
    assert f"it can be removed after {remove_after} (or now with --force)" in early.stderr
    assert roles(soklet.cwd / RING) == {"k1": "verification", "k2": "active"}
    # A shorter lifetime told to the command: removable once it has passed (polled, generous bound).
    deadline = time.monotonic() + 60
    while (shorter := soklet.run("keys", "remove", "k1", "--state-lifetime", "1s")).returncode != 0:
        assert shorter.returncode == 1, shorter.stderr
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert roles(soklet.cwd / RING) == {"k2": "active"}


@pytest.mark.slow
def test_remove_force_removes_at_once_and_activation_clears_the_retired_time(soklet) -> None:
    soklet.run("keys", "generate", "--id", "k1")
    soklet.run("keys", "generate", "--id", "k2", "--role", "active")
    soklet.run("keys", "activate", "k1")  # k1 active again: no retired time; k2 retired now
    document = read_keyring_file(soklet.cwd / RING)
    assert document.entry("k1").retired is None  # type: ignore[union-attr]
    assert document.entry("k2").retired is not None  # type: ignore[union-attr]
    assert soklet.run("keys", "remove", "k2").returncode == 1
    forced = soklet.run("keys", "remove", "k2", "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert roles(soklet.cwd / RING) == {"k1": "active"}


@pytest.mark.slow
def test_a_key_without_a_retired_time_counts_from_the_files_last_change(soklet) -> None:
    # A file as an older soklet wrote it: no retired field anywhere; it stays readable.
    soklet.run("keys", "generate", "--id", "k1")
    soklet.run("keys", "generate", "--id", "k2", "--role", "active")
    ring = soklet.cwd / RING
    text = "\n".join(line for line in ring.read_text().splitlines() if not line.startswith("retired")) + "\n"
    ring.write_text(text)
    assert read_keyring_file(ring).entry("k1").retired is None  # type: ignore[union-attr]
    early = soklet.run("keys", "remove", "k1")
    assert early.returncode == 1
    assert "does not record when key k1 stopped sealing" in early.stderr
    hour_ago = time.time() - 3600
    os.utime(ring, (hour_ago, hour_ago))
    removed = soklet.run("keys", "remove", "k1")
    assert removed.returncode == 0, removed.stderr
    assert roles(ring) == {"k2": "active"}
