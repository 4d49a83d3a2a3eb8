"""Every refusal soklet raises, under one root: :class:`SokletError`.

Each layer raises its own subclass, and most carry one member of a closed reason enum (an :class:`ErrorReason`),
so a caller may catch the whole library, one layer, or switch on one reason::

    SokletError                                     (defined in)                 reason
    ├── TracingSetupError                           soklet_core.tracing_setup    TracingSetupErrorReason
    ├── JsonError (ValueError)                      soklet_core.json             JsonErrorReason
    ├── KeyringError (ValueError)                   soklet_core.keys             KeyringErrorReason
    │   └── KeyInUse
    ├── KeyringFileError                            soklet_core.files            KeyringFileErrorReason
    ├── FleetFileError                              soklet_core.files            None (is_io tells file from content)
    ├── ProtectionError                             soklet_core.protection
    │   ├── RequestStateProtectionException         RequestStateProtectionReason (the spec's names: also
    │   │                                           RequestStateProtectionException.Reason)
    │   └── ProtectionUsageError (ValueError)       ProtectionUsageReason
    ├── McpModelError (ValueError)                  soklet_core.mcp.model        McpModelErrorReason
    │   ├── RegistrationError, ArgumentsError, CapabilitiesError, ResultError, RequestContextError
    │   ├── InputRequestError
    │   │   └── FormPolicyViolation
    │   ├── InputRequiredResultError
    │   └── InputResponseError
    ├── McpError                                    soklet_core.mcp.server       its log-reason token (a JSON-RPC
    │                                                                            error for the wire)
    ├── AdmissionRefused                            soklet_core.mcp.server       AdmissionRefusedReason
    ├── MalformedAuthority (ValueError)             soklet_core.mcp.server.http._authority   None
    ├── AdminTokenError (ValueError)                soklet_core.mcp.server       None
    ├── LiveKeyringError                            soklet_core.mcp.server       LiveKeyringRefusal
    ├── SessionsFull                                soklet_core.mcp.server       SessionLimitReason
    ├── TaskError                                   soklet_core.mcp.server.durable   TaskErrorReason
    ├── HandleRejected                              soklet_core.mcp.server.durable   None (its cases are one on purpose)
    ├── ServeError                                  soklet_core.mcp.server       ServeErrorReason
    ├── SnapshotError                               soklet_core.mcp.server       None (soklet_core.fleet exports it)
    ├── StoreError                                  soklet_core.store            StoreErrorReason
    ├── RecordError                                 soklet_core.fleet            None
    ├── RotationLocked                              soklet_core.fleet            None
    ├── RotationRefused (ValueError)                soklet_core.fleet            RotationRefusal
    └── RotationAbort                               soklet_core.fleet            FleetStatus (the verdict)

A class whose ``reason`` is ``None`` says in its docstring why no closed enum fits: its refusals are sentences for
an operator that all mean one thing to a caller.

The subclasses that were ``ValueError`` before the tree existed still are, so ``except ValueError`` keeps working.

Messages are built only from the reason and from values the subclass vouches for (a byte offset, a valid key id,
a path the operator named), never from key material, tokens or raw input. That rule is each subclass's to keep;
what they share is written once here:

* :class:`ErrorReason` — the base of every reason enum. A member is written ``NAME = "slug", "fixed sentence"``:
  the slug is its value (what logs and ``--json`` output show), the sentence its :attr:`~ErrorReason.description`.
* :class:`SokletError` — ``reason``, the default message ``"<slug>: <sentence>"``, and pickling: an exception is
  rebuilt by calling its class again with its own attributes, one per constructor parameter (keyword-only ones
  included), which ``multiprocessing`` and ``concurrent.futures`` rely on to carry it back from a worker. A pickle
  so holds only what the exception kept (an MCP subject after filtering), never an argument it dropped.
"""

from __future__ import annotations

import enum
import inspect
from typing import Any

__all__ = ["ErrorReason", "SokletError"]


class ErrorReason(enum.Enum):
    """Base of soklet's closed reason enums: each member is ``NAME = "slug", "fixed human sentence"``.

    The slug is the member's value, so ``Reason("slug")`` finds it; the sentence never contains input or secrets.
    """

    _value_: str
    _description: str

    # The default only lets a type checker accept ``Reason("slug")``, which Enum answers by lookup without
    # calling this; a member that omits its sentence is refused as the class is made.
    def __new__(cls, slug: str, description: str = "") -> ErrorReason:
        if not slug or not description:
            raise ValueError(f"{cls.__name__}: a member is written NAME = 'slug', 'sentence'")
        member = object.__new__(cls)
        member._value_ = slug
        member._description = description
        return member

    @property
    def description(self) -> str:
        """A fixed, human sentence for the reason; never contains input or secrets."""
        return self._description


class SokletError(Exception):
    """The root of every refusal soklet raises; ``reason`` is usually a member of a closed :class:`ErrorReason` enum.

    A subclass passes its own ``message`` when it has more to say than the reason (an offset, a key id, a path);
    it must build that message only from values that cannot carry a secret or raw input. A subclass without a
    closed reason enum says why in its docstring and what its ``reason`` holds instead.

    Pickling asks one thing of a subclass: each parameter of its constructor is readable as the attribute of the
    same name, holding a value the constructor accepts back.
    """

    __slots__ = ("reason",)

    reason: Any

    def __init__(self, reason: Any, message: str | None = None) -> None:
        self.reason = reason
        super().__init__(message if message is not None else f"{reason.value}: {reason.description}")

    def __reduce__(self) -> tuple[Any, ...]:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        if type(self).__init__ is SokletError.__init__:
            # This constructor keeps its message only as the exception's text.
            args = [self.reason, str(self)]
        else:
            for name, keyword_only in _parameters(type(self)):
                if keyword_only:
                    kwargs[name] = getattr(self, name)
                else:
                    args.append(getattr(self, name))
        # BaseException keeps added notes (and any attribute of a class without __slots__) in __dict__.
        state = self.__dict__ or None
        return (_rebuild, (type(self), tuple(args), kwargs), state)


def _parameters(cls: type[SokletError]) -> tuple[tuple[str, bool], ...]:
    """``cls``'s constructor parameters after ``self``, each as (name, keyword-only)."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    for parameter in parameters:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            # *args/**kwargs name no attribute to rebuild from; the test of every error class catches this.
            raise TypeError(f"{cls.__qualname__} takes *args or **kwargs and cannot be pickled")
    return tuple((parameter.name, parameter.kind is inspect.Parameter.KEYWORD_ONLY) for parameter in parameters)


def _rebuild(cls: type[SokletError], args: tuple[Any, ...], kwargs: dict[str, Any]) -> SokletError:
    return cls(*args, **kwargs)
