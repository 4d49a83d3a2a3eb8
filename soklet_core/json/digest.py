"""The stable params digest: what a sealed request state is bound to.

SHA-256 over the canonical bytes of the request ``params`` with the retry-only and transient members removed:
``inputResponses`` and ``requestState`` (top level), and ``progressToken``, ``traceparent``, ``tracestate`` and
``baggage`` inside ``_meta``. A retry that adds responses or changes those members keeps the digest; any other
change moves it. Canonical bytes are streamed into the hash and refused beyond the 32 MiB allowance.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any, Final

from .canonical import CanonicalTree, check_numbers, feed_canonical, load_canonical_tree, tree_from_value
from .errors import JsonError, JsonErrorReason
from .limits import MAX_CANONICAL_PARAMS_BYTES
from .values import JsonValue

__all__ = ["EXCLUDED_META_MEMBERS", "EXCLUDED_PARAMS_MEMBERS", "ParamsDigest", "params_digest"]

EXCLUDED_PARAMS_MEMBERS: Final = frozenset({"inputResponses", "requestState"})
EXCLUDED_META_MEMBERS: Final = frozenset({"progressToken", "traceparent", "tracestate", "baggage"})


@dataclass(frozen=True, slots=True)
class ParamsDigest:
    """A params digest: 32 bytes, shown as base64url without padding. ``canonical_size`` is the hashed length."""

    digest: bytes
    canonical_size: int

    @property
    def text(self) -> str:
        """base64url, no padding (43 characters)."""
        return base64.urlsafe_b64encode(self.digest).rstrip(b"=").decode("ascii")

    def __str__(self) -> str:
        return self.text


def _is_request(root: Any) -> bool:
    return type(root) is dict and "jsonrpc" in root and "method" in root


def _stable_params(tree: CanonicalTree, *, whole_request: bool | None) -> Any:
    root = tree.root
    if whole_request is None:
        whole_request = _is_request(root)
    # Whatever is left out of the digest is still checked, so the digest refuses exactly what parse refuses.
    if whole_request:
        if type(root) is not dict:
            check_numbers(tree, root)
            raise JsonError(JsonErrorReason.PARAMS_NOT_STRUCTURED)
        for name, value in root.items():
            if name != "params":
                check_numbers(tree, value)
    params = root.get("params", {}) if whole_request else root
    if type(params) is list:
        return params
    if type(params) is not dict:
        check_numbers(tree, params)
        raise JsonError(JsonErrorReason.PARAMS_NOT_STRUCTURED)
    stable = {}
    for name, value in params.items():
        if name in EXCLUDED_PARAMS_MEMBERS:
            check_numbers(tree, value)
        else:
            stable[name] = value
    meta = stable.get("_meta")
    if type(meta) is dict:
        kept = {}
        for name, value in meta.items():
            if name in EXCLUDED_META_MEMBERS:
                check_numbers(tree, value)
            else:
                kept[name] = value
        stable["_meta"] = kept
    return stable


def params_digest(
    source: JsonValue | CanonicalTree | bytes | bytearray | memoryview | str,
    *,
    whole_request: bool | None = None,
    max_bytes: int | None = None,
    cooperative: bool = False,
) -> ParamsDigest:
    """The stable params digest of a JSON-RPC request (its ``params``) or of a bare params value.

    ``source`` is a parsed value, a JSON document (parsed strictly, without building the value model: the way to
    digest a request body) or a tree from :func:`.canonical.load_canonical_tree` (to share one parse with the
    canonical form). ``whole_request`` says what it is; by default an object with ``jsonrpc`` and ``method``
    members is a request. A request without ``params`` digests as ``{}``. Params that are neither object nor
    array are refused. ``cooperative`` is passed to :func:`.canonical.load_canonical_tree` (for a worker thread).
    """
    if isinstance(source, JsonValue):
        tree = tree_from_value(source)
    elif isinstance(source, CanonicalTree):
        tree = source
    else:
        tree = load_canonical_tree(source, max_bytes=max_bytes, cooperative=cooperative)
    stable = tree.with_root(_stable_params(tree, whole_request=whole_request))
    hasher = hashlib.sha256()
    size = feed_canonical(stable, hasher.update, limit=MAX_CANONICAL_PARAMS_BYTES)
    return ParamsDigest(hasher.digest(), size)
