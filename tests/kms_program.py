"""A small KMS for tests, speaking soklet's KEK command protocol (soklet_core/keys/kek_command.py, docs/kek.md).

Its own 32-byte KEK is read from the file named by $SOKLET_TEST_KMS_KEK_FILE (base64url text, one line); it wraps
with AES-256-GCM, the key id and profile as associated data, and reports the KEK id "test-kms/" + the first 8
base64url characters of SHA-256(KEK). $SOKLET_TEST_KMS_MODE makes it misbehave:

    sleep          sleeps for an hour before answering
    garbage        prints text that is not JSON
    flood          prints far more than 64 KiB
    exit3          answers correctly, then exits with status 3
    array          prints a JSON array
    no-member      answers without the member asked for
    wrong-type     answers the member as a number
    other-kek      wraps correctly but names another KEK id in the answer
    stderr         writes the request's plaintext to stderr, then answers correctly
    pad            answers correctly, padded with spaces to exactly $SOKLET_TEST_KMS_PAD bytes
    orphan         answers, leaves a child sleeping for an hour that holds its stdout open (its pid written to
                   $SOKLET_TEST_KMS_PIDFILE), and exits

Every request is appended, one op per line, to $SOKLET_TEST_KMS_LOG when that is set.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def main() -> int:
    mode = os.environ.get("SOKLET_TEST_KMS_MODE", "")
    request = json.loads(sys.stdin.read())
    log = os.environ.get("SOKLET_TEST_KMS_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(request["op"] + "\n")
    with open(os.environ["SOKLET_TEST_KMS_KEK_FILE"], encoding="ascii") as handle:
        kek = _unb64(handle.read().strip())
    kek_id = "test-kms/" + _b64(hashlib.sha256(kek).digest())[:8]
    if mode == "sleep":
        time.sleep(3600)
    if mode == "garbage":
        sys.stdout.write("this is not JSON {")
        return 0
    if mode == "flood":
        sys.stdout.write("x" * (1024 * 1024))
        return 0
    if mode == "array":
        sys.stdout.write("[]")
        return 0
    op = request["op"]
    answer: dict[str, object]
    if op == "describe":
        answer = {"kek_id": kek_id}
    elif op == "wrap":
        if mode == "stderr":
            sys.stderr.write(request["plaintext"] + "\n")
        associated = f"{request['key_id']}\x00{request['profile']}".encode()
        nonce = os.urandom(12)
        sealed = AESGCM(kek).encrypt(nonce, _unb64(request["plaintext"]), associated)
        answer = {"kek_id": "someone-else" if mode == "other-kek" else kek_id, "ciphertext": _b64(nonce + sealed)}
    elif op == "unwrap":
        associated = f"{request['key_id']}\x00{request['profile']}".encode()
        blob = _unb64(request["ciphertext"])
        try:
            answer = {"plaintext": _b64(AESGCM(kek).decrypt(blob[:12], blob[12:], associated))}
        except InvalidTag:
            answer = {"error": "unwrap-failed"}
    else:
        return 2
    if mode == "no-member":
        answer = {}
    if mode == "wrong-type":
        answer = dict.fromkeys(answer, 7)
    text = json.dumps(answer)
    if mode == "pad":
        text = text.ljust(int(os.environ["SOKLET_TEST_KMS_PAD"]))
    sys.stdout.write(text)
    sys.stdout.flush()
    if mode == "orphan":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        with open(os.environ["SOKLET_TEST_KMS_PIDFILE"], "w", encoding="ascii") as handle:
            handle.write(str(child.pid))
    return 3 if mode == "exit3" else 0


if __name__ == "__main__":
    sys.exit(main())
