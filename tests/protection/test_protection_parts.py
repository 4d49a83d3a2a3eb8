"""Endpoint paths, the partition digest, bindings, the config constructor and the exception surface."""

from __future__ import annotations

import base64
import hashlib
import pickle
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from soklet_core.json import JsonNumber, JsonString, params_digest, parse
from soklet_core.protection import (
    ANONYMOUS_PARTITION,
    DEFAULT_MAXIMUM_DECODED_BYTES,
    DEFAULT_MAXIMUM_ENCODED_BYTES,
    DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME,
    DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS,
    BindingField,
    ProtectionConfig,
    ProtectionUsageError,
    ProtectionUsageReason,
    Reason,
    RequestStateBinding,
    RequestStateProtectionException,
    bind_request,
    normalize_endpoint_path,
    partition_digest,
)
from soklet_core.protocol import PROTOCOL_VERSION
from tests.protection.support import key, keyring, request

# ------------------------------------------------------------------------------------------------ paths

PATHS = {
    "/": "/",
    "/mcp": "/mcp",
    "/mcp/": "/mcp",
    "//mcp": "/mcp",
    "/mcp//": "/mcp",
    "///": "/",
    "/a//b///c/": "/a/b/c",
    "/a/../mcp": "/mcp",
    "/a/./b/": "/a/b",
    "/a/b/..": "/a",
    "/a/.": "/a",
    "/..": "/",
    "/../../mcp": "/mcp",
    "/%6dcp": "/mcp",
    "/%6Dcp": "/mcp",
    "/%7e%2d%2E%5F": "/~-._",
    "/%2E%2E/x": "/x",
    "/a%2fb": "/a%2Fb",
    "/a%2Fb/": "/a%2Fb",
    "/%3a%40": "/%3A%40",
    "/mcp ü": "/mcp%20%C3%BC",
    "/mcp%20%c3%bc": "/mcp%20%C3%BC",
    "/%": "/%25",
    "/%zz": "/%25zz",
    "/.hidden/...": "/.hidden/...",
    "/MCP": "/MCP",
    "/a;b=c/@:!$&'()*+,": "/a;b=c/@:!$&'()*+,",
}


@pytest.mark.parametrize(("raw", "normal"), list(PATHS.items()))
def test_path_normalization_rules(raw: str, normal: str) -> None:
    assert normalize_endpoint_path(raw) == normal
    assert normalize_endpoint_path(normal) == normal


@pytest.mark.parametrize("bad", ["", "mcp", "/mcp?x=1", "/mcp#f", "http://h/mcp", None, b"/mcp"])
def test_path_refusals(bad: object) -> None:
    with pytest.raises(ProtectionUsageError) as caught:
        normalize_endpoint_path(bad)  # type: ignore[arg-type]
    assert caught.value.reason is ProtectionUsageReason.INVALID_ENDPOINT_PATH
    assert "mcp" not in str(caught.value)


@given(st.text(alphabet=st.sampled_from(list("/.%aA9-_~ü:@2Ff+ ")), max_size=30))
def test_path_normalization_is_idempotent_and_canonical(tail: str) -> None:
    normal = normalize_endpoint_path("/" + tail)
    assert normalize_endpoint_path(normal) == normal
    assert normal.startswith("/")
    assert "//" not in normal
    assert normal == "/" or not normal.endswith("/")
    assert "/./" not in normal + "/"
    assert "/../" not in normal + "/"
    assert normal.isascii()


# ------------------------------------------------------------------------------------------------ binding


def test_partition_digest_is_the_documented_hash() -> None:
    expected = base64.urlsafe_b64encode(hashlib.sha256(b"soklet partition\x00" + "tenant-é".encode()).digest()).rstrip(
        b"="
    )
    assert partition_digest("tenant-é") == expected.decode()
    assert len(partition_digest(ANONYMOUS_PARTITION)) == 43
    assert partition_digest("a") != partition_digest("b")
    with pytest.raises(ProtectionUsageError):
        partition_digest("\ud800")


def test_bind_request_reads_the_prefixed_meta_member() -> None:
    data = request(5, meta={"io.modelcontextprotocol/protocolVersion": "2025-11-25"})
    bound = bind_request(data, path="/x/../mcp/", partition="p")
    binding = bound.binding
    assert binding.method == "tools/call"
    assert binding.path == "/mcp"
    assert binding.protocol_version == "2025-11-25"
    assert binding.partition_digest == partition_digest("p")
    assert binding.params_digest == params_digest(data).text
    assert bound.request_id == JsonNumber.from_value(5)


def test_bind_request_the_given_version_wins() -> None:
    data = request(5, meta={"io.modelcontextprotocol/protocolVersion": "2025-11-25"})
    declared = bind_request(data, path="/mcp", partition="p").binding
    given = bind_request(data, path="/mcp", partition="p", protocol_version="2026-07-28").binding
    assert given.protocol_version == "2026-07-28"
    assert declared.mismatches(given) == (BindingField.PROTOCOL_VERSION,)


def test_bind_request_does_not_read_the_unprefixed_member() -> None:
    data = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"protocolVersion":"2025-11-25"}}}'
    assert bind_request(data, path="/", partition="p").binding.protocol_version == PROTOCOL_VERSION
    no_meta = b'{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t"}}'
    bound = bind_request(no_meta, path="/", partition="p")
    assert bound.binding.protocol_version == PROTOCOL_VERSION
    assert bound.request_id == JsonString.from_value("x")
    # A declared version that is not a string is no version either.
    odd = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}}'
    assert bind_request(odd, path="/", partition="p").binding.protocol_version == PROTOCOL_VERSION


def test_bind_request_uses_a_given_digest_as_is() -> None:
    data = request(5)
    other = params_digest(request(5, name="another.tool"))
    assert other.text != params_digest(data).text
    bound = bind_request(data, path="/mcp", partition="p", params_digest=other)
    assert bound.binding.params_digest == other.text


def test_bind_request_gives_the_same_binding_for_bytes_and_the_parsed_request() -> None:
    data = request("r-1", meta={"io.modelcontextprotocol/protocolVersion": "2025-11-25", "progressToken": "t"})
    from_bytes = bind_request(data, path="/mcp", partition="p")
    from_value = bind_request(parse(data), path="/mcp", partition="p")
    assert from_bytes == from_value
    assert from_bytes.binding.protocol_version == "2025-11-25"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"[]", ProtectionUsageReason.INVALID_REQUEST),
        (b"{", ProtectionUsageReason.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":5}', ProtectionUsageReason.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}', ProtectionUsageReason.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","method":"m"}', ProtectionUsageReason.INVALID_REQUEST_ID),
        (b'{"jsonrpc":"2.0","id":null,"method":"m"}', ProtectionUsageReason.INVALID_REQUEST_ID),
        (b'{"jsonrpc":"2.0","id":[1],"method":"m"}', ProtectionUsageReason.INVALID_REQUEST_ID),
    ],
)
def test_bound_request_refusals(data: bytes, reason: ProtectionUsageReason) -> None:
    with pytest.raises(ProtectionUsageError) as caught:
        bind_request(data, path="/mcp", partition="p")
    assert caught.value.reason is reason


def test_binding_of_checks_its_inputs() -> None:
    good = {"method": "m", "path": "/", "protocol_version": "v", "partition": "p", "params_digest": "A" * 43}
    assert RequestStateBinding.of(**good).params_digest == "A" * 43
    for name, bad in [("params_digest", "A" * 42), ("params_digest", "A" * 42 + "B"), ("method", 5)]:
        with pytest.raises(ProtectionUsageError):
            RequestStateBinding.of(**{**good, name: bad})  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ config


def test_config_defaults() -> None:
    config = ProtectionConfig(keyring=keyring(key("k1")))
    assert config.maximum_request_state_lifetime == timedelta(minutes=15) == DEFAULT_MAXIMUM_REQUEST_STATE_LIFETIME
    assert config.maximum_request_state_rounds == 10 == DEFAULT_MAXIMUM_REQUEST_STATE_ROUNDS
    assert config.maximum_encoded_bytes == 65_536 == DEFAULT_MAXIMUM_ENCODED_BYTES
    assert config.maximum_decoded_bytes == 49_152 == DEFAULT_MAXIMUM_DECODED_BYTES
    assert config.lifetime_ms == 900_000
    assert config.protector is None
    assert "material" not in repr(config) or "redacted" in repr(config)


def test_config_constructor_validates_limits() -> None:
    ring = keyring(key("k1"))

    def config(**limits: Any) -> ProtectionConfig:
        return ProtectionConfig(keyring=ring, **limits)

    for limit in ("maximum_request_state_rounds", "maximum_encoded_bytes", "maximum_decoded_bytes"):
        for bad in (0, -1, True, 1.5, "3"):
            with pytest.raises(ProtectionUsageError) as caught:
                config(**{limit: bad})
            assert caught.value.reason is ProtectionUsageReason.NON_POSITIVE_LIMIT
    for bad_lifetime in (timedelta(0), timedelta(microseconds=999), timedelta(seconds=-1), 900):
        with pytest.raises(ProtectionUsageError):
            config(maximum_request_state_lifetime=bad_lifetime)
    # decoded <= encoded: equal passes, one more is refused.
    assert config(maximum_encoded_bytes=1000, maximum_decoded_bytes=1000).maximum_decoded_bytes == 1000
    with pytest.raises(ProtectionUsageError) as caught:
        config(maximum_encoded_bytes=1000, maximum_decoded_bytes=1001)
    assert caught.value.reason is ProtectionUsageReason.DECODED_OVER_ENCODED
    with pytest.raises(ProtectionUsageError):
        config(maximum_decoded_bytes=DEFAULT_MAXIMUM_ENCODED_BYTES + 1)
    assert config(maximum_request_state_lifetime=timedelta(milliseconds=1)).lifetime_ms == 1
    with pytest.raises(TypeError):
        ProtectionConfig(ring)  # type: ignore[misc]
    assert ProtectionConfig.with_keyring(ring, maximum_request_state_rounds=3) == config(maximum_request_state_rounds=3)


# ------------------------------------------------------------------------------------------------ exceptions


def test_exception_surface() -> None:
    for reason in Reason:
        error = RequestStateProtectionException(reason)
        assert str(error) == f"{reason.value}: {reason.description}"
        assert RequestStateProtectionException.Reason is type(reason)
        copy = pickle.loads(pickle.dumps(error))
        assert copy.reason is reason
        # No wire code or client message: the MCP layer maps reasons to those.
        assert not any(hasattr(error, name) for name in ("http_status", "json_rpc_code", "client_message"))
    assert {reason.binding_field for reason in Reason if reason.binding_field} == set(BindingField)
    assert [Reason.for_binding(field) for field in BindingField] == [
        Reason.BINDING_METHOD,
        Reason.BINDING_PATH,
        Reason.BINDING_PROTOCOL_VERSION,
        Reason.BINDING_PARTITION,
        Reason.BINDING_PARAMS,
    ]
    with pytest.raises(TypeError):
        RequestStateProtectionException("expired")  # type: ignore[arg-type]
    usage = ProtectionUsageError(ProtectionUsageReason.INVALID_CLOCK)
    assert isinstance(usage, ValueError)
    assert pickle.loads(pickle.dumps(usage)).reason is ProtectionUsageReason.INVALID_CLOCK
