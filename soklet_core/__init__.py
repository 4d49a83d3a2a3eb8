"""soklet core: sealed, bound, expiring MCP request state and the keys that protect it.

Layers (imports point down only): ``mcp`` → ``protection`` → ``keys`` → ``json``; ``files`` beside ``keys``.
This package never imports typer or rich.
"""

import logging

__version__ = "0.1.0"

# A library leaves handling its records to the application: the core logs refusals for operators, and without a
# handler of the application's (soklet serve sets one up) they would otherwise reach Python's last-resort stderr
# handler, repeating what a command already reports in its own line.
logging.getLogger("soklet").addHandler(logging.NullHandler())
