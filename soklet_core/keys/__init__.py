"""Protection keys, keyrings, the live keyring manager, secret-free snapshots and fingerprints.

>>> from soklet_core.keys import KeyringManager, ProtectionKey, ProtectionKeyring
>>> manager = KeyringManager(ProtectionKeyring(ProtectionKey.generate("2026-08")))
>>> manager.rotate_active_key(ProtectionKey.generate("2026-09")).active_key_id
'2026-09'
>>> manager.current().verification_keys[0].id
'2026-08'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soklet_core.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .base64url import decode_base64url, encode_base64url
    from .errors import KeyInUse, KeyringError, KeyringErrorReason, RetiredTooRecently
    from .fingerprint import (
        CURRENT_FINGERPRINT_VERSION,
        FINGERPRINT_VERSIONS,
        Fingerprint,
        FingerprintComparison,
        compare,
    )
    from .key import (
        CHECK_VALUE_LABEL,
        DEFAULT_KEY_MATERIAL_BYTES,
        GENERATED_ID_SUFFIX_CHARS,
        MAX_KEY_ID_BYTES,
        MAX_KEY_MATERIAL_BYTES,
        MIN_KEY_MATERIAL_BYTES,
        ProtectionKey,
        check_key_id,
        is_valid_key_id,
        key_id_problem,
        new_key_id,
    )
    from .keyring import ProtectionKeyring
    from .manager import KeyringManager, SealingReservation
    from .material_shape import (
        MATERIAL_HEX_RUN_CHARS,
        MATERIAL_LONG_RUN_CHARS,
        MATERIAL_RUN_CHARS,
        looks_like_key_material,
        printable_name,
    )
    from .profile import PROTECTION_PROFILE
    from .snapshot import KeyCheckValue, KeyringSnapshot
    from .wrapping import KEK_BYTES, KeyWrapError, KeyWrapErrorReason, KeyWrapper, LocalKek, WrappedKey

__all__ = [
    "CHECK_VALUE_LABEL",
    "CURRENT_FINGERPRINT_VERSION",
    "DEFAULT_KEY_MATERIAL_BYTES",
    "FINGERPRINT_VERSIONS",
    "GENERATED_ID_SUFFIX_CHARS",
    "KEK_BYTES",
    "MATERIAL_HEX_RUN_CHARS",
    "MATERIAL_LONG_RUN_CHARS",
    "MATERIAL_RUN_CHARS",
    "MAX_KEY_ID_BYTES",
    "MAX_KEY_MATERIAL_BYTES",
    "MIN_KEY_MATERIAL_BYTES",
    "PROTECTION_PROFILE",
    "Fingerprint",
    "FingerprintComparison",
    "KeyCheckValue",
    "KeyInUse",
    "KeyWrapError",
    "KeyWrapErrorReason",
    "KeyWrapper",
    "KeyringError",
    "KeyringErrorReason",
    "KeyringManager",
    "KeyringSnapshot",
    "LocalKek",
    "ProtectionKey",
    "ProtectionKeyring",
    "RetiredTooRecently",
    "SealingReservation",
    "WrappedKey",
    "check_key_id",
    "compare",
    "decode_base64url",
    "encode_base64url",
    "is_valid_key_id",
    "key_id_problem",
    "looks_like_key_material",
    "new_key_id",
    "printable_name",
]

# Each name is imported from its module on first use (PEP 562), so that importing one module of this package (or a
# command that needs one name) does not load the whole package and what it builds on.
_EXPORTS: dict[str, str] = {
    "decode_base64url": ".base64url",
    "encode_base64url": ".base64url",
    "KeyInUse": ".errors",
    "KeyringError": ".errors",
    "KeyringErrorReason": ".errors",
    "RetiredTooRecently": ".errors",
    "CURRENT_FINGERPRINT_VERSION": ".fingerprint",
    "FINGERPRINT_VERSIONS": ".fingerprint",
    "Fingerprint": ".fingerprint",
    "FingerprintComparison": ".fingerprint",
    "compare": ".fingerprint",
    "CHECK_VALUE_LABEL": ".key",
    "DEFAULT_KEY_MATERIAL_BYTES": ".key",
    "GENERATED_ID_SUFFIX_CHARS": ".key",
    "MAX_KEY_ID_BYTES": ".key",
    "MAX_KEY_MATERIAL_BYTES": ".key",
    "MIN_KEY_MATERIAL_BYTES": ".key",
    "ProtectionKey": ".key",
    "check_key_id": ".key",
    "is_valid_key_id": ".key",
    "key_id_problem": ".key",
    "new_key_id": ".key",
    "ProtectionKeyring": ".keyring",
    "KeyringManager": ".manager",
    "SealingReservation": ".manager",
    "MATERIAL_HEX_RUN_CHARS": ".material_shape",
    "MATERIAL_LONG_RUN_CHARS": ".material_shape",
    "MATERIAL_RUN_CHARS": ".material_shape",
    "looks_like_key_material": ".material_shape",
    "printable_name": ".material_shape",
    "PROTECTION_PROFILE": ".profile",
    "KeyCheckValue": ".snapshot",
    "KeyringSnapshot": ".snapshot",
    "KEK_BYTES": ".wrapping",
    "KeyWrapError": ".wrapping",
    "KeyWrapErrorReason": ".wrapping",
    "KeyWrapper": ".wrapping",
    "LocalKek": ".wrapping",
    "WrappedKey": ".wrapping",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
