"""One continuation, two real ``soklet serve`` instances, one trace: what an operator follows in a collector.

Two ``soklet serve`` subprocesses on free loopback ports share one keyring file (so each opens the other's sealed
states) and bearer-token admission (a JWT with a ``tenant`` partition, checked against one local JWKS). Each exports
to a real OTLP/HTTP receiver (:mod:`tests.tracing.otlp_receiver`) through nothing but the standard variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``, ``OTEL_BSP_SCHEDULE_DELAY``). The client names its span in
``_meta.traceparent``; round 1 of ``catalog.continue`` goes to instance A, round 2 with A's ``requestState`` to
instance B. What arrives must be one trace: a SERVER span per instance under the client's span, with the round's
outcome, and B's ``soklet.state.open`` naming the keyring's active key. A retry whose state was tampered with is a
refused span with the closed reason ``authentication``; and nothing any instance exported — span names, attributes,
events, status messages, resource, the raw protobuf bodies — holds the state, a 16-character piece of it, the key
material in any text form, the partition, the bearer token or the client's arguments.

Also: the HTTP ``traceparent`` header is the parent when ``_meta`` has none, ``_meta`` wins when both are there; a
server without the variables exports nothing, not even to the SDK's default endpoint; a refused ``OTEL_*`` value
stops ``soklet serve`` in one line, before it listens.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from soklet_core import tracing
from soklet_core.files import read_keyring_file
from tests.cli.support_serve import Served, shared_keyring
from tests.cli.support_tokens import JwksServer, TokenIssuer, serve_auth_args
from tests.server.support import Client
from tests.tracing.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = pytest.mark.slow

TOOL = "catalog.continue"
ELICIT = {"elicitation": {"form": {}}}
APPROVE = {"approval": {"action": "accept", "content": {}}}
#: The client's arguments: a value a leak would show.
ARGUMENTS = {"query": "lamps-for-the-q3-offsite-7d1f"}
#: The caller's partition (the token's ``tenant`` claim): never in a span.
PARTITION = "tenant-orion-5c2a9e"
#: The client's span: one trace id, the span every round is a child of.
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
#: An API key in the exporter's headers: it reaches the collector and nothing else.
API_KEY = "otlp-key-1b9d6c3e8f2a4b7c"
#: Long enough for a substring to be the token's, not a common word.
PIECE = 16


def _traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


def _clean_env(**variables: str) -> dict[str, str]:
    """This process's environment without any OTEL_* variable (a developer's own must not leak in), plus these."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env.update(variables)
    return env


@dataclass
class Fleet:
    """The receiver, the two traced instances, the shared keyring and the caller's token."""

    receiver: OtlpReceiver
    a: Served
    b: Served
    keyring: Path
    token: str

    def client(self, served: Served) -> Client:
        return Client(served.facts["url"].removesuffix("/mcp"), token=self.token)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    folder = tmp_path_factory.mktemp("traces")
    keyring = shared_keyring(folder)
    issuer = TokenIssuer()
    started: list[Served] = []
    with OtlpReceiver() as receiver, JwksServer(issuer.jwks()) as jwks:
        try:
            for name in ("a", "b"):
                env = _clean_env(
                    OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
                    OTEL_EXPORTER_OTLP_HEADERS=f"x-api-key={API_KEY}",
                    OTEL_SERVICE_NAME=f"soklet-{name}",
                    OTEL_BSP_SCHEDULE_DELAY="100",
                )
                arguments = ("--keyring", str(keyring), "--store", f"sqlite://{folder / f'{name}.db'}")
                started.append(Served(folder, *arguments, *serve_auth_args(jwks), env=env, name=f"serve-{name}"))
            yield Fleet(receiver, started[0], started[1], keyring, issuer.token(sub="alice", tenant=PARTITION))
            for served in started:
                log = served.stop()
                # One start-up line names the exporter; the exporter's headers are never logged.
                assert "tracing: exporting spans (otlp) as service soklet-" in log, log[-2000:]
                assert API_KEY not in log
        finally:
            for served in started:
                served.kill()


def _server_spans(spans: list[ReceivedSpan], trace_id: str, service: str | None = None) -> list[ReceivedSpan]:
    return [
        span
        for span in spans
        if span.kind == "SERVER" and span.trace_id == trace_id and (service is None or span.service_name == service)
    ]


def _children(spans: list[ReceivedSpan], parent: ReceivedSpan, name: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.parent_span_id == parent.span_id and span.name == name]


def _has(trace_id: str, *services: str, child: str | None = None) -> Callable[[list[ReceivedSpan]], bool]:
    """A ``wait_for`` predicate: a server span of ``trace_id`` from each service (and, for the last, ``child``)."""

    def holds(spans: list[ReceivedSpan]) -> bool:
        found = [_server_spans(spans, trace_id, service) for service in services]
        if not all(found):
            return False
        return child is None or bool(_children(spans, found[-1][-1], child))

    return holds


def _tampered(token: str) -> str:
    """``token`` with one character in its middle (the ciphertext) changed to another base64url character."""
    middle = len(token) // 2
    replacement = "A" if token[middle] != "A" else "B"
    return token[:middle] + replacement + token[middle + 1 :]


def _text_forms(material: bytes) -> list[str]:
    return [
        base64.b64encode(material).decode(),
        base64.b64encode(material).decode().rstrip("="),
        base64.urlsafe_b64encode(material).decode(),
        base64.urlsafe_b64encode(material).decode().rstrip("="),
        material.hex(),
        material.hex().upper(),
    ]


def _pieces(secret: str) -> set[str]:
    return (
        {secret[start : start + PIECE] for start in range(len(secret) - PIECE + 1)} if len(secret) > PIECE else {secret}
    )


def test_a_continuation_across_two_instances_is_one_trace_and_no_span_holds_a_secret(fleet: Fleet) -> None:
    a, b = fleet.client(fleet.a), fleet.client(fleet.b)
    meta = {"traceparent": TRACEPARENT}
    # Each round its own JSON-RPC id (the state refuses a retry that reuses the id it was sealed for).
    first = a.call(TOOL, ARGUMENTS, capabilities=ELICIT, meta=meta, request_id=101)
    assert first.status == 200, first.body
    assert first.result["resultType"] == "input_required"
    state = first.state
    assert state is not None
    done = b.retry(TOOL, ARGUMENTS, state, APPROVE, capabilities=ELICIT, meta=meta, request_id=102)
    assert done.status == 200, done.body
    assert done.result["content"][0]["text"] == "Catalog access approved."

    spans = fleet.receiver.wait_for(_has(TRACE_ID, "soklet-a", "soklet-b", child="soklet.state.open"))
    (round_1,) = _server_spans(spans, TRACE_ID, "soklet-a")
    (round_2,) = _server_spans(spans, TRACE_ID, "soklet-b")
    for server in (round_1, round_2):
        # Both instances' spans hang under the one span the client named: an operator sees one trace.
        assert server.parent_span_id == CLIENT_SPAN
        assert server.attributes["mcp.method.name"] == "tools/call"
        assert server.attributes["gen_ai.tool.name"] == TOOL
        assert server.scope == tracing.TRACER_NAME
        assert server.status_code != "ERROR"
    assert round_1.attributes[tracing.OUTCOME] == "input_required"
    assert round_2.attributes[tracing.OUTCOME] == "complete"
    assert round_2.attributes[tracing.ROUND] == 1
    assert round_1.resource["service.instance.id"] != round_2.resource["service.instance.id"]

    active = fleet.a.facts["active_key_id"]
    assert active == fleet.b.facts["active_key_id"]
    (sealed,) = _children(spans, round_1, "soklet.state.seal")
    assert (sealed.attributes[tracing.KEY_ID], sealed.attributes[tracing.ROUND]) == (active, 1)
    (opened,) = _children(spans, round_2, "soklet.state.open")
    assert opened.attributes[tracing.OUTCOME] == "opened"
    assert opened.attributes[tracing.KEY_ID] == active
    assert opened.trace_id == TRACE_ID
    assert _children(spans, round_2, "soklet.handler")
    assert fleet.receiver.headers[0]["x-api-key"] == API_KEY  # the SDK sent the headers it was given

    # A retry whose state was tampered with, under another client span: refused, in a span that says why.
    refused_trace, refused_client = "7a3e6f1c2b9d4e8fa0b1c2d3e4f50617", "1f2e3d4c5b6a7988"
    tampered = _tampered(state)
    retry = b.retry(
        TOOL,
        ARGUMENTS,
        tampered,
        APPROVE,
        capabilities=ELICIT,
        meta={"traceparent": _traceparent(refused_trace, refused_client)},
        request_id=103,
    )
    assert "error" in retry.body, retry.body
    spans = fleet.receiver.wait_for(_has(refused_trace, "soklet-b", child="soklet.state.open"))
    (refused,) = _server_spans(spans, refused_trace, "soklet-b")
    assert refused.parent_span_id == refused_client
    assert refused.attributes[tracing.OUTCOME] == "refused"
    assert refused.status_code == "ERROR"
    (refused_open,) = _children(spans, refused, "soklet.state.open")
    assert refused_open.attributes[tracing.REASON] == "authentication"
    assert refused_open.status_code == "ERROR"
    # The key id of a token that did not authenticate is the client's text: not written.
    assert tracing.KEY_ID not in refused_open.attributes

    _assert_nothing_secret(fleet, spans, state, tampered)


def _assert_nothing_secret(fleet: Fleet, spans: list[ReceivedSpan], *tokens: str) -> None:
    """No text of any span, and no byte of any body received, holds a token (or a 16-character piece of one), the
    key material, the partition, the bearer token or the client's arguments."""
    materials = [key.material for key in read_keyring_file(fleet.keyring).keyring()]
    assert materials
    forbidden: set[str] = {PARTITION, fleet.token, *ARGUMENTS.values(), *_pieces(fleet.token)}
    for token in tokens:
        forbidden |= _pieces(token)
    for material in materials:
        for form in _text_forms(material):
            forbidden |= _pieces(form)
    texts = [text for span in spans for text in span.texts()]
    assert len(spans) >= 7
    for text in texts:
        leaked = [secret for secret in forbidden if secret in text]
        assert not leaked, f"a span holds a secret: {text[:80]!r}"
    for body in fleet.receiver.bodies:
        assert not [secret for secret in forbidden if secret.encode() in body], "an export body holds a secret"
        for material in materials:
            assert material not in body


def test_the_header_is_the_parent_without_meta_and_meta_wins_with_both(fleet: Fleet) -> None:
    client = fleet.client(fleet.a)
    header_trace, header_span = "5d6c7b8a99aabbccddeeff0011223344", "a1b2c3d4e5f60718"
    meta_trace, meta_span = "66778899aabbccddeeff001122334455", "0918273645546372"
    alone = client.call(
        TOOL, ARGUMENTS, capabilities=ELICIT, headers={"traceparent": _traceparent(header_trace, header_span)}
    )
    assert alone.status == 200, alone.body
    spans = fleet.receiver.wait_for(_has(header_trace, "soklet-a"))
    (from_header,) = _server_spans(spans, header_trace, "soklet-a")
    assert from_header.parent_span_id == header_span

    other_header_trace, other_header_span = "0123456789abcdef0123456789abcdef", "fedcba9876543210"
    both = client.call(
        TOOL,
        ARGUMENTS,
        capabilities=ELICIT,
        meta={"traceparent": _traceparent(meta_trace, meta_span)},
        headers={"traceparent": _traceparent(other_header_trace, other_header_span)},
    )
    assert both.status == 200, both.body
    spans = fleet.receiver.wait_for(_has(meta_trace, "soklet-a"))
    (from_meta,) = _server_spans(spans, meta_trace, "soklet-a")
    assert from_meta.parent_span_id == meta_span
    assert _server_spans(spans, other_header_trace) == []


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_server_without_the_variables_exports_nothing(tmp_path: Path) -> None:
    # The receiver sits where the SDK would send by default (localhost:4318): uninvited, soklet sends nothing there.
    if not _free(4318):
        pytest.skip("port 4318, the OTLP/HTTP default, is taken on this machine")
    with OtlpReceiver(port=4318) as receiver:
        env = _clean_env(
            OTEL_SERVICE_NAME="soklet-quiet", OTEL_BSP_SCHEDULE_DELAY="100", OTEL_TRACES_SAMPLER="always_on"
        )
        served = Served(tmp_path, "--keyring", str(shared_keyring(tmp_path)), env=env, name="quiet")
        try:
            client = Client(served.facts["url"].removesuffix("/mcp"))
            first = client.call(TOOL, ARGUMENTS, capabilities=ELICIT, meta={"traceparent": TRACEPARENT})
            assert first.status == 200, first.body
            done = client.retry(
                TOOL, ARGUMENTS, first.state, APPROVE, capabilities=ELICIT, meta={"traceparent": TRACEPARENT}
            )
            assert done.status == 200, done.body
            client.close()
            time.sleep(1.0)  # ten batch delays
        finally:
            log = served.stop()
        assert receiver.spans == []
        assert receiver.bodies == []
        assert receiver.refused == 0
        assert "tracing:" not in log
        # The control: asked for with OTEL_TRACES_EXPORTER alone, the same server does send to that default.
        env = _clean_env(OTEL_SERVICE_NAME="soklet-asked", OTEL_BSP_SCHEDULE_DELAY="100", OTEL_TRACES_EXPORTER="otlp")
        served = Served(tmp_path, "--keyring", str(shared_keyring(tmp_path)), env=env, name="asked")
        try:
            client = Client(served.facts["url"].removesuffix("/mcp"))
            assert client.call(TOOL, ARGUMENTS, capabilities=ELICIT).status == 200
            client.close()
            receiver.wait_for(lambda spans: any(span.service_name == "soklet-asked" for span in spans))
        finally:
            served.stop()


def test_a_refused_otel_variable_stops_the_start_in_one_line(tmp_path: Path) -> None:
    keyring = str(shared_keyring(tmp_path))
    for variables, named in (
        ({"OTEL_TRACES_EXPORTER": f"zipkin-{API_KEY}"}, "OTEL_TRACES_EXPORTER"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
    ):
        env = _clean_env(OTEL_EXPORTER_OTLP_HEADERS=f"x-api-key={API_KEY}", **variables)
        done = subprocess.run(
            [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--keyring", keyring],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert done.returncode == 1, done.stderr
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith("soklet: tracing: "), done.stderr
        assert named in done.stderr
        assert API_KEY not in done.stderr
        assert "grpc" not in done.stderr
