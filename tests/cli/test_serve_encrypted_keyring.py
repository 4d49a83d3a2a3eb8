"""``soklet serve --keyring FILE --kek-file K``: a real server reads an encrypted keyring file (``soklet keys
encrypt``) with its KEK and seals with it; without the KEK, or under another one, the start is refused in one
line, exit 1, before anything listens."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli.support_serve import Served
from tests.cli.test_kek_cli import _fingerprint, _kek, _keyring
from tests.conftest import Soklet


def _encrypted(soklet: Soklet) -> tuple[str, str]:
    ring = _keyring(soklet)
    kek, _ = _kek(soklet)
    done = soklet.run("keys", "encrypt", "--kek-file", str(kek))
    assert done.returncode == 0, done.stderr
    return str(ring.resolve()), str(kek.resolve())


@pytest.mark.slow
def test_serve_reads_an_encrypted_keyring_file_given_its_kek(soklet: Soklet) -> None:
    ring, kek = _encrypted(soklet)
    served = Served(soklet.cwd, "--keyring", ring, "--kek-file", kek)
    try:
        assert served.facts["fingerprint"]["value"] == _fingerprint(soklet, "--kek-file", kek)
        reply = served.client.call("catalog.continue", {"query": "lamps"}, capabilities={"elicitation": {"form": {}}})
        assert reply.result["resultType"] == "input_required", reply.result
    finally:
        served.stop()


@pytest.mark.slow
def test_serve_refuses_an_encrypted_keyring_without_its_kek_or_under_another(soklet: Soklet) -> None:
    ring, _ = _encrypted(soklet)
    other, _ = _kek(soklet, "other-kek")
    for extra, reason in (((), "kek-required"), (("--kek-file", str(other.resolve())), "wrong-kek")):
        done = subprocess.run(
            [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--keyring", ring, *extra],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1, done.stderr
        assert reason in done.stderr
        assert "Traceback" not in done.stderr
        assert done.stderr.count("\n") == 1
