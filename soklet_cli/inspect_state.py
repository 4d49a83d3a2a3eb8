"""``soklet inspect-state``: what a sealed ``requestState`` holds, and why a retry would be refused."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, NoReturn

import typer
from rich.table import Table
from rich.text import Text

from soklet_core.json import JsonValue, canonical_bytes, canonical_text, parse, serialize
from soklet_core.keys import ProtectionKeyring
from soklet_core.mcp.server.admission import MAX_BEARER_TOKEN_CHARS
from soklet_core.mcp.server.durable._handles import looks_like_handle
from soklet_core.protection import (
    ANONYMOUS_PARTITION,
    DEFAULT_MAXIMUM_ENCODED_BYTES,
    BoundRequest,
    CheckStatus,
    EnvelopeHeader,
    OpeningDiagnosis,
    ProtectionConfig,
    Reason,
    RequestStateProtectionException,
    RequestStateSealer,
    SealedStateContents,
    partition_digest,
)
from soklet_core.protection.diagnosis import explain_checks, iso_time, params_differences, relative_time
from soklet_core.protocol import DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS

from ._common import (
    DEFAULT_LIFETIME,
    DEFAULT_PATH,
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
    parse_keyring,
)
from .auth_options import (
    AudienceOption,
    AuthArguments,
    AuthKind,
    AuthKindOption,
    ClientIdOption,
    ClientSecretFileOption,
    IntrospectionUrlOption,
    IssuerOption,
    JwksFileOption,
    JwksUrlOption,
    LeewayOption,
    PartitionClaimOption,
    RequiredScopeOption,
    SubjectClaimOption,
    auth_settings,
)
from .exit_codes import ExitCode
from .kek_option import KekCommandOption, KekEnvOption, KekFileOption, kek_from_options
from .keyring_path import KEYRING_ENV, InsecureOption, JsonOption, load_keyring
from .output import console, emit_exact_json, error_console, fail, read_input

if TYPE_CHECKING:
    from soklet_core.mcp.server.admission import Admission
    from soklet_core.mcp.server.auth import IntrospectionSettings, JwtSettings

#: Longest token text read (far above the 65,536-byte limit, so the size check itself can report it).
MAX_TOKEN_INPUT_BYTES: Final = 1024 * 1024

_NO_KEY_REASONS: Final = frozenset({Reason.UNKNOWN_KEY, Reason.AUTHENTICATION})
#: What a token of a durable handle's shape is, and what can be done with it (the handle itself is never shown:
#: it is a bearer continuation).
HANDLE_EXPLANATION: Final = (
    "not a sealed state: a durable application handle, the opaque reference an APPLICATION_PROTECTED tool (such "
    "as the demo's order.checkout) hands out as its requestState while the workflow's state stays in the "
    "server's store; it holds nothing to decrypt or check. A task id has the same shape: soklet tasks show ID "
    "--store URL shows a task. A handle's state is stored under the handle's SHA-256 and is never printed; soklet "
    "handles purge-expired --store URL deletes the expired ones."
)
#: Said on stderr before reading a token from a terminal, so that a bare ``soklet inspect-state`` does not look hung.
STDIN_NOTICE: Final = (
    "soklet inspect-state: waiting for the token on standard input "
    "(paste it, then press Enter and Ctrl-D; or give it as the TOKEN argument)"
)


def _canonical(value: JsonValue) -> JsonValue:
    # Canonical spelling (members sorted, numbers canonical) in the JSON output: exact numbers stay exact and
    # show as the digest sees them.
    return parse(canonical_bytes(value))


# ------------------------------------------------------------------------------------------ the command


def inspect_state(
    token_source: Annotated[
        str, typer.Argument(metavar="[TOKEN|-]", help="The requestState token; - (the default) reads stdin.")
    ] = "-",  # noqa: S107  # "-" means stdin, not a password
    keyring: Annotated[
        str | None,
        typer.Option(
            "--keyring",
            metavar="FILE",
            envvar=KEYRING_ENV,
            parser=parse_keyring,
            help="Keyring file to decrypt with (else $SOKLET_KEYRING); without one only the header is shown.",
        ),
    ] = None,
    request: Annotated[
        Path | None,
        typer.Option(
            "--request",
            metavar="FILE",
            parser=parse_file,
            help="The retry's JSON-RPC request: run every opening check.",
        ),
    ] = None,
    original: Annotated[
        Path | None,
        typer.Option(
            "--original-request",
            metavar="FILE",
            parser=parse_file,
            help="The request that emitted the state: names the params paths that differ from the retry.",
        ),
    ] = None,
    path: PathOption = DEFAULT_PATH,
    partition: PartitionOption = ANONYMOUS_PARTITION,
    protocol_version: ProtocolVersionOption = None,
    at: AtOption = None,
    lifetime: LifetimeOption = DEFAULT_LIFETIME,
    max_rounds: MaxRoundsOption = DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS,
    allow_insecure: InsecureOption = False,
    kek_file: KekFileOption = None,
    kek_env: KekEnvOption = None,
    kek_command: KekCommandOption = None,
    partition_token: Annotated[
        str | None,
        typer.Option(
            "--partition-from-token",
            metavar="JWT|@FILE",
            help=(
                "Bind the retry to the partition admission gives this bearer token (instead of --partition), "
                "verified with the --auth options as soklet serve would; @FILE reads it from a file (a token on "
                "the command line shows in the process list); the token is never printed."
            ),
        ),
    ] = None,
    subject_token: Annotated[
        str | None,
        typer.Option(
            "--subject-from-token",
            metavar="JWT|@FILE",
            help="Show the subject, partition and scopes admission gives this bearer token (@FILE: read from a "
            "file; never printed).",
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
    as_json: JsonOption = False,
) -> None:
    """Show what a sealed requestState holds, and whether (and why not) a retry would open it.

    Without a keyring: the envelope header (format version, key id, encoded and decoded sizes) and the key it
    needs. With **--keyring**: the binding (method, path, protocol version, partition digest, params digest),
    the round, issue and expiry times, the emitting request id and the application state. With
    **--request** (the retry) as well: every opening check the server runs, in order, each passed or failed
    and why, with the retry bound as the server binds it. Give **--lifetime** and **--max-rounds** when the server
    does not run with the defaults. Key material is never printed. A durable application handle (the opaque
    requestState of an APPLICATION_PROTECTED tool, its state kept in the server's store) is recognised and named,
    not decrypted (exit 1). Without TOKEN on a terminal, it says that it waits for the token on standard input.
    An encrypted keyring file is read given its key-encryption key (--kek-file, --kek-env or --kek-command).

    **From a bearer token**: **--partition-from-token JWT** runs the admission soklet serve runs with the same
    options (--auth jwt, the default with a token option: --issuer, --audience, --jwks-url or --jwks-file,
    --partition-claim, ...; or --auth introspection) and binds the retry to the partition it gives, so a
    binding-partition refusal can be traced to a token of another tenant; **--subject-from-token JWT** shows the
    subject, partition and scopes it gives. A refused token is named by its reason only (expired, wrong-audience,
    ...); the token itself is never printed.

    **Examples**

      soklet inspect-state AQcyMDI2LTA4...

      soklet inspect-state --keyring keyring.toml --request retry.json - < token.txt

      soklet inspect-state --keyring keyring.toml --request retry.json --original-request first.json --json TOKEN

      soklet inspect-state --keyring keyring.toml --request retry.json --issuer https://auth.example.com
      --audience https://mcp.example.com/mcp --jwks-url https://auth.example.com/jwks --partition-claim tenant
      --partition-from-token "$ACCESS_TOKEN" TOKEN

    **Exit codes**: 0 the state opens (for that retry, when given); 1 it would be refused, or it is a durable
    handle, not a sealed state, or admission refuses the --partition-from-token/--subject-from-token token; 2
    usage (also an option value outside its bounds, or a --request file that is not a JSON-RPC request); 3 a file
    could not be read, the output could not be written, or the token could not be checked (verifier-unavailable:
    its key set or introspection endpoint unreachable); 4 no key in the keyring can open it; 70 a bug in soklet.
    """
    if (request is not None or original is not None) and keyring is None:
        fail("--request and --original-request need --keyring FILE (the checks decrypt the state)", ExitCode.USAGE)
    if [token_source, str(request), str(original)].count("-") > 1:
        fail("only one of TOKEN, --request and --original-request can read stdin (-)", ExitCode.USAGE)
    from_stdin = token_source == "-"  # noqa: S105  # "-" means stdin, not a password
    if from_stdin and sys.stdin is not None and sys.stdin.isatty():
        error_console.print(Text(STDIN_NOTICE))
    raw = read_input(token_source, max_bytes=MAX_TOKEN_INPUT_BYTES) if from_stdin else None
    if raw is not None:
        try:
            token = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            token = raw.decode("latin-1").strip()
    else:
        token = token_source.strip()

    if looks_like_handle(token):
        _handle_view(len(token), as_json)

    admission: dict[str, Any] | None = None
    if partition_token is not None or subject_token is not None:
        if partition_token is not None and partition != ANONYMOUS_PARTITION:
            fail("--partition and --partition-from-token exclude each other", ExitCode.USAGE)
        settings = auth_settings(
            AuthArguments(
                # A token option says tokens are checked: JWT unless --auth names introspection.
                kind=AuthKind.jwt if auth is AuthKind.none else auth,
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
        assert settings is not None
        option = "--partition-from-token" if partition_token is not None else "--subject-from-token"
        admitted = _admit(settings, _bearer_text(partition_token or subject_token or ""), path, option, as_json)
        if partition_token is not None:
            partition = admitted.partition
        admission = {
            "from": option,
            "subject": admitted.identity.subject,
            "partition": admitted.partition,
            "partition_digest": partition_digest(admitted.partition),
            "scopes": None if admitted.scopes is None else sorted(admitted.scopes),
        }
        if not as_json:
            _admission_table(admission)
    elif auth is not AuthKind.none:
        fail("--auth and its options need --partition-from-token or --subject-from-token JWT", ExitCode.USAGE)

    header: EnvelopeHeader | None
    header_refusal: Reason | None = None
    try:
        header = EnvelopeHeader.read(token)
    except RequestStateProtectionException as error:
        header, header_refusal = None, error.reason
    encoded_size = len(token.encode("utf-8", "surrogatepass"))
    if encoded_size > DEFAULT_MAXIMUM_ENCODED_BYTES:
        header_refusal = Reason.ENCODED_TOO_LARGE

    document: dict[str, Any] = {
        "kind": "sealed-state",
        "header": _header_json(header, encoded_size),
        "header_refusal": header_refusal.value if header_refusal else None,
    }
    if admission is not None:
        document["admission"] = admission
    if keyring is None:
        _no_key_view(document, header, header_refusal, encoded_size, as_json)
        return

    kek = kek_from_options(kek_file, kek_env, kek_command, allow_insecure=allow_insecure)
    ring = load_keyring(Path(keyring), allow_insecure=allow_insecure, kek=kek)
    clock_ms = now_ms(at)
    config = ProtectionConfig(
        keyring=ring, maximum_request_state_lifetime=parse_duration(lifetime), maximum_request_state_rounds=max_rounds
    )
    sealer = RequestStateSealer(config, clock=lambda: clock_ms)

    retry: BoundRequest | None = None
    retry_value: JsonValue | None = None
    if request is not None:
        retry_value = load_request(request, "--request", code=ExitCode.USAGE)
        retry = bind(
            retry_value,
            "--request",
            path=path,
            partition=partition,
            protocol_version=protocol_version,
            code=ExitCode.USAGE,
        )
    diagnosis = sealer.diagnose(token, retry)
    contents = diagnosis.contents

    params_paths: list[str] | None = None
    params_note: str | None = None
    if original is not None and retry_value is not None and contents is not None:
        original_value = load_request(original, "--original-request", code=ExitCode.USAGE)
        original_bound = bind(
            original_value,
            "--original-request",
            path=path,
            partition=partition,
            protocol_version=protocol_version,
            code=ExitCode.USAGE,
        )
        params_paths = params_differences(original_value, retry_value)
        if original_bound.binding.params_digest != contents.binding.params_digest:
            params_note = "the --original-request does not match the sealed params digest either"
        elif params_paths:
            params_note = "differing params paths: " + ", ".join(params_paths)
    elif retry is not None and Reason.BINDING_PARAMS in diagnosis.failures:
        params_note = "give --original-request FILE to name the params paths that differ"

    refusal = diagnosis.first_failure
    code = ExitCode.OK
    if refusal is not None:
        code = ExitCode.NO_KEY if refusal in _NO_KEY_REASONS else ExitCode.REFUSED
    details = explain_checks(
        diagnosis,
        token=token,
        config=config,
        retry=retry,
        retry_partition=partition,
        params_note=params_note,
        retry_hint="give the retry with --request FILE",
    )
    checks = [
        {
            "check": check.step.value,
            "status": check.status.value,
            "reason": check.step.reason.value if check.status is CheckStatus.FAILED else None,
            "detail": detail,
        }
        for check, detail in zip(diagnosis.checks, details, strict=True)
    ]
    document.update(
        {
            "key": _key_json(header, ring),
            "at": {"ms": clock_ms, "iso": iso_time(clock_ms)},
            "sealed": _contents_json(contents, clock_ms),
            "retry": _retry_json(retry, partition),
            "checks": checks,
            "params_diff": params_paths,
            "opens": refusal is None,
            "refusal": refusal.value if refusal else None,
            "exit_code": int(code),
        }
    )
    if as_json:
        emit_exact_json(document)
    else:
        _human(document, diagnosis, contents, header)
    raise typer.Exit(int(code))


def _admit(
    settings: JwtSettings | IntrospectionSettings, bearer: str, path: str, option: str, as_json: bool
) -> Admission:
    """What the server's admission gives ``bearer`` on ``path`` (the policy soklet serve builds from the same
    settings), or the command ends naming the refusal's reason only: never the token."""
    from soklet_core.mcp.server.admission import AdmissionRefused, AdmissionRefusedReason, AdmissionRequest

    async def admit() -> Admission:
        policy = settings.policy()
        try:
            return await policy.admit(AdmissionRequest(path=path, headers={"authorization": f"Bearer {bearer}"}))
        finally:
            await policy.aclose()

    try:
        return asyncio.run(admit())
    except AdmissionRefused as error:
        reason = error.reason
        code = ExitCode.IO if reason is AdmissionRefusedReason.VERIFIER_UNAVAILABLE else ExitCode.REFUSED
        _admission_refused(option, reason.value, reason.description, code, as_json)


def _admission_refused(option: str, reason: str, description: str, code: ExitCode, as_json: bool) -> NoReturn:
    """End the command naming a refused token's reason (with --json as a document), never the token."""
    if as_json:
        emit_exact_json({"kind": "admission-refused", "from": option, "reason": reason, "exit_code": int(code)})
        raise typer.Exit(int(code))
    fail(f"{option}: admission refuses the token: {reason} ({description})", code)


def _bearer_text(value: str) -> str:
    """The token of a ``--*-from-token`` value: itself, or the contents of FILE for ``@FILE`` (bounded: a token
    longer than admission reads is refused by admission, with its reason, never shown)."""
    if not value.startswith("@"):
        return value.strip()
    if value == "@-":
        fail("a bearer token is read from a file (@FILE), not from stdin: stdin is the state's", ExitCode.USAGE)
    raw = read_input(value[1:], max_bytes=MAX_BEARER_TOKEN_CHARS + 2)
    return raw.decode("utf-8", "replace").strip()


def _admission_table(admission: dict[str, Any]) -> None:
    table = _pairs_table(f"Admission (from {admission['from']})")
    subject = admission["subject"]
    table.add_row("subject", Text("(anonymous)" if subject is None else subject))
    table.add_row("partition", Text(admission["partition"]))
    table.add_row("partition digest", admission["partition_digest"])
    scopes = admission["scopes"]
    table.add_row("scopes", Text("(unscoped)" if scopes is None else " ".join(scopes) or "(none)"))
    console.print(table)


def _header_json(header: EnvelopeHeader | None, encoded_size: int) -> dict[str, Any]:
    if header is None:
        return {"encoded_size": encoded_size, "version": None, "key_id": None, "decoded_size": None}
    return {
        "encoded_size": encoded_size,
        "version": header.version,
        "key_id": header.key_id,
        "decoded_size": header.decoded_size,
    }


def _key_json(header: EnvelopeHeader | None, ring: ProtectionKeyring) -> dict[str, Any] | None:
    if header is None:
        return None
    key = ring.key(header.key_id)
    role = None if key is None else ("active" if ring.is_active(header.key_id) else "verification")
    return {"id": header.key_id, "in_keyring": key is not None, "role": role, "keyring_ids": list(ring.key_ids)}


def _contents_json(contents: SealedStateContents | None, now: int) -> dict[str, object] | None:
    if contents is None:
        return None
    binding = contents.binding
    return {
        "binding": {
            "method": binding.method,
            "path": binding.path,
            "protocol_version": binding.protocol_version,
            "partition_digest": binding.partition_digest,
            "params_digest": binding.params_digest,
        },
        "round": contents.round,
        "issued_at": {"ms": contents.issued_at_ms, "iso": iso_time(contents.issued_at_ms)},
        "expires_at": {
            "ms": contents.expires_at_ms,
            "iso": iso_time(contents.expires_at_ms),
            "in_ms": contents.expires_at_ms - now,
            "relative": relative_time(contents.expires_at_ms - now),
            "expired": now >= contents.expires_at_ms,
        },
        "request_id": _canonical(contents.request_id),
        "state": _canonical(contents.state),
    }


def _retry_json(retry: BoundRequest | None, partition: str) -> dict[str, object] | None:
    if retry is None:
        return None
    binding = retry.binding
    return {
        "method": binding.method,
        "path": binding.path,
        "protocol_version": binding.protocol_version,
        "partition": partition,
        "partition_digest": partition_digest(partition),
        "params_digest": binding.params_digest,
        "request_id": _canonical(retry.request_id),
    }


def _handle_view(size: int, as_json: bool) -> None:
    code = ExitCode.REFUSED
    if as_json:
        emit_exact_json(
            {"kind": "durable-handle", "encoded_size": size, "detail": HANDLE_EXPLANATION, "exit_code": int(code)}
        )
    else:
        console.print(Text(f"durable application handle ({size} characters)", style="bold"))
        console.print(Text(HANDLE_EXPLANATION))
    raise typer.Exit(int(code))


def _no_key_view(
    document: dict[str, Any],
    header: EnvelopeHeader | None,
    refusal: Reason | None,
    encoded_size: int,
    as_json: bool,
) -> None:
    code = ExitCode.REFUSED if refusal is not None else ExitCode.OK
    document["needs_key"] = header.key_id if header is not None else None
    document["exit_code"] = int(code)
    if as_json:
        emit_exact_json(document)
        raise typer.Exit(int(code))
    table = _pairs_table("Envelope")
    if header is not None:
        table.add_row("format version", str(header.version))
        table.add_row("key id", Text(header.key_id))
        table.add_row("decoded size", f"{header.decoded_size:,} bytes")
    table.add_row("encoded size", f"{encoded_size:,} bytes")
    console.print(table)
    if refusal is not None:
        console.print(Text(f"refused without a key: {refusal.value}: {refusal.description}"))
    elif header is not None:
        console.print(Text(f"needs key {header.key_id!r}: pass --keyring FILE holding it to decrypt and check"))
    raise typer.Exit(int(code))


def _pairs_table(title: str) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    return table


_MARK: Final = {CheckStatus.PASSED: "pass", CheckStatus.FAILED: "FAIL", CheckStatus.NOT_RUN: "-"}


def _human(
    document: dict[str, Any],
    diagnosis: OpeningDiagnosis,
    contents: SealedStateContents | None,
    header: EnvelopeHeader | None,
) -> None:
    envelope = _pairs_table("Envelope")
    if header is not None:
        envelope.add_row("format version", str(header.version))
        envelope.add_row("key id", Text(header.key_id))
        envelope.add_row("decoded size", f"{header.decoded_size:,} bytes")
    envelope.add_row("encoded size", f"{document['header']['encoded_size']:,} bytes")
    console.print(envelope)
    if contents is not None:
        sealed = _pairs_table("Sealed state")
        binding = contents.binding
        sealed.add_row("method", Text(binding.method))
        sealed.add_row("path", Text(binding.path))
        sealed.add_row("protocol version", Text(binding.protocol_version))
        sealed.add_row("partition digest", binding.partition_digest)
        sealed.add_row("params digest", binding.params_digest)
        sealed.add_row("round", str(contents.round))
        since = relative_time(contents.issued_at_ms - diagnosis.now_ms)
        sealed.add_row("issued", f"{iso_time(contents.issued_at_ms)} ({since})")
        expired = "expired" if diagnosis.now_ms >= contents.expires_at_ms else "not expired"
        left = relative_time(contents.expires_at_ms - diagnosis.now_ms)
        sealed.add_row("expires", f"{iso_time(contents.expires_at_ms)} ({left}, {expired})")
        sealed.add_row("emitting request id", Text(serialize(contents.request_id)))
        console.print(sealed)
        console.print(Text("Application state", style="bold"))
        # Canonical text, not a pretty print through floats: 60-digit decimals must show exactly.
        console.print(Text(canonical_text(contents.state)))
    checks = Table(title=f"Opening checks as of {document['at']['iso']}", title_justify="left")
    checks.add_column("#", justify="right")
    checks.add_column("check")
    checks.add_column("result")
    checks.add_column("why", overflow="fold")
    for index, check in enumerate(document["checks"], start=1):
        mark = _MARK[CheckStatus(check["status"])]
        style = "red" if mark == "FAIL" else ("green" if mark == "pass" else "dim")
        checks.add_row(str(index), check["check"], Text(mark, style=style), Text(check["detail"]))
    console.print(checks)
    refusal = diagnosis.first_failure
    if refusal is None:
        console.print(Text("opens" + (" for this retry" if document["retry"] else "")))
    else:
        console.print(Text(f"refused: {refusal.value}: {refusal.description}"))
