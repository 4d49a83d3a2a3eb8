"""``ClientCapabilities``: what one request's client declared, and what an operation still needs from it.

Every 2026-07-28 request carries its capabilities in ``params._meta["io.modelcontextprotocol/clientCapabilities"]``;
nothing is inherited from earlier requests. A capability *requirement* is itself a ``ClientCapabilities``
object (``{"elicitation":{"url":{}}}``), so the ``-32021`` error's ``data.requiredCapabilities`` is exactly what
:meth:`ClientCapabilities.missing` returns::

    declared = ClientCapabilities.from_mapping({"elicitation": {}})
    needed = [ClientCapabilities.from_mapping({"elicitation": {"url": {}}}),
              ClientCapabilities.from_mapping({"sampling": {}})]
    declared.missing(needed).to_wire()   # {"elicitation":{"url":{}},"sampling":{}}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from soklet_core.json import JsonObject, JsonValue, serialize
from soklet_core.protocol import CLIENT_CAPABILITIES_META_KEY

from .errors import CapabilitiesError, McpModelErrorReason

__all__ = ["CLIENT_CAPABILITIES_META_KEY", "ClientCapabilities"]

# Members whose values the schema types as objects; anything else a client sends is kept but not interpreted.
_OBJECT_MEMBERS: Final = ("elicitation", "sampling", "roots", "experimental", "extensions")
_NESTED_OBJECT_MEMBERS: Final = {"elicitation": ("form", "url"), "sampling": ("context", "tools")}
_MAP_OF_OBJECTS: Final = ("extensions", "experimental")


@dataclass(frozen=True, slots=True)
class ClientCapabilities:
    """An immutable client-capabilities object, kept exactly as declared.

    ``ClientCapabilities(json_object)``, or :meth:`from_json`, :meth:`from_mapping`, :meth:`from_meta` or
    :meth:`empty`. The known members (``elicitation``, ``sampling``, ``roots``, ``experimental``,
    ``extensions``, and ``elicitation.form|url``, ``sampling.context|tools``, each extension) must be objects,
    :class:`CapabilitiesError` otherwise; unknown members are kept unchanged. Equality is JSON equality of the
    object (member order ignored).

    Elicitation follows the wire rule that ``{"elicitation":{}}`` means form mode only: it satisfies a
    ``{"elicitation":{"form":{}}}`` requirement but not ``{"elicitation":{"url":{}}}``.
    """

    value: JsonObject

    def __post_init__(self) -> None:
        value = self.value
        if not isinstance(value, JsonObject):
            raise CapabilitiesError(McpModelErrorReason.INVALID_CAPABILITIES)
        for name in _OBJECT_MEMBERS:
            member = value.get(name)
            if member is not None and not isinstance(member, JsonObject):
                raise CapabilitiesError(McpModelErrorReason.INVALID_CAPABILITIES, name)
        for name, nested in _NESTED_OBJECT_MEMBERS.items():
            member = value.get(name)
            if not isinstance(member, JsonObject):
                continue
            for inner in nested:
                if inner in member and not isinstance(member[inner], JsonObject):
                    raise CapabilitiesError(McpModelErrorReason.INVALID_CAPABILITIES, f"{name}.{inner}")
        for name in _MAP_OF_OBJECTS:
            member = value.get(name)
            assert member is None or isinstance(member, JsonObject)
            if member is not None and not all(isinstance(item, JsonObject) for item in member.values()):
                raise CapabilitiesError(McpModelErrorReason.INVALID_CAPABILITIES, name)

    @classmethod
    def empty(cls) -> ClientCapabilities:
        """``{}``: a client that declared no capability."""
        return _EMPTY

    @classmethod
    def from_json(cls, value: JsonValue) -> ClientCapabilities:
        """Capabilities from any JSON value, checked as ``ClientCapabilities(value)`` checks them: raises
        :class:`CapabilitiesError` unless it is a well-formed object."""
        return cls(value)  # type: ignore[arg-type]  # the constructor refuses a non-object

    @classmethod
    def from_mapping(cls, capabilities: Mapping[str, Any]) -> ClientCapabilities:
        """Capabilities from plain Python data, e.g. ``{"elicitation": {"form": {}}}``."""
        return cls.from_json(JsonObject.from_mapping(capabilities))

    @classmethod
    def from_meta(cls, meta: JsonValue) -> ClientCapabilities:
        """The capabilities in a request's ``params._meta``; raises :class:`CapabilitiesError` when absent."""
        if not isinstance(meta, JsonObject) or CLIENT_CAPABILITIES_META_KEY not in meta:
            raise CapabilitiesError(McpModelErrorReason.INVALID_CAPABILITIES, CLIENT_CAPABILITIES_META_KEY)
        return cls.from_json(meta[CLIENT_CAPABILITIES_META_KEY])

    @classmethod
    def merged(cls, capabilities: Iterable[ClientCapabilities]) -> ClientCapabilities:
        """One object holding every member of every item (objects merged deeply, first leaf value wins)."""
        members: dict[str, JsonValue] = {}
        for item in capabilities:
            _merge_into(members, item.value)
        return cls.from_json(JsonObject.from_mapping(members)) if members else _EMPTY

    def to_wire(self) -> JsonObject:
        """The JSON object, exactly as declared."""
        return self.value

    def satisfies(self, required: ClientCapabilities | Iterable[ClientCapabilities]) -> bool:
        """Whether every requirement is declared (see :meth:`missing`)."""
        return self.missing(required) is None

    def missing(self, required: ClientCapabilities | Iterable[ClientCapabilities]) -> ClientCapabilities | None:
        """The part of ``required`` this client did not declare, as one merged object; ``None`` if nothing is
        missing.

        A requirement member that is an object is met by a declared object at the same path that meets each of
        its members in turn (so ``{}`` is met by any object); a member that is not an object must be declared
        with an equal value. Several requirements are merged into one object, which is the ``-32021`` error's
        ``requiredCapabilities``: all missing capabilities are reported at once.
        """
        items = (required,) if isinstance(required, ClientCapabilities) else tuple(required)
        gaps = [gap for item in items if (gap := _missing(item.value, self.value, top=True))]
        if not gaps:
            return None
        return ClientCapabilities.merged(ClientCapabilities.from_json(JsonObject.from_mapping(gap)) for gap in gaps)

    # Convenience views for handlers that branch on what the client can do.

    @property
    def elicitation_form(self) -> bool:
        """Whether form-mode elicitation is declared (``elicitation: {}`` counts as form)."""
        return self.satisfies(_FORM)

    @property
    def elicitation_url(self) -> bool:
        """Whether URL-mode elicitation is declared."""
        return self.satisfies(_URL)

    @property
    def sampling(self) -> bool:
        """Whether sampling is declared."""
        return self.satisfies(_SAMPLING)

    @property
    def roots(self) -> bool:
        """Whether roots is declared."""
        return self.satisfies(_ROOTS)

    def has_extension(self, name: str) -> bool:
        """Whether ``capabilities.extensions[name]`` is declared (e.g. ``io.modelcontextprotocol/tasks``)."""
        extensions = self.value.get("extensions")
        return isinstance(extensions, JsonObject) and name in extensions

    def __repr__(self) -> str:
        return f"ClientCapabilities({serialize(self.value)})"


def _effective_elicitation(declared: JsonObject) -> JsonObject:
    # The wire rule: an elicitation object naming neither mode means form only.
    if "form" in declared or "url" in declared:
        return declared
    return JsonObject.from_mapping({**declared, "form": JsonObject.empty_instance()})


def _missing(required: JsonObject, declared: JsonObject, *, top: bool) -> dict[str, JsonValue]:
    gap: dict[str, JsonValue] = {}
    for name, wanted in required.items():
        have = declared.get(name)
        if isinstance(wanted, JsonObject):
            if not isinstance(have, JsonObject):
                gap[name] = wanted
                continue
            if top and name == "elicitation":
                have = _effective_elicitation(have)
            inner = _missing(wanted, have, top=False)
            if inner:
                gap[name] = JsonObject.from_mapping(inner)
        elif have != wanted:
            gap[name] = wanted
    return gap


def _merge_into(target: dict[str, JsonValue], source: JsonObject) -> None:
    for name, value in source.items():
        current = target.get(name)
        if current is None:
            target[name] = value
        elif isinstance(current, JsonObject) and isinstance(value, JsonObject):
            combined: dict[str, JsonValue] = dict(current)
            _merge_into(combined, value)
            target[name] = JsonObject.from_mapping(combined)


_EMPTY: Final = ClientCapabilities(JsonObject.empty_instance())
_FORM: Final = ClientCapabilities.from_mapping({"elicitation": {"form": {}}})
_URL: Final = ClientCapabilities.from_mapping({"elicitation": {"url": {}}})
_SAMPLING: Final = ClientCapabilities.from_mapping({"sampling": {}})
_ROOTS: Final = ClientCapabilities.from_mapping({"roots": {}})
