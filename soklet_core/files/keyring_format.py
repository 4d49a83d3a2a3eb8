"""The keyring file format, ``soklet-keyring/1``: TOML text to a ``KeyringDocument`` and back.

::

    format = "soklet-keyring/1"
    profile = "soklet-mcp-protection-v1"

    [[keys]]
    id = "2026-08"
    role = "active"                          # or "verification"
    material = "<base64url, no padding>"     # or material_file = "/run/secrets/k", or material_env = "VAR",
                                             # or wrapped_material = "<base64url>" with kek = "<KEK id>"
    created = 2026-08-01T00:00:00Z
    retired = 2026-09-01T00:00:00Z           # optional, verification keys only: when it stopped sealing

Parsing is strict: unknown fields, a second material source, a bad id, bad base64url, short material, a
missing reference, duplicate ids, an id that looks like key material (``key_id_problem``) and anything but
exactly one active key are refused, each naming the key and
field. Nothing here touches the file system except to resolve ``material_file`` references.

``wrapped_material`` is the key wrapped under a key-encryption key (``soklet keys encrypt``), ``kek`` that KEK's
id. Parsing unwraps it with the ``kek`` given (``kek-required`` without one, ``wrong-kek`` under another,
``unwrap-failed`` when the ciphertext does not authenticate), so a document always holds every key's material, in
memory only; rendering writes the wrapped form back.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import tomli_w

from soklet_core.keys import (
    MAX_KEY_MATERIAL_BYTES,
    MIN_KEY_MATERIAL_BYTES,
    PROTECTION_PROFILE,
    KeyringError,
    KeyringErrorReason,
    KeyWrapError,
    KeyWrapErrorReason,
    KeyWrapper,
    ProtectionKey,
    decode_base64url,
    encode_base64url,
    is_valid_key_id,
    key_id_problem,
    looks_like_key_material,
    printable_name,
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
)
from .errors import KeyringFileError
from .errors import KeyringFileErrorReason as Reason
from .secret_file import read_secret_file
from .toml_text import ENV_NAME, field_label, syntax_error_position

__all__ = [
    "KEYRING_FORMAT",
    "MAX_KEYRING_FILE_BYTES",
    "MAX_MATERIAL_FILE_BYTES",
    "parse_keyring_document",
    "render_keyring_document",
]

#: The value of the ``format`` field this version reads and writes.
KEYRING_FORMAT: Final = "soklet-keyring/1"
#: A keyring file larger than this is refused before parsing, and soklet never writes a larger one. A key of
#: ``MAX_KEY_MATERIAL_BYTES`` takes about 1.5 KB of TOML, so this holds several hundred of the largest keys.
MAX_KEYRING_FILE_BYTES: Final = 1024 * 1024
#: A ``material_file`` larger than this is refused (it holds one base64url line).
MAX_MATERIAL_FILE_BYTES: Final = 64 * 1024

_TOP_FIELDS: Final = frozenset({"format", "profile", "keys"})
_KEY_FIELDS: Final = frozenset(
    {"id", "role", "material", "material_file", "material_env", "wrapped_material", "kek", "created", "retired"}
)
_MATERIAL_FIELDS: Final = ("material", "material_file", "material_env", "wrapped_material")
#: How a refused unwrap is reported by the files layer.
_WRAP_REASONS: Final = {
    KeyWrapErrorReason.WRONG_KEK: Reason.WRONG_KEK,
    KeyWrapErrorReason.UNWRAP_FAILED: Reason.UNWRAP_FAILED,
    KeyWrapErrorReason.MALFORMED_WRAPPED_KEY: Reason.INVALID_FIELD,
    KeyWrapErrorReason.KEK_UNAVAILABLE: Reason.KEK_UNAVAILABLE,
    KeyWrapErrorReason.INVALID_KEK: Reason.KEK_UNAVAILABLE,
}


def parse_keyring_document(
    text: bytes | str,
    *,
    path: str | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    allow_insecure_permissions: bool = False,
    kek: KeyWrapper | None = None,
) -> KeyringDocument:
    """Parse keyring file content. ``path`` labels errors; ``base_dir`` anchors relative ``material_file``
    paths (default: the current folder); ``environ`` resolves ``material_env`` (default: ``os.environ``); ``kek``
    unwraps ``wrapped_material`` (a file holding wrapped keys is refused, ``kek-required``, without one).

    Raises ``KeyringFileError``; its message names the key and field and never repeats file content.
    """
    parser = _Parser(path, Path(base_dir) if base_dir is not None else Path(), environ, allow_insecure_permissions, kek)
    return parser.document(text)


def render_keyring_document(document: KeyringDocument) -> str:
    """The TOML text of ``document``: the header, then one ``[[keys]]`` table per key in document order."""
    lines = [
        "# soklet keyring: holds secret key material. Keep it mode 0600; soklet writes it that way.",
        tomli_w.dumps({"format": KEYRING_FORMAT, "profile": document.profile}).rstrip("\n"),
    ]
    for entry in document.entries:
        fields: dict[str, str] = {"id": entry.key.id, "role": entry.role.value}
        source = entry.source
        if isinstance(source, MaterialFile):
            fields["material_file"] = source.path
        elif isinstance(source, MaterialEnv):
            fields["material_env"] = source.name
        elif isinstance(source, WrappedMaterial):
            fields["wrapped_material"] = encode_base64url(source.ciphertext)
            fields["kek"] = source.kek_id
        else:
            fields["material"] = encode_base64url(entry.key.material)
        # tomli-w spells an offset date-time "2026-08-01 00:00:00+00:00"; the documented form ends in Z.
        lines += ["", "[[keys]]", tomli_w.dumps(fields).rstrip("\n"), f"created = {_utc_text(entry.created)}"]
        if entry.retired is not None:
            lines.append(f"retired = {_utc_text(entry.retired)}")
    return "\n".join(lines) + "\n"


class _Parser:
    __slots__ = ("_allow_insecure", "_base_dir", "_environ", "_kek", "_path")

    def __init__(
        self,
        path: str | None,
        base_dir: Path,
        environ: Mapping[str, str] | None,
        allow_insecure: bool,
        kek: KeyWrapper | None,
    ) -> None:
        self._path = path
        self._base_dir = base_dir
        self._environ = environ if environ is not None else os.environ
        self._allow_insecure = allow_insecure
        self._kek = kek

    def _error(
        self,
        reason: Reason,
        *,
        key: str | None = None,
        field: str | None = None,
        detail: str | None = None,
    ) -> KeyringFileError:
        return KeyringFileError(reason, path=self._path, key=key, field=field, detail=detail)

    def document(self, text: bytes | str) -> KeyringDocument:
        if isinstance(text, bytes):
            if len(text) > MAX_KEYRING_FILE_BYTES:
                raise self._error(Reason.TOO_LARGE, detail=f"limit {MAX_KEYRING_FILE_BYTES} bytes")
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise self._error(Reason.INVALID_UTF8) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise self._error(Reason.INVALID_TOML, detail=syntax_error_position(error)) from None
        except RecursionError:
            # tomllib recurses once per nested array or inline table.
            raise self._error(Reason.INVALID_TOML, detail="values nested too deeply") from None
        except ValueError:
            # Python refuses to convert an integer of more than 4,300 digits (sys.get_int_max_str_digits).
            raise self._error(Reason.INVALID_TOML, detail="a number too long to read") from None
        for name in sorted(data):
            if name not in _TOP_FIELDS:
                raise self._error(Reason.UNKNOWN_FIELD, field=field_label(name))
        if "format" not in data:
            raise self._error(Reason.MISSING_FIELD, field="format")
        if data["format"] != KEYRING_FORMAT:
            raise self._error(Reason.UNKNOWN_FORMAT, field="format")
        if "profile" not in data:
            raise self._error(Reason.MISSING_FIELD, field="profile")
        if data["profile"] != PROTECTION_PROFILE:
            raise self._error(Reason.UNKNOWN_PROFILE, field="profile")
        tables = data.get("keys", [])
        if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
            raise self._error(Reason.INVALID_FIELD, field="keys", detail="an array of [[keys]] tables")
        entries: list[KeyEntry] = []
        seen: set[str] = set()
        for index, table in enumerate(tables):
            entry = self._entry(index, table)
            if entry.key.id in seen:
                raise self._error(Reason.DUPLICATE_KEY_ID, key=_key_label(index, entry.key.id), field="id")
            seen.add(entry.key.id)
            entries.append(entry)
        active = [entry for entry in entries if entry.role is KeyRole.ACTIVE]
        if not active:
            raise self._error(Reason.NO_ACTIVE_KEY, field="role")
        if len(active) > 1:
            ids = ", ".join(repr(entry.key.id) for entry in active)
            raise self._error(Reason.MULTIPLE_ACTIVE_KEYS, field="role", detail=f"active: {ids}")
        return KeyringDocument(tuple(entries), PROTECTION_PROFILE)

    def _entry(self, index: int, table: dict[str, Any]) -> KeyEntry:
        position = f"keys[{index}]"
        key_id = table.get("id")
        label = _key_label(index, key_id if is_valid_key_id(key_id) else None)
        for name in sorted(table):
            if name not in _KEY_FIELDS:
                raise self._error(Reason.UNKNOWN_FIELD, key=label, field=field_label(name))
        if key_id is None:
            raise self._error(Reason.MISSING_FIELD, key=position, field="id")
        if not isinstance(key_id, str):
            raise self._error(Reason.INVALID_FIELD, key=position, field="id", detail="a string")
        problem = key_id_problem(key_id)
        if problem is not None:
            # Named by position only: the id may be a secret pasted into the wrong field.
            reason = Reason.MATERIAL_SHAPED_KEY_ID if problem is KeyringErrorReason.MATERIAL_SHAPED_KEY_ID else None
            raise self._error(reason or Reason.INVALID_KEY_ID, key=position, field="id")
        role = self._role(label, table)
        if table.get("created") is None:
            raise self._error(Reason.MISSING_FIELD, key=label, field="created")
        created_utc = self._moment(label, table, "created")
        retired_utc = None if table.get("retired") is None else self._moment(label, table, "retired")
        if retired_utc is not None and role is KeyRole.ACTIVE:
            raise self._error(Reason.INVALID_FIELD, key=label, field="retired", detail="only a verification key")
        if "kek" in table and "wrapped_material" not in table:
            raise self._error(Reason.UNKNOWN_FIELD, key=label, field="kek", detail="only with wrapped_material")
        if "wrapped_material" in table and not any(name in table for name in _MATERIAL_FIELDS[:-1]):
            unwrapped, wrapped = self._unwrapped(label, key_id, table)
            return KeyEntry(unwrapped, role, created_utc, wrapped, retired_utc)
        source, field, text = self._material_text(label, table)
        try:
            material = decode_base64url(text)
        except ValueError:
            raise self._error(Reason.INVALID_BASE64, key=label, field=field) from None
        if len(material) < MIN_KEY_MATERIAL_BYTES:
            raise self._error(Reason.MATERIAL_TOO_SHORT, key=label, field=field, detail=f"{len(material)} bytes")
        if len(material) > MAX_KEY_MATERIAL_BYTES:
            raise self._error(Reason.MATERIAL_TOO_LONG, key=label, field=field, detail=f"{len(material)} bytes")
        key = ProtectionKey.from_id_and_bytes(key_id, material)
        return KeyEntry(key, role, created_utc, source, retired_utc)

    def _unwrapped(self, label: str, key_id: str, table: dict[str, Any]) -> tuple[ProtectionKey, WrappedMaterial]:
        field = "wrapped_material"
        text = table[field]
        if not isinstance(text, str):
            raise self._error(Reason.INVALID_FIELD, key=label, field=field, detail="a string")
        kek_id = table.get("kek")
        if kek_id is None:
            raise self._error(Reason.MISSING_FIELD, key=label, field="kek")
        if not isinstance(kek_id, str):
            raise self._error(Reason.INVALID_FIELD, key=label, field="kek", detail="a string")
        try:
            ciphertext = decode_base64url(text)
        except ValueError:
            raise self._error(Reason.INVALID_BASE64, key=label, field=field) from None
        try:
            wrapped = WrappedMaterial(kek_id=kek_id, ciphertext=ciphertext)
            unwrapped = wrapped.wrapped_key(key_id)
        except KeyWrapError:
            detail = "a KEK id of 1 to 64 printable characters and 1 to 4,096 bytes of ciphertext"
            raise self._error(Reason.INVALID_FIELD, key=label, field=f"{field} and kek", detail=detail) from None
        if self._kek is None:
            raise self._error(Reason.KEK_REQUIRED, key=label, field=field)
        try:
            key = self._kek.unwrap(unwrapped, PROTECTION_PROFILE)
        except KeyWrapError as error:
            reason = _WRAP_REASONS.get(error.reason, Reason.UNWRAP_FAILED)
            raise self._error(reason, key=label, field=field, detail=error.detail) from None
        except KeyringError:
            # Authenticated, yet not a data key's length: only a KEK program out of its protocol can answer that.
            raise self._error(Reason.UNWRAP_FAILED, key=label, field=field) from None
        return key, wrapped

    def _moment(self, label: str, table: dict[str, Any], field: str) -> datetime:
        value = table[field]
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise self._error(Reason.INVALID_CREATED, key=label, field=field)
        try:
            return value.astimezone(UTC)
        except OverflowError:
            # 0001-01-01T00:00:00+01:00 is a valid TOML date-time whose UTC time is before year 1.
            raise self._error(Reason.INVALID_CREATED, key=label, field=field, detail="out of range") from None

    def _role(self, label: str, table: dict[str, Any]) -> KeyRole:
        role = table.get("role")
        if role is None:
            raise self._error(Reason.MISSING_FIELD, key=label, field="role")
        for candidate in KeyRole:
            if role == candidate.value:
                return candidate
        raise self._error(Reason.INVALID_ROLE, key=label, field="role")

    def _material_text(self, label: str, table: dict[str, Any]) -> tuple[MaterialSource, str, str]:
        present = [name for name in _MATERIAL_FIELDS if name in table]
        if not present:
            raise self._error(Reason.MISSING_MATERIAL, key=label, field="material")
        if len(present) > 1:
            raise self._error(Reason.CONFLICTING_MATERIAL_SOURCES, key=label, field=" and ".join(present))
        field = present[0]
        value = table[field]
        if not isinstance(value, str):
            raise self._error(Reason.INVALID_FIELD, key=label, field=field, detail="a string")
        if field == "material":
            return InlineMaterial(), field, value
        if field == "material_env":
            if not ENV_NAME.fullmatch(value):
                raise self._error(Reason.INVALID_FIELD, key=label, field=field, detail="an environment name")
            if value not in self._environ:
                shown = printable_name(value, what="a name")
                raise self._error(Reason.MATERIAL_ENV_MISSING, key=label, field=field, detail=f"${shown}")
            return MaterialEnv(value), field, self._environ[value].strip()
        return MaterialFile(value), field, self._read_material_file(label, field, value)

    def _read_material_file(self, label: str, field: str, name: str) -> str:
        target = self._base_dir / name
        try:
            data = read_secret_file(
                target, limit=MAX_MATERIAL_FILE_BYTES, allow_insecure_permissions=self._allow_insecure
            )
        except KeyringFileError as problem:
            reason = _MATERIAL_FILE_REASONS.get(problem.reason, Reason.MATERIAL_FILE_UNREADABLE)
            shown = str(target) if not looks_like_key_material(name) else printable_name(name, what="a path")
            why = problem.reason.description if reason is Reason.MATERIAL_FILE_UNREADABLE else None
            parts = [shown, *(part for part in (why, problem.detail) if part)]
            detail = ": ".join(parts)
            raise self._error(reason, key=label, field=field, detail=detail) from None
        try:
            return data.decode("ascii").strip()
        except UnicodeDecodeError:
            raise self._error(Reason.INVALID_BASE64, key=label, field=field) from None


_MATERIAL_FILE_REASONS: Final = {
    Reason.NOT_FOUND: Reason.MATERIAL_FILE_NOT_FOUND,
    Reason.INSECURE_PERMISSIONS: Reason.MATERIAL_FILE_INSECURE,
    Reason.UNTRUSTED_OWNER: Reason.MATERIAL_FILE_INSECURE,
    Reason.UNTRUSTED_FOLDER: Reason.MATERIAL_FILE_INSECURE,
}


def _utc_text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key_label(index: int, key_id: str | None) -> str:
    # An id shaped like material is shown by position only: it may be a paste into the wrong field.
    if key_id is None or looks_like_key_material(key_id):
        return f"keys[{index}]"
    return f"{key_id!r} (keys[{index}])"
