"""The sealed-state codec: pinned bytes from before the lean codec, and the codec against the generic path.

The pinned case is vector 1 of ``vectors.json`` as it stood before the codec was rewritten (its inputs given
field by field, so regenerating the vectors for other reasons cannot move the pin): the same binding, round,
times, request id, state, key, nonce and clock must still give byte-identical plaintext and token.
"""

from __future__ import annotations

from soklet_core.json import JsonNumber, canonical_text, parse
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.protection import (
    ProtectionConfig,
    RequestStateBinding,
    RequestStateSealer,
    SealedStateContents,
)

PINNED_BINDING = RequestStateBinding(
    method="tools/call",
    path="/mcp",
    protocol_version="2026-07-28",
    partition_digest="dMl9f38Ufv6MOpTBwyHVYXrwkA_MdJkRKrttAnll4Wg",
    params_digest="NZ73soxKPbx-6t2TRDkjdODrJOavBanQbGGETXTIZjw",
)
PINNED_ISSUED_AT = 1785542400000
PINNED_EXPIRES_AT = 1785543300000
PINNED_STATE = b'{"step":1,"phase":"confirm"}'
PINNED_PLAINTEXT = (
    b'{"b":{"a":"dMl9f38Ufv6MOpTBwyHVYXrwkA_MdJkRKrttAnll4Wg","d":"NZ73soxKPbx-6t2TRDkjdODrJOavBanQbGGETXTIZjw",'
    b'"m":"tools/call","p":"/mcp","v":"2026-07-28"},"e":1.7855433E+12,"i":1.7855424E+12,"q":1,"r":1,'
    b'"s":{"phase":"confirm","step":1}}'
)
PINNED_TOKEN = (
    "AQcyMDI2LTA4AAECAwQFBgcICQoL1_h4EGbJOcD7Fm-B-Su80a22oalhne3tJ1bPziFOAqSvIW8HWVLPAXEBlMZlKn1G0OGq75fsnvfN9Lky"
    "cSpM8Q_7qVb9kGq0FKJKD5fpYKlMJtiXelK3u9rsmAwiUHnXMBl9mVvqzIogOiKqKmT2u9KxEINVvUV8BOJ_zOFitsQPHBd5Vf0XnjkcyuJi"
    "xTaqJ4cVEXo6iwmyFHEI_h6aFCxf2KtuD4re6-6tR9THnh4I3zfarQHNXLr2v6I46gzVo9_XNlLXRQFDJiuDrMwcYUtsMxNk4zwTD_FqTIna"
    "Y5haH7H6ifAaScxbkPedYXlHfnV1hXSofIlC"
)


def pinned_sealer() -> RequestStateSealer:
    key = ProtectionKey.from_id_and_bytes("2026-08", bytes(range(32)))
    config = ProtectionConfig.with_keyring(ProtectionKeyring.with_active_key(key).build()).build()
    nonce = bytes(range(12))
    return RequestStateSealer.for_server(config, clock=lambda: PINNED_ISSUED_AT, nonce_source=lambda size: nonce)


def pinned_contents() -> SealedStateContents:
    return SealedStateContents(
        PINNED_BINDING, 1, PINNED_ISSUED_AT, PINNED_EXPIRES_AT, JsonNumber.from_value(1), parse(PINNED_STATE)
    )


def test_the_codec_writes_the_pinned_plaintext_and_token() -> None:
    contents = pinned_contents()
    assert contents.plaintext() == PINNED_PLAINTEXT
    assert pinned_sealer().seal_contents(contents) == PINNED_TOKEN


def test_the_codec_reads_the_pinned_plaintext_back() -> None:
    contents = SealedStateContents.from_plaintext(PINNED_PLAINTEXT)
    assert contents == pinned_contents()
    assert canonical_text(contents.state) == '{"phase":"confirm","step":1}'
    opened = pinned_sealer().diagnose(PINNED_TOKEN)
    assert opened.contents == pinned_contents()
