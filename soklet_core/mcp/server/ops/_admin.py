"""The admin API of ``soklet serve``: an ASGI app for a listener of its own, never the MCP port.

Every request needs ``Authorization: Bearer <token>`` (compared in constant time with every configured token),
else ``401`` with ``WWW-Authenticate: Bearer`` and nothing happens, except the two probes. Endpoints (see
docs/fleet.md):

* ``GET /v1/ready`` and ``GET /v1/health`` — the probes, which take no token (a Kubernetes probe carries no secret)
  and reveal only a status and a bounded reason (:class:`.NotReady`), never the instance, the
  generation or a key. ``/v1/ready``: ``200 {"status": "ready"}``, or ``503 {"status": "not-ready", "reason":
  "generation-behind"}`` with ``Retry-After`` while the instance's :class:`.Readiness` holds it back
  (the MCP endpoint then answers 503 too). A store outage alone is not a reason (the keyring held keeps serving;
  ``soklet_store_up`` says 0); a SQLite file removed or replaced is (``store-file-lost``: only a restart mends it).
  ``/v1/health`` (liveness): ``200 {"status": "ok"}`` while the process serves, ``503 {"status": "failing",
  "reason": "store-file-lost"}`` when only a restart can mend it;
* ``GET /v1/keyring`` — the secret-free snapshot (instance and generation included); ``GET /metrics``
  (Prometheus text);
* ``POST /v1/keyring/stage`` ``{"id", "material"}``, ``/activate`` ``{"id"}``, ``/remove`` ``{"id"}``,
  ``/reload`` — applied through the live keyring (:class:`~.live_keyring.KeyringHolder`: the keyring file, or the
  store's fleet keyring), answered with the new snapshot.

Refusals: ``400`` malformed body, ``404`` unknown key or path, ``405`` wrong method, ``408`` slow body (one
deadline for the whole body, the MCP port's, so a trickle cannot renew it; the connection closes), ``409``
conflict, ``413`` body over :data:`MAX_ADMIN_BODY_BYTES`, ``503`` with ``Retry-After`` a store-mode change the
store or the KEK could not carry out (``unavailable``, ``kek-unavailable``, ...; nothing changed); the body is
``{"error": reason}`` from a closed set, never an echo of the request.

Refused authentications are counted (``soklet_admin_auth_failures{reason}``) and reported on ``soklet.admin`` in
at most one WARNING line per :data:`AUTH_FAILURE_LOG_INTERVAL_SECONDS`, with the count since the last line and
the last peer address, never a token. Each authenticated change (stage, activate, remove, reload) writes one
``soklet.admin`` line, applied or refused (its structured fields ``event=admin-audit``, the action, the key id once
it passed the key-id rule, the token's label, the outcome, status and reason; never the token, material or other
raw input), and runs in a span ``soklet.admin ACTION`` carrying the same (when tracing is on). A TLS private key
is a secret file: :func:`check_admin_tls_key` applies the keyring files' rules to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from opentelemetry.trace import Span

from soklet_core import tracing
from soklet_core.errors import SokletError
from soklet_core.files import read_secret_file
from soklet_core.json import JsonError, JsonObject, JsonString, parse
from soklet_core.keys import (
    KeyringError,
    KeyringErrorReason,
    KeyringSnapshot,
    KeyWrapError,
    ProtectionKey,
    key_id_problem,
)
from soklet_core.keys.base64url import decode_base64url
from soklet_core.keys.profile import PROTECTION_PROFILE
from soklet_core.mcp.server.ops._live_keyring import KeyringHolder, LiveKeyringError
from soklet_core.mcp.server.ops._metrics import ServerMetrics
from soklet_core.mcp.server.ops._readiness import RETRY_AFTER_SECONDS, NotReady, Readiness
from soklet_core.mcp.server.ops._snapshot import AdminKey, AdminSnapshot, KeyRoleName, new_process_id
from soklet_core.mcp.server.options import DEFAULT_BODY_TIMEOUT_SECONDS
from soklet_core.store import DurableStore, SqliteStore, StoreError, StoreErrorReason

__all__ = [
    "ADMIN_DEFAULT_LABEL",
    "AUTH_FAILURE_LOG_INTERVAL_SECONDS",
    "MAX_ADMIN_BODY_BYTES",
    "MAX_ADMIN_TLS_KEY_BYTES",
    "MAX_ADMIN_TOKENS",
    "MAX_ADMIN_TOKEN_CHARS",
    "MAX_ADMIN_TOKEN_FILE_BYTES",
    "MIN_ADMIN_TOKEN_CHARS",
    "READY_STORE_TIMEOUT_SECONDS",
    "AdminApp",
    "AdminTokenError",
    "AdminTokens",
    "check_admin_tls_key",
    "keyring_document",
    "read_admin_tokens",
]

#: Largest admin request body (64 KiB): a stage body is about 150 bytes.
MAX_ADMIN_BODY_BYTES: Final = 64 * 1024
#: Largest admin token file (16 KiB).
MAX_ADMIN_TOKEN_FILE_BYTES: Final = 16 * 1024
#: Shortest token accepted: a guessable token would make the listener's auth decorative.
MIN_ADMIN_TOKEN_CHARS: Final = 16
#: Longest token accepted.
MAX_ADMIN_TOKEN_CHARS: Final = 512
#: Most tokens one file may hold.
MAX_ADMIN_TOKENS: Final = 64
#: How long ``/v1/ready`` and ``/v1/health`` wait for a SQLite store's check (is its file still the one opened?)
#: before they answer from what is known: well inside a probe's usual timeout.
READY_STORE_TIMEOUT_SECONDS: Final = 2.0
#: The label of a bare token (a file or variable holding one token and no ``label:``).
ADMIN_DEFAULT_LABEL: Final = "admin"
#: At most one log line about refused authentications per this many seconds; each counts those since the last.
AUTH_FAILURE_LOG_INTERVAL_SECONDS: Final = 60.0
#: Largest TLS private key file read for its checks (64 KiB; a PEM key is a few KiB).
MAX_ADMIN_TLS_KEY_BYTES: Final = 64 * 1024

_logger = logging.getLogger("soklet.admin")

# RFC 6750 b64token; labels are short plain names. Neither pattern nests a repetition.
_TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_LABEL: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")
_JSON_HEADERS: Final = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]


class AdminTokenError(SokletError, ValueError):
    """The token source is unusable; the message names the line number at most, never a token.

    There is no reason enum (``reason`` is ``None``): each refusal is a sentence for the operator that may name
    a line or a limit, and every one means the same to a caller: fix the token source.
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(None, message)


@dataclass(frozen=True, slots=True)
class _Token:
    label: str
    secret: bytes

    def __repr__(self) -> str:
        return f"_Token(label={self.label!r})"


@dataclass(frozen=True, slots=True)
class AdminTokens:
    """The accepted bearer tokens, each with a label that the audit log names (never the token)."""

    tokens: tuple[_Token, ...]

    @classmethod
    def parse(cls, text: str) -> AdminTokens:
        """Tokens from ``text``: one bare token (label ``admin``), or ``label:token`` lines.

        Blank lines and lines starting with ``#`` are skipped. A token is an RFC 6750 b64token of
        :data:`MIN_ADMIN_TOKEN_CHARS` to :data:`MAX_ADMIN_TOKEN_CHARS` characters; labels are 1 to 64 of
        ``A-Z a-z 0-9 . _ -`` and unique.
        """
        lines = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)]
        lines = [(number, line) for number, line in lines if line and not line.startswith("#")]
        if not lines:
            raise AdminTokenError("no admin token in the token source")
        if len(lines) > MAX_ADMIN_TOKENS:
            raise AdminTokenError(f"more than {MAX_ADMIN_TOKENS} admin tokens")
        tokens: list[_Token] = []
        for number, line in lines:
            label, colon, secret = line.partition(":")
            if not colon:
                if len(lines) != 1:
                    raise AdminTokenError(f"line {number}: several tokens need label:token lines")
                label, secret = ADMIN_DEFAULT_LABEL, line
            if not _LABEL.fullmatch(label):
                raise AdminTokenError(f"line {number}: a label is 1 to 64 of A-Z a-z 0-9 . _ -")
            if not MIN_ADMIN_TOKEN_CHARS <= len(secret) <= MAX_ADMIN_TOKEN_CHARS or not _TOKEN.fullmatch(secret):
                raise AdminTokenError(
                    f"line {number}: a token is {MIN_ADMIN_TOKEN_CHARS} to {MAX_ADMIN_TOKEN_CHARS} "
                    "base64/base64url characters"
                )
            if any(token.label == label for token in tokens):
                raise AdminTokenError(f"line {number}: the label is used twice")
            tokens.append(_Token(label, secret.encode("ascii")))
        return cls(tuple(tokens))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, allow_insecure_permissions: bool = False) -> AdminTokens:
        """Tokens from a secret file (0600, owned by this user or root; ``KeyringFileError`` otherwise)."""
        data = read_secret_file(
            path, limit=MAX_ADMIN_TOKEN_FILE_BYTES, allow_insecure_permissions=allow_insecure_permissions
        )
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            raise AdminTokenError("the admin token file is not ASCII text") from None
        return cls.parse(text)

    @classmethod
    def from_env(cls, name: str, environ: Mapping[str, str] | None = None) -> AdminTokens:
        """Tokens from environment variable ``name`` (same format as a file)."""
        value = (os.environ if environ is None else environ).get(name)
        if not value:
            raise AdminTokenError("the admin token variable is not set or empty")
        return cls.parse(value)

    def label_for(self, authorization: bytes | None) -> str | None:
        """The label of the token in an ``Authorization: Bearer`` value, or ``None``.

        Every configured token is compared (``hmac.compare_digest``), whichever matches, so the time taken does
        not tell which one or how much of it matched.
        """
        if authorization is None:
            return None
        scheme, _, presented = authorization.strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        presented = presented.strip()
        found: str | None = None
        for token in self.tokens:
            if hmac.compare_digest(presented, token.secret) and found is None:
                found = token.label
        return found


def keyring_document(
    snapshot: KeyringSnapshot,
    live: KeyringHolder,
    *,
    instance: str,
    lifetime_ms: int,
    rounds: int,
    process_id: str,
) -> dict[str, object]:
    """The ``GET /v1/keyring`` document of ``snapshot``: an :class:`AdminSnapshot`, as the contract spells it.
    ``process_id`` is the serving process's identity (:func:`.admin_snapshot.new_process_id`)."""
    keys: list[AdminKey] = []
    for entry in snapshot.check_values:
        use = snapshot.use(entry.key_id)
        keys.append(
            AdminKey(
                id=entry.key_id,
                role=KeyRoleName.ACTIVE if entry.key_id == snapshot.active_key_id else KeyRoleName.VERIFICATION,
                check_value=entry.check_value,
                created=live.created(entry.key_id),
                last_sealed_ms=use.last_sealed_ms,
                last_opened_ms=use.last_opened_ms,
                reservations=use.reservations,
                retired=live.retired(entry.key_id),
            )
        )
    document = AdminSnapshot(
        instance=instance,
        profile=PROTECTION_PROFILE,
        generation=snapshot.generation,
        active=snapshot.active_key_id,
        verification=tuple(snapshot.verification_key_ids),
        keys=tuple(keys),
        max_state_lifetime_ms=lifetime_ms,
        max_state_rounds=rounds,
        fingerprint=snapshot.fingerprint,
        process_id=process_id,
    )
    return document.to_json()


class _Refused(Exception):
    """An admin answer other than 200: status and a bounded reason."""

    def __init__(self, status: int, reason: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers or []


_NOT_FOUND_REASONS: Final = frozenset({KeyringErrorReason.UNKNOWN_KEY})
_BAD_INPUT_REASONS: Final = frozenset(
    {
        KeyringErrorReason.INVALID_KEY_ID,
        KeyringErrorReason.MATERIAL_TOO_SHORT,
        KeyringErrorReason.MATERIAL_TOO_LONG,
    }
)


def _status_for(error: KeyringError) -> int:
    if error.reason in _NOT_FOUND_REASONS:
        return 404
    return 400 if error.reason in _BAD_INPUT_REASONS else 409


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: The probes: answered without a token, with a status and a bounded reason only.
_PROBES: Final = frozenset({"/v1/ready", "/v1/health"})
#: The one reason a liveness probe fails: a store file lost is mended by a restart alone.
_FAILING: Final = frozenset({NotReady.STORE_FILE_LOST})
_RETRY_AFTER: Final = [(b"retry-after", str(RETRY_AFTER_SECONDS).encode("ascii"))]
#: A store refusal of a change that is the request's (409); any other is the store's state (503).
_STORE_CONFLICTS: Final = frozenset({StoreErrorReason.CONFLICT, StoreErrorReason.NO_KEYRING})

_ROUTES: Final[dict[str, str]] = {
    "/v1/keyring": "GET",
    "/v1/health": "GET",
    "/v1/ready": "GET",
    "/metrics": "GET",
    "/v1/keyring/stage": "POST",
    "/v1/keyring/activate": "POST",
    "/v1/keyring/remove": "POST",
    "/v1/keyring/reload": "POST",
}


class _FailedLogins:
    """Refused authentications, reported in at most one WARNING line per interval, each with the count since the
    last line: the first refusal after a quiet interval at once, later ones when the interval has passed (a timer,
    so a burst that stops is still reported). Runs on the listener's event loop only."""

    __slots__ = ("_interval", "_last_logged", "_last_peer", "_pending", "_timer")

    def __init__(self, interval_seconds: float) -> None:
        self._interval = interval_seconds
        self._last_logged: float | None = None
        self._last_peer = _UNKNOWN_PEER
        self._pending = 0
        self._timer: asyncio.TimerHandle | None = None

    def record(self, peer: str) -> None:
        """Count one refusal from ``peer`` (an IP address, or a fixed text when there is none)."""
        loop = asyncio.get_running_loop()
        self._pending += 1
        self._last_peer = peer
        if self._last_logged is None or loop.time() - self._last_logged >= self._interval:
            self.flush()
        elif self._timer is None:
            self._timer = loop.call_at(self._last_logged + self._interval, self.flush)

    def flush(self) -> None:
        """Write the line for the refusals not reported yet, if any (also at the listener's stop)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        count, self._pending = self._pending, 0
        self._last_logged = asyncio.get_running_loop().time()
        _logger.warning(
            "admin API: requests refused for a missing or unknown bearer token since the last report: %d (the last "
            "from %s)",
            count,
            self._last_peer,
        )


#: The peer named in the failed-authentication line when the connection gives no IP address.
_UNKNOWN_PEER: Final = "an unknown address"


def _peer(scope: Scope) -> str:
    # Only an IP address is named: proxy headers could make the client field any text an attacker sends.
    client = scope.get("client")
    host = client[0] if isinstance(client, list | tuple) and client else None
    try:
        return str(ipaddress.ip_address(host)) if isinstance(host, str) else _UNKNOWN_PEER
    except ValueError:
        return _UNKNOWN_PEER


#: Span attributes of an admin change: its action and the label of the token that asked for it (never the token).
_ACTION_ATTRIBUTE: Final = "soklet.admin.action"
_LABEL_ATTRIBUTE: Final = "soklet.admin.token"


class _AdminChange:
    """One admin change as the audit line and its span tell it: the action (a route's last segment), the label of
    the token that asked, and the key id once it passed the key-id rule (the raw input otherwise never shows)."""

    __slots__ = ("action", "key_id", "token")

    def __init__(self, action: str, token: str) -> None:
        self.action = action
        self.token = token
        self.key_id: str | None = None

    def end(self, span: Span | None, status: int, reason: str | None, outcome: str = "refused") -> None:
        """Write the audit line (``event=admin-audit``) and mark the span: applied when ``reason`` is ``None``,
        else ``outcome`` with the bounded ``reason``."""
        outcome = "applied" if reason is None else outcome
        if span is not None and span.is_recording():
            span.set_attribute("http.response.status_code", status)
            if self.key_id is not None:
                span.set_attribute(tracing.KEY_ID, self.key_id)
            if reason is None:
                span.set_attribute(tracing.OUTCOME, outcome)
            else:
                tracing.fail(span, reason, outcome)
        fields = {
            "event": "admin-audit",
            "action": self.action,
            "key_id": self.key_id,
            "token": self.token,
            "outcome": outcome,
            "status": status,
            "reason": reason,
        }
        _logger.info(
            "admin API: action=%s key=%s token=%s outcome=%s status=%d%s",
            self.action,
            self.key_id or "-",
            self.token,
            outcome,
            status,
            "" if reason is None else f" reason={reason}",
            extra={"soklet": fields},
        )


class AdminApp:
    """The admin ASGI 3 app over one live keyring (:class:`~.live_keyring.KeyringHolder`). Keyring changes run in a
    worker thread (file or store I/O)."""

    __slots__ = (
        "_body_timeout",
        "_failed_logins",
        "_instance",
        "_lifetime_ms",
        "_live",
        "_metrics",
        "_process_id",
        "_readiness",
        "_rounds",
        "_store",
        "_tokens",
    )

    def __init__(
        self,
        live: KeyringHolder,
        tokens: AdminTokens,
        *,
        instance: str,
        lifetime_ms: int,
        rounds: int,
        metrics: ServerMetrics | None = None,
        body_timeout_seconds: float = DEFAULT_BODY_TIMEOUT_SECONDS,
        store: DurableStore | None = None,
        auth_failure_log_interval_seconds: float = AUTH_FAILURE_LOG_INTERVAL_SECONDS,
        readiness: Readiness | None = None,
        process_id: str | None = None,
    ) -> None:
        self._live = live
        self._tokens = tokens
        self._instance = instance
        self._lifetime_ms = lifetime_ms
        self._rounds = rounds
        self._metrics = metrics
        self._body_timeout = body_timeout_seconds
        self._failed_logins = _FailedLogins(auth_failure_log_interval_seconds)
        self._store = store  # a SQLite store's file is checked by the probes (an outage alone is not a reason)
        # Shared with the MCP endpoint, which answers 503 while it holds the instance back.
        self._readiness = readiness if readiness is not None else Readiness()
        # Made once, when the process starts serving: what tells this instance from another reporting its name
        # (given when the process also names itself elsewhere, as in its store heartbeats).
        self._process_id = process_id if process_id is not None else new_process_id()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            self._failed_logins.flush()  # refusals not reported yet are told before the listener goes
            return
        if scope["type"] != "http":
            return
        try:
            await self._handle(scope, receive, send)
        except _Refused as refusal:
            await _answer(send, refusal.status, {"error": refusal.reason}, refusal.headers)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["path"] in _PROBES and scope["method"] == "GET":
            await self._send_probe(scope["path"], send)
            return
        authorization = headers.get(b"authorization")
        actor = self._tokens.label_for(authorization)
        if actor is None:
            if self._metrics is not None:
                self._metrics.admin_auth_failure("missing" if authorization is None else "invalid")
            self._failed_logins.record(_peer(scope))
            raise _Refused(401, "unauthorized", [(b"www-authenticate", b"Bearer")])
        path, method = scope["path"], scope["method"]
        allowed = _ROUTES.get(path)
        if allowed is None:
            raise _Refused(404, "not-found")
        if method != allowed:
            raise _Refused(405, "method-not-allowed", [(b"allow", allowed.encode("ascii"))])
        if path == "/metrics":
            await self._send_metrics(send, headers.get(b"accept"))
            return
        if method == "GET":
            await _answer(send, 200, self._document(self._live.snapshot()))
            return
        audit = _AdminChange(path.rsplit("/", 1)[1], actor)
        with tracing.span(
            f"soklet.admin {audit.action}", {_ACTION_ATTRIBUTE: audit.action, _LABEL_ATTRIBUTE: actor}
        ) as span:
            try:
                snapshot = await self._apply(audit, headers, receive)
            except _Refused as refusal:
                audit.end(span, refusal.status, refusal.reason)
                raise
            except Exception as error:
                audit.end(span, 500, type(error).__name__, "failed")
                raise
            audit.end(span, 200, None)
        await _answer(send, 200, self._document(snapshot))

    async def _apply(self, audit: _AdminChange, headers: Mapping[bytes, bytes], receive: Receive) -> KeyringSnapshot:
        """Read the change's body and apply it through the live keyring (a worker thread); a refusal raises."""
        body = await _read_body(headers, receive, self._body_timeout)
        change = self._change(audit, body)
        try:
            return await asyncio.to_thread(change)
        except KeyringError as error:
            raise _Refused(_status_for(error), error.reason.value) from None
        except LiveKeyringError as error:
            raise _Refused(409, error.reason.value) from None
        except StoreError as error:
            # Store mode: the change goes through the store first; nothing changed here.
            status = 409 if error.reason in _STORE_CONFLICTS else 503
            raise _Refused(status, error.reason.value, _RETRY_AFTER if status == 503 else None) from None
        except KeyWrapError as error:
            raise _Refused(503, error.reason.value, _RETRY_AFTER) from None

    def _change(self, audit: _AdminChange, body: bytes) -> Callable[[], KeyringSnapshot]:
        action, actor = audit.action, audit.token
        if action == "reload":
            if body.strip() not in (b"", b"{}"):
                raise _Refused(400, "malformed-body")
            return lambda: self._live.reload(actor=actor)
        members = _object(body, {"id", "material"} if action == "stage" else {"id"})
        key_id = members["id"]
        problem = key_id_problem(key_id)
        if problem is None:
            audit.key_id = key_id  # only an id that passed the key-id rule is logged or traced
        if action == "stage":
            # The id first: one that looks like pasted material is refused before anything else is said of it.
            if problem is not None:
                raise _Refused(400, problem.value)
            try:
                material = decode_base64url(members["material"])
            except ValueError:
                raise _Refused(400, "malformed-material") from None
            try:
                key = ProtectionKey.from_id_and_bytes(key_id, material)
            except KeyringError as error:
                raise _Refused(400, error.reason.value) from None
            return lambda: self._live.stage(key, actor=actor)
        if action == "activate":
            return lambda: self._live.activate(key_id, actor=actor)
        return lambda: self._live.remove(key_id, actor=actor)

    def _document(self, snapshot: KeyringSnapshot) -> dict[str, object]:
        return keyring_document(
            snapshot,
            self._live,
            instance=self._instance,
            lifetime_ms=self._lifetime_ms,
            rounds=self._rounds,
            process_id=self._process_id,
        )

    async def _send_probe(self, path: str, send: Send) -> None:
        """``/v1/ready`` and ``/v1/health``: a status and a bounded reason (no token, no other detail)."""
        await self._check_store_file()
        reason = self._readiness.reason
        if path == "/v1/health":
            failing = next((held for held in NotReady if held in _FAILING and held in self._readiness.reasons), None)
            if failing is None:
                await _answer(send, 200, {"status": "ok"})
            else:
                await _answer(send, 503, {"status": "failing", "reason": failing.value})
        elif reason is None:
            await _answer(send, 200, {"status": "ready"})
        else:
            await _answer(send, 503, {"status": "not-ready", "reason": reason.value}, _RETRY_AFTER)

    async def _check_store_file(self) -> None:
        """A SQLite store's file removed or replaced holds the instance back (``store-file-lost``); the check is
        what finds it (bounded). Any other failure of the store is an outage: not a reason."""
        store = self._store
        if not isinstance(store, SqliteStore):
            return
        with contextlib.suppress(StoreError, TimeoutError):
            async with asyncio.timeout(READY_STORE_TIMEOUT_SECONDS):
                await store.check()
        self._readiness.set(NotReady.STORE_FILE_LOST, store.file_lost)

    async def _send_metrics(self, send: Send, accept: bytes | None = None) -> None:
        # OpenMetrics (which carries the refusal counters' exemplars) when the scraper asks for it.
        if self._metrics is None:
            raise _Refused(404, "not-found")
        await self._metrics.refresh_store()  # the store's figures are read at scrape time, bounded
        body, content_type = self._metrics.render(accept)
        await _send(send, 200, body, [(b"content-type", content_type.encode("ascii")), (b"cache-control", b"no-store")])


def _object(body: bytes, names: set[str]) -> dict[str, str]:
    """The body as an object of exactly ``names``, each a string; else 400."""
    try:
        value = parse(body, max_bytes=MAX_ADMIN_BODY_BYTES)
    except JsonError:
        raise _Refused(400, "malformed-json") from None
    if not isinstance(value, JsonObject) or set(value) != names:
        raise _Refused(400, "malformed-body")
    members: dict[str, str] = {}
    for name in names:
        member = value[name]
        if not isinstance(member, JsonString):
            raise _Refused(400, "malformed-body")
        members[name] = member.to_python()
    return members


#: A slow body's answer closes the connection: what is left of the body is never read.
_CLOSE: Final = [(b"connection", b"close")]


async def _read_body(headers: Mapping[bytes, bytes], receive: Receive, timeout: float) -> bytes:
    declared = headers.get(b"content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_ADMIN_BODY_BYTES):
        raise _Refused(413, "body-too-large")
    chunks: list[bytes] = []
    size = 0
    more = True
    # One deadline for the whole body, as on the MCP port: a byte now and then cannot renew it.
    try:
        async with asyncio.timeout(timeout):
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _Refused(400, "malformed-body")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > MAX_ADMIN_BODY_BYTES:
                    raise _Refused(413, "body-too-large")
                chunks.append(chunk)
                more = bool(message.get("more_body", False))
    except TimeoutError:
        raise _Refused(408, "body-timeout", _CLOSE) from None
    return b"".join(chunks)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _answer(
    send: Send, status: int, document: Mapping[str, object], extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(document, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    await _send(send, status, body, [*_JSON_HEADERS, *(extra or [])])


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode("ascii"))],
        }
    )
    await send({"type": "http.response.body", "body": body})


def check_admin_tls_key(path: str | os.PathLike[str], *, allow_insecure_permissions: bool = False) -> None:
    """Refuse (``KeyringFileError``) a TLS private key file that a keyring file would be refused as: readable by
    group or others, owned by another user, in a folder others can change, not a regular file, or over
    :data:`MAX_ADMIN_TLS_KEY_BYTES` (the secret-file rules of :func:`soklet_core.files.read_secret_file`)."""
    read_secret_file(path, limit=MAX_ADMIN_TLS_KEY_BYTES, allow_insecure_permissions=allow_insecure_permissions)


def read_admin_tokens(
    *, token_file: Path | None, token_env: str | None, allow_insecure_permissions: bool = False
) -> AdminTokens:
    """The tokens from exactly one source; ``AdminTokenError`` when none or both are given."""
    if (token_file is None) == (token_env is None):
        raise AdminTokenError("the admin listener needs exactly one token source: a token file or a variable")
    if token_file is not None:
        return AdminTokens.from_file(token_file, allow_insecure_permissions=allow_insecure_permissions)
    assert token_env is not None
    return AdminTokens.from_env(token_env)
