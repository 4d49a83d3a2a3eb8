"""The stable params digest (docs/json.md: "The stable params digest")."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

import pytest

from soklet_core.json import (
    EXCLUDED_META_MEMBERS,
    EXCLUDED_PARAMS_MEMBERS,
    JsonError,
    JsonErrorReason,
    JsonValue,
    ParamsDigest,
    params_digest,
    parse,
    stable_params,
)
from tests.json.support import digest_text_of

R = JsonErrorReason

PARAMS = (
    b'{"name":"catalog.continue","arguments":{"sku":"A-100","quantity":100,"price":3.50,"note":"caf\xc3\xa9"},'
    b'"requestState":"opaque","inputResponses":{"q":{"action":"accept"}},'
    b'"_meta":{"progressToken":"p1","traceparent":"00-ab-cd-01","tracestate":"x=1","baggage":"k=v",'
    b'"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}'
)
PARAMS_CANONICAL = (
    b'{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},'
    b'"arguments":{"note":"caf\xc3\xa9","price":3.5,"quantity":1E+2,"sku":"A-100"},'
    b'"name":"catalog.continue"}'
)


def request(params: bytes | None, **extra: str) -> bytes:
    head = b'{"jsonrpc":"2.0","id":7,"method":"tools/call"'
    for name, value in extra.items():
        head += f',"{name}":{value}'.encode()
    if params is None:
        return head + b"}"
    return head + b',"params":' + params + b"}"


def digest(source: Any, **kwargs: Any) -> str:
    return params_digest(source, **kwargs).text


def test_excluded_member_sets_match_design() -> None:
    assert frozenset(EXCLUDED_PARAMS_MEMBERS) == {"inputResponses", "requestState"}
    assert frozenset(EXCLUDED_META_MEMBERS) == {"progressToken", "traceparent", "tracestate", "baggage"}


def test_known_answer() -> None:
    expected_digest = hashlib.sha256(PARAMS_CANONICAL).digest()
    result = params_digest(PARAMS)
    assert isinstance(result, ParamsDigest)
    assert result.digest == expected_digest
    assert result.canonical_size == len(PARAMS_CANONICAL)
    assert result.text == base64.urlsafe_b64encode(expected_digest).rstrip(b"=").decode()
    assert str(result) == result.text
    # Through a request, through str input, through a parsed value: the same answer.
    assert digest(request(PARAMS)) == result.text
    assert digest(PARAMS.decode()) == result.text
    assert digest(parse(PARAMS)) == result.text
    assert digest(parse(request(PARAMS))) == result.text


def test_digest_text_is_43_characters_of_base64url_without_padding() -> None:
    for doc in (b"{}", b"[]", PARAMS, b'{"a":"??>>"}', b"[1,2,3]"):
        text = digest(doc)
        assert len(text) == 43
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", text)
        assert "=" not in text
        raw = base64.urlsafe_b64decode(text + "=")
        assert raw == params_digest(doc).digest
        assert len(raw) == 32


def test_request_and_bare_params_give_the_same_digest() -> None:
    bare = digest(PARAMS)
    assert digest(request(PARAMS)) == bare
    assert digest(request(PARAMS), whole_request=True) == bare
    assert digest(PARAMS, whole_request=False) == bare
    # Members of the request outside params do not count.
    assert digest(request(PARAMS, extra='"x"')) == bare
    other_id = request(PARAMS).replace(b'"id":7', b'"id":"other"')
    assert digest(other_id) == bare


def test_whole_request_flag() -> None:
    req = request(b'{"a":1}')
    # Treated as bare params, the request object itself is hashed.
    as_params = digest(req, whole_request=False)
    assert as_params != digest(req)
    assert as_params == digest_text_of(b'{"id":7,"jsonrpc":"2.0","method":"tools/call","params":{"a":1}}')
    # Forced to be a request, an object without jsonrpc/method still uses its params member.
    assert digest(b'{"params":{"a":1}}', whole_request=True) == digest(b'{"a":1}')
    assert digest(b'{"other":1}', whole_request=True) == digest(b"{}")
    # The same through the value path.
    assert digest(parse(req), whole_request=False) == as_params
    assert digest(parse(b'{"params":{"a":1}}'), whole_request=True) == digest(b'{"a":1}')


def test_request_without_params_digests_like_an_empty_object() -> None:
    empty = digest(b"{}")
    assert empty == digest_text_of(b"{}")
    assert digest(request(None)) == empty
    assert digest(request(None), whole_request=True) == empty
    assert digest(parse(request(None))) == empty


def test_array_params_are_hashed_as_they_are() -> None:
    assert digest(b'[1.50, {"b":1,"a":2}, {"requestState":1}]') == digest_text_of(
        b'[1.5,{"a":2,"b":1},{"requestState":1}]'
    )
    assert digest(request(b"[100]")) == digest_text_of(b"[1E+2]")


@pytest.mark.parametrize("params", [b'"a string"', b"1", b"true", b"null", b"1.5"])
def test_unstructured_params_are_refused(params: bytes) -> None:
    for source in (request(params), parse(request(params))):
        with pytest.raises(JsonError) as info:
            params_digest(source)
        assert info.value.reason is R.PARAMS_NOT_STRUCTURED
    for source in (params, parse(params)):
        with pytest.raises(JsonError) as info:
            params_digest(source)
        assert info.value.reason is R.PARAMS_NOT_STRUCTURED


@pytest.mark.parametrize("doc", [b"[1]", b'"x"', b"1", b"null", b"[]"])
def test_whole_request_on_something_that_is_not_an_object_is_a_json_error(doc: bytes) -> None:
    """A caller that says "this is a request" about an array or scalar gets a refusal, not a crash."""
    for source in (doc, parse(doc)):
        with pytest.raises(JsonError) as info:
            params_digest(source, whole_request=True)
        assert isinstance(info.value.reason, JsonErrorReason)


# --- exclusions ------------------------------------------------------------------------------------------------


BASE = b'{"name":"t","arguments":{"x":1}}'


@pytest.mark.parametrize(
    "variant",
    [
        b'{"name":"t","arguments":{"x":1},"requestState":"abc"}',
        b'{"name":"t","arguments":{"x":1},"inputResponses":{"a":{"b":[1,2]}}}',
        b'{"requestState":null,"inputResponses":[],"name":"t","arguments":{"x":1}}',
        b'{"arguments":{"x":1.0},"name":"t"}',
        b' { "arguments" : { "x" : 1E0 } , "name" : "\\u0074" } ',
    ],
)
def test_excluded_members_order_whitespace_and_spelling_do_not_count(variant: bytes) -> None:
    assert digest(variant) == digest(BASE)
    assert digest(request(variant)) == digest(BASE)


@pytest.mark.parametrize("name", sorted(EXCLUDED_META_MEMBERS))
def test_each_excluded_meta_member_does_not_count(name: str) -> None:
    with_member = f'{{"a":1,"_meta":{{"{name}":"value","keep":1}}}}'.encode()
    without = b'{"a":1,"_meta":{"keep":1}}'
    assert digest(with_member) == digest(without)
    only = f'{{"a":1,"_meta":{{"{name}":"v"}}}}'.encode()
    # The _meta object stays even when emptied by the exclusions.
    assert digest(only) == digest(b'{"a":1,"_meta":{}}')
    assert digest(only) != digest(b'{"a":1}')


@pytest.mark.parametrize(
    ("left", "right"),
    [
        # a changed value
        (BASE, b'{"name":"t","arguments":{"x":2}}'),
        (BASE, b'{"name":"t","arguments":{"x":"1"}}'),
        (BASE, b'{"name":"t","arguments":{"x":true}}'),
        (BASE, b'{"name":"T","arguments":{"x":1}}'),
        (BASE, b'{"name":"t","arguments":{"x":1.0000000000000000000000000000000000001}}'),
        # an added member
        (BASE, b'{"name":"t","arguments":{"x":1,"y":null}}'),
        (BASE, b'{"name":"t","arguments":{"x":1},"extra":0}'),
        # a removed member
        (BASE, b'{"name":"t"}'),
        (BASE, b'{"name":"t","arguments":{}}'),
        # a changed key
        (BASE, b'{"name":"t","arguments":{"X":1}}'),
        (BASE, b'{"Name":"t","arguments":{"x":1}}'),
        # an added empty _meta
        (BASE, b'{"name":"t","arguments":{"x":1},"_meta":{}}'),
        # a kept _meta member
        (b'{"_meta":{"a":1}}', b'{"_meta":{"a":2}}'),
        (b'{"_meta":{}}', b'{"_meta":{"requestState":1}}'),
        (b'{"_meta":{}}', b'{"_meta":{"inputResponses":1}}'),
        # excluded names deeper than their place are ordinary members
        (BASE, b'{"name":"t","arguments":{"x":1,"requestState":"s"}}'),
        (BASE, b'{"name":"t","arguments":{"x":1,"inputResponses":{}}}'),
        (b'{"a":{"_meta":{}}}', b'{"a":{"_meta":{"progressToken":1}}}'),
        (b'{"_meta":{"x":{}}}', b'{"_meta":{"x":{"traceparent":"t"}}}'),
        # a top-level progressToken is not a _meta member
        (BASE, b'{"name":"t","arguments":{"x":1},"progressToken":"p"}'),
        # a _meta that is not an object is kept whole
        (b'{"_meta":"progressToken"}', b'{"_meta":"traceparent"}'),
        # array order
        (b"[1,2]", b"[2,1]"),
    ],
)
def test_any_other_change_moves_the_digest(left: bytes, right: bytes) -> None:
    assert digest(left) != digest(right)
    assert digest(request(left)) != digest(request(right))
    assert digest(parse(left)) != digest(parse(right))


def test_value_and_document_sources_agree() -> None:
    for doc in (PARAMS, b'{"\\uff5e":[1,2],"a":{"_meta":1}}', b"[]", b'{"_meta":{"baggage":1}}'):
        assert digest(doc) == digest(parse(doc))
        assert digest(doc) == digest(JsonValue.from_python(parse(doc).to_python()))


def test_max_bytes_is_honoured() -> None:
    with pytest.raises(JsonError) as info:
        params_digest(PARAMS, max_bytes=len(PARAMS) - 1)
    assert (info.value.reason, info.value.offset) == (R.INPUT_TOO_LARGE, len(PARAMS) - 1)
    assert params_digest(PARAMS, max_bytes=len(PARAMS)).text == digest(PARAMS)


@pytest.mark.parametrize(
    ("doc", "offset"),
    [
        (b"100000e-010100", 0),
        (b'{"jsonrpc":"2.0","id":1e99999,"method":"x","params":{}}', 22),
        (b'{"a":1,"inputResponses":{"k":1e99999}}', 29),
        (b'{"a":1,"requestState":[1e-99999]}', 23),
        (b'{"a":1,"_meta":{"progressToken":1e99999}}', 32),
    ],
)
def test_digest_refuses_bad_numbers_in_the_parts_it_leaves_out(doc: bytes, offset: int) -> None:
    """The envelope and the excluded members are not hashed, yet the digest refuses what parse refuses."""
    with pytest.raises(JsonError) as info:
        parse(doc)
    assert (info.value.reason, info.value.offset) == (JsonErrorReason.EXPONENT_OUT_OF_RANGE, offset)
    with pytest.raises(JsonError) as info:
        params_digest(doc)
    assert (info.value.reason, info.value.offset) == (JsonErrorReason.EXPONENT_OUT_OF_RANGE, offset)


@pytest.mark.parametrize(
    "doc",
    [
        PARAMS,
        b'{"\\uff5e":[1,2],"a":{"_meta":1}}',
        '{"jsonrpc":"2.0","id":1,"method":"m","params":{"\U0001f600":[1.50,-0,1e400],"a":"\\ud83d\\ude00"}}'.encode(),
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":[' + b",".join([b"12.50e1"] * 5000) + b"]}}",
    ],
)
def test_cooperative_digest_is_the_same_digest(doc: bytes) -> None:
    """The worker-thread variant (a Python-level number hook, so the GIL is shared) changes nothing else."""
    assert digest(doc, cooperative=True) == digest(doc)
    assert digest(doc, cooperative=True) == digest(parse(doc))


@pytest.mark.parametrize(("doc", "reason"), [(b'{"a": 12e10000}', "exponent-out-of-range"), (b'{"a": [1,}', None)])
def test_cooperative_digest_refuses_the_same(doc: bytes, reason: str | None) -> None:
    with pytest.raises(JsonError) as plain:
        params_digest(doc)
    with pytest.raises(JsonError) as cooperative:
        params_digest(doc, cooperative=True)
    assert (cooperative.value.reason, cooperative.value.offset) == (plain.value.reason, plain.value.offset)
    if reason is not None:
        assert plain.value.reason.value == reason


# --- stable_params: the rule as a value --------------------------------------------------------------------------


def test_stable_params_drops_exactly_the_excluded_members() -> None:
    stable = stable_params(parse(request(PARAMS)))
    assert stable == parse(PARAMS_CANONICAL)
    # The kept members keep their order and spelling (it is the value model, not the canonical form).
    assert list(stable) == ["name", "arguments", "_meta"]
    assert str(stable["arguments"]["price"].value) == "3.50"  # type: ignore[index,union-attr]
    assert stable_params(parse(PARAMS)) == stable
    assert stable_params(parse(PARAMS), whole_request=False) == stable


def test_stable_params_of_requests_arrays_and_emptied_meta() -> None:
    assert stable_params(parse(request(None))) == parse(b"{}")
    assert stable_params(parse(b'{"other":1}'), whole_request=True) == parse(b"{}")
    assert stable_params(parse(b'{"params":{"a":1}}'), whole_request=True) == parse(b'{"a":1}')
    array = parse(b'[{"requestState":1},2]')
    assert stable_params(array) is array
    assert stable_params(parse(request(b'[{"requestState":1}]'))) == parse(b'[{"requestState":1}]')
    assert stable_params(parse(b'{"_meta":{"baggage":"b"}}')) == parse(b'{"_meta":{}}')
    assert stable_params(parse(b'{"_meta":"traceparent"}')) == parse(b'{"_meta":"traceparent"}')
    # Told it is bare params, a request object is kept whole (nothing in it is excluded).
    whole = parse(request(b'{"requestState":1}'))
    assert stable_params(whole, whole_request=False) == whole


@pytest.mark.parametrize("doc", [b'"a string"', b"1", b"true", b"null"])
def test_stable_params_refuses_unstructured_params(doc: bytes) -> None:
    for source, whole in ((parse(request(doc)), None), (parse(doc), None), (parse(doc), True), (parse(b"[1]"), True)):
        with pytest.raises(JsonError) as info:
            stable_params(source, whole_request=whole)
        assert info.value.reason is R.PARAMS_NOT_STRUCTURED


def test_stable_params_takes_only_values() -> None:
    with pytest.raises(TypeError):
        stable_params({"a": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "doc",
    [
        request(PARAMS),
        request(None),
        request(b'[1.50,{"requestState":2}]'),
        request(b'{"_meta":{"progressToken":1,"keep":100}}'),
        request('{"\uffff":1,"𐀀":2,"inputResponses":{}}'.encode()),
    ],
)
def test_the_digest_hashes_stable_params(doc: bytes) -> None:
    stable = stable_params(parse(doc))
    assert params_digest(stable, whole_request=False) == params_digest(doc, whole_request=True)
    assert params_digest(stable, whole_request=False) == params_digest(parse(doc), whole_request=True)
