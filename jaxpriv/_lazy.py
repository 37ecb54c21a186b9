"""Lazy package attributes (PEP 562): ``import jaxpriv`` and the command line's argument checks stay
free of JAX; a submodule is imported on first use of one of its names."""

from __future__ import annotations

import importlib
from typing import Callable


def lazy_attributes(package: str, names: dict[str, str]) -> tuple[Callable, Callable]:
    """``__getattr__`` and ``__dir__`` for ``package``; ``names`` maps an attribute to the submodule
    (relative to ``package``) that defines it, or to itself when the attribute is the submodule."""

    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{names[name]}")
        value = module if names[name] == name else getattr(module, name)
        globals_of_package = importlib.import_module(package).__dict__
        globals_of_package[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(importlib.import_module(package).__dict__) | set(names))

    return __getattr__, __dir__
