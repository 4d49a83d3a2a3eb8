"""soklet core: sealed, bound, expiring MCP request state and the keys that protect it.

Layers (imports point down only): ``mcp`` → ``protection`` → ``keys`` → ``json``; ``files`` beside ``keys``.
This package never imports typer or rich.
"""

__version__ = "0.1.0"
