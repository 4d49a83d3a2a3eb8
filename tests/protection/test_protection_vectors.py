"""The test vectors of docs/protection-format.md, checked in both directions and against a second reading.

``tests/protection/vectors.json`` holds the vectors; the document embeds the same JSON between two markers, and
the first test fails if the two differ. Each vector is then sealed (fixed key, nonce and clock → the exact token)
and opened (token → the exact binding, metadata and state), and decrypted a third time with nothing but
``cryptography`` and the layout the document describes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from soklet_core.json import canonical_text, parse
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.protection import (
    BoundRequest,
    EnvelopeHeader,
    ProtectionConfig,
    RequestStateSealer,
    SealedStateContents,
    bind_request,
    derive_aead_key,
)

ROOT = Path(__file__).resolve().parents[2]
VECTORS_FILE = ROOT / "tests" / "protection" / "vectors.json"
DOC = ROOT / "docs" / "protection-format.md"
BEGIN = "<!-- vectors:begin (tests/protection/vectors.json) -->"
END = "<!-- vectors:end -->"

VECTORS: dict[str, Any] = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))


def doc_vectors() -> Any:
    text = DOC.read_text(encoding="utf-8")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert block.startswith("```json")
    assert block.endswith("```")
    return json.loads(block.removeprefix("```json").removesuffix("```"))


def test_the_document_embeds_exactly_the_vectors_file() -> None:
    assert doc_vectors() == VECTORS
    assert len(VECTORS["vectors"]) >= 5


def sealer_for(vector: dict[str, Any], now: int) -> RequestStateSealer:
    key = ProtectionKey.from_id_and_bytes(vector["key_id"], bytes.fromhex(vector["key_material_hex"]))
    nonce = bytes.fromhex(vector["nonce_hex"])
    config = ProtectionConfig(keyring=ProtectionKeyring(key))
    return RequestStateSealer(config, clock=lambda: now, nonce_source=lambda size: nonce)


def bound_for(vector: dict[str, Any], request_text: str | None = None) -> BoundRequest:
    return bind_request(
        (request_text or vector["request"]).encode("utf-8"),
        path=vector["path"],
        partition=vector["partition"],
        protocol_version=vector["protocol_version"],
    )


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda vector: vector["name"])
def test_seal_gives_the_token(vector: dict[str, Any]) -> None:
    emitter = bound_for(vector)
    binding = emitter.binding
    assert vector["binding"] == {
        "m": binding.method,
        "p": binding.path,
        "v": binding.protocol_version,
        "a": binding.partition_digest,
        "d": binding.params_digest,
    }
    contents = SealedStateContents(
        binding,
        vector["round"],
        vector["issued_at_ms"],
        vector["expires_at_ms"],
        emitter.request_id,
        parse(vector["state"].encode("utf-8")),
    )
    assert contents.plaintext().decode("utf-8") == vector["plaintext"]
    assert sealer_for(vector, vector["issued_at_ms"]).seal_contents(contents) == vector["token"]
    if vector["round"] == 1:
        sealer = sealer_for(vector, vector["issued_at_ms"])
        lifetime = vector["expires_at_ms"] - vector["issued_at_ms"]
        if lifetime == sealer.config.lifetime_ms:
            # The ordinary first emission at that clock gives the same token.
            assert sealer.seal(parse(vector["state"].encode("utf-8")), emitter) == vector["token"]


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda vector: vector["name"])
def test_open_gives_the_state_back(vector: dict[str, Any]) -> None:
    request = json.loads(vector["request"])
    retry = dict(request, id=f"retry-of-{request['id']}")
    retry["params"] = dict(request["params"], requestState=vector["token"])
    sealer = sealer_for(vector, vector["expires_at_ms"] - 1)
    opened = sealer.open(vector["token"], bound_for(vector, json.dumps(retry, ensure_ascii=False)))
    assert canonical_text(opened.state) == vector["state_canonical"]
    contents = sealer.diagnose(vector["token"]).contents
    assert contents is not None
    assert contents.round == vector["round"]
    assert (contents.issued_at_ms, contents.expires_at_ms) == (vector["issued_at_ms"], vector["expires_at_ms"])
    header = EnvelopeHeader.read(vector["token"])
    assert (header.version, header.key_id) == (1, vector["key_id"])
    assert header.decoded_size == len(vector["plaintext"].encode("utf-8"))
    assert header.encoded_size == len(vector["token"])


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda vector: vector["name"])
def test_a_second_reading_of_the_layout_decrypts_the_token(vector: dict[str, Any]) -> None:
    material = bytes.fromhex(vector["key_material_hex"])
    aead_key = HKDF(algorithm=SHA256(), length=32, salt=b"", info=b"soklet-mcp-protection-v1/aead").derive(material)
    assert aead_key.hex() == vector["aead_key_hex"] == derive_aead_key(material).hex()
    token = vector["token"]
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == token
    kid = vector["key_id"].encode()
    header = bytes([1, len(kid)]) + kid
    assert raw.startswith(header)
    nonce = raw[len(header) : len(header) + 12]
    assert nonce.hex() == vector["nonce_hex"]
    associated = b"soklet-mcp-protection-v1\x00" + header
    assert associated.hex() == vector["associated_data_hex"]
    plaintext = AESGCM(aead_key).decrypt(nonce, raw[len(header) + 12 :], associated)
    assert plaintext.decode("utf-8") == vector["plaintext"]
    document = json.loads(plaintext)
    assert document["b"] == vector["binding"]
    partition = hashlib.sha256(b"soklet partition\x00" + vector["partition"].encode()).digest()
    assert base64.urlsafe_b64encode(partition).rstrip(b"=").decode() == vector["binding"]["a"]
