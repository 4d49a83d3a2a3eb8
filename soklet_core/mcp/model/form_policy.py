"""Form-mode elicitation schemas: the flat primitive shape, and a reviewed policy against secret-bearing fields.

MCP form mode MUST NOT ask for secrets (passwords, API keys, tokens, payment data); those belong in URL mode.
:class:`FormSchemaPolicy` is soklet's reviewed **policy** for that rule. It is *not* a universal semantic
classifier: field spelling cannot prove what a user will type. It refuses fields whose name, title, description
or ``format`` names one of these concepts (English vocabulary):

* ``password``: password, passwd, pwd, passphrase, passcode, ``format: "password"``;
* ``api-key-or-token``: API key, access/secret/private/signing/license key, token, access token, JWT, bearer;
* ``secret-or-credential``: secret, client secret, credential(s);
* ``payment-card``: card number, credit/debit card, CVV, CVC, CVN, card security code, card expiry,
  exp/expiry/expiration month or year;
* ``bank-account``: IBAN, bank account, account number, routing number, sort code;
* ``verification-code``: verification/auth/2FA/MFA/OTP/TOTP/one-time/recovery/backup/SMS code, two-factor;
* ``pin``: PIN, PIN code;
* ``government-id``: SSN, social security (number), national insurance number.

Text is normalised before matching: Unicode NFKC and case folding, camelCase and letter/digit boundaries split
(``apiKey`` → ``api key``, ``cvv2`` → ``cvv 2``), and every other non-alphanumeric character a separator. Short
words match as whole words; long distinctive stems (``password``, ``apikey``, ``cardnumber`` …) also match inside
run-together words (``newpassword``).

Decisions made in review:

* Only **free-value** fields are checked: strings without ``enum``/``oneOf``, numbers and integers. A boolean or
  a closed choice cannot carry a typed secret, so ``remember_password: boolean`` is accepted.
* ``token`` near a quantity word is a count, not a credential: ``token_count``, ``max_tokens``, ``token limit``,
  ``number of tokens`` are accepted; ``token``, ``access_token``, ``auth_token`` are refused.
* ``expiry`` alone (a booking's expiry date) is accepted; with ``card`` nearby, or as a month/year pair, refused.
* ``key`` and ``code`` alone are accepted (``sort_key``, ``country_code``); ``pin`` alone is refused, ``pinned``
  accepted.
* The request ``message`` is not checked: confirmations such as "Reset your password?" name secrets without
  asking for them.

A reviewed exception is explicit: ``DEFAULT_FORM_POLICY.allowing("api_key_label")`` exempts exact property
names; :meth:`FormSchemaPolicy.with_phrases` adds vocabulary.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Final

from soklet_core.json import JsonArray, JsonBoolean, JsonNumber, JsonObject, JsonString, JsonValue

from .errors import FormPolicyViolation, InputRequestError, McpModelErrorReason

__all__ = [
    "ALLOWED_STRING_FORMATS",
    "DEFAULT_FORM_POLICY",
    "FormSchemaPolicy",
    "PolicyFinding",
    "SecretConcept",
    "check_form_schema",
    "normalized_words",
]

#: The ``format`` values a form string property may use (wire reference §3).
ALLOWED_STRING_FORMATS: Final = frozenset({"email", "uri", "date", "date-time"})
# Schema ``type`` values compared on every check, built once.
_STRING: Final = JsonString.from_value("string")
_BOOLEAN: Final = JsonString.from_value("boolean")
_ARRAY: Final = JsonString.from_value("array")
_OBJECT: Final = JsonString.from_value("object")


class SecretConcept(enum.Enum):
    """What kind of secret a refused field appears to ask for."""

    # The values name concepts; none is a secret (hence the S105 exemptions).
    PASSWORD = "password"  # noqa: S105
    API_KEY_OR_TOKEN = "api-key-or-token"  # noqa: S105
    SECRET_OR_CREDENTIAL = "secret-or-credential"  # noqa: S105
    PAYMENT_CARD = "payment-card"
    BANK_ACCOUNT = "bank-account"
    VERIFICATION_CODE = "verification-code"
    PIN = "pin"
    GOVERNMENT_ID = "government-id"


_C = SecretConcept

# Whole-word phrases (after normalisation). A phrase matches where its words appear consecutively.
_PHRASES: Final[dict[SecretConcept, tuple[str, ...]]] = {
    _C.PASSWORD: ("password", "passwords", "passwd", "pwd", "passphrase", "passcode", "pass phrase", "pass code"),
    _C.API_KEY_OR_TOKEN: (
        "api key",
        "api keys",
        "access key",
        "secret key",
        "private key",
        "signing key",
        "license key",
        "token",
        "tokens",
        "jwt",
        "bearer",
    ),
    _C.SECRET_OR_CREDENTIAL: ("secret", "secrets", "credential", "credentials", "creds"),
    _C.PAYMENT_CARD: (
        "card number",
        "card no",
        "card num",
        "credit card",
        "debit card",
        "cvv",
        "cvc",
        "cvn",
        "card security code",
        "card expiry",
        "card expiration",
        "card exp",
        "exp month",
        "exp year",
        "expiry month",
        "expiry year",
        "expiration month",
        "expiration year",
    ),
    _C.BANK_ACCOUNT: ("iban", "bank account", "account number", "routing number", "sort code"),
    _C.VERIFICATION_CODE: (
        "otp",
        "totp",
        "hotp",
        "mfa",
        "2 fa",
        "tfa",
        "two factor",
        "2 factor",
        "multi factor",
        "verification code",
        "auth code",
        "authentication code",
        "authorization code",
        "security code",
        "one time code",
        "one time password",
        "one time passcode",
        "sms code",
        "recovery code",
        "backup code",
    ),
    _C.PIN: ("pin", "pins", "pin code"),
    _C.GOVERNMENT_ID: ("ssn", "social security", "national insurance number"),
}

# Distinctive stems that also match inside run-together words ("newpassword", "userapikey").
_STEMS: Final[dict[SecretConcept, tuple[str, ...]]] = {
    _C.PASSWORD: ("password", "passwd", "passphrase", "passcode"),
    _C.API_KEY_OR_TOKEN: (
        "apikey",
        "accesstoken",
        "authtoken",
        "bearertoken",
        "refreshtoken",
        "secretkey",
        "privatekey",
    ),
    _C.SECRET_OR_CREDENTIAL: ("clientsecret", "credential"),
    _C.PAYMENT_CARD: ("creditcard", "debitcard", "cardnumber"),
    _C.BANK_ACCOUNT: ("routingnumber", "accountnumber"),
    _C.VERIFICATION_CODE: ("verificationcode", "onetimepassword", "twofactor"),
    _C.PIN: ("pincode",),
    _C.GOVERNMENT_ID: ("socialsecurity",),
}

# "token" next to one of these (two words before, one after) counts tokens rather than naming one.
_TOKEN_QUANTITY_WORDS: Final = frozenset(
    {
        "count", "counts", "limit", "limits", "budget", "usage", "used", "length", "total", "max", "min", "maximum",
        "minimum", "estimate", "estimated", "many", "number", "num", "per", "cost", "costs", "price", "prices",
    }
)  # fmt: skip
_TOKEN_WORDS: Final = frozenset({"token", "tokens"})
# Field texts repeat across requests; past this many distinct ones the memo starts over.
_MEMO_ENTRIES: Final = 4096
_CARD_EXPIRY_WORDS: Final = frozenset({"expiry", "expiration", "exp", "expires", "expire"})

_CAMEL_LOWER_UPPER: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CAMEL_ACRONYM: Final = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")
_LETTER_DIGIT: Final = re.compile(r"(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")
_SEPARATORS: Final = re.compile(r"[^0-9a-z]+")


def normalized_words(text: str) -> tuple[str, ...]:
    """The words the policy matches in ``text``: NFKC, camelCase and letter/digit split, case-folded."""
    text = unicodedata.normalize("NFKC", text)
    text = _CAMEL_ACRONYM.sub(" ", _CAMEL_LOWER_UPPER.sub(" ", text))
    text = _LETTER_DIGIT.sub(" ", text).casefold()
    return tuple(word for word in _SEPARATORS.split(text) if word)


@dataclass(frozen=True, slots=True)
class PolicyFinding:
    """One secret-bearing field: its property ``name``, the ``concept`` matched and ``where`` it matched."""

    name: str
    concept: SecretConcept
    where: str


def _is_token_quantity(words: tuple[str, ...], index: int) -> bool:
    window = words[max(0, index - 2) : index] + words[index + 1 : index + 2]
    return any(word in _TOKEN_QUANTITY_WORDS for word in window)


@dataclass(frozen=True, slots=True)
class FormSchemaPolicy:
    """A reviewed policy refusing secret-bearing form fields (see the module documentation for its rules).

    Use :data:`DEFAULT_FORM_POLICY`; derive variants with :meth:`allowing` (reviewed exceptions by exact property
    name) and :meth:`with_phrases` (extra vocabulary). It is a policy, not a universal classifier: it refuses
    what it can recognise by spelling and nothing more.
    """

    phrases: tuple[tuple[SecretConcept, tuple[str, ...]], ...] = field(
        default=tuple((concept, tuple(p.split())) for concept, items in _PHRASES.items() for p in items)
    )
    stems: tuple[tuple[SecretConcept, str], ...] = field(
        default=tuple((concept, stem) for concept, items in _STEMS.items() for stem in items)
    )
    allowed_names: frozenset[str] = frozenset()
    # Derived once per policy: phrases indexed by first word (priority = position in ``phrases``), one regular
    # expression for the stems, and a bounded memo, since the same field texts are classified on every request.
    _by_first_word: dict[str, tuple[tuple[int, SecretConcept, tuple[str, ...]], ...]] = field(
        init=False, repr=False, compare=False, hash=False
    )
    _stem_pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False, hash=False)
    _stem_concepts: dict[str, SecretConcept] = field(init=False, repr=False, compare=False, hash=False)
    _memo: dict[str, SecretConcept | None] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        index: dict[str, list[tuple[int, SecretConcept, tuple[str, ...]]]] = {}
        for priority, (concept, phrase) in enumerate(self.phrases):
            if phrase:
                index.setdefault(phrase[0], []).append((priority, concept, phrase))
        stem_concepts: dict[str, SecretConcept] = {}
        for concept, stem in self.stems:
            stem_concepts.setdefault(stem, concept)
        # Longest first, so that of two stems starting at one place the more specific one is reported.
        ordered = sorted(stem_concepts, key=len, reverse=True)
        pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        object.__setattr__(self, "_by_first_word", {word: tuple(items) for word, items in index.items()})
        object.__setattr__(self, "_stem_pattern", pattern)
        object.__setattr__(self, "_stem_concepts", stem_concepts)
        object.__setattr__(self, "_memo", {})

    def __repr__(self) -> str:
        allowed = sorted(self.allowed_names)
        return f"FormSchemaPolicy(<{len(self.phrases)} phrases>, <{len(self.stems)} stems>, allowed_names={allowed!r})"

    def allowing(self, *names: str) -> FormSchemaPolicy:
        """This policy with the exact property ``names`` exempted (a reviewed decision, e.g. ``"token_label"``)."""
        return FormSchemaPolicy(self.phrases, self.stems, self.allowed_names | frozenset(names))

    def with_phrases(self, concept: SecretConcept, *phrases: str) -> FormSchemaPolicy:
        """This policy also refusing ``phrases`` (normalised like field text) as ``concept``."""
        extra = tuple((concept, normalized_words(phrase)) for phrase in phrases if normalized_words(phrase))
        return FormSchemaPolicy(self.phrases + extra, self.stems, self.allowed_names)

    def classify(self, text: str) -> SecretConcept | None:
        """The secret concept ``text`` names, or ``None``."""
        memo = self._memo
        if text in memo:
            return memo[text]
        concept = self._classify(text)
        if len(memo) >= _MEMO_ENTRIES:
            memo.clear()
        memo[text] = concept
        return concept

    def _classify(self, text: str) -> SecretConcept | None:
        words = normalized_words(text)
        if not words:
            return None
        best: tuple[int, SecretConcept] | None = None
        for start, word in enumerate(words):
            for priority, concept, phrase in self._by_first_word.get(word, ()):
                if best is not None and priority >= best[0]:
                    continue
                if words[start : start + len(phrase)] != phrase:
                    continue
                if len(phrase) == 1 and word in _TOKEN_WORDS and _is_token_quantity(words, start):
                    continue
                best = (priority, concept)
        if best is not None:
            return best[1]
        if "card" in words and _CARD_EXPIRY_WORDS.intersection(words):
            return SecretConcept.PAYMENT_CARD
        found = self._stem_pattern.search("".join(words)) if self._stem_pattern is not None else None
        return self._stem_concepts[found.group()] if found is not None else None

    def findings(self, requested_schema: JsonValue) -> tuple[PolicyFinding, ...]:
        """Every secret-bearing free-value property of a form schema (nothing for a malformed schema)."""
        properties = requested_schema.get("properties") if isinstance(requested_schema, JsonObject) else None
        if not isinstance(properties, JsonObject):
            return ()
        found = []
        for name, schema in properties.items():
            finding = self.finding(name, schema)
            if finding is not None:
                found.append(finding)
        return tuple(found)

    def check(self, requested_schema: JsonValue) -> None:
        """Raise :class:`FormPolicyViolation` for the first secret-bearing property."""
        findings = self.findings(requested_schema)
        if findings:
            raise FormPolicyViolation(findings[0].name, findings[0].concept.value, findings[0].where)

    def finding(self, name: str, schema: JsonValue) -> PolicyFinding | None:
        """The finding for one property (``name`` and its schema), or ``None`` if it is acceptable."""
        if name in self.allowed_names or not isinstance(schema, JsonObject) or not _is_free_value(schema):
            return None
        texts = [("name", name)]
        for part in ("title", "description", "format"):
            value = schema.get(part)
            if isinstance(value, JsonString):
                texts.append((part, value.value))
        for where, text in texts:
            concept = self.classify(text)
            if concept is not None:
                return PolicyFinding(name, concept, where)
        return None


def _is_free_value(schema: JsonObject) -> bool:
    kind = schema.get("type")
    if kind == _STRING:
        return "enum" not in schema and "oneOf" not in schema
    # Numbers carry PINs and card numbers; an absent or unknown type is checked too (the shape check refuses it).
    return kind != _BOOLEAN and kind != _ARRAY


#: The policy ``form_request`` and ``InputRequest.from_declaration`` apply unless told otherwise.
DEFAULT_FORM_POLICY: Final = FormSchemaPolicy()


# --- the flat primitive shape ----------------------------------------------------------------------------------

_COMMON: Final = frozenset({"type", "title", "description"})
_STRING_KEYS: Final = _COMMON | {"minLength", "maxLength", "format", "default"}
_NUMBER_KEYS: Final = _COMMON | {"minimum", "maximum", "default"}
_BOOLEAN_KEYS: Final = _COMMON | {"default"}
_SINGLE_ENUM_KEYS: Final = _COMMON | {"enum", "enumNames", "default"}
_TITLED_ENUM_KEYS: Final = _COMMON | {"oneOf", "default"}
_MULTI_KEYS: Final = _COMMON | {"items", "minItems", "maxItems", "default"}
_TOP_KEYS: Final = frozenset({"$schema", "type", "properties", "required"})


def _bad(name: object, detail: str) -> InputRequestError:
    return InputRequestError(McpModelErrorReason.INVALID_FORM_SCHEMA, name, detail)


def _strings(value: JsonValue | None, *, nonempty: bool = True) -> list[str] | None:
    if not isinstance(value, JsonArray) or (nonempty and not value):
        return None
    items = [item.value for item in value if isinstance(item, JsonString)]
    return items if len(items) == len(value) else None


def _is_count(value: JsonValue | None) -> bool:
    return isinstance(value, JsonNumber) and value.value >= 0 and value.value == value.value.to_integral_value()


def _check_keys(name: str, schema: JsonObject, allowed: frozenset[str]) -> None:
    if not set(schema).issubset(allowed):
        raise _bad(name, "unsupported keyword for this property type")
    for part in ("title", "description"):
        if part in schema and not isinstance(schema[part], JsonString):
            raise _bad(name, f"{part} must be a string")


def _check_const_titles(name: str, options: JsonValue | None) -> None:
    if not isinstance(options, JsonArray) or not options:
        raise _bad(name, "oneOf/anyOf must be a non-empty array")
    for option in options:
        if not (
            isinstance(option, JsonObject)
            and set(option) == {"const", "title"}
            and isinstance(option["const"], JsonString)
            and isinstance(option["title"], JsonString)
        ):
            raise _bad(name, "each option must be {const: string, title: string}")


def _check_string(name: str, schema: JsonObject) -> None:
    if "oneOf" in schema:
        _check_keys(name, schema, _TITLED_ENUM_KEYS)
        _check_const_titles(name, schema["oneOf"])
    elif "enum" in schema:
        _check_keys(name, schema, _SINGLE_ENUM_KEYS)
        choices = _strings(schema["enum"])
        if choices is None:
            raise _bad(name, "enum must be a non-empty array of strings")
        names = _strings(schema.get("enumNames")) if "enumNames" in schema else choices
        if names is None or len(names) != len(choices):
            raise _bad(name, "enumNames must be strings, one per enum value")
    else:
        _check_keys(name, schema, _STRING_KEYS)
        for part in ("minLength", "maxLength"):
            if part in schema and not _is_count(schema[part]):
                raise _bad(name, f"{part} must be an integer >= 0")
        fmt = schema.get("format")
        if fmt is not None and not (isinstance(fmt, JsonString) and fmt.value in ALLOWED_STRING_FORMATS):
            raise _bad(name, "format must be email, uri, date or date-time")
    if "default" in schema and not isinstance(schema["default"], JsonString):
        raise _bad(name, "default must be a string")


def _check_multi(name: str, schema: JsonObject) -> None:
    _check_keys(name, schema, _MULTI_KEYS)
    items = schema.get("items")
    if not isinstance(items, JsonObject):
        raise _bad(name, "items must be an object")
    if "anyOf" in items:
        if set(items) != {"anyOf"}:
            raise _bad(name, "items must be {anyOf: [...]} or {type: string, enum: [...]}")
        _check_const_titles(name, items["anyOf"])
    elif set(items) != {"type", "enum"} or items["type"] != _STRING or not _strings(items["enum"]):
        raise _bad(name, "items must be {anyOf: [...]} or {type: string, enum: [...]}")
    for part in ("minItems", "maxItems"):
        if part in schema and not _is_count(schema[part]):
            raise _bad(name, f"{part} must be an integer >= 0")
    if "default" in schema and _strings(schema["default"], nonempty=False) is None:
        raise _bad(name, "default must be an array of strings")


def _check_property(name: str, schema: JsonValue) -> None:
    if not isinstance(schema, JsonObject):
        raise _bad(name, "a property schema must be an object")
    kind = schema.get("type")
    kind_text = kind.value if isinstance(kind, JsonString) else None
    if kind_text == "string":
        _check_string(name, schema)
    elif kind_text in ("number", "integer"):
        _check_keys(name, schema, _NUMBER_KEYS)
        for part in ("minimum", "maximum", "default"):
            if part in schema and not isinstance(schema[part], JsonNumber):
                raise _bad(name, f"{part} must be a number")
    elif kind_text == "boolean":
        _check_keys(name, schema, _BOOLEAN_KEYS)
        if "default" in schema and not isinstance(schema["default"], JsonBoolean):
            raise _bad(name, "default must be a boolean")
    elif kind_text == "array":
        _check_multi(name, schema)
    else:
        raise _bad(name, "type must be string, number, integer, boolean or array (multi-select)")


def check_form_schema(requested_schema: JsonValue, policy: FormSchemaPolicy = DEFAULT_FORM_POLICY) -> JsonObject:
    """Check a form ``requestedSchema``: flat primitive shape (wire reference §3) and ``policy``.

    Returns the schema unchanged. Raises :class:`FormPolicyViolation` for a secret-bearing field (checked per
    property before its shape, so ``format: "password"`` is reported as a secret, not as a bad format) and
    :class:`InputRequestError` (``invalid-form-schema``) for anything outside the shape: nested objects, unknown
    keywords, a ``required`` entry that is not a property, and so on.
    """
    if not isinstance(requested_schema, JsonObject):
        raise _bad(None, "requestedSchema must be an object")
    if not set(requested_schema).issubset(_TOP_KEYS):
        raise _bad(None, "requestedSchema allows only $schema, type, properties and required")
    if requested_schema.get("type") != _OBJECT:
        raise _bad(None, 'requestedSchema.type must be "object"')
    if "$schema" in requested_schema and not isinstance(requested_schema["$schema"], JsonString):
        raise _bad(None, "$schema must be a string")
    properties = requested_schema.get("properties")
    if not isinstance(properties, JsonObject):
        raise _bad(None, "requestedSchema.properties must be an object")
    for name, schema in properties.items():
        if isinstance(schema, JsonObject):
            finding = policy.finding(name, schema)
            if finding is not None:
                raise FormPolicyViolation(finding.name, finding.concept.value, finding.where)
        _check_property(name, schema)
    if "required" in requested_schema:
        required = _strings(requested_schema["required"], nonempty=False)
        if required is None or not set(required).issubset(properties) or len(set(required)) != len(required):
            raise _bad(None, "required must list distinct property names")
    return requested_schema
