"""A package's public names in its ``__init__`` without importing its modules (PEP 562).

``from structpe.adapters import add_sipe`` should work, but most modules import torch or
transformers (seconds) and ``import structpe.<package>`` must stay cheap (the CLI's start-up, the
data layer): a package lists where each public name lives, and the module is imported when the name
is first asked for.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, names: dict[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``: ``names`` maps a module (relative to the
    package) to the public names it defines. A name is cached on the package once looked up."""
    where = {name: module for module, defined in names.items() for name in defined}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__, list(where)
