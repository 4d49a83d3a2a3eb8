"""Construction of frozen values whose public constructor is closed.

Types that the spec builds through named factories only (``InputRequestDeclaration``, ``InputRequest`` …) are
frozen slotted dataclasses whose ``__init__`` raises ``TypeError``; their factories validate and then call
:func:`new_frozen`, which fills the slots directly.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["new_frozen"]

_T = TypeVar("_T")


def new_frozen(cls: type[_T], **fields: object) -> _T:
    """An instance of ``cls`` with ``fields`` set, bypassing ``__init__`` (and the frozen ``__setattr__``)."""
    obj = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(obj, name, value)
    return obj
