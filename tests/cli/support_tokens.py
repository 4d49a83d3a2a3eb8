"""Signing keys, JWKS documents and bearer tokens for the OAuth tests, and a real loopback JWKS server.

``TokenIssuer`` holds one RSA (RS256), one EC P-256 (ES256) and one Ed25519 (EdDSA) key, each with its own ``kid``;
``jwks()`` publishes their public halves and ``token(...)`` mints a signed JWT with the claims a test names.
``Endpoint`` is a real ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) in a daemon thread answering every request with
what its ``answer`` callable returns (it counts the requests and the most in flight at once, and may delay each
answer); ``JwksServer`` is one serving a JWKS and counting the fetches, so a test can check the policy's caching
and refresh. This module's API is shared with the interop tests: keep it stable.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

#: The issuer and audience the tests use unless they name others (the issuer is loopback http, which is allowed).
ISSUER = "http://127.0.0.1/issuer"
AUDIENCE = "soklet-test"

#: The algorithm each key kind signs with.
ALGORITHMS = ("RS256", "ES256", "EdDSA")

#: Marks a claim the token must leave out (``token(exp_in=OMIT)`` mints a token without ``exp``).
OMIT: Any = object()


class TokenIssuer:
    """Three signing keys (RS256, ES256, EdDSA) and the tokens they sign; ``issuer``/``audience`` are the defaults."""

    def __init__(self, issuer: str = ISSUER, audience: str = AUDIENCE, *, prefix: str = "test") -> None:
        self.issuer = issuer
        self.audience = audience
        self.keys: dict[str, Any] = {
            "RS256": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "ES256": ec.generate_private_key(ec.SECP256R1()),
            "EdDSA": ed25519.Ed25519PrivateKey.generate(),
        }
        #: The ``kid`` of each algorithm's key, as published in the JWKS and put in the token header.
        self.kids: dict[str, str] = {alg: f"{prefix}-{alg.lower()}" for alg in ALGORITHMS}

    def jwk(self, alg: str) -> dict[str, Any]:
        """The public JWK of ``alg``'s key, with ``kid``, ``alg`` and ``use``."""
        public = self.keys[alg].public_key()
        if alg == "RS256":
            body = RSAAlgorithm.to_jwk(public, as_dict=True)
        elif alg == "ES256":
            body = ECAlgorithm.to_jwk(public, as_dict=True)
        else:
            body = OKPAlgorithm.to_jwk(public, as_dict=True)
        return {**body, "kid": self.kids[alg], "alg": alg, "use": "sig"}

    def jwks(self, algs: tuple[str, ...] = ALGORITHMS) -> dict[str, Any]:
        """The JWKS document (``{"keys": [...]}``) publishing ``algs``' public keys."""
        return {"keys": [self.jwk(alg) for alg in algs]}

    def write_jwks(self, path: Path, algs: tuple[str, ...] = ALGORITHMS) -> Path:
        """Write :meth:`jwks` to ``path`` (0644: a JWKS is public) and return it."""
        path.write_text(json.dumps(self.jwks(algs)))
        path.chmod(0o644)
        return path

    def token(
        self,
        *,
        sub: str | None = "alice",
        tenant: str | None = None,
        scope: str | None = None,
        aud: Any = None,
        iss: str | None = None,
        exp_in: Any = 300,
        nbf_in: float | None = None,
        iat_in: float | None = 0,
        alg: str = "RS256",
        kid: str | None = None,
        claims: Mapping[str, Any] | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> str:
        """A signed JWT: ``sub``, ``tenant`` (the ``tenant`` claim), ``scope`` (space-separated), ``aud``/``iss``
        (default the issuer's), ``exp``/``nbf``/``iat`` as seconds from now (negative: in the past; ``OMIT``/None
        leaves the claim out), signed by ``alg``'s key with ``kid`` (default that key's kid); ``claims`` are added
        last and override."""
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.issuer if iss is None else iss,
            "aud": self.audience if aud is None else aud,
        }
        if sub is not None:
            body["sub"] = sub
        if tenant is not None:
            body["tenant"] = tenant
        if scope is not None:
            body["scope"] = scope
        if exp_in is not None and exp_in is not OMIT:
            body["exp"] = now + int(exp_in)
        if nbf_in is not None:
            body["nbf"] = now + int(nbf_in)
        if iat_in is not None:
            body["iat"] = now + int(iat_in)
        body.update(claims or {})
        header = {"kid": self.kids[alg] if kid is None else kid, **(headers or {})}
        return jwt.encode(body, self.keys[alg], algorithm=alg, headers=header)


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

    def start(self) -> Self:
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

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def json_reply(document: object, *, headers: Mapping[str, str] | None = None) -> Reply:
    """A 200 JSON answer."""
    return Reply(200, json.dumps(document).encode(), {"Content-Type": "application/json", **(headers or {})})


class JwksServer(Endpoint):
    """A JWKS served at ``url`` (``http://127.0.0.1:PORT/jwks.json``) by a real :class:`Endpoint`.

    ``document`` is what it serves (replace it to rotate keys), ``fetches`` how many GETs of the JWKS path it
    answered; ``status`` (default 200) lets a test make it fail. Use it as a context manager.
    """

    def __init__(self, document: dict[str, Any] | Callable[[], dict[str, Any]], path: str = "/jwks.json") -> None:
        self.document = document
        self.path = path
        self.status = 200
        self.fetches = 0
        self._fetch_lock = threading.Lock()
        super().__init__(self._serve_jwks)

    def _serve_jwks(self, received: Received) -> Reply:
        if received.method != "GET" or received.path.split("?", 1)[0] != self.path:
            return Reply(404, b"")
        with self._fetch_lock:
            self.fetches += 1
            status = self.status
            document = self.document() if callable(self.document) else self.document
        return Reply(status, json.dumps(document).encode(), {"Content-Type": "application/json"})

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The JWKS URL."""
        return f"http://127.0.0.1:{self.port}{self.path}"


def serve_auth_args(jwks: JwksServer, *extra: str) -> tuple[str, ...]:
    """``soklet serve``'s options admitting this module's tokens against ``jwks``, the partition from the
    ``tenant`` claim, then ``extra``."""
    return (
        "--auth",
        "jwt",
        "--issuer",
        ISSUER,
        "--audience",
        AUDIENCE,
        "--jwks-url",
        jwks.url,
        "--partition-claim",
        "tenant",
        *extra,
    )
