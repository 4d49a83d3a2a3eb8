"""``soklet inspect-state``: what a sealed ``requestState`` holds, and why a retry would be refused."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.table import Table
from rich.text import Text

from soklet_core.json import (
    MAX_REQUEST_BODY_BYTES,
    JsonArray,
    JsonError,
    JsonObject,
    JsonValue,
    PythonJson,
    canonical_bytes,
    canonical_text,
    parse,
    serialize,
    stable_params,
)
from soklet_core.keys import ProtectionKeyring
from soklet_core.protection import (
    ANONYMOUS_PARTITION,
    DEFAULT_MAXIMUM_DECODED_BYTES,
    DEFAULT_MAXIMUM_ENCODED_BYTES,
    BoundRequest,
    CheckStatus,
    EnvelopeHeader,
    OpeningDiagnosis,
    OpeningStep,
    ProtectionConfig,
    ProtectionUsageError,
    Reason,
    RequestStateProtectionException,
    RequestStateSealer,
    SealedStateContents,
    bind_request,
    partition_digest,
)
from soklet_core.protocol import DEFAULT_ENDPOINT_PATH, DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS

from ._common import (
    DEFAULT_LIFETIME,
    AtOption,
    LifetimeOption,
    MaxRoundsOption,
    PartitionOption,
    PathOption,
    ProtocolVersionOption,
    duration_text,
    parse_duration,
    parse_file,
    parse_keyring,
)
from .exit_codes import ExitCode
from .keyring_path import KEYRING_ENV, InsecureOption, JsonOption, load_document
from .output import console, fail, read_input

#: Longest token text read (far above the 65,536-byte limit, so the size check itself can report it).
MAX_TOKEN_INPUT_BYTES: Final = 1024 * 1024
#: The endpoint path assumed when --path is not given: the server's default.
DEFAULT_PATH: Final = DEFAULT_ENDPOINT_PATH
#: At most this many differing JSON paths are listed for a params mismatch.
MAX_DIFF_PATHS: Final = 50

_NO_KEY_REASONS: Final = frozenset({Reason.UNKNOWN_KEY, Reason.AUTHENTICATION})


# ------------------------------------------------------------------------------------------ shared helpers


def iso(ms: int) -> str:
    """Epoch milliseconds as an ISO 8601 UTC time with milliseconds."""
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"


def relative(ms: int) -> str:
    """A signed span as words: ``in 14m 59s`` or ``3m 2s ago``."""
    span = abs(ms)
    days, rest = divmod(span // 1000, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours else []
    parts += [f"{minutes}m"] if minutes and not days else []
    parts += [f"{seconds}s"] if not days and not hours else []
    text = " ".join(parts) if parts else f"{span % 1000}ms"
    if ms == 0:
        return "now"
    return f"in {text}" if ms > 0 else f"{text} ago"


def load_request(path: Path, label: str, *, code: ExitCode) -> JsonValue:
    """A JSON-RPC request file (or ``-``), parsed strictly; exits with ``code`` if it is not JSON."""
    data = read_input(str(path), max_bytes=MAX_REQUEST_BODY_BYTES)
    try:
        return parse(data)
    except JsonError as error:
        fail(f"{label}: not strict JSON: {error}", code)


def bind(
    request: JsonValue, label: str, *, path: str, partition: str, protocol_version: str | None, code: ExitCode
) -> BoundRequest:
    """The request's binding and id as the server binds it (:func:`soklet_core.protection.bind_request`), or exit
    with ``code``."""
    try:
        return bind_request(request, path=path, partition=partition, protocol_version=protocol_version)
    except ProtectionUsageError as error:
        fail(f"{label}: {error}", code)


def load_keyring(path: Path, *, allow_insecure: bool) -> ProtectionKeyring:
    """The keyring of a keyring file, or exit 3 (I/O) / 1 (refused) with the file's error."""
    return load_document(path, allow_insecure_permissions=allow_insecure).keyring()


def json_document(document: Mapping[str, PythonJson]) -> str:
    """``document`` as one JSON text, written by the core codec (:func:`soklet_core.json.serialize`): members in
    their order, numbers as given. Value-model parts (a state, a request id) go in as :func:`canonical` values, so
    exact numbers stay exact and show as the digest sees them.

    The whole document is one value: nothing is substituted into text already serialized, so no value can stand in
    for another part.
    """
    return serialize(JsonValue.from_python(document))


def canonical(value: JsonValue) -> JsonValue:
    """``value`` spelled in canonical form (members sorted, numbers canonical): what the JSON output shows."""
    return parse(canonical_bytes(value))


# ------------------------------------------------------------------------------------------ params diff


def _pointer(parts: tuple[str, ...]) -> str:
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts) or "/"


def _differences(left: JsonValue | None, right: JsonValue | None, at: tuple[str, ...]) -> Iterator[str]:
    if isinstance(left, JsonObject) and isinstance(right, JsonObject):
        for name in sorted(set(left) | set(right)):
            yield from _differences(left.get(name), right.get(name), (*at, name))
    elif isinstance(left, JsonArray) and isinstance(right, JsonArray):
        for index in range(max(len(left), len(right))):
            yield from _differences(
                left[index] if index < len(left) else None,
                right[index] if index < len(right) else None,
                (*at, str(index)),
            )
    elif left != right:
        yield _pointer(at)


def params_differences(original: JsonValue, retry: JsonValue) -> list[str]:
    """JSON pointers (into ``params``) where the stable params of two requests differ (numbers by value).

    Both requests have been bound already, so their params are structured: :func:`soklet_core.json.stable_params`
    (the rule the digest hashes) does not refuse them.
    """
    paths = []
    for path in _differences(stable_params(original), stable_params(retry), ()):
        paths.append(path)
        if len(paths) >= MAX_DIFF_PATHS:
            break
    return paths


# ------------------------------------------------------------------------------------------ explanations


def _explain(
    step: OpeningStep,
    status: CheckStatus,
    *,
    token: str,
    header: EnvelopeHeader | None,
    keyring: ProtectionKeyring,
    contents: SealedStateContents | None,
    retry: BoundRequest | None,
    retry_partition: str,
    now: int,
    max_rounds: int,
    max_lifetime: timedelta,
    params_note: str | None,
) -> str:
    passed = status is CheckStatus.PASSED
    if status is CheckStatus.NOT_RUN:
        if step.name.startswith("BINDING") or step is OpeningStep.REQUEST_ID:
            return "not run: give the retry with --request FILE" if retry is None or contents is None else "not run"
        return "not run: an earlier check failed"
    if step is OpeningStep.ENCODED_SIZE:
        size = len(token.encode("utf-8", "surrogatepass"))
        limit = DEFAULT_MAXIMUM_ENCODED_BYTES
        return f"{size:,} of {limit:,} bytes" if passed else f"{size:,} bytes exceeds the {limit:,}-byte limit"
    if step is OpeningStep.BASE64URL:
        return "canonical unpadded base64url" if passed else "not canonical unpadded base64url text"
    if step is OpeningStep.VERSION:
        return "envelope version 1" if passed else "the first byte is not envelope version 1"
    if step is OpeningStep.KEY_ID:
        if header is None:
            return "the envelope has no well-formed key id"
        if passed:
            role = "active" if keyring.is_active(header.key_id) else "verification-only"
            return f"key {header.key_id!r} is in the keyring ({role})"
        return f"no key {header.key_id!r} in the keyring (it holds {', '.join(keyring.key_ids)})"
    if step is OpeningStep.AUTHENTICATION:
        kid = header.key_id if header is not None else "?"
        if passed:
            return f"AES-256-GCM tag verified under key {kid!r}"
        return (
            f"the tag did not verify: the token was altered, or key {kid!r} in this keyring has other material "
            "than the key that sealed it"
        )
    if step is OpeningStep.DECODED_SIZE:
        size = header.decoded_size if header is not None else 0
        limit = DEFAULT_MAXIMUM_DECODED_BYTES
        return f"{size:,} of {limit:,} bytes" if passed else f"{size:,} bytes exceeds the {limit:,}-byte limit"
    if step is OpeningStep.JSON:
        return "the sealed-state schema" if passed else "the plaintext is not the sealed-state schema"
    assert contents is not None
    if step is OpeningStep.EXPIRY:
        left = contents.expires_at_ms - now
        if passed:
            return f"expires {iso(contents.expires_at_ms)}, {relative(left)}"
        if left > 0:
            return f"its lifetime exceeds the {duration_text(max_lifetime)} maximum"
        return f"expired {iso(contents.expires_at_ms)}, {relative(left)}"
    if step is OpeningStep.ROUND:
        if passed:
            return f"round {contents.round} of at most {max_rounds}"
        return f"round {contents.round} is outside 1…{max_rounds}"
    assert retry is not None
    sealed, wanted = contents.binding, retry.binding
    if step is OpeningStep.BINDING_METHOD:
        return f"{sealed.method}" if passed else f"sealed for {sealed.method!r}, the retry calls {wanted.method!r}"
    if step is OpeningStep.BINDING_PATH:
        return f"{sealed.path}" if passed else f"sealed for path {sealed.path!r}, the retry is on {wanted.path!r}"
    if step is OpeningStep.BINDING_PROTOCOL_VERSION:
        if passed:
            return sealed.protocol_version
        return f"sealed for {sealed.protocol_version!r}, the retry speaks {wanted.protocol_version!r}"
    if step is OpeningStep.BINDING_PARTITION:
        if passed:
            return f"partition {retry_partition!r}"
        return (
            f"the retry's partition {retry_partition!r} (digest {wanted.partition_digest}) is not the sealed "
            f"partition (digest {sealed.partition_digest})"
        )
    if step is OpeningStep.BINDING_PARAMS:
        if passed:
            return f"stable params digest {sealed.params_digest}"
        note = f"; {params_note}" if params_note else ""
        return f"stable params differ: sealed digest {sealed.params_digest}, retry {wanted.params_digest}{note}"
    emitter = serialize(contents.request_id)
    if passed:
        return f"retry id {serialize(retry.request_id)} differs from the emitting id {emitter}"
    return f"the retry reuses the emitting request id {emitter}"


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
    as_json: JsonOption = False,
) -> None:
    """Show what a sealed requestState holds, and whether (and why not) a retry would open it.

    Without a keyring: the envelope header (format version, key id, encoded and decoded sizes) and the key it
    needs. With **--keyring**: the binding (method, path, protocol version, partition digest, params digest),
    the round, issue and expiry times, the emitting request id and the application state. With
    **--request** (the retry) as well: every opening check the server runs, in order, each passed or failed
    and why, with the retry bound as the server binds it. Give **--lifetime** and **--max-rounds** when the server
    does not run with the defaults. Key material is never printed.

    **Examples**

      soklet inspect-state AQcyMDI2LTA4...

      soklet inspect-state --keyring keyring.toml --request retry.json - < token.txt

      soklet inspect-state --keyring keyring.toml --request retry.json --original-request first.json --json TOKEN

    **Exit codes**: 0 the state opens (for that retry, when given); 1 it would be refused; 2 usage (also an option
    value outside its bounds, or a --request file that is not a JSON-RPC request); 3 a file could not be read or
    the output could not be written; 4 no key in the keyring can open it; 70 a bug in soklet.
    """
    if (request is not None or original is not None) and keyring is None:
        fail("--request and --original-request need --keyring FILE (the checks decrypt the state)", ExitCode.USAGE)
    if [token_source, str(request), str(original)].count("-") > 1:
        fail("only one of TOKEN, --request and --original-request can read stdin (-)", ExitCode.USAGE)
    from_stdin = token_source == "-"  # noqa: S105  # "-" means stdin, not a password
    raw = read_input(token_source, max_bytes=MAX_TOKEN_INPUT_BYTES) if from_stdin else None
    if raw is not None:
        try:
            token = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            token = raw.decode("latin-1").strip()
    else:
        token = token_source.strip()

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
        "header": _header_json(header, encoded_size),
        "header_refusal": header_refusal.value if header_refusal else None,
    }
    if keyring is None:
        _no_key_view(document, header, header_refusal, encoded_size, as_json)
        return

    ring = load_keyring(Path(keyring), allow_insecure=allow_insecure)
    clock_ms = at if at is not None else int(datetime.now(UTC).timestamp() * 1000)
    config = (
        ProtectionConfig.with_keyring(ring)
        .maximum_request_state_lifetime(parse_duration(lifetime))
        .maximum_request_state_rounds(max_rounds)
        .build()
    )
    sealer = RequestStateSealer.for_server(config, clock=lambda: clock_ms)

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
    checks = [
        {
            "check": check.step.value,
            "status": check.status.value,
            "reason": check.step.reason.value if check.status is CheckStatus.FAILED else None,
            "detail": _explain(
                check.step,
                check.status,
                token=token,
                header=header,
                keyring=ring,
                contents=contents,
                retry=retry,
                retry_partition=partition,
                now=clock_ms,
                max_rounds=max_rounds,
                max_lifetime=config.maximum_request_state_lifetime,
                params_note=params_note,
            ),
        }
        for check in diagnosis.checks
    ]
    document.update(
        {
            "key": _key_json(header, ring),
            "at": {"ms": clock_ms, "iso": iso(clock_ms)},
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
        sys.stdout.write(json_document(document) + "\n")
    else:
        _human(document, diagnosis, contents, header)
    raise typer.Exit(int(code))


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
        "issued_at": {"ms": contents.issued_at_ms, "iso": iso(contents.issued_at_ms)},
        "expires_at": {
            "ms": contents.expires_at_ms,
            "iso": iso(contents.expires_at_ms),
            "in_ms": contents.expires_at_ms - now,
            "relative": relative(contents.expires_at_ms - now),
            "expired": now >= contents.expires_at_ms,
        },
        "request_id": canonical(contents.request_id),
        "state": canonical(contents.state),
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
        "request_id": canonical(retry.request_id),
    }


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
        sys.stdout.write(json_document(document) + "\n")
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
        sealed.add_row("issued", f"{iso(contents.issued_at_ms)} ({relative(contents.issued_at_ms - diagnosis.now_ms)})")
        expired = "expired" if diagnosis.now_ms >= contents.expires_at_ms else "not expired"
        left = relative(contents.expires_at_ms - diagnosis.now_ms)
        sealed.add_row("expires", f"{iso(contents.expires_at_ms)} ({left}, {expired})")
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
