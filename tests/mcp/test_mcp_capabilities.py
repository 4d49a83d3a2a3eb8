"""ClientCapabilities: parsing from _meta, the elicitation form rule, and one merged -32021 object."""

from __future__ import annotations

import pytest

from soklet_core.json import JsonObject, canonical_text, parse
from soklet_core.mcp import ClientCapabilities, InputRequestDeclaration, InputRequirement, McpModelErrorReason
from soklet_core.mcp.model import CLIENT_CAPABILITIES_META_KEY, CapabilitiesError


def caps(text: str) -> ClientCapabilities:
    return ClientCapabilities.from_json(parse(text))


FORM = caps('{"elicitation":{"form":{}}}')
URL = caps('{"elicitation":{"url":{}}}')
SAMPLING = caps('{"sampling":{}}')
ROOTS = caps('{"roots":{}}')


def test_the_constructor_validates_and_the_value_is_immutable() -> None:
    declared = parse('{"elicitation":{"form":{}}}')
    assert isinstance(declared, JsonObject)
    assert ClientCapabilities(declared) == FORM
    assert ClientCapabilities(JsonObject.empty_instance()) == ClientCapabilities.empty()
    for bad in (parse('{"sampling":[]}'), parse('{"elicitation":{"url":1}}'), parse("[]")):
        with pytest.raises(CapabilitiesError) as caught:
            ClientCapabilities(bad)  # type: ignore[arg-type]
        assert caught.value.reason is McpModelErrorReason.INVALID_CAPABILITIES
    value = ClientCapabilities.empty()
    with pytest.raises(AttributeError):
        value.value = JsonObject.empty_instance()  # type: ignore[misc]


def test_kept_exactly_as_declared() -> None:
    declared = caps('{"roots":{"listChanged":true},"x-vendor":{"a":1},"sampling":{}}')
    assert canonical_text(declared.to_wire()) == '{"roots":{"listChanged":true},"sampling":{},"x-vendor":{"a":1}}'
    assert list(declared.to_wire()) == ["roots", "x-vendor", "sampling"]


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '"elicitation"',
        '{"elicitation":true}',
        '{"sampling":[]}',
        '{"roots":null}',
        '{"elicitation":{"form":true}}',
        '{"elicitation":{"url":"yes"}}',
        '{"sampling":{"tools":1}}',
        '{"extensions":{"io.modelcontextprotocol/tasks":true}}',
        '{"experimental":{"x":[]}}',
    ],
)
def test_malformed_capabilities_refused(text: str) -> None:
    with pytest.raises(CapabilitiesError) as caught:
        caps(text)
    assert caught.value.reason is McpModelErrorReason.INVALID_CAPABILITIES


def test_from_meta() -> None:
    meta = parse(
        '{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}'
    )
    assert ClientCapabilities.from_meta(meta) == ROOTS
    with pytest.raises(CapabilitiesError):
        ClientCapabilities.from_meta(parse('{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}'))
    with pytest.raises(CapabilitiesError):
        ClientCapabilities.from_meta(parse("[]"))
    assert CLIENT_CAPABILITIES_META_KEY == "io.modelcontextprotocol/clientCapabilities"


def test_empty_elicitation_means_form_only() -> None:
    declared = caps('{"elicitation":{}}')
    assert declared.missing(FORM) is None
    assert declared.elicitation_form
    assert not declared.elicitation_url
    assert declared.missing(URL) == URL


def test_url_only_client_lacks_form() -> None:
    declared = caps('{"elicitation":{"url":{}}}')
    assert declared.missing(FORM) == FORM
    assert declared.missing(URL) is None
    assert declared.elicitation_url
    assert not declared.elicitation_form


def test_both_modes() -> None:
    declared = caps('{"elicitation":{"form":{},"url":{}}}')
    assert declared.satisfies([FORM, URL])


def test_generic_elicitation_requirement_met_by_any_mode() -> None:
    assert caps('{"elicitation":{"url":{}}}').satisfies(caps('{"elicitation":{}}'))
    assert not ClientCapabilities.empty().satisfies(caps('{"elicitation":{}}'))


def test_several_missing_reported_as_one_object() -> None:
    missing = ClientCapabilities.empty().missing([FORM, URL, SAMPLING, ROOTS])
    assert missing is not None
    assert canonical_text(missing.to_wire()) == '{"elicitation":{"form":{},"url":{}},"roots":{},"sampling":{}}'
    # order of first appearance is kept for the wire
    assert list(missing.to_wire()) == ["elicitation", "sampling", "roots"]


def test_only_the_gap_is_reported() -> None:
    declared = caps('{"elicitation":{},"sampling":{}}')
    missing = declared.missing([FORM, URL, SAMPLING, caps('{"sampling":{"tools":{}}}')])
    assert missing is not None
    assert canonical_text(missing.to_wire()) == '{"elicitation":{"url":{}},"sampling":{"tools":{}}}'


def test_nothing_missing_is_none() -> None:
    declared = caps('{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{}},"roots":{"listChanged":true}}')
    assert declared.missing([FORM, URL, SAMPLING, ROOTS, caps('{"sampling":{"tools":{}}}')]) is None
    assert declared.missing([]) is None


def test_leaf_values_must_be_equal() -> None:
    required = caps('{"roots":{"listChanged":true}}')
    assert caps('{"roots":{"listChanged":true}}').satisfies(required)
    assert caps('{"roots":{"listChanged":false}}').missing(required) == required
    assert caps('{"roots":{}}').missing(required) == required


def test_extensions() -> None:
    declared = caps('{"extensions":{"io.modelcontextprotocol/tasks":{}}}')
    assert declared.has_extension("io.modelcontextprotocol/tasks")
    assert not declared.has_extension("other/x")
    assert declared.satisfies(caps('{"extensions":{"io.modelcontextprotocol/tasks":{}}}'))
    assert not ClientCapabilities.empty().has_extension("io.modelcontextprotocol/tasks")


def test_the_conformance_missing_capability_probe() -> None:
    # test_missing_capability with caps {} must produce {"sampling":{}} exactly
    sampling = InputRequestDeclaration.from_sampling(InputRequirement.REQUIRED).capabilities
    missing = ClientCapabilities.empty().missing(sampling)
    assert missing is not None
    assert canonical_text(missing.to_wire()) == '{"sampling":{}}'
    default_caps = caps('{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}')
    assert default_caps.missing(sampling) is None


def test_merged_and_equality() -> None:
    merged = ClientCapabilities.merged([SAMPLING, FORM, URL])
    assert merged == caps('{"elicitation":{"url":{},"form":{}},"sampling":{}}')
    assert hash(merged) == hash(caps('{"sampling":{},"elicitation":{"form":{},"url":{}}}'))
    assert ClientCapabilities.merged([]) == ClientCapabilities.empty()
    assert "sampling" in repr(merged)
