"""``soklet keys encrypt``: wrap every key of a keyring file under a key-encryption key (or, with ``--decrypt``,
write them in clear again), in place, atomically, under the file's lock."""

from __future__ import annotations

from typing import Annotated

import typer

from soklet_core.files import (
    InlineMaterial,
    KeyringDocument,
    KeyringFileError,
    MaterialEnv,
    MaterialFile,
    WrappedMaterial,
    update_keyring_file,
)
from soklet_core.keys import KeyringError, KeyWrapError

from .exit_codes import ExitCode
from .kek_option import KekCommandOption, KekEnvOption, KekFileOption, kek_failure, kek_source, load_kek_or_exit
from .keyring_path import (
    DEFAULT_KEYRING_FILE,
    InsecureOption,
    JsonOption,
    KeyringOption,
    fail_for,
    resolve_keyring_path,
)
from .keys import keys_app
from .output import SokletCommand, console, counted, emit_json, fail, shown_path

__all__ = ["encrypt"]


def _say(text: str) -> None:
    console.print(text, markup=False, highlight=False)


def encrypt(
    keyring: KeyringOption = DEFAULT_KEYRING_FILE,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    decrypt: Annotated[
        bool,
        typer.Option("--decrypt", help="Write every wrapped key in clear again (the KEK options name its KEK)."),
    ] = False,
    allow_insecure: InsecureOption = False,
    as_json: JsonOption = False,
) -> None:
    """Wrap every key of the keyring file under a key-encryption key, so the file holds no key in clear.

    Each key's material becomes **wrapped_material** (AES-256-GCM under the KEK, the key id and profile as
    associated data) with **kek** (the KEK id) beside it. The file is rewritten atomically (mode 0600) under its
    lock; ids, roles, times and the fingerprint do not change. From then on every command reads the file given
    the KEK (--kek-file, --kek-env or --kek-command), and every key a command adds is wrapped too. Keys read
    from material_file or material_env stay references (their material is not in the file). Running it again
    does nothing; a file wrapped under another KEK is refused (wrong-kek). --decrypt is the reverse.

    **Examples**

      soklet kek generate --output /etc/soklet/kek

      soklet keys encrypt --keyring /etc/soklet/keyring.toml --kek-file /etc/soklet/kek

      soklet keys encrypt --kek-command "/usr/local/bin/soklet-kms --key projects/p/keys/k" --json

      soklet keys encrypt --decrypt --kek-file /etc/soklet/kek

    **Exit codes**: 0 done (or nothing to do); 1 refused (the KEK cannot be loaded, is not the one the keys were
    wrapped under, or a key does not unwrap); 2 usage (no KEK option, or several); 3 the keyring file could not
    be read or written.
    """
    path = resolve_keyring_path(keyring)
    source = kek_source(kek_file, kek_env, kek_command)
    if source is None:
        fail("give the key-encryption key: --kek-file FILE, --kek-env VAR or --kek-command CMD", ExitCode.USAGE)
    kek = load_kek_or_exit(source, allow_insecure=allow_insecure)
    assert kek is not None

    def change(document: KeyringDocument | None) -> KeyringDocument:
        if document is None:
            fail(f"{shown_path(path)}: not-found: no such file; create one with: soklet keys generate", ExitCode.IO)
        return document.unwrapped() if decrypt else document.wrapped(kek)

    try:
        update = update_keyring_file(path, change, allow_insecure_permissions=allow_insecure, kek=kek)
    except KeyWrapError as error:
        kek_failure(source, error)
    except (KeyringFileError, KeyringError) as error:
        fail_for(error)
    after = update.after
    wrapped = [entry.key.id for entry in after.entries if isinstance(entry.source, WrappedMaterial)]
    clear = [entry.key.id for entry in after.entries if isinstance(entry.source, InlineMaterial)]
    references = [entry.key.id for entry in after.entries if isinstance(entry.source, MaterialFile | MaterialEnv)]
    fingerprint = after.keyring().fingerprint()
    if as_json:
        emit_json(
            {
                "keyring": str(path),
                "operation": "decrypt" if decrypt else "encrypt",
                "kek_id": kek.kek_id,
                "changed": update.written,
                "wrapped": wrapped,
                "clear": clear,
                "references": references,
                "fingerprint": fingerprint.to_json(),
            }
        )
        return
    shown = shown_path(path)
    if not update.written:
        state = "holds no wrapped key" if decrypt else f"is already wrapped under {kek.kek_id}"
        _say(f"{shown} {state}: nothing changed")
    elif decrypt:
        _say(f"wrote {counted(len(clear), 'key')} of {shown} in clear")
    else:
        _say(f"wrapped {counted(len(wrapped), 'key')} of {shown} under {kek.kek_id}")
    if references:
        _say(
            f"left as references (material_file or material_env): {', '.join(references)}",
        )
    _say(f"fingerprint v{fingerprint.version} {fingerprint.value} (unchanged)")


keys_app.command("encrypt", cls=SokletCommand)(encrypt)
