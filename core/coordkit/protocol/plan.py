"""What one struct looks like on the wire at one version: the layout both compilers follow.

Consecutive fixed-size fields become one group, read or written with a single :mod:`struct`
call (``>hiiq``); everything else is one step per field. Tagged fields go in the struct's tagged
section (flexible versions only), and fields the version lacks are listed so that the encoder can
refuse a non-default value in a field that is not ``ignorable`` (as Kafka's generated code does).
"""

from __future__ import annotations

from attrs import frozen

from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.schema import FIXED_FORMATS, FieldSpec, StructSpec

FIXED_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
               "int64": 8, "float64": 8, "uuid": 16}  # fmt: skip


@frozen
class Step:
    """A group of fixed-size fields (``fixed`` is true), or one other field."""

    fields: tuple[FieldSpec, ...]
    fixed: bool

    @property
    def format(self) -> str:
        return ">" + "".join(FIXED_FORMATS[f.kind] for f in self.fields)

    @property
    def layout(self) -> tuple[tuple[str, str, int], ...]:
        return tuple((f.attr, f.kind, FIXED_SIZES[f.kind]) for f in self.fields)


@frozen
class StructPlan:
    spec: StructSpec
    version: int
    flexible: bool
    steps: tuple[Step, ...]
    tagged: tuple[FieldSpec, ...]
    absent: tuple[FieldSpec, ...]


def plan_struct(spec: StructSpec, version: int, flexible: bool) -> StructPlan:
    steps: list[Step] = []
    group: list[FieldSpec] = []
    tagged: list[FieldSpec] = []
    absent: list[FieldSpec] = []
    for f in spec.fields:
        if not f.present(version):
            absent.append(f)
            continue
        if f.tagged(version):
            if not flexible:
                raise ProtocolError(f"{spec.name}.{f.name} is tagged in v{version}, not flexible")
            tagged.append(f)
            continue
        if f.kind in FIXED_SIZES:
            group.append(f)
            continue
        if group:
            steps.append(Step(tuple(group), fixed=True))
            group = []
        steps.append(Step((f,), fixed=False))
    if group:
        steps.append(Step(tuple(group), fixed=True))
    tagged.sort(key=lambda f: f.tag or 0)
    return StructPlan(spec, version, flexible, tuple(steps), tuple(tagged), tuple(absent))


def compact(f: FieldSpec, version: int, flexible: bool) -> bool:
    """Whether ``f`` uses the compact (varint) encoding: flexible, unless the field opts out."""
    if not flexible:
        return False
    return f.flexible_versions is None or version in f.flexible_versions


def min_size(f: FieldSpec, version: int, flexible: bool) -> int:
    """The fewest bytes ``f`` takes on the wire (bounds array counts before allocating)."""
    kind = f.kind
    if kind in FIXED_SIZES:
        return FIXED_SIZES[kind]
    short = compact(f, version, flexible)
    if kind == "string":
        return 1 if short else 2
    if kind in ("bytes", "records", "array"):
        return 1 if short else 4
    assert f.struct is not None
    if f.nullable(version):
        return 1
    return struct_min_size(f.struct, version, flexible)


def element_min_size(f: FieldSpec, version: int, flexible: bool) -> int:
    """The fewest bytes one element of array ``f`` takes; at least 1, as Kafka bounds counts."""
    element = f.element
    if element in FIXED_SIZES:
        return FIXED_SIZES[element]
    short = compact(f, version, flexible)
    if element == "string":
        return 1 if short else 2
    if element in ("bytes", "records"):
        return 1 if short else 4
    assert f.struct is not None
    return max(1, struct_min_size(f.struct, version, flexible))


def struct_min_size(spec: StructSpec, version: int, flexible: bool) -> int:
    total = 1 if flexible else 0
    for f in spec.fields:
        if f.present(version) and not f.tagged(version):
            total += min_size(f, version, flexible)
    return total
