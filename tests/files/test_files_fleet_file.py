"""The fleet file: strict TOML, every field error named, limits at their edge, tokens read only on demand."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from soklet_core.files import (
    DEFAULT_FLEET_TIMEOUT_SECONDS,
    MAX_ENV_NAME_CHARS,
    MAX_FLEET_FILE_BYTES,
    MAX_FLEET_INSTANCES,
    MAX_FLEET_TIMEOUT_SECONDS,
    MAX_INSTANCE_NAME_CHARS,
    MAX_INSTANCE_URL_CHARS,
    AdminTokenEnv,
    AdminTokenFile,
    FleetFileError,
    parse_fleet_file,
    read_fleet_file,
)

SECRET_URL = "http://user:hunter2secret@10.0.0.1:9001"


def _instance(name: str = "a", url: str = "http://127.0.0.1:9001", extra: str = "") -> str:
    return f'[[instances]]\nname = "{name}"\nurl = "{url}"\n{extra}'


def _fails(text: str, where: str | None, problem: str) -> FleetFileError:
    with pytest.raises(FleetFileError) as caught:
        parse_fleet_file(text, path="fleet.toml")
    assert caught.value.where == where, str(caught.value)
    assert problem in caught.value.problem, str(caught.value)
    assert str(caught.value).startswith("fleet.toml: ")
    return caught.value


def test_a_complete_file_with_defaults_and_overrides(tmp_path: Path) -> None:
    text = (
        '[defaults]\nadmin_token_env = "SOKLET_ADMIN"\nca_file = "ca.pem"\ntimeout = 2.5\n\n'
        + _instance("eu-1", "https://eu-1.internal:9443")
        + "\n"
        + _instance("eu-2", "http://10.0.0.2:9001/", 'admin_token_file = "tokens/eu-2"\nca_file = "/etc/ca.pem"\n')
    )
    fleet = parse_fleet_file(text, base_dir=tmp_path)
    first, second = fleet.instances
    assert (first.name, first.url, first.token, first.timeout) == (
        "eu-1",
        "https://eu-1.internal:9443",
        AdminTokenEnv("SOKLET_ADMIN"),
        2.5,
    )
    assert first.ca_file == str(tmp_path / "ca.pem")
    assert second.token == AdminTokenFile(str(tmp_path / "tokens/eu-2"))
    assert second.ca_file == "/etc/ca.pem"
    assert "10.0.0.2" not in repr(second)


def test_the_timeout_defaults_and_per_instance_token_suffices() -> None:
    fleet = parse_fleet_file(_instance(extra='admin_token_env = "T"\n'))
    assert fleet.instances[0].timeout == DEFAULT_FLEET_TIMEOUT_SECONDS
    assert fleet.instances[0].ca_file is None


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("", "instances", "missing"),
        ("instances = []\n", "instances", "at least one"),
        ("instances = 3\n", "instances", "array of [[instances]]"),
        ("defaults = 3\n" + _instance(), "defaults", "must be a table"),
        ('extra = 1\n[defaults]\nadmin_token_env = "T"\n' + _instance(), "extra", "unknown field"),
        ('[defaults]\nadmin_token_env = "T"\nretries = 2\n' + _instance(), "defaults.retries", "unknown field"),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(extra="port = 1\n"), "instances[0].port", "unknown field"),
        ('[defaults]\nadmin_token_env = "T"\n[[instances]]\nurl = "http://a:1"\n', "instances[0].name", "missing"),
        ('[defaults]\nadmin_token_env = "T"\n[[instances]]\nname = "a"\n', "instances[0].url", "missing"),
        (
            '[defaults]\nadmin_token_env = "T"\n[[instances]]\nname = 3\nurl = "http://a:1"\n',
            "instances[0].name",
            "string",
        ),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(name=""), "instances[0].name", "printable"),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(name="a\\u0007b"), "instances[0].name", "printable"),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(url="ftp://a:1"), "instances[0].url", "http://"),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(url="http://"), "instances[0].url", "no host"),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(url="http://a:99999"), "instances[0].url", "not a valid"),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(url="http://a:0"), "instances[0].url", "port 0"),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(url="http://a:1/?x=1"), "instances[0].url", "query"),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(url="http://a:1/#x"), "instances[0].url", "fragment"),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(url="http://a b:1"), "instances[0].url", "visible ASCII"),
        ('[defaults]\nadmin_token_env = "T"\n' + _instance(url=SECRET_URL), "instances[0].url", "credentials"),
        (_instance(), "instances[0]", "no admin token"),
        (
            _instance(extra='admin_token_env = "T"\nadmin_token_file = "f"\n'),
            "instances[0]",
            "only one of admin_token_env and admin_token_file",
        ),
        ('[defaults]\nadmin_token_env = "T"\nadmin_token_file = "f"\n' + _instance(), "defaults", "only one"),
        (_instance(extra='admin_token_env = "1BAD"\n'), "instances[0].admin_token_env", "environment variable"),
        (_instance(extra="admin_token_env = 3\n"), "instances[0].admin_token_env", "environment variable"),
        (_instance(extra='admin_token_file = ""\n'), "instances[0].admin_token_file", "file name"),
        (_instance(extra='admin_token_file = "a\\u0001b"\n'), "instances[0].admin_token_file", "file name"),
        (_instance(extra='admin_token_env = "T"\nca_file = 3\n'), "instances[0].ca_file", "file name"),
        ('[defaults]\nadmin_token_env = "T"\ntimeout = 0\n' + _instance(), "defaults.timeout", "above 0"),
        ('[defaults]\nadmin_token_env = "T"\ntimeout = -1.0\n' + _instance(), "defaults.timeout", "above 0"),
        ('[defaults]\nadmin_token_env = "T"\ntimeout = nan\n' + _instance(), "defaults.timeout", "above 0"),
        ('[defaults]\nadmin_token_env = "T"\ntimeout = true\n' + _instance(), "defaults.timeout", "above 0"),
        ('[defaults]\nadmin_token_env = "T"\ntimeout = "5"\n' + _instance(), "defaults.timeout", "above 0"),
        (
            '[defaults]\nadmin_token_env = "T"\n' + _instance() + "\n" + _instance(url="http://b:1"),
            "instances[1].name",
            "same name",
        ),
        ("[[instances]\n", "line 1, column 12", "not valid TOML"),
    ],
)
def test_every_field_error_is_named(text: str, where: str | None, problem: str) -> None:
    error = _fails(text, where, problem)
    assert "hunter2secret" not in str(error)


def test_an_unknown_field_that_looks_like_material_is_not_repeated() -> None:
    material = "Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eHF1dXg"
    text = f'{material} = 1\n[defaults]\nadmin_token_env = "T"\n' + _instance()
    error = _fails(text, "<a name that looks like key material>", "unknown field")
    assert material not in str(error)


def test_limits_at_their_edge() -> None:
    head = '[defaults]\nadmin_token_env = "T"\n'
    many = "".join(_instance(f"i{index}") for index in range(MAX_FLEET_INSTANCES))
    assert len(parse_fleet_file(head + many).instances) == MAX_FLEET_INSTANCES
    _fails(head + many + _instance("one-more"), "instances", f"at most {MAX_FLEET_INSTANCES:,}")

    name = "n" * MAX_INSTANCE_NAME_CHARS
    assert parse_fleet_file(head + _instance(name)).instances[0].name == name
    _fails(head + _instance(name + "n"), "instances[0].name", "printable")

    prefix = "http://h:1/"
    url = prefix + "p" * (MAX_INSTANCE_URL_CHARS - len(prefix))
    assert parse_fleet_file(head + _instance(url=url)).instances[0].url == url
    _fails(head + _instance(url=url + "p"), "instances[0].url", "visible ASCII")

    top = f"{head}timeout = {MAX_FLEET_TIMEOUT_SECONDS:g}\n"
    assert parse_fleet_file(top + _instance()).instances[0].timeout == MAX_FLEET_TIMEOUT_SECONDS
    _fails(f"{head}timeout = {MAX_FLEET_TIMEOUT_SECONDS + 0.001}\n" + _instance(), "defaults.timeout", "at most")


def test_file_size_limit_at_its_edge(tmp_path: Path) -> None:
    body = ('[defaults]\nadmin_token_env = "T"\n' + _instance()).encode()
    path = tmp_path / "fleet.toml"
    path.write_bytes(body + b"#" * (MAX_FLEET_FILE_BYTES - len(body)))
    assert len(read_fleet_file(path).instances) == 1
    path.write_bytes(body + b"#" * (MAX_FLEET_FILE_BYTES - len(body) + 1))
    with pytest.raises(FleetFileError, match="larger than") as caught:
        read_fleet_file(path)
    assert not caught.value.is_io


def test_reading_the_file_is_bounded_and_never_blocks(tmp_path: Path) -> None:
    with pytest.raises(FleetFileError, match="no such file") as caught:
        read_fleet_file(tmp_path / "absent.toml")
    assert caught.value.is_io
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(FleetFileError, match="FIFO"):
        read_fleet_file(fifo)
    (tmp_path / "bad.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(FleetFileError, match="not UTF-8"):
        read_fleet_file(tmp_path / "bad.toml")


def test_relative_paths_are_anchored_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "fleet.toml"
    path.write_text(_instance(extra='admin_token_file = "tok"\n'))
    assert read_fleet_file(path).instances[0].token == AdminTokenFile(str(tmp_path / "conf" / "tok"))


def test_environment_name_length_at_its_edge() -> None:
    name = "T" * MAX_ENV_NAME_CHARS
    assert parse_fleet_file(_instance(extra=f'admin_token_env = "{name}"\n')).instances[0].token == AdminTokenEnv(name)
    _fails(_instance(extra=f'admin_token_env = "{name}T"\n'), "instances[0].admin_token_env", "environment variable")
