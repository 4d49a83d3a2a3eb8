"""Project tools that are not part of the installed package: the conformance runner (``tools/conformance.py``, run by
``bash scripts/conformance``) and the completion and man page generator (``tools/gen_docs.py``, run by
``bash scripts/gen-docs``). Each is a module with a ``main()``, runnable as a file."""
