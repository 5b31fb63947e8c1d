"""Lazy imports for packages whose heavy modules (torch, transformers, lightning, ray) should load only when used."""
from __future__ import annotations

from importlib import import_module
from typing import Any, Callable


def lazy_exports(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``names[attr]`` (a module path) on first access of ``attr``.

    Use as ``__getattr__ = lazy_exports(__name__, {"Thing": "pkg.heavy_module"})``.
    """
    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def lazy_function(target: str) -> Callable[..., Any]:
    """A function that imports ``"module:function"`` when first called and calls it (keeps registries light)."""
    module, _, function = target.partition(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(import_module(module), function)(*args, **kwargs)

    call.__name__ = call.__qualname__ = function
    call.__doc__ = f"Imports {module} and calls its {function}."
    return call
