"""``soklet keys`` and friends against hostile or mistaken input, through the real command in subprocesses:
special files, untrusted owners and folders, malformed keyrings, pasted material, export to files, the printed
follow-up command, an empty --keyring, and help without ``<bool>``."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from soklet_core.files import lock_path_for, read_keyring_file
from soklet_core.keys import MAX_KEY_MATERIAL_BYTES, decode_base64url, encode_base64url

RING = "soklet-keyring.toml"
#: Generous: a blocked command would never return; a working one answers in well under a second.
PROMPT = 20.0
OTHER_UID = 65534
#: A key's base64url text, as if pasted; fixed so that the material-shape rule's rare misses cannot flake a test.
PASTED = "hJ3kQ9vZx2Lw7Rt5mN8bY1cF4gP6sD0aE-uW_qK3oIk"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def new_ring(soklet, *args: str) -> None:  # type: ignore[no-untyped-def]
    result = soklet.run("keys", "generate", "--id", "k1", *args)
    assert result.returncode == 0, result.stderr


def material_of(path: Path, key_id: str = "k1") -> str:
    entry = read_keyring_file(path, allow_insecure_permissions=True).entry(key_id)
    assert entry is not None
    return encode_base64url(entry.key.material)


def no_traceback(result) -> None:  # type: ignore[no-untyped-def]
    assert "Traceback" not in result.output
    assert result.returncode != 70, result.stderr


# --- item 6: --bytes bounds ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_bytes_is_bounded_at_both_ends(soklet) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    largest, over, huge = soklet.run_together(
        ("keys", "stage", "--generate", "--id", "big", "--bytes", str(MAX_KEY_MATERIAL_BYTES)),
        ("keys", "generate", "--id", "over", "--bytes", str(MAX_KEY_MATERIAL_BYTES + 1)),
        ("keys", "rotate", "--id", "huge", "--bytes", "800000"),
    )
    assert largest.returncode == 0, largest.stderr
    for result in (over, huge):
        assert result.returncode == 2
        assert str(MAX_KEY_MATERIAL_BYTES) in result.stderr
    listed = soklet.run("keys", "list", "--json")
    assert listed.returncode == 0
    assert [key["id"] for key in json.loads(listed.stdout)["keys"]] == ["k1", "big"]
    assert read_keyring_file(soklet.cwd / RING).entry("big").key.size == MAX_KEY_MATERIAL_BYTES  # type: ignore[union-attr]


@pytest.mark.slow
def test_staged_material_longer_than_the_maximum_is_refused(soklet) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    too_long = encode_base64url(os.urandom(MAX_KEY_MATERIAL_BYTES + 1))
    result = soklet.run("keys", "stage", "--id", "k2", "--stdin", input=too_long)
    assert result.returncode == 1
    assert "material-too-long" in result.stderr
    assert too_long[:16] not in result.output


# --- item 7: special files never block -------------------------------------------------------------------------


@pytest.mark.slow
def test_a_fifo_keyring_is_refused_promptly_by_every_command(soklet) -> None:  # type: ignore[no-untyped-def]
    # Not named *.toml: the leak scan of the test fixture reads every .toml file in the folder.
    os.mkfifo(soklet.cwd / "ring.fifo", 0o600)
    results = soklet.run_together(
        ("keys", "list", "--keyring", "ring.fifo"),
        ("keys", "generate", "--keyring", "ring.fifo"),
        ("keys", "export", "k1", "--keyring", "ring.fifo"),
        ("fingerprint", "--keyring", "ring.fifo"),
        timeout=PROMPT,
    )
    for result in results:
        assert result.returncode == 3, result.args
        assert "not-a-file" in result.stderr
        assert "FIFO" in result.stderr
        no_traceback(result)


@pytest.mark.slow
def test_a_fifo_material_file_or_from_file_is_refused_promptly(soklet, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    # Outside the fixture's folder, whose leak scan would follow material_file into the FIFO.
    elsewhere = tmp_path_factory.mktemp("fifo-material")
    os.mkfifo(elsewhere / "pipe", 0o600)
    ring = elsewhere / RING
    ring.write_text(
        (soklet.cwd / RING).read_text()
        + '\n[[keys]]\nid = "k2"\nrole = "verification"\nmaterial_file = "pipe"\ncreated = 2026-08-01T00:00:00Z\n'
    )
    ring.chmod(0o600)
    listed = soklet.run("keys", "list", "--keyring", str(ring), timeout=PROMPT)
    assert listed.returncode == 3
    assert "material-file-unreadable" in listed.stderr
    assert "FIFO" in listed.stderr
    staged = soklet.run("keys", "stage", "--id", "k3", "--from-file", str(elsewhere / "pipe"), timeout=PROMPT)
    assert staged.returncode == 3
    assert "FIFO" in staged.stderr


@pytest.mark.slow
def test_a_fifo_or_device_as_a_commands_input_file_is_refused_promptly(soklet) -> None:  # type: ignore[no-untyped-def]
    os.mkfifo(soklet.cwd / "in.json", 0o600)
    fifo, device = soklet.run_together(("canonicalize", "in.json"), ("canonicalize", "/dev/zero"), timeout=PROMPT)
    for result in (fifo, device):
        assert result.returncode == 3
        assert "use - to read standard input" in result.stderr
        no_traceback(result)
    assert "FIFO" in fifo.stderr
    assert "character device" in device.stderr


# --- item 8: malformed keyrings are exit 1 with key and field, never 70 ----------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "reason", "field"),
    [
        ("created = 0001-01-01T00:00:00+01:00", "invalid-created", "'created'"),
        ("created = 2026-08-01T00:00:00Z\nx = " + "[" * 3000 + "]" * 3000, "invalid-toml", None),
        ("created = 2026-08-01T00:00:00Z\nx = " + "7" * 5000, "invalid-toml", None),
    ],
    ids=["created-out-of-range", "deep-nesting", "5000-digits"],
)
def test_malformed_keyrings_exit_1_naming_what_is_wrong(soklet, line: str, reason: str, field: str | None) -> None:  # type: ignore[no-untyped-def]
    material = encode_base64url(os.urandom(32))
    soklet.remember(decode_base64url(material))
    # Not named *.toml: the fixture's leak scan parses those, and tomllib itself fails on these values.
    ring = soklet.cwd / "bad.ring"
    ring.write_text(
        'format = "soklet-keyring/1"\nprofile = "soklet-mcp-protection-v1"\n\n[[keys]]\nid = "k1"\n'
        f'role = "active"\nmaterial = "{material}"\n{line}\n'
    )
    ring.chmod(0o600)
    calls = [("keys", "list"), ("fingerprint",), ("keys", "rotate")]
    for result in soklet.run_together(*((*call, "--keyring", "bad.ring") for call in calls)):
        assert result.returncode == 1, result.stderr
        no_traceback(result)
        assert reason in result.stderr
        if field is not None:
            assert f"field {field}" in result.stderr
            assert "key 'k1'" in result.stderr
        assert "0001-01-01" not in result.stderr
        assert "7777777777" not in result.stderr
        assert len(result.stderr) < 400


# --- item 9: pasted material is never echoed or taken as an id -------------------------------------------------


@pytest.mark.slow
def test_pasted_material_is_never_echoed_or_taken_as_an_id(soklet) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    # A fixed key (random ones escape the rule about 2 times in 10,000), staged so the leak scan knows it.
    staged = soklet.run("keys", "stage", "--id", "k2", "--stdin", input=PASTED)
    assert staged.returncode == 0, staged.stderr
    before = (soklet.cwd / RING).read_bytes()
    results = soklet.run_together(
        ("keys", "activate", "--", PASTED),
        ("keys", "remove", "--", PASTED),
        ("keys", "export", "--", PASTED),
        soklet.call("keys", "stage", "--from-env", PASTED, "--id", "k9", env={}),
        ("keys", "stage", "--generate", "--id", PASTED),
        ("keys", "generate", "--id", PASTED),
        ("keys", "rotate", "--id", PASTED[:30]),
    )
    codes = [result.returncode for result in results]
    assert codes == [1, 1, 1, 1, 2, 2, 2]
    for result in results:
        assert PASTED[:16] not in result.output
        assert PASTED[-16:] not in result.output
        no_traceback(result)
    assert "an id that looks like key material" in results[0].stderr
    assert "a name that looks like key material" in results[3].stderr
    assert "looks like key material" in results[4].stderr
    assert (soklet.cwd / RING).read_bytes() == before


@pytest.mark.slow
def test_ordinary_ids_still_work(soklet) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    for key_id in ("2026-08", "prod-2026-09-01.2", "eu-west-1-primary-2026-09-01"):
        assert soklet.run("keys", "stage", "--generate", "--id", key_id).returncode == 0
    assert soklet.run("keys", "activate", "prod-2026-09-01.2").returncode == 0
    unknown = soklet.run("keys", "activate", "2026-10")
    assert unknown.returncode == 1
    assert "'2026-10'" in unknown.stderr


@pytest.mark.slow
def test_an_unknown_field_named_with_key_characters_is_not_printed(soklet) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    ring = soklet.cwd / RING
    pasted = PASTED[:30]
    soklet.remember(decode_base64url(PASTED))
    ring.write_text(ring.read_text().replace("[[keys]]\n", f"[[keys]]\n{pasted} = 1\n", 1))
    result = soklet.run("keys", "list")
    assert result.returncode == 1
    assert "unknown-field" in result.stderr
    assert "looks like key material" in result.stderr
    assert pasted[:16] not in result.output


# --- item 10: export writes owner-only files --------------------------------------------------------------------


@pytest.mark.slow
def test_export_redirected_to_a_file_makes_it_owner_only_then_stage_reads_it(soklet) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    target = soklet.cwd / "k1.key"
    target.touch()
    target.chmod(0o644)  # what a shell redirect creates under umask 022
    with target.open("wb") as stdout:
        completed = subprocess.run(
            [sys.executable, "-m", "soklet_cli", "keys", "export", "k1"],
            cwd=soklet.cwd,
            env=soklet.env,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=False,
            timeout=60,
            check=False,
        )
    assert completed.returncode == 0, completed.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text().strip() == material_of(soklet.cwd / RING)
    staged = soklet.run("keys", "stage", "--id", "k1", "--from-file", "k1.key", "--keyring", "b.toml")
    # b.toml does not exist yet: the file is read (no insecure-permissions refusal) before the keyring is.
    assert "insecure-permissions" not in staged.stderr
    assert soklet.run("keys", "generate", "--id", "b1", "--keyring", "b.toml").returncode == 0
    staged = soklet.run("keys", "stage", "--id", "k1", "--from-file", "k1.key", "--keyring", "b.toml")
    assert staged.returncode == 0, staged.stderr


@pytest.mark.slow
def test_export_output_writes_0600_atomically_and_never_overwrites_unasked(soklet) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    material = material_of(soklet.cwd / RING)
    written = soklet.run("keys", "export", "k1", "--output", "k1.key")
    assert written.returncode == 0, written.stderr
    assert material not in written.stdout
    target = soklet.cwd / "k1.key"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text() == material + "\n"
    target.write_text("keep me\n")
    again = soklet.run("keys", "export", "k1", "--output", "k1.key")
    assert again.returncode == 3
    assert "already-exists" in again.stderr
    assert "--force" in again.stderr
    assert target.read_text() == "keep me\n"
    forced = soklet.run("keys", "export", "k1", "--output", "k1.key", "--force", "--json")
    assert forced.returncode == 0
    assert json.loads(forced.stdout) == {
        "id": "k1",
        "output": "k1.key",
        "check_value": read_keyring_file(soklet.cwd / RING).entry("k1").key.check_value_text,  # type: ignore[union-attr]
    }
    assert target.read_text() == material + "\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert soklet.run("keys", "export", "k1", "--force").returncode == 2
    assert not [name for name in os.listdir(soklet.cwd) if name.startswith(".soklet-tmp-")]
    assert "--output" in soklet.run("keys", "export", "--help").stdout


# --- item 11: owners, folders, locks ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_keyring_in_a_folder_others_can_write_is_refused(soklet) -> None:  # type: ignore[no-untyped-def]
    shared = soklet.cwd / "shared"
    shared.mkdir()
    ring = shared / RING
    assert soklet.run("keys", "generate", "--id", "k1", "--keyring", str(ring)).returncode == 0
    shared.chmod(0o777)
    listed, rotated, created = soklet.run_together(
        ("keys", "list", "--keyring", str(ring)),
        ("keys", "rotate", "--keyring", str(ring)),
        ("keys", "generate", "--keyring", str(shared / "new.toml")),
    )
    for result in (listed, rotated, created):
        assert result.returncode == 3
        assert "untrusted-folder" in result.stderr
        assert "mode 0777" in result.stderr
        assert "--allow-insecure-permissions" in result.stderr
    assert not (shared / "new.toml").exists()
    assert [entry.key.id for entry in read_keyring_file(ring, allow_insecure_permissions=True).entries] == ["k1"]
    allowed = soklet.run("keys", "list", "--keyring", str(ring), "--allow-insecure-permissions")
    assert allowed.returncode == 0


@pytest.mark.slow
@needs_root
def test_a_keyring_moved_in_by_another_user_is_refused(soklet) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    ring = soklet.cwd / RING
    # Another user's file with an extra key, renamed over ours (what a writable folder allowed).
    assert soklet.run("keys", "stage", "--generate", "--id", "theirs").returncode == 0
    os.chown(ring, OTHER_UID, OTHER_UID)
    for result in soklet.run_together(("keys", "list"), ("fingerprint",), ("keys", "remove", "theirs")):
        assert result.returncode == 3
        assert "untrusted-owner" in result.stderr
        assert f"uid {OTHER_UID}" in result.stderr


def test_a_planted_lock_symlink_is_refused_and_nothing_is_created(soklet) -> None:  # type: ignore[no-untyped-def]
    target = soklet.cwd / "elsewhere" / "owned-by-root-now"
    target.parent.mkdir()
    lock_path_for(soklet.cwd / RING).symlink_to(target)
    result = soklet.run("keys", "generate")
    assert result.returncode == 3
    assert "lock-failed" in result.stderr
    assert "symbolic link" in result.stderr
    assert not target.exists()
    assert not (soklet.cwd / RING).exists()


# --- item 16: rotate's follow-up command; an empty --keyring ---------------------------------------------------


@pytest.mark.slow
def test_rotate_prints_the_remove_command_with_its_keyring(soklet) -> None:  # type: ignore[no-untyped-def]
    folder = soklet.cwd / "my keys"
    folder.mkdir()
    ring = folder / "ring 1.toml"
    assert soklet.run("keys", "generate", "--id", "k1", "--keyring", str(ring)).returncode == 0
    rotated = soklet.run("keys", "rotate", "--id", "k2", "--keyring", str(ring))
    assert rotated.returncode == 0, rotated.stderr
    line = next(line.strip() for line in rotated.stdout.splitlines() if line.strip().startswith("soklet keys remove"))
    assert shlex.split(line) == ["soklet", "keys", "remove", "k1", "--keyring", str(ring)]
    early = soklet.run(*shlex.split(line)[1:])
    assert early.returncode == 1  # not before the time it printed
    removed = soklet.run(*shlex.split(line)[1:], "--force")
    assert removed.returncode == 0, removed.stderr
    assert [entry.key.id for entry in read_keyring_file(ring).entries] == ["k2"]


@pytest.mark.slow
def test_an_empty_keyring_path_is_a_usage_error(soklet) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    results = soklet.run_together(
        ("keys", "list", "--keyring", ""),
        ("keys", "generate", "--keyring", ""),
        ("fingerprint", "--keyring", ""),
    )
    for result in results:
        assert result.returncode == 2, result.args
        assert "empty" in result.stderr
    assert sorted(os.listdir(soklet.cwd)) == [RING, RING + ".lock"]


# --- item 17: flags in help ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_help_shows_no_bool_metavar(soklet) -> None:  # type: ignore[no-untyped-def]
    commands = ("generate", "list", "stage", "activate", "remove", "rotate", "export")
    results = soklet.run_together(("keys", "--help"), *(("keys", name, "--help") for name in commands))
    for result in results:
        assert result.returncode == 0
        assert "<bool>" not in result.stdout, result.args
    assert "--json" in results[2].stdout
    assert "--allow-insecure-permissions" in results[2].stdout


@pytest.mark.slow
def test_a_hand_edited_material_shaped_id_is_refused_by_every_reader(soklet) -> None:  # type: ignore[no-untyped-def]
    new_ring(soklet)
    ring = soklet.cwd / RING
    text = ring.read_text().replace('id = "k1"', f'id = "{PASTED}"')
    ring.write_text(text)
    for result in soklet.run_together(("keys", "list"), ("fingerprint",), ("keys", "stage", "--generate")):
        assert result.returncode == 1, result.stderr
        assert "key-id-looks-like-material" in result.stderr
        assert "keys[0]" in result.stderr
        assert PASTED[:16] not in result.output
