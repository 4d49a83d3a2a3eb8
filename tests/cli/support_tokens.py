"""Signing keys, JWKS documents and bearer tokens for the OAuth tests, and a real loopback JWKS server.

``TokenIssuer`` holds one RSA (RS256), one EC P-256 (ES256) and one Ed25519 (EdDSA) key, each with its own ``kid``;
``jwks()`` publishes their public halves and ``token(...)`` mints a signed JWT with the claims a test names.
``JwksServer`` serves a JWKS from a real ``ThreadingHTTPServer`` on 127.0.0.1 and counts the fetches, so a test can
check the policy's caching and refresh. This module's API is shared with the interop tests: keep it stable.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

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


class JwksServer:
    """A JWKS served at ``url`` (``http://127.0.0.1:PORT/jwks.json``) by a real HTTP server in a thread.

    ``document`` is what it serves (replace it to rotate keys), ``fetches`` how many GETs of the JWKS path it
    answered; ``status`` (default 200) lets a test make it fail. Use it as a context manager.
    """

    def __init__(self, document: dict[str, Any] | Callable[[], dict[str, Any]], path: str = "/jwks.json") -> None:
        self.document = document
        self.path = path
        self.status = 200
        self.fetches = 0
        self._lock = threading.Lock()
        served = self

        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != served.path:
                    self.send_error(404)
                    return
                with served._lock:
                    served.fetches += 1
                    status = served.status
                    document = served.document() if callable(served.document) else served.document
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests read the server's counters, not its log."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The JWKS URL."""
        return f"http://127.0.0.1:{self.port}{self.path}"

    def start(self) -> JwksServer:
        """Start serving in a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="jwks-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> JwksServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
