"""The single refusal type of the files layer and its bounded reasons."""

from __future__ import annotations

from soklet_core.errors import ErrorReason, SokletError


class KeyringFileErrorReason(ErrorReason):
    """Why a keyring file could not be read, was refused, or could not be written. The set is closed."""

    NOT_FOUND = "not-found", "no such file"
    NOT_A_FILE = "not-a-file", "not a regular file"
    UNREADABLE = "unreadable", "the file could not be read"
    INSECURE_PERMISSIONS = "insecure-permissions", "group or others may access the file; chmod 600 it"
    UNTRUSTED_OWNER = "untrusted-owner", "the file belongs to another user (only yours or root's are trusted)"
    UNTRUSTED_FOLDER = "untrusted-folder", "a folder on the path could be changed by another user"
    TOO_LARGE = "too-large", "the file is larger than soklet reads"
    INVALID_UTF8 = "invalid-utf8", "the file is not UTF-8 text"
    INVALID_TOML = "invalid-toml", "the file is not valid TOML"
    UNKNOWN_FORMAT = "unknown-format", 'format must be "soklet-keyring/1"'
    UNKNOWN_PROFILE = "unknown-profile", 'profile must be "soklet-mcp-protection-v1"'
    MISSING_FIELD = "missing-field", "a required field is missing"
    UNKNOWN_FIELD = "unknown-field", "the field is not part of the keyring format"
    INVALID_FIELD = "invalid-field", "the field has the wrong type"
    INVALID_KEY_ID = "invalid-key-id", "a key id must be 1 to 64 RFC 9110 token characters"
    MATERIAL_SHAPED_KEY_ID = (
        "key-id-looks-like-material",
        "a key id must not look like key material (ids are published in every sealed state's header)",
    )
    INVALID_ROLE = "invalid-role", 'role must be "active" or "verification"'
    INVALID_CREATED = (
        "invalid-created",
        "created and retired must be TOML offset date-times such as 2026-08-01T00:00:00Z",
    )
    MISSING_MATERIAL = (
        "missing-material",
        "a key needs one of material, material_file, material_env or wrapped_material",
    )
    CONFLICTING_MATERIAL_SOURCES = (
        "conflicting-material-sources",
        "a key takes only one of material, material_file, material_env or wrapped_material",
    )
    INVALID_BASE64 = "invalid-base64", "key material must be base64url text without padding"
    MATERIAL_TOO_SHORT = "material-too-short", "key material must be at least 32 bytes"
    MATERIAL_TOO_LONG = "material-too-long", "key material must be at most 1024 bytes"
    MATERIAL_FILE_NOT_FOUND = "material-file-not-found", "the referenced material file does not exist"
    MATERIAL_FILE_UNREADABLE = "material-file-unreadable", "the referenced material file could not be read"
    MATERIAL_FILE_INSECURE = (
        "material-file-insecure",
        "group or others may access the referenced material file; chmod 600 it",
    )
    MATERIAL_ENV_MISSING = "material-env-missing", "the referenced environment variable is not set"
    KEK_REQUIRED = (
        "kek-required",
        "the file holds wrapped keys: give the key-encryption key (--kek-file, --kek-env or --kek-command)",
    )
    WRONG_KEK = "wrong-kek", "the key was wrapped under another key-encryption key than the one given"
    UNWRAP_FAILED = (
        "unwrap-failed",
        "the wrapped key did not authenticate under the key-encryption key (tampered, or moved to another id)",
    )
    KEK_UNAVAILABLE = "kek-unavailable", "the key-encryption key could not be reached"
    DUPLICATE_KEY_ID = "duplicate-key-id", "two keys share this id"
    NO_ACTIVE_KEY = "no-active-key", 'no key has role = "active"; exactly one must'
    MULTIPLE_ACTIVE_KEYS = "multiple-active-keys", 'more than one key has role = "active"; exactly one must'
    LOCK_FAILED = "lock-failed", "the lock file could not be opened or locked"
    WRITE_FAILED = "write-failed", "the file could not be written"
    ALREADY_EXISTS = "already-exists", "the file already exists; soklet does not overwrite it unless told to"

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


class KeyringFileError(SokletError):
    """A keyring file that could not be read, was refused, or could not be written.

    ``reason`` is one of a closed set; ``path`` is the file concerned; ``key`` names the key (its id when
    that id is valid, else its position such as ``keys[2]``) and ``field`` the field, when the problem is
    about one;
    ``detail`` is fixed text or a position (``line 3, column 7``), never file content. The message is built
    only from these, so it never carries key material.
    """

    __slots__ = ("detail", "field", "key", "path")

    reason: KeyringFileErrorReason

    def __init__(
        self,
        reason: KeyringFileErrorReason,
        *,
        path: str | None = None,
        key: str | None = None,
        field: str | None = None,
        detail: str | None = None,
    ) -> None:
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
        super().__init__(reason, f"{prefix}{reason.value}{subject}: {reason.description}{extra}")
