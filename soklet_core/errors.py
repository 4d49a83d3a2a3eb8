"""Every refusal soklet raises, under one root: :class:`SokletError`.

Each layer raises its own subclass, and each subclass carries one member of a closed reason enum (an
:class:`ErrorReason`), so a caller may catch the whole library, one layer, or switch on one reason::

    SokletError
    ├── JsonError (ValueError)                      soklet_core.json             JsonErrorReason
    ├── KeyringError (ValueError)                   soklet_core.keys             KeyringErrorReason
    │   └── KeyInUse
    ├── KeyringFileError                            soklet_core.files            KeyringFileErrorReason
    ├── FleetFileError                              soklet_core.files            FleetFileErrorReason
    ├── ProtectionError                             soklet_core.protection
    │   ├── RequestStateProtectionException         RequestStateProtectionReason (the spec's name)
    │   └── ProtectionUsageError (ValueError)       ProtectionUsageReason
    ├── McpModelError (ValueError)                  soklet_core.mcp.model        McpModelErrorReason
    │   ├── RegistrationError, ArgumentsError, CapabilitiesError, ResultError, RequestContextError
    │   ├── InputRequestError
    │   │   └── FormPolicyViolation
    │   ├── InputRequiredResultError
    │   └── InputResponseError
    ├── McpError                                    soklet_core.mcp.server       a JSON-RPC error for the wire
    ├── AdmissionRefused                            soklet_core.mcp.server       AdmissionRefusedReason
    ├── MalformedAuthority (ValueError)             soklet_core.mcp.server
    ├── AdminTokenError (ValueError)                soklet_core.mcp.server
    ├── LiveKeyringError                            soklet_core.mcp.server       LiveKeyringRefusal
    ├── SnapshotError                               soklet_core.fleet
    ├── RecordError                                 soklet_core.fleet
    └── RotationAbort                               soklet_core.fleet

The subclasses that were ``ValueError`` before the tree existed still are, so ``except ValueError`` keeps working.

Messages are built only from the reason and from values the subclass vouches for (a byte offset, a valid key id,
a path the operator named), never from key material, tokens or raw input. That rule is each subclass's to keep;
what they share is written once here:

* :class:`ErrorReason` — the base of every reason enum. A member is written ``NAME = "slug", "fixed sentence"``:
  the slug is its value (what logs and ``--json`` output show), the sentence its :attr:`~ErrorReason.description`.
* :class:`SokletError` — ``reason``, the default message ``"<slug>: <sentence>"``, and pickling: an exception is
  rebuilt from the arguments it was raised with (keyword-only ones included), which ``multiprocessing`` and
  ``concurrent.futures`` rely on to carry it back from a worker.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["ErrorReason", "SokletError"]


class ErrorReason(enum.Enum):
    """Base of soklet's closed reason enums: each member is ``NAME = "slug", "fixed human sentence"``.

    The slug is the member's value, so ``Reason("slug")`` finds it; the sentence never contains input or secrets.
    """

    _description: str

    def __new__(cls, slug: str, description: str) -> ErrorReason:
        member = object.__new__(cls)
        member._value_ = slug
        member._description = description
        return member

    @property
    def description(self) -> str:
        """A fixed, human sentence for the reason; never contains input or secrets."""
        return self._description


class SokletError(Exception):
    """The root of every refusal soklet raises; ``reason`` is a member of a closed :class:`ErrorReason` enum.

    A subclass passes its own ``message`` when it has more to say than the reason (an offset, a key id, a path);
    it must build that message only from values that cannot carry a secret or raw input.
    """

    __slots__ = ("_arguments", "reason")

    reason: Any
    _arguments: tuple[tuple[Any, ...], dict[str, Any]]

    def __new__(cls, *args: Any, **kwargs: Any) -> SokletError:
        error = super().__new__(cls, *args)
        # Kept to rebuild the exception when it is pickled (see __reduce__); subclasses take keyword-only
        # arguments, which the default exception pickling drops.
        error._arguments = (args, kwargs)
        return error

    def __init__(self, reason: Any, message: str | None = None) -> None:
        self.reason = reason
        super().__init__(message if message is not None else f"{reason.value}: {reason.description}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        args, kwargs = self._arguments
        return (_rebuild, (type(self), args, kwargs))


def _rebuild(cls: type[SokletError], args: tuple[Any, ...], kwargs: dict[str, Any]) -> SokletError:
    return cls(*args, **kwargs)
