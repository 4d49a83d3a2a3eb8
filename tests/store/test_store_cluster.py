"""The throwaway PostgreSQL cluster the store tests run on: private, password-protected, and loud when missing."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tools.postgres import PostgresCluster, PostgresMissing, find_postgres_bin


def test_without_binaries_the_cluster_names_the_install_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / "15" / "bin").mkdir(parents=True)
    with pytest.raises(PostgresMissing, match="bash scripts/postgres"):
        find_postgres_bin(tmp_path)


def test_the_newest_installed_version_is_chosen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for version in ("9.6", "15", "16"):
        folder = tmp_path / version / "bin"
        folder.mkdir(parents=True)
        if version != "16":  # 16 is incomplete: no pg_ctl
            (folder / "pg_ctl").touch()
        (folder / "initdb").touch()
    assert find_postgres_bin(tmp_path) == tmp_path / "15" / "bin"


def test_the_cluster_is_private_and_needs_its_password(postgres_cluster: PostgresCluster, postgres_url: str) -> None:
    folder = postgres_cluster.folder
    assert folder is not None
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    password = postgres_url.split(":")[2].split("@")[0]
    assert password not in repr(postgres_cluster)
    assert postgres_url.startswith(f"postgresql://soklet:{password}@127.0.0.1:{postgres_cluster.port}/t_")
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("SELECT 1").fetchone() == (1,)
    wrong = postgres_url.replace(password, "not-the-password")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(wrong, connect_timeout=5).close()
    with pytest.raises(ValueError, match="database name"):
        postgres_cluster.create_database('bad"; DROP')


_ABANDON = """
import os
from tools.postgres import PostgresCluster
cluster = PostgresCluster()
cluster.start()
print(cluster.folder, flush=True)
os._exit(0)  # killed: no stop
"""


@pytest.mark.slow
def test_a_cluster_left_by_a_killed_run_is_stopped_by_the_next() -> None:
    root = Path(__file__).resolve().parents[2]
    abandoned = subprocess.run(
        [sys.executable, "-c", _ABANDON], cwd=root, capture_output=True, text=True, timeout=120, check=True
    )
    folder = Path(abandoned.stdout.strip())
    assert (folder / "data" / "postmaster.pid").exists()
    with PostgresCluster():
        assert not folder.exists()
