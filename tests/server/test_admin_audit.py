"""The admin API's changes as audit lines and spans: the real app over a real live keyring, driven through
httpx's ASGI transport, its spans in a real SDK provider. The token's label appears, never the token; a key id
appears only once it passed the key-id rule."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from soklet_core import tracing
from soklet_core.files import read_keyring_file
from soklet_core.keys import KeyringManager, ProtectionKey
from soklet_core.mcp.server.ops import AdminApp, AdminTokens, LiveKeyring
from tests.server.support_admin import LABEL, TOKEN, material_text, write_keyring
from tests.support_tracing import recorded_spans

#: An id the key-id rule refuses (not an RFC 9110 token): it must never be logged or traced.
BAD_ID = "no such id; DROP"


@pytest.fixture
def app(tmp_path: Path) -> AdminApp:
    path = tmp_path / "keys.toml"
    write_keyring(path, ProtectionKey.generate("k1"))
    document = read_keyring_file(path)
    live = LiveKeyring(KeyringManager(document.keyring()), path, document=document)
    return AdminApp(live, AdminTokens.parse(f"{LABEL}:{TOKEN}"), instance="t", lifetime_ms=60_000, rounds=3)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for soklet alone, every ended span kept; off again after the test."""
    with recorded_spans() as recorded:
        yield recorded


def _post(app: AdminApp, path: str, body: bytes) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://admin") as client:
            return await client.post(path, content=body, headers={"Authorization": f"Bearer {TOKEN}"})

    return asyncio.run(send())


def _audit(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The structured fields of every admin-audit line logged."""
    found = [getattr(record, "soklet", None) for record in caplog.records if record.name == "soklet.admin"]
    return [dict(fields) for fields in found if isinstance(fields, dict) and fields.get("event") == "admin-audit"]


def _no_secret(exported: tuple[ReadableSpan, ...], caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    """None of ``secrets`` (nor the token) in the audit lines, their fields or the spans' names and attributes."""
    audited = [record for record in caplog.records if hasattr(record, "soklet")]
    texts = [text for record in audited for text in (record.getMessage(), str(getattr(record, "soklet", "")))]
    texts += [f"{found.name} {dict(found.attributes or {})}" for found in exported]
    for secret in (TOKEN, *secrets):
        assert not any(secret in text for text in texts)


def test_an_applied_change_is_one_audit_line_and_one_span(
    app: AdminApp, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    material = material_text(ProtectionKey.generate("k2"))
    with caplog.at_level(logging.INFO, logger="soklet.admin"):
        reply = _post(app, "/v1/keyring/stage", f'{{"id": "k2", "material": "{material}"}}'.encode())
    assert reply.status_code == 200
    assert _audit(caplog) == [
        {
            "event": "admin-audit",
            "action": "stage",
            "key_id": "k2",
            "token": LABEL,
            "outcome": "applied",
            "status": 200,
            "reason": None,
        }
    ]
    [found] = spans.get_finished_spans()
    assert found.name == "soklet.admin stage"
    assert dict(found.attributes or {}) == {
        "soklet.admin.action": "stage",
        "soklet.admin.token": LABEL,
        "http.response.status_code": 200,
        tracing.KEY_ID: "k2",
        tracing.OUTCOME: "applied",
    }
    assert found.status.status_code is StatusCode.UNSET
    _no_secret(spans.get_finished_spans(), caplog, material)


def test_a_refused_change_names_its_reason(
    app: AdminApp, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="soklet.admin"):
        assert _post(app, "/v1/keyring/activate", b'{"id": "k9"}').status_code == 404
    [line] = _audit(caplog)
    assert (line["action"], line["key_id"], line["outcome"], line["status"]) == ("activate", "k9", "refused", 404)
    assert line["reason"] == "unknown-key"
    [found] = spans.get_finished_spans()
    attributes = dict(found.attributes or {})
    assert attributes[tracing.OUTCOME] == "refused"
    assert attributes[tracing.REASON] == "unknown-key"
    assert attributes["http.response.status_code"] == 404
    assert attributes[tracing.KEY_ID] == "k9"
    assert found.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize("action", ["activate", "remove", "stage"])
def test_an_id_the_key_id_rule_refuses_is_never_told(
    app: AdminApp, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture, action: str
) -> None:
    body = {"stage": f'{{"id": "{BAD_ID}", "material": "x"}}'}.get(action, f'{{"id": "{BAD_ID}"}}')
    with caplog.at_level(logging.INFO):
        reply = _post(app, f"/v1/keyring/{action}", body.encode())
    assert reply.status_code in (400, 404)
    [line] = _audit(caplog)
    assert (line["key_id"], line["outcome"], line["status"]) == (None, "refused", reply.status_code)
    [found] = spans.get_finished_spans()
    assert tracing.KEY_ID not in (found.attributes or {})
    _no_secret(spans.get_finished_spans(), caplog, BAD_ID, "DROP")
    # Nor in any other line (the live keyring's own refusal line names the id only once it passed the rule).
    assert not any("DROP" in record.getMessage() for record in caplog.records)


def test_a_malformed_body_is_audited_without_its_text(
    app: AdminApp, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="soklet.admin"):
        assert _post(app, "/v1/keyring/reload", b'{"client": "text-9d2c"}').status_code == 400
        assert _post(app, "/v1/keyring/remove", b"not json text-9d2c").status_code == 400
    assert [(line["action"], line["reason"]) for line in _audit(caplog)] == [
        ("reload", "malformed-body"),
        ("remove", "malformed-json"),
    ]
    assert [found.name for found in spans.get_finished_spans()] == ["soklet.admin reload", "soklet.admin remove"]
    _no_secret(spans.get_finished_spans(), caplog, "text-9d2c")


def test_reads_and_unauthenticated_requests_are_not_changes(
    app: AdminApp, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    async def requests() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://admin") as client:
            assert (await client.get("/v1/keyring", headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 200
            assert (await client.post("/v1/keyring/reload", content=b"{}")).status_code == 401

    with caplog.at_level(logging.INFO, logger="soklet.admin"):
        asyncio.run(requests())
    assert _audit(caplog) == []
    assert spans.get_finished_spans() == ()


def test_with_tracing_off_the_audit_line_is_still_written(app: AdminApp, caplog: pytest.LogCaptureFixture) -> None:
    assert tracing.tracer() is None
    with caplog.at_level(logging.INFO, logger="soklet.admin"):
        assert _post(app, "/v1/keyring/reload", b"").status_code == 200
    [line] = _audit(caplog)
    assert (line["action"], line["outcome"], line["token"]) == ("reload", "applied", LABEL)
