"""The sealed-state codec: pinned bytes from before the lean codec, and the codec against the generic path.

The pinned case is vector 1 of ``vectors.json`` as it stood before the codec was rewritten (its inputs given
field by field, so regenerating the vectors for other reasons cannot move the pin): the same binding, round,
times, request id, state, key, nonce and clock must still give byte-identical plaintext and token.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soklet_core.json import (
    MAX_EXPONENT_MAGNITUDE,
    JsonError,
    JsonNumber,
    JsonString,
    JsonValue,
    canonical_bytes,
    canonical_text,
    parse,
)
from soklet_core.keys import ProtectionKey, ProtectionKeyring
from soklet_core.protection import (
    ProtectionConfig,
    ProtectionUsageError,
    Reason,
    RequestStateBinding,
    RequestStateProtectionException,
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
    config = ProtectionConfig(keyring=ProtectionKeyring(key))
    nonce = bytes(range(12))
    return RequestStateSealer(config, clock=lambda: PINNED_ISSUED_AT, nonce_source=lambda size: nonce)


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


# ------------------------------------------------------------------------------------- the codec against the reference

# Member names whose UTF-16 order differs from their code point order (U+FFFF sorts after U+10000 in code points,
# before it in UTF-16), characters the canonical form escapes, and plain ones.
NAME_CHARACTERS = ["a", "b", "é", "\uffff", "\ue000", "\U00010000", "\U0001f600", '"', "\\", "\x01", "\x1f", "/"]
names = st.text(alphabet=st.sampled_from(NAME_CHARACTERS), max_size=4)
texts = st.text(max_size=12)


@st.composite
def decimals(draw: st.DrawFn) -> Decimal:
    """Exact decimals up to 60 digits, with exponents anywhere in range and at its two ends."""
    digits = draw(st.text("0123456789", min_size=1, max_size=60)).lstrip("0") or "0"
    adjusted = draw(
        st.one_of(
            st.integers(-20, 20),
            st.sampled_from([-MAX_EXPONENT_MAGNITUDE, -MAX_EXPONENT_MAGNITUDE + 1, MAX_EXPONENT_MAGNITUDE]),
            st.integers(-MAX_EXPONENT_MAGNITUDE, MAX_EXPONENT_MAGNITUDE),
        )
    )
    exponent = 0 if digits == "0" else adjusted - (len(digits) - 1)
    return Decimal((draw(st.integers(0, 1)), tuple(int(digit) for digit in digits), exponent))


scalars = st.one_of(st.none(), st.booleans(), texts, decimals(), st.integers(-(10**60), 10**60))
trees = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(names, children, max_size=4)),
    max_leaves=20,
)
request_ids = st.one_of(texts.map(JsonString.from_value), decimals().map(JsonNumber.from_value))
framework_integers = st.one_of(st.integers(-(2**63), 2**63), st.sampled_from([-(2**63), 2**63, 0, 1]))
bindings = st.builds(RequestStateBinding, texts, texts, texts, texts, texts)


@st.composite
def contents(draw: st.DrawFn) -> SealedStateContents:
    return SealedStateContents(
        draw(bindings),
        draw(framework_integers),
        draw(framework_integers),
        draw(framework_integers),
        draw(request_ids),
        JsonValue.from_python(draw(trees)),
    )


def reference_plaintext(sealed: SealedStateContents) -> bytes:
    """The generic path: the canonical form of the whole plaintext object, built in the value model."""
    binding = sealed.binding
    document = {
        "b": {
            "a": binding.partition_digest,
            "d": binding.params_digest,
            "m": binding.method,
            "p": binding.path,
            "v": binding.protocol_version,
        },
        "e": sealed.expires_at_ms,
        "i": sealed.issued_at_ms,
        "q": sealed.request_id,
        "r": sealed.round,
        "s": sealed.state,
    }
    return canonical_bytes(JsonValue.from_python(document))


def reference_read(plaintext: bytes) -> tuple[object, ...] | None:
    """The generic path: parse the whole plaintext, then check the schema member by member; ``None`` = refused."""
    try:
        root = parse(plaintext).to_python()
    except JsonError:
        return None
    if not isinstance(root, dict) or set(root) != {"b", "e", "i", "q", "r", "s"}:
        return None
    bound = root["b"]
    if not isinstance(bound, dict) or set(bound) != {"a", "d", "m", "p", "v"}:
        return None
    if not all(isinstance(bound[name], str) for name in "mpvad"):
        return None
    integers = [root[name] for name in "rie"]
    if not all(isinstance(n, Decimal) and n == int(n) and abs(n) <= 2**63 for n in integers):
        return None
    if not isinstance(root["q"], str | Decimal):
        return None
    fields = tuple(bound[name] for name in "mpvad")
    return (fields, *(int(n) for n in integers), root["q"], root["s"])


def read(plaintext: bytes) -> tuple[object, ...] | None:
    try:
        sealed = SealedStateContents.from_plaintext(plaintext)
    except RequestStateProtectionException as error:
        if error.reason is not Reason.JSON:
            raise
        return None
    binding = sealed.binding
    fields = (binding.method, binding.path, binding.protocol_version, binding.partition_digest, binding.params_digest)
    numbers = (sealed.round, sealed.issued_at_ms, sealed.expires_at_ms)
    return (fields, *numbers, sealed.request_id.to_python(), sealed.state.to_python())


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(contents())
def test_the_codec_writes_the_canonical_form_of_the_whole_plaintext(sealed: SealedStateContents) -> None:
    assert sealed.plaintext() == reference_plaintext(sealed)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(contents())
def test_the_codec_reads_what_it_wrote_without_parsing_the_framework_members(sealed: SealedStateContents) -> None:
    plaintext = sealed.plaintext()
    fast = SealedStateContents._read_canonical(plaintext)
    assert fast == sealed
    assert fast is not None
    assert canonical_bytes(fast.state) == canonical_bytes(sealed.state)
    assert read(plaintext) == reference_read(plaintext)


# Framework members as the canonical writer would not write them, and states on every side of the JSON limits.
FRAMEWORK_EDITS: list[tuple[bytes, bytes]] = [
    (b'"r":', b'"r":1,"r":'),  # duplicate member
    (b'{"b":', b'{ "b":'),  # whitespace: not canonical, still the schema
    (b'"b":{"a":', b'"b":{"a":"x","a":'),  # duplicate binding member
    (b'"q":', b'"q":"\\ud800","x":'),  # a lone surrogate, and a member too many
    (b'"m":"', b'"m":"\\ud800'),  # a lone surrogate in the method
    (b'"m":"', b'"m":"\\ud83d\\ude00'),  # an escaped surrogate pair: valid, not canonical
    (b'"m":"', b'"m":"\\/'),  # an escape the canonical form does not write
    (b'"r":', b'"r":1.0E+0,"t":'),
    (b'"e":', b'"e":9.3E+18,"t":'),
    (b'"b":{', b'"b":{"z":1,'),
]
STATE_TEXTS: list[bytes] = [
    b'{"x":1,"x":2}',
    b'{"x":{"y":[1,{"z":1,"z":1}]}}',
    b'"\\ud800"',
    b'"a\\udc00"',
    b'"\\ud83d\\ude00"',
    b"1e10000",
    b"1e10001",
    b"0.1e10001",
    b"12e9999",
    b"1E-10000",
    b"1" * 60,
    b"-" + b"9" * 60 + b".5E-9000",
    b"[" * 254 + b"]" * 254,
    b"[" * 255 + b"]" * 255,
    b"[" * 256 + b"]" * 256,
    b" 1 ",
    b"1 2",
    b"\xef\xbb\xbf1",
    b"\xed\xa0\x80",
    b"NaN",
    '{"\U00010000":1,"\uffff":2}'.encode(),
    b'{"s":1}',
    b"",
]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(contents(), st.sampled_from(FRAMEWORK_EDITS), st.sampled_from([None, *STATE_TEXTS]))
def test_the_codec_accepts_and_refuses_exactly_what_the_generic_path_does(
    sealed: SealedStateContents, edit: tuple[bytes, bytes], state_text: bytes | None
) -> None:
    plaintext = sealed.plaintext()
    if state_text is not None:
        cut = plaintext.index(b',"s":')
        plaintext = plaintext[:cut] + b',"s":' + state_text + b"}"
    assert read(plaintext) == reference_read(plaintext)
    edited = plaintext.replace(*edit, 1)
    assert read(edited) == reference_read(edited)


@pytest.mark.parametrize("state_text", STATE_TEXTS)
def test_each_state_text_is_read_as_the_generic_path_reads_it(state_text: bytes) -> None:
    plaintext = pinned_contents()._framework_bytes() + b',"s":' + state_text + b"}"
    assert read(plaintext) == reference_read(plaintext)


def test_the_depth_limit_counts_the_plaintext_whole() -> None:
    framework = pinned_contents()._framework_bytes()
    deepest = framework + b',"s":' + b"[" * 255 + b"]" * 255 + b"}"
    too_deep = framework + b',"s":' + b"[" * 256 + b"]" * 256 + b"}"
    assert read(deepest) is not None
    # The state alone is within the limit; inside the plaintext it is one level too deep.
    assert parse(b"[" * 256 + b"]" * 256) is not None
    assert read(too_deep) is None


def test_a_binding_string_with_a_lone_surrogate_is_refused_when_written() -> None:
    sealed = pinned_contents()
    odd = SealedStateContents(
        RequestStateBinding("tools/\ud800", "/mcp", "v", "a", "d"), 1, 0, 1, sealed.request_id, sealed.state
    )
    with pytest.raises(ProtectionUsageError):
        odd.plaintext()
    with pytest.raises(JsonError):
        JsonString.from_value("\ud800")
