"""What the decoder and encoder compilers share: generated source, one function per struct, and the
constants it refers to by name."""

from __future__ import annotations

from typing import Any, ClassVar

from coordkit.protocol.plan import StructPlan, plan_struct
from coordkit.protocol.schema import MessageSpec, StructSpec
from coordkit.protocol.structs import Struct


class Emitter:
    """Source text and constants for one (message, version) function family. Subclasses write one
    struct's function (:meth:`struct_source`) and name their direction (:attr:`direction`)."""

    #: ``decode`` or ``encode``: names the functions (``d_``/``e_``) and the compiled file.
    direction: ClassVar[str]

    def __init__(self, classes: dict[str, type[Struct]], names: dict[str, object]) -> None:
        self.classes = classes
        self.names = names
        self.functions: list[str] = []
        self.done: set[str] = set()
        self.counter = 0

    def const(self, value: object, prefix: str = "K") -> str:
        """A fresh name the generated code uses for ``value``."""
        self.counter += 1
        name = f"{prefix}{self.counter}"
        self.names[name] = value
        return name

    def struct_fn(self, spec: StructSpec, version: int, flexible: bool) -> str:
        """The name of the function for ``spec`` (written once per struct)."""
        name = f"{self.direction[0]}_{spec.name}"
        if name not in self.done:
            self.done.add(name)
            self.functions.append(self.struct_source(name, plan_struct(spec, version, flexible)))
        return name

    def struct_source(self, fn: str, plan: StructPlan) -> str:
        raise NotImplementedError

    def compile(self, spec: MessageSpec, version: int) -> tuple[Any, str]:
        """The message's function at ``version`` and the source it was compiled from."""
        entry = self.struct_fn(spec.struct, version, spec.flexible(version))
        source = "\n".join(reversed(self.functions))
        namespace = dict(self.names)
        where = f"<coordkit.protocol {self.direction} {spec.name} v{version}>"
        exec(compile(source, where, "exec"), namespace)
        return namespace[entry], source
