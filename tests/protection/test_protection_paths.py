"""Endpoint paths in bounded, linear time: the length bound at its edge, the former catastrophic-backtracking
inputs, and the fast path (already-normal paths) agreeing with the full five-step algorithm."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from soklet_core.protection import (
    MAX_ENDPOINT_PATH_CHARS,
    ProtectionUsageError,
    ProtectionUsageReason,
    normalize_endpoint_path,
    paths,
)

# Inputs that end outside the "already normal" character class after a long run inside it: the shape that made the
# old fast-path pattern backtrack exponentially (28 characters took seconds, 40 took hours).
# Written as expressions so that a failing child process does not print 10 kB of path.
ATTACKS = [
    '"/" + "a" * 28 + "%25"',
    '"/" + "a" * 40 + "%"',
    '"/" + "a" * 40 + " "',
    '"/" + "a/" * 20 + "%"',
    f'"/" + "a" * {MAX_ENDPOINT_PATH_CHARS - 4} + "%25"',
    f'"/" + "a/" * {MAX_ENDPOINT_PATH_CHARS // 2 - 2} + "%"',
    f'"/" + "a." * {MAX_ENDPOINT_PATH_CHARS // 2 - 2} + "%"',
]


@pytest.mark.slow
def test_former_backtracking_paths_normalize_in_linear_time() -> None:
    # In a child process, so that on a backtracking implementation the test fails at the timeout instead of hanging.
    script = (
        "import time\n"
        "from soklet_core.protection import normalize_endpoint_path\n"
        f"attacks = [{', '.join(ATTACKS)}]\n"
        "start = time.perf_counter()\n"
        "for _ in range(1000):\n"
        "    for attack in attacks:\n"
        "        normalize_endpoint_path(attack)\n"
        "print(time.perf_counter() - start)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    # 7,000 calls, most of them on 2,000-character paths: a linear scan needs well under a second here.
    assert float(done.stdout) < 20.0


@pytest.mark.parametrize("attack", ATTACKS)
def test_attack_paths_are_accepted(attack: str) -> None:
    path = eval(attack)  # a literal expression of this module
    assert len(path) <= MAX_ENDPOINT_PATH_CHARS
    normal = normalize_endpoint_path(path)
    assert normalize_endpoint_path(normal) == normal


def test_attack_path_result() -> None:
    assert normalize_endpoint_path("/" + "a" * 28 + "%25") == "/" + "a" * 28 + "%25"
    assert normalize_endpoint_path("/" + "a" * 40 + "%") == "/" + "a" * 40 + "%25"


def test_thousand_attack_calls_are_fast() -> None:
    start = time.perf_counter()
    for _ in range(1000):
        normalize_endpoint_path("/" + "a" * 28 + "%25")
    assert time.perf_counter() - start < 1.0  # generous: about 10 ms on a loaded 2-core machine


@pytest.mark.parametrize("tail", ["a", "%25", "ü", "/"])
def test_length_bound_at_its_edge(tail: str) -> None:
    at_limit = "/" + "a" * (MAX_ENDPOINT_PATH_CHARS - 1 - len(tail)) + tail
    assert len(at_limit) == MAX_ENDPOINT_PATH_CHARS
    if tail in ("a", "%25", "/"):
        normal = normalize_endpoint_path(at_limit)
        assert normalize_endpoint_path(normal) == normal
    over = at_limit + "a"
    with pytest.raises(ProtectionUsageError) as caught:
        normalize_endpoint_path(over)
    assert caught.value.reason is ProtectionUsageReason.INVALID_ENDPOINT_PATH
    assert "aaaa" not in str(caught.value)
    assert "aaaa" not in repr(caught.value)


def test_normalized_length_is_bounded_too() -> None:
    # One "ü" becomes six characters: the normal form of a path under the raw bound may exceed it, and is refused
    # (so that normalizing a normal form always gives it back).
    fits = "/" + "ü" * ((MAX_ENDPOINT_PATH_CHARS - 1) // 6)
    normal = normalize_endpoint_path(fits)
    assert len(normal) <= MAX_ENDPOINT_PATH_CHARS
    assert normalize_endpoint_path(normal) == normal
    with pytest.raises(ProtectionUsageError) as caught:
        normalize_endpoint_path(fits + "ü")
    assert caught.value.reason is ProtectionUsageReason.INVALID_ENDPOINT_PATH


def test_long_refusal_costs_nothing() -> None:
    huge = "/" + "a" * 10_000_000
    start = time.perf_counter()
    for _ in range(1000):
        with pytest.raises(ProtectionUsageError):
            normalize_endpoint_path(huge)
    assert time.perf_counter() - start < 1.0


_ALPHABET = st.sampled_from([*"/.%aZ9-_~!$&'()*+,;=:@üF2e ", "😀", "%2e", "%2E%2e", "%2F", "%41", ".."])


@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_fast_path_agrees_with_full_algorithm(tail: str) -> None:
    path = "/" + tail
    full = paths._normalize(path)
    assert normalize_endpoint_path(path) == full
    if paths._already_normal(path):
        assert full == path
    assert paths._already_normal(full) or "%" in full or "/." in full
    assert normalize_endpoint_path(full) == full


@given(st.text(max_size=60).map(lambda tail: "/" + tail.replace("?", "").replace("#", "")))
def test_any_text_normalizes_idempotently(path: str) -> None:
    normal = normalize_endpoint_path(path)
    assert normal == paths._normalize(path)
    assert normalize_endpoint_path(normal) == normal
