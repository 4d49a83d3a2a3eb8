"""``soklet serve``: run a real MCP 2026-07-28 server locally with input-required tools."""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import shlex
import signal
import socket
import sys
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from soklet_core.keys import Fingerprint, ProtectionKey, ProtectionKeyring
from soklet_core.mcp import McpServer, Registry, RegistryBuilder
from soklet_core.protection import ProtectionConfig

from ._common import check_duration, parse_duration
from .apps import conformance, demo
from .exit_codes import ExitCode
from .keyring_path import InsecureOption, load_document
from .output import emit_json, fail

__all__ = ["DEV_KEY_ID", "EXAMPLE_TOOL", "Fixtures", "LogLevel", "example_commands", "serve"]

#: The id of the ephemeral development key.
DEV_KEY_ID: Final = "dev-ephemeral"
#: The tool the printed example calls.
EXAMPLE_TOOL: Final = "catalog.continue"
_PROTOCOL_VERSION: Final = "2026-07-28"


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
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    headers = [
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"MCP-Protocol-Version: {_PROTOCOL_VERSION}",
        "Mcp-Method: tools/call",
        f"Mcp-Name: {EXAMPLE_TOOL}",
    ]
    parts = ["curl", "-sS", url] + [item for header in headers for item in ("-H", shlex.quote(header))]
    text = json.dumps(body, separators=(",", ":"))
    return " ".join([*parts, "-d", shlex.quote(text)])


def example_commands(url: str) -> list[str]:
    """Shell lines (bash) that call ``catalog.continue``, get ``input_required``, then retry with the answer."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": _PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
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
        fail(f"cannot listen on {host}:{port} ({error.strerror or 'error'})", ExitCode.IO)
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _load_app(reference: str) -> Registry:
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        fail("usage: --app takes module:object", ExitCode.USAGE)
    try:
        target: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        fail(f"cannot load --app {reference} ({type(error).__name__})", ExitCode.USAGE)
    if callable(target) and not isinstance(target, Registry):
        target = target()
    if not isinstance(target, Registry):
        fail("--app must name a Registry or a function returning one", ExitCode.USAGE)
    return target


def _combine(registries: list[Registry]) -> Registry:
    builder = RegistryBuilder()
    for registry in registries:
        for tool in registry.tools:
            builder.add(tool)
        for prompt in registry.prompts:
            builder.add(prompt)
        for resource in registry.resources:
            builder.add(resource)
        for template in registry.resource_templates:
            builder.add(template)
    for registry in registries:
        for completion in registry.completions:
            builder.add(completion)
    return builder.build()


def _configure_logging(level: LogLevel) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger("soklet")
    root.handlers[:] = [handler]
    root.setLevel(level.value.upper())
    root.propagate = False


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port; 0 picks a free one.")] = 8765,
    keyring: Annotated[
        Path | None, typer.Option("--keyring", metavar="FILE", help="Keyring file for framework-protected state.")
    ] = None,
    dev_key: Annotated[
        bool, typer.Option("--dev-key", help="Use an ephemeral key (the default without --keyring).")
    ] = False,
    app: Annotated[
        str | None, typer.Option("--app", metavar="MODULE:OBJECT", help="Serve this Registry instead of the demo.")
    ] = None,
    fixtures: Annotated[
        list[Fixtures] | None, typer.Option("--fixtures", help="Add a fixture set (conformance).")
    ] = None,
    state_lifetime: Annotated[
        str, typer.Option("--state-lifetime", callback=check_duration, help="Maximum request-state lifetime.")
    ] = "15m",
    state_rounds: Annotated[int, typer.Option("--state-rounds", min=1, help="Maximum request-state rounds.")] = 10,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="Log level.")] = LogLevel.info,
    allow_insecure: InsecureOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the start-up facts as one JSON document.")] = False,
) -> None:
    """Serve MCP 2026-07-28 over HTTP: the demo app (catalog.continue and friends), or your own.

    At start it prints the URL, the keyring fingerprint and a copy-paste example: the first request gets
    **input_required** from catalog.continue, the retry with the answer and the state completes it. Without
    --keyring an ephemeral development key is used and announced; states sealed with it die with the process.
    Stop with Ctrl-C (SIGINT) or SIGTERM: in-flight requests finish first.

    **Examples**

      soklet serve

      soklet serve --port 0 --fixtures conformance

      soklet serve --keyring /etc/soklet/keyring.toml --app myapp.mcp:registry --state-lifetime 10m

    **Exit codes**: 0 stopped; 1 the keyring was refused; 2 usage; 3 the keyring file or the port is unusable.
    """
    import uvicorn  # imported here: every other command starts faster without it

    if keyring is not None and dev_key:
        fail("usage: --keyring and --dev-key exclude each other", ExitCode.USAGE)
    development = keyring is None
    if development:
        ring = ProtectionKeyring.with_active_key(ProtectionKey.generate(DEV_KEY_ID)).build()
    else:
        assert keyring is not None
        ring = load_document(keyring, allow_insecure_permissions=allow_insecure).keyring()
    config = (
        ProtectionConfig.with_keyring(ring)
        .maximum_request_state_lifetime(parse_duration(state_lifetime))
        .maximum_request_state_rounds(state_rounds)
        .build()
    )
    # A stop requested while starting (before uvicorn listens for signals) must still end cleanly.
    early_stop: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda number, _frame: early_stop.append(number))
    sock = _free_socket(host, port)
    bound_port = sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    url = f"http://{url_host}:{bound_port}/mcp"
    registries: list[Registry] = []
    if Fixtures.conformance in (fixtures or []):
        registries.append(conformance.build_registry())
    if app is not None:
        registries.append(_load_app(app))
    else:
        link_base = f"http://{url_host}:{bound_port}/link" if development else demo.DEFAULT_LINK_BASE_URL
        registries.append(demo.build_registry(link_base_url=link_base, development=development))
    server = McpServer.builder(_combine(registries)).protection_config(config).build()
    fingerprint = Fingerprint.of(ring)
    commands = example_commands(url)
    if as_json:
        emit_json(
            {
                "url": url,
                "port": bound_port,
                "development_key": development,
                "fingerprint": fingerprint.to_json(),
                "example": commands,
            }
        )
    else:
        lines = [f"soklet serve: MCP 2026-07-28 at {url}"]
        if development:
            lines.append("keyring: EPHEMERAL development key (--dev-key): states die with this process")
        else:
            lines.append(f"keyring: {keyring}")
        lines.append(f"fingerprint: v{fingerprint.version} {fingerprint.profile} {fingerprint.value}")
        lines.append(f"try it (bash): call {EXAMPLE_TOOL}, get input_required, then retry with the answer:")
        lines.append("--- example ---")
        lines.extend(commands)
        lines.append("--- end ---")
        sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    _configure_logging(log_level)
    uvicorn_config = uvicorn.Config(
        server.asgi_app(),
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level=log_level.value,
        timeout_graceful_shutdown=10,
    )
    _quiet_server_class(early_stop)(uvicorn_config).run(sockets=[sock])


def _quiet_server_class(early_stop: list[int]) -> type[Any]:
    import uvicorn

    class QuietServer(uvicorn.Server):
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
