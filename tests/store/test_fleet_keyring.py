"""FleetKeyring on both backends: the keyring's rules applied to a keyring kept wrapped in a store, one generation
per change, a wrong KEK refused before anything is written, a KEK rewrap that changes no key."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from soklet_core.files.document import KeyEntry, KeyringDocument, KeyRole
from soklet_core.keys import (
    KeyringError,
    KeyringErrorReason,
    KeyWrapError,
    KeyWrapErrorReason,
    LocalKek,
    ProtectionKey,
    ProtectionKeyring,
    RetiredTooRecently,
)
from soklet_core.store import FleetKeyring, StoredKeyRole, StoreError, StoreErrorReason, open_store
from tests.store.support import Store, run

KEK = LocalKek(bytes(range(32)))
OTHER_KEK = LocalKek(bytes(range(1, 33)))
LIFETIME = timedelta(minutes=15)


def first_keyring() -> ProtectionKeyring:
    return ProtectionKeyring(ProtectionKey.generate("2026-08"), [ProtectionKey.generate("2026-07")])


def test_a_keyring_is_written_once_and_loads_as_it_was(store_url: str) -> None:
    async def steps(store: Store) -> None:
        fleet = FleetKeyring(store, KEK)
        assert await fleet.load() is None
        keyring = first_keyring()
        written = await fleet.initialize(keyring)
        assert written.generation == 1
        loaded = await fleet.load()
        assert loaded is not None
        assert loaded.generation == 1
        assert loaded.keyring == keyring
        assert loaded.keyring.fingerprint() == keyring.fingerprint()
        assert set(loaded.created) == {"2026-07", "2026-08"}
        assert loaded.retired == {"2026-07": None, "2026-08": None}
        for row in loaded.stored.keys:
            key = keyring.key(row.key_id)
            assert key is not None
            assert row.check_value == key.check_value_text
            assert key.material not in row.wrapped.ciphertext
        assert "material" not in repr(loaded)
        with pytest.raises(StoreError) as refused:
            await fleet.initialize(ProtectionKeyring(ProtectionKey.generate("2026-09")))
        assert refused.value.reason is StoreErrorReason.CONFLICT
        assert await store.keyring_generation() == 1

    run(store_url, steps)


def test_a_keyring_file_document_keeps_its_times(store_url: str) -> None:
    created = datetime(2026, 7, 1, tzinfo=UTC)
    retired = datetime(2026, 7, 20, tzinfo=UTC)
    document = KeyringDocument(
        (
            KeyEntry(ProtectionKey.generate("2026-08"), KeyRole.ACTIVE, created),
            KeyEntry(ProtectionKey.generate("2026-07"), KeyRole.VERIFICATION, created, retired=retired),
        )
    )

    async def steps(store: Store) -> None:
        loaded = await FleetKeyring(store, KEK).initialize(document)
        again = await FleetKeyring(store, KEK).load()
        assert again is not None
        assert again.keyring == loaded.keyring == document.keyring()
        assert again.created == {"2026-07": created, "2026-08": created}
        assert again.retired == {"2026-07": retired, "2026-08": None}

    run(store_url, steps)


def test_changes_follow_the_keyring_rules_one_generation_each(store_url: str) -> None:
    async def steps(store: Store) -> None:
        fleet = FleetKeyring(store, KEK)
        with pytest.raises(StoreError) as refused:
            await fleet.stage(ProtectionKey.generate("2026-09"))
        assert refused.value.reason is StoreErrorReason.NO_KEYRING
        await fleet.initialize(first_keyring())
        new = ProtectionKey.generate("2026-09")
        staged = await fleet.stage(new)
        assert staged.generation == 2
        assert staged.keyring.key("2026-09") == new
        before = {row.key_id: row.wrapped for row in staged.stored.keys}
        # Staging it again is a no-op: no write, no generation.
        assert (await fleet.stage(new)).generation == 2
        # The same id with other bytes is refused, nothing written.
        with pytest.raises(KeyringError) as conflicting:
            await fleet.stage(ProtectionKey.generate("2026-09"))
        assert conflicting.value.reason is KeyringErrorReason.CONFLICTING_MATERIAL
        assert await store.keyring_generation() == 2
        start = datetime.now(UTC) - timedelta(seconds=1)
        activated = await fleet.activate("2026-09")
        assert activated.generation == 3
        assert activated.keyring.active_key == new
        retired = activated.retired["2026-08"]
        assert retired is not None
        assert start <= retired <= datetime.now(UTC)
        assert activated.retired["2026-09"] is None
        # Only a new key is wrapped: every other row keeps its ciphertext.
        assert {row.key_id: row.wrapped for row in activated.stored.keys} == before
        stored = await store.read_keyring()
        assert stored is not None
        assert stored.active.key_id == "2026-09"
        assert [row.role for row in stored.keys] == [
            StoredKeyRole.VERIFICATION,
            StoredKeyRole.VERIFICATION,
            StoredKeyRole.ACTIVE,
        ]

    run(store_url, steps)


def test_removal_waits_the_state_lifetime_unless_forced(store_url: str) -> None:
    async def steps(store: Store) -> None:
        fleet = FleetKeyring(store, KEK)
        await fleet.initialize(first_keyring())
        await fleet.rotate(ProtectionKey.generate("2026-09"))
        with pytest.raises(RetiredTooRecently) as early:
            await fleet.remove("2026-08", max_state_lifetime=LIFETIME)
        assert early.value.recorded is True
        with pytest.raises(KeyringError) as active:
            await fleet.remove("2026-09", max_state_lifetime=LIFETIME)
        assert active.value.reason is KeyringErrorReason.ACTIVE_KEY_REMOVAL
        generation = await store.keyring_generation()
        removed = await fleet.remove("2026-08", max_state_lifetime=LIFETIME, force=True)
        assert removed.generation == generation + 1
        assert "2026-08" not in removed.keyring
        # A key never recorded as retired waits from the keyring's last change; with no lifetime it goes now.
        gone = await fleet.remove("2026-07", max_state_lifetime=timedelta(0))
        assert gone.keyring.key_ids == ("2026-09",)

    run(store_url, steps)


def test_a_rotation_is_one_generation(store_url: str) -> None:
    async def steps(store: Store) -> None:
        fleet = FleetKeyring(store, KEK)
        await fleet.initialize(first_keyring())
        key = ProtectionKey.generate("2026-09")
        rotated = await fleet.rotate(key)
        assert rotated.generation == 2
        assert rotated.keyring.active_key == key
        assert rotated.retired["2026-08"] is not None
        assert (await fleet.rotate(key)).generation == 2  # repeated: a no-op

    run(store_url, steps)


def test_a_wrong_kek_is_refused_naming_the_key_and_nothing_is_written(store_url: str) -> None:
    async def steps(store: Store) -> None:
        await FleetKeyring(store, KEK).initialize(first_keyring())
        before = await store.read_keyring()
        wrong = FleetKeyring(store, OTHER_KEK)
        changes: list[Callable[[], Awaitable[object]]] = [
            wrong.load,
            lambda: wrong.stage(ProtectionKey.generate("2026-09")),
            lambda: wrong.rotate(ProtectionKey.generate("2026-09")),
            lambda: wrong.activate("2026-07"),
            lambda: wrong.remove("2026-07", max_state_lifetime=LIFETIME, force=True),
            lambda: wrong.rewrap(KEK),
        ]
        for change in changes:
            with pytest.raises(KeyWrapError) as refused:
                await change()
            assert refused.value.reason is KeyWrapErrorReason.WRONG_KEK
            assert refused.value.key_id in {"2026-07", "2026-08"}
            assert await store.read_keyring() == before

    run(store_url, steps)


def test_a_rewrap_changes_no_key_check_value_or_fingerprint(store_url: str) -> None:
    async def steps(store: Store) -> None:
        fleet = FleetKeyring(store, KEK)
        await fleet.initialize(first_keyring())
        before = await fleet.rotate(ProtectionKey.generate("2026-09"))
        rewrapped = await fleet.rewrap(OTHER_KEK)
        assert rewrapped.generation == before.generation + 1
        assert rewrapped.keyring == before.keyring
        assert rewrapped.keyring.fingerprint() == before.keyring.fingerprint()
        assert rewrapped.changed_at == before.changed_at
        assert [
            (row.key_id, row.role, row.created_at, row.retired_at, row.check_value) for row in before.stored.keys
        ] == [(row.key_id, row.role, row.created_at, row.retired_at, row.check_value) for row in rewrapped.stored.keys]
        assert {row.wrapped.kek_id for row in rewrapped.stored.keys} == {OTHER_KEK.kek_id}
        loaded = await FleetKeyring(store, OTHER_KEK).load()
        assert loaded is not None
        assert loaded.keyring == before.keyring
        with pytest.raises(KeyWrapError) as old:
            await fleet.load()
        assert old.value.reason is KeyWrapErrorReason.WRONG_KEK

    run(store_url, steps)


def test_concurrent_changes_on_two_stores_both_land(store_url: str) -> None:
    async def steps(store: Store) -> None:
        other = open_store(store_url)
        await other.open()
        try:
            await FleetKeyring(store, KEK).initialize(first_keyring())
            one, two = ProtectionKey.generate("2026-09"), ProtectionKey.generate("2026-10")
            await asyncio.gather(FleetKeyring(store, KEK).stage(one), FleetKeyring(other, KEK).stage(two))
            loaded = await FleetKeyring(other, KEK).load()
            assert loaded is not None
            assert loaded.generation == 3
            assert loaded.keyring.key("2026-09") == one
            assert loaded.keyring.key("2026-10") == two
        finally:
            await other.close()

    run(store_url, steps)


def test_a_tampered_row_does_not_load(store_url: str) -> None:
    async def steps(store: Store) -> None:
        fleet = FleetKeyring(store, KEK)
        loaded = await fleet.initialize(first_keyring())
        # The active key's ciphertext moved under the other key's id: its associated data no longer matches.
        rows = loaded.stored.keys
        swapped = tuple(
            type(row)(
                wrapped=type(row.wrapped)(
                    key_id=row.key_id, kek_id=row.wrapped.kek_id, ciphertext=rows[-1 - index].wrapped.ciphertext
                ),
                role=row.role,
                created_at=row.created_at,
                retired_at=row.retired_at,
                check_value=row.check_value,
            )
            for index, row in enumerate(rows)
        )
        await store.write_keyring(
            type(loaded.stored)(
                generation=0, profile=loaded.stored.profile, keys=swapped, changed_at=loaded.changed_at
            ),
            expected_generation=1,
        )
        with pytest.raises(KeyWrapError) as refused:
            await fleet.load()
        assert refused.value.reason is KeyWrapErrorReason.UNWRAP_FAILED

    run(store_url, steps)
