"""The demo's URL-elicitation page: the out-of-band step ``account.link`` sends a browser to.

``LinkStore`` holds one server-side record per opaque handle (the caller it is bound to, its expiry, a random
per-record form token, and whether the user approved); ``LinkPage`` is a small raw ASGI app that serves
``GET <prefix><handle>`` (what is being approved and one button) and ``POST <prefix><handle>`` (the button).
The tool's retry with ``accept`` then consumes an approved record bound to the same caller, exactly once.

What the page guards, and how:

* **Forgery.** Double submit: the form token is in a hidden field and in a ``SameSite=Strict``, ``HttpOnly``
  cookie scoped to the page's own path; a POST needs both, each equal to the record's token
  (``secrets.compare_digest``). A cross-site form post carries no Strict cookie and is refused (403).
* **Replay.** One approval per record: a second POST gets the "already used" page (409).
* **Guessing.** An unknown handle and an expired one get the same fixed page (404) that says only "not found or
  expired"; no page ever shows whom a handle is bound to.
* **Framing, scripts, caching, leaks.** Every page is sent with ``Content-Security-Policy: default-src 'none';
  style-src 'unsafe-inline'; form-action 'self'``, ``X-Frame-Options: DENY``, ``Cache-Control: no-store`` and
  ``Referrer-Policy: same-origin`` (not ``no-referrer``: under it a browser's form post says ``Origin: null``,
  which the endpoint's Origin check refuses); all text on it is the server's own, HTML-escaped.
* **Bodies.** A POST is ``application/x-www-form-urlencoded`` only, at most :data:`LINK_FORM_BODY_BYTES` bytes,
  read within :data:`LINK_FORM_TIMEOUT_SECONDS`.
* **Exhaustion.** Each authorization partition holds at most :data:`MAX_PENDING_LINKS_PER_PARTITION` pending
  (live, unconsumed) records, so one caller minting links as fast as it can fills only its own partition's share
  and every other partition still gets links; the store as a whole holds at most :data:`MAX_LINK_RECORDS`, a
  backstop that takes 64 full partitions to reach. A link that ends (linked, declined, cancelled) frees its place
  at once; an abandoned one when it expires.

The records are process-local on purpose (a demo); a real deployment keeps them in shared durable storage.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import html
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl

from soklet_core.mcp import RequestContext
from soklet_core.mcp.model import is_opaque_handle, mint_url_handle
from soklet_core.mcp.server.http._transport import Receive, Scope, Send
from soklet_core.mcp.server.options import DEFAULT_SERVER_NAME
from soklet_core.protection.diagnosis import iso_time

__all__ = [
    "LINK_FORM_BODY_BYTES",
    "LINK_FORM_TIMEOUT_SECONDS",
    "LINK_LIFETIME_SECONDS",
    "LINK_PAGE_PREFIX",
    "MAX_LINK_RECORDS",
    "MAX_PENDING_LINKS_PER_PARTITION",
    "ApprovalOutcome",
    "LinkPage",
    "LinkRefusal",
    "LinkStatus",
    "LinkStore",
    "LinkView",
]

#: How long a minted link stays usable, in seconds (page and tool alike).
LINK_LIFETIME_SECONDS: Final = 600
#: Live records the store keeps at most; past it, minting is refused until records expire or are used. A backstop:
#: the per-partition cap below is reached first by any one partition.
MAX_LINK_RECORDS: Final = 4096
#: Pending (live, unconsumed) records one authorization partition may hold; past it, that partition's minting is
#: refused until one of its links ends or expires, and no other partition is affected. A person links an account
#: or two at a time; 64 leaves a tenant of many users room while one client filling it blocks only itself.
MAX_PENDING_LINKS_PER_PARTITION: Final = 64
#: The largest form body the page reads (the form has one short field).
LINK_FORM_BODY_BYTES: Final = 4096
#: How long the page waits for a form body before answering 408.
LINK_FORM_TIMEOUT_SECONDS: Final = 10.0
#: Where the page is mounted beside the MCP endpoint; a handle is the one path segment after it.
LINK_PAGE_PREFIX: Final = "/link/"

_CSRF_FIELD: Final = "csrf"
_CSRF_COOKIE: Final = "soklet_link_csrf"
_FORM_TYPE: Final = "application/x-www-form-urlencoded"
# The form has one field; a few more are read (and refused) so a stuffed body fails fast and bounded.
_MAX_FORM_FIELDS: Final = 4


class LinkStatus(enum.Enum):
    """What :meth:`LinkStore.consume` found for the tool's retry."""

    #: The user approved on the page and the record is bound to this caller: linked, record used up.
    LINKED = "linked"
    #: The record is live and bound to this caller but the page was not completed yet: ask again.
    PENDING = "pending"
    #: Unknown, expired, already consumed, or bound to another caller: the linking cannot complete.
    GONE = "gone"


class LinkRefusal(enum.Enum):
    """Why :meth:`LinkStore.mint` gave no handle."""

    #: The caller's partition holds :data:`MAX_PENDING_LINKS_PER_PARTITION` pending links.
    PARTITION_FULL = "partition-full"
    #: The store holds :data:`MAX_LINK_RECORDS` live links (the backstop).
    STORE_FULL = "store-full"


class ApprovalOutcome(enum.Enum):
    """What :meth:`LinkStore.approve` did with a form post."""

    APPROVED = "approved"
    #: Unknown or expired handle.
    GONE = "gone"
    #: The form token or its cookie is missing or wrong (a forged or stale post).
    FORBIDDEN = "forbidden"
    #: The record was approved before: single use.
    USED = "used"


@dataclass(frozen=True, slots=True)
class LinkView:
    """What the page may show about a live record: its expiry (epoch seconds) and state; never its caller."""

    expires_at: float
    csrf: str = dataclasses.field(repr=False)
    approved: bool


@dataclass(frozen=True, slots=True)
class _LinkRecord:
    subject: str | None = dataclasses.field(repr=False)
    partition: str = dataclasses.field(repr=False)
    expires_at: float
    csrf: str = dataclasses.field(repr=False)
    approved: bool = False


class LinkStore:
    """Server-side records of URL handles: whom each is bound to (subject and partition), until when, its form
    token, and whether the user approved. Thread-safe; every operation is a short dictionary update under a lock.

    Pending records are counted per partition (:data:`MAX_PENDING_LINKS_PER_PARTITION` each) and in all
    (:data:`MAX_LINK_RECORDS`). ``clock`` gives wall-clock epoch seconds (the page shows the expiry as a UTC time).
    """

    __slots__ = ("_clock", "_lock", "_pending", "_records")

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        if not callable(clock):
            raise TypeError("clock takes a callable returning epoch seconds")
        # Insertion order is minting order, so with a steady clock the oldest expiry comes first.
        self._records: dict[str, _LinkRecord] = {}
        self._pending: dict[str, int] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def pending(self, context: RequestContext) -> int:
        """How many pending links the partition of ``context`` holds."""
        with self._lock:
            self._purge(self._clock())
            return self._pending.get(context.partition, 0)

    def mint(self, context: RequestContext) -> str | LinkRefusal:
        """A fresh handle bound to this request's caller, or why not: its partition holds
        :data:`MAX_PENDING_LINKS_PER_PARTITION` pending links, or the store :data:`MAX_LINK_RECORDS`."""
        handle = mint_url_handle()
        csrf = secrets.token_urlsafe(32)
        partition = context.partition
        with self._lock:
            now = self._clock()
            self._purge(now)
            if self._pending.get(partition, 0) >= MAX_PENDING_LINKS_PER_PARTITION:
                return LinkRefusal.PARTITION_FULL
            if len(self._records) >= MAX_LINK_RECORDS:
                return LinkRefusal.STORE_FULL
            self._records[handle] = _LinkRecord(context.identity.subject, partition, now + LINK_LIFETIME_SECONDS, csrf)
            self._pending[partition] = self._pending.get(partition, 0) + 1
        return handle

    def release(self, handle: str, context: RequestContext) -> bool:
        """Drop a live record bound to this caller (the link ended without linking: declined or cancelled), so it
        no longer counts against the partition; ``False`` (and nothing touched) for any other handle."""
        with self._lock:
            record = self._live(handle)
            if record is None or not _bound_to(record, context):
                return False
            self._drop(handle)
            return True

    def _purge(self, now: float) -> None:
        # Called with the lock held. Drops expired records from the front (the oldest) and stops at the first live
        # one, so a mint costs only the records that expired since the last: bounded, and amortized constant.
        expired = []
        for handle, record in self._records.items():
            if record.expires_at > now:
                break
            expired.append(handle)
        for handle in expired:
            self._drop(handle)

    def _drop(self, handle: str) -> None:
        # Called with the lock held: removes the record and its place in its partition's count.
        record = self._records.pop(handle)
        left = self._pending[record.partition] - 1
        if left:
            self._pending[record.partition] = left
        else:
            del self._pending[record.partition]

    def _live(self, handle: str) -> _LinkRecord | None:
        # Called with the lock held. An expired record is dropped on sight.
        record = self._records.get(handle)
        if record is not None and record.expires_at <= self._clock():
            self._drop(handle)
            return None
        return record

    def view(self, handle: str) -> LinkView | None:
        """The page's view of a live record, or ``None`` (unknown or expired)."""
        with self._lock:
            record = self._live(handle)
            return None if record is None else LinkView(record.expires_at, record.csrf, record.approved)

    def approve(self, handle: str, *, form_token: str | None, cookie_tokens: Iterable[str]) -> ApprovalOutcome:
        """Mark the record approved if the form token and one of the cookie tokens both equal its token."""
        with self._lock:
            record = self._live(handle)
            if record is None:
                return ApprovalOutcome.GONE
            field_ok = form_token is not None and secrets.compare_digest(form_token, record.csrf)
            # Every cookie is compared (no early exit), so timing says nothing about which one matched.
            cookie_ok = False
            for token in cookie_tokens:
                cookie_ok = secrets.compare_digest(token, record.csrf) or cookie_ok
            if not (field_ok and cookie_ok):
                return ApprovalOutcome.FORBIDDEN
            if record.approved:
                return ApprovalOutcome.USED
            self._records[handle] = dataclasses.replace(record, approved=True)
            return ApprovalOutcome.APPROVED

    def consume(self, handle: str, context: RequestContext) -> LinkStatus:
        """For the tool's retry: ``LINKED`` (and the record is gone) only for an approved record bound to this
        caller; ``PENDING`` for a live one not approved yet; ``GONE`` otherwise (a crossed handle is untouched)."""
        with self._lock:
            record = self._live(handle)
            if record is None:
                return LinkStatus.GONE
            if not _bound_to(record, context):
                return LinkStatus.GONE
            if not record.approved:
                return LinkStatus.PENDING
            self._drop(handle)
            return LinkStatus.LINKED


def _bound_to(record: _LinkRecord, context: RequestContext) -> bool:
    """Whether ``record`` is bound to the caller of ``context`` (partition and subject)."""
    return secrets.compare_digest(record.partition, context.partition) and record.subject == context.identity.subject


# --- the page ---------------------------------------------------------------------------------------------------

_SECURITY_HEADERS: Final = (
    (b"content-type", b"text/html; charset=utf-8"),
    (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)
_STYLE: Final = (
    "body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;line-height:1.5}"
    "button{font-size:1rem;padding:.5rem 1.25rem}"
)


def _page(title: str, *paragraphs: str, form: str = "") -> bytes:
    body = "".join(f"<p>{html.escape(text)}</p>" for text in paragraphs)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}{form}</body></html>"
    ).encode()


# The one page for an unknown handle and an expired one: it says nothing else about existence.
_NOT_FOUND: Final = _page(
    "Link not found", "This link was not found or has expired. Start again from your application."
)
_USED: Final = _page("Link already used", "This link was already used. Return to your application.")
_FORBIDDEN: Final = _page("Request refused", "This form could not be verified. Reload the page and try again.")
_BAD_REQUEST: Final = _page("Bad request", "The form could not be read.")
_TOO_LARGE: Final = _page("Request too large", "The form was larger than this page accepts.")
_TIMEOUT: Final = _page("Request timeout", "The form did not arrive in time.")
_UNSUPPORTED: Final = _page("Unsupported form", "This page accepts only a plain HTML form post.")
_NOT_ALLOWED: Final = _page("Method not allowed", "This page accepts only GET and POST.")


class LinkPage:
    """The ASGI 3 app of the link page: ``LinkPage(store, server_name=..., prefix=...)``.

    Mount it at ``prefix`` (default :data:`LINK_PAGE_PREFIX`) beside the MCP endpoint: a request path is
    ``<prefix><handle>`` (or just ``/<handle>`` when the mount strips its prefix). ``server_name`` is what the page
    says the account is linked to.
    """

    __slots__ = ("_done", "_prefix", "_server_name", "_store")

    def __init__(self, store: LinkStore, *, server_name: str = DEFAULT_SERVER_NAME, prefix: str = LINK_PAGE_PREFIX):
        if not isinstance(store, LinkStore):
            raise TypeError("LinkPage takes a LinkStore")
        if not isinstance(server_name, str) or not server_name.strip():
            raise ValueError("server_name must be non-empty text")
        if not isinstance(prefix, str) or not prefix.startswith("/") or not prefix.endswith("/"):
            raise ValueError("prefix must start and end with '/'")
        self._store = store
        self._server_name = server_name
        self._prefix = prefix
        self._done = _page(
            "Account linked",
            f"Your account is now linked to {server_name}.",
            "Return to your application and continue there.",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        handle = self._handle(scope["path"])
        method = scope["method"]
        if method not in ("GET", "POST"):
            await _respond(send, 405, _NOT_ALLOWED, extra=((b"allow", b"GET, POST"),))
            return
        if method == "POST":
            await self._post(scope, receive, send, handle)
            return
        view = None if handle is None else self._store.view(handle)
        if view is None:
            await _respond(send, 404, _NOT_FOUND)
        elif view.approved:
            await _respond(send, 409, _USED)
        else:
            await _respond(send, 200, self._approval_page(view), extra=(self._cookie(scope, view),))

    def _handle(self, path: str) -> str | None:
        rest = path[len(self._prefix) :] if path.startswith(self._prefix) else path.lstrip("/")
        return rest if is_opaque_handle(rest) else None

    def _approval_page(self, view: LinkView) -> bytes:
        expires = iso_time(int(view.expires_at * 1000))
        form = (
            f'<form method="post"><input type="hidden" name="{_CSRF_FIELD}" value="{html.escape(view.csrf)}">'
            '<button type="submit" id="approve">Link account</button></form>'
        )
        return _page(
            "Link your account",
            f"Link your account to {self._server_name} for the caller of this request.",
            f"This link expires at {expires} and works once.",
            form=form,
        )

    def _cookie(self, scope: Scope, view: LinkView) -> tuple[bytes, bytes]:
        # Scoped to this page's own path (the full path as the browser sent it), gone when the record expires.
        path = scope.get("root_path", "") + scope["path"]
        if not path.startswith(self._prefix):
            path = scope["path"]
        max_age = max(0, int(view.expires_at - time.time()))
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        value = f"{_CSRF_COOKIE}={view.csrf}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"
        return b"set-cookie", value.encode("latin-1")

    async def _post(self, scope: Scope, receive: Receive, send: Send, handle: str | None) -> None:
        headers = [(name.lower(), value) for name, value in scope["headers"]]
        content_types = [value for name, value in headers if name == b"content-type"]
        media = content_types[0].split(b";", 1)[0].strip().lower() if len(content_types) == 1 else b""
        if media != _FORM_TYPE.encode():
            await _respond(send, 415, _UNSUPPORTED)
            return
        try:
            async with asyncio.timeout(LINK_FORM_TIMEOUT_SECONDS):
                body = await _read_body(receive)
        except TimeoutError:
            await _respond(send, 408, _TIMEOUT)
            return
        if body is None:
            await _respond(send, 413, _TOO_LARGE)
            return
        try:
            fields = parse_qsl(
                body.decode("ascii"), keep_blank_values=True, strict_parsing=True, max_num_fields=_MAX_FORM_FIELDS
            )
        except ValueError:  # not ASCII, not form syntax, or too many fields
            await _respond(send, 400, _BAD_REQUEST)
            return
        tokens = [value for name, value in fields if name == _CSRF_FIELD]
        if handle is None:
            await _respond(send, 404, _NOT_FOUND)
            return
        outcome = self._store.approve(
            handle,
            form_token=tokens[0] if len(tokens) == 1 else None,
            cookie_tokens=_cookie_values(headers, _CSRF_COOKIE),
        )
        if outcome is ApprovalOutcome.APPROVED:
            await _respond(send, 200, self._done)
        elif outcome is ApprovalOutcome.USED:
            await _respond(send, 409, _USED)
        elif outcome is ApprovalOutcome.FORBIDDEN:
            await _respond(send, 403, _FORBIDDEN)
        else:
            await _respond(send, 404, _NOT_FOUND)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body, or ``None`` past :data:`LINK_FORM_BODY_BYTES`; empty when the client left mid-body."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""  # the client is gone: no form, so nothing is approved (the answer goes nowhere)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > LINK_FORM_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _cookie_values(headers: list[tuple[bytes, bytes]], name: str) -> list[str]:
    """The values of every cookie called ``name`` (the head is already size-limited by the HTTP server)."""
    wanted = name.encode()
    values: list[str] = []
    for header, value in headers:
        if header != b"cookie":
            continue
        for pair in value.split(b";"):
            key, sep, cookie = pair.strip().partition(b"=")
            if sep and key == wanted:
                values.append(cookie.decode("latin-1"))
    return values


async def _respond(send: Send, status: int, page: bytes, *, extra: Iterable[tuple[bytes, bytes]] = ()) -> None:
    headers = [*_SECURITY_HEADERS, (b"content-length", str(len(page)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": page})
