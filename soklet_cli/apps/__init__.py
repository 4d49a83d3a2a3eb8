"""Applications bundled with ``soklet serve``: the demo (:mod:`.demo`) and the conformance fixtures
(:mod:`.conformance`)."""
