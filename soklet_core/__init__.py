"""soklet core: sealed, bound, expiring MCP request state and the keys that protect it.

Layers, bottom first (a module imports only its own layer and the ones below it): ``protocol`` → ``errors`` →
``json`` → ``keys`` → ``files`` → ``protection`` → ``mcp`` (``model`` ← ``server``) → ``fleet``. This package
never imports typer or rich.

Every refusal soklet raises is a :class:`SokletError`, and every reason it carries an :class:`ErrorReason`
(the tree is drawn in :mod:`soklet_core.errors`), so ``except SokletError`` catches the whole library.
"""

import logging

from .errors import ErrorReason, SokletError

__all__ = ["ErrorReason", "SokletError", "__version__"]

__version__ = "0.1.0"

# A library leaves handling its records to the application: the core logs refusals for operators, and without a
# handler of the application's (soklet serve sets one up) they would otherwise reach Python's last-resort stderr
# handler, repeating what a command already reports in its own line.
logging.getLogger("soklet").addHandler(logging.NullHandler())
