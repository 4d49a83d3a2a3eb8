"""The stable params digest: what a sealed request state is bound to.

SHA-256 over the canonical bytes of the request ``params`` with the retry-only and transient members removed:
``inputResponses`` and ``requestState`` (top level), and ``progressToken``, ``traceparent``, ``tracestate`` and
``baggage`` inside ``_meta``. A retry that adds responses or changes those members keeps the digest; any other
change moves it. Canonical bytes are streamed into the hash and refused beyond the 32 MiB allowance.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar

from .canonical import CanonicalTree, check_numbers, feed_canonical, load_canonical_tree, tree_from_value
from .errors import JsonError, JsonErrorReason
from .limits import MAX_CANONICAL_PARAMS_BYTES
from .msgspec_canonical import DIGEST_DOCUMENT_BYTES, encode_canonical, load_canonical_data
from .values import JsonArray, JsonObject, JsonValue, new_object

__all__ = ["EXCLUDED_META_MEMBERS", "EXCLUDED_PARAMS_MEMBERS", "ParamsDigest", "params_digest", "stable_params"]

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


_V = TypeVar("_V")


def _ignore(_: object) -> None:
    return None


def _stable(
    root: _V,
    whole_request: bool | None,
    *,
    members_of: Callable[[_V], dict[str, _V] | None],
    array_type: type,
    build: Callable[[dict[str, _V]], _V],
    left_out: Callable[[_V], None],
) -> _V:
    """The stable-params rule, once for both shapes of a document: the value model and the canonical-ready tree.

    ``members_of`` gives an object's members (``None`` for anything else), ``array_type`` is the exact array type
    of the shape, ``build`` makes an object of kept members, and ``left_out`` sees every part the rule drops (the
    tree still has to check the numbers there, so the digest refuses exactly what ``parse`` refuses).
    """
    request = members_of(root)
    if whole_request is None:
        whole_request = request is not None and "jsonrpc" in request and "method" in request
    if whole_request:
        if request is None:
            left_out(root)
            raise JsonError(JsonErrorReason.PARAMS_NOT_STRUCTURED)
        for name, value in request.items():
            if name != "params":
                left_out(value)
        if "params" not in request:
            return build({})
        params = request["params"]
    else:
        params = root
    if type(params) is array_type:
        return params
    members = members_of(params)
    if members is None:
        left_out(params)
        raise JsonError(JsonErrorReason.PARAMS_NOT_STRUCTURED)
    stable = _without(members, EXCLUDED_PARAMS_MEMBERS, left_out)
    meta = members_of(stable["_meta"]) if "_meta" in stable else None
    if meta is not None:
        stable["_meta"] = build(_without(meta, EXCLUDED_META_MEMBERS, left_out))
    return build(stable)


def _without(members: dict[str, _V], excluded: frozenset[str], left_out: Callable[[_V], None]) -> dict[str, _V]:
    kept: dict[str, _V] = {}
    for name, value in members.items():
        if name in excluded:
            left_out(value)
        else:
            kept[name] = value
    return kept


def _value_members(value: JsonValue) -> dict[str, JsonValue] | None:
    return value._members if type(value) is JsonObject else None


def _tree_members(node: Any) -> dict[str, Any] | None:
    return node if type(node) is dict else None


def stable_params(request: JsonValue, *, whole_request: bool | None = None) -> JsonValue:
    """The params a sealed state is bound to: ``request``'s params without the retry-only and transient members.

    ``whole_request`` as for :func:`params_digest` (by default an object with ``jsonrpc`` and ``method`` members is
    a request; a request without ``params`` gives ``{}``). Array params are returned as they are; params that are
    neither object nor array raise ``JsonError(PARAMS_NOT_STRUCTURED)``. ``params_digest`` hashes exactly this
    value: ``params_digest(stable_params(r), whole_request=False) == params_digest(r, whole_request=True)``.
    """
    if not isinstance(request, JsonValue):
        raise TypeError("stable_params takes a JsonValue")
    return _stable(
        request, whole_request, members_of=_value_members, array_type=JsonArray, build=new_object, left_out=_ignore
    )


def _stable_tree(tree: CanonicalTree, *, whole_request: bool | None) -> Any:
    return _stable(
        tree.root,
        whole_request,
        members_of=_tree_members,
        array_type=list,
        build=dict,
        left_out=partial(check_numbers, tree),
    )


def _small_digest(
    data: bytes | bytearray | memoryview | str, whole_request: bool | None, max_bytes: int | None
) -> ParamsDigest | None:
    """The digest through msgspec (:mod:`.msgspec_canonical`), or None when the exact path must decide."""
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError:
            return None
    else:
        raw = bytes(data)
    if len(raw) > DIGEST_DOCUMENT_BYTES or (max_bytes is not None and len(raw) > max_bytes):
        return None
    root = load_canonical_data(raw)
    if root is None:
        return None
    # Every number of the document was checked while loading: the parts left out need nothing more.
    stable = _stable(root, whole_request, members_of=_tree_members, array_type=list, build=dict, left_out=_ignore)
    canonical = encode_canonical(stable)
    if len(canonical) > MAX_CANONICAL_PARAMS_BYTES:
        raise JsonError(JsonErrorReason.CANONICAL_TOO_LARGE)
    return ParamsDigest(hashlib.sha256(canonical).digest(), len(canonical))


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
    # A str never has fewer UTF-8 bytes than characters, a memoryview of bytes as many as its length.
    if (
        not cooperative
        and isinstance(source, (bytes, bytearray, memoryview, str))
        and len(source) <= DIGEST_DOCUMENT_BYTES
    ):
        small = _small_digest(source, whole_request, max_bytes)
        if small is not None:
            return small
    if isinstance(source, JsonValue):
        # Only the kept members are turned into canonical-ready data.
        stable = tree_from_value(stable_params(source, whole_request=whole_request))
    else:
        tree = (
            source
            if isinstance(source, CanonicalTree)
            else load_canonical_tree(source, max_bytes=max_bytes, cooperative=cooperative)
        )
        stable = tree.with_root(_stable_tree(tree, whole_request=whole_request))
    hasher = hashlib.sha256()
    size = feed_canonical(stable, hasher.update, limit=MAX_CANONICAL_PARAMS_BYTES)
    return ParamsDigest(hasher.digest(), size)
