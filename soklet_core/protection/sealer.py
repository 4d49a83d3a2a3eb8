"""Sealing and opening framework-protected request state: :class:`RequestStateSealer`.

The plaintext of a sealed state is the canonical JSON object (members in canonical order)::

    {"b":{"a":partition digest,"d":params digest,"m":method,"p":normalized path,"v":protocol version},
     "e":expires-at ms,"i":issued-at ms,"q":emitting request id,"r":round,"s":application state}

**Sealing.** A first emission records round 1, issued-at = now, expires-at = now + the maximum lifetime and the
emitting request's id. A re-emission (sealing while continuing an opened state) keeps issued-at and expires-at,
increments the round and records the current request's id. Sealing refuses, emitting nothing, when the retry
already carried the last allowed round (``LAST_ROUND``), when the state expired while the handler ran
(``EXPIRED_DURING_HANDLER``), or when the plaintext or the token would exceed its limit (``TOO_LARGE``). The
built-in protector holds a reservation on the active key while it seals.

**Opening** runs these checks in order and raises the first failure's reason: encoded size, base64url, version,
key id, authentication (the protector), decoded size, JSON schema, expiry, issued-at, lifetime, round, binding
(method, path, protocol version, partition, params — each its own reason), request id reused. The checks are
written once, as the opening table ``_OPENING_CHECKS`` at the end of this module:
:meth:`RequestStateSealer.open` stops at the first failure, :meth:`RequestStateSealer.diagnose` runs through it.
It returns an :class:`OpenedRequestState` whose only public content is the application JSON, with canonical
numbers (``100`` comes back as ``1E+2``).

**Expiry** is half-open: a state is valid while ``now < expires-at``; at exactly ``expires-at`` it has expired.
Two more checks keep a state from living longer than the configured maximum lifetime. **Issued-at** may lie at
most :data:`MAX_ISSUED_AT_SKEW` ahead of this server's clock (``issued-in-future``): without it, a state sealed
by a clock an hour fast (or forged with a leaked key) would open for an hour more than its lifetime. The bound
is the clock skew tolerated between the instances of a fleet, since one instance seals and another may open.
**Lifetime**: ``expires-at - issued-at`` must be above zero and at most the configured maximum
(``lifetime-exceeded``); both times come from the sealing clock, so skew does not matter to this one.

Refusals go to the ``soklet.protection`` logger as the reason alone: never the token, the plaintext or a key.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Final, cast

import msgspec

from soklet_core.json import (
    JsonError,
    JsonNumber,
    JsonObject,
    JsonString,
    JsonValue,
    canonical_bytes,
    canonical_decimal_text,
    parse,
)
from soklet_core.json.codec import structure_within_limits
from soklet_core.keys import KeyringManager

from .binding import BoundRequest, RequestId, RequestStateBinding
from .config import ProtectionConfig
from .envelope import EnvelopeProtector, NonceSource
from .errors import (
    BindingField,
    ProtectionUsageError,
    ProtectionUsageReason,
    Reason,
    RequestStateProtectionException,
)
from .protector import RequestStateProtectionContext, RequestStateProtector

__all__ = [
    "MAX_ISSUED_AT_SKEW",
    "CheckResult",
    "CheckStatus",
    "Clock",
    "OpenedRequestState",
    "OpeningDiagnosis",
    "OpeningStep",
    "RequestStateSealer",
    "SealedStateContents",
    "system_clock_ms",
]

#: A clock: returns the current time as integer milliseconds since the Unix epoch.
Clock = Callable[[], int]

_logger = logging.getLogger("soklet.protection")
#: How far a state's issued-at may lie ahead of the opening server's clock: the clock skew tolerated between the
#: instance that sealed it and the one that opens it. Beyond it the state is refused (``issued-in-future``), so
#: no state opens for more than the maximum lifetime plus this bound. Fleet clocks under NTP agree within
#: milliseconds; a minute leaves room for a drifting host without letting a state outlive its lifetime much.
MAX_ISSUED_AT_SKEW: Final = timedelta(seconds=60)
_SKEW_MS: Final = MAX_ISSUED_AT_SKEW // timedelta(milliseconds=1)
#: Framework integers (times, rounds) beyond this magnitude are not the schema.
_MAX_INTEGER: Final = 2**63
_PROTECTOR_REASONS: Final = frozenset({Reason.BASE64URL, Reason.VERSION, Reason.UNKNOWN_KEY, Reason.AUTHENTICATION})
_TOP_MEMBERS: Final = frozenset({"b", "e", "i", "q", "r", "s"})
_BINDING_MEMBERS: Final = frozenset({"a", "d", "m", "p", "v"})
#: What separates the framework members from the state, the last member, in the canonical plaintext.
_STATE_MEMBER: Final = b',"s":'
# msgspec in C: integers come as ints, numbers with a fraction or an exponent as exact Decimals (a C type: no
# Python frame per number); nothing else is trusted until the bytes are written back identically.
_FRAMEWORK_DECODER: Final = msgspec.json.Decoder(float_hook=Decimal)


def system_clock_ms() -> int:
    """The system clock in integer milliseconds since the Unix epoch."""
    return time.time_ns() // 1_000_000


def _integer_spelling(value: int) -> str:
    if type(value) is int:
        text = str(value)
        # An integer's digits are its canonical spelling unless it ends in a zero (1E+2, and 0 itself).
        if text[-1] != "0":
            return text
    return canonical_decimal_text(Decimal(value))


def _request_id_spelling(request_id: RequestId) -> str:
    if isinstance(request_id, JsonString):
        return encode_basestring(request_id.value)
    return canonical_decimal_text(request_id.value)


#: The plaintext up to the state member, its values to be filled in: strings as the C JSON string encoder writes
#: them, which escapes exactly what the canonical form escapes (", \ and U+0000–U+001F, the latter as \b \t \n
#: \f \r or lowercase \u00xx) and keeps everything else raw; numbers in canonical spelling.
_FRAMEWORK_LAYOUT: Final = '{"b":{"a":%s,"d":%s,"m":%s,"p":%s,"v":%s},"e":%s,"i":%s,"q":%s,"r":%s'


def _whole(value: object) -> int | None:
    # A framework integer as the decoder read it (an int, or a Decimal when spelled with an exponent): exact,
    # within the schema's range, integral.
    if type(value) is int:
        return value if -_MAX_INTEGER <= value <= _MAX_INTEGER else None
    if type(value) is not Decimal or not value.is_finite() or not -_MAX_INTEGER <= value <= _MAX_INTEGER:
        return None
    whole = int(value)
    return whole if whole == value else None


def _integer(value: JsonValue | None) -> int:
    if not isinstance(value, JsonNumber):
        raise RequestStateProtectionException(Reason.JSON)
    number = value.value
    if not -_MAX_INTEGER <= number <= _MAX_INTEGER:
        raise RequestStateProtectionException(Reason.JSON)
    whole = int(number)
    if whole != number:
        raise RequestStateProtectionException(Reason.JSON)
    return whole


@dataclass(frozen=True, slots=True)
class SealedStateContents:
    """Everything a sealed state holds: binding, round, times, emitting request id and application state.

    This is diagnostic and tooling surface (``soklet inspect-state``, ``soklet seal-state``, test vectors); an
    application handler only ever sees :attr:`OpenedRequestState.state`. ``repr`` leaves the state out.
    """

    binding: RequestStateBinding
    round: int
    issued_at_ms: int
    expires_at_ms: int
    request_id: RequestId
    state: JsonValue

    def plaintext(self) -> bytes:
        """The canonical JSON plaintext (the exact bytes the protector seals)."""
        return b"".join((self._framework_bytes(), _STATE_MEMBER, canonical_bytes(self.state), b"}"))

    def _framework_bytes(self) -> bytes:
        """The plaintext up to the state member: ``{"b":{...},"e":…,"i":…,"q":…,"r":…`` (one format, one encode)."""
        binding = self.binding
        text = _FRAMEWORK_LAYOUT % (
            encode_basestring(binding.partition_digest),
            encode_basestring(binding.params_digest),
            encode_basestring(binding.method),
            encode_basestring(binding.path),
            encode_basestring(binding.protocol_version),
            _integer_spelling(self.expires_at_ms),
            _integer_spelling(self.issued_at_ms),
            _request_id_spelling(self.request_id),
            _integer_spelling(self.round),
        )
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, which the canonical form cannot hold
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_BINDING) from None

    @classmethod
    def from_plaintext(cls, plaintext: bytes) -> SealedStateContents:
        """Decode a plaintext; raises ``RequestStateProtectionException(JSON)`` unless it is exactly the schema.

        A plaintext in the canonical layout (everything this codec writes) is read by :meth:`_read_canonical`;
        any other is parsed whole and checked member by member. Both accept and refuse exactly the same bytes.
        """
        contents = cls._read_canonical(plaintext)
        return contents if contents is not None else cls._read_any(plaintext)

    @classmethod
    def _read_canonical(cls, plaintext: bytes) -> SealedStateContents | None:
        """The contents of a plaintext whose framework members are exactly what :meth:`plaintext` writes, else
        ``None`` (then :meth:`_read_any` decides).

        The framework members (a few short values before ``,"s":``) are decoded by msgspec (no Python frame per
        value) and accepted only if writing them back gives the same bytes: so they are canonical, unique and in
        the schema, and only the state is parsed into the value model. Whenever this returns contents, parsing the
        whole plaintext would give the same: the state parses alone, the framework part is the codec's own
        output, and the whole passes the JSON layer's depth and node check (checked last).
        """
        cut = plaintext.find(_STATE_MEMBER)
        if cut < 0 or plaintext[-1:] != b"}":
            return None
        head = plaintext[:cut]
        try:
            framework = _FRAMEWORK_DECODER.decode(head + b"}")
        except (msgspec.DecodeError, ValueError, ArithmeticError, RecursionError):  # a Decimal out of its range
            return None
        if type(framework) is not dict or len(framework) != len(_TOP_MEMBERS) - 1:
            return None
        bound = framework.get("b")
        if type(bound) is not dict or len(bound) != len(_BINDING_MEMBERS):
            return None
        method, path, version = bound.get("m"), bound.get("p"), bound.get("v")
        partition, params = bound.get("a"), bound.get("d")
        if not (
            type(method) is str
            and type(path) is str
            and type(version) is str
            and type(partition) is str
            and type(params) is str
        ):
            return None
        rounds, issued, expires = _whole(framework.get("r")), _whole(framework.get("i")), _whole(framework.get("e"))
        if rounds is None or issued is None or expires is None:
            return None
        raw_id = framework.get("q")
        try:
            if type(raw_id) is str:
                request_id: RequestId = JsonString.from_value(raw_id)
            elif type(raw_id) is int or type(raw_id) is Decimal:
                request_id = JsonNumber.from_value(raw_id)
            else:
                return None
            state = parse(plaintext[cut + len(_STATE_MEMBER) : -1])
        except JsonError:
            return None
        binding = RequestStateBinding(method, path, version, partition, params)
        contents = cls(binding, rounds, issued, expires, request_id, state)
        try:
            same = contents._framework_bytes() == head
        except ProtectionUsageError:  # a lone surrogate, which the canonical form cannot hold
            return None
        # Only now is the whole plaintext known to be grammatical, which the structure check requires; the state
        # alone passed it, but one level deeper and with the framework's values it may not.
        return contents if same and structure_within_limits(plaintext) else None

    @classmethod
    def _read_any(cls, plaintext: bytes) -> SealedStateContents:
        try:
            root = parse(plaintext)
        except JsonError:
            raise RequestStateProtectionException(Reason.JSON) from None
        if not isinstance(root, JsonObject) or root.keys() != _TOP_MEMBERS:
            raise RequestStateProtectionException(Reason.JSON)
        bound = root["b"]
        if not isinstance(bound, JsonObject) or bound.keys() != _BINDING_MEMBERS:
            raise RequestStateProtectionException(Reason.JSON)
        fields = [bound[name] for name in ("m", "p", "v", "a", "d")]
        if not all(isinstance(item, JsonString) for item in fields):
            raise RequestStateProtectionException(Reason.JSON)
        method, path, version, partition, params = (item.value for item in fields)  # type: ignore[attr-defined]
        request_id = root["q"]
        if not isinstance(request_id, JsonString | JsonNumber):
            raise RequestStateProtectionException(Reason.JSON)
        return cls(
            RequestStateBinding(method, path, version, partition, params),
            _integer(root["r"]),
            _integer(root["i"]),
            _integer(root["e"]),
            request_id,
            root["s"],
        )

    def __repr__(self) -> str:
        return (
            f"SealedStateContents(binding={self.binding!r}, round={self.round}, issued_at_ms={self.issued_at_ms}, "
            f"expires_at_ms={self.expires_at_ms}, request_id=<withheld>, state=<withheld>)"
        )


class OpenedRequestState:
    """A verified state: :attr:`state` is the application JSON; times stay inside, for re-emission, and the round
    is read only by the server (:attr:`round`).

    :meth:`RequestStateSealer.open` returns one, as ``OpenedRequestState(contents)`` of what it opened; pass it
    back as ``continuing`` when the handler emits state again. Equality is identity.
    """

    __slots__ = ("_contents",)

    _contents: SealedStateContents

    def __init__(self, contents: SealedStateContents) -> None:
        """The opened state holding ``contents``; raises ``TypeError`` for anything but ``SealedStateContents``."""
        if not isinstance(contents, SealedStateContents):
            raise TypeError("OpenedRequestState holds SealedStateContents")
        # The class refuses attribute assignment (immutability), so the constructor sets its slot underneath.
        object.__setattr__(self, "_contents", contents)

    @property
    def state(self) -> JsonValue:
        """The application JSON as sealed, with canonical numbers; none of the framework's metadata."""
        return self._contents.state

    @property
    def round(self) -> int:
        """The round the state was sealed in (1 for a first emission): for the server's own spans and logs, never
        for a handler, which sees only :attr:`state`."""
        return self._contents.round

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("OpenedRequestState is immutable")

    def __repr__(self) -> str:
        return "OpenedRequestState(state=<withheld>)"


class OpeningStep(enum.Enum):
    """One opening check, in the order the opener runs them; :attr:`reason` is its failure reason."""

    ENCODED_SIZE = "encoded-size"
    BASE64URL = "base64url"
    VERSION = "version"
    KEY_ID = "key-id"
    AUTHENTICATION = "authentication"
    DECODED_SIZE = "decoded-size"
    JSON = "json"
    EXPIRY = "expiry"
    ISSUED_AT = "issued-at"
    LIFETIME = "lifetime"
    ROUND = "round"
    BINDING_METHOD = "binding-method"
    BINDING_PATH = "binding-path"
    BINDING_PROTOCOL_VERSION = "binding-protocol-version"
    BINDING_PARTITION = "binding-partition"
    BINDING_PARAMS = "binding-params"
    REQUEST_ID = "request-id"

    @property
    def reason(self) -> Reason:
        """The refusal reason when this check fails."""
        return _STEP_REASONS[self]

    @classmethod
    def failing_with(cls, reason: Reason) -> OpeningStep:
        """The check whose failure is ``reason`` (an opening reason)."""
        return _REASON_STEPS[reason]


_STEP_REASONS: Final = {
    OpeningStep.ENCODED_SIZE: Reason.ENCODED_TOO_LARGE,
    OpeningStep.BASE64URL: Reason.BASE64URL,
    OpeningStep.VERSION: Reason.VERSION,
    OpeningStep.KEY_ID: Reason.UNKNOWN_KEY,
    OpeningStep.AUTHENTICATION: Reason.AUTHENTICATION,
    OpeningStep.DECODED_SIZE: Reason.DECODED_TOO_LARGE,
    OpeningStep.JSON: Reason.JSON,
    OpeningStep.EXPIRY: Reason.EXPIRED,
    OpeningStep.ISSUED_AT: Reason.ISSUED_IN_FUTURE,
    OpeningStep.LIFETIME: Reason.LIFETIME_EXCEEDED,
    OpeningStep.ROUND: Reason.ROUND,
    OpeningStep.BINDING_METHOD: Reason.BINDING_METHOD,
    OpeningStep.BINDING_PATH: Reason.BINDING_PATH,
    OpeningStep.BINDING_PROTOCOL_VERSION: Reason.BINDING_PROTOCOL_VERSION,
    OpeningStep.BINDING_PARTITION: Reason.BINDING_PARTITION,
    OpeningStep.BINDING_PARAMS: Reason.BINDING_PARAMS,
    OpeningStep.REQUEST_ID: Reason.REQUEST_ID_REUSED,
}
_REASON_STEPS: Final = {reason: step for step, reason in _STEP_REASONS.items()}


class CheckStatus(enum.Enum):
    """The outcome of one opening check in a diagnosis."""

    PASSED = "passed"
    FAILED = "failed"
    #: Not run: an earlier check failed in a way that leaves nothing to check, or no retry was given.
    NOT_RUN = "not-run"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One row of an :class:`OpeningDiagnosis`."""

    step: OpeningStep
    status: CheckStatus


@dataclass(frozen=True, slots=True)
class OpeningDiagnosis:
    """Every opening check for one token (and optionally one retry), for operators and ``soklet inspect-state``.

    Unlike :meth:`RequestStateSealer.open`, a diagnosis goes on after a failure wherever it still can (a
    decrypted state is checked for expiry, round, every binding field and the request id), so it lists every
    problem; :attr:`first_failure` is the reason ``open`` raises. ``contents`` is the decrypted state, when the
    token decrypted and decoded.
    """

    checks: tuple[CheckResult, ...]
    contents: SealedStateContents | None
    now_ms: int

    @property
    def failures(self) -> tuple[Reason, ...]:
        """The reasons of every failed check, in order."""
        return tuple(check.step.reason for check in self.checks if check.status is CheckStatus.FAILED)

    @property
    def first_failure(self) -> Reason | None:
        """The reason ``open`` would raise, or ``None`` if every check that ran passed."""
        failures = self.failures
        return failures[0] if failures else None

    @property
    def opens(self) -> bool:
        """Whether nothing failed (checks not run for want of a retry do not count)."""
        return not self.failures


def _encoded_size(token: str) -> int:
    return len(token) if token.isascii() else len(token.encode("utf-8", "surrogatepass"))


class RequestStateSealer:
    """Seals and opens framework-protected state for one server. Thread-safe.

    ``RequestStateSealer(config)`` copies a keyring config into a live :class:`KeyringManager` of its own (see
    :attr:`keyring_manager`). ``clock`` (default :func:`system_clock_ms`) and ``nonce_source`` (default
    ``os.urandom``; only the built-in protector uses it) are injectable so tests and test vectors are
    deterministic.
    """

    __slots__ = ("_clock", "_config", "_context", "_lifetime_ms", "_manager", "_protector")

    def __init__(
        self,
        config: ProtectionConfig,
        *,
        clock: Clock | None = None,
        nonce_source: NonceSource | None = None,
    ) -> None:
        if not isinstance(config, ProtectionConfig):
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_PROVIDER)
        self._manager: KeyringManager | None = None
        self._protector: RequestStateProtector
        if config.keyring is not None:
            self._manager = KeyringManager(config.keyring)
            self._protector = EnvelopeProtector(self._manager, nonce_source=nonce_source)
        else:
            assert config.protector is not None
            self._protector = config.protector
        self._config = config
        self._clock: Clock = clock if clock is not None else system_clock_ms
        self._lifetime_ms = config.lifetime_ms
        self._context = RequestStateProtectionContext.framework()

    @property
    def config(self) -> ProtectionConfig:
        """The configuration this sealer enforces."""
        return self._config

    @property
    def keyring_manager(self) -> KeyringManager | None:
        """This server's live keyring (for a keyring config), else ``None``."""
        return self._manager

    @property
    def protector(self) -> RequestStateProtector:
        """The protector that seals and opens tokens."""
        return self._protector

    def _now(self) -> int:
        now = self._clock()
        if isinstance(now, bool) or not isinstance(now, int):
            raise ProtectionUsageError(ProtectionUsageReason.INVALID_CLOCK)
        return now

    # ------------------------------------------------------------------------------------------------ sealing

    def seal(self, state: JsonValue, request: BoundRequest, *, continuing: OpenedRequestState | None = None) -> str:
        """Seal application ``state`` emitted by ``request``; ``continuing`` is the state the request opened.

        Raises ``RequestStateProtectionException`` with ``LAST_ROUND``, ``EXPIRED_DURING_HANDLER``,
        ``TOO_LARGE`` or ``PROTECTOR_FAILED``; nothing is emitted then.
        """
        if not isinstance(state, JsonValue) or not isinstance(request, BoundRequest):
            raise TypeError("seal takes a JsonValue and a BoundRequest")
        now = self._now()
        if continuing is None:
            contents = SealedStateContents(request.binding, 1, now, now + self._lifetime_ms, request.request_id, state)
        else:
            previous = continuing._contents
            if previous.round >= self._config.maximum_request_state_rounds:
                raise self._refuse(Reason.LAST_ROUND)
            if now >= previous.expires_at_ms:
                raise self._refuse(Reason.EXPIRED_DURING_HANDLER)
            contents = SealedStateContents(
                request.binding,
                previous.round + 1,
                previous.issued_at_ms,
                previous.expires_at_ms,
                request.request_id,
                state,
            )
        return self.seal_contents(contents)

    def seal_contents(self, contents: SealedStateContents) -> str:
        """Seal exactly ``contents`` (tools, tests and test vectors); only the size limits are checked."""
        plaintext = contents.plaintext()
        if len(plaintext) > self._config.maximum_decoded_bytes:
            raise self._refuse(Reason.TOO_LARGE)
        try:
            token = self._protector.seal(plaintext, self._context)
        except RequestStateProtectionException as error:
            raise self._refuse(error.reason if error.reason.is_sealing else Reason.PROTECTOR_FAILED) from None
        except ProtectionUsageError:
            raise
        except Exception as error:  # a custom protector's failure must not escape with its own text
            _logger.error("request state not sealed: protector raised %s", type(error).__name__)
            raise RequestStateProtectionException(Reason.PROTECTOR_FAILED) from None
        if not isinstance(token, str) or _encoded_size(token) > self._config.maximum_encoded_bytes:
            raise self._refuse(Reason.TOO_LARGE if isinstance(token, str) else Reason.PROTECTOR_FAILED)
        return token

    # ------------------------------------------------------------------------------------------------ opening

    def _decrypt(self, token: str) -> bytes:
        try:
            return self._protector.open(token, self._context)
        except RequestStateProtectionException as error:
            if error.reason in _PROTECTOR_REASONS:
                raise
            raise RequestStateProtectionException(Reason.AUTHENTICATION) from None
        except ProtectionUsageError:
            raise
        except Exception as error:  # fail closed: whatever a custom protector raised, the token did not open
            _logger.error("request state refused: protector raised %s", type(error).__name__)
            raise RequestStateProtectionException(Reason.AUTHENTICATION) from None

    def open(self, token: str, request: BoundRequest) -> OpenedRequestState:
        """Open ``token`` carried by retry ``request``; raises ``RequestStateProtectionException`` with the
        first failing check's reason (in the order of the opening table, ``_OPENING_CHECKS``)."""
        opening = _Opening(self, token, request)
        for _, check, _ in _OPENING_CHECKS:
            failed = check(opening)
            if failed is not None:
                _logger.warning(
                    "request state refused: %s",
                    failed.reason.value,
                    extra={"soklet": {"event": "state-refused", "reason": failed.reason.value}},
                )
                raise RequestStateProtectionException(failed.reason)
        return OpenedRequestState(opening.decoded)

    def diagnose(self, token: str, request: BoundRequest | None = None) -> OpeningDiagnosis:
        """Run every opening check on ``token`` (against retry ``request`` when given) and report each one.

        The checks are the opening table's, as :meth:`open` runs them, except that a failure ends the run only
        while nothing is decoded yet; the checks against the retry are not run without one. Never raises for a
        bad token: every refusal becomes a failed check.
        """
        opening = _Opening(self, token, request)
        failed: list[OpeningStep] = []
        skipped: list[OpeningStep] = []
        for step, check, needs_retry in _OPENING_CHECKS:
            if needs_retry and request is None:
                skipped.append(step)
                continue
            failure = check(opening)
            if failure is not None:
                failed.append(failure)
                if opening.contents is None:
                    break
        stop = failed[-1] if failed and opening.contents is None else None
        checks = []
        for step in OpeningStep:
            if step in failed:
                status = CheckStatus.FAILED
            elif step in skipped or (stop is not None and _STEP_INDEX[step] > _STEP_INDEX[stop]):
                status = CheckStatus.NOT_RUN
            else:
                status = CheckStatus.PASSED
            checks.append(CheckResult(step, status))
        return OpeningDiagnosis(tuple(checks), opening.contents, opening.now)

    def _refuse(self, reason: Reason) -> RequestStateProtectionException:
        _logger.warning(
            "request state not sealed: %s",
            reason.value,
            extra={"soklet": {"event": "state-not-sealed", "reason": reason.value}},
        )
        return RequestStateProtectionException(reason)

    def __repr__(self) -> str:
        provider = "keyring" if self._manager is not None else type(self._protector).__name__
        return f"RequestStateSealer(provider={provider})"


class _Opening:
    """One opening in progress: its inputs and what the checks so far produced.

    ``contents`` is ``None`` until the state decodes (what a diagnosis asks); the checks after decoding read
    ``decoded`` and, when there is a retry, ``retry`` (neither is set otherwise, and those checks do not run).
    """

    __slots__ = ("contents", "decoded", "now", "plaintext", "retry", "sealer", "token")

    decoded: SealedStateContents
    retry: BoundRequest

    def __init__(self, sealer: RequestStateSealer, token: str, request: BoundRequest | None) -> None:
        self.sealer = sealer
        self.token: object = token
        if request is not None:
            self.retry = request
        self.now = sealer._now()
        self.plaintext = b""
        self.contents: SealedStateContents | None = None


def _encoded_size_fits(opening: _Opening) -> OpeningStep | None:
    token = opening.token
    if not isinstance(token, str):
        return OpeningStep.BASE64URL
    return None if _encoded_size(token) <= opening.sealer._config.maximum_encoded_bytes else OpeningStep.ENCODED_SIZE


def _decrypts(opening: _Opening) -> OpeningStep | None:
    # The protector runs four checks at once (base64url, version, key id, authentication) and names the first
    # that failed.
    try:
        opening.plaintext = opening.sealer._decrypt(cast(str, opening.token))
    except RequestStateProtectionException as error:
        return OpeningStep.failing_with(error.reason)
    return None


def _decoded_size_fits(opening: _Opening) -> OpeningStep | None:
    fits = len(opening.plaintext) <= opening.sealer._config.maximum_decoded_bytes
    return None if fits else OpeningStep.DECODED_SIZE


def _decodes(opening: _Opening) -> OpeningStep | None:
    try:
        opening.decoded = opening.contents = SealedStateContents.from_plaintext(opening.plaintext)
    except RequestStateProtectionException:
        return OpeningStep.JSON
    return None


def _unexpired(opening: _Opening) -> OpeningStep | None:
    # Half-open: at exactly expires-at the state has expired.
    return OpeningStep.EXPIRY if opening.now >= opening.decoded.expires_at_ms else None


def _issued_in_the_past(opening: _Opening) -> OpeningStep | None:
    return OpeningStep.ISSUED_AT if opening.decoded.issued_at_ms > opening.now + _SKEW_MS else None


def _lifetime_allowed(opening: _Opening) -> OpeningStep | None:
    # One clock made both times, so fleet skew plays no part here.
    contents = opening.decoded
    lifetime = contents.expires_at_ms - contents.issued_at_ms
    return None if 0 < lifetime <= opening.sealer._lifetime_ms else OpeningStep.LIFETIME


def _round_allowed(opening: _Opening) -> OpeningStep | None:
    rounds = opening.decoded.round
    return None if 1 <= rounds <= opening.sealer._config.maximum_request_state_rounds else OpeningStep.ROUND


def _binding_matches(field: BindingField) -> Callable[[_Opening], OpeningStep | None]:
    step = OpeningStep.failing_with(Reason.for_binding(field))
    read = RequestStateBinding.reader(field)

    def check(opening: _Opening) -> OpeningStep | None:
        return None if read(opening.decoded.binding) == read(opening.retry.binding) else step

    return check


def _request_id_fresh(opening: _Opening) -> OpeningStep | None:
    return OpeningStep.REQUEST_ID if opening.decoded.request_id == opening.retry.request_id else None


#: One opening check: returns the step that failed (its own, or for the protector the one of its four that
#: failed), or ``None``.
_OpeningCheck = Callable[[_Opening], "OpeningStep | None"]

#: The opening checks, in the one order :meth:`RequestStateSealer.open` stops on and
#: :meth:`RequestStateSealer.diagnose` runs through: (first step covered, check, needs the retry).
_OPENING_CHECKS: Final[tuple[tuple[OpeningStep, _OpeningCheck, bool], ...]] = (
    (OpeningStep.ENCODED_SIZE, _encoded_size_fits, False),
    (OpeningStep.BASE64URL, _decrypts, False),
    (OpeningStep.DECODED_SIZE, _decoded_size_fits, False),
    (OpeningStep.JSON, _decodes, False),
    (OpeningStep.EXPIRY, _unexpired, False),
    (OpeningStep.ISSUED_AT, _issued_in_the_past, False),
    (OpeningStep.LIFETIME, _lifetime_allowed, False),
    (OpeningStep.ROUND, _round_allowed, False),
    *((OpeningStep.failing_with(Reason.for_binding(field)), _binding_matches(field), True) for field in BindingField),
    (OpeningStep.REQUEST_ID, _request_id_fresh, True),
)
_STEP_INDEX: Final = {step: index for index, step in enumerate(OpeningStep)}
