"""The client's admin token: the listener's format (a bare token or one label:token line), one token, never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from soklet_core.files import AdminTokenEnv, AdminTokenFile, FleetFileError
from soklet_core.fleet import read_admin_token

TOKEN = "clientToken-4b9e1f0a7c2d5e83"


def _file(folder: Path, text: str, mode: int = 0o600) -> AdminTokenFile:
    path = folder / "token"
    path.write_text(text)
    path.chmod(mode)
    return AdminTokenFile(str(path))


def test_bare_and_labelled_tokens_from_a_file(tmp_path: Path) -> None:
    assert read_admin_token(_file(tmp_path, f"{TOKEN}\n")) == TOKEN
    assert read_admin_token(_file(tmp_path, f"# ops\nops:{TOKEN}\n")) == TOKEN


def test_a_token_from_the_environment() -> None:
    assert read_admin_token(AdminTokenEnv("T"), environ={"T": TOKEN}) == TOKEN
    with pytest.raises(FleetFileError, match="not set") as caught:
        read_admin_token(AdminTokenEnv("T"), environ={})
    assert caught.value.where == "$T"


def test_several_tokens_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FleetFileError, match="several tokens") as caught:
        read_admin_token(_file(tmp_path, f"a:{TOKEN}\nb:{TOKEN}x\n"))
    assert TOKEN not in str(caught.value)


def test_an_insecure_or_missing_file_is_an_io_problem(tmp_path: Path) -> None:
    with pytest.raises(FleetFileError, match="chmod 600") as caught:
        read_admin_token(_file(tmp_path, TOKEN, 0o644))
    assert caught.value.is_io
    assert TOKEN not in str(caught.value)
    with pytest.raises(FleetFileError, match="no such file") as caught:
        read_admin_token(AdminTokenFile(str(tmp_path / "absent")))
    assert caught.value.is_io


@pytest.mark.parametrize("text", ["", "short", "bad token with spaces-0123456789", "x" * 600])
def test_malformed_tokens_are_refused_without_repeating_them(tmp_path: Path, text: str) -> None:
    with pytest.raises(FleetFileError, match="admin token") as caught:
        read_admin_token(_file(tmp_path, text))
    assert not caught.value.is_io
    if text:
        assert text not in str(caught.value)
