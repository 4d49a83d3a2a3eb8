"""A package's public names, each imported from its own module on first use (PEP 562).

A command that needs one name of a package then pays for that name's module alone, not for every module the
package re-exports (the CLI's start-up, for one, stays small). Each package keeps its ``__all__`` and a
``TYPE_CHECKING`` import block for type checkers, and hands its name → module map to :func:`lazy_exports`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: MutableMapping[str, object], exports: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``, whose globals are ``namespace``.

    ``exports`` maps each exported name to the relative module that defines it. A name is imported on its first
    use and then kept in ``namespace``, so later uses are plain global lookups.
    """

    def attribute(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return attribute, names
