"""Fixtures the CLI tests share: the store-mode members a test starts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.support_store_keyring import Member


@pytest.fixture
def members() -> Iterator[list[Member]]:
    """Every member a test starts (append it), killed afterwards if the test did not stop it."""
    started: list[Member] = []
    yield started
    for member in started:
        member.kill()
