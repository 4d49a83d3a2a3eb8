"""Strict, exact JSON for MCP: the closed value model, the codec, the canonical form and the params digest.

>>> from soklet_core.json import parse, canonical_text, params_digest
>>> canonical_text(parse(b'{"b": 100, "a": [1.50, 0.0]}'))
'{"a":[1.5,0],"b":1E+2}'
"""

from .canonical import canonical_bytes, canonical_text
from .codec import parse, serialize
from .digest import EXCLUDED_META_MEMBERS, EXCLUDED_PARAMS_MEMBERS, ParamsDigest, params_digest, stable_params
from .errors import JsonError, JsonErrorReason
from .limits import (
    DEFAULT_REQUEST_BODY_BYTES,
    MAX_CANONICAL_PARAMS_BYTES,
    MAX_DEPTH,
    MAX_EXPONENT_MAGNITUDE,
    MAX_NODES,
    MAX_NUMBER_TOKEN_CHARS,
    MAX_REQUEST_BODY_BYTES,
    RESPONSE_OUTPUT_CEILING_BYTES,
)
from .numbers import canonical_decimal_text
from .values import (
    JsonArray,
    JsonArrayBuilder,
    JsonBoolean,
    JsonNull,
    JsonNumber,
    JsonObject,
    JsonObjectBuilder,
    JsonString,
    JsonValue,
    PythonJson,
)
from .wire import WirePlain, encode_wire

__all__ = [
    "DEFAULT_REQUEST_BODY_BYTES",
    "EXCLUDED_META_MEMBERS",
    "EXCLUDED_PARAMS_MEMBERS",
    "MAX_CANONICAL_PARAMS_BYTES",
    "MAX_DEPTH",
    "MAX_EXPONENT_MAGNITUDE",
    "MAX_NODES",
    "MAX_NUMBER_TOKEN_CHARS",
    "MAX_REQUEST_BODY_BYTES",
    "RESPONSE_OUTPUT_CEILING_BYTES",
    "JsonArray",
    "JsonArrayBuilder",
    "JsonBoolean",
    "JsonError",
    "JsonErrorReason",
    "JsonNull",
    "JsonNumber",
    "JsonObject",
    "JsonObjectBuilder",
    "JsonString",
    "JsonValue",
    "ParamsDigest",
    "PythonJson",
    "WirePlain",
    "canonical_bytes",
    "canonical_decimal_text",
    "canonical_text",
    "encode_wire",
    "params_digest",
    "parse",
    "serialize",
    "stable_params",
]
