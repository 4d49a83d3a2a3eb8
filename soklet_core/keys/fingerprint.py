"""Keyring fingerprints: a secret-free digest that instances compare to prove they hold the same keys.

v2 (current) digests the profile, the active id and check value, and every verification id and check value in
id order, so it changes when any byte of any key changes. v1 (legacy) digests ids only and can call two
keyrings equal whose keys cannot open each other's state; it exists so that incomparability is real. Fields
are encoded as a 4-byte big-endian length followed by the field's bytes; see docs/keys.md.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from .base64url import decode_base64url, encode_base64url
from .errors import KeyringError, KeyringErrorReason
from .key import ProtectionKey
from .profile import PROTECTION_PROFILE

__all__ = [
    "CURRENT_FINGERPRINT_VERSION",
    "FINGERPRINT_VERSIONS",
    "Fingerprint",
    "FingerprintComparison",
    "compare",
]

#: The version that snapshots carry and that fleet convergence relies on.
CURRENT_FINGERPRINT_VERSION: Final = 2
#: Every version this implementation can compute.
FINGERPRINT_VERSIONS: Final = (1, 2)


class FingerprintComparison(enum.Enum):
    """The answer of comparing two fingerprints."""

    #: Same version, profile and value: the keyrings hold the same keys (v2: the same bytes).
    EQUAL = "equal"
    #: Same version, but the profile or value differs.
    DIFFERENT = "different"
    #: Different versions: nothing can be concluded, and the fingerprints are never equal.
    INCOMPARABLE = "incomparable"


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """A keyring fingerprint: ``version``, ``profile`` and ``value`` (base64url SHA-256, 43 characters).

    Use :meth:`compare` (or :func:`compare`) rather than ``==`` when versions may differ: equality is plain
    field equality, while ``compare`` says whether a mismatch means anything.
    """

    version: int
    profile: str
    value: str

    @classmethod
    def from_json(cls, document: Mapping[str, object]) -> Fingerprint:
        """Read ``{"version": 2, "profile": "...", "value": "..."}`` as reported by another instance.

        Raises ``KeyringError`` (``invalid-fingerprint``) unless version is a positive int, profile a
        non-empty string and value a base64url SHA-256 digest. Unknown versions are accepted: they compare
        incomparable.
        """
        version, profile, value = document.get("version"), document.get("profile"), document.get("value")
        if type(version) is not int or version < 1 or not isinstance(profile, str) or not profile:
            raise KeyringError(KeyringErrorReason.INVALID_FINGERPRINT)
        if not isinstance(value, str):
            raise KeyringError(KeyringErrorReason.INVALID_FINGERPRINT)
        try:
            digest = decode_base64url(value)
        except ValueError:
            raise KeyringError(KeyringErrorReason.INVALID_FINGERPRINT) from None
        if len(digest) != hashlib.sha256().digest_size:
            raise KeyringError(KeyringErrorReason.INVALID_FINGERPRINT)
        return cls(version, profile, value)

    def to_json(self) -> dict[str, object]:
        """``{"version": ..., "profile": ..., "value": ...}``."""
        return {"version": self.version, "profile": self.profile, "value": self.value}

    def compare(self, other: Fingerprint) -> FingerprintComparison:
        """EQUAL iff version, profile and value are all equal; different versions are INCOMPARABLE."""
        return compare(self, other)

    def __str__(self) -> str:
        return f"v{self.version}:{self.profile}:{self.value}"


def compare(first: Fingerprint, second: Fingerprint) -> FingerprintComparison:
    """Compare two fingerprints: EQUAL, DIFFERENT (same version), or INCOMPARABLE (different versions)."""
    if first.version != second.version:
        return FingerprintComparison.INCOMPARABLE
    if first.profile == second.profile and first.value == second.value:
        return FingerprintComparison.EQUAL
    return FingerprintComparison.DIFFERENT


def fingerprint_of_keys(
    active: ProtectionKey, verification: Sequence[ProtectionKey], version: int = CURRENT_FINGERPRINT_VERSION
) -> Fingerprint:
    """The fingerprint of a keyring's ``active`` key and ``verification`` keys (in id order), in encoding
    ``version`` (1 or 2).

    What :meth:`ProtectionKeyring.fingerprint <soklet_core.keys.ProtectionKeyring.fingerprint>` returns; ask the
    keyring, which passes its keys in the order the encoding needs.
    """
    if version == 2:
        fields = [PROTECTION_PROFILE.encode(), active.id.encode(), active.check_value]
        for key in verification:
            fields += [key.id.encode(), key.check_value]
    elif version == 1:
        fields = [PROTECTION_PROFILE.encode(), active.id.encode()]
        fields += [key.id.encode() for key in verification]
    else:
        raise ValueError(f"unknown fingerprint version {version}; known: {FINGERPRINT_VERSIONS}")
    return Fingerprint(version, PROTECTION_PROFILE, encode_base64url(_digest(fields)))


def _digest(fields: Iterable[bytes]) -> bytes:
    hasher = hashlib.sha256()
    for field in fields:
        # A length before each field makes the encoding injective: no two field lists hash the same bytes.
        hasher.update(len(field).to_bytes(4, "big"))
        hasher.update(field)
    return hasher.digest()
