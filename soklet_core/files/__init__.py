"""Keyring files: the TOML format, strict parsing, atomic 0600 writes, advisory locking, permission checks.

This layer sits beside ``soklet_core.keys`` and builds on it: a file becomes a ``KeyringDocument`` and
``document.keyring()`` the ``ProtectionKeyring`` a server loads.

>>> from soklet_core.files import read_keyring_file           # doctest: +SKIP
>>> keyring = read_keyring_file("soklet-keyring.toml").keyring()   # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
        WrappedMaterial,
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
    from .kek_source import (
        KEK_FILE_MODE,
        MAX_KEK_COMMAND_CHARS,
        MAX_KEK_COMMAND_WORDS,
        MAX_KEK_FILE_BYTES,
        MAX_KEK_TEXT_CHARS,
        KekSource,
        load_kek,
        write_kek_file,
    )
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
    "KEK_FILE_MODE",
    "KEYRING_FILE_MODE",
    "KEYRING_FORMAT",
    "LOCK_SUFFIX",
    "MAX_ENV_NAME_CHARS",
    "MAX_FLEET_FILE_BYTES",
    "MAX_FLEET_INSTANCES",
    "MAX_FLEET_TIMEOUT_SECONDS",
    "MAX_INSTANCE_NAME_CHARS",
    "MAX_INSTANCE_URL_CHARS",
    "MAX_KEK_COMMAND_CHARS",
    "MAX_KEK_COMMAND_WORDS",
    "MAX_KEK_FILE_BYTES",
    "MAX_KEK_TEXT_CHARS",
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
    "KekSource",
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
    "WrappedMaterial",
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
    "load_kek",
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
    "write_kek_file",
    "write_keyring_file",
]

# Each name is imported from its module on first use (PEP 562), so that importing one module of this package (or a
# command that needs one name) does not load the whole package and what it builds on.
_EXPORTS: dict[str, str] = {
    "MAX_TEMP_SCAN_ENTRIES": ".atomic",
    "STALE_TEMP_SECONDS": ".atomic",
    "TEMP_PREFIX": ".atomic",
    "TEMP_SUFFIX": ".atomic",
    "atomic_write": ".atomic",
    "is_temp_name": ".atomic",
    "remove_stale_temp_files": ".atomic",
    "InlineMaterial": ".document",
    "KeyEntry": ".document",
    "KeyringDocument": ".document",
    "KeyRole": ".document",
    "MaterialEnv": ".document",
    "MaterialFile": ".document",
    "MaterialSource": ".document",
    "WrappedMaterial": ".document",
    "check_removal": ".document",
    "utc_now": ".document",
    "KeyringFileError": ".errors",
    "KeyringFileErrorReason": ".errors",
    "DEFAULT_FLEET_TIMEOUT_SECONDS": ".fleet_file",
    "MAX_ENV_NAME_CHARS": ".fleet_file",
    "MAX_FLEET_FILE_BYTES": ".fleet_file",
    "MAX_FLEET_INSTANCES": ".fleet_file",
    "MAX_FLEET_TIMEOUT_SECONDS": ".fleet_file",
    "MAX_INSTANCE_NAME_CHARS": ".fleet_file",
    "MAX_INSTANCE_URL_CHARS": ".fleet_file",
    "AdminTokenEnv": ".fleet_file",
    "AdminTokenFile": ".fleet_file",
    "AdminTokenSource": ".fleet_file",
    "FleetFile": ".fleet_file",
    "FleetFileError": ".fleet_file",
    "FleetInstance": ".fleet_file",
    "check_admin_url": ".fleet_file",
    "check_instance_name": ".fleet_file",
    "io_problem": ".fleet_file",
    "is_environment_name": ".fleet_file",
    "parse_fleet_file": ".fleet_file",
    "read_fleet_file": ".fleet_file",
    "GIT_CHECK_TIMEOUT_SECONDS": ".git_ignore",
    "MAX_WORK_TREE_DEPTH": ".git_ignore",
    "UnignoredSecret": ".git_ignore",
    "unignored_secret": ".git_ignore",
    "KEK_FILE_MODE": ".kek_source",
    "MAX_KEK_COMMAND_CHARS": ".kek_source",
    "MAX_KEK_COMMAND_WORDS": ".kek_source",
    "MAX_KEK_FILE_BYTES": ".kek_source",
    "MAX_KEK_TEXT_CHARS": ".kek_source",
    "KekSource": ".kek_source",
    "load_kek": ".kek_source",
    "write_kek_file": ".kek_source",
    "KEYRING_FILE_MODE": ".keyring_file",
    "KeyringUpdate": ".keyring_file",
    "file_written_at": ".keyring_file",
    "read_keyring_file": ".keyring_file",
    "update_keyring_file": ".keyring_file",
    "write_keyring_file": ".keyring_file",
    "KEYRING_FORMAT": ".keyring_format",
    "MAX_KEYRING_FILE_BYTES": ".keyring_format",
    "MAX_MATERIAL_FILE_BYTES": ".keyring_format",
    "parse_keyring_document": ".keyring_format",
    "render_keyring_document": ".keyring_format",
    "LOCK_SUFFIX": ".lock",
    "file_lock": ".lock",
    "lock_path_for": ".lock",
    "describe_file_type": ".regular_file",
    "read_regular_file": ".regular_file",
    "check_folders": ".secret_file",
    "is_mode_secure": ".secret_file",
    "is_trusted_owner": ".secret_file",
    "read_secret_file": ".secret_file",
    "MAX_SIGNED_FILE_BYTES": ".signature",
    "FileSignature": ".signature",
    "file_signature": ".signature",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
