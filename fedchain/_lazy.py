"""Lazy re-exports for package ``__init__`` files.

A package lists its public names and the module each lives in; the module is
imported on first access, so importing the package (and ``fedchain --help``)
stays cheap even when the names pull in torch or web3::

    _EXPORTS = {"Trainer": "trainer", "evaluate": "evaluation"}
    __all__ = sorted(_EXPORTS)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

A module may be named relative to the package ("trainer") or in full
("fedchain.trainer.trainer").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package that re-exports ``exports`` lazily."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = exports[name]
        qualified = module if module.startswith(f"{package}.") else f"{package}.{module}"
        value = getattr(importlib.import_module(qualified), name)
        namespace[name] = value  # later accesses skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
