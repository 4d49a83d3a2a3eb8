"""``soklet seal-state``: the token a server would emit for a request and an application state."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from soklet_core.json import MAX_REQUEST_BODY_BYTES, JsonError, parse
from soklet_core.protection import (
    ANONYMOUS_PARTITION,
    EnvelopeHeader,
    ProtectionConfig,
    RequestStateProtectionException,
    RequestStateSealer,
    SealedStateContents,
)
from soklet_core.protection.diagnosis import iso_time
from soklet_core.protocol import DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS

from ._common import (
    DEFAULT_LIFETIME,
    DEFAULT_PATH,
    MAX_ROUNDS,
    AtOption,
    LifetimeOption,
    MaxRoundsOption,
    PartitionOption,
    PathOption,
    ProtocolVersionOption,
    bind,
    load_request,
    now_ms,
    parse_duration,
    parse_file,
    parse_rounds,
)
from .exit_codes import ExitCode
from .kek_option import KekCommandOption, KekEnvOption, KekFileOption, kek_from_options
from .keyring_path import DEFAULT_KEYRING_FILE, InsecureOption, KeyringOption, load_keyring, resolve_keyring_path
from .output import emit_json, fail, read_input


def seal_state(
    request: Annotated[
        Path,
        typer.Option(
            "--request",
            metavar="FILE",
            parser=parse_file,
            help="The JSON-RPC request that emits the state (- for stdin).",
        ),
    ],
    state: Annotated[
        Path,
        typer.Option(
            "--state",
            metavar="FILE",
            parser=parse_file,
            help="The application state: one JSON document (- for stdin).",
        ),
    ],
    keyring: KeyringOption = DEFAULT_KEYRING_FILE,
    path: PathOption = DEFAULT_PATH,
    partition: PartitionOption = ANONYMOUS_PARTITION,
    protocol_version: ProtocolVersionOption = None,
    round_number: Annotated[
        int,
        typer.Option(
            "--round",
            metavar="N",
            parser=parse_rounds,
            help=f"The round to seal (1 = first emission; at most {MAX_ROUNDS:,}).",
        ),
    ] = 1,
    at: AtOption = None,
    lifetime: LifetimeOption = DEFAULT_LIFETIME,
    max_rounds: MaxRoundsOption = DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS,
    allow_insecure: InsecureOption = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON document (the token, key id, times, sizes and binding)."),
    ] = False,
) -> None:
    """Print the requestState token a server would emit for a request and an application state.

    Seals with the keyring's active key exactly as the server does: the binding (method, normalized path,
    protocol version, partition, stable params digest), round N, issued now (or --at), expiring one lifetime
    later, and the request's id as the emitting id. For tests and client development.

    **Examples**

      soklet seal-state --keyring keyring.toml --request call.json --state state.json

      echo '{"step": 2}' | soklet seal-state --request call.json --state - --round 2 --partition tenant-7

    **Exit codes**: 0 printed; 1 refused (the request or state is not valid, the state is too large, or
    --round exceeds --max-rounds); 2 usage (also an option value outside its bounds); 3 a file could not be read
    or the output could not be written; 70 a bug in soklet.
    """
    if str(request) == "-" and str(state) == "-":
        fail("--request and --state cannot both read stdin", ExitCode.USAGE)
    issued = now_ms(at)
    span = parse_duration(lifetime)
    kek = kek_from_options(kek_file, kek_env, kek_command, allow_insecure=allow_insecure)
    ring = load_keyring(resolve_keyring_path(keyring), allow_insecure=allow_insecure, kek=kek)
    request_value = load_request(request, "--request", code=ExitCode.REFUSED)
    bound = bind(
        request_value,
        "--request",
        path=path,
        partition=partition,
        protocol_version=protocol_version,
        code=ExitCode.REFUSED,
    )
    try:
        value = parse(read_input(str(state), max_bytes=MAX_REQUEST_BODY_BYTES))
    except JsonError as error:
        fail(f"--state: not strict JSON: {error}", ExitCode.REFUSED)
    if round_number > max_rounds:
        fail(f"refused: round {round_number} exceeds --max-rounds {max_rounds}", ExitCode.REFUSED)
    config = ProtectionConfig(
        keyring=ring, maximum_request_state_lifetime=span, maximum_request_state_rounds=max_rounds
    )
    sealer = RequestStateSealer(config, clock=lambda: issued)
    contents = SealedStateContents(
        bound.binding, round_number, issued, issued + config.lifetime_ms, bound.request_id, value
    )
    try:
        token = sealer.seal_contents(contents)
    except RequestStateProtectionException as error:
        fail(f"refused: {error}", ExitCode.REFUSED)
    if not as_json:
        sys.stdout.write(token + "\n")
        return
    header = EnvelopeHeader.read(token)
    emit_json(
        {
            "token": token,
            "key_id": header.key_id,
            "round": round_number,
            "issued_at": {"ms": issued, "iso": iso_time(issued)},
            "expires_at": {"ms": contents.expires_at_ms, "iso": iso_time(contents.expires_at_ms)},
            "encoded_size": header.encoded_size,
            "decoded_size": header.decoded_size,
            "binding": {
                "method": bound.binding.method,
                "path": bound.binding.path,
                "protocol_version": bound.binding.protocol_version,
                "partition_digest": bound.binding.partition_digest,
                "params_digest": bound.binding.params_digest,
            },
        }
    )
