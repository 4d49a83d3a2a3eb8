"""Applications built on soklet_core: the demo that ``soklet serve`` runs (:mod:`.demo`) and the conformance
fixture set (:mod:`.conformance`) that ``soklet serve --fixtures conformance`` adds and the tests drive.

They are ordinary app code, written against :mod:`soklet_core.mcp` only, so the CLI, the tests and the benchmarks
all import them from here; nothing in them knows about the command line.
"""
