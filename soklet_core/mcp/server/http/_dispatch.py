"""The 2026-07-28 HTTP side of one POST: read the body once, check the envelope, the headers and admission, build a
:class:`~soklet_core.mcp.server.engine.Call`, run it on the :class:`~soklet_core.mcp.server.engine.Engine`, and
encode the :class:`~soklet_core.mcp.server.engine.Outcome` into a
:class:`~soklet_core.mcp.server._jsonrpc.DispatchResult` (HTTP status, encoded JSON-RPC response, log fields). The
ASGI framing, SSE progress, the body and output limits and cancellation are the transport's
(:mod:`soklet_core.mcp.server.http._transport`).

Validation order of one request (one numbering, shared with :mod:`soklet_core.mcp.server.engine._engine`, the
transport and ``docs/server.md``; steps 1-5 and 24 are the transport's); the first failure answers:

6. Strict JSON body (-32700, 400).
7. JSON-RPC envelope (-32600, 400; :func:`~soklet_core.mcp.server._jsonrpc.check_envelope`); a notification (no
   ``id``) is accepted (202).
8. ``MCP-Protocol-Version`` header present (-32020, 400).
9. ``params`` an object; ``params._meta`` with ``protocolVersion`` and ``clientCapabilities`` (-32602, 400).
10. Header equals ``_meta`` version (-32020, 400).
11. Version supported (-32022, 400, ``data.supported`` / ``data.requested``).
12. Method known; removed and unknown methods (-32601, 404).
13. ``Mcp-Method`` header equals the method (-32020, 400).
14. ``_meta.logLevel`` a known level; the method's routing member a string (-32602, 400).
14b. ``Mcp-Name`` equals the routing member; a tool's ``Mcp-Param-*`` headers equal its arguments (-32020, 400).
15. Admission (401 with a ``WWW-Authenticate: Bearer`` challenge, 403 for a scope the policy requires, 503 when the
    policy could not check the token).
16-23. The engine (:meth:`Engine.call <soklet_core.mcp.server.engine.Engine.call>`): the operation, its scopes,
    REQUIRED capabilities, params, opening the state, the handler, the emission, CONDITIONAL capabilities, sealing.

Request bodies: work that grows with the body stays off the event loop. A body up to
:data:`~soklet_core.json.limits.INLINE_BODY_BYTES` is parsed on the loop; a larger one in one of the engine's bounded
workers (503 when they all stay busy). The body is parsed once. The params digest a framework-protected state is
bound to is taken from the body bytes, never from the value model, at most once per request; for a large body it is
taken in the same worker job, *before* the value model is built, so the two never coexist in memory.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Final

from soklet_core import tracing
from soklet_core.json import (
    JsonArray,
    JsonBoolean,
    JsonError,
    JsonErrorReason,
    JsonNull,
    JsonNumber,
    JsonObject,
    JsonString,
    JsonValue,
    ParamsDigest,
    encode_wire,
    params_digest,
    parse,
)
from soklet_core.json.limits import INLINE_BODY_BYTES
from soklet_core.mcp.model import methods
from soklet_core.mcp.model.capabilities import ClientCapabilities
from soklet_core.mcp.model.errors import McpModelError
from soklet_core.mcp.model.results import CallToolResult
from soklet_core.mcp.server._headers import HttpRequest, decode_header
from soklet_core.mcp.server._jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    UNSUPPORTED_VERSION,
    DispatchResult,
    Envelope,
    McpError,
    check_envelope,
    encode_result,
    envelope_refusal,
    method_refusal,
    params_not_object,
    parse_refusal,
)
from soklet_core.mcp.server._request_span import MODERN_ERA, RequestSpan, meta_of
from soklet_core.mcp.server.engine import (
    Call,
    Complete,
    DigestSource,
    EncodedResult,
    Engine,
    InputRequired,
    Outcome,
    ProgressChannel,
    ResultValue,
    TaskCreated,
    check_log_level,
    routing_member,
    routing_value,
)
from soklet_core.protocol import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY

__all__ = ["HttpDispatch", "HttpRequest"]

# What admission sees of a message without headers (stdio).
_NO_HEADERS: Final[Mapping[str, str]] = MappingProxyType({})
# What a digest taken from the bytes may refuse that parsing the same bytes accepts: every other refusal of the
# digest is one that parse() makes too (the digest checks the parts it leaves out), so it answers for both.
_DIGEST_ONLY_REFUSALS: Final = frozenset({JsonErrorReason.PARAMS_NOT_STRUCTURED, JsonErrorReason.CANONICAL_TOO_LARGE})


class _BodyDigest:
    """The params digest of one POST, from its body bytes: taken by the engine at most once, or already taken in
    the worker that parsed a large body (then its size is 0: nothing left to do)."""

    __slots__ = ("_body", "_taken")

    def __init__(self, body: bytes, taken: ParamsDigest | JsonError | None = None) -> None:
        self._body = body
        self._taken = taken

    @property
    def size(self) -> int:
        return len(self._body) if self._taken is None else 0

    def take(self) -> ParamsDigest:
        taken = self._taken
        if taken is None:
            body = self._body
            # From the bytes even though the body is parsed already: up to 64 KiB msgspec digests them faster than
            # the value model can be walked. Cooperative for large bodies: they are digested in a worker thread.
            return params_digest(body, whole_request=True, cooperative=len(body) > INLINE_BODY_BYTES)
        if isinstance(taken, JsonError):
            raise taken
        return taken

    def __repr__(self) -> str:
        return f"_BodyDigest(taken={self._taken is not None})"


def _digest_or_error(body: bytes) -> ParamsDigest | JsonError:
    try:
        return params_digest(body, whole_request=True, cooperative=True)
    except JsonError as error:
        return error


def _read_large_body(body: bytes, *, digest: bool) -> tuple[JsonValue, ParamsDigest | JsonError | None]:
    """Parse a large body in a worker thread; with ``digest``, take its params digest from the bytes first (its
    working data freed before the value model is built). A digest refusal that parsing shares is the parse error."""
    taken: ParamsDigest | JsonError | None = None
    if digest:
        taken = _digest_or_error(body)
        if isinstance(taken, JsonError) and taken.reason not in _DIGEST_ONLY_REFUSALS:
            raise taken
    return parse(body), taken


def _header_mismatch(detail: str) -> McpError:
    return McpError(HEADER_MISMATCH, f"Header mismatch: {detail}", log_reason="header-mismatch")


def _decoded(value: str) -> str:
    decoded = decode_header(value)
    if decoded is None:
        raise _header_mismatch("a base64 header value does not decode")
    return decoded


def _header_matches(header: str, body: JsonValue) -> bool:
    if isinstance(body, JsonString):
        return header == body.value
    if isinstance(body, JsonBoolean):
        return header == ("true" if body.value else "false")
    if isinstance(body, JsonNumber):
        try:
            return Decimal(header) == body.value
        except (InvalidOperation, ValueError):
            return False
    return False


def _logged(method: str) -> str | None:
    # Only a method soklet knows is named in the log and the span.
    return method if method in methods.KNOWN_METHODS else None


def _meta_missing() -> McpError:
    return McpError(
        INVALID_PARAMS,
        f"Invalid params: _meta must carry {PROTOCOL_VERSION_META_KEY} and {CLIENT_CAPABILITIES_META_KEY}",
        log_reason="meta-missing",
    )


def _meta_invalid(message: str) -> McpError:
    return McpError(INVALID_PARAMS, message, log_reason="meta-invalid")


class HttpDispatch:
    """The 2026-07-28 HTTP side over one :class:`Engine` (steps 6-15, then the engine, then the encoding)."""

    __slots__ = ("_engine", "_meta_tail", "_registry", "_supported", "_versions")

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._registry = engine.registry
        self._versions = frozenset(engine.supported_versions)
        self._supported = JsonArray.of(*engine.supported_versions)
        server_meta = JsonObject.builder().put(SERVER_INFO_META_KEY, engine.server_info).build()
        # Every result ends with the same _meta member: encoded once, spliced in before the closing brace.
        self._meta_tail = b',"_meta":' + encode_wire(server_meta) + b"}"

    @property
    def engine(self) -> Engine:
        """The engine calls run on."""
        return self._engine

    async def dispatch(self, request: HttpRequest, channel: ProgressChannel | None = None) -> DispatchResult:
        """Answer one POST body. Never raises for client input; ``asyncio.CancelledError`` propagates."""
        started_ns = time.time_ns() if tracing.tracer() is not None else None
        try:
            message, digest = await self._parse(request.body)
            envelope = check_envelope(message)
        except McpError as error:
            return DispatchResult.refused(error)
        if envelope is None:
            return DispatchResult(202, None, reason="notification")
        request_id = envelope.request_id
        method = envelope.method
        if method is None:
            return DispatchResult.refused(envelope_refusal(), request_id)
        if started_ns is not None:
            return await self.answer(
                request.path, request.headers, envelope, method, digest, channel, transport="tcp", started_ns=started_ns
            )
        try:
            call = await self._call(request, envelope, method, digest)
        except McpError as error:
            return DispatchResult.refused(error, request_id, method=_logged(method))
        outcome = await self._engine.call(call, channel)
        return self.encode(outcome, call)

    async def answer(
        self,
        path: str,
        headers: Mapping[str, str] | None,
        envelope: Envelope,
        method: str,
        digest: DigestSource,
        channel: ProgressChannel | None,
        *,
        transport: str,
        started_ns: int | None = None,
    ) -> DispatchResult:
        """Steps 8-23 of one request inside its server span (:class:`~soklet_core.mcp.server._request_span.RequestSpan`,
        when tracing is on): the checks, admission and the engine, then the encoded answer with the span's ids.
        ``headers`` ``None``: a transport without headers (stdio: ``transport`` ``pipe``)."""
        request_id = envelope.request_id
        span = RequestSpan.start(
            method=_logged(method),
            meta=meta_of(envelope.message),
            headers=headers,
            transport=transport,
            era=MODERN_ERA,
            started_ns=started_ns,
        )
        if span is None:
            try:
                call = await self._checked(path, headers, envelope, method, digest)
            except McpError as error:
                return DispatchResult.refused(error, request_id, method=_logged(method))
            return self.encode(await self._engine.call(call, channel), call)
        try:
            with span.scope():
                try:
                    call = await self._checked(path, headers, envelope, method, digest)
                except McpError as error:
                    return span.finish(DispatchResult.refused(error, request_id, method=_logged(method)))
                span.version(call.protocol_version)
                outcome = await self._engine.call(call, channel)
                span.outcome(outcome)
                return span.finish(self.encode(outcome, call))
        except BaseException as error:
            span.abandon(type(error).__name__)
            raise

    async def validate(self, request: HttpRequest) -> Call | None:
        """Steps 6-15 alone: the :class:`Call` the engine would run, or ``None`` for a notification. Raises
        :class:`McpError` with the first failure (for tests: :meth:`dispatch` runs the same steps)."""
        message, digest = await self._parse(request.body)
        envelope = check_envelope(message)
        if envelope is None:
            return None
        if envelope.method is None:
            raise envelope_refusal()
        return await self._call(request, envelope, envelope.method, digest)

    def encode(self, outcome: Outcome, call: Call) -> DispatchResult:
        """An outcome as the 2026-07-28 wire answers it (``_meta.serverInfo`` appended to every result)."""
        request_id = call.request_id
        kind = type(outcome)
        if kind is Complete or kind is TaskCreated:
            assert isinstance(outcome, Complete | TaskCreated)
            body = self._result_bytes(outcome.result)
        elif kind is InputRequired:
            assert isinstance(outcome, InputRequired)
            body = outcome.result.encode(outcome.sealed_state)
        else:
            assert not isinstance(outcome, Complete | TaskCreated | InputRequired)
            return DispatchResult.refused(outcome.error, request_id, method=call.method, operation=outcome.operation)
        body = encode_result(request_id, body[:-1] + self._meta_tail)
        return DispatchResult(200, body, call.method, outcome.operation, request_id=request_id)

    @staticmethod
    def _result_bytes(result: ResultValue) -> bytes:
        if type(result) is EncodedResult:
            return result.body
        if type(result) is CallToolResult:
            return result.encode()
        return encode_wire(result.to_wire())

    # ------------------------------------------------------------------------------------------------ step 6

    async def _parse(self, body: bytes) -> tuple[JsonValue, _BodyDigest]:
        try:
            if len(body) <= INLINE_BODY_BYTES:
                return parse(body), _BodyDigest(body)
            engine = self._engine
            protects = engine.protects_state
            message, taken = await engine.run_sized(len(body), lambda: _read_large_body(body, digest=protects))
        except JsonError:
            raise parse_refusal() from None
        if taken is not None:
            self._engine.count_digest()
        return message, _BodyDigest(body, taken)

    # ------------------------------------------------------------------------------------------------ steps 7-15

    async def _call(self, request: HttpRequest, envelope: Envelope, method: str, digest: _BodyDigest) -> Call:
        return await self._checked(request.path, request.headers, envelope, method, digest)

    async def _checked(
        self, path: str, headers: Mapping[str, str] | None, envelope: Envelope, method: str, digest: DigestSource
    ) -> Call:
        # headers None: a transport without headers (steps 8, 10, 13 and 14b do not apply).
        version_header: str | None = None
        if headers is not None:
            version_header = headers.get("mcp-protocol-version")
            if version_header is None:
                raise _header_mismatch("missing MCP-Protocol-Version header")  # step 8
        message = envelope.message
        params = message.get("params")
        if params is not None and not isinstance(params, JsonObject):
            raise params_not_object()  # step 9
        meta = params.get("_meta") if params is not None else None
        if (
            not isinstance(meta, JsonObject)
            or PROTOCOL_VERSION_META_KEY not in meta
            or CLIENT_CAPABILITIES_META_KEY not in meta
        ):
            raise _meta_missing()
        assert params is not None
        version = meta[PROTOCOL_VERSION_META_KEY]
        if not isinstance(version, JsonString):
            raise _meta_invalid("Invalid params: protocolVersion must be a string")
        try:
            capabilities = ClientCapabilities.from_json(meta[CLIENT_CAPABILITIES_META_KEY])
        except McpModelError:
            raise _meta_invalid("Invalid params: clientCapabilities must be an object") from None
        if version_header is not None and version_header.strip() != version.value:  # step 10
            raise _header_mismatch("MCP-Protocol-Version header does not match _meta protocolVersion")
        if version.value not in self._versions:  # step 11
            data = JsonObject.builder().put("supported", self._supported).put("requested", version).build()
            raise McpError(UNSUPPORTED_VERSION, "Unsupported protocol version", data)
        if method not in methods.KNOWN_METHODS:
            raise method_refusal()  # step 12
        if headers is not None:
            self._routing_headers(headers, method, params, meta)  # steps 13-14b
        else:
            check_log_level(meta)  # step 14 without its headers
            routing_value(method, params)
        admission = await self._engine.admit(path, _NO_HEADERS if headers is None else headers)  # step 15
        return Call(
            method=method,
            request_id=envelope.request_id,
            protocol_version=version.value,
            params=params,
            meta=meta,
            capabilities=capabilities,
            admission=admission,
            endpoint_path=path,
            digest=digest,
        )

    def _routing_headers(self, headers: Mapping[str, str], method: str, params: JsonObject, meta: JsonObject) -> None:
        method_header = headers.get("mcp-method")
        if method_header is None or method_header.strip() != method:
            raise _header_mismatch("Mcp-Method header does not match the body method")
        check_log_level(meta)
        value = routing_value(method, params)
        if value is None:
            return
        header = headers.get("mcp-name")
        if header is None:
            raise _header_mismatch("missing Mcp-Name header")
        if _decoded(header) != value:
            raise _header_mismatch(f"Mcp-Name header does not match params.{routing_member(method)}")
        if method != methods.TOOLS_CALL:
            return
        tool = self._registry.find_tool(value)
        if tool is None or not tool.header_parameters:
            return
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, JsonObject) else JsonObject.empty_instance()
        for name, property_name in tool.header_parameters.items():
            sent = headers.get("mcp-param-" + name.lower())
            body_value = arguments.get(property_name)
            present = body_value is not None and not isinstance(body_value, JsonNull)
            if sent is None:
                if present:
                    raise _header_mismatch(f"missing Mcp-Param-{name} header")
                continue
            if not present or body_value is None or not _header_matches(_decoded(sent), body_value):
                raise _header_mismatch(f"Mcp-Param-{name} header does not match the argument")
