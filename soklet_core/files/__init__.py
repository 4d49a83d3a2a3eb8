"""Keyring files: the TOML format, strict parsing, atomic 0600 writes, advisory locking, permission checks.

This layer sits beside ``soklet_core.keys`` and builds on it: a file becomes a ``KeyringDocument`` and
``document.keyring()`` the ``ProtectionKeyring`` a server loads.

>>> from soklet_core.files import read_keyring_file           # doctest: +SKIP
>>> keyring = read_keyring_file("soklet-keyring.toml").keyring()   # doctest: +SKIP
"""

from .atomic import (
    MAX_TEMP_SCAN_ENTRIES,
    STALE_TEMP_SECONDS,
    TEMP_PREFIX,
    TEMP_SUFFIX,
    atomic_write,
    is_temp_name,
    remove_stale_temp_files,
)
from .document import (
    InlineMaterial,
    KeyEntry,
    KeyringDocument,
    KeyRole,
    MaterialEnv,
    MaterialFile,
    MaterialSource,
    check_removal,
    utc_now,
)
from .errors import KeyringFileError, KeyringFileErrorReason
from .fleet_file import (
    DEFAULT_FLEET_TIMEOUT_SECONDS,
    MAX_ENV_NAME_CHARS,
    MAX_FLEET_FILE_BYTES,
    MAX_FLEET_INSTANCES,
    MAX_FLEET_TIMEOUT_SECONDS,
    MAX_INSTANCE_NAME_CHARS,
    MAX_INSTANCE_URL_CHARS,
    AdminTokenEnv,
    AdminTokenFile,
    AdminTokenSource,
    FleetFile,
    FleetFileError,
    FleetInstance,
    check_admin_url,
    check_instance_name,
    io_problem,
    is_environment_name,
    parse_fleet_file,
    read_fleet_file,
)
from .git_ignore import GIT_CHECK_TIMEOUT_SECONDS, MAX_WORK_TREE_DEPTH, UnignoredSecret, unignored_secret
from .keyring_file import (
    KEYRING_FILE_MODE,
    KeyringUpdate,
    file_written_at,
    read_keyring_file,
    update_keyring_file,
    write_keyring_file,
)
from .keyring_format import (
    KEYRING_FORMAT,
    MAX_KEYRING_FILE_BYTES,
    MAX_MATERIAL_FILE_BYTES,
    parse_keyring_document,
    render_keyring_document,
)
from .lock import LOCK_SUFFIX, file_lock, lock_path_for
from .regular_file import describe_file_type, read_regular_file
from .secret_file import check_folders, is_mode_secure, is_trusted_owner, read_secret_file
from .signature import MAX_SIGNED_FILE_BYTES, FileSignature, file_signature

__all__ = [
    "DEFAULT_FLEET_TIMEOUT_SECONDS",
    "GIT_CHECK_TIMEOUT_SECONDS",
    "KEYRING_FILE_MODE",
    "KEYRING_FORMAT",
    "LOCK_SUFFIX",
    "MAX_ENV_NAME_CHARS",
    "MAX_FLEET_FILE_BYTES",
    "MAX_FLEET_INSTANCES",
    "MAX_FLEET_TIMEOUT_SECONDS",
    "MAX_INSTANCE_NAME_CHARS",
    "MAX_INSTANCE_URL_CHARS",
    "MAX_KEYRING_FILE_BYTES",
    "MAX_MATERIAL_FILE_BYTES",
    "MAX_SIGNED_FILE_BYTES",
    "MAX_TEMP_SCAN_ENTRIES",
    "MAX_WORK_TREE_DEPTH",
    "STALE_TEMP_SECONDS",
    "TEMP_PREFIX",
    "TEMP_SUFFIX",
    "AdminTokenEnv",
    "AdminTokenFile",
    "AdminTokenSource",
    "FileSignature",
    "FleetFile",
    "FleetFileError",
    "FleetInstance",
    "InlineMaterial",
    "KeyEntry",
    "KeyRole",
    "KeyringDocument",
    "KeyringFileError",
    "KeyringFileErrorReason",
    "KeyringUpdate",
    "MaterialEnv",
    "MaterialFile",
    "MaterialSource",
    "UnignoredSecret",
    "atomic_write",
    "check_admin_url",
    "check_folders",
    "check_instance_name",
    "check_removal",
    "describe_file_type",
    "file_lock",
    "file_signature",
    "file_written_at",
    "io_problem",
    "is_environment_name",
    "is_mode_secure",
    "is_temp_name",
    "is_trusted_owner",
    "lock_path_for",
    "parse_fleet_file",
    "parse_keyring_document",
    "read_fleet_file",
    "read_keyring_file",
    "read_regular_file",
    "read_secret_file",
    "remove_stale_temp_files",
    "render_keyring_document",
    "unignored_secret",
    "update_keyring_file",
    "utc_now",
    "write_keyring_file",
]
