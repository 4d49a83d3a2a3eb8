"""``soklet serve``: run a real MCP server (the version of :mod:`soklet_core.protocol`, and the 2025 era beside it)
locally with input-required tools, over HTTP or over standard input and output."""

from __future__ import annotations

import contextlib
import logging
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final, NoReturn

import typer

from soklet_apps import conformance, demo
from soklet_apps.link_page import LINK_PAGE_PREFIX, LinkPage, LinkStore
from soklet_core.files import KeyringDocument, KeyringFileError, KeyringFileErrorReason, write_keyring_file
from soklet_core.files.fleet_file import check_instance_name, is_environment_name
from soklet_core.fleet import parse_expected_fingerprint
from soklet_core.json import encode_wire
from soklet_core.json_logs import JsonLogFormatter
from soklet_core.keys import Fingerprint, KeyringError, KeyWrapError, KeyWrapper, ProtectionKey
from soklet_core.keys.fingerprint import CURRENT_FINGERPRINT_VERSION
from soklet_core.mcp import Registry
from soklet_core.mcp.server import ServeConfig, ServerOptions, run
from soklet_core.mcp.server._serve_config import (
    DEFAULT_HOST,
    DEFAULT_INSTANCE,
    DEFAULT_PORT,
    AdminListener,
    AdminListening,
    AppFactory,
    AuthEnabled,
    KeyringFile,
    KeyringFromStore,
    KeyringLoaded,
    Listening,
    ServeError,
    ServeErrorReason,
    ServeEvent,
    ServeSite,
    Serving,
    check_admin_listener,
)
from soklet_core.mcp.server.durable import (
    DEFAULT_TASK_TTL_MS,
    MAX_STORED_TASK_BYTES_PER_PARTITION,
    MAX_STORED_TASKS_PER_PARTITION,
)
from soklet_core.mcp.server.http import parse_authority, parse_origin
from soklet_core.mcp.server.http._transport import MalformedAuthority
from soklet_core.mcp.server.legacy._engine import LEGACY_PROTOCOL_VERSIONS
from soklet_core.mcp.server.ops import AdminTokenError, read_admin_tokens
from soklet_core.mcp.server.ops._admin import check_admin_tls_key
from soklet_core.mcp.server.ops._live_keyring import DEFAULT_POLL_INTERVAL_SECONDS
from soklet_core.mcp.server.ops._store_keyring import HEARTBEAT_SECONDS, PROPAGATION_BOUND_SECONDS
from soklet_core.mcp.server.options import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEADER_TIMEOUT_SECONDS,
    DEFAULT_INPUT_TIMEOUT_SECONDS,
    DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEAD_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_SECONDS,
    MAX_CONNECTIONS_CEILING,
    MAX_HEAD_BYTES_CEILING,
    MAX_INPUT_TIMEOUT_SECONDS,
    MAX_SESSION_IDLE_SECONDS,
    MAX_SESSIONS_LIMIT,
    MAX_TIMEOUT_SECONDS,
    MIN_HEAD_BYTES,
    HttpLimits,
    HttpOptions,
    ProtocolEras,
    ProtocolOptions,
    SessionOptions,
    TaskOptions,
)
from soklet_core.protocol import (
    CLIENT_CAPABILITIES_META_KEY,
    DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS,
    DEFAULT_SHUTDOWN_GRACE_SECONDS,
    PROTOCOL_VERSION,
    PROTOCOL_VERSION_META_KEY,
)
from soklet_core.store import (
    MAX_QUOTA_VALUE,
    StoreError,
    StoreUrl,
    default_store_url,
    sqlite_url,
)

from ._common import (
    DEFAULT_LIFETIME,
    DURATION_HELP,
    MAX_ROUNDS,
    check_duration,
    duration_text,
    parse_duration,
    parse_file,
    parse_keyring,
    parse_rounds,
)
from .auth_options import (
    AUTH_EXAMPLE,
    AudienceOption,
    AuthArguments,
    AuthKind,
    AuthKindOption,
    AuthorizationServerOption,
    ClientIdOption,
    ClientSecretFileOption,
    IntrospectionUrlOption,
    IssuerOption,
    JwksFileOption,
    JwksUrlOption,
    LeewayOption,
    PartitionClaimOption,
    RequiredScopeOption,
    ResourceOption,
    SubjectClaimOption,
    auth_settings,
)
from .exit_codes import ExitCode
from .kek_option import KekCommandOption, KekEnvOption, KekFileOption, kek_failure, kek_source, load_kek_or_exit
from .keyring_path import InsecureOption, fail_for, load_document
from .log_lines import NonBlockingStderr
from .output import emit_json, fail, file_error_text, shown_path
from .store_option import StoreOption, shown_store, store_failure

__all__ = [
    "DEV_KEYRING_NAME",
    "DEV_KEY_ID",
    "DEV_STORE_NAME",
    "EXAMPLE_END",
    "EXAMPLE_START",
    "EXAMPLE_TOOL",
    "Fixtures",
    "LogLevel",
    "example_commands",
    "serve",
]

#: The id of the ephemeral development key.
DEV_KEY_ID: Final = "dev-ephemeral"
#: The tool the printed example calls.
EXAMPLE_TOOL: Final = "catalog.continue"
#: The file name of the development keyring in its private temporary folder.
DEV_KEYRING_NAME: Final = "dev-keyring.toml"
#: The file name of the development store (SQLite), beside the development keyring in its private folder.
DEV_STORE_NAME: Final = "store.db"
#: First and last line of the printed example: bash comments, so the whole block can be pasted as it is.
EXAMPLE_START: Final = "# try it (bash): call catalog.continue, get input_required, then retry with the answer"
EXAMPLE_END: Final = "# end of example"
_MAX_TIMEOUT: Final = timedelta(seconds=MAX_TIMEOUT_SECONDS)
_MIB: Final = 1024 * 1024
_MAX_SESSION_IDLE: Final = timedelta(seconds=MAX_SESSION_IDLE_SECONDS)
_MAX_INPUT_TIMEOUT: Final = timedelta(seconds=MAX_INPUT_TIMEOUT_SECONDS)


class Fixtures(StrEnum):
    """Fixture sets ``--fixtures`` can add."""

    conformance = "conformance"


class LogLevel(StrEnum):
    """Log levels."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class LogFormat(StrEnum):
    """How log lines are written: text for people, JSON (one object per line) for a log pipeline."""

    text = "text"
    json = "json"


def _request(url: str, request_id: int, params: dict[str, Any]) -> str:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    headers = [
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"MCP-Protocol-Version: {PROTOCOL_VERSION}",
        "Mcp-Method: tools/call",
        f"Mcp-Name: {EXAMPLE_TOOL}",
    ]
    parts = ["curl", "-sS", url] + [item for header in headers for item in ("-H", shlex.quote(header))]
    text = encode_wire(body).decode("utf-8")
    return " ".join([*parts, "-d", shlex.quote(text)])


def example_commands(url: str) -> list[str]:
    """Shell lines (bash) that call ``catalog.continue``, get ``input_required``, then retry with the answer."""
    meta = {
        PROTOCOL_VERSION_META_KEY: PROTOCOL_VERSION,
        CLIENT_CAPABILITIES_META_KEY: {"elicitation": {}},
    }
    first = _request(url, 1, {"name": EXAMPLE_TOOL, "arguments": {}, "_meta": meta})
    retry_params = {
        "name": EXAMPLE_TOOL,
        "arguments": {},
        "inputResponses": {"approval": {"action": "accept", "content": {}}},
        "requestState": "STATE_PLACEHOLDER",
        "_meta": meta,
    }
    retry = _request(url, 2, retry_params).replace("STATE_PLACEHOLDER", "'\"$STATE\"'")
    extract = 'python3 -c \'import json,sys; print(json.load(sys.stdin)["result"]["requestState"])\''
    return [
        f"FIRST=$({first})",
        'echo "$FIRST"',
        f'STATE=$(printf %s "$FIRST" | {extract})',
        retry,
    ]


def _configure_logging(level: LogLevel, log_format: LogFormat = LogFormat.text) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonLogFormatter()
        if log_format is LogFormat.json
        else logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    )
    # uvicorn's own lines (start, stop, a malformed request) beside soklet's, in the same format: the core's
    # run() lets uvicorn configure no logging of its own.
    for name in ("soklet", "uvicorn"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.value.upper())
        logger.propagate = False


def _check_timeout(value: str) -> str:
    """A Typer callback: a duration with a unit, at most one hour (the bound of every HTTP timeout)."""
    _seconds(value)
    return value


def _check_instance(value: str) -> str:
    """A Typer callback: the fleet's instance-name rule (the name fleet files and ``soklet fleet check`` use)."""
    problem = check_instance_name(value)
    if problem is not None:
        raise typer.BadParameter(problem)
    return value


#: The most names ``--allowed-host`` (or origins ``--allowed-origin``) may list.
MAX_ALLOWED_NAMES: Final = 64


def _check_hosts(values: list[str] | None) -> list[str] | None:
    """A Typer callback: each ``--allowed-host`` a ``Host`` value the transport's own parser accepts."""
    return _check_names(values, parse_authority, "a host or host:port")


def _check_origins(values: list[str] | None) -> list[str] | None:
    """A Typer callback: each ``--allowed-origin`` a serialized origin the transport's own parser accepts."""
    return _check_names(values, parse_origin, "an origin (scheme://host[:port])")


def _check_names(values: list[str] | None, parse: Callable[[str], object], what: str) -> list[str] | None:
    if not values:
        return values
    if len(values) > MAX_ALLOWED_NAMES:
        raise typer.BadParameter(f"at most {MAX_ALLOWED_NAMES} values")
    for position, value in enumerate(values, start=1):
        try:
            parse(value.strip())
        except MalformedAuthority as error:
            raise typer.BadParameter(f"value {position} is not {what} ({error})") from None
    return values


def _check_env_name(value: str | None) -> str | None:
    """A Typer callback: an environment variable name as keyring files and fleet files accept it."""
    if value is not None and not is_environment_name(value):
        raise typer.BadParameter("not an environment variable name (letters, digits, _; not starting with a digit)")
    return value


def _parse_expected(text: str | Fingerprint | None) -> Fingerprint | None:
    """``--expect-fingerprint``: ``VALUE``, ``v2:VALUE`` or ``v2:PROFILE:VALUE`` (as soklet prints it); a v2 one
    only (a v1 fingerprint names ids, never bytes)."""
    if text is None or isinstance(text, Fingerprint):
        return text
    try:
        expected = parse_expected_fingerprint(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    if expected.version != CURRENT_FINGERPRINT_VERSION:
        raise typer.BadParameter(f"the expected fingerprint is a v{CURRENT_FINGERPRINT_VERSION} one")
    return expected


def _check_session_idle(value: str) -> str:
    """A Typer callback: a duration with a unit, at most the session table's bound (``MAX_SESSION_IDLE_SECONDS``)."""
    parse_duration(value, maximum=_MAX_SESSION_IDLE)
    return value


def _check_input_timeout(value: str) -> str:
    """A Typer callback: a duration with a unit, at most the 2025-era engine's bound (``MAX_INPUT_TIMEOUT_SECONDS``)."""
    parse_duration(value, maximum=_MAX_INPUT_TIMEOUT)
    return value


def _served_versions(eras: ProtocolEras) -> list[str]:
    """The protocol versions a server with these eras speaks, newest first."""
    return ([PROTOCOL_VERSION] if eras.modern else []) + (list(LEGACY_PROTOCOL_VERSIONS) if eras.legacy else [])


def _eras_text(eras: ProtocolEras) -> str:
    """The versions a server with these eras speaks, for the start-up banner."""
    return f"{eras.value} ({', '.join(_served_versions(eras))})"


def _seconds(value: str) -> float:
    """An HTTP timeout option's value in seconds: the one duration parser, with the timeouts' bound."""
    return parse_duration(value, maximum=_MAX_TIMEOUT).total_seconds()


def _default(seconds: float) -> str:
    """A default held in seconds, written as the duration options take it (``10s``)."""
    return duration_text(timedelta(seconds=seconds))


@contextlib.contextmanager
def _dev_keyring() -> Iterator[tuple[KeyringDocument, Path]]:
    """A fresh development key, written to a private keyring file so its tokens can be inspected; deleted after.

    The folder comes from ``mkdtemp`` (0700, owned by this user); the file is written 0600 by the project's
    keyring writer.
    """
    folder = Path(tempfile.mkdtemp(prefix="soklet-dev-"))
    try:
        document = KeyringDocument.new(ProtectionKey.generate(DEV_KEY_ID))
        path = folder / DEV_KEYRING_NAME
        write_keyring_file(path, document)
        yield document, path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def serve(
    host: Annotated[
        str, typer.Option("--host", metavar="ADDRESS", help="Address to listen on (loopback by default).")
    ] = DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port; 0 picks a free one.")] = DEFAULT_PORT,
    protocol: Annotated[
        ProtocolEras,
        typer.Option(
            "--protocol",
            help="Protocol eras served: modern (2026-07-28 only), legacy (2025-era sessions only) or both.",
        ),
    ] = ProtocolEras.BOTH,
    stdio: Annotated[
        bool,
        typer.Option(
            "--stdio",
            help="Speak newline-delimited JSON-RPC on standard input/output instead of HTTP; logs go to stderr.",
        ),
    ] = False,
    keyring: Annotated[
        str | None,
        typer.Option(
            "--keyring",
            metavar="FILE",
            parser=parse_keyring,
            help="Keyring file for framework-protected state (reloaded on SIGHUP and when it changes).",
        ),
    ] = None,
    dev_key: Annotated[
        bool, typer.Option("--dev-key", help="Use an ephemeral key (the default without --keyring).")
    ] = False,
    store: StoreOption = None,
    keyring_from_store: Annotated[
        bool,
        typer.Option(
            "--keyring-from-store",
            help=(
                "Take the keyring from the fleet keyring in --store (wrapped under the KEK of --kek-file, --kek-env "
                "or --kek-command) instead of a file: follow its changes and heartbeat into the store."
            ),
        ),
    ] = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    app: Annotated[
        str | None, typer.Option("--app", metavar="MODULE:OBJECT", help="Serve this Registry instead of the demo.")
    ] = None,
    fixtures: Annotated[
        list[Fixtures] | None,
        typer.Option("--fixtures", metavar="SET", help="Add a fixture set: conformance (repeatable)."),
    ] = None,
    state_lifetime: Annotated[
        str,
        typer.Option(
            "--state-lifetime",
            metavar="DURATION",
            callback=check_duration,
            help=f"Maximum request-state lifetime ({DURATION_HELP}).",
        ),
    ] = DEFAULT_LIFETIME,
    state_rounds: Annotated[
        int,
        typer.Option(
            "--state-rounds",
            metavar="N",
            parser=parse_rounds,
            help=f"Maximum request-state rounds (1 to {MAX_ROUNDS:,}).",
        ),
    ] = DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS,
    max_head_bytes: Annotated[
        int,
        typer.Option(
            "--max-head-bytes",
            min=MIN_HEAD_BYTES,
            max=MAX_HEAD_BYTES_CEILING,
            help="Largest request head (request line + headers); more: 431 and the connection closes.",
        ),
    ] = DEFAULT_MAX_HEAD_BYTES,
    header_timeout: Annotated[
        str,
        typer.Option(
            "--header-timeout",
            metavar="DURATION",
            callback=_check_timeout,
            help="Time to send a request head (max 1h).",
        ),
    ] = _default(DEFAULT_HEADER_TIMEOUT_SECONDS),
    body_timeout: Annotated[
        str,
        typer.Option(
            "--body-timeout",
            metavar="DURATION",
            callback=_check_timeout,
            help="Time to send a body once its head came: 408.",
        ),
    ] = _default(DEFAULT_BODY_TIMEOUT_SECONDS),
    keep_alive_timeout: Annotated[
        str,
        typer.Option(
            "--keep-alive-timeout",
            metavar="DURATION",
            callback=_check_timeout,
            help="Idle kept-alive connections close after.",
        ),
    ] = _default(DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS),
    max_connections: Annotated[
        int,
        typer.Option(
            "--max-connections",
            min=1,
            max=MAX_CONNECTIONS_CEILING,
            help="Open connections served at once; one more gets 503 and is closed.",
        ),
    ] = DEFAULT_MAX_CONNECTIONS,
    shutdown_grace: Annotated[
        str,
        typer.Option(
            "--shutdown-grace",
            metavar="DURATION",
            callback=_check_timeout,
            help="On stop, how long running requests may finish.",
        ),
    ] = _default(DEFAULT_SHUTDOWN_GRACE_SECONDS),
    max_sessions: Annotated[
        int,
        typer.Option(
            "--max-sessions",
            metavar="N",
            min=1,
            max=MAX_SESSIONS_LIMIT,
            help=(
                "Live 2025-era sessions at once; a partition holds at most a quarter, an anonymous client address "
                "a sixteenth, and a full share or table ends its longest-idle session for a new one."
            ),
        ),
    ] = DEFAULT_MAX_SESSIONS,
    session_idle_timeout: Annotated[
        str,
        typer.Option(
            "--session-idle-timeout",
            metavar="DURATION",
            callback=_check_session_idle,
            help=(
                "A 2025-era session unused this long, with nothing running, ends "
                f"(max {duration_text(_MAX_SESSION_IDLE)})."
            ),
        ),
    ] = _default(DEFAULT_SESSION_IDLE_SECONDS),
    input_timeout: Annotated[
        str,
        typer.Option(
            "--input-timeout",
            metavar="DURATION",
            callback=_check_input_timeout,
            help=(
                "How long a 2025-era request waits for the client's answers to one round of input "
                f"(max {duration_text(_MAX_INPUT_TIMEOUT)})."
            ),
        ),
    ] = _default(DEFAULT_INPUT_TIMEOUT_SECONDS),
    task_ttl: Annotated[
        str,
        typer.Option(
            "--task-ttl",
            metavar="DURATION",
            callback=check_duration,
            help=f"How long a task is kept from its creation (its ttlMs; {DURATION_HELP}); then it answers not-found.",
        ),
    ] = _default(DEFAULT_TASK_TTL_MS / 1000),
    task_max_per_partition: Annotated[
        int,
        typer.Option(
            "--task-max-per-partition",
            metavar="N",
            min=1,
            max=MAX_QUOTA_VALUE,
            help="Unexpired tasks one partition may keep in the store; past it a new task is refused (-32603).",
        ),
    ] = MAX_STORED_TASKS_PER_PARTITION,
    task_max_mib_per_partition: Annotated[
        int,
        typer.Option(
            "--task-max-mib-per-partition",
            metavar="MIB",
            min=1,
            max=MAX_QUOTA_VALUE // _MIB,
            help="MiB of task documents one partition may keep in the store; past it a new task is refused.",
        ),
    ] = MAX_STORED_TASK_BYTES_PER_PARTITION // _MIB,
    admin_port: Annotated[
        int | None,
        typer.Option(
            "--admin-port",
            min=0,
            max=65535,
            help="Open the admin API (keyring, health, metrics) on this port; 0 picks a free one. Never the MCP port.",
        ),
    ] = None,
    admin_host: Annotated[
        str, typer.Option("--admin-host", metavar="ADDRESS", help="Admin listener address; not loopback needs TLS.")
    ] = DEFAULT_HOST,
    admin_token_file: Annotated[
        Path | None,
        typer.Option(
            "--admin-token-file",
            metavar="FILE",
            parser=parse_file,
            help="Bearer token(s) of the admin API: one token, or label:token lines (a 0600 file).",
        ),
    ] = None,
    admin_token_env: Annotated[
        str | None,
        typer.Option(
            "--admin-token-env",
            metavar="VAR",
            callback=_check_env_name,
            help="Environment variable holding the admin token(s).",
        ),
    ] = None,
    admin_tls_cert: Annotated[
        Path | None,
        typer.Option("--admin-tls-cert", metavar="FILE", parser=parse_file, help="TLS certificate (PEM) of the admin."),
    ] = None,
    admin_tls_key: Annotated[
        Path | None,
        typer.Option("--admin-tls-key", metavar="FILE", parser=parse_file, help="TLS private key (PEM) of the admin."),
    ] = None,
    allow_insecure_admin: Annotated[
        bool,
        typer.Option("--allow-insecure-admin", help="Serve the admin API without TLS on a non-loopback address."),
    ] = False,
    instance: Annotated[
        str,
        typer.Option(
            "--instance",
            metavar="NAME",
            callback=_check_instance,
            help="This instance's name in the admin API and metrics (1 to 128 printable characters).",
        ),
    ] = DEFAULT_INSTANCE,
    fingerprint_version: Annotated[
        int,
        typer.Option(
            "--fingerprint-version",
            min=1,
            max=CURRENT_FINGERPRINT_VERSION,
            help="Fingerprint version the admin API reports (1: as an older build; never proof of convergence).",
        ),
    ] = CURRENT_FINGERPRINT_VERSION,
    allowed_hosts: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="HOST[:PORT]",
            callback=_check_hosts,
            help=(
                "A Host the MCP endpoint accepts besides the loopback names (repeatable): the name clients use "
                "behind a load balancer or a Kubernetes Service. Any other Host is refused (DNS rebinding)."
            ),
        ),
    ] = None,
    allowed_origins: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-origin",
            metavar="ORIGIN",
            callback=_check_origins,
            help="An Origin the MCP endpoint accepts besides loopback origins (repeatable): https://app.example.com.",
        ),
    ] = None,
    expect_fingerprint: Annotated[
        Fingerprint | None,
        typer.Option(
            "--expect-fingerprint",
            metavar="FINGERPRINT",
            parser=_parse_expected,
            help=(
                "Not ready (the MCP endpoint answers 503, /v1/ready says fingerprint-mismatch) while the keyring's "
                "v2 fingerprint differs from this one; checked at start and after every reload or change."
            ),
        ),
    ] = None,
    auth: AuthKindOption = AuthKind.none,
    issuer: IssuerOption = None,
    audience: AudienceOption = None,
    jwks_url: JwksUrlOption = None,
    jwks_file: JwksFileOption = None,
    partition_claim: PartitionClaimOption = None,
    subject_claim: SubjectClaimOption = None,
    required_scopes: RequiredScopeOption = None,
    leeway: LeewayOption = None,
    introspection_url: IntrospectionUrlOption = None,
    client_id: ClientIdOption = None,
    client_secret_file: ClientSecretFileOption = None,
    resource: ResourceOption = None,
    authorization_servers: AuthorizationServerOption = None,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="Log level.")] = LogLevel.info,
    log_format: Annotated[
        LogFormat,
        typer.Option(
            "--log-format",
            help="Log lines as text for people, or json: one object per line with the event's fields and span ids.",
        ),
    ] = LogFormat.text,
    allow_insecure: InsecureOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the start-up facts as one JSON document.")] = False,
) -> None:
    """Serve MCP {protocol_version} and the 2025 era over HTTP or stdio: the demo app (catalog.continue and friends),
    or your own.

    At start it prints the URL, the key it seals with (id and keyring fingerprint, never material) and, when the
    demo is served, a copy-paste bash example: the first request gets **input_required** from catalog.continue,
    the retry with the answer and the state completes it. **--app module:object** serves your Registry instead
    (or the one a function of no argument returns); the current folder is importable, as with uvicorn. Without
    --keyring an ephemeral development key is used and announced; states sealed with it die with the process.
    The development key is written to a private keyring file (a new 0700 folder, file 0600, deleted on exit)
    whose path is printed, so its tokens can be inspected with **soklet inspect-state --keyring PATH TOKEN**.

    The keyring file is **reloaded** on SIGHUP and when its stat changes (checked every {poll_interval} s); a bad
    file is refused with one logged reason and the running keyring stays. With **--admin-port** a second listener serves
    the admin API (docs/fleet.md): GET /v1/keyring, POST /v1/keyring/stage|activate|remove|reload (written to the
    keyring file first), GET /metrics; every request needs **Authorization: Bearer TOKEN** from --admin-token-file
    or --admin-token-env, except the probes GET /v1/ready and GET /v1/health, which say only a status and a
    bounded reason. A non-loopback --admin-host needs --admin-tls-cert/--admin-tls-key (or --allow-insecure-admin).

    **Readiness**: while the instance is not ready the MCP endpoint answers every request 503 with Retry-After
    (JSON-RPC -32603) and GET /v1/ready says why: the keyring file refused by a reload, a keyring whose v2
    fingerprint differs from **--expect-fingerprint**, a newer store generation seen than applied, a SQLite store
    file removed or replaced. A store outage alone keeps it ready: it serves with the keyring it holds.

    **Store mode**: **--keyring-from-store** takes the keyring from the fleet keyring in --store, wrapped under the
    key-encryption key of --kek-file, --kek-env or --kek-command, instead of a file (write the first one with
    soklet keys generate --store URL --kek-file FILE). It is loaded before anything listens, followed while
    serving (PostgreSQL LISTEN/NOTIFY, else a poll; applied within {propagation} s), and every {heartbeat} s the
    instance records a heartbeat in the store (name, generation, fingerprint, clock, admin URL); the admin API
    changes the fleet keyring through the store.

    An **encrypted keyring file** (soklet keys encrypt) is read with --keyring FILE and its KEK option: its keys are
    unwrapped in memory only, and a key an admin change adds is wrapped under the same KEK.

    HTTP limits (see docs/server.md): request head --max-head-bytes (431), --header-timeout (connection closed),
    --body-timeout (408), --keep-alive-timeout, --max-connections (503). Stop with Ctrl-C (SIGINT) or SIGTERM:
    new requests get 503, running ones get --shutdown-grace to finish and are then cancelled with a 503.

    **Durable store**: tasks and durable application handles live in the store named by **--store**
    (or $SOKLET_STORE). SQLite (sqlite:///absolute/path, WAL) suits one instance; PostgreSQL
    (postgresql://user:password@host:port/database, a connection pool) lets several instances behind a load
    balancer serve the same tasks and handles. Without --store and without --keyring the store is a SQLite file
    beside the development keyring, deleted on exit like the development key; with --keyring it is soklet.db in
    the data folder ($SOKLET_DATA_DIR, else $XDG_STATE_HOME/soklet, else ~/.local/state/soklet). The store is
    opened (and its schema created) before the server listens; only its redacted URL is ever printed.

    **Protocol eras**: with **--protocol both** (the default) the endpoint serves 2026-07-28 requests and 2025-era
    clients ({legacy_versions}: initialize, Mcp-Session-Id sessions, input asked as server-to-client requests)
    side by side; **--protocol modern** refuses a 2025-era initialize with -32022, **--protocol legacy** refuses
    2026-07-28 requests the same way. Sessions live in this process (a fleet behind a load balancer needs sticky
    routing for 2025-era clients): at most --max-sessions, each ended after --session-idle-timeout unused (8 hours
    by default: 2025-era clients do not open a new session by themselves); --input-timeout bounds each round of
    input a 2025-era request waits for.

    **--stdio** serves the same app, keyring and protection over standard input and output instead of HTTP, for
    hosts that launch the server by command: one JSON-RPC message per line, at most the request body limit per
    line; standard output carries protocol messages only, and the start-up facts and every log line go to stderr.
    The connection is one 2025-era session (or plain 2026-07-28 requests) with no headers, so admission is
    anonymous; the HTTP options (--host, --port, the HTTP limits but --shutdown-grace) have no effect and
    --admin-port is refused. At the end of standard input (a pipe, a file, /dev/null or none at all) the requests
    still running get --shutdown-grace to be answered, then the server exits 0. Log lines that stderr does not
    take (nobody reads it) are dropped, never waited for.

    **Logs** go to stderr once the server serves: text lines for people by default; **--log-format json** writes
    one JSON object per line (time, level, logger, message, then the event's own fields: the access log's method,
    operation, status and duration, a refused request state's reason, the admin audit's action, key id, token
    label and outcome; trace_id and span_id while tracing is on), never a token or other client input
    (docs/server.md, "Logs"). Spans are exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or
    OTEL_TRACES_EXPORTER=otlp) is set and the tracing extra is installed: docs/tracing.md.

    **Bearer tokens** (OAuth 2.1): **--auth jwt** admits an HTTP request only with an access token (JWT, RFC
    9068) from --issuer for --audience, verified against --jwks-url or --jwks-file; **--auth introspection** asks
    the authorization server's RFC 7662 endpoint (--introspection-url, --client-id, --client-secret-file) instead.
    The partition is the --partition-claim's value (else the subject: each caller its own partition); states
    sealed for one partition never open for another. No token: 401 with WWW-Authenticate: Bearer naming the
    RFC 9728 metadata, served at /.well-known/oauth-protected-resource (resource: --resource, default the
    endpoint's URL; authorization servers: --authorization-server, default the issuer); a missing
    --required-scope: 403 insufficient_scope. Tokens are never logged. Not with --stdio.

    **Examples**

      soklet serve

      soklet serve --port 0 --fixtures conformance

      soklet serve --keyring /etc/soklet/keyring.toml --app myapp.mcp:registry --state-lifetime 10m

      soklet serve --body-timeout 10s --max-connections 256 --shutdown-grace 20s

      soklet serve --keyring keys.toml --admin-port 9465 --admin-token-file admin-token --instance web-1

      soklet serve --stdio

      soklet serve --keyring keys.toml --store postgresql://soklet@db.internal:5432/soklet

      soklet serve --store postgresql://soklet@db.internal/soklet --keyring-from-store --kek-file kek --instance web-1

      soklet serve --keyring keys.toml --expect-fingerprint v2:Tq3cU... --admin-port 9465 --admin-token-env TOKEN

      soklet serve --protocol modern

      soklet serve --max-sessions 256 --session-idle-timeout 10m --input-timeout 2m

      soklet serve --keyring keys.toml --log-format json 2>> soklet.jsonl

      {auth_example}

    **Exit codes**: 0 stopped (with --stdio: standard input ended); 1 the keyring was refused (store mode: the
    store holds no fleet keyring, or the KEK cannot be loaded or does not unwrap it), the store's schema is not one
    this soklet writes, the --app module or factory raised, or the OTEL_* variables ask for a trace export soklet
    cannot make (an exporter other than otlp or console, a protocol other than http/protobuf, the tracing extra not
    installed); 2 usage (an admin listener
    without a usable token source, on the MCP port, non-loopback without TLS, or with --stdio included; a
    malformed store URL; a bearer-token option missing, malformed, without --auth or with --stdio; an --app
    naming no module or object, a factory needing arguments, or no Registry); 3 the keyring file, a token,
    client-secret or TLS file, a port, the store, or (with --stdio) standard input or output is unusable.
    """
    if keyring is not None and dev_key:
        fail("usage: --keyring and --dev-key exclude each other", ExitCode.USAGE)
    kek = kek_source(kek_file, kek_env, kek_command)
    # The usage errors come first, before anything is read; the rules themselves are the core's (ServeConfig).
    if keyring_from_store:
        if keyring is not None or dev_key:
            fail(
                "usage: --keyring-from-store excludes --keyring and --dev-key (the keyring is the store's)",
                ExitCode.USAGE,
            )
        if store is None:
            fail(
                "usage: --keyring-from-store needs --store URL (or $SOKLET_STORE): the store that holds it",
                ExitCode.USAGE,
            )
        if kek is None:
            fail(
                "usage: --keyring-from-store needs the key-encryption key: --kek-file FILE, --kek-env VAR or "
                "--kek-command CMD",
                ExitCode.USAGE,
            )
        if stdio:
            _usage(ServeErrorReason.STORE_KEYRING_WITH_STDIO)
        if expect_fingerprint is not None:
            _usage(ServeErrorReason.EXPECT_WITH_STORE_KEYRING)
    elif kek is not None and keyring is None:
        fail(
            "usage: a KEK option (--kek-file, --kek-env, --kek-command) needs --keyring FILE (an encrypted keyring "
            "file) or --keyring-from-store",
            ExitCode.USAGE,
        )
    if stdio and expect_fingerprint is not None:
        _usage(ServeErrorReason.EXPECT_WITH_STDIO)
    if stdio and admin_port is not None:
        _usage(ServeErrorReason.ADMIN_WITH_STDIO)
    if stdio and auth is not AuthKind.none:
        _usage(ServeErrorReason.AUTH_WITH_STDIO)
    servers = tuple(authorization_servers or ())
    _check_metadata_options(auth, resource, servers)
    auth_config = auth_settings(
        AuthArguments(
            kind=auth,
            issuer=issuer,
            audience=audience,
            jwks_url=jwks_url,
            jwks_file=jwks_file,
            partition_claim=partition_claim,
            subject_claim=subject_claim,
            required_scopes=tuple(required_scopes or ()),
            leeway=leeway,
            introspection_url=introspection_url,
            client_id=client_id,
            client_secret_file=client_secret_file,
        ),
        allow_insecure=allow_insecure,
    )
    admin = _admin_listener(
        port=admin_port,
        mcp_port=port,
        host=admin_host,
        token_file=admin_token_file,
        token_env=admin_token_env,
        tls_cert=admin_tls_cert,
        tls_key=admin_tls_key,
        allow_insecure_admin=allow_insecure_admin,
        allow_insecure_permissions=allow_insecure,
    )
    options = ServerOptions(
        protocol=ProtocolOptions(eras=protocol),
        http=HttpOptions(
            allowed_hosts=tuple(allowed_hosts or ()),
            allowed_origins=tuple(allowed_origins or ()),
            limits=HttpLimits(
                max_head_bytes=max_head_bytes,
                header_timeout_seconds=_seconds(header_timeout),
                body_timeout_seconds=_seconds(body_timeout),
                keep_alive_timeout_seconds=_seconds(keep_alive_timeout),
                max_connections=max_connections,
                shutdown_grace_seconds=_seconds(shutdown_grace),
            ),
        ),
        sessions=SessionOptions(
            max_sessions=max_sessions,
            idle_seconds=parse_duration(session_idle_timeout, maximum=_MAX_SESSION_IDLE).total_seconds(),
            input_timeout_seconds=parse_duration(input_timeout, maximum=_MAX_INPUT_TIMEOUT).total_seconds(),
        ),
        tasks=TaskOptions(
            ttl_ms=int(parse_duration(task_ttl) / timedelta(milliseconds=1)),
            max_per_partition=task_max_per_partition,
            max_bytes_per_partition=task_max_mib_per_partition * _MIB,
        ),
    )
    with contextlib.ExitStack() as stack:
        source: KeyringFile | KeyringFromStore
        keyring_file: Path | None = None
        if keyring_from_store:
            assert store is not None
            if store.backend == "sqlite" and not store.sqlite_path.is_file():
                # As every command that reads a store: a mistyped path never leaves an empty store behind.
                fail(f"store {shown_store(store)}: no such database file", ExitCode.IO)
            wrapper = load_kek_or_exit(kek, allow_insecure=allow_insecure)
            assert wrapper is not None
            source = KeyringFromStore(wrapper)
            store_url = store
        else:
            file_kek: KeyWrapper | None = None
            if keyring is None:
                document, keyring_file = stack.enter_context(_dev_keyring())
            else:
                keyring_file = Path(keyring)
                # An encrypted keyring file: its keys unwrapped in memory, and the keys a change adds wrapped too.
                file_kek = None if kek is None else load_kek_or_exit(kek, allow_insecure=allow_insecure)
                document = load_document(keyring_file, allow_insecure_permissions=allow_insecure, kek=file_kek)
            source = KeyringFile(
                keyring_file, kek=file_kek, document=document, allow_insecure_permissions=allow_insecure
            )
            store_url = _store_url(store, keyring_file if keyring is None else None)
        development = keyring is None and not keyring_from_store
        mounts: dict[str, LinkPage] = {}
        served: str | AppFactory
        if app is not None:
            served = app
        else:
            links = LinkStore()  # shared by account.link and the page it links to (mounted at /link/)
            mounts[LINK_PAGE_PREFIX] = LinkPage(links)
            served = _demo(development=development, links=links)
        try:
            config = ServeConfig(
                app=served,
                keyring=source,
                store=store_url,
                registries=(conformance.build_registry(),) if Fixtures.conformance in (fixtures or []) else (),
                mounts=mounts,
                host=host,
                port=port,
                stdio=stdio,
                admin=admin,
                instance=instance,
                fingerprint_version=fingerprint_version,
                expect_fingerprint=expect_fingerprint,
                state_lifetime=parse_duration(state_lifetime),
                state_rounds=state_rounds,
                options=options,
                log_level=log_level.value,
                auth=auth_config,
                resource=resource,
                authorization_servers=servers,
            )
        except ServeError as error:
            _serve_failure(error, host=host, port=port, admin=admin, app=app, store=store_url)
        banner = _Banner(
            config,
            stack,
            as_json=as_json,
            development=development,
            development_store=development and store_url == _store_url(None, keyring_file),
            keyring_file=keyring_file,
            demo=app is None,
            log_level=log_level,
            log_format=log_format,
        )
        # The driver's pool logs each failed connection attempt (a warning with the driver's own text); the start
        # says what went wrong in its one line instead.
        logging.getLogger("psycopg").addHandler(logging.NullHandler())
        if log_format is LogFormat.json:
            # A pipeline reads every line: what is logged while starting is JSON too, not only what follows.
            _configure_logging(log_level, log_format)
        try:
            run(config, on_event=banner.on_event)
        except ServeError as error:
            _serve_failure(error, host=host, port=port, admin=admin, app=app, store=store_url)
        except StoreError as error:
            store_failure(store_url, error)
        except KeyWrapError as error:
            assert kek is not None
            kek_failure(kek, error)
        except (KeyringFileError, KeyringError) as error:
            fail_for(error)


# A docstring cannot be an f-string: the help's protocol version and reload interval are filled in from their one
# home here, before Typer reads the help.
serve.__doc__ = (
    (serve.__doc__ or "")
    .replace("{protocol_version}", PROTOCOL_VERSION)
    .replace("{poll_interval}", f"{DEFAULT_POLL_INTERVAL_SECONDS:g}")
    .replace("{legacy_versions}", ", ".join(LEGACY_PROTOCOL_VERSIONS))
    .replace("{propagation}", f"{PROPAGATION_BOUND_SECONDS:g}")
    .replace("{heartbeat}", f"{HEARTBEAT_SECONDS:g}")
    .replace("{auth_example}", AUTH_EXAMPLE)
)


def _store_url(option: StoreUrl | None, dev_keyring_file: Path | None) -> StoreUrl:
    """``--store`` if given; else, with the development key, a SQLite file in its private folder (deleted on exit);
    else the embedded default in the data folder."""
    if option is not None:
        return option
    if dev_keyring_file is not None:
        return sqlite_url(dev_keyring_file.parent / DEV_STORE_NAME)
    return default_store_url()


def _demo(*, development: bool, links: LinkStore) -> AppFactory:
    """The demo app, built once the site is known: ``account.link`` links to the page at ``/link/`` of this
    server (development key only; over stdio, or with a real keyring, it keeps its default https base URL) and
    ``order.checkout`` keeps its handles in the server's store."""

    def build(site: ServeSite) -> Registry:
        served = development and site.base_url is not None
        link_base = f"{site.base_url}/link" if served else demo.DEFAULT_LINK_BASE_URL
        return demo.build_registry(link_base_url=link_base, development=development, links=links, store=site.store)

    return build


#: The one-line usage message of each option combination the core refuses (exit 2).
_USAGE_MESSAGES: Final = {
    ServeErrorReason.ADMIN_ON_MCP_PORT: "usage: --admin-port must differ from --port (the admin API never shares the "
    "MCP port)",
    ServeErrorReason.ADMIN_TLS_PAIR: "usage: --admin-tls-cert and --admin-tls-key go together",
    ServeErrorReason.ADMIN_NEEDS_TLS: "usage: a non-loopback --admin-host needs TLS: --admin-tls-cert and "
    "--admin-tls-key (or --allow-insecure-admin)",
    ServeErrorReason.ADMIN_WITH_STDIO: "usage: --admin-port cannot be used with --stdio (the admin API is an HTTP "
    "listener; serve over HTTP to use it)",
    ServeErrorReason.EXPECT_WITH_STDIO: "usage: --expect-fingerprint cannot be used with --stdio (readiness is an "
    "HTTP answer; serve over HTTP to use it)",
    ServeErrorReason.STORE_KEYRING_WITH_STDIO: "usage: --keyring-from-store cannot be used with --stdio (readiness "
    "is an HTTP answer)",
    ServeErrorReason.EXPECT_WITH_STORE_KEYRING: "usage: --expect-fingerprint is for a keyring file; with "
    "--keyring-from-store every member follows the store's generation",
    ServeErrorReason.AUTH_WITH_STDIO: "usage: --auth cannot be used with --stdio (bearer tokens are HTTP headers; "
    "stdio admission is anonymous)",
    ServeErrorReason.AUTH_NEEDS_AUTHORIZATION_SERVER: "usage: --auth introspection without --issuer needs "
    "--authorization-server URL (the metadata names where tokens come from)",
    ServeErrorReason.AUTH_NEEDS_RESOURCE: "usage: --auth on a non-loopback --host needs --resource URL (the URL "
    "clients reach the endpoint at)",
    ServeErrorReason.RESOURCE_WITHOUT_AUTH: "usage: --resource and --authorization-server need --auth jwt or "
    "--auth introspection",
}

#: The most --authorization-server values (the metadata document's own bound).
_MAX_AUTHORIZATION_SERVERS: Final = 16


def _check_metadata_options(auth: AuthKind, resource: str | None, servers: tuple[str, ...]) -> None:
    """``--resource`` and ``--authorization-server``: only with a token policy, each an absolute https:// URL
    (http:// only to loopback), as the core's metadata takes them (its one rule, ``check_resource_url``)."""
    from soklet_core.mcp.server.resource_metadata import check_resource_url

    if auth is AuthKind.none and (resource is not None or servers):
        _usage(ServeErrorReason.RESOURCE_WITHOUT_AUTH)
    if len(servers) > _MAX_AUTHORIZATION_SERVERS:
        fail(f"usage: at most {_MAX_AUTHORIZATION_SERVERS} --authorization-server values", ExitCode.USAGE)
    try:
        if resource is not None:
            check_resource_url(resource, "--resource")
        for server in servers:
            check_resource_url(server, "--authorization-server")
    except ValueError as error:
        # The rule's message names the option and never repeats the value.
        fail(f"usage: {error}", ExitCode.USAGE)


def _usage(reason: ServeErrorReason) -> NoReturn:
    fail(_USAGE_MESSAGES[reason], ExitCode.USAGE)


def _serve_failure(
    error: ServeError, *, host: str, port: int, admin: AdminListener | None, app: str | None, store: StoreUrl
) -> NoReturn:
    """End the command with the one line and the exit code of a refused start."""
    reason, detail = error.reason, error.detail
    if reason in _USAGE_MESSAGES:
        _usage(reason)
    if reason is ServeErrorReason.CANNOT_LISTEN:
        fail(f"cannot listen on {shown_path(host)}:{port} ({detail})", ExitCode.IO)
    if reason is ServeErrorReason.ADMIN_CANNOT_LISTEN:
        assert admin is not None
        fail(f"cannot listen on {shown_path(admin.host)}:{admin.port} ({detail})", ExitCode.IO)
    if reason is ServeErrorReason.ADMIN_TLS_UNLOADABLE:
        fail(f"admin TLS: cannot load the certificate or key ({detail})", ExitCode.IO)
    if reason is ServeErrorReason.NO_FLEET_KEYRING:
        fail(
            f"store {shown_store(store)} holds no fleet keyring yet: create it first with soklet keys generate "
            "--store URL --kek-file FILE",
            ExitCode.REFUSED,
        )
    if reason is ServeErrorReason.STDIO_UNUSABLE:
        fail(f"--stdio cannot use standard input or output ({detail})", ExitCode.IO)
    if reason is ServeErrorReason.TRACING:
        # The variable is named, never its value (OTEL_EXPORTER_OTLP_HEADERS may hold an API key).
        fail(f"tracing: {detail}", ExitCode.REFUSED)
    _app_failure(error, app or "")


def _app_failure(error: ServeError, reference: str) -> NoReturn:
    """The one line of an ``--app`` the core could not load: exit 2 when the reference is wrong (no such module or
    object, a factory that needs arguments, not a Registry), exit 1 when the app's own code fails."""
    module_name, _, attribute = reference.partition(":")
    shown = shown_path(module_name)
    named = f"--app {shown_path(reference)}"
    reason, detail = error.reason, error.detail
    if reason is ServeErrorReason.APP_REFERENCE:
        fail("usage: --app takes module:object (e.g. myapp.mcp:registry)", ExitCode.USAGE)
    if reason is ServeErrorReason.APP_NO_MODULE:
        fail(f"{named}: no module named {shown} in the current folder or the Python path", ExitCode.USAGE)
    if reason is ServeErrorReason.APP_IMPORT_FAILED:
        fail(f"{named}: importing module {shown} failed ({detail} in its own imports)", ExitCode.REFUSED)
    if reason is ServeErrorReason.APP_MODULE_RAISED:
        fail(f"{named}: importing module {shown} raised {detail}", ExitCode.REFUSED)
    if reason is ServeErrorReason.APP_NO_ATTRIBUTE:
        fail(f"{named}: module {shown} has no attribute {shown_path(attribute)}", ExitCode.USAGE)
    if reason is ServeErrorReason.APP_FACTORY_NEEDS_ARGUMENTS:
        needed = ", ".join(shown_path(name) for name in error.names)
        fail(
            f"{named}: the factory in module {shown} needs arguments ({needed}); it must be callable with none",
            ExitCode.USAGE,
        )
    if reason is ServeErrorReason.APP_FACTORY_RAISED:
        fail(f"{named}: the factory in module {shown} raised {detail}", ExitCode.REFUSED)
    if reason is ServeErrorReason.APP_NOT_A_REGISTRY:
        fail(f"{named}: module {shown} gives {detail}, not a Registry or a function returning one", ExitCode.USAGE)
    fail(str(error), ExitCode.REFUSED)


#: The secret-file refusals that --allow-insecure-permissions lifts (its hint is given with them).
_INSECURE_FILE_REASONS: Final = frozenset(
    {
        KeyringFileErrorReason.INSECURE_PERMISSIONS,
        KeyringFileErrorReason.UNTRUSTED_OWNER,
        KeyringFileErrorReason.UNTRUSTED_FOLDER,
    }
)


def _admin_listener(
    *,
    port: int | None,
    mcp_port: int,
    host: str,
    token_file: Path | None,
    token_env: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    allow_insecure_admin: bool,
    allow_insecure_permissions: bool,
) -> AdminListener | None:
    """The admin listener, checked before anything starts; ``None`` without ``--admin-port``."""
    if port is None:
        if token_file is not None or token_env is not None or tls_cert is not None or tls_key is not None:
            fail("usage: the admin options need --admin-port", ExitCode.USAGE)
        return None
    if port != 0 and port == mcp_port:
        _usage(ServeErrorReason.ADMIN_ON_MCP_PORT)
    if token_file is None and token_env is None:
        fail(
            "usage: the admin listener needs a token source: --admin-token-file FILE or --admin-token-env VAR",
            ExitCode.USAGE,
        )
    if token_file is not None and token_env is not None:
        fail("usage: --admin-token-file and --admin-token-env exclude each other", ExitCode.USAGE)
    try:
        check_admin_listener(host, tls_cert=tls_cert, tls_key=tls_key, allow_insecure=allow_insecure_admin)
    except ServeError as error:
        _usage(error.reason)
    try:
        tokens = read_admin_tokens(
            token_file=token_file, token_env=token_env, allow_insecure_permissions=allow_insecure_permissions
        )
    except KeyringFileError as error:
        fail(f"admin token: {file_error_text(error)}", ExitCode.IO if error.reason.is_io else ExitCode.USAGE)
    except AdminTokenError as error:
        fail(f"usage: admin token: {error}", ExitCode.USAGE)
    if tls_key is not None:
        # A TLS private key is a secret file: refused as a keyring file would be (mode, owner, folders).
        try:
            check_admin_tls_key(tls_key, allow_insecure_permissions=allow_insecure_permissions)
        except KeyringFileError as error:
            insecure = error.reason in _INSECURE_FILE_REASONS
            hint = " (or pass --allow-insecure-permissions)" if insecure else ""
            fail(
                f"admin TLS key: {file_error_text(error)}{hint}", ExitCode.IO if error.reason.is_io else ExitCode.USAGE
            )
    return AdminListener(
        tokens, host=host, port=port, tls_cert=tls_cert, tls_key=tls_key, allow_insecure=allow_insecure_admin
    )


class _Banner:
    """Prints what the core reports at start: the start-up facts (text for people, or one JSON document), once every
    fact is known; then the log lines take over (never blocking over stdio)."""

    def __init__(
        self,
        config: ServeConfig,
        stack: contextlib.ExitStack,
        *,
        as_json: bool,
        development: bool,
        development_store: bool,
        keyring_file: Path | None,
        demo: bool,
        log_level: LogLevel,
        log_format: LogFormat,
    ) -> None:
        self._config = config
        self._stack = stack
        self._as_json = as_json
        self._development = development
        self._development_store = development_store
        self._keyring_file = keyring_file
        self._demo = demo
        self._log_level = log_level
        self._log_format = log_format
        self._listening: Listening | None = None
        self._admin: AdminListening | None = None
        self._keyring: KeyringLoaded | None = None
        self._auth: AuthEnabled | None = None

    def on_event(self, event: ServeEvent) -> None:
        """Note a start-up fact; print them all when the server starts serving."""
        if isinstance(event, Listening):
            self._listening = event
        elif isinstance(event, AdminListening):
            self._admin = event
        elif isinstance(event, KeyringLoaded):
            self._keyring = event
        elif isinstance(event, AuthEnabled):
            self._auth = event
        elif isinstance(event, Serving):
            self._print()
            sys.stdout.flush()
            _configure_logging(self._log_level, self._log_format)
            if self._config.stdio:
                # Over stdio nobody may read stderr: log lines it does not take are dropped, never waited for.
                self._stack.enter_context(_stderr_never_blocks())

    def _print(self) -> None:
        listening, keyring, admin, auth = self._listening, self._keyring, self._admin, self._auth
        assert listening is not None
        assert keyring is not None
        config = self._config
        eras = config.options.protocol.eras
        url = listening.url
        fingerprint = keyring.fingerprint
        from_store = isinstance(config.keyring, KeyringFromStore)
        # The example calls the demo's catalog.continue: printed only when the demo is what is served.
        commands = example_commands(url) if listening.port is not None and self._demo else []
        inspect_hint: str | None = None
        keyring_file = self._keyring_file
        if keyring_file is not None:
            # A path that cannot be shown as it is (material-shaped, control characters) is named FILE in the hint.
            shown_file = shown_path(keyring_file, limit=None)
            shown_argument = shlex.quote(str(keyring_file)) if shown_file == str(keyring_file) else "FILE"
            inspect_hint = f"soklet inspect-state --keyring {shown_argument} TOKEN"
        expect = config.expect_fingerprint
        if self._as_json:
            emit_json(
                {
                    "url": url,
                    "port": listening.port,
                    "protocol": eras.value,
                    "development_key": self._development,
                    "keyring_file": None if keyring_file is None else str(keyring_file),
                    "keyring_from_store": from_store,
                    "fleet_generation": keyring.generation,
                    "store": config.store.redacted,
                    "store_backend": config.store.backend,
                    "development_store": self._development_store,
                    "active_key_id": keyring.active_key_id,
                    "fingerprint": fingerprint.to_json(),
                    "instance": config.instance,
                    "expect_fingerprint": None if expect is None else expect.to_json(),
                    "admin_url": None if admin is None else admin.url,
                    "admin_port": None if admin is None else admin.port,
                    "inspect": inspect_hint,
                    "example": commands,
                    "auth": None if auth is None else _auth_json(auth),
                }
            )
            return
        where = "over stdio (one JSON-RPC message per line; this text and the logs on stderr)" if config.stdio else ""
        # The headline names the newest version served: with --protocol legacy that is a 2025 one.
        lines = [f"soklet serve: MCP {_served_versions(eras)[0]} {where or 'at ' + url}"]
        lines.append(f"protocol: {_eras_text(eras)}")
        if keyring_file is None:
            lines.append(f"keyring: the store's fleet keyring, generation {keyring.generation} ({keyring.note})")
        elif self._development:
            lines.append("keyring: EPHEMERAL development key (--dev-key): states die with this process")
            lines.append(f"dev keyring file (deleted on exit): {shown_path(keyring_file)}")
        else:
            lines.append(f"keyring: {shown_path(keyring_file)} ({keyring.note})")
        if self._development_store:
            lines.append(f"store: EPHEMERAL development store (sqlite, deleted on exit): {shown_store(config.store)}")
        else:
            lines.append(f"store: {shown_store(config.store)} ({config.store.backend})")
        lines.append(f"sealing key: {keyring.active_key_id}")
        lines.append(f"fingerprint: v{fingerprint.version} {fingerprint.profile} {fingerprint.value}")
        if expect is not None:
            expected = f"v{expect.version} {expect.value}"
            lines.append(f"expected fingerprint: {expected} (not ready while the keyring's differs)")
        if inspect_hint is not None:
            lines.append(f"inspect a token: {inspect_hint}")
        if admin is not None:
            lines.append(f"admin API: {admin.url} (instance {config.instance}; Authorization: Bearer TOKEN)")
        if auth is not None:
            checked = f"issuer {auth.issuer or 'not checked'}, audience {auth.audience or 'not checked'}"
            lines.append(f"auth: bearer tokens required ({auth.kind}: {checked})")
            lines.append(f"resource metadata: {auth.metadata_url}")
        if commands:
            lines.append(EXAMPLE_START)
            lines.extend(commands)
            lines.append(EXAMPLE_END)
        sys.stdout.write("\n".join(lines) + "\n")


def _auth_json(auth: AuthEnabled) -> dict[str, str | None]:
    """The start-up fact of bearer-token admission, as the JSON document holds it (never a secret)."""
    return {
        "kind": auth.kind,
        "issuer": auth.issuer,
        "audience": auth.audience,
        "resource": auth.resource,
        "resource_metadata": auth.metadata_url,
    }


@contextlib.contextmanager
def _stderr_never_blocks() -> Iterator[None]:
    """The ``soklet`` loggers write through :class:`~soklet_cli.log_lines.NonBlockingStderr` (same format and
    level) while the block runs; the handlers they had are restored after."""
    root = logging.getLogger("soklet")
    previous = root.handlers[:]
    handler = NonBlockingStderr()
    if previous:
        handler.setFormatter(previous[0].formatter)
    root.handlers[:] = [handler]
    try:
        yield
    finally:
        root.handlers[:] = previous
        handler.close()
