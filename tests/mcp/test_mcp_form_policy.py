"""The reviewed form-schema policy (secret-bearing fields) and the flat primitive form shape."""

from __future__ import annotations

from typing import Any

import pytest

from soklet_core.json import JsonObject, parse, serialize
from soklet_core.mcp import McpModelErrorReason
from soklet_core.mcp.model import (
    DEFAULT_FORM_POLICY,
    FormPolicyViolation,
    FormSchemaPolicy,
    InputRequestError,
    SecretConcept,
    check_form_schema,
)
from soklet_core.mcp.model.form_policy import normalized_words

C = SecretConcept


def schema(properties: dict[str, Any], **extra: Any) -> JsonObject:
    return JsonObject.from_mapping({"type": "object", "properties": properties, **extra})


def string(**keywords: Any) -> dict[str, Any]:
    return {"type": "string", **keywords}


# --- names -----------------------------------------------------------------------------------------------------

SECRET_NAMES: list[tuple[str, SecretConcept]] = [
    ("password", C.PASSWORD),
    ("Password", C.PASSWORD),
    ("PASSWORD", C.PASSWORD),
    ("newPassword", C.PASSWORD),
    ("new_password", C.PASSWORD),
    ("newpassword", C.PASSWORD),
    ("password-confirm", C.PASSWORD),
    ("passwd", C.PASSWORD),
    ("pwd", C.PASSWORD),
    ("passphrase", C.PASSWORD),
    ("pass phrase", C.PASSWORD),
    ("passcode", C.PASSWORD),
    ("apiKey", C.API_KEY_OR_TOKEN),
    ("api_key", C.API_KEY_OR_TOKEN),
    ("API-KEY", C.API_KEY_OR_TOKEN),
    ("apikey", C.API_KEY_OR_TOKEN),
    ("APIKey", C.API_KEY_OR_TOKEN),
    ("openaiApiKey", C.API_KEY_OR_TOKEN),
    ("token", C.API_KEY_OR_TOKEN),
    ("accessToken", C.API_KEY_OR_TOKEN),
    ("access_token", C.API_KEY_OR_TOKEN),
    ("refreshtoken", C.API_KEY_OR_TOKEN),
    ("authToken", C.API_KEY_OR_TOKEN),
    ("github.token", C.API_KEY_OR_TOKEN),
    ("bearer", C.API_KEY_OR_TOKEN),
    ("jwt", C.API_KEY_OR_TOKEN),
    ("private_key", C.API_KEY_OR_TOKEN),
    ("secretKey", C.API_KEY_OR_TOKEN),
    ("aws_access_key", C.API_KEY_OR_TOKEN),
    ("secret", C.SECRET_OR_CREDENTIAL),
    ("clientSecret", C.SECRET_OR_CREDENTIAL),
    ("credentials", C.SECRET_OR_CREDENTIAL),
    ("dbCredential", C.SECRET_OR_CREDENTIAL),
    ("cardNumber", C.PAYMENT_CARD),
    ("card_number", C.PAYMENT_CARD),
    ("creditCard", C.PAYMENT_CARD),
    ("credit_card_no", C.PAYMENT_CARD),
    ("debitcard", C.PAYMENT_CARD),
    ("cvv", C.PAYMENT_CARD),
    ("CVV2", C.PAYMENT_CARD),
    ("cvc", C.PAYMENT_CARD),
    ("card_expiry", C.PAYMENT_CARD),
    ("cardExpiration", C.PAYMENT_CARD),
    ("exp_month", C.PAYMENT_CARD),
    ("expiryYear", C.PAYMENT_CARD),
    ("expires_card", C.PAYMENT_CARD),
    ("iban", C.BANK_ACCOUNT),
    ("IBAN", C.BANK_ACCOUNT),
    ("bank_account", C.BANK_ACCOUNT),
    ("accountNumber", C.BANK_ACCOUNT),
    ("routing_number", C.BANK_ACCOUNT),
    ("sortCode", C.BANK_ACCOUNT),
    ("otp", C.VERIFICATION_CODE),
    ("OTP", C.VERIFICATION_CODE),
    ("totp", C.VERIFICATION_CODE),
    ("2fa", C.VERIFICATION_CODE),
    ("2FA_code", C.VERIFICATION_CODE),
    ("mfaCode", C.VERIFICATION_CODE),
    ("twoFactor", C.VERIFICATION_CODE),
    ("verificationCode", C.VERIFICATION_CODE),
    ("verification_code", C.VERIFICATION_CODE),
    ("auth_code", C.VERIFICATION_CODE),
    ("one_time_code", C.VERIFICATION_CODE),
    ("oneTimePassword", C.PASSWORD),  # "password" matches first: refused either way
    ("sms_code", C.VERIFICATION_CODE),
    ("recoveryCode", C.VERIFICATION_CODE),
    ("security_code", C.VERIFICATION_CODE),
    ("pin", C.PIN),
    ("PIN", C.PIN),
    ("pinCode", C.PIN),
    ("atm_pin", C.PIN),
    ("ssn", C.GOVERNMENT_ID),
    ("SSN", C.GOVERNMENT_ID),
    ("socialSecurityNumber", C.GOVERNMENT_ID),
    ("ｐａｓｓｗｏｒｄ", C.PASSWORD),  # fullwidth: NFKC-normalised
]


@pytest.mark.parametrize(("name", "concept"), SECRET_NAMES)
def test_secret_names_refused(name: str, concept: SecretConcept) -> None:
    with pytest.raises(FormPolicyViolation) as caught:
        check_form_schema(schema({name: string()}))
    assert caught.value.reason is McpModelErrorReason.SECRET_BEARING_FIELD
    assert caught.value.concept == concept.value
    assert caught.value.where == "name"


@pytest.mark.parametrize("kind", ["number", "integer"])
def test_numeric_secret_fields_refused(kind: str) -> None:
    for name in ("pin", "cvv", "cardNumber", "otp"):
        with pytest.raises(FormPolicyViolation):
            check_form_schema(schema({name: {"type": kind}}))


HARMLESS_NAMES = [
    "name",
    "email",
    "city",
    "token_count",  # a count of tokens, not a token
    "tokenCount",
    "max_tokens",
    "maxTokens",
    "token_limit",
    "tokens_used",
    "tokenBudget",
    "key",  # a key alone is not a credential
    "sort_key",
    "keyword",
    "primary_key_column",
    "country_code",  # a code alone is not a verification code
    "zip_code",
    "discount_code",
    "expiry_date",  # a booking's expiry, no card nearby
    "expires_at",
    "pinned",
    "spinner_style",
    "shipping_address",
    "secretary",
    "passenger_count",
    "compass",
    "bypass_cache",
    "ok",
    "confirm",
    "approve",
    "context",
    "user_name",
]


@pytest.mark.parametrize("name", HARMLESS_NAMES)
def test_harmless_names_accepted(name: str) -> None:
    value = schema({name: string()})
    assert check_form_schema(value) is value
    assert DEFAULT_FORM_POLICY.findings(value) == ()


@pytest.mark.parametrize(
    ("keyword", "text", "concept"),
    [
        ("title", "Password", C.PASSWORD),
        ("title", "Your GitHub personal access token", C.API_KEY_OR_TOKEN),
        ("title", "Card number", C.PAYMENT_CARD),
        ("title", "Expiry (MM/YY) of your card", C.PAYMENT_CARD),
        ("description", "Enter the 6-digit code from your authenticator (2FA)", C.VERIFICATION_CODE),
        ("description", "Your API key, found under Settings", C.API_KEY_OR_TOKEN),
        ("description", "The IBAN to refund", C.BANK_ACCOUNT),
        ("description", "The one-time code we texted you", C.VERIFICATION_CODE),
        ("description", "Your social security number", C.GOVERNMENT_ID),
        ("description", "Paste the client secret", C.SECRET_OR_CREDENTIAL),
        ("format", "password", C.PASSWORD),
    ],
)
def test_secret_title_description_format_refused(keyword: str, text: str, concept: SecretConcept) -> None:
    with pytest.raises(FormPolicyViolation) as caught:
        check_form_schema(schema({"value": string(**{keyword: text})}))
    assert caught.value.concept == concept.value
    assert caught.value.where == keyword
    assert caught.value.subject == "value"
    # the concept is reported, the text is not (unless the text is the concept's own name)
    assert text not in str(caught.value) or text == concept.value


@pytest.mark.parametrize(
    ("keyword", "text"),
    [
        ("title", "Maximum tokens"),
        ("description", "How many tokens the summary may use"),
        ("description", "Number of tokens to generate"),
        ("title", "Your display name"),
        ("description", "Where should we ship the order?"),
        ("description", "The expiry date of the reservation"),
        ("format", "email"),
    ],
)
def test_harmless_title_description_format_accepted(keyword: str, text: str) -> None:
    check_form_schema(schema({"value": string(**{keyword: text})}))


def test_closed_choices_and_booleans_cannot_carry_secrets() -> None:
    check_form_schema(
        schema(
            {
                "remember_password": {"type": "boolean", "description": "Remember my password"},
                "card_type": string(enum=["visa", "mastercard"]),
                "token_kind": string(oneOf=[{"const": "a", "title": "Access token"}]),
                "secrets_to_rotate": {"type": "array", "items": {"type": "string", "enum": ["db", "api"]}},
            }
        )
    )


def test_message_is_not_checked() -> None:
    from soklet_core.mcp import InputRequest, InputRequestDeclaration, InputRequirement

    form = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
    params = {
        "message": "Confirm resetting your password?",
        "requestedSchema": schema({"confirm": {"type": "boolean"}}),
    }
    assert InputRequest.from_declaration(form, params).params is not None


def test_findings_lists_every_secret_field() -> None:
    value = schema(
        {"name": string(), "password": string(), "pin": {"type": "integer"}, "note": string(title="API key")}
    )
    findings = DEFAULT_FORM_POLICY.findings(value)
    assert [(f.name, f.concept, f.where) for f in findings] == [
        ("password", C.PASSWORD, "name"),
        ("pin", C.PIN, "name"),
        ("note", C.API_KEY_OR_TOKEN, "title"),
    ]
    assert DEFAULT_FORM_POLICY.findings(parse("[]")) == ()


def test_allowing_and_with_phrases() -> None:
    value = schema({"token_label": string()})
    with pytest.raises(FormPolicyViolation):
        check_form_schema(value)
    check_form_schema(value, DEFAULT_FORM_POLICY.allowing("token_label"))
    stricter = DEFAULT_FORM_POLICY.with_phrases(C.GOVERNMENT_ID, "passport number", "driverLicense")
    for name in ("passportNumber", "driver_license_no"):
        with pytest.raises(FormPolicyViolation) as caught:
            check_form_schema(schema({name: string()}), stricter)
        assert caught.value.concept == C.GOVERNMENT_ID.value
        check_form_schema(schema({name: string()}))
    assert FormSchemaPolicy() == DEFAULT_FORM_POLICY


def test_normalisation() -> None:
    assert normalized_words("newPassword") == ("new", "password")
    assert normalized_words("APIKey") == ("api", "key")
    assert normalized_words("HTTPSProxyURL") == ("https", "proxy", "url")
    assert normalized_words("cvv2") == ("cvv", "2")
    assert normalized_words("2FA-code") == ("2", "fa", "code")
    assert normalized_words("  user.name/first  ") == ("user", "name", "first")
    assert normalized_words("ＡＰＩ_Ｋｅｙ") == ("api", "key")
    assert DEFAULT_FORM_POLICY.classify("") is None


def test_unsafe_field_names_are_not_repeated() -> None:
    weird = "password\n<script>"
    with pytest.raises(FormPolicyViolation) as caught:
        check_form_schema(schema({weird: string()}))
    assert caught.value.subject is None
    assert "<script>" not in str(caught.value)


# --- the flat primitive shape ----------------------------------------------------------------------------------

VALID_SCHEMAS = [
    {},
    {"name": string(title="Name", description="Your name", minLength=1, maxLength=64, default="x")},
    {"email": string(format="email")},
    {"site": string(format="uri")},
    {"day": string(format="date")},
    {"at": string(format="date-time")},
    {"qty": {"type": "integer", "minimum": 1, "maximum": 10, "default": 2}},
    {"price": {"type": "number", "minimum": parse("0.50")}},
    {"ok": {"type": "boolean", "default": False}},
    {"color": string(enum=["red", "green"], default="red")},
    {"color": string(enum=["red", "green"], enumNames=["Red", "Green"])},
    {"color": string(oneOf=[{"const": "red", "title": "Red"}])},
    {"colors": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1, "maxItems": 2}},
    {"colors": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}, "default": ["a"]}},
]


@pytest.mark.parametrize("properties", VALID_SCHEMAS)
def test_valid_shapes(properties: dict[str, Any]) -> None:
    check_form_schema(schema(properties, required=list(properties)[:1]))


def test_schema_keywords_at_top() -> None:
    check_form_schema(schema({"a": string()}, **{"$schema": "https://json-schema.org/draft/2020-12/schema"}))
    value = parse('{"type":"object","properties":{"a":{"type":"number","minimum":1.50}},"required":["a"]}')
    assert serialize(check_form_schema(value)) == serialize(value)


INVALID_SCHEMAS: list[Any] = [
    parse("[]"),
    {"type": "object"},
    {"type": "array", "properties": {}},
    {"type": "object", "properties": []},
    {"type": "object", "properties": {}, "additionalProperties": False},
    {"type": "object", "properties": {}, "title": "x"},
    {"type": "object", "properties": {}, "$schema": 1},
    {"type": "object", "properties": {"a": string()}, "required": ["b"]},
    {"type": "object", "properties": {"a": string()}, "required": ["a", "a"]},
    {"type": "object", "properties": {"a": string()}, "required": "a"},
    {"type": "object", "properties": {"a": "string"}},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}},
    {"type": "object", "properties": {"a": {"type": "null"}}},
    {"type": "object", "properties": {"a": {}}},
    {"type": "object", "properties": {"a": string(format="hostname")}},
    {"type": "object", "properties": {"a": string(pattern="^x$")}},
    {"type": "object", "properties": {"a": string(minLength=-1)}},
    {"type": "object", "properties": {"a": string(maxLength=parse("1.5"))}},
    {"type": "object", "properties": {"a": string(default=1)}},
    {"type": "object", "properties": {"a": string(title=3)}},
    {"type": "object", "properties": {"a": string(enum=[])}},
    {"type": "object", "properties": {"a": string(enum=["x", 1])}},
    {"type": "object", "properties": {"a": string(enum=["x"], enumNames=["X", "Y"])}},
    {"type": "object", "properties": {"a": string(oneOf=[{"const": "x"}])}},
    {"type": "object", "properties": {"a": string(oneOf=[])}},
    {"type": "object", "properties": {"a": {"type": "number", "minimum": "1"}}},
    {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}},
    {"type": "object", "properties": {"a": {"type": "boolean", "default": "yes"}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}},
    {"type": "object", "properties": {"a": {"type": "array"}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"anyOf": [{"const": 1, "title": "x"}]}}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "enum": ["x"]},
                                            "default": [1]}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "enum": ["x"]},
                                            "minItems": -1}}},
]  # fmt: skip


@pytest.mark.parametrize("value", INVALID_SCHEMAS)
def test_invalid_shapes(value: Any) -> None:
    with pytest.raises(InputRequestError) as caught:
        check_form_schema(JsonObject.from_mapping(value) if isinstance(value, dict) else value)
    assert caught.value.reason is McpModelErrorReason.INVALID_FORM_SCHEMA
