"""Public names imported on first use (PEP 562), so that importing one layer (or starting the
CLI) pays only for what it uses."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def attributes(package: str, namespace: dict[str, Any], table: dict[str, str]
               ) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports each name of ``table`` (name ->
    defining module) on first use and keeps it in ``namespace`` (the module's globals)."""

    def getattr_(name: str) -> Any:
        if name in table:
            value = getattr(importlib.import_module(table[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return getattr_
