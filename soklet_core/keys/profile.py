"""The protection profile: the name of the scheme that every soklet key and fingerprint belongs to."""

from typing import Final

#: The protection profile this implementation seals under; fingerprints and keyring files carry it.
PROTECTION_PROFILE: Final = "soklet-mcp-protection-v1"
