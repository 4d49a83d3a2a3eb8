"""The async admin client: every instance's snapshot read at once, each within its own timeout and size bound.

One ``httpx.AsyncClient`` per CA (proxies from the environment ignored: admin endpoints are addressed
directly), redirects never followed, at most :data:`MAX_CONCURRENT_READS` requests in flight. A failure is an
outcome, never an exception: each instance gets an :class:`InstanceReading` whose ``problem`` is fixed text
(never the answer's content, never the token).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

import httpx

from soklet_core.files import DEFAULT_FLEET_TIMEOUT_SECONDS, KeyringFileError, read_regular_file
from soklet_core.mcp.server.ops._snapshot import (
    ADMIN_SNAPSHOT_PATH,
    MAX_SNAPSHOT_BYTES,
    AdminSnapshot,
    SnapshotError,
    parse_admin_snapshot,
)

from .clock import ClockReading, reading_from_date

__all__ = [
    "MAX_CA_FILE_BYTES",
    "MAX_CONCURRENT_READS",
    "MAX_RESOLVED_ADDRESSES",
    "AdminTarget",
    "ChangeOutcome",
    "InstanceReading",
    "apply_changes",
    "read_snapshots",
    "resolve_targets",
]

#: Most snapshot requests in flight at once (a fleet file lists up to 1,000 instances).
MAX_CONCURRENT_READS: Final = 128
#: Largest CA file read (PEM certificates), in bytes.
MAX_CA_FILE_BYTES: Final = 1024 * 1024
#: Most addresses ``--resolve`` checks for one name.
MAX_RESOLVED_ADDRESSES: Final = 1_000


@dataclass(frozen=True, slots=True)
class AdminTarget:
    """One admin endpoint to read: a display name, the admin base URL, the bearer token (never in ``repr``),
    an optional CA file, the seconds it gets, and for an address found by ``--resolve`` over https, the name
    its certificate is checked against."""

    name: str
    url: str
    token: str = field(repr=False)
    ca_file: str | None = None
    timeout: float = DEFAULT_FLEET_TIMEOUT_SECONDS
    server_name: str | None = None


@dataclass(frozen=True, slots=True)
class InstanceReading:
    """What one instance answered: its snapshot, or the problem (fixed text) that kept it from answering, and
    its clock offset measured from the answer's ``Date`` header (``None``: no usable header, or no answer)."""

    name: str
    url: str
    snapshot: AdminSnapshot | None
    problem: str | None = None
    elapsed_ms: float = 0.0
    clock: ClockReading | None = None

    @property
    def reachable(self) -> bool:
        """Whether a valid snapshot was read."""
        return self.snapshot is not None


async def read_snapshots(targets: Sequence[AdminTarget]) -> tuple[InstanceReading, ...]:
    """Read every target's ``GET /v1/keyring`` concurrently; the readings come back in ``targets`` order."""
    outcomes = await _each(targets, lambda client, target: _read(client, target, "GET", ADMIN_SNAPSHOT_PATH, None))
    return tuple(reading for reading, _status, _reason in outcomes)


@dataclass(frozen=True, slots=True)
class ChangeOutcome:
    """What one instance answered to a keyring change: the HTTP status (``None`` when nothing was answered),
    the new snapshot on a 2xx, the refusal reason from the admin API's closed set on a 4xx, or the problem."""

    name: str
    status: int | None
    snapshot: AdminSnapshot | None
    reason: str | None = None
    problem: str | None = None


async def apply_changes(
    targets: Sequence[AdminTarget], action: str, bodies: Sequence[dict[str, str] | None]
) -> tuple[ChangeOutcome, ...]:
    """``POST /v1/keyring/<action>`` on every target concurrently, ``bodies[i]`` to ``targets[i]`` (JSON, sent
    only in the body: a stage body holds material); the outcomes come back in ``targets`` order."""
    if action not in _CHANGE_ACTIONS:
        raise ValueError("unknown keyring change")
    path = f"{ADMIN_SNAPSHOT_PATH}/{action}"

    async def one(client: httpx.AsyncClient, target: AdminTarget, body: dict[str, str] | None) -> _Outcome:
        payload = json.dumps(body if body is not None else {}).encode("ascii")
        return await _read(client, target, "POST", path, payload)

    pairs = dict(zip((id(target) for target in targets), bodies, strict=True))
    outcomes = await _each(targets, lambda client, target: one(client, target, pairs[id(target)]))
    return tuple(
        ChangeOutcome(reading.name, status, reading.snapshot, reason, reading.problem)
        for reading, status, reason in outcomes
    )


_CHANGE_ACTIONS: Final = frozenset({"stage", "activate", "remove", "reload"})
# A refusal reason is one of the admin API's fixed words (such as key-in-use); anything else is not repeated.
_MAX_REASON_CHARS: Final = 64
_Outcome = tuple[InstanceReading, int | None, str | None]


async def _each(
    targets: Sequence[AdminTarget],
    call: Callable[[httpx.AsyncClient, AdminTarget], Awaitable[_Outcome]],
) -> tuple[_Outcome, ...]:
    if not targets:
        return ()
    verifiers: dict[str | None, ssl.SSLContext | str] = {}
    for path in sorted({target.ca_file for target in targets if target.ca_file is not None}):
        verifiers[path] = await asyncio.to_thread(_ssl_context, path)
    semaphore = asyncio.Semaphore(MAX_CONCURRENT_READS)
    limits = httpx.Limits(max_connections=MAX_CONCURRENT_READS, max_keepalive_connections=0)
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str | None, httpx.AsyncClient] = {}
        for ca_file in {target.ca_file for target in targets}:
            verify = verifiers.get(ca_file, True) if ca_file is not None else True
            if isinstance(verify, str):
                continue
            clients[ca_file] = await stack.enter_async_context(
                # No httpx timeout (its default is 5 s per phase): each target's own timeout bounds its whole read.
                httpx.AsyncClient(
                    verify=verify, trust_env=False, follow_redirects=False, limits=limits, timeout=httpx.Timeout(None)
                )
            )

        async def one(target: AdminTarget) -> _Outcome:
            verifier = verifiers.get(target.ca_file)
            if isinstance(verifier, str):
                return InstanceReading(target.name, target.url, None, verifier), None, None
            async with semaphore:
                return await call(clients[target.ca_file], target)

        return tuple(await asyncio.gather(*(one(target) for target in targets)))


def _ssl_context(ca_file: str) -> ssl.SSLContext | str:
    try:
        pem = read_regular_file(ca_file, limit=MAX_CA_FILE_BYTES)
        return ssl.create_default_context(cadata=pem.decode("ascii"))
    except KeyringFileError as error:
        return f"CA file: {error.reason.description}"
    except (ssl.SSLError, UnicodeDecodeError, ValueError):
        return "CA file: not PEM certificates"


async def _read(
    client: httpx.AsyncClient, target: AdminTarget, method: str, path: str, payload: bytes | None
) -> _Outcome:
    started = time.perf_counter()
    status: int | None = None
    clock: ClockReading | None = None

    def reading(snapshot: AdminSnapshot | None, problem: str | None = None, reason: str | None = None) -> _Outcome:
        elapsed = (time.perf_counter() - started) * 1000
        return InstanceReading(target.name, target.url, snapshot, problem, elapsed, clock), status, reason

    # identity: the body is bounded as it arrives, and a compressed one could expand far beyond the bound.
    headers = {"Authorization": f"Bearer {target.token}", "Accept": "application/json", "Accept-Encoding": "identity"}
    if payload is not None:
        headers["Content-Type"] = "application/json"
    extensions: dict[str, str] = {}
    if target.server_name is not None:
        headers["Host"] = target.server_name
        extensions["sni_hostname"] = target.server_name
    url = target.url.rstrip("/") + path
    try:
        async with asyncio.timeout(target.timeout):
            # Wall-clock times around the exchange bound the moment the instance wrote its Date header.
            sent_ms = time.time() * 1000
            async with client.stream(method, url, headers=headers, extensions=extensions, content=payload) as response:
                clock = reading_from_date(response.headers.get("date"), sent_ms, time.time() * 1000)
                status = response.status_code
                if response.status_code == 401:
                    return reading(None, "HTTP 401: the admin token was refused")
                if response.headers.get("content-encoding", "identity").lower() != "identity":
                    return reading(None, "the answer is compressed (identity was asked for)")
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > MAX_SNAPSHOT_BYTES:
                    return reading(None, f"the answer is larger than {MAX_SNAPSHOT_BYTES:,} bytes")
                body = bytearray()
                async for chunk in response.aiter_raw():
                    body += chunk
                    if len(body) > MAX_SNAPSHOT_BYTES:
                        return reading(None, f"the answer is larger than {MAX_SNAPSHOT_BYTES:,} bytes")
                if response.status_code != 200:
                    reason = _refusal_reason(bytes(body))
                    shown = f"HTTP {response.status_code}" + (f" {reason}" if reason is not None else "")
                    return reading(None, shown, reason)
    except (TimeoutError, httpx.TimeoutException):
        return reading(None, f"no answer within {target.timeout:g} s")
    except httpx.ConnectError as error:
        return reading(None, _connect_problem(error))
    except httpx.HTTPError:
        return reading(None, "the connection failed")
    except ssl.SSLError:
        return reading(None, "TLS failed")
    try:
        return reading(parse_admin_snapshot(bytes(body)))
    except SnapshotError as error:
        return reading(None, f"not a keyring snapshot ({error})")


def _refusal_reason(body: bytes) -> str | None:
    # {"error": reason}: repeated only when it is a short word of letters, digits and dashes (the closed set).
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    reason = document.get("error") if isinstance(document, dict) else None
    if (
        isinstance(reason, str)
        and 0 < len(reason) <= _MAX_REASON_CHARS
        and reason.isascii()
        and all(char.isalnum() or char == "-" for char in reason)
    ):
        return reason
    return None


def _connect_problem(error: httpx.ConnectError) -> str:
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return "TLS: the certificate was not trusted"
        if isinstance(cause, ssl.SSLError):
            return "TLS failed"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    return "could not connect"


async def resolve_targets(
    host: str,
    port: int,
    *,
    token: str,
    scheme: str = "http",
    timeout: float = DEFAULT_FLEET_TIMEOUT_SECONDS,
    ca_file: str | None = None,
) -> tuple[AdminTarget, ...]:
    """One target per address ``host`` resolves to (``getaddrinfo`` in a worker thread, off the loop), in the
    resolver's order without repeats: all pods behind a headless service. Over https the certificate is
    checked against ``host``. Raises ``OSError`` when the name does not resolve."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    addresses = _unique(str(info[4][0]) for info in infos)[:MAX_RESOLVED_ADDRESSES]
    targets = []
    for address in addresses:
        shown = f"[{address}]" if ipaddress.ip_address(address.split("%", 1)[0]).version == 6 else address
        targets.append(
            AdminTarget(
                name=f"{shown}:{port}",
                url=f"{scheme}://{shown}:{port}",
                token=token,
                ca_file=ca_file,
                timeout=timeout,
                server_name=host if scheme == "https" else None,
            )
        )
    return tuple(targets)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
