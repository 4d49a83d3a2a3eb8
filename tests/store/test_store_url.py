"""Store URLs: what parses, what is refused, and that a password never shows in a repr, str, message or log."""

from __future__ import annotations

import asyncio
import logging
import pickle
import socket
from pathlib import Path

import pytest

from soklet_core.store import (
    MAX_STORE_URL_CHARS,
    StoreError,
    StoreErrorReason,
    StoreUrl,
    default_data_dir,
    default_store_url,
    open_store,
    sqlite_url,
)

SECRET = "Hunter2-s3cret-pw"


def test_a_sqlite_url_names_an_absolute_file() -> None:
    url = StoreUrl.parse("sqlite:///var/lib/soklet/soklet.db")
    assert url.backend == "sqlite"
    assert url.sqlite_path == Path("/var/lib/soklet/soklet.db")
    assert url.redacted == url.text
    assert sqlite_url(Path("/tmp/x.db")) == StoreUrl.parse("sqlite:///tmp/x.db")


def test_a_postgresql_url_parses_with_either_scheme() -> None:
    for text in (
        f"postgresql://soklet:{SECRET}@db.example:5432/soklet",
        "postgres://soklet@db.example/soklet",
        "postgresql://[::1]:5433/soklet",
        "postgresql:///soklet?host=/run/postgresql",
    ):
        url = StoreUrl.parse(text)
        assert url.backend == "postgresql"
        assert url.text == text
    with pytest.raises(ValueError, match="not a sqlite URL"):
        _ = StoreUrl.parse("postgresql://db.example/soklet").sqlite_path


@pytest.mark.parametrize(
    "text",
    [
        "",
        "mysql://db.example/soklet",
        "sqlite://relative/path.db",
        "sqlite:relative.db",
        "sqlite:///",
        "sqlite:///tmp/../etc/x.db",
        "sqlite:///tmp/x.db?mode=ro",
        "sqlite:///tmp/x%2e.db",
        "sqlite:///tmp/with space.db",
        "sqlite:///tmp/x.db\n",
        "postgresql://db.example:notaport/soklet",
        "postgresql://db.example:0/soklet",
        "postgresql://db.example/soklet#fragment",
        "postgresql://db.example/a/b",
        "postgresql:///soklet",
        "sqlite:///" + "a" * MAX_STORE_URL_CHARS,
    ],
)
def test_bad_urls_are_refused_without_echoing_them(text: str) -> None:
    with pytest.raises(StoreError) as caught:
        StoreUrl.parse(text)
    assert caught.value.reason is StoreErrorReason.BAD_URL
    if len(text) > 12:
        assert text not in str(caught.value)


def test_the_password_never_shows() -> None:
    text = f"postgresql://soklet:{SECRET}@db.example:5432/soklet?sslmode=require"
    url = StoreUrl.parse(text)
    assert url.redacted == "postgresql://soklet:***@db.example:5432/soklet?sslmode=require"
    for shown in (repr(url), str(url), f"{url}", repr([url]), url.redacted):
        assert SECRET not in shown
    in_query = StoreUrl.parse(f"postgresql://db.example/soklet?password={SECRET}")
    assert SECRET not in in_query.redacted
    assert SECRET not in repr(in_query)
    assert SECRET not in repr(open_store(url))
    # A malformed URL with a password is refused without it.
    with pytest.raises(StoreError) as caught:
        StoreUrl.parse(f"postgresql://soklet:{SECRET}@db.example:99999999/soklet")
    assert SECRET not in str(caught.value)


def test_a_url_made_by_its_constructor_is_checked_too() -> None:
    assert StoreUrl("sqlite", "sqlite:///tmp/x.db") == StoreUrl.parse("sqlite:///tmp/x.db")
    with pytest.raises(StoreError):
        StoreUrl("postgresql", "sqlite:///tmp/x.db")
    with pytest.raises(StoreError):
        StoreUrl("sqlite", "sqlite:relative")
    assert pickle.loads(pickle.dumps(StoreUrl.parse("sqlite:///tmp/x.db"))).sqlite_path == Path("/tmp/x.db")


def test_the_default_store_is_a_sqlite_file_in_the_data_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SOKLET_DATA_DIR", str(tmp_path / "data"))
    assert default_data_dir() == tmp_path / "data"
    assert default_store_url().sqlite_path == tmp_path / "data" / "soklet.db"
    monkeypatch.delenv("SOKLET_DATA_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_data_dir() == tmp_path / "state" / "soklet"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_data_dir() == tmp_path / "home" / ".local" / "state" / "soklet"


@pytest.mark.slow
def test_an_unreachable_postgresql_is_unavailable(caplog: pytest.LogCaptureFixture) -> None:
    # A loopback port nobody listens on: the connection is refused until the store's timeout ends the wait.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = open_store(f"postgresql://soklet:{SECRET}@127.0.0.1:{port}/soklet")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StoreError) as caught:
        asyncio.run(store.open())
    assert caught.value.reason is StoreErrorReason.UNAVAILABLE
    assert SECRET not in str(caught.value)
    assert SECRET not in caplog.text
