"""``ProtectionKey``: an id and 32 to 1,024 bytes of secret material, redacted wherever it could show."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Final, NoReturn

from .base64url import encode_base64url
from .errors import KeyringError, KeyringErrorReason
from .material_shape import looks_like_key_material

__all__ = [
    "CHECK_VALUE_LABEL",
    "DEFAULT_KEY_MATERIAL_BYTES",
    "GENERATED_ID_SUFFIX_CHARS",
    "MAX_KEY_ID_BYTES",
    "MAX_KEY_MATERIAL_BYTES",
    "MIN_KEY_MATERIAL_BYTES",
    "ProtectionKey",
    "check_key_id",
    "is_valid_key_id",
    "key_id_problem",
    "new_key_id",
]

#: A key id is 1 to this many bytes of RFC 9110 token characters.
MAX_KEY_ID_BYTES: Final = 64
#: Key material must be at least this many bytes from a CSPRNG.
MIN_KEY_MATERIAL_BYTES: Final = 32
#: Key material may be at most this many bytes (8,192 bits, far beyond any security need): a keyring file of
#: such keys stays small enough for every reader, and ``--bytes`` cannot make a file soklet refuses to read.
MAX_KEY_MATERIAL_BYTES: Final = 1024
#: What ``ProtectionKey.generate`` draws when no size is given.
DEFAULT_KEY_MATERIAL_BYTES: Final = 32
#: The HMAC message of a per-key check value: HMAC-SHA256(material, CHECK_VALUE_LABEL).
CHECK_VALUE_LABEL: Final = b"soklet key check value v2"

# RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_"
#                          / "`" / "|" / "~" / DIGIT / ALPHA
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1," + str(MAX_KEY_ID_BYTES) + "}")


def is_valid_key_id(key_id: object) -> bool:
    """Whether ``key_id`` is a str of 1 to 64 RFC 9110 token characters (ASCII: one byte each)."""
    return isinstance(key_id, str) and _TOKEN.fullmatch(key_id) is not None


def key_id_problem(key_id: object) -> KeyringErrorReason | None:
    """Why ``key_id`` cannot name a key, or ``None`` when it can: the one rule every entry applies (the
    ``ProtectionKey`` constructor, the keyring file parser, the admin API, the CLI).

    ``invalid-key-id``: not 1 to 64 RFC 9110 token characters. ``key-id-looks-like-material``: a valid token
    that :func:`~soklet_core.keys.looks_like_key_material` judges a pasted secret; an id is published in every
    sealed state's header, in snapshots and in logs, so such an id would publish the secret.
    """
    if not is_valid_key_id(key_id):
        return KeyringErrorReason.INVALID_KEY_ID
    assert isinstance(key_id, str)
    if looks_like_key_material(key_id):
        return KeyringErrorReason.MATERIAL_SHAPED_KEY_ID
    return None


def check_key_id(key_id: object) -> str:
    """``key_id`` itself when it can name a key; else ``KeyringError`` with :func:`key_id_problem`'s reason and
    without the id (it may be a pasted secret)."""
    problem = key_id_problem(key_id)
    if problem is not None:
        raise KeyringError(problem)
    assert isinstance(key_id, str)
    return key_id


#: The random part of a generated key id: this many characters of ``_SUFFIX_ALPHABET`` (32**5, about 33
#: million, per second of the clock).
GENERATED_ID_SUFFIX_CHARS: Final = 5
# Lowercase letters and digits without the look-alikes 0/o and 1/l: a run this short never looks like material.
_SUFFIX_ALPHABET: Final = "23456789abcdefghijkmnpqrstuvwxyz"


def new_key_id(taken: Iterable[str] = (), *, now: datetime | None = None) -> str:
    """A fresh key id for a generated key: the UTC date and time to the second and a random suffix, such as
    ``2026-09-01.120000.k3f9x``.

    A generated id must not repeat one used a moment ago (a key removed minutes earlier, on this instance or
    another): state sealed under the old key would then meet other material under the same id. The time to the
    second and a random suffix make a repeat practically impossible; ``taken`` (ids in the keyring) is avoided
    outright. The id sorts by creation time, is a valid token, and never looks like key material.
    """
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    stem = moment.strftime("%Y-%m-%d.%H%M%S")
    avoid = set(taken)
    while True:
        suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(GENERATED_ID_SUFFIX_CHARS))
        candidate = f"{stem}.{suffix}"
        if candidate not in avoid and key_id_problem(candidate) is None:
            return candidate


class ProtectionKey:
    """One protection key: a non-secret id and secret material.

    ``ProtectionKey(key_id, material)`` (or :meth:`generate`). The material is copied on the way in, never
    appears in ``repr``/``str``/pickles/exceptions, and is compared in constant time. Equality is id and
    material; the hash is the id's, so equal keys hash alike. Instances are immutable.

    >>> ProtectionKey("2026-08", bytes(32))
    ProtectionKey(id='2026-08', material=<redacted 32 bytes>)
    """

    __slots__ = ("_check_value", "_id", "_material")

    _id: str
    _material: bytes
    _check_value: bytes

    def __init__(self, key_id: str, material: bytes | bytearray | memoryview) -> None:
        """A key with id ``key_id`` and a private copy of ``material``.

        Raises ``KeyringError`` (``invalid-key-id``, ``key-id-looks-like-material``, ``material-too-short`` or
        ``material-too-long``) and ``TypeError`` for a non-bytes material. The caller may wipe its own buffer
        afterwards: the key holds a copy.
        """
        check_key_id(key_id)
        if not isinstance(material, bytes | bytearray | memoryview):
            raise TypeError("key material must be bytes, bytearray or memoryview")
        copied = bytes(material)
        if len(copied) < MIN_KEY_MATERIAL_BYTES:
            raise KeyringError(KeyringErrorReason.MATERIAL_TOO_SHORT, key_id)
        if len(copied) > MAX_KEY_MATERIAL_BYTES:
            raise KeyringError(KeyringErrorReason.MATERIAL_TOO_LONG, key_id)
        # The class refuses attribute assignment (immutability), so the constructor sets its slots underneath.
        object.__setattr__(self, "_id", key_id)
        object.__setattr__(self, "_material", copied)
        # Computed once: snapshots and fingerprints ask for it often; it is a one-way function of the secret.
        object.__setattr__(self, "_check_value", hmac.new(copied, CHECK_VALUE_LABEL, hashlib.sha256).digest())

    @classmethod
    def from_id_and_bytes(cls, key_id: str, material: bytes | bytearray | memoryview) -> ProtectionKey:
        """``ProtectionKey(key_id, material)`` under the name the spec gives the factory."""
        return cls(key_id, material)

    @classmethod
    def generate(cls, key_id: str, size: int = DEFAULT_KEY_MATERIAL_BYTES) -> ProtectionKey:
        """A new key with ``size`` bytes (32 to 1,024) from the operating system's CSPRNG."""
        check_key_id(key_id)
        if size < MIN_KEY_MATERIAL_BYTES:
            raise KeyringError(KeyringErrorReason.MATERIAL_TOO_SHORT, key_id)
        if size > MAX_KEY_MATERIAL_BYTES:
            raise KeyringError(KeyringErrorReason.MATERIAL_TOO_LONG, key_id)
        return cls(key_id, secrets.token_bytes(size))

    @property
    def id(self) -> str:
        """The key id: non-secret, written in sealed state headers, snapshots and fingerprints."""
        return self._id

    @property
    def material(self) -> bytes:
        """The secret material. Only sealing, opening and an explicit export may read it; never log it."""
        return self._material

    @property
    def size(self) -> int:
        """The material's length in bytes (not secret)."""
        return len(self._material)

    @property
    def check_value(self) -> bytes:
        """HMAC-SHA256(material, ``b"soklet key check value v2"``): a one-way, domain-separated digest."""
        return self._check_value

    @property
    def check_value_text(self) -> str:
        """The check value as base64url without padding (43 characters)."""
        return encode_base64url(self._check_value)

    def same_material(self, other: ProtectionKey) -> bool:
        """Whether ``other`` holds the same material, compared in constant time (ids are not compared)."""
        return hmac.compare_digest(self._material, other._material)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProtectionKey):
            return NotImplemented
        return self._id == other._id and hmac.compare_digest(self._material, other._material)

    def __hash__(self) -> int:
        return hash((ProtectionKey, self._id))

    def __repr__(self) -> str:
        return f"ProtectionKey(id={self._id!r}, material=<redacted {len(self._material)} bytes>)"

    __str__ = __repr__

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("ProtectionKey is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("ProtectionKey is immutable")

    def __copy__(self) -> ProtectionKey:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> ProtectionKey:
        return self

    def __reduce__(self) -> NoReturn:
        # A pickle would carry the material into files, caches and queues without anyone asking to export it.
        raise TypeError("ProtectionKey cannot be pickled: export its material explicitly if you must")

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError("ProtectionKey cannot be pickled: export its material explicitly if you must")
