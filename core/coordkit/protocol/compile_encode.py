"""Compile a message's encoder for one version into Python functions, one per struct.

The generated code appends to one ``bytearray``: each group of fixed-size fields is a single
precompiled ``pack`` of attribute reads, strings and arrays go through the checked writers of
:mod:`coordkit.protocol.wire`. A value that cannot be encoded (out of range, wrong type, null where
the version forbids it, a non-default value in a field the version lacks and Kafka does not let
you ignore) fails with its field path.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from coordkit.protocol import wire
from coordkit.protocol.emitter import Emitter
from coordkit.protocol.plan import FIXED_SIZES, StructPlan, compact
from coordkit.protocol.schema import FIXED_FORMATS, FieldSpec, MessageSpec
from coordkit.protocol.structs import Struct, default_value

Encoder = Callable[[bytearray, Any], None]


def _bad_value(layouts: dict[str, Any], f: str, o: Any, error: Exception) -> wire.Fail:
    """Which fixed-size value would not pack (only runs once encoding has failed)."""
    if f in layouts:
        fmt, layout = layouts[f]
        values = [getattr(o, name) for name, _, _ in layout]
        values = [v.bytes if kind == "uuid" and hasattr(v, "bytes") else v
                  for v, (_, kind, _) in zip(values, layout, strict=True)]  # fmt: skip
        return wire.bad_fixed_value(layout, fmt, values)
    return wire.Fail(f"cannot encode: {error}").add(f, -1)


class _Emitter(Emitter):
    """Source text and constants for one (message, version) encoder."""

    direction = "encode"

    def __init__(self, classes: dict[str, type[Struct]]) -> None:
        names: dict[str, object] = {
            "Fail": wire.Fail,
            "StructError": struct.error,
            "bad_value": _bad_value,
            "write_array_len": wire.write_array_len,
            "write_tags": wire.write_tags,
            "write_uuid": wire.write_uuid,
            "pack": struct.pack,
        }
        super().__init__(classes, names)

    # -- one struct -------------------------------------------------------------------------

    def struct_source(self, fn: str, plan: StructPlan) -> str:
        layouts: dict[str, tuple[str, tuple[tuple[str, str, int], ...]]] = {}
        body: list[str] = []
        for step in plan.steps:
            first = step.fields[0].attr
            body.append(f"f = {first!r}")
            if step.fixed:
                layouts[first] = (step.format, step.layout)
                packer = self.const(struct.Struct(step.format).pack, "P")
                args = [
                    f"write_uuid(o.{f.attr})" if f.kind == "uuid" else f"o.{f.attr}"
                    for f in step.fields
                ]
                body.append(f"w += {packer}({', '.join(args)})")
            else:
                f = step.fields[0]
                body.extend(self._write(f, "w", f"o.{f.attr}", plan))
        version = plan.version
        for f in plan.absent:
            if f.ignorable:
                continue
            body.append(f"f = {f.attr!r}")
            body.append(f"v = {self._read(plan, f)}")
            body.append(f"if {self._differs(f, 'v')}:")
            body.append(
                f"    raise Fail('field {f.attr} is not in version {version} and not ignorable')"
            )
        if plan.flexible:
            body.extend(self._tagged(plan))
        lay = self.const(layouts, "L")
        body = body or ["pass"]
        lines = [f"def {fn}(w, o):", "    f = ''", "    ix = -1", "    try:"]
        lines += [f"        {line}" for line in body]
        lines += [
            "    except Fail as e:",
            "        raise e.add(f, ix)",
            "    except StructError as e:",
            "        if ix >= 0:",
            "            raise Fail(f'cannot encode: {e}').add(f, ix) from None",
            f"        raise bad_value({lay}, f, o, e) from None",
            "    except (AttributeError, TypeError):",
            f"        raise Fail(f'expected a {plan.spec.name}, got {{type(o).__name__}}')"
            " from None",
        ]
        return "\n".join(lines) + "\n"

    def _read(self, plan: StructPlan, f: FieldSpec) -> str:
        """How to read field ``f`` of ``o``; a struct left at its default reads as None (instead
        of being made on first read, see ``Struct.LAZY``) and :meth:`_differs` takes that as
        the default."""
        if f.attr in self.classes[plan.spec.name].LAZY:
            return f"{self.const(_slot_reader(self.classes[plan.spec.name], f.attr), 'R')}(o)"
        return f"o.{f.attr}"

    def _differs(self, f: FieldSpec, expr: str) -> str:
        """A test that ``expr`` is not ``f``'s default (what decides writing a tagged field)."""
        default = default_value(f, self.classes)
        if isinstance(default, Struct):
            return f"{expr} is not None and {expr} != {self.const(default, 'D')}"
        if default is None:
            return f"{expr} is not None"
        if isinstance(default, list):
            return f"{expr}"
        if isinstance(default, bytes):
            return f"{expr} is None or len({expr}) > 0"
        return f"{expr} != {self.const(default, 'D')}"

    def _tagged(self, plan: StructPlan) -> list[str]:
        if not plan.tagged:
            return [
                "f = 'unknown_tags'",
                "u = o.unknown_tags",
                "if u:",
                "    write_tags(w, list(u))",
                "else:",
                "    w.append(0)",
            ]
        lines = ["tg = []"]
        for f in plan.tagged:
            lines += [
                f"f = {f.attr!r}",
                f"v = {self._read(plan, f)}",
                f"if {self._differs(f, 'v')}:",
                "    t = bytearray()",
                *[f"    {line}" for line in self._write(f, "t", "v", plan)],
                f"    tg.append(({f.tag}, t))",
            ]
        lines += [
            "f = 'unknown_tags'",
            "u = o.unknown_tags",
            "if u:",
            "    tg.extend(u)",
            "if tg:",
            "    write_tags(w, tg)",
            "else:",
            "    w.append(0)",
        ]
        return lines

    # -- one field --------------------------------------------------------------------------

    def _write(self, f: FieldSpec, out: str, value: str, plan: StructPlan) -> list[str]:
        v, flexible = plan.version, plan.flexible
        short = compact(f, v, flexible)
        null = f.nullable(v)
        kind = f.kind
        if kind in FIXED_SIZES:
            packer = self.const(struct.Struct(">" + FIXED_FORMATS[kind]).pack, "P")
            arg = f"write_uuid({value})" if kind == "uuid" else value
            return [f"{out} += {packer}({arg})"]
        if kind in ("string", "bytes", "records"):
            writer = self.const(_writer("string" if kind == "string" else "bytes", null, short))
            return [f"{writer}({out}, {value})"]
        if kind == "struct":
            assert f.struct is not None
            fn = self.struct_fn(f.struct, v, flexible)
            if null:
                return [
                    f"if {value} is None:",
                    f"    {out}.append(255)",
                    "else:",
                    f"    {out}.append(1)",
                    f"    {fn}({out}, {value})",
                ]
            return [f"if {value} is None:", "    raise Fail('null struct, not allowed')",
                    f"{fn}({out}, {value})"]  # fmt: skip
        lines = [f"items = write_array_len({out}, {value}, {null}, {short})"]
        element = f.element
        if element in FIXED_SIZES and element != "uuid":
            char = FIXED_FORMATS[str(element)]
            return [*lines, f"{out} += pack('>%d{char}' % len(items), *items)"]
        if element == "struct":
            assert f.struct is not None
            call = f"{self.struct_fn(f.struct, v, flexible)}({out}, x)"
        elif element == "uuid":
            call = f"{out} += write_uuid(x)"
        else:
            kind = "string" if element == "string" else "bytes"
            call = f"{self.const(_writer(kind, False, short))}({out}, x)"
        return [*lines, "for ix, x in enumerate(items):", f"    {call}", "ix = -1"]


def _slot_reader(cls: type[Struct], attr: str) -> Callable[[Any], Any]:
    """Reads a field's slot without making its lazy default (None when unset)."""
    get = cls.__dict__[attr].__get__

    def read(o: Any) -> Any:
        try:
            return get(o)
        except AttributeError:
            return None

    return read


def _writer(kind: str, nullable: bool, short: bool) -> Callable[..., Any]:
    name = "write_" + ("nullable_" if nullable else "") + ("compact_" if short else "") + kind
    writer: Callable[..., Any] = getattr(wire, name)
    return writer


def compile_encoder(
    spec: MessageSpec, version: int, classes: dict[str, type[Struct]]
) -> tuple[Encoder, str]:
    """The encoder of ``spec`` at ``version`` (``(out, message) -> None``) and its source."""
    function, source = _Emitter(classes).compile(spec, version)
    return function, source
