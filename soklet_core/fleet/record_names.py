"""The names of a fleet rotation's record file: a module of its own, without the fleet's HTTP client and the
server's snapshot model, so that a command's help can name them without loading either."""

from __future__ import annotations

from typing import Final

__all__ = ["RECORD_SUFFIX", "RESOLVED_RECORD_NAME"]

#: The default record file is the fleet file's path plus this suffix.
RECORD_SUFFIX: Final = ".rotation.json"
#: The record's default name, in the working folder, for members found by ``--resolve`` (no fleet file).
RESOLVED_RECORD_NAME: Final = "soklet-fleet" + RECORD_SUFFIX
