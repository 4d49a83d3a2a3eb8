"""The single refusal type of the files layer and its bounded reasons."""

from __future__ import annotations

import enum
from typing import Any


class KeyringFileErrorReason(enum.Enum):
    """Why a keyring file could not be read, was refused, or could not be written. The set is closed."""

    NOT_FOUND = "not-found"
    NOT_A_FILE = "not-a-file"
    UNREADABLE = "unreadable"
    INSECURE_PERMISSIONS = "insecure-permissions"
    UNTRUSTED_OWNER = "untrusted-owner"
    UNTRUSTED_FOLDER = "untrusted-folder"
    TOO_LARGE = "too-large"
    INVALID_UTF8 = "invalid-utf8"
    INVALID_TOML = "invalid-toml"
    UNKNOWN_FORMAT = "unknown-format"
    UNKNOWN_PROFILE = "unknown-profile"
    MISSING_FIELD = "missing-field"
    UNKNOWN_FIELD = "unknown-field"
    INVALID_FIELD = "invalid-field"
    INVALID_KEY_ID = "invalid-key-id"
    INVALID_ROLE = "invalid-role"
    INVALID_CREATED = "invalid-created"
    MISSING_MATERIAL = "missing-material"
    CONFLICTING_MATERIAL_SOURCES = "conflicting-material-sources"
    INVALID_BASE64 = "invalid-base64"
    MATERIAL_TOO_SHORT = "material-too-short"
    MATERIAL_TOO_LONG = "material-too-long"
    MATERIAL_FILE_NOT_FOUND = "material-file-not-found"
    MATERIAL_FILE_UNREADABLE = "material-file-unreadable"
    MATERIAL_FILE_INSECURE = "material-file-insecure"
    MATERIAL_ENV_MISSING = "material-env-missing"
    DUPLICATE_KEY_ID = "duplicate-key-id"
    NO_ACTIVE_KEY = "no-active-key"
    MULTIPLE_ACTIVE_KEYS = "multiple-active-keys"
    LOCK_FAILED = "lock-failed"
    WRITE_FAILED = "write-failed"
    ALREADY_EXISTS = "already-exists"

    @property
    def description(self) -> str:
        """A fixed, human sentence for the reason; never contains key material or file content."""
        return _DESCRIPTIONS[self]

    @property
    def is_io(self) -> bool:
        """True for file-system problems (not found, permissions, lock, write); False for content."""
        return self in _IO_REASONS


_R = KeyringFileErrorReason

_IO_REASONS: frozenset[KeyringFileErrorReason] = frozenset(
    {
        _R.NOT_FOUND,
        _R.NOT_A_FILE,
        _R.UNREADABLE,
        _R.INSECURE_PERMISSIONS,
        _R.UNTRUSTED_OWNER,
        _R.UNTRUSTED_FOLDER,
        _R.MATERIAL_FILE_NOT_FOUND,
        _R.MATERIAL_FILE_UNREADABLE,
        _R.MATERIAL_FILE_INSECURE,
        _R.LOCK_FAILED,
        _R.WRITE_FAILED,
        _R.ALREADY_EXISTS,
    }
)

_DESCRIPTIONS: dict[KeyringFileErrorReason, str] = {
    _R.NOT_FOUND: "no such file",
    _R.NOT_A_FILE: "not a regular file",
    _R.UNREADABLE: "the file could not be read",
    _R.INSECURE_PERMISSIONS: "group or others may access the file; chmod 600 it",
    _R.UNTRUSTED_OWNER: "the file belongs to another user (only yours or root's are trusted)",
    _R.UNTRUSTED_FOLDER: "a folder on the path could be changed by another user",
    _R.TOO_LARGE: "the file is larger than soklet reads",
    _R.INVALID_UTF8: "the file is not UTF-8 text",
    _R.INVALID_TOML: "the file is not valid TOML",
    _R.UNKNOWN_FORMAT: 'format must be "soklet-keyring/1"',
    _R.UNKNOWN_PROFILE: 'profile must be "soklet-mcp-protection-v1"',
    _R.MISSING_FIELD: "a required field is missing",
    _R.UNKNOWN_FIELD: "the field is not part of the keyring format",
    _R.INVALID_FIELD: "the field has the wrong type",
    _R.INVALID_KEY_ID: "a key id must be 1 to 64 RFC 9110 token characters",
    _R.INVALID_ROLE: 'role must be "active" or "verification"',
    _R.INVALID_CREATED: "created must be a TOML offset date-time such as 2026-08-01T00:00:00Z",
    _R.MISSING_MATERIAL: "a key needs one of material, material_file or material_env",
    _R.CONFLICTING_MATERIAL_SOURCES: "a key takes only one of material, material_file or material_env",
    _R.INVALID_BASE64: "key material must be base64url text without padding",
    _R.MATERIAL_TOO_SHORT: "key material must be at least 32 bytes",
    _R.MATERIAL_TOO_LONG: "key material must be at most 1024 bytes",
    _R.MATERIAL_FILE_NOT_FOUND: "the referenced material file does not exist",
    _R.MATERIAL_FILE_UNREADABLE: "the referenced material file could not be read",
    _R.MATERIAL_FILE_INSECURE: "group or others may access the referenced material file; chmod 600 it",
    _R.MATERIAL_ENV_MISSING: "the referenced environment variable is not set",
    _R.DUPLICATE_KEY_ID: "two keys share this id",
    _R.NO_ACTIVE_KEY: 'no key has role = "active"; exactly one must',
    _R.MULTIPLE_ACTIVE_KEYS: 'more than one key has role = "active"; exactly one must',
    _R.LOCK_FAILED: "the lock file could not be opened or locked",
    _R.WRITE_FAILED: "the file could not be written",
    _R.ALREADY_EXISTS: "the file already exists; soklet does not overwrite it unless told to",
}


class KeyringFileError(Exception):
    """A keyring file that could not be read, was refused, or could not be written.

    ``reason`` is one of a closed set; ``path`` is the file concerned; ``key`` names the key (its id when
    that id is valid, else its position such as ``keys[2]``) and ``field`` the field, when the problem is
    about one;
    ``detail`` is fixed text or a position (``line 3, column 7``), never file content. The message is built
    only from these, so it never carries key material.
    """

    __slots__ = ("detail", "field", "key", "path", "reason")

    def __init__(
        self,
        reason: KeyringFileErrorReason,
        *,
        path: str | None = None,
        key: str | None = None,
        field: str | None = None,
        detail: str | None = None,
    ) -> None:
        self.reason = reason
        self.path = path
        self.key = key
        self.field = field
        self.detail = detail
        where = []
        if key is not None:
            where.append(f"key {key}")
        if field is not None:
            where.append(f"field {field!r}")
        subject = f" ({', '.join(where)})" if where else ""
        extra = f" ({detail})" if detail else ""
        prefix = f"{path}: " if path is not None else ""
        super().__init__(f"{prefix}{reason.value}{subject}: {reason.description}{extra}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Keyword-only arguments defeat the default exception pickling, which multiprocessing relies on.
        return (_rebuild, (self.reason, self.path, self.key, self.field, self.detail))


def _rebuild(
    reason: KeyringFileErrorReason, path: str | None, key: str | None, field: str | None, detail: str | None
) -> KeyringFileError:
    return KeyringFileError(reason, path=path, key=key, field=field, detail=detail)
