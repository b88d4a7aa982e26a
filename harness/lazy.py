"""Package names that load on first use (PEP 562), so a command imports only the modules it
touches (a `harness push` neither the runtime resolver nor ctypes). One table per package:
module -> the names it defines; a module given as `harness.x` is taken whole, others are the
package's own submodules. Type checkers see the names through the package's TYPE_CHECKING imports
only: a face calls this under `if not TYPE_CHECKING:`, so a misspelled name fails mypy, not passes as
Any (tests/house/test_types_hold.py)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_names(package: str, home: Mapping[str, tuple[str, ...]]
               ) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """(__getattr__, __dir__, __all__) for `package`: a name is imported from its module on first
    use and kept in the package's namespace, so the next use is a plain attribute."""
    module_of = {name: module for module, names in home.items() for name in names}
    public = sorted(module_of)

    def getattr_(name: str) -> object:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        where = module if module.startswith("harness.") else f"{package}.{module}"
        value = getattr(importlib.import_module(where), name)
        vars(sys.modules[package])[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(public))

    return getattr_, dir_, public


__all__ = ["lazy_names"]
