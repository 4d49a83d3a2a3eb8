"""``soklet fingerprint``: the keyring file's fingerprint, to compare instances before a rotation step."""

from __future__ import annotations

from typing import Annotated

import typer

from soklet_core.keys import FINGERPRINT_VERSIONS

from .exit_codes import ExitCode
from .kek_option import KekCommandOption, KekEnvOption, KekFileOption, kek_from_options
from .keyring_path import (
    DEFAULT_KEYRING_FILE,
    InsecureOption,
    JsonOption,
    KeyringOption,
    load_document,
    resolve_keyring_path,
)
from .output import console, emit_json, fail


def fingerprint(
    version: Annotated[
        int,
        typer.Option("--version", metavar="1|2", help="Fingerprint encoding: 2 (bytes) or legacy 1 (ids only)."),
    ] = 2,
    keyring: KeyringOption = DEFAULT_KEYRING_FILE,
    allow_insecure: InsecureOption = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the keyring file's fingerprint: version, profile and value.

    Two instances hold byte-identical keys exactly when their v2 fingerprints agree on version, profile and
    value. Legacy v1 covers key ids only and can match keyrings that cannot open each other's state; v1 and
    v2 fingerprints are incomparable, never equal. An encrypted keyring file is read given its key-encryption key
    (--kek-file, --kek-env or --kek-command).

    **Examples**

      soklet fingerprint

      soklet fingerprint --json --keyring /etc/soklet/keyring.toml

    **Exit codes**: 0 printed; 1 the file is malformed, or its KEK is missing or wrong; 2 usage (unknown
    version); 3 the file is missing, unreadable or readable by group/others.
    """
    if version not in FINGERPRINT_VERSIONS:
        fail(f"usage: --version must be one of {', '.join(map(str, FINGERPRINT_VERSIONS))}", ExitCode.USAGE)
    kek = kek_from_options(kek_file, kek_env, kek_command, allow_insecure=allow_insecure)
    document = load_document(resolve_keyring_path(keyring), allow_insecure_permissions=allow_insecure, kek=kek)
    result = document.keyring().fingerprint(version=version)
    if as_json:
        emit_json(result.to_json())
        return
    for name, value in (
        ("version", str(result.version)),
        ("profile", result.profile),
        ("value", result.value),
    ):
        console.print(f"{name:<8} {value}", markup=False, highlight=False)
