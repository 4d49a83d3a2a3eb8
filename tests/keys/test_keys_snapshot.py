"""KeyringSnapshot: every field, and no secret in any rendering of it."""

from __future__ import annotations

import base64

from soklet_core.keys import PROTECTION_PROFILE, KeyringManager, KeyringSnapshot, ProtectionKey, ProtectionKeyring


def test_snapshot_fields_and_no_secret() -> None:
    active = ProtectionKey.generate("k2")
    old = ProtectionKey.generate("k1")
    manager = KeyringManager(ProtectionKeyring(old))
    manager.rotate_active_key(active)
    snapshot = manager.snapshot()
    assert snapshot.profile == PROTECTION_PROFILE
    assert (snapshot.generation, snapshot.active_key_id, snapshot.verification_key_ids) == (1, "k2", ("k1",))
    assert snapshot.check_value("k2") == active.check_value_text
    assert snapshot.check_value("k1") == old.check_value_text
    assert snapshot.check_value("zz") is None
    assert snapshot.check_values[0].short == active.check_value_text[:8]
    assert snapshot.fingerprint == manager.current().fingerprint()
    document = snapshot.to_json()
    assert document == {
        "profile": PROTECTION_PROFILE,
        "generation": 1,
        "active": "k2",
        "verification": ["k1"],
        "check_values": {"k2": active.check_value_text, "k1": old.check_value_text},
        "fingerprint": snapshot.fingerprint.to_json(),
    }
    rendered = repr(snapshot) + str(document)
    for key in (active, old):
        assert key.material.hex() not in rendered
        assert base64.urlsafe_b64encode(key.material).rstrip(b"=").decode() not in rendered
    assert KeyringSnapshot.of(manager.current(), 1) == snapshot
    assert hash(snapshot) == hash(KeyringSnapshot.of(manager.current(), 1))
