"""Why a token opens or not, in words: one sentence per opening check, and where two requests' params differ.

:meth:`RequestStateSealer.diagnose <soklet_core.protection.RequestStateSealer.diagnose>` runs the opening checks
and says which passed; this module says why, for an operator reading ``soklet inspect-state`` or a log:

>>> from soklet_core.json import parse
>>> first = parse(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":1,"b":[1,2]}}')
>>> retry = parse(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"a":1.0,"b":[1,3]}}')
>>> params_differences(first, retry)
['/b/1']

Sentences name only what the operator already holds or may see: sizes, key ids, digests, times, the retry's
partition as the caller gave it, request ids; never key material, the sealed state, or params values. No
terminal or rendering concerns live here (the CLI adds its tables and colours).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Final

from soklet_core.json import JsonArray, JsonObject, JsonValue, serialize, stable_params

from .binding import BoundRequest
from .config import ProtectionConfig
from .durations import duration_text
from .envelope import EnvelopeHeader
from .errors import RequestStateProtectionException
from .sealer import MAX_ISSUED_AT_SKEW, CheckStatus, OpeningDiagnosis, OpeningStep, SealedStateContents

__all__ = [
    "MAX_DIFF_PATHS",
    "duration_text",
    "explain_checks",
    "iso_time",
    "params_differences",
    "relative_time",
]

#: At most this many differing JSON pointers are listed for a params mismatch.
MAX_DIFF_PATHS: Final = 50
# The checks that compare the sealed state with a retry: without one they are never run.
_RETRY_STEPS: Final = frozenset(
    {
        OpeningStep.BINDING_METHOD,
        OpeningStep.BINDING_PATH,
        OpeningStep.BINDING_PROTOCOL_VERSION,
        OpeningStep.BINDING_PARTITION,
        OpeningStep.BINDING_PARAMS,
        OpeningStep.REQUEST_ID,
    }
)


# ------------------------------------------------------------------------------------------ times in words


def iso_time(moment: int | datetime) -> str:
    """A time as the wire, the CLI and the diagnosis write it: ISO 8601 in UTC with milliseconds and ``Z``
    (``2026-08-01T00:00:00.000Z``), from epoch milliseconds or an aware ``datetime``; milliseconds no calendar
    can spell stay ``<ms> ms``."""
    if isinstance(moment, datetime):
        moment = moment.astimezone(UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    try:
        return datetime.fromtimestamp(moment / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return f"{moment} ms"


def relative_time(ms: int) -> str:
    """A signed span in milliseconds as words, coarser as it grows: ``in 14m 59s``, ``3m 2s ago``, ``in 2d``."""
    if ms == 0:
        return "now"
    span = abs(ms)
    days, rest = divmod(span // 1000, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours else []
    parts += [f"{minutes}m"] if minutes and not days else []
    parts += [f"{seconds}s"] if not days and not hours else []
    text = " ".join(parts) if parts else f"{span % 1000}ms"
    return f"in {text}" if ms > 0 else f"{text} ago"


# ------------------------------------------------------------------------------------------ params diff


def _pointer(parts: tuple[str, ...]) -> str:
    # RFC 6901: "~" before "/", so an escape is never read as the other.
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


def params_differences(original: JsonValue, retry: JsonValue, *, limit: int = MAX_DIFF_PATHS) -> list[str]:
    """JSON pointers (into ``params``) where the stable params of two JSON-RPC requests differ, at most ``limit``,
    in name and index order. Numbers compare by value (``1`` and ``1.0`` agree, as the digest has them).

    The params are taken by the rule the params digest hashes (:func:`soklet_core.json.stable_params`), so the
    members the digest leaves out never show; it raises ``JsonError`` for a request whose params are not
    structured, as binding does.
    """
    paths: list[str] = []
    if limit <= 0:
        return paths
    for path in _differences(stable_params(original), stable_params(retry), ()):
        paths.append(path)
        if len(paths) >= limit:
            break
    return paths


# ------------------------------------------------------------------------------------------ explanations


def explain_checks(
    diagnosis: OpeningDiagnosis,
    *,
    token: str,
    config: ProtectionConfig,
    retry: BoundRequest | None = None,
    retry_partition: str | None = None,
    params_note: str | None = None,
    retry_hint: str = "give the retry",
) -> tuple[str, ...]:
    """One sentence per check of ``diagnosis``, in its order: why each passed, failed or was not run.

    ``token``, ``config`` and ``retry`` are what the diagnosis ran with; ``retry_partition`` is the retry's
    partition as the caller knows it (a binding holds only its digest), and ``params_note`` is appended to a
    params mismatch (such as the differing paths from :func:`params_differences`). ``retry_hint`` says how to give
    a retry, for the checks not run without one (a command names its option).
    """
    try:
        header: EnvelopeHeader | None = EnvelopeHeader.read(token)
    except RequestStateProtectionException:
        header = None
    return tuple(
        _explain(
            check.step,
            check.status,
            token=token,
            header=header,
            config=config,
            contents=diagnosis.contents,
            retry=retry,
            retry_partition=retry_partition,
            now=diagnosis.now_ms,
            params_note=params_note,
            retry_hint=retry_hint,
        )
        for check in diagnosis.checks
    )


def _explain(
    step: OpeningStep,
    status: CheckStatus,
    *,
    token: str,
    header: EnvelopeHeader | None,
    config: ProtectionConfig,
    contents: SealedStateContents | None,
    retry: BoundRequest | None,
    retry_partition: str | None,
    now: int,
    params_note: str | None,
    retry_hint: str,
) -> str:
    passed = status is CheckStatus.PASSED
    if status is CheckStatus.NOT_RUN:
        if step in _RETRY_STEPS:
            return f"not run: {retry_hint}" if retry is None or contents is None else "not run"
        return "not run: an earlier check failed"
    if step is OpeningStep.ENCODED_SIZE:
        size = len(token.encode("utf-8", "surrogatepass"))
        limit = config.maximum_encoded_bytes
        return f"{size:,} of {limit:,} bytes" if passed else f"{size:,} bytes exceeds the {limit:,}-byte limit"
    if step is OpeningStep.BASE64URL:
        return "canonical unpadded base64url" if passed else "not canonical unpadded base64url text"
    if step is OpeningStep.VERSION:
        return "envelope version 1" if passed else "the first byte is not envelope version 1"
    if step is OpeningStep.KEY_ID:
        return _key_id(header, config, passed)
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
        limit = config.maximum_decoded_bytes
        return f"{size:,} of {limit:,} bytes" if passed else f"{size:,} bytes exceeds the {limit:,}-byte limit"
    if step is OpeningStep.JSON:
        return "the sealed-state schema" if passed else "the plaintext is not the sealed-state schema"
    # Every check from here on ran on a decoded state (the diagnosis stops before them otherwise).
    assert contents is not None
    if step is OpeningStep.EXPIRY:
        left = contents.expires_at_ms - now
        if passed:
            return f"expires {iso_time(contents.expires_at_ms)}, {relative_time(left)}"
        return f"expired {iso_time(contents.expires_at_ms)}, {relative_time(left)}"
    if step is OpeningStep.ISSUED_AT:
        issued = f"issued {iso_time(contents.issued_at_ms)}, {relative_time(contents.issued_at_ms - now)}"
        return issued if passed else f"{issued}, beyond the {duration_text(MAX_ISSUED_AT_SKEW)} clock-skew bound"
    if step is OpeningStep.LIFETIME:
        maximum = duration_text(config.maximum_request_state_lifetime)
        lifetime = contents.expires_at_ms - contents.issued_at_ms
        if lifetime <= 0:
            return "it expires no later than it was issued"
        spelled = duration_text(timedelta(milliseconds=lifetime))
        return (
            f"lifetime {spelled} of at most {maximum}"
            if passed
            else f"its lifetime of {spelled} exceeds the {maximum} maximum"
        )
    if step is OpeningStep.ROUND:
        max_rounds = config.maximum_request_state_rounds
        if passed:
            return f"round {contents.round} of at most {max_rounds}"
        return f"round {contents.round} is outside 1…{max_rounds}"
    # And from here on, against a retry (they are not run without one).
    assert retry is not None
    return _binding(step, passed, contents, retry, retry_partition, params_note)


def _key_id(header: EnvelopeHeader | None, config: ProtectionConfig, passed: bool) -> str:
    if header is None:
        return "the envelope has no well-formed key id"
    keyring = config.keyring
    if keyring is None:  # a custom protector: it alone knows its keys
        return f"key {header.key_id!r} is known to the protector" if passed else f"no key {header.key_id!r}"
    if passed:
        role = "active" if keyring.is_active(header.key_id) else "verification-only"
        return f"key {header.key_id!r} is in the keyring ({role})"
    return f"no key {header.key_id!r} in the keyring (it holds {', '.join(keyring.key_ids)})"


def _binding(
    step: OpeningStep,
    passed: bool,
    contents: SealedStateContents,
    retry: BoundRequest,
    retry_partition: str | None,
    params_note: str | None,
) -> str:
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
        shown = f"{retry_partition!r}" if retry_partition is not None else f"digest {wanted.partition_digest}"
        if passed:
            return f"partition {shown}"
        if retry_partition is None:
            return f"the retry's partition ({shown}) is not the sealed partition (digest {sealed.partition_digest})"
        return (
            f"the retry's partition {shown} (digest {wanted.partition_digest}) is not the sealed "
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
