"""Real loopback HTTP endpoints for the token-policy tests: a JWKS and an RFC 7662 introspection endpoint.

``Endpoint`` is a ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) in a daemon thread, answering every request with
what its ``answer`` callable returns; it counts the requests and the most it held in flight at once, and may delay
each answer. ``jwks_endpoint`` serves a :class:`~tests.cli.support_tokens.TokenIssuer`'s key set (or any document),
``introspection_endpoint`` answers introspection by a token -> answer map behind HTTP Basic client authentication.
``Clock`` is a monotonic clock a test moves by hand (the policies take it as ``clock=``).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, quote_plus


@dataclass
class Reply:
    """One answer: status, headers, body (``Content-Length`` is added unless ``length`` is False)."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    length: bool = True


@dataclass(frozen=True)
class Received:
    """What the endpoint received: method, path, headers (lower-case names), body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes


class Endpoint:
    """A real HTTP server answering with ``answer(received)``; ``requests`` counts them, ``peak`` the most in flight."""

    def __init__(self, answer: Callable[[Received], Reply], *, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.requests = 0
        self.received: list[Received] = []
        self.peak = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        served = self

        class _Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received = Received(
                    self.command,
                    self.path,
                    {name.lower(): value for name, value in self.headers.items()},
                    self.rfile.read(length),
                )
                with served._lock:
                    served.requests += 1
                    served.received.append(received)
                    served._in_flight += 1
                    served.peak = max(served.peak, served._in_flight)
                try:
                    if served.delay:
                        time.sleep(served.delay)
                    reply = served.answer(received)
                finally:
                    with served._lock:
                        served._in_flight -= 1
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    if reply.length:
                        self.send_header("Content-Length", str(len(reply.body)))
                    else:
                        self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (a timeout or a size bound under test)

            do_GET = _serve  # noqa: N815 - http.server's handler names
            do_POST = _serve  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests read the counters, not the log."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Endpoint:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="auth-endpoint", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (the port then refuses connections)."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Endpoint:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def json_reply(document: object, *, headers: Mapping[str, str] | None = None) -> Reply:
    """A 200 JSON answer."""
    return Reply(200, json.dumps(document).encode(), {"Content-Type": "application/json", **(headers or {})})


class JwksDocument:
    """What a JWKS endpoint serves: a document a test replaces (rotation), extra headers, or a raw reply."""

    def __init__(self, document: object, *, headers: Mapping[str, str] | None = None) -> None:
        self.document = document
        self.headers = dict(headers or {})
        self.reply: Reply | None = None

    def __call__(self, received: Received) -> Reply:
        if self.reply is not None:
            return self.reply
        return json_reply(self.document, headers=self.headers)


def jwks_endpoint(document: object, *, headers: Mapping[str, str] | None = None) -> tuple[Endpoint, JwksDocument]:
    """A started endpoint serving ``document`` at every path, and the served document's holder."""
    served = JwksDocument(document, headers=headers)
    return Endpoint(served).start(), served


def basic_header(client_id: str, secret: str) -> str:
    """The ``Authorization`` value RFC 6749 §2.3.1 prescribes: each part form-urlencoded, then Basic."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
    return "Basic " + base64.b64encode(pair).decode()


class Introspector:
    """Answers introspection: ``answers`` maps a token to its JSON answer (an unknown token is inactive); a request
    without the expected Basic credentials gets 401; ``reply`` overrides every answer (failures)."""

    def __init__(self, client_id: str, secret: str) -> None:
        self.expected = basic_header(client_id, secret)
        self.answers: dict[str, object] = {}
        self.reply: Reply | None = None

    def __call__(self, received: Received) -> Reply:
        if self.reply is not None:
            return self.reply
        if received.method != "POST" or received.headers.get("authorization") != self.expected:
            return Reply(401, b'{"error":"invalid_client"}', {"Content-Type": "application/json"})
        form = parse_qs(received.body.decode())
        if form.get("token_type_hint") != ["access_token"] or len(form.get("token", [])) != 1:
            return Reply(400, b'{"error":"invalid_request"}', {"Content-Type": "application/json"})
        return json_reply(self.answers.get(form["token"][0], {"active": False}))


class Clock:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now += seconds
