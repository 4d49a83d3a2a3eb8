"""``soklet serve``: run a real MCP server (the version of :mod:`soklet_core.protocol`, and the 2025 era beside it)
locally with input-required tools, over HTTP or over standard input and output."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import inspect
import ipaddress
import logging
import os
import shlex
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Final, cast

import typer

from soklet_apps import conformance, demo
from soklet_apps.link_page import LINK_PAGE_PREFIX, LinkPage, LinkStore
from soklet_core.files import KeyringDocument, KeyringFileError, KeyringFileErrorReason, write_keyring_file
from soklet_core.files.fleet_file import check_instance_name, is_environment_name
from soklet_core.files.kek_source import KekSource
from soklet_core.fleet import parse_expected_fingerprint
from soklet_core.json import encode_wire
from soklet_core.keys import Fingerprint, KeyWrapError, KeyWrapper, ProtectionKey
from soklet_core.keys.fingerprint import CURRENT_FINGERPRINT_VERSION
from soklet_core.mcp import (
    HttpLimits,
    HttpOptions,
    McpServer,
    ProtocolOptions,
    Registry,
    ServerOptions,
    SessionOptions,
    TaskOptions,
)
from soklet_core.mcp.server.durable import (
    DEFAULT_TASK_TTL_MS,
    MAX_STORED_TASK_BYTES_PER_PARTITION,
    MAX_STORED_TASKS_PER_PARTITION,
)
from soklet_core.mcp.server.http import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEAD_BYTES,
    limited_uvicorn_config,
    uvicorn_config,
    uvicorn_server_class,
)
from soklet_core.mcp.server.http._runner import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEADER_TIMEOUT_SECONDS,
    DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS,
    MAX_CONNECTIONS_CEILING,
    MAX_HEAD_BYTES_CEILING,
    MAX_TIMEOUT_SECONDS,
    MIN_HEAD_BYTES,
    serve_together,
)
from soklet_core.mcp.server.http._transport import MalformedAuthority, parse_authority, parse_origin
from soklet_core.mcp.server.legacy._engine import (
    DEFAULT_INPUT_TIMEOUT_SECONDS,
    LEGACY_PROTOCOL_VERSIONS,
    MAX_INPUT_TIMEOUT_SECONDS,
    ProtocolEras,
)
from soklet_core.mcp.server.legacy._sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_SECONDS,
    MAX_SESSION_IDLE_SECONDS,
    MAX_SESSIONS_LIMIT,
)
from soklet_core.mcp.server.ops import (
    AdminApp,
    AdminTokenError,
    AdminTokens,
    KeyringFileWatcher,
    LiveKeyring,
    read_admin_tokens,
)
from soklet_core.mcp.server.ops._admin import check_admin_tls_key
from soklet_core.mcp.server.ops._live_keyring import DEFAULT_POLL_INTERVAL_SECONDS
from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.mcp.server.ops._readiness import ExpectedFingerprint, NotReady, Readiness
from soklet_core.mcp.server.ops._snapshot import new_process_id
from soklet_core.mcp.server.ops._store_keyring import HEARTBEAT_SECONDS, PROPAGATION_BOUND_SECONDS, StoreKeyring
from soklet_core.mcp.server.stdio._transport import StdioTransport, open_pipe_streams
from soklet_core.protection import ProtectionConfig
from soklet_core.protocol import (
    CLIENT_CAPABILITIES_META_KEY,
    DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS,
    DEFAULT_SHUTDOWN_GRACE_SECONDS,
    PROTOCOL_VERSION,
    PROTOCOL_VERSION_META_KEY,
)
from soklet_core.store import (
    MAX_QUOTA_VALUE,
    DurableStore,
    FleetKeyring,
    KeyringRepository,
    LoadedFleetKeyring,
    StoreError,
    StoreUrl,
    default_store_url,
    open_store,
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
from .exit_codes import ExitCode
from .kek_option import KekCommandOption, KekEnvOption, KekFileOption, kek_failure, kek_source, load_kek_or_exit
from .keyring_path import InsecureOption, load_document
from .log_lines import NonBlockingStderr
from .output import emit_json, fail, file_error_text, shown_path
from .store_option import StoreOption, run_on_store, shown_store, store_failure

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
_RELOAD_NOTE: Final = (
    f"reloaded on SIGHUP and when the file changes (checked every {DEFAULT_POLL_INTERVAL_SECONDS:g} s)"
)
_FOLLOW_NOTE: Final = (
    f"followed: a change in the store applies within {PROPAGATION_BOUND_SECONDS:g} s; "
    f"heartbeat every {HEARTBEAT_SECONDS:g} s"
)
#: The instance name when --instance is not given.
DEFAULT_INSTANCE: Final = "soklet"
_logger = logging.getLogger("soklet.serve")


class Fixtures(StrEnum):
    """Fixture sets ``--fixtures`` can add."""

    conformance = "conformance"


class LogLevel(StrEnum):
    """Log levels."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


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


def _free_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        fail(f"cannot listen on {shown_path(host)}:{port} ({error.strerror or 'error'})", ExitCode.IO)
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _load_app(reference: str) -> Registry:
    """The Registry ``--app module:object`` names: the object itself, or what calling it (with no argument)
    returns. The current folder is importable, as with uvicorn. Every failure is one sentence naming the module
    and the problem (the exception's type, never its text, which could hold anything the app knows): exit 2 when
    the reference is wrong (no such module or object, a factory that needs arguments, not a Registry), exit 1
    when the app's own code fails (importing the module or calling the factory raised)."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        fail("usage: --app takes module:object (e.g. myapp.mcp:registry)", ExitCode.USAGE)
    shown = shown_path(module_name)
    named = f"--app {shown_path(reference)}"
    # As uvicorn does: the folder the command runs in is where an app's module is looked for first.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (module_name == error.name or module_name.startswith(f"{error.name}.")):
            fail(f"{named}: no module named {shown} in the current folder or the Python path", ExitCode.USAGE)
        fail(f"{named}: importing module {shown} failed (ModuleNotFoundError in its own imports)", ExitCode.REFUSED)
    except (Exception, SystemExit) as error:  # the app's module raised while it was imported
        fail(f"{named}: importing module {shown} raised {type(error).__name__}", ExitCode.REFUSED)
    try:
        target: Any = getattr(module, attribute)
    except AttributeError:
        fail(f"{named}: module {shown} has no attribute {shown_path(attribute)}", ExitCode.USAGE)
    if callable(target) and not isinstance(target, Registry):
        needed = _required_parameters(target)
        if needed:
            fail(
                f"{named}: the factory in module {shown} needs arguments ({', '.join(needed)}); "
                "it must be callable with none",
                ExitCode.USAGE,
            )
        try:
            target = target()
        except (Exception, SystemExit) as error:  # the app's factory raised
            fail(f"{named}: the factory in module {shown} raised {type(error).__name__}", ExitCode.REFUSED)
    if not isinstance(target, Registry):
        fail(
            f"{named}: module {shown} gives {type(target).__name__}, not a Registry or a function returning one",
            ExitCode.USAGE,
        )
    return target


def _required_parameters(factory: Any) -> list[str]:
    """The names of the parameters ``factory`` cannot be called without (none when its signature is unknown)."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return []
    required = [
        shown_path(parameter.name)
        for parameter in parameters
        if parameter.default is inspect.Parameter.empty
        and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    return required


def _configure_logging(level: LogLevel) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger("soklet")
    root.handlers[:] = [handler]
    root.setLevel(level.value.upper())
    root.propagate = False


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
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port; 0 picks a free one.")] = 8765,
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
    ] = "127.0.0.1",
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
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="Log level.")] = LogLevel.info,
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

    **Exit codes**: 0 stopped (with --stdio: standard input ended); 1 the keyring was refused (store mode: the
    store holds no fleet keyring, or the KEK cannot be loaded or does not unwrap it), the store's schema is not one
    this soklet writes, or the --app module or factory raised; 2 usage (an admin listener
    without a usable token source, on the MCP port, non-loopback without TLS, or with --stdio included; a
    malformed store URL; an --app naming no module or object, a factory needing arguments, or no Registry); 3
    the keyring file, a token or TLS file, a port, the store, or (with --stdio) standard input or output is
    unusable.
    """
    if keyring is not None and dev_key:
        fail("usage: --keyring and --dev-key exclude each other", ExitCode.USAGE)
    kek = kek_source(kek_file, kek_env, kek_command)
    if keyring_from_store:
        _check_store_mode(
            keyring=keyring, dev_key=dev_key, store=store, kek=kek, stdio=stdio, expect=expect_fingerprint
        )
    elif kek is not None and keyring is None:
        fail(
            "usage: a KEK option (--kek-file, --kek-env, --kek-command) needs --keyring FILE (an encrypted keyring "
            "file) or --keyring-from-store",
            ExitCode.USAGE,
        )
    if stdio and expect_fingerprint is not None:
        fail(
            "usage: --expect-fingerprint cannot be used with --stdio (readiness is an HTTP answer; serve over HTTP "
            "to use it)",
            ExitCode.USAGE,
        )
    if stdio and admin_port is not None:
        fail(
            "usage: --admin-port cannot be used with --stdio (the admin API is an HTTP listener; serve over HTTP "
            "to use it)",
            ExitCode.USAGE,
        )
    admin = _admin_settings(
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
    limits = HttpLimits(
        max_head_bytes=max_head_bytes,
        header_timeout_seconds=_seconds(header_timeout),
        body_timeout_seconds=_seconds(body_timeout),
        keep_alive_timeout_seconds=_seconds(keep_alive_timeout),
        max_connections=max_connections,
        shutdown_grace_seconds=_seconds(shutdown_grace),
    )
    with contextlib.ExitStack() as stack:
        document: KeyringDocument | None = None
        keyring_file: Path | None = None
        fleet: _Fleet | None = None
        file_kek: KeyWrapper | None = None
        if keyring_from_store:
            assert store is not None
            assert kek is not None
            store_url = store
            fleet = _load_fleet(store_url, kek, allow_insecure=allow_insecure)
        else:
            if keyring is None:
                document, keyring_file = stack.enter_context(_dev_keyring())
            else:
                keyring_file = Path(keyring)
                # An encrypted keyring file: its keys unwrapped in memory, and the keys a change adds wrapped too.
                file_kek = None if kek is None else load_kek_or_exit(kek, allow_insecure=allow_insecure)
                document = load_document(keyring_file, allow_insecure_permissions=allow_insecure, kek=file_kek)
            store_url = _store_url(store, keyring_file if keyring is None else None)
            # Opened once before anything listens: an unreachable store or a foreign schema stops the start with
            # one line, not the first request. The server opens its own connections on its own event loop.
            run_on_store(store_url, _opened, must_exist=False)
        protocol_out = stack.enter_context(_protocol_stdout()) if stdio else None
        _serve(
            document,
            keyring_file,
            fleet=fleet,
            development=keyring is None and not keyring_from_store,
            limits=limits,
            host=host,
            port=port,
            app=app,
            fixtures=fixtures or [],
            state_lifetime=parse_duration(state_lifetime),
            state_rounds=state_rounds,
            log_level=log_level,
            as_json=as_json,
            admin=admin,
            instance=instance,
            fingerprint_version=fingerprint_version,
            expect_fingerprint=expect_fingerprint,
            file_kek=file_kek,
            allowed_hosts=allowed_hosts or [],
            allowed_origins=allowed_origins or [],
            allow_insecure_permissions=allow_insecure,
            store_url=store_url,
            tasks=_Tasks(
                ttl_ms=int(parse_duration(task_ttl) / timedelta(milliseconds=1)),
                max_per_partition=task_max_per_partition,
                max_bytes_per_partition=task_max_mib_per_partition * _MIB,
            ),
            sessions=_Sessions(
                eras=protocol,
                max_sessions=max_sessions,
                idle_seconds=parse_duration(session_idle_timeout, maximum=_MAX_SESSION_IDLE).total_seconds(),
                input_timeout_seconds=parse_duration(input_timeout, maximum=_MAX_INPUT_TIMEOUT).total_seconds(),
            ),
            protocol_out=protocol_out,
        )


# A docstring cannot be an f-string: the help's protocol version and reload interval are filled in from their one
# home here, before Typer reads the help.
serve.__doc__ = (
    (serve.__doc__ or "")
    .replace("{protocol_version}", PROTOCOL_VERSION)
    .replace("{poll_interval}", f"{DEFAULT_POLL_INTERVAL_SECONDS:g}")
    .replace("{legacy_versions}", ", ".join(LEGACY_PROTOCOL_VERSIONS))
    .replace("{propagation}", f"{PROPAGATION_BOUND_SECONDS:g}")
    .replace("{heartbeat}", f"{HEARTBEAT_SECONDS:g}")
)


def _store_url(option: StoreUrl | None, dev_keyring_file: Path | None) -> StoreUrl:
    """``--store`` if given; else, with the development key, a SQLite file in its private folder (deleted on exit);
    else the embedded default in the data folder."""
    if option is not None:
        return option
    if dev_keyring_file is not None:
        return sqlite_url(dev_keyring_file.parent / DEV_STORE_NAME)
    return default_store_url()


async def _opened(_store: DurableStore) -> None:
    """Nothing: opening the store (and creating its schema) is the check."""


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class _Fleet:
    """Store mode: the fleet keyring as loaded before serving, and the KEK that unwrapped it."""

    loaded: LoadedFleetKeyring
    wrapper: KeyWrapper


def _check_store_mode(
    *,
    keyring: str | None,
    dev_key: bool,
    store: StoreUrl | None,
    kek: KekSource | None,
    stdio: bool,
    expect: Fingerprint | None,
) -> None:
    """What ``--keyring-from-store`` needs and excludes (usage errors, exit 2, before anything is read)."""
    if keyring is not None or dev_key:
        fail(
            "usage: --keyring-from-store excludes --keyring and --dev-key (the keyring is the store's)", ExitCode.USAGE
        )
    if store is None:
        fail(
            "usage: --keyring-from-store needs --store URL (or $SOKLET_STORE): the store that holds it", ExitCode.USAGE
        )
    if kek is None:
        fail(
            "usage: --keyring-from-store needs the key-encryption key: --kek-file FILE, --kek-env VAR or "
            "--kek-command CMD",
            ExitCode.USAGE,
        )
    if stdio:
        fail("usage: --keyring-from-store cannot be used with --stdio (readiness is an HTTP answer)", ExitCode.USAGE)
    if expect is not None:
        fail(
            "usage: --expect-fingerprint is for a keyring file; with --keyring-from-store every member follows the "
            "store's generation",
            ExitCode.USAGE,
        )


def _load_fleet(url: StoreUrl, source: KekSource, *, allow_insecure: bool) -> _Fleet:
    """Load the KEK and the store's fleet keyring before anything listens, or end the start with one line: exit 1
    for a KEK that cannot be used or does not unwrap the keyring (nothing is written) and for a store without a
    fleet keyring; the store's own refusals as :func:`run_on_store` ends them."""
    wrapper = load_kek_or_exit(source, allow_insecure=allow_insecure)
    assert wrapper is not None

    async def load(store: DurableStore) -> LoadedFleetKeyring | None:
        # open_store's backends are both a DurableStore and a KeyringRepository.
        return await FleetKeyring(cast(KeyringRepository, store), wrapper).load()

    try:
        loaded = run_on_store(url, load)
    except KeyWrapError as error:
        kek_failure(source, error)
    if loaded is None:
        fail(
            f"store {shown_store(url)} holds no fleet keyring yet: create it first with soklet keys generate "
            "--store URL --kek-file FILE",
            ExitCode.REFUSED,
        )
    return _Fleet(loaded, wrapper)


@dataclasses.dataclass(frozen=True, slots=True)
class _Sessions:
    """The protocol eras and the 2025-era session bounds of ``soklet serve``."""

    eras: ProtocolEras
    max_sessions: int
    idle_seconds: float
    input_timeout_seconds: float


@dataclasses.dataclass(frozen=True, slots=True)
class _Tasks:
    """What ``soklet serve`` tells its task manager: every new task's ttlMs and what one partition may keep."""

    ttl_ms: int
    max_per_partition: int
    max_bytes_per_partition: int


@dataclasses.dataclass(frozen=True, slots=True)
class _AdminSettings:
    host: str
    port: int
    tokens: AdminTokens
    tls_cert: Path | None
    tls_key: Path | None


#: The secret-file refusals that --allow-insecure-permissions lifts (its hint is given with them).
_INSECURE_FILE_REASONS: Final = frozenset(
    {
        KeyringFileErrorReason.INSECURE_PERMISSIONS,
        KeyringFileErrorReason.UNTRUSTED_OWNER,
        KeyringFileErrorReason.UNTRUSTED_FOLDER,
    }
)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _admin_settings(
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
) -> _AdminSettings | None:
    """The admin listener's settings, checked before anything starts; ``None`` without ``--admin-port``."""
    if port is None:
        if token_file is not None or token_env is not None or tls_cert is not None or tls_key is not None:
            fail("usage: the admin options need --admin-port", ExitCode.USAGE)
        return None
    if port != 0 and port == mcp_port:
        fail("usage: --admin-port must differ from --port (the admin API never shares the MCP port)", ExitCode.USAGE)
    if token_file is None and token_env is None:
        fail(
            "usage: the admin listener needs a token source: --admin-token-file FILE or --admin-token-env VAR",
            ExitCode.USAGE,
        )
    if token_file is not None and token_env is not None:
        fail("usage: --admin-token-file and --admin-token-env exclude each other", ExitCode.USAGE)
    if (tls_cert is None) != (tls_key is None):
        fail("usage: --admin-tls-cert and --admin-tls-key go together", ExitCode.USAGE)
    if tls_cert is None and not _is_loopback(host) and not allow_insecure_admin:
        fail(
            "usage: a non-loopback --admin-host needs TLS: --admin-tls-cert and --admin-tls-key "
            "(or --allow-insecure-admin)",
            ExitCode.USAGE,
        )
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
    return _AdminSettings(host, port, tokens, tls_cert, tls_key)


def _serve(
    document: KeyringDocument | None,
    keyring_file: Path | None,
    *,
    fleet: _Fleet | None,
    development: bool,
    limits: HttpLimits,
    host: str,
    port: int,
    app: str | None,
    fixtures: list[Fixtures],
    state_lifetime: timedelta,
    state_rounds: int,
    log_level: LogLevel,
    as_json: bool,
    admin: _AdminSettings | None,
    instance: str,
    fingerprint_version: int,
    expect_fingerprint: Fingerprint | None,
    file_kek: KeyWrapper | None,
    allowed_hosts: list[str],
    allowed_origins: list[str],
    allow_insecure_permissions: bool,
    store_url: StoreUrl,
    tasks: _Tasks,
    sessions: _Sessions,
    protocol_out: BinaryIO | None,
) -> None:
    # The app first: a module that cannot be imported stops the start before anything listens or is opened.
    app_registry = None if app is None else _load_app(app)
    if fleet is not None:
        ring = fleet.loaded.keyring
    else:
        assert document is not None
        ring = document.keyring()
    config = ProtectionConfig(
        keyring=ring, maximum_request_state_lifetime=state_lifetime, maximum_request_state_rounds=state_rounds
    )
    # A stop requested while starting (before uvicorn listens for signals) must still end cleanly.
    early_stop: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda number, _frame: early_stop.append(number))
    sock = None if protocol_out is not None else _free_socket(host, port)
    bound_port = 0 if sock is None else sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    durable = open_store(store_url)
    development_store = development and keyring_file is not None and store_url == _store_url(None, keyring_file)
    registries: list[Registry] = []
    mounts: dict[str, LinkPage] = {}
    if Fixtures.conformance in fixtures:
        registries.append(conformance.build_registry())
    if app_registry is not None:
        registries.append(app_registry)
    else:
        # Over stdio no page is served: account.link keeps its default https base URL.
        served = development and sock is not None
        link_base = f"http://{url_host}:{bound_port}/link" if served else demo.DEFAULT_LINK_BASE_URL
        links = LinkStore()  # shared by account.link and the page it links to (mounted at /link/)
        registries.append(
            demo.build_registry(link_base_url=link_base, development=development, links=links, store=durable)
        )
        mounts[LINK_PAGE_PREFIX] = LinkPage(links)
    metrics = ServerMetrics(instance=instance)
    # One readiness for the whole instance: the MCP endpoint answers 503 while it holds the instance back, the
    # admin probes report it, and each part that can hold it back sets its own reason.
    readiness = Readiness() if fleet is None else Readiness(NotReady.KEYRING_NOT_LOADED)  # cleared by its load
    server = McpServer(
        Registry.merge(*registries),
        options=ServerOptions(
            protocol=ProtocolOptions(eras=sessions.eras),
            http=HttpOptions(allowed_hosts=tuple(allowed_hosts), allowed_origins=tuple(allowed_origins), limits=limits),
            sessions=SessionOptions(
                max_sessions=sessions.max_sessions,
                idle_seconds=sessions.idle_seconds,
                input_timeout_seconds=sessions.input_timeout_seconds,
            ),
            tasks=TaskOptions(
                ttl_ms=tasks.ttl_ms,
                max_per_partition=tasks.max_per_partition,
                max_bytes_per_partition=tasks.max_bytes_per_partition,
            ),
        ),
        protection=config,
        metrics=metrics,
        mounts=mounts,
        store=durable,
        readiness=readiness,
    )
    url = "stdio" if sock is None else f"http://{url_host}:{bound_port}{server.path}"
    manager = server.protection_keyring_manager
    assert manager is not None
    # What holds this instance back (a refused keyring file, ...): published as metrics at every scrape.
    metrics.watch_readiness(readiness)
    # This process's identity: what its admin snapshot and its store heartbeats report.
    process_id = new_process_id()
    admin_server: Any = None
    admin_sock: socket.socket | None = None
    admin_url: str | None = None
    if admin is not None:
        admin_sock = _free_socket(admin.host, admin.port)
        admin_host = f"[{admin.host}]" if ":" in admin.host else admin.host
        scheme = "https" if admin.tls_cert is not None else "http"
        admin_url = f"{scheme}://{admin_host}:{admin_sock.getsockname()[1]}"
    live: LiveKeyring | StoreKeyring
    watcher: KeyringFileWatcher | None = None
    if fleet is not None:
        follower = StoreKeyring(
            manager,
            FleetKeyring(durable, fleet.wrapper),
            fleet.loaded,
            readiness=readiness,
            instance=instance,
            process_id=process_id,
            max_state_lifetime=state_lifetime,
            admin_url=admin_url,
            metrics=metrics,
            fingerprint_version=fingerprint_version,
        )
        live = follower
        # SIGHUP loads the store's keyring now (it is followed anyway); installed before the facts are printed.
        signal.signal(signal.SIGHUP, lambda _number, _frame: follower.request_reload())
    else:
        live = LiveKeyring(
            manager,
            keyring_file,
            document=document,
            allow_insecure_permissions=allow_insecure_permissions,
            fingerprint_version=fingerprint_version,
            readiness=readiness,
            kek=file_kek,
        )
        # Installed before the start-up facts are printed: whoever reads them may send SIGHUP at once.
        file_watcher = watcher = KeyringFileWatcher(live)
        signal.signal(signal.SIGHUP, lambda _number, _frame: file_watcher.request_reload())
    # Scrapes read the keyring as this instance reports it (the fingerprint version included); every change is
    # seen at once too (the removed key ids that tell a retired-key refusal from an unknown-key one).
    metrics.watch_keyring(live.snapshot)
    live.add_observer(metrics.observe_keyring)
    metrics.watch_store(durable)
    if admin is not None:
        admin_app = AdminApp(
            live,
            admin.tokens,
            instance=instance,
            lifetime_ms=config.lifetime_ms,
            rounds=config.maximum_request_state_rounds,
            metrics=metrics,
            body_timeout_seconds=limits.body_timeout_seconds,
            store=durable,
            readiness=readiness,
            process_id=process_id,
        )
        tls: dict[str, Any] = {}
        if admin.tls_cert is not None:
            tls = {"ssl_certfile": str(admin.tls_cert), "ssl_keyfile": str(admin.tls_key)}
        admin_config = limited_uvicorn_config(admin_app, limits, log_level=log_level.value, **tls)
        try:
            admin_config.load()  # TLS files are read here: a bad one stops the start, not a running server
        except (OSError, ValueError) as error:
            fail(f"admin TLS: cannot load the certificate or key ({type(error).__name__})", ExitCode.IO)
        admin_server = uvicorn_server_class()(admin_config)
    reported = live.snapshot()
    fingerprint = reported.fingerprint
    active = reported.active_key_id
    # The example calls the demo's catalog.continue: printed only when the demo is what is served.
    commands = example_commands(url) if sock is not None and app_registry is None else []
    inspect_hint: str | None = None
    if keyring_file is not None:
        # A path that cannot be shown as it is (material-shaped, control characters) is named FILE in the hint.
        shown_file = shown_path(keyring_file, limit=None)
        shown_argument = shlex.quote(str(keyring_file)) if shown_file == str(keyring_file) else "FILE"
        inspect_hint = f"soklet inspect-state --keyring {shown_argument} TOKEN"
    keyring_note = _RELOAD_NOTE if fleet is None else _FOLLOW_NOTE
    if as_json:
        emit_json(
            {
                "url": url,
                "port": None if sock is None else bound_port,
                "protocol": sessions.eras.value,
                "development_key": development,
                "keyring_file": None if keyring_file is None else str(keyring_file),
                "keyring_from_store": fleet is not None,
                "fleet_generation": None if fleet is None else fleet.loaded.generation,
                "store": store_url.redacted,
                "store_backend": store_url.backend,
                "development_store": development_store,
                "active_key_id": active,
                "fingerprint": fingerprint.to_json(),
                "instance": instance,
                "expect_fingerprint": None if expect_fingerprint is None else expect_fingerprint.to_json(),
                "admin_url": admin_url,
                "admin_port": None if admin_sock is None else admin_sock.getsockname()[1],
                "inspect": inspect_hint,
                "example": commands,
            }
        )
    else:
        where = "over stdio (one JSON-RPC message per line; this text and the logs on stderr)" if sock is None else ""
        # The headline names the newest version served: with --protocol legacy that is a 2025 one.
        lines = [f"soklet serve: MCP {_served_versions(sessions.eras)[0]} {where or 'at ' + url}"]
        lines.append(f"protocol: {_eras_text(sessions.eras)}")
        if keyring_file is None:
            assert fleet is not None
            lines.append(f"keyring: the store's fleet keyring, generation {fleet.loaded.generation} ({keyring_note})")
        elif development:
            lines.append("keyring: EPHEMERAL development key (--dev-key): states die with this process")
            lines.append(f"dev keyring file (deleted on exit): {shown_path(keyring_file)}")
        else:
            lines.append(f"keyring: {shown_path(keyring_file)} ({keyring_note})")
        if development_store:
            lines.append(f"store: EPHEMERAL development store (sqlite, deleted on exit): {shown_store(store_url)}")
        else:
            lines.append(f"store: {shown_store(store_url)} ({store_url.backend})")
        lines.append(f"sealing key: {active}")
        lines.append(f"fingerprint: v{fingerprint.version} {fingerprint.profile} {fingerprint.value}")
        if expect_fingerprint is not None:
            expected = f"v{expect_fingerprint.version} {expect_fingerprint.value}"
            lines.append(f"expected fingerprint: {expected} (not ready while the keyring's differs)")
        if inspect_hint is not None:
            lines.append(f"inspect a token: {inspect_hint}")
        if admin_url is not None:
            lines.append(f"admin API: {admin_url} (instance {instance}; Authorization: Bearer TOKEN)")
        if commands:
            lines.append(EXAMPLE_START)
            lines.extend(commands)
            lines.append(EXAMPLE_END)
        sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    _configure_logging(log_level)
    _logger.info(
        "sealing with key %s, fingerprint v%d %s; keyring %s",
        active,
        fingerprint.version,
        fingerprint.value,
        keyring_note,
    )
    if expect_fingerprint is not None:
        # Checked now and after every reload or admin change; a mismatch holds the instance back (logged).
        expectation = ExpectedFingerprint(readiness, expect_fingerprint)

        def check_expected(_snapshot: object) -> None:
            expectation.check(live.manager.current())

        live.add_observer(check_expected)
    if watcher is not None:
        watcher.start()
    if protocol_out is not None:
        try:
            asyncio.run(_serve_stdio(server, protocol_out, early_stop))
        finally:
            if watcher is not None:
                watcher.stop()
        return
    assert sock is not None
    settings = uvicorn_config(server, log_level=log_level.value)
    primary = _quiet_server_class(early_stop)(settings)
    others = [] if admin_server is None else [(admin_server, [admin_sock])]
    try:
        # One event loop for the listeners and the store: a PostgreSQL pool belongs to the loop it was opened on.
        with asyncio.Runner(loop_factory=primary.config.get_loop_factory()) as runner:
            runner.run(_serve_http(server, primary, sock, others, live if isinstance(live, StoreKeyring) else None))
    finally:
        if watcher is not None:
            watcher.stop()


async def _serve_http(
    server: McpServer,
    primary: Any,
    sock: socket.socket,
    others: list[tuple[Any, list[Any]]],
    follower: StoreKeyring | None,
) -> None:
    """Open the store on the serving loop, follow the store's keyring (store mode), serve until stopped, then stop
    following, stop the task steps and close the store."""
    store = server.store
    following: asyncio.Task[None] | None = None
    try:
        if store is not None:
            try:
                await store.open()
            except StoreError as error:
                store_failure(store.url, error)
        if follower is not None:
            following = asyncio.get_running_loop().create_task(follower.run(), name="soklet-store-keyring")
        await serve_together(primary, [sock], others)
    finally:
        if following is not None:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following
        await _close_store(server)


async def _close_store(server: McpServer) -> None:
    """Stop the steps running here (their leases go back, so another instance, or this one restarted, runs them
    at once), then close the store. A store that fails now has nothing left to lose: the stop goes on."""
    manager = server.task_manager
    if manager is not None:
        with contextlib.suppress(StoreError):
            await manager.close()
    if server.store is not None:
        with contextlib.suppress(StoreError):
            await server.store.close()


@contextlib.contextmanager
def _protocol_stdout() -> Iterator[BinaryIO]:
    """Standard output for the protocol alone: the file of descriptor 1 is handed out on a descriptor of its own
    and descriptor 1 becomes standard error while the server runs, so the start-up facts, the logs and any stray
    ``print`` of an app land on stderr, never among protocol lines. Descriptor 1 is restored after."""
    sys.stdout.flush()
    saved = os.dup(1)
    protocol = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    try:
        yield protocol
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        protocol.close()


async def _serve_stdio(server: McpServer, protocol_out: BinaryIO, early_stop: list[int]) -> None:
    """Serve over standard input and ``protocol_out`` until the input ends or a stop signal comes (both exit 0).

    Standard input closed at start is an input that has already ended; a regular file or ``/dev/null`` is read as a
    pipe is. Requests still running at the end of the input get the shutdown grace to be answered. Log lines go
    to stderr without ever blocking the loop (:class:`~soklet_cli.log_lines.NonBlockingStderr`): a host that does
    not read stderr loses log lines, never answers or the stop signal."""
    if early_stop:
        return
    source = sys.stdin.buffer if sys.stdin is not None else None
    try:
        reader, writer = await open_pipe_streams(source, protocol_out)
    except (OSError, ValueError) as error:
        fail(
            f"--stdio cannot use standard input or output ({type(error).__name__})",
            ExitCode.IO,
        )
    loop = asyncio.get_running_loop()
    if server.task_manager is not None:
        server.task_manager.start()  # orphaned steps and expired tasks, as the HTTP server's lifespan start does
    transport = StdioTransport(server.legacy_protocol, server.options.http)
    with _stderr_never_blocks():
        serving = loop.create_task(transport.serve(reader, writer))
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, serving.cancel)
        try:
            await serving
        except asyncio.CancelledError:
            _logger.info("stop requested: running requests cancelled")
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            writer.close()
            await _close_store(server)


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


def _quiet_server_class(early_stop: list[int]) -> type[Any]:
    class QuietServer(uvicorn_server_class()):  # type: ignore[misc]
        """uvicorn's server, but a stop signal ends the process with exit 0 after the graceful shutdown.

        uvicorn re-raises the captured signal after shutting down, which turns a requested stop into exit 130
        (SIGINT) or death by SIGTERM; an operator asked for the stop, so it is a normal ending here.
        """

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            if early_stop:
                self.should_exit = True
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return QuietServer
