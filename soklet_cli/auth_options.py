"""The bearer-token options ``soklet serve`` and ``soklet inspect-state`` share (``--auth``, ``--issuer``, ...),
and the one function that turns them into the core's settings or ends the command with a usage line.

The auth package (PyJWT, an HTTP client) is imported only once ``--auth jwt`` or ``--auth introspection`` is given:
a server without bearer tokens, and every other command, never loads it. No message here repeats a value: an
option's value may be a secret pasted into the wrong option (the client secret is read from a file only).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, NoReturn

import typer

from soklet_core.files import KeyringFileError, KeyringFileErrorReason

from ._common import parse_duration, parse_file
from .exit_codes import ExitCode
from .output import fail, file_error_text

if TYPE_CHECKING:
    from soklet_core.mcp.server.auth import IntrospectionSettings, JwtSettings

__all__ = [
    "AUTH_EXAMPLE",
    "DEFAULT_LEEWAY",
    "DEFAULT_SUBJECT_CLAIM",
    "AudienceOption",
    "AuthArguments",
    "AuthKind",
    "AuthKindOption",
    "AuthorizationServerOption",
    "ClientIdOption",
    "ClientSecretFileOption",
    "IntrospectionUrlOption",
    "IssuerOption",
    "JwksFileOption",
    "JwksUrlOption",
    "LeewayOption",
    "PartitionClaimOption",
    "RequiredScopeOption",
    "ResourceOption",
    "SubjectClaimOption",
    "auth_settings",
]

#: The claim naming the caller when ``--subject-claim`` is not given (the settings' own default).
DEFAULT_SUBJECT_CLAIM: Final = "sub"
#: The clock skew forgiven on ``exp`` and ``nbf`` when ``--leeway`` is not given (the settings' own default).
DEFAULT_LEEWAY: Final = "30s"
#: The most ``--leeway`` takes (the settings' bound; they refuse more themselves too).
_MAX_LEEWAY: Final = timedelta(minutes=5)
#: The largest client-secret file read.
_MAX_SECRET_FILE_BYTES: Final = 4096
#: A line of ``--help`` examples, shown by ``serve``.
AUTH_EXAMPLE: Final = (
    "soklet serve --keyring keys.toml --auth jwt --issuer https://auth.example.com/realms/acme "
    "--audience https://mcp.example.com/mcp --jwks-url https://auth.example.com/realms/acme/certs "
    "--partition-claim tenant --resource https://mcp.example.com/mcp --host 0.0.0.0"
)


class AuthKind(StrEnum):
    """How the MCP endpoint admits callers: anonymously, by JWT access token, or by token introspection."""

    none = "none"
    jwt = "jwt"
    introspection = "introspection"


AuthKindOption = Annotated[
    AuthKind,
    typer.Option(
        "--auth",
        help=(
            "Admission of HTTP callers: none (anonymous), jwt (JWT access tokens verified against the issuer's "
            "JWKS) or introspection (RFC 7662). With a token policy the endpoint answers 401/403 with "
            "WWW-Authenticate: Bearer and serves its RFC 9728 metadata."
        ),
    ),
]
IssuerOption = Annotated[
    str | None,
    typer.Option("--issuer", metavar="URL", help="The iss tokens must carry (https://; http:// only to loopback)."),
]
AudienceOption = Annotated[
    str | None, typer.Option("--audience", metavar="AUD", help="The aud tokens must name (this resource).")
]
JwksUrlOption = Annotated[
    str | None, typer.Option("--jwks-url", metavar="URL", help="--auth jwt: the issuer's JWKS URL (jwks_uri).")
]
JwksFileOption = Annotated[
    Path | None,
    typer.Option(
        "--jwks-file", metavar="FILE", parser=parse_file, help="--auth jwt: a JWKS file (re-read when it changes)."
    ),
]
PartitionClaimOption = Annotated[
    str | None,
    typer.Option(
        "--partition-claim",
        metavar="CLAIM",
        help="The claim naming the caller's partition (e.g. tenant); without it each subject is its own partition.",
    ),
]
SubjectClaimOption = Annotated[
    str | None,
    typer.Option(
        "--subject-claim", metavar="CLAIM", help=f"The claim naming the caller (default {DEFAULT_SUBJECT_CLAIM})."
    ),
]
RequiredScopeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--required-scope",
        metavar="SCOPE",
        help="A scope every token must grant, else 403 insufficient_scope (repeatable).",
    ),
]
LeewayOption = Annotated[
    str | None,
    typer.Option(
        "--leeway",
        metavar="DURATION",
        help=f"Clock skew forgiven on exp and nbf (default {DEFAULT_LEEWAY}, at most 5m).",
    ),
]
IntrospectionUrlOption = Annotated[
    str | None,
    typer.Option("--introspection-url", metavar="URL", help="--auth introspection: the RFC 7662 endpoint."),
]
ClientIdOption = Annotated[
    str | None, typer.Option("--client-id", metavar="ID", help="--auth introspection: this server's client id.")
]
ClientSecretFileOption = Annotated[
    Path | None,
    typer.Option(
        "--client-secret-file",
        metavar="FILE",
        parser=parse_file,
        help="--auth introspection: a file (0600) holding the client secret.",
    ),
]
ResourceOption = Annotated[
    str | None,
    typer.Option(
        "--resource",
        metavar="URL",
        help=(
            "The resource URL of the RFC 9728 metadata (default: the endpoint's own URL; needed on a non-loopback "
            "--host)."
        ),
    ),
]
AuthorizationServerOption = Annotated[
    list[str] | None,
    typer.Option(
        "--authorization-server",
        metavar="URL",
        help="An authorization server the metadata names (repeatable; default: the --issuer).",
    ),
]


@dataclasses.dataclass(frozen=True, slots=True)
class AuthArguments:
    """The bearer-token options as given (``None``: not given)."""

    kind: AuthKind = AuthKind.none
    issuer: str | None = None
    audience: str | None = None
    jwks_url: str | None = None
    jwks_file: Path | None = None
    partition_claim: str | None = None
    subject_claim: str | None = None
    required_scopes: tuple[str, ...] = ()
    leeway: str | None = None
    introspection_url: str | None = None
    client_id: str | None = None
    client_secret_file: Path | None = None

    def given(self) -> list[str]:
        """The options given besides ``--auth``, by name, in declaration order."""
        names = []
        for field in dataclasses.fields(self)[1:]:
            value = getattr(self, field.name)
            if value is not None and value != ():
                names.append(_OPTION_NAMES[field.name])
        return names


#: Each settings field (and argument) by the option that gives it: messages name options, never fields.
_OPTION_NAMES: Final = {
    "issuer": "--issuer",
    "audience": "--audience",
    "jwks_url": "--jwks-url",
    "jwks_file": "--jwks-file",
    "partition_claim": "--partition-claim",
    "subject_claim": "--subject-claim",
    "required_scopes": "--required-scope",
    "leeway": "--leeway",
    "introspection_url": "--introspection-url",
    "client_id": "--client-id",
    "client_secret_file": "--client-secret-file",
    "client_secret": "the secret in --client-secret-file",
}
#: The characters of a settings field's name: a message's words made of them are looked up in _OPTION_NAMES.
_FIELD_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz_")
_JWT_ONLY: Final = ("jwks_url", "jwks_file")
_INTROSPECTION_ONLY: Final = ("introspection_url", "client_id", "client_secret_file")
#: The secret-file refusals that --allow-insecure-permissions lifts.
_INSECURE_FILE_REASONS: Final = frozenset(
    {
        KeyringFileErrorReason.INSECURE_PERMISSIONS,
        KeyringFileErrorReason.UNTRUSTED_OWNER,
        KeyringFileErrorReason.UNTRUSTED_FOLDER,
    }
)


def _usage(message: str) -> NoReturn:
    fail(f"usage: {message}", ExitCode.USAGE)


def _need(arguments: AuthArguments, names: tuple[str, ...], kind: AuthKind) -> None:
    missing = [_OPTION_NAMES[name] for name in names if getattr(arguments, name) is None]
    if missing:
        _usage(f"--auth {kind.value} needs {', '.join(missing)}")


def _refuse(arguments: AuthArguments, names: tuple[str, ...], kind: AuthKind) -> None:
    extra = [_OPTION_NAMES[name] for name in names if getattr(arguments, name) is not None]
    if extra:
        _usage(f"{', '.join(extra)} cannot be used with --auth {kind.value}")


def _read_client_secret(path: Path, *, allow_insecure: bool) -> str:
    """The client secret: the file's text without its line end, read with the secret-file rules (owner-only
    mode, trusted owner and folders) as every secret file of this CLI."""
    from soklet_core.files import read_secret_file

    try:
        raw = read_secret_file(path, limit=_MAX_SECRET_FILE_BYTES, allow_insecure_permissions=allow_insecure)
    except KeyringFileError as error:
        hint = " (or pass --allow-insecure-permissions)" if error.reason in _INSECURE_FILE_REASONS else ""
        code = ExitCode.IO if error.reason.is_io else ExitCode.USAGE
        fail(f"--client-secret-file: {file_error_text(error)}{hint}", code)
    try:
        secret = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        _usage("--client-secret-file does not hold UTF-8 text")
    if not secret or "\n" in secret:
        _usage("--client-secret-file must hold the client secret on one line")
    return secret


def _as_options(message: str) -> str:
    """``message`` with each settings field it names (a whole word) written as the option a CLI user knows."""
    out: list[str] = []
    start = 0
    for index in range(len(message) + 1):
        if index < len(message) and message[index] in _FIELD_CHARS:
            continue
        word = message[start:index]
        out.append(_OPTION_NAMES.get(word, word))
        if index < len(message):
            out.append(message[index])
        start = index + 1
    return "".join(out)


def auth_settings(
    arguments: AuthArguments, *, allow_insecure: bool = False
) -> JwtSettings | IntrospectionSettings | None:
    """The settings the options describe (``None`` with ``--auth none``), or the command ends: exit 2 with one
    ``usage:`` line for a missing, extra or malformed option, exit 3 for an unreadable client-secret file. The
    settings' own rules (https:// URLs, claim names, scopes, bounds) are checked by the settings, their fixed
    messages shown with option names."""
    kind = arguments.kind
    if kind is AuthKind.none:
        given = arguments.given()
        if given:
            _usage(f"{', '.join(given)} need --auth jwt or --auth introspection")
        return None
    leeway = timedelta(seconds=30)
    if arguments.leeway is not None:
        try:
            leeway = parse_duration(arguments.leeway, maximum=_MAX_LEEWAY, zero=True)
        except typer.BadParameter as error:
            _usage(f"--leeway: {error.message}")
    subject_claim = arguments.subject_claim or DEFAULT_SUBJECT_CLAIM
    scopes = frozenset(arguments.required_scopes)
    # Imported here, not at the top: PyJWT and the HTTP client are for servers that take tokens.
    from soklet_core.mcp.server.auth import IntrospectionSettings, JwtSettings

    try:
        if kind is AuthKind.jwt:
            _need(arguments, ("issuer", "audience"), kind)
            _refuse(arguments, _INTROSPECTION_ONLY, kind)
            assert arguments.issuer is not None
            assert arguments.audience is not None
            return JwtSettings(
                issuer=arguments.issuer,
                audience=arguments.audience,
                jwks_url=arguments.jwks_url,
                jwks_file=arguments.jwks_file,
                partition_claim=arguments.partition_claim,
                subject_claim=subject_claim,
                required_scopes=scopes,
                leeway=leeway,
            )
        _need(arguments, _INTROSPECTION_ONLY, kind)
        _refuse(arguments, _JWT_ONLY, kind)
        assert arguments.introspection_url is not None
        assert arguments.client_id is not None
        assert arguments.client_secret_file is not None
        secret = _read_client_secret(arguments.client_secret_file, allow_insecure=allow_insecure)
        return IntrospectionSettings(
            introspection_url=arguments.introspection_url,
            client_id=arguments.client_id,
            client_secret=secret,
            issuer=arguments.issuer,
            audience=arguments.audience,
            partition_claim=arguments.partition_claim,
            subject_claim=subject_claim,
            required_scopes=scopes,
            leeway=leeway,
        )
    except (ValueError, TypeError) as error:
        # The settings' messages are fixed and never hold the value; they name fields, shown here as options.
        _usage(_as_options(str(error)))
