"""OAuth 2.1 bearer tokens: the admission policies that verify an authorization server's access tokens.

Two policies map a request's ``Authorization: Bearer`` token to an
:class:`~soklet_core.mcp.server.admission.Admission` (subject, partition, scopes), each built from its settings
(``settings.policy()``) and closed with ``aclose()`` when the server stops:

* :class:`JwtAdmission` (:class:`JwtSettings`): a JWT access token (RFC 9068) verified locally against the issuer's
  key set (:class:`JwksSource`, a ``jwks_uri`` or a file), with only the algorithms of :data:`SIGNING_ALGORITHMS`,
  ``exp``, ``iss`` and ``aud`` required;
* :class:`IntrospectionAdmission` (:class:`IntrospectionSettings`): any access token checked by the authorization
  server's introspection endpoint (RFC 7662), its answers cached and its calls bounded.

Both read claims alike: the subject from ``sub`` (``subject_claim``), the partition from ``partition_claim`` or,
without one, the subject (each caller its own partition), the scopes from ``scope`` (or ``scp``);
``required_scopes`` missing from a token is ``insufficient-scope`` (HTTP 403 naming them). Both cache by the
SHA-256 digest of a token and never keep, log or show a token or a secret. Every refusal is one bounded
:class:`~soklet_core.mcp.server.admission.AdmissionRefusedReason`; ``verifier-unavailable`` (HTTP 503) when the
key set or the endpoint could not be reached and nothing cached answers.

>>> settings = JwtSettings(issuer="https://auth.example", audience="https://mcp.example/mcp",
...                        jwks_url="https://auth.example/.well-known/jwks.json")
>>> sorted(SIGNING_ALGORITHMS)
['ES256', 'EdDSA', 'RS256']
"""

from soklet_core.mcp.server.auth._introspection import IntrospectionAdmission, IntrospectionSettings
from soklet_core.mcp.server.auth._jwks import SIGNING_ALGORITHMS, JwksSource
from soklet_core.mcp.server.auth._jwt import JwtAdmission, JwtSettings

__all__ = [
    "SIGNING_ALGORITHMS",
    "IntrospectionAdmission",
    "IntrospectionSettings",
    "JwksSource",
    "JwtAdmission",
    "JwtSettings",
]
