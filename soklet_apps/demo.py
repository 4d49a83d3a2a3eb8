"""The demo app of ``soklet serve``: three input-required tools written with the ``soklet_core.mcp`` API.

* ``catalog.continue`` — the spec's tool: a form elicitation keyed ``approval`` and FRAMEWORK_PROTECTED state
  ``{"phase":"waiting-for-approval"}``; on retry the phase is validated, decline and cancel are normal endings,
  and only an accept with the expected empty content completes.
* ``account.link`` — URL elicitation done by the spec's rules: the URL carries one opaque, single-purpose
  handle in its path (no user data, no query, no fragment), stored server-side in a
  :class:`~soklet_apps.link_page.LinkStore` and bound to the admitted subject and partition; a plain-HTTP
  loopback origin is used only with the development key. The user approves on the page
  :class:`~soklet_apps.link_page.LinkPage` serves (``soklet serve`` mounts it at ``/link/``); the retry with
  ``accept`` then links, once, and only for the same caller. Pending links are capped per partition
  (:data:`~soklet_apps.link_page.MAX_PENDING_LINKS_PER_PARTITION`): a partition at its cap gets a tool error
  naming it, and no other partition notices; a decline or cancel frees its link's place at once.
* ``deploy.approve`` — a multi-round approval that carries its own step counter and deadline in its state.
* ``order.checkout`` (only when :func:`build_registry` is given a durable store) — the spec's durable
  APPLICATION_PROTECTED workflow: round 1 asks for a quantity, round 2 for a confirmation, then the order is
  placed. The authoritative state lives in a :class:`~soklet_core.mcp.HandleRepository` over the store; the client
  holds only an opaque handle as its ``requestState``, rotated on every accepted retry (the old one is refused
  from then on) and consumed without a replacement by the final answer. Any instance reaching the same store
  can take the next retry; a handle of another caller, or one that is stale, gets the one fixed refusal and
  consumes nothing.

A missing answer, or an ``accept`` of the wrong shape (fields missing, added or of the wrong type; for
``account.link`` an accept before the page was completed), gets the same request again with the state kept, as
the elicitation rules ask: it is not an error ending. The framework's round limit bounds how often.

The first three handlers are plain ``def`` functions that never block (no I/O, no sleeps; the link store's lock is
held for a dictionary update), so each is registered with ``blocking=False`` and runs on the event loop;
``order.checkout`` is an ``async def`` that awaits its store.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Final

from soklet_core.json import JsonNumber, JsonObject, JsonString, JsonValue
from soklet_core.mcp import (
    CallToolResult,
    HandleRepository,
    InputRequest,
    InputRequestDeclaration,
    InputRequiredResult,
    InputRequirement,
    Registry,
    RequestContext,
    RequestStateMode,
    form_request,
    tool,
    url_request,
)
from soklet_core.mcp.model import (
    AcceptOutcomeKind,
    InputRequestType,
    ToolRegistration,
    boolean_field,
    expect_accept,
    may_request_input,
    number_field,
    url_with_handle,
)
from soklet_core.store import DurableStore

from .link_page import LINK_LIFETIME_SECONDS, MAX_PENDING_LINKS_PER_PARTITION, LinkRefusal, LinkStatus, LinkStore

__all__ = [
    "APPROVAL_DEADLINE_SECONDS",
    "DEFAULT_LINK_BASE_URL",
    "FORM",
    "MAX_ORDER_QUANTITY",
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
_WAITING: Final = JsonObject.builder().put("phase", "waiting-for-approval").build()
_PARTITION_FULL: Final = (
    f"Too many account links are waiting for this caller's partition ({MAX_PENDING_LINKS_PER_PARTITION}); "
    f"complete or decline one, or wait until one expires ({LINK_LIFETIME_SECONDS // 60} minutes), then try again."
)
#: The most items ``order.checkout`` takes in one order.
MAX_ORDER_QUANTITY: Final = 99


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
    if outcome.kind is AcceptOutcomeKind.DECLINED:
        return CallToolResult.from_text("Catalog access was declined.")
    if outcome.kind is AcceptOutcomeKind.CANCELLED:
        return CallToolResult.from_text("Catalog access was cancelled.")
    if not outcome.ok:  # missing or wrong-shaped: ask again, keeping the phase
        return (
            InputRequiredResult.with_input_request("approval", _APPROVAL)
            .framework_request_state(protected_state)
            .build()
        )
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


def _link_tool(base_url: str, development: bool, store: LinkStore) -> ToolRegistration:
    def ask(handle: str) -> InputRequiredResult:
        url = url_with_handle(base_url, handle, development=development)
        request = url_request(URL, "Open this page to link your account.", url, development=development)
        return (
            InputRequiredResult.with_input_request("link", request)
            .framework_request_state(JsonObject.builder().put("handle", handle).build())
            .build()
        )

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
            if handle is LinkRefusal.PARTITION_FULL:
                return CallToolResult.error_text(_PARTITION_FULL)
            if handle is LinkRefusal.STORE_FULL:
                return CallToolResult.error_text("Too many account links are waiting on this server; try again later.")
            return ask(handle)
        handle_value = state.get("handle") if isinstance(state, JsonObject) else None
        if not isinstance(handle_value, JsonString):
            return CallToolResult.error_text("This continuation is not an account link.")
        outcome = expect_accept(context.input_responses.find("link"), {}, allow_extra=False)
        if outcome.is_normal_ending:  # declined or cancelled: the link ends, and frees its place at once
            store.release(handle_value.value, context)
            if outcome.kind is AcceptOutcomeKind.DECLINED:
                return CallToolResult.from_text("Account linking was declined.")
            return CallToolResult.from_text("Account linking was cancelled.")
        if not outcome.ok:  # missing or wrong-shaped: the same URL again
            return ask(handle_value.value)
        # URL-mode accept only says the user agreed to open the page; the server-side record decides.
        status = store.consume(handle_value.value, context)
        if status is LinkStatus.PENDING:  # accepted before the page was completed: ask again
            return ask(handle_value.value)
        if status is LinkStatus.GONE:
            return CallToolResult.error_text("Account linking did not complete; start again.")
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
    if outcome.is_normal_ending or (outcome.ok and outcome.value("approve") is False):
        return CallToolResult.from_text(f"Deployment stopped at stage {step} of {stages}.")
    if not outcome.ok:  # missing or wrong-shaped: the same stage again, state kept
        return (
            InputRequiredResult.with_input_request("stage", _stage_request(step, stages))
            .framework_request_state(state)
            .build()
        )
    if step >= stages:
        done = "The stage is approved" if stages == 1 else f"All {stages} stages approved"
        return CallToolResult.from_text(f"{done}; deploying.")
    return (
        InputRequiredResult.with_input_request("stage", _stage_request(step + 1, stages))
        .framework_request_state(_stage_state(step + 1, stages, deadline))
        .build()
    )


def _quantity_request() -> InputRequest:
    schema = {
        "type": "object",
        "properties": {
            "quantity": {"type": "integer", "title": "Quantity", "minimum": 1, "maximum": MAX_ORDER_QUANTITY}
        },
        "required": ["quantity"],
    }
    return form_request(FORM, "How many items?", schema)


def _items(quantity: int) -> str:
    # An app cannot use the CLI's wording helper (the apps sit below the CLI): "1 item", "2 items".
    return f"{quantity} item" if quantity == 1 else f"{quantity} items"


def _confirm_request(quantity: int) -> InputRequest:
    schema = {
        "type": "object",
        "properties": {"confirm": {"type": "boolean", "title": "Place the order"}},
        "required": ["confirm"],
    }
    return form_request(FORM, f"Place the order for {_items(quantity)}?", schema)


_QUANTITY: Final = _quantity_request()
_QUANTITY_FIELDS: Final = {"quantity": number_field(minimum=1, maximum=MAX_ORDER_QUANTITY, integer=True)}
_CONFIRM_FIELDS: Final = {"confirm": boolean_field()}
_ASK_QUANTITY: Final = JsonObject.builder().put("step", "quantity").build()


def _text(value: JsonValue | None) -> str | None:
    return value.value if isinstance(value, JsonString) else None


def _confirm_state(quantity: int) -> JsonObject:
    return JsonObject.builder().put("step", "confirm").put("quantity", quantity).build()


def _asking(key: str, request: InputRequest, handle: str | None) -> InputRequiredResult:
    """The public application-state form: the request, and the fresh handle as ``requestState``."""
    assert handle is not None  # a replacement state always yields a fresh handle
    return InputRequiredResult.with_input_request(key, request).application_request_state(handle).build()


def _checkout_tool(handles: HandleRepository) -> ToolRegistration:
    @tool(
        name="order.checkout",
        description="Place an order in two rounds (quantity, then confirmation); the state is kept server-side.",
        input_schema={"type": "object", "properties": {}},
        input_request_declarations=[FORM],
        request_state_mode=RequestStateMode.APPLICATION_PROTECTED,
    )
    async def order_checkout(context: RequestContext, arguments: JsonObject) -> CallToolResult | InputRequiredResult:
        """Round 1 issues a handle; each retry resumes it, then consumes it (rotating unless finished)."""
        if context.application_request_state is None and not context.input_responses:
            return _asking("quantity", _QUANTITY, await handles.issue(context, _ASK_QUANTITY))
        state = await handles.resume(context)  # every refused handle: HandleRejected, nothing consumed
        step = _text(state.get("step")) if isinstance(state, JsonObject) else None
        if step == "quantity":
            outcome = expect_accept(context.input_responses.find("quantity"), _QUANTITY_FIELDS)
            if outcome.is_normal_ending:
                await handles.consume_and_replace(context, None)
                return CallToolResult.from_text("Checkout cancelled.")
            if not outcome.ok:  # missing or wrong-shaped: the same question, under a rotated handle
                return _asking("quantity", _QUANTITY, await handles.consume_and_replace(context, state))
            amount = outcome.value("quantity")
            assert isinstance(amount, Decimal)  # the field rule admits integers only
            fresh = await handles.consume_and_replace(context, _confirm_state(int(amount)))
            return _asking("confirm", _confirm_request(int(amount)), fresh)
        quantity = _int(state.get("quantity")) if isinstance(state, JsonObject) and step == "confirm" else None
        if quantity is None:  # stored by this tool, so never expected; finish rather than loop
            await handles.consume_and_replace(context, None)
            return CallToolResult.error_text("This continuation is not a checkout.")
        outcome = expect_accept(context.input_responses.find("confirm"), _CONFIRM_FIELDS)
        if not outcome.ok and not outcome.is_normal_ending:
            return _asking("confirm", _confirm_request(quantity), await handles.consume_and_replace(context, state))
        # The final answer consumes the handle with no replacement: a replay of it is refused from now on.
        await handles.consume_and_replace(context, None)
        if outcome.is_normal_ending or outcome.value("confirm") is False:
            return CallToolResult.from_text("Order not placed.")
        return CallToolResult.from_text(f"Order placed: {_items(quantity)}.")  # authorize again before side effects

    return order_checkout


def build_registry(
    *,
    link_base_url: str = DEFAULT_LINK_BASE_URL,
    development: bool = False,
    links: LinkStore | None = None,
    store: DurableStore | None = None,
) -> Registry:
    """The demo tools. ``development`` allows a plain-HTTP loopback ``link_base_url`` (dev key only); ``links`` is
    the store ``account.link`` shares with the :class:`~soklet_apps.link_page.LinkPage` serving ``link_base_url``
    (default: a store of its own, so no page can approve its links); ``store``, when given, adds
    ``order.checkout`` with its handles kept there (a fresh registry over the same store continues its
    workflows)."""
    link = _link_tool(link_base_url, development, links if links is not None else LinkStore())
    if store is None:
        return Registry(catalog_continue, link, deploy_approve)
    return Registry(catalog_continue, link, deploy_approve, _checkout_tool(HandleRepository(store)))
