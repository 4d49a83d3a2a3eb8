"""A store alone reveals no key: a ``pg_dump`` of a PostgreSQL store, and a SQLite store's files byte for byte,
hold none of a fleet keyring's key material, raw or written as base64url, standard base64 or hex."""

from __future__ import annotations

import asyncio
import base64
import subprocess
from pathlib import Path

from soklet_core.keys import LocalKek, ProtectionKey, ProtectionKeyring
from soklet_core.store import FleetKeyring, open_store, sqlite_url
from tools.postgres import PostgresCluster, find_postgres_bin

KEY_COUNT = 6


def forms(material: bytes) -> list[bytes]:
    """Every way a key's bytes could be written into a dump or a file."""
    return [
        material,
        base64.urlsafe_b64encode(material).rstrip(b"="),
        base64.b64encode(material).rstrip(b"="),
        material.hex().encode(),
        material.hex().upper().encode(),
    ]


def write_fleet_keyring(url: str) -> tuple[list[bytes], list[bytes]]:
    """Write a fleet keyring of several keys (through every kind of change) to ``url``; every key's material and
    every stored (wrapped) ciphertext."""
    keys = [ProtectionKey.generate(f"2026-{month:02}") for month in range(1, KEY_COUNT + 1)]

    async def main() -> list[bytes]:
        store = open_store(url)
        await store.open()
        try:
            fleet = FleetKeyring(store, LocalKek(bytes(range(32))))
            await fleet.initialize(ProtectionKeyring(keys[0], keys[1:3]))
            await fleet.stage(keys[3])
            await fleet.activate(keys[3].id)
            await fleet.rotate(keys[4])
            await fleet.rotate(keys[5])
            loaded = await fleet.rewrap(LocalKek(bytes(range(1, 33))))
            assert len(loaded.keyring) == KEY_COUNT
            return [row.wrapped.ciphertext for row in loaded.stored.keys]
        finally:
            await store.close()

    wrapped = asyncio.run(main())
    return [key.material for key in keys], wrapped


def assert_holds_none(blob: bytes, materials: list[bytes]) -> None:
    for material in materials:
        for form in forms(material):
            assert form not in blob


def test_a_pg_dump_of_the_store_holds_no_key_material(postgres_cluster: PostgresCluster, postgres_url: str) -> None:
    materials, wrapped = write_fleet_keyring(postgres_url)
    dump = subprocess.run(
        [str(find_postgres_bin() / "pg_dump"), "--no-password", "--dbname", postgres_url],
        capture_output=True,
        timeout=120,
        check=True,
    ).stdout
    # The key rows are in the dump (pg_dump writes a bytea as hex), so the search looks where a key would be.
    for ciphertext in wrapped:
        assert ciphertext.hex().encode() in dump
    assert_holds_none(dump, materials)


def test_a_sqlite_store_file_holds_no_key_material(tmp_path: Path) -> None:
    path = tmp_path / "store" / "soklet.db"
    materials, wrapped = write_fleet_keyring(sqlite_url(path).text)
    files = [candidate for candidate in path.parent.iterdir() if candidate.is_file()]
    assert path in files
    blob = b"".join(candidate.read_bytes() for candidate in files)
    for ciphertext in wrapped:
        assert ciphertext in blob  # the key rows are in these bytes
    assert_holds_none(blob, materials)
