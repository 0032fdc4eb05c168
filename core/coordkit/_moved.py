"""Module paths from before core was grouped by concept (#32), kept importable for code written
against them: ``import coordkit.layout`` gives :mod:`coordkit.kafka.layout` itself (the same
module object, not a copy) with a :class:`DeprecationWarning` naming the new path."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

#: Old name → new name.
MOVED = {
    **{f"coordkit.{n}": f"coordkit.kafka.{n}" for n in ("model", "layout", "coordinators")},
    **{f"coordkit.{n}": f"coordkit.store.{n}" for n in ("paths", "watches", "changefeed", "urls")},
    **{
        f"coordkit.{n}": f"coordkit.strategies.{n}"
        for n in (
            "assignment",
            "assignment_io",
            "elections",
            "partitioning",
            "placement",
            "offsets",
        )
    },
    **{
        f"coordkit.{n}": f"coordkit.support.{n}"
        for n in ("clock", "cputime", "jsontext", "numbers", "terminal")
    },
}


class _MovedModuleLoader(importlib.abc.Loader):
    def __init__(self, new_name: str) -> None:
        self.new_name = new_name
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new_name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(self.new_name)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The new module ran when it was imported: only its own spec is given back (the import
        system set the old name's on it)."""
        module.__spec__ = self._spec


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of :data:`MOVED` (and nothing else)."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new_name = MOVED.get(fullname)
        if new_name is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedModuleLoader(new_name))


def install() -> None:
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
