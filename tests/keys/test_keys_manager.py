"""KeyringManager: every transition and refusal, generations, sealing reservations, and concurrency."""

from __future__ import annotations

import random
import threading

import pytest

from soklet_core.keys import (
    KeyInUse,
    KeyringError,
    KeyringErrorReason,
    KeyringManager,
    KeyringSnapshot,
    ProtectionKey,
    ProtectionKeyring,
)


def key(key_id: str, fill: int = 1) -> ProtectionKey:
    return ProtectionKey.from_id_and_bytes(key_id, bytes([fill]) * 32)


@pytest.fixture
def manager() -> KeyringManager:
    return KeyringManager(ProtectionKeyring(key("k1")))


def assert_consistent(snapshot: KeyringSnapshot) -> None:
    """A snapshot equals the snapshot of the keyring it describes: no half change is visible."""
    ids = [snapshot.active_key_id, *snapshot.verification_key_ids]
    assert len(ids) == len(set(ids))
    assert [entry.key_id for entry in snapshot.check_values] == ids
    assert list(snapshot.verification_key_ids) == sorted(snapshot.verification_key_ids)


def test_initial_state(manager: KeyringManager) -> None:
    snapshot = manager.snapshot()
    assert (snapshot.generation, snapshot.active_key_id, snapshot.verification_key_ids) == (0, "k1", ())
    assert manager.generation == 0
    assert manager.current().active_key == key("k1")
    with pytest.raises(TypeError):
        KeyringManager("not a keyring")  # type: ignore[arg-type]


def test_stage_then_identical_restage_is_a_noop(manager: KeyringManager) -> None:
    after = manager.stage_verification_key(key("k2", 2))
    assert after.generation == 1
    assert after.verification_key_ids == ("k2",)
    before = manager.current()
    again = manager.stage_verification_key(key("k2", 2))
    assert again.generation == 1
    assert manager.current() is before


def test_stage_same_id_other_bytes_is_refused_and_changes_nothing(manager: KeyringManager) -> None:
    manager.stage_verification_key(key("k2", 2))
    before = manager.current()
    with pytest.raises(KeyringError) as caught:
        manager.stage_verification_key(key("k2", 3))
    assert caught.value.reason is KeyringErrorReason.CONFLICTING_MATERIAL
    with pytest.raises(KeyringError):
        manager.stage_verification_key(key("k1", 3))
    assert manager.current() is before
    assert manager.generation == 1


def test_activate_staged_key(manager: KeyringManager) -> None:
    manager.stage_verification_key(key("k2", 2))
    after = manager.activate_staged_key("k2")
    assert (after.generation, after.active_key_id, after.verification_key_ids) == (2, "k2", ("k1",))
    assert manager.activate_staged_key("k2").generation == 2
    with pytest.raises(KeyringError) as caught:
        manager.activate_staged_key("k9")
    assert caught.value.reason is KeyringErrorReason.UNKNOWN_KEY
    assert manager.generation == 2


def test_remove_verification_key(manager: KeyringManager) -> None:
    manager.stage_verification_key(key("k2", 2))
    after = manager.remove_verification_key("k2")
    assert after.generation == 2
    assert after.verification_key_ids == ()
    with pytest.raises(KeyringError) as unknown:
        manager.remove_verification_key("k2")
    assert unknown.value.reason is KeyringErrorReason.UNKNOWN_KEY
    with pytest.raises(KeyringError) as active:
        manager.remove_verification_key("k1")
    assert active.value.reason is KeyringErrorReason.ACTIVE_KEY_REMOVAL
    assert manager.generation == 2


def test_rotate_is_retry_safe(manager: KeyringManager) -> None:
    first = manager.rotate_active_key(key("k2", 2))
    assert (first.generation, first.active_key_id, first.verification_key_ids) == (1, "k2", ("k1",))
    again = manager.rotate_active_key(key("k2", 2))
    assert again == first
    with pytest.raises(KeyringError):
        manager.rotate_active_key(key("k2", 3))
    # Rotating to an already staged key activates it.
    manager.stage_verification_key(key("k3", 3))
    assert manager.rotate_active_key(key("k3", 3)).active_key_id == "k3"


def test_reservation_blocks_removal_until_released(manager: KeyringManager) -> None:
    with manager.reserve_active_key() as sealing_key:
        assert sealing_key == key("k1")
        assert manager.outstanding_reservations() == {"k1": 1}
        manager.rotate_active_key(key("k2", 2))
        with pytest.raises(KeyInUse) as caught:
            manager.remove_verification_key("k1")
        assert caught.value.reason is KeyringErrorReason.KEY_IN_USE
        assert caught.value.key_id == "k1"
        assert "k1" in manager.current()
    assert manager.outstanding_reservations() == {}
    assert manager.remove_verification_key("k1").verification_key_ids == ()


def test_reservation_counts_nest_and_release_on_error(manager: KeyringManager) -> None:
    outer = manager.reserve_active_key()
    seen: list[dict[str, int]] = []

    def seal_and_fail() -> None:
        with manager.reserve_active_key():
            seen.append(dict(manager.outstanding_reservations()))
            raise RuntimeError("boom")

    with outer:
        with pytest.raises(RuntimeError, match="boom"):
            seal_and_fail()
        assert seen == [{"k1": 2}]
        assert manager.outstanding_reservations() == {"k1": 1}
        assert outer.key == key("k1")
    assert manager.outstanding_reservations() == {}
    with pytest.raises(RuntimeError):
        outer.__enter__()
    with pytest.raises(RuntimeError):
        _ = outer.key


def test_reservation_hands_back_the_key_it_reserved_across_a_rotation(manager: KeyringManager) -> None:
    with manager.reserve_active_key() as sealing_key:
        manager.rotate_active_key(key("k2", 2))
        assert sealing_key.id == "k1"
        assert manager.current().active_key.id == "k2"


def test_reserved_key_is_the_active_one_at_entry(manager: KeyringManager) -> None:
    reservation = manager.reserve_active_key()
    manager.rotate_active_key(key("k2", 2))
    with reservation as sealing_key:
        assert sealing_key.id == "k2"


def test_concurrent_changes_keep_every_snapshot_consistent(manager: KeyringManager) -> None:
    keys = [key(f"c{index}", index + 2) for index in range(24)]
    errors: list[BaseException] = []
    snapshots: list[KeyringSnapshot] = []
    start = threading.Barrier(6)

    def writer(seed: int) -> None:
        chooser = random.Random(seed)
        start.wait()
        for _ in range(150):
            candidate = chooser.choice(keys)
            action = chooser.randrange(3)
            try:
                if action == 0:
                    snapshots.append(manager.stage_verification_key(candidate))
                elif action == 1:
                    snapshots.append(manager.activate_staged_key(candidate.id))
                else:
                    snapshots.append(manager.remove_verification_key(candidate.id))
            except KeyringError as refusal:
                if refusal.reason not in (KeyringErrorReason.UNKNOWN_KEY, KeyringErrorReason.ACTIVE_KEY_REMOVAL):
                    errors.append(refusal)
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)

    def reader() -> None:
        start.wait()
        for _ in range(600):
            keyring = manager.current()
            snapshot = manager.snapshot()
            try:
                assert_consistent(snapshot)
                assert KeyringSnapshot.of(keyring).fingerprint == keyring.fingerprint()
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for snapshot in snapshots:
        assert_consistent(snapshot)
    # Each real change bumped the generation exactly once: generations seen are unique per keyring state.
    by_generation: dict[int, KeyringSnapshot] = {}
    for snapshot in snapshots:
        assert by_generation.setdefault(snapshot.generation, snapshot) == snapshot
    final = manager.snapshot()
    assert final.generation == max(by_generation)
    assert final == KeyringSnapshot.of(manager.current(), manager.generation)


def test_concurrent_removal_and_reservations() -> None:
    manager = KeyringManager(ProtectionKeyring(key("old")))
    entered, release = threading.Event(), threading.Event()

    def sealer() -> None:
        with manager.reserve_active_key():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=sealer)
    thread.start()
    entered.wait(10)
    manager.rotate_active_key(key("new", 2))
    with pytest.raises(KeyInUse):
        manager.remove_verification_key("old")
    release.set()
    thread.join()
    assert manager.remove_verification_key("old").verification_key_ids == ()
    assert "old" not in manager.current()
