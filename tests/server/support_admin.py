"""A real ``soklet serve`` with its admin listener, on loopback, for the admin API tests."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from soklet_core.files import KeyringDocument, read_keyring_file, write_keyring_file
from soklet_core.keys import ProtectionKey, ProtectionKeyring, encode_base64url

#: The bearer token of every test instance (label ``ops``). Long and distinctive, so a leak is easy to find.
TOKEN = "adminTestToken-9f3c2b7e41d0a6"
LABEL = "ops"


def write_keyring(path: Path, active: ProtectionKey, *verification: ProtectionKey) -> None:
    """Write a keyring file (0600) holding ``active`` and ``verification``."""
    keyring = ProtectionKeyring(active, [*verification])
    write_keyring_file(path, KeyringDocument.new(active).with_keyring(keyring))


def file_roles(path: Path) -> dict[str, str]:
    """Key id → role as the keyring file says (read back with the project's reader)."""
    return {entry.key.id: entry.role.value for entry in read_keyring_file(path).entries}


def material_text(key: ProtectionKey) -> str:
    """The key's material as base64url (what the stage endpoint takes)."""
    return encode_base64url(key.material)


class Instance:
    """One ``soklet serve --admin-port 0`` subprocess; stderr goes to a file the test can read."""

    def __init__(self, folder: Path, *extra: str, keyring: Path | None = None, token: bool = True) -> None:
        self.folder = folder
        self.keyring = keyring if keyring is not None else folder / "keys.toml"
        self.token_file = folder / "admin-token"
        self.token_file.write_text(f"# admin tokens\n{LABEL}:{TOKEN}\n")
        self.token_file.chmod(0o600)
        self.log = folder / "serve.log"
        arguments = [sys.executable, "-m", "soklet_cli", "serve", "--port", "0", "--json"]
        arguments += ["--keyring", str(self.keyring), "--admin-port", "0"]
        if token:
            arguments += ["--admin-token-file", str(self.token_file)]
        arguments += list(extra)
        self._stderr = self.log.open("w")
        self.process = subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("{"):
            self.stop()
            raise RuntimeError(f"soklet serve did not start: {self.log.read_text()[-2000:]}")
        self.facts: dict[str, Any] = json.loads(line)
        self.stdout_text = line
        self.admin_url: str = self.facts["admin_url"]
        self.mcp_base: str = self.facts["url"].removesuffix("/mcp")
        self.http = httpx.Client(timeout=20)

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = TOKEN) -> httpx.Response:
        """One admin request (``body``: a JSON value, or bytes sent as they are)."""
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        content = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        return self.http.request(method, self.admin_url + path, content=content, headers=headers)

    def snapshot(self) -> dict[str, Any]:
        """``GET /v1/keyring``, asserted 200."""
        reply = self.request("GET", "/v1/keyring")
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    def wait_for(self, predicate: Callable[[], bool], seconds: float = 60.0) -> None:
        """Poll ``predicate`` until true (a generous bound: "does not hang", not a timing)."""
        deadline = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("condition not reached in time")
            time.sleep(0.1)

    def hangup(self) -> None:
        """Send SIGHUP (reload the keyring file)."""
        self.process.send_signal(signal.SIGHUP)

    def log_text(self) -> str:
        """Everything the instance logged so far."""
        self._stderr.flush()
        return self.log.read_text()

    def stop(self) -> str:
        """Stop it (SIGTERM) and return its whole stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if hasattr(self, "http"):
            self.http.close()
        self._stderr.close()
        return self.log.read_text()


def role_of(snapshot: dict[str, Any], key_id: str) -> str | None:
    """The role ``key_id`` has in a snapshot document, or ``None``."""
    return next((key["role"] for key in snapshot["keys"] if key["id"] == key_id), None)


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed CA certificate for localhost and 127.0.0.1, and its key (0600)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(names), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "admin.pem", folder / "admin.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return cert_path, key_path
