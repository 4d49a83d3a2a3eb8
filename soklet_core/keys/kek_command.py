"""A key-encryption key held by an external program (a cloud KMS, an HSM): :class:`CommandKek`.

soklet runs the program once per call, without a shell, with the environment soklet itself has (the program's
credentials come from there). It writes one JSON object to the program's standard input and closes it; the program
writes one JSON object to its standard output and exits with status 0. Standard error is discarded (never shown).
Binary values are base64url text without padding. The three requests and their answers::

    {"op": "describe"}
        -> {"kek_id": "<id>"}
    {"op": "wrap", "key_id": "<id>", "profile": "<profile>", "plaintext": "<base64url>"}
        -> {"kek_id": "<id>", "ciphertext": "<base64url>"}
    {"op": "unwrap", "key_id": "<id>", "profile": "<profile>", "kek_id": "<id>", "ciphertext": "<base64url>"}
        -> {"plaintext": "<base64url>"}

* ``kek_id`` is 1 to 64 printable ASCII characters without spaces (``check_kek_id``): the public name of the KEK
  (for a KMS, its key name and version). ``describe`` is asked once per :class:`CommandKek`, and its answer is
  what :attr:`CommandKek.kek_id` returns; a ``wrap`` answer must carry that same id.
* The program must bind ``key_id`` and ``profile`` to the ciphertext (as associated data, or an encryption
  context), so a wrapped key moved to another id does not unwrap.
* ``ciphertext`` decodes to 1 to ``MAX_WRAPPED_BYTES`` (4,096) bytes; ``plaintext`` to a data key's 32 to 1,024.
* An unwrap whose ciphertext does not authenticate may answer ``{"error": "unwrap-failed"}`` (exit 0): soklet then
  reports ``unwrap-failed`` instead of ``kek-unavailable``.
* Members not named here are ignored.

Anything else — the program cannot start, exits with a status other than 0, runs longer than ``timeout_seconds``
(:data:`DEFAULT_KEK_COMMAND_TIMEOUT_SECONDS`; it is then killed with its whole process group), writes more than
``max_output_bytes`` (:data:`DEFAULT_KEK_COMMAND_OUTPUT_BYTES`) to standard output, or answers with something that
is not one JSON object with the members above of the right types — is ``KeyWrapError(KEK_UNAVAILABLE)`` with a
short fixed detail. No message ever repeats what the program printed.

Every call blocks for up to ``timeout_seconds``: call it off the event loop.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import Any, Final

from soklet_core.json import JsonError, JsonValue, parse, serialize

from .base64url import decode_base64url, encode_base64url
from .errors import KeyringError
from .key import ProtectionKey
from .wrapping import MAX_WRAPPED_BYTES, KeyWrapError, KeyWrapErrorReason, WrappedKey, check_kek_id

__all__ = [
    "DEFAULT_KEK_COMMAND_OUTPUT_BYTES",
    "DEFAULT_KEK_COMMAND_TIMEOUT_SECONDS",
    "MAX_KEK_COMMAND_OUTPUT_BYTES",
    "MAX_KEK_COMMAND_TIMEOUT_SECONDS",
    "CommandKek",
]

#: How long one call of the program may run before it is killed, by default.
DEFAULT_KEK_COMMAND_TIMEOUT_SECONDS: Final = 10.0
#: The longest ``timeout_seconds`` a :class:`CommandKek` accepts.
MAX_KEK_COMMAND_TIMEOUT_SECONDS: Final = 300.0
#: The most bytes one answer may have on standard output, by default (an answer is well under 8 KiB).
DEFAULT_KEK_COMMAND_OUTPUT_BYTES: Final = 64 * 1024
#: The largest ``max_output_bytes`` a :class:`CommandKek` accepts.
MAX_KEK_COMMAND_OUTPUT_BYTES: Final = 1024 * 1024
_READ_CHUNK: Final = 64 * 1024
_UNWRAP_FAILED: Final = "unwrap-failed"


def _unavailable(detail: str, key_id: str | None = None) -> KeyWrapError:
    return KeyWrapError(KeyWrapErrorReason.KEK_UNAVAILABLE, key_id, detail=f"KEK command: {detail}")


class CommandKek:
    """A :class:`~soklet_core.keys.KeyWrapper` whose KEK lives in an external program (the protocol is in this
    module's docstring). Holds no secret; its repr names the program only."""

    __slots__ = ("_argv", "_kek_id", "_max_output", "_timeout")

    def __init__(
        self,
        argv: Sequence[str],
        *,
        timeout_seconds: float = DEFAULT_KEK_COMMAND_TIMEOUT_SECONDS,
        max_output_bytes: int = DEFAULT_KEK_COMMAND_OUTPUT_BYTES,
    ) -> None:
        words = tuple(argv)
        if not words or not all(isinstance(word, str) and word and "\x00" not in word for word in words):
            raise ValueError("a KEK command is a non-empty list of non-empty words")
        if not 0 < timeout_seconds <= MAX_KEK_COMMAND_TIMEOUT_SECONDS:
            raise ValueError(f"timeout_seconds must be above 0 and at most {MAX_KEK_COMMAND_TIMEOUT_SECONDS:g}")
        if not 1 <= max_output_bytes <= MAX_KEK_COMMAND_OUTPUT_BYTES:
            raise ValueError(f"max_output_bytes must be 1 to {MAX_KEK_COMMAND_OUTPUT_BYTES}")
        self._argv = words
        self._timeout = float(timeout_seconds)
        self._max_output = max_output_bytes
        self._kek_id: str | None = None

    @property
    def kek_id(self) -> str:
        """The KEK id the program reports for ``{"op": "describe"}``, asked once and then remembered."""
        if self._kek_id is None:
            answer = self._call({"op": "describe"}, None)
            self._kek_id = self._kek_id_in(answer, None)
        return self._kek_id

    def wrap(self, key: ProtectionKey, profile: str) -> WrappedKey:
        """``key`` wrapped by the program (``{"op": "wrap", ...}``)."""
        expected = self.kek_id
        request = {"op": "wrap", "key_id": key.id, "profile": profile, "plaintext": encode_base64url(key.material)}
        answer = self._call(request, key.id)
        if self._kek_id_in(answer, key.id) != expected:
            raise _unavailable("the wrap answer names another KEK id than describe did", key.id)
        ciphertext = self._bytes_in(answer, "ciphertext", key.id)
        if not 1 <= len(ciphertext) <= MAX_WRAPPED_BYTES:
            raise _unavailable(f"the ciphertext must be 1 to {MAX_WRAPPED_BYTES} bytes", key.id)
        return WrappedKey(key_id=key.id, kek_id=expected, ciphertext=ciphertext)

    def unwrap(self, wrapped: WrappedKey, profile: str) -> ProtectionKey:
        """The data key the program unwraps (``{"op": "unwrap", ...}``); ``WRONG_KEK`` without running it when
        ``wrapped`` names another KEK id than this one."""
        if wrapped.kek_id != self.kek_id:
            raise KeyWrapError(KeyWrapErrorReason.WRONG_KEK, wrapped.key_id)
        request = {
            "op": "unwrap",
            "key_id": wrapped.key_id,
            "profile": profile,
            "kek_id": wrapped.kek_id,
            "ciphertext": encode_base64url(wrapped.ciphertext),
        }
        answer = self._call(request, wrapped.key_id)
        if answer.get("error") == _UNWRAP_FAILED:
            raise KeyWrapError(KeyWrapErrorReason.UNWRAP_FAILED, wrapped.key_id)
        material = self._bytes_in(answer, "plaintext", wrapped.key_id)
        try:
            return ProtectionKey.from_id_and_bytes(wrapped.key_id, material)
        except KeyringError:
            raise _unavailable("the plaintext is not a data key's length", wrapped.key_id) from None

    def __repr__(self) -> str:
        return f"CommandKek(program={os.path.basename(self._argv[0])!r})"

    # -- the protocol ------------------------------------------------------------------------------------------

    @staticmethod
    def _kek_id_in(answer: dict[str, Any], key_id: str | None) -> str:
        value = answer.get("kek_id")
        try:
            return check_kek_id(value)
        except KeyWrapError:
            raise _unavailable("the answer has no valid kek_id string", key_id) from None

    @staticmethod
    def _bytes_in(answer: dict[str, Any], member: str, key_id: str) -> bytes:
        value = answer.get(member)
        if not isinstance(value, str):
            raise _unavailable(f"the answer has no {member} string", key_id)
        try:
            return decode_base64url(value)
        except ValueError:
            raise _unavailable(f"the answer's {member} is not base64url text", key_id) from None

    def _call(self, request: dict[str, str], key_id: str | None) -> dict[str, Any]:
        output = self._run(serialize(JsonValue.from_python(request)).encode("utf-8"), key_id)
        try:
            answer = parse(output, max_bytes=self._max_output).to_python()
        except JsonError:
            raise _unavailable("the answer is not one JSON document", key_id) from None
        if not isinstance(answer, dict):
            raise _unavailable("the answer is not a JSON object", key_id)
        return answer

    def _run(self, request: bytes, key_id: str | None) -> bytes:
        try:
            # A session of its own, so a timeout kills whatever the program started too.
            process = subprocess.Popen(  # noqa: S603 - the operator's own command, run without a shell
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as error:
            raise _unavailable(f"it could not be started ({error.strerror or 'OS error'})", key_id) from None
        deadline = time.monotonic() + self._timeout
        try:
            assert process.stdin is not None
            assert process.stdout is not None
            # A request is a few KiB, well under a pipe's buffer: this write never waits on the program.
            with contextlib.suppress(BrokenPipeError):
                process.stdin.write(request)
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
            output = self._read(process.stdout, deadline, key_id)
            try:
                status = process.wait(timeout=max(deadline - time.monotonic(), 0.001))
            except subprocess.TimeoutExpired:
                raise self._timed_out(key_id) from None
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        if status != 0:
            raise _unavailable(f"it exited with status {status}", key_id)
        return output

    def _read(self, stream: Any, deadline: float, key_id: str | None) -> bytes:
        output = bytearray()
        descriptor = stream.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(descriptor, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timed_out(key_id)
                if not selector.select(remaining):
                    continue
                chunk = os.read(descriptor, _READ_CHUNK)
                if not chunk:
                    return bytes(output)
                output += chunk
                if len(output) > self._max_output:
                    raise _unavailable(f"it wrote more than {self._max_output:,} bytes", key_id)

    def _timed_out(self, key_id: str | None) -> KeyWrapError:
        return _unavailable(f"it did not answer within {self._timeout:g} s and was killed", key_id)
