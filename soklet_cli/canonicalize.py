"""``soklet canonicalize``: the canonical form and params digest of a JSON document."""

from __future__ import annotations

import sys
from json import dumps
from json.encoder import encode_basestring
from typing import Annotated

import typer

from soklet_core.json import MAX_REQUEST_BODY_BYTES, JsonError, params_digest
from soklet_core.json.canonical import canonical_chunks, load_canonical_tree

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
        int,
        typer.Option(
            "--max-bytes",
            min=1,
            max=MAX_REQUEST_BODY_BYTES,
            help="Refuse input larger than this many bytes (at most 16 MiB, the largest MCP request body).",
        ),
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
    # One strict parse straight into canonical-ready data (no value model), shared by the digest and the canonical
    # form; the canonical bytes are held as the encoder's ~64 KiB pieces and written piece by piece. Everything is
    # computed before anything is written, so a refusal found while encoding never leaves partial output.
    data = read_input(source, max_bytes=max_bytes)
    try:
        # Cooperative: its number hook also shares the text of equal number tokens (memory over a little speed).
        tree = load_canonical_tree(data, cooperative=True)
        del data  # the tree keeps the bytes it needs
        digest = params_digest(tree).text if type(tree.root) in (dict, list) else None
        # Encoding checks the number limits; a digest does so for every part of the document it reads.
        pieces = list(canonical_chunks(tree)) if digest is None or not digest_only else []
    except JsonError as error:
        fail(f"refused: {error}", ExitCode.REFUSED)
    del tree
    if digest_only:
        if digest is None:
            fail("refused: params-not-structured: params must be a JSON object or array", ExitCode.REFUSED)
        if as_json:
            emit_json({"params_digest": digest})
        else:
            sys.stdout.write(digest + "\n")
        return
    if as_json:
        # What emit_json would print for {"canonical": ..., "params_digest": ..., "bytes": N}, without building the
        # canonical text and its escaped copy whole: each piece is whole UTF-8 characters, escaped on its own.
        out = sys.stdout
        out.write('{"canonical": "')
        for piece in pieces:
            out.write(encode_basestring(piece.decode("utf-8"))[1:-1])
        size = sum(map(len, pieces))
        out.write(f'", "params_digest": {dumps(digest)}, "bytes": {size}}}\n')
        out.flush()
        return
    binary = sys.stdout.buffer
    for piece in pieces:
        binary.write(piece)
    binary.write(b"\n")
    binary.flush()
