"""The token policies' one cache: digest-keyed (never the token), bounded (least recently used out), each entry
with its own deadline on the monotonic clock."""

from __future__ import annotations

import hashlib

import pytest

from soklet_core.mcp.server.auth._token_cache import TokenCache, token_digest
from tests.server.auth.support_auth import Clock


def test_the_key_is_the_sha256_of_the_token() -> None:
    assert token_digest("abc") == hashlib.sha256(b"abc").digest()
    assert len(token_digest("x" * 8192)) == 32


def test_an_entry_lives_until_its_deadline() -> None:
    clock = Clock()
    cache: TokenCache[str] = TokenCache(4, clock=clock)
    cache.put(b"a", "one", 10)
    clock.advance(9.9)
    assert cache.get(b"a") == "one"
    clock.advance(0.1)
    assert cache.get(b"a") is None
    assert len(cache) == 0


def test_nothing_is_kept_for_a_span_of_zero_or_less() -> None:
    cache: TokenCache[str] = TokenCache(4, clock=Clock())
    cache.put(b"a", "one", 10)
    cache.put(b"a", "two", 0)
    assert cache.get(b"a") is None


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: TokenCache[int] = TokenCache(3, clock=Clock())
    for number in range(3):
        cache.put(bytes([number]), number, 60)
    assert cache.get(bytes([0])) == 0  # used: now the most recent
    cache.put(b"\x03", 3, 60)
    assert cache.get(b"\x01") is None
    assert [cache.get(bytes([number])) for number in (0, 2, 3)] == [0, 2, 3]
    assert len(cache) == 3


def test_a_flood_of_distinct_tokens_stays_bounded() -> None:
    cache: TokenCache[int] = TokenCache(100, clock=Clock())
    for number in range(10_000):
        cache.put(token_digest(f"forged-{number}"), number, 60)
    assert len(cache) == 100
    assert "forged" not in repr(cache)


@pytest.mark.parametrize("capacity", [0, -1, True])
def test_a_capacity_below_one_is_refused(capacity: int) -> None:
    with pytest.raises(ValueError, match="at least one entry"):
        TokenCache(capacity)
