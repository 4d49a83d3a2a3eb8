"""The demo app of ``soklet serve``: three input-required tools written with the ``soklet_core.mcp`` API.

* ``catalog.continue`` — the spec's tool, exactly as the spec writes it: a form elicitation keyed ``approval``
  and FRAMEWORK_PROTECTED state ``{"phase":"waiting-for-approval"}``; on retry the phase is validated, decline
  and cancel are normal endings, and only an accept with the expected empty content completes.
* ``account.link`` — URL elicitation done by the spec's rules: the URL carries one opaque, single-purpose
  handle in its path (no user data, no query, no fragment), stored server-side and bound to the admitted
  subject and partition; a plain-HTTP loopback origin is used only with the development key.
* ``deploy.approve`` — a multi-round approval that carries its own step counter and deadline in its state.

Every handler here is a plain ``def`` that never blocks (no I/O, no sleeps; the link store's lock is held for
a dictionary update), so each is registered with ``blocking=False`` and runs on the event loop.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Final

from soklet_core.json import JsonNumber, JsonObject, JsonString, JsonValue
from soklet_core.mcp import (
    AcceptOutcomeKind,
    CallToolResult,
    InputRequest,
    InputRequestDeclaration,
    InputRequestType,
    InputRequiredResult,
    InputRequirement,
    Registry,
    RequestContext,
    RequestStateMode,
    ToolRegistration,
    boolean_field,
    expect_accept,
    form_request,
    may_request_input,
    mint_url_handle,
    tool,
    url_request,
    url_with_handle,
)

__all__ = [
    "APPROVAL_DEADLINE_SECONDS",
    "DEFAULT_LINK_BASE_URL",
    "FORM",
    "URL",
    "build_registry",
]

#: Declarations of the demo tools.
FORM: Final = InputRequestDeclaration.from_elicitation_form(InputRequirement.CONDITIONAL)
URL: Final = InputRequestDeclaration.from_elicitation_url(InputRequirement.CONDITIONAL)
#: Where ``account.link`` sends the browser outside development (a server-owned HTTPS origin).
DEFAULT_LINK_BASE_URL: Final = "https://link.example.com/approve"
#: How long ``deploy.approve`` waits for all its rounds; kept within the default 15-minute state lifetime.
APPROVAL_DEADLINE_SECONDS: Final = 600
_LINK_LIFETIME_SECONDS: Final = 600
_WAITING: Final = JsonObject.builder().put("phase", "waiting-for-approval").build()


def _approval_request() -> InputRequest:
    return InputRequest.from_declaration(
        FORM,
        JsonObject.builder()
        .put("message", "Approve catalog access?")
        .put("mode", "form")
        .put(
            "requestedSchema",
            JsonObject.builder().put("type", "object").put("properties", JsonObject.empty_instance()).build(),
        )
        .build(),
    )


# Input requests are immutable values: built (and policy-checked) once, not on every call.
_APPROVAL: Final = _approval_request()


def _continue_from(
    protected_state: JsonValue, approval_response: JsonValue | None
) -> CallToolResult | InputRequiredResult:
    """Application-owned: validate the protected phase, handle the action, authorize, then act."""
    if protected_state != _WAITING:
        return CallToolResult.error_text("This continuation is not waiting for approval.")
    outcome = expect_accept(approval_response, {})  # the approval form has no fields
    if outcome.kind is AcceptOutcomeKind.MISSING:  # re-request, keeping the phase
        return (
            InputRequiredResult.with_input_request("approval", _APPROVAL)
            .framework_request_state(protected_state)
            .build()
        )
    if outcome.kind is AcceptOutcomeKind.DECLINED:
        return CallToolResult.from_text("Catalog access was declined.")
    if outcome.kind is AcceptOutcomeKind.CANCELLED:
        return CallToolResult.from_text("Catalog access was cancelled.")
    if not outcome.ok:
        return CallToolResult.error_text("The approval answer was not the expected empty form.")
    return CallToolResult.from_text("Catalog access approved.")  # authorize again here before any side effect


@tool(
    name="catalog.continue",
    description="Continue the catalog workflow once the user approves access.",
    input_schema={"type": "object"},
    input_request_declarations=[
        may_request_input(type=InputRequestType.ELICITATION_FORM, requirement=InputRequirement.CONDITIONAL)
    ],
    request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    blocking=False,
)
def catalog_continue(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
    """The spec's ``catalog.continue``."""
    if context.framework_request_state is None:
        return InputRequiredResult.with_input_request("approval", _APPROVAL).framework_request_state(_WAITING).build()
    return _continue_from(context.framework_request_state, context.input_responses.find("approval"))


@dataclass(frozen=True, slots=True)
class _LinkRecord:
    subject: str | None
    partition: str
    expires_at: float


class _LinkStore:
    """Server-side records of URL handles: what each stands for and whom it is bound to.

    Process-local on purpose (a demo); a real deployment keeps them in shared durable storage.
    """

    def __init__(self) -> None:
        self._records: dict[str, _LinkRecord] = {}
        self._lock = threading.Lock()

    def mint(self, context: RequestContext) -> str:
        handle = mint_url_handle()
        with self._lock:
            now = time.time()
            self._records = {k: v for k, v in self._records.items() if v.expires_at > now}
            self._records[handle] = _LinkRecord(
                context.identity.subject, context.partition, now + _LINK_LIFETIME_SECONDS
            )
        return handle

    def consume(self, handle: str, context: RequestContext) -> bool:
        """Consume ``handle`` if it is live and bound to this caller; a crossed handle is not consumed."""
        with self._lock:
            record = self._records.get(handle)
            if record is None or record.expires_at <= time.time():
                return False
            if not (
                secrets.compare_digest(record.partition, context.partition)
                and record.subject == context.identity.subject
            ):
                return False
            del self._records[handle]
            return True


def _link_tool(base_url: str, development: bool) -> ToolRegistration:
    store = _LinkStore()

    @tool(
        name="account.link",
        description="Link an external account: the user approves in the browser at an opaque one-time URL.",
        input_schema={"type": "object", "properties": {}},
        input_request_declarations=[URL],
        request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
        blocking=False,
    )
    def account_link(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        state = context.framework_request_state
        if state is None:
            handle = store.mint(context)
            url = url_with_handle(base_url, handle, development=development)
            request = url_request(URL, "Open this page to link your account.", url, development=development)
            return (
                InputRequiredResult.with_input_request("link", request)
                .framework_request_state(JsonObject.builder().put("handle", handle).build())
                .build()
            )
        handle_value = state.get("handle") if isinstance(state, JsonObject) else None
        response = context.input_responses.find("link")
        outcome = expect_accept(response, {}, allow_extra=False)
        if outcome.kind is AcceptOutcomeKind.DECLINED:
            return CallToolResult.from_text("Account linking was declined.")
        if outcome.kind is AcceptOutcomeKind.CANCELLED:
            return CallToolResult.from_text("Account linking was cancelled.")
        if not outcome.ok or not isinstance(handle_value, JsonString):
            return CallToolResult.error_text("Account linking did not complete.")
        # URL-mode accept only says the user agreed to open the page; the server-side record decides. The demo
        # has no browser page, so a live record bound to this same caller counts as the completed step.
        if not store.consume(handle_value.value, context):
            return CallToolResult.error_text("Account linking did not complete.")
        return CallToolResult.from_text("Account linked.")

    return account_link


def _stage_request(step: int, stages: int) -> InputRequest:
    return form_request(
        FORM,
        f"Approve deployment stage {step} of {stages}?",
        {"type": "object", "properties": {"approve": {"type": "boolean", "title": "Approve"}}, "required": ["approve"]},
    )


def _stage_state(step: int, stages: int, deadline_ms: int) -> JsonObject:
    return JsonObject.builder().put("step", step).put("stages", stages).put("deadline", deadline_ms).build()


def _int(value: JsonValue | None) -> int | None:
    if isinstance(value, JsonNumber) and value.value == value.value.to_integral_value():
        return int(value.value)
    return None


@tool(
    name="deploy.approve",
    description="Approve a deployment stage by stage (1 to 5 stages); each stage is one round with a deadline.",
    input_schema={
        "type": "object",
        "properties": {"stages": {"type": "integer", "minimum": 1, "maximum": 5}},
    },
    input_request_declarations=[FORM],
    request_state_mode=RequestStateMode.FRAMEWORK_PROTECTED,
    blocking=False,
)
def deploy_approve(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
    """Multi-round approval: ``{"step","stages","deadline"}`` travels in the protected state."""
    state = context.framework_request_state
    if state is None:
        requested = _int(arguments.get("stages")) if "stages" in arguments else 3
        if requested is None or not 1 <= requested <= 5:
            return CallToolResult.error_text("stages must be an integer from 1 to 5.")
        first_deadline = int(time.time() * 1000) + APPROVAL_DEADLINE_SECONDS * 1000
        return (
            InputRequiredResult.with_input_request("stage", _stage_request(1, requested))
            .framework_request_state(_stage_state(1, requested, first_deadline))
            .build()
        )
    if not isinstance(state, JsonObject):
        return CallToolResult.error_text("This continuation is not a deployment approval.")
    step, stages, deadline = _int(state.get("step")), _int(state.get("stages")), _int(state.get("deadline"))
    if step is None or stages is None or deadline is None:
        return CallToolResult.error_text("This continuation is not a deployment approval.")
    if time.time() * 1000 >= deadline:
        return CallToolResult.error_text("The approval deadline has passed; start again.")
    outcome = expect_accept(context.input_responses.find("stage"), {"approve": boolean_field()})
    if outcome.kind is AcceptOutcomeKind.MISSING:
        return (
            InputRequiredResult.with_input_request("stage", _stage_request(step, stages))
            .framework_request_state(state)
            .build()
        )
    if outcome.kind in (AcceptOutcomeKind.DECLINED, AcceptOutcomeKind.CANCELLED) or (
        outcome.ok and outcome.value("approve") is False
    ):
        return CallToolResult.from_text(f"Deployment stopped at stage {step} of {stages}.")
    if not outcome.ok:
        return CallToolResult.error_text("The approval answer was not the expected form.")
    if step >= stages:
        return CallToolResult.from_text(f"All {stages} stages approved; deploying.")
    return (
        InputRequiredResult.with_input_request("stage", _stage_request(step + 1, stages))
        .framework_request_state(_stage_state(step + 1, stages, deadline))
        .build()
    )


def build_registry(*, link_base_url: str = DEFAULT_LINK_BASE_URL, development: bool = False) -> Registry:
    """The demo tools. ``development`` allows a plain-HTTP loopback ``link_base_url`` (dev key only)."""
    link = _link_tool(link_base_url, development)
    return Registry(catalog_continue, link, deploy_approve)
