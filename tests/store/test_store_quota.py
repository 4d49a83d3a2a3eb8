"""A partition's task quota stays exact on SQLite, where the writer remembers each partition's usage instead of
re-reading every document: another process's insert, a document that grows, a purge and a failed open all count."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from soklet_core.store import StoreError, StoreErrorReason, TaskQuota, open_store, sqlite_url
from tests.store.support import NOW, task


def test_the_remembered_usage_follows_every_change(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "store.db")

    async def main() -> None:
        mine, other = open_store(url), open_store(url)
        await mine.open()
        await other.open()
        try:
            quota = TaskQuota(max_tasks=3, max_bytes=100)
            await mine.insert_task(task("a", document='{"n":1}'), quota=quota)  # counted: 1 task, 7 bytes
            await other.insert_task(task("b", document='{"n":2}'))  # another connection commits
            await mine.insert_task(task("c", document='{"n":3}'), quota=quota)  # 3 tasks now
            with pytest.raises(StoreError) as caught:
                await mine.insert_task(task("d", document='{"n":4}'), quota=quota)
            assert caught.value.reason is StoreErrorReason.QUOTA  # b was seen: a fourth is one over
            # A document that grows is counted: 3 tasks of 7 bytes, then one of them grows to 81 bytes.
            stored = await mine.get_task("a")
            assert stored is not None
            grown = await mine.replace_task(replace(stored, document='{"n":"' + "x" * 73 + '"}'), expected_version=0)
            assert grown is not None
            roomy = TaskQuota(max_tasks=10, max_bytes=100)
            with pytest.raises(StoreError):
                await mine.insert_task(task("e", document='{"n":5}'), quota=roomy)  # 81 + 7 + 7 + 7 > 100
            await mine.insert_task(task("e", document="1"), quota=roomy)  # 81 + 7 + 7 + 1 = 96: a small one fits
            # A purge forgets: the expired tasks no longer count.
            assert await mine.delete_expired_tasks(NOW + timedelta(days=1)) == 4
            await mine.insert_task(task("f", document='{"n":6}'), quota=TaskQuota(max_tasks=1, max_bytes=7))
        finally:
            await mine.close()
            await other.close()

    asyncio.run(main())
