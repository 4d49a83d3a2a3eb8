"""What this interpreter's regular expressions can be trusted with: the one home of that check.

The JSON layer matches long runs of array items with one repeat that never gives a finished item back. Written as
a possessive repeat (``(?:,ITEM){0,n}+``) the engine keeps no backtracking state per item. CPython before 3.11.5
matches some possessive repeats wrongly: when an iteration fails after its body had started (an item whose
look-ahead refuses it), the match keeps the failed iteration's separator (``1, 2, 3e5`` matches ``1, 2,``). An
atomic group around a greedy repeat (``(?>(?:,ITEM){0,n})``) means the same and matches right on every 3.11, at the
cost of the backtracking state held while it runs (about 1.2 MB for a chunk of 2,048 numbers), freed when it ends.
Each run pattern is therefore written both ways, and this flag picks one.
"""

from __future__ import annotations

import sys
from typing import Final

__all__ = ["POSSESSIVE_REPEATS_WORK"]

#: Whether possessive repeats match as documented here (CPython 3.11.5 and later).
POSSESSIVE_REPEATS_WORK: Final = sys.version_info >= (3, 11, 5)
