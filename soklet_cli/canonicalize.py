"""``soklet canonicalize``: the canonical form and params digest of a JSON document."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from soklet_core.json import (
    MAX_REQUEST_BODY_BYTES,
    JsonArray,
    JsonError,
    JsonObject,
    canonical_bytes,
    params_digest,
    parse,
)

from .exit_codes import ExitCode
from .output import emit_json, fail, read_input


def canonicalize(
    source: Annotated[str, typer.Argument(metavar="[FILE|-]", help="JSON document to read; - for stdin.")] = "-",
    digest_only: Annotated[
        bool,
        typer.Option(
            "--params-digest",
            help="Print the stable params digest (base64url) of a JSON-RPC request, or of a bare params object.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"canonical": ..., "params_digest": ..., "bytes": N}.')
    ] = False,
    max_bytes: Annotated[
        int, typer.Option("--max-bytes", min=1, help="Refuse input larger than this many bytes.")
    ] = MAX_REQUEST_BODY_BYTES,
) -> None:
    """Print the canonical form of a JSON document.

    The canonical form is what soklet hashes and seals: no whitespace, members in UTF-16 order, exact
    numbers in canonical spelling (100 → 1E+2, 1.50 → 1.5). The input is parsed strictly: duplicate
    members, lone surrogates, NaN, numbers over the limits and the like are refused.

    **Examples**

      soklet canonicalize request.json

      echo '{"b": 100, "a": 1.50}' | soklet canonicalize -

      soklet canonicalize --params-digest request.json

    **Exit codes**: 0 printed; 1 refused (one line on stderr with the reason and byte offset);
    2 usage; 3 the file could not be read.
    """
    data = read_input(source, max_bytes=max_bytes)
    try:
        value = parse(data)
        canonical = canonical_bytes(value)
        digest = params_digest(value).text if isinstance(value, JsonObject | JsonArray) else None
    except JsonError as error:
        fail(f"refused: {error}", ExitCode.REFUSED)
    if digest_only:
        if digest is None:
            fail("refused: params-not-structured: params must be a JSON object or array", ExitCode.REFUSED)
        if as_json:
            emit_json({"params_digest": digest})
        else:
            sys.stdout.write(digest + "\n")
        return
    if as_json:
        emit_json({"canonical": canonical.decode("utf-8"), "params_digest": digest, "bytes": len(canonical)})
        return
    sys.stdout.buffer.write(canonical + b"\n")
    sys.stdout.flush()
