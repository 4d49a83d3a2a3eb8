"""How a span of time is spelled: ``15m``, ``10s``, ``1h30m``, ``0.5s``, the one spelling the diagnosis writes and
the CLI's duration options read back.

A leaf (``datetime`` only): a command that shows a default lifetime in its help spells it without importing the
diagnosis, the sealer it explains and the JSON codec they use.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

__all__ = ["duration_text"]

_MILLISECOND: Final = timedelta(milliseconds=1)


def duration_text(span: timedelta) -> str:
    """A positive whole number of milliseconds spelled with units, shortest first: ``15m``, ``10s``, ``1h30m``,
    ``0.5s`` (the spelling the CLI's duration options read back)."""
    milliseconds = span // _MILLISECOND
    if milliseconds <= 0 or timedelta(milliseconds=milliseconds) != span:
        raise ValueError("a positive whole number of milliseconds")
    seconds, fraction = divmod(milliseconds, 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    if fraction:
        text += f"{seconds}.{fraction:03d}".rstrip("0") + "s"
    elif seconds or not text:
        text += f"{seconds}s"
    return text
