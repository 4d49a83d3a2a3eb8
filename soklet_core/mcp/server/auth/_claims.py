"""From a verified token's claims to an :class:`Admission`: the one home of the claim rules both policies share.

Whether the claims came from a JWT whose signature verified or from an introspection answer, they are read alike:

* the subject is the claim ``subject_claim`` (``sub`` by default): a non-empty string of at most
  :data:`MAX_CLAIM_VALUE_CHARS` characters without control characters (both values reach logs, where a control
  character could forge a line);
* the partition is the claim ``partition_claim`` (a tenant or organisation claim), held to the same rule; without
  a partition claim, the partition *is* the subject, so each caller has a partition of its own;
* the scopes are the space-delimited string ``scope`` (RFC 7662, RFC 8693 §4.2, RFC 9068 §2.2.3) or, where an
  issuer writes them so, the list of strings ``scp``; each value an RFC 6749 scope-token
  (:func:`~soklet_core.mcp.model.scopes.scope_set`).

A claim of the wrong type or shape is ``bad-claim``; a missing required scope is ``insufficient-scope`` with the
sorted required scopes (which the 403 challenge names).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from soklet_core.mcp.model.context import Identity
from soklet_core.mcp.model.scopes import parse_scope_text, scope_set
from soklet_core.mcp.server.admission import Admission, AdmissionRefused, AdmissionRefusedReason

__all__ = ["MAX_CLAIM_VALUE_CHARS", "admission_from_claims", "require_scopes"]

#: The longest subject or partition value admitted (a longer one is ``bad-claim``).
MAX_CLAIM_VALUE_CHARS: Final = 256


def _bad_claim() -> AdmissionRefused:
    return AdmissionRefused(AdmissionRefusedReason.BAD_CLAIM)


def _has_control(text: str) -> bool:
    # C0, DEL and C1: subjects and partitions are written to logs, where these would forge or hide lines.
    return any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in text)


def _claim_text(claims: Mapping[str, object], name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value or len(value) > MAX_CLAIM_VALUE_CHARS or _has_control(value):
        raise _bad_claim()
    return value


def _scopes(claims: Mapping[str, object]) -> frozenset[str]:
    try:
        if "scope" in claims:
            text = claims["scope"]
            if not isinstance(text, str):
                raise _bad_claim()
            return parse_scope_text(text)
        if "scp" in claims:
            values = claims["scp"]
            if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
                raise _bad_claim()
            return scope_set(values)
    except ValueError:
        raise _bad_claim() from None
    return frozenset()


def admission_from_claims(
    claims: Mapping[str, object], *, subject_claim: str, partition_claim: str | None
) -> Admission:
    """The admission ``claims`` grant (subject, partition, scopes); :class:`AdmissionRefused` ``bad-claim``."""
    subject = _claim_text(claims, subject_claim)
    partition = subject if partition_claim is None else _claim_text(claims, partition_claim)
    return Admission(Identity(subject), partition, scopes=_scopes(claims))


def require_scopes(admission: Admission, required: frozenset[str]) -> Admission:
    """``admission`` when it grants every scope of ``required``; ``insufficient-scope`` (naming them) otherwise."""
    if not admission.grants(required):
        raise AdmissionRefused(AdmissionRefusedReason.INSUFFICIENT_SCOPE, scopes=tuple(sorted(required)))
    return admission
