"""Production JSON limits.

Every limit is a named constant so that the parser, the canonical form, the server and the tests agree on one
number. Each is tested at its edge: the limit itself passes and one more is refused.
"""

from typing import Final

#: Characters in one number token, sign and exponent included.
MAX_NUMBER_TOKEN_CHARS: Final = 1_024
#: Largest absolute exponent, checked on the token's own exponent and on the canonical (adjusted) exponent.
MAX_EXPONENT_MAGNITUDE: Final = 10_000
#: Deepest nesting of arrays and objects; a scalar at the root has depth 0.
MAX_DEPTH: Final = 256
#: Most values (scalars and containers; member names not counted) in one document.
MAX_NODES: Final = 4_194_304
#: Canonical bytes of the stable params may grow past the body (number spelling); beyond this they are refused.
MAX_CANONICAL_PARAMS_BYTES: Final = 32 * 1024 * 1024
#: Default and largest configurable MCP request body.
DEFAULT_REQUEST_BODY_BYTES: Final = 10 * 1024 * 1024
MAX_REQUEST_BODY_BYTES: Final = 16 * 1024 * 1024
#: Response output ceiling of the MCP server.
RESPONSE_OUTPUT_CEILING_BYTES: Final = 4 * 1024 * 1024
#: JSON up to this many bytes is parsed or encoded on the event loop: the densest JSON of this size (a run of
#: numbers) costs about 15 ms, less than handing it to a thread and back would save. Larger documents go to a worker
#: thread (the server's request bodies, the task manager's stored documents).
INLINE_BODY_BYTES: Final = 64 * 1024
