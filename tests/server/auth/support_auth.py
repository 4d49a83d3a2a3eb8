"""Real loopback HTTP endpoints for the token-policy tests: a JWKS and an RFC 7662 introspection endpoint.

``Endpoint`` (from :mod:`tests.cli.support_tokens`, where the CLI tests' JWKS server is built on it) answers every
request with what its ``answer`` callable returns. ``jwks_endpoint`` serves a
:class:`~tests.cli.support_tokens.TokenIssuer`'s key set (or any document), ``introspection_endpoint`` answers
introspection by a token -> answer map behind HTTP Basic client authentication. ``Clock`` is a monotonic clock a
test moves by hand (the policies take it as ``clock=``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from urllib.parse import parse_qs, quote_plus

from tests.cli.support_tokens import Endpoint, Received, Reply, json_reply

__all__ = [
    "Clock",
    "Endpoint",
    "Introspector",
    "JwksDocument",
    "Received",
    "Reply",
    "basic_header",
    "json_reply",
    "jwks_endpoint",
]


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
