"""``soklet serve --allowed-host`` / ``--allowed-origin``: the names a load balancer or a Kubernetes Service puts in
``Host`` and ``Origin`` are accepted by a real server; every other name is still refused; a malformed value stops
the start as a usage error (exit 2) without a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.cli.support_serve import Served, shared_keyring

_BODY = b'{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}'


def _status(url: str, host: str, origin: str | None = None) -> int:
    headers = {"Host": host, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if origin is not None:
        headers["Origin"] = origin
    return httpx.post(url, content=_BODY, headers=headers, timeout=30).status_code


def test_an_allowed_host_and_origin_pass_the_check_and_others_do_not(tmp_path: Path) -> None:
    served = Served(
        tmp_path,
        "--keyring",
        str(shared_keyring(tmp_path)),
        "--allowed-host",
        "soklet.soklet.svc.cluster.local",
        "--allowed-host",
        "mcp.example.com:443",
        "--allowed-origin",
        "https://app.example.com",
    )
    try:
        url = served.facts["url"]
        assert _status(url, "soklet.soklet.svc.cluster.local") != 403
        assert _status(url, "mcp.example.com:443") != 403
        assert _status(url, "mcp.example.com:443", "https://app.example.com") != 403
        assert _status(url, "mcp.example.com:8443") == 403
        assert _status(url, "evil.example.net") == 403
        assert _status(url, "mcp.example.com:443", "https://evil.example.net") == 403
    finally:
        served.stop()


@pytest.mark.slow
def test_without_the_option_only_loopback_names_pass(tmp_path: Path) -> None:
    served = Served(tmp_path, "--keyring", str(shared_keyring(tmp_path)))
    try:
        assert _status(served.facts["url"], "soklet.soklet.svc.cluster.local") == 403
    finally:
        served.stop()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--allowed-host", "host:99999"),
        ("--allowed-host", "a host"),
        ("--allowed-origin", "app.example.com"),
        ("--allowed-origin", "https://app.example.com/path"),
    ],
)
def test_a_malformed_name_is_a_usage_error(tmp_path: Path, option: str, value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--dev-key", option, value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "value 1 is not" in done.stderr


@pytest.mark.slow
def test_the_count_of_names_is_bounded(tmp_path: Path) -> None:
    from soklet_cli.serve import MAX_ALLOWED_NAMES

    def run(count: int) -> subprocess.CompletedProcess[str]:
        names = [part for index in range(count) for part in ("--allowed-host", f"h{index}.example.com")]
        return subprocess.run(
            [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--dev-key", "--stdio", *names],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    assert run(MAX_ALLOWED_NAMES).returncode == 0
    refused = run(MAX_ALLOWED_NAMES + 1)
    assert refused.returncode == 2
    assert f"at most {MAX_ALLOWED_NAMES}" in refused.stderr
