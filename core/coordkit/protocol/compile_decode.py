"""Compile a message's decoder for one version into Python functions, one per struct.

The generated code reads straight from the frame with precompiled :mod:`struct` unpackers (one per
group of fixed-size fields) and the checked readers of :mod:`coordkit.protocol.wire`. It keeps the
field it is reading in a local (``f``, and ``ix`` inside arrays) so that a failure can name its
path; Python 3.11's exceptions cost nothing until raised, so the fast path pays one store per field.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from coordkit.protocol import wire
from coordkit.protocol.emitter import Emitter
from coordkit.protocol.plan import (
    FIXED_SIZES,
    StructPlan,
    compact,
    element_min_size,
)
from coordkit.protocol.schema import FIXED_FORMATS, FieldSpec, MessageSpec
from coordkit.protocol.structs import FRESH, ZERO_UUID, Struct, default_source

Decoder = Callable[[wire.Buffer, int], tuple[Any, int]]
_Z16 = bytes(16)


class _Emitter(Emitter):
    """Source text and constants for one (message, version) decoder."""

    direction = "decode"

    def __init__(self, classes: dict[str, type[Struct]]) -> None:
        names: dict[str, object] = {
            "Fail": wire.Fail,
            "StructError": struct.error,
            "truncated": wire.truncated,
            "uvarint": wire.read_uvarint,
            "UUID": wire.read_uuid,
            "ZERO_UUID": ZERO_UUID,
            "Z16": _Z16,
            "unpack_from": struct.unpack_from,
            "H": struct.Struct(">h").unpack_from,
            "new": object.__new__,
            "FRESH": FRESH,
        }
        super().__init__(classes, names)
        #: The checked reader of each inlined string field of the struct being compiled.
        self.slow_strings: dict[str, object] = {}

    # -- one struct -------------------------------------------------------------------------

    def struct_source(self, fn: str, plan: StructPlan) -> str:
        outer, self.slow_strings = self.slow_strings, {}
        layouts: dict[str, tuple[tuple[str, str, int], ...]] = {}
        body: list[str] = []
        values: dict[str, str] = {}
        for step in plan.steps:
            first = step.fields[0].attr
            body.append(f"f = {first!r}")
            if step.fixed:
                layouts[first] = step.layout
                unpack = self.const(struct.Struct(step.format).unpack_from, "U")
                targets = [self._var(values, f) for f in step.fields]
                body.append(f"{', '.join(targets)}, = {unpack}(buf, pos)")
                body.append(f"pos += {sum(s for _, _, s in step.layout)}")
                for f, var in zip(step.fields, targets, strict=True):
                    if f.kind == "uuid":
                        body.append(f"{var} = ZERO_UUID if {var} == Z16 else UUID({var})")
            else:
                f = step.fields[0]
                short = compact(f, plan.version, plan.flexible)
                if not short or f.kind == "struct":
                    size = {"string": 2, "struct": 1}.get(f.kind, 4)
                    layouts[first] = ((f.attr, _length_kind(f.kind, short), size),)
                if f.kind == "array" and f.element in ("string", "bytes", "records") and not short:
                    size = 2 if f.element == "string" else 4
                    layouts[first + "[]"] = (("", _length_kind(str(f.element), short), size),)
                body.extend(self._read(f, self._var(values, f), plan))
        if plan.flexible:
            body.extend(self._tagged(plan, values, layouts))
        # Build the object without an __init__ call: object.__new__ and one store per field
        # (half the cost); a struct left at its default stays unset and is made on first read.
        cls = self.const(self.classes[plan.spec.name], "C")
        build = [f"o = new({cls})"]
        tagged = {f.attr for f in plan.tagged}
        for f in plan.spec.fields:
            how, value = default_source(f, self.classes)
            if f.attr in values:
                if how == "lazy" and f.attr in tagged:
                    build.append(f"if {values[f.attr]} is not FRESH:")
                    build.append(f"    o.{f.attr} = {values[f.attr]}")
                else:
                    build.append(f"o.{f.attr} = {values[f.attr]}")
            elif how == "const":
                build.append(f"o.{f.attr} = {self.const(value, 'D')}")
            elif how == "fresh":
                build.append(f"o.{f.attr} = {self.const(value, 'F')}()")
        build.append(f"o.unknown_tags = {'unk' if plan.flexible else 'None'}")
        body += build
        lay = self.const(layouts, "L")
        slow = self.const(self.slow_strings, "S")
        self.slow_strings = outer
        lines = [f"def {fn}(buf, pos):", "    f = ''", "    ix = -1", "    try:"]
        lines += [f"        {line}" for line in body]
        lines += [
            "        return o, pos",
            "    except Fail as e:",
            "        raise e.add(f, ix)",
            "    except UnicodeDecodeError:",
            "        try:",
            f"            {slow}[f](buf, pos)  # raises the Fail that says where",
            "        except Fail as e:",
            "            raise e.add(f, ix) from None",
            "        raise",
            "    except (StructError, IndexError):",
            "        if ix >= 0:",
            f"            raise truncated({lay}.get(f + '[]', (('', 'value', 1),)), buf, pos)"
            ".add(f, ix) from None",
            f"        raise truncated({lay}.get(f, ((f, 'value', 1),)), buf, pos) from None",
        ]
        return "\n".join(lines) + "\n"

    def _var(self, values: dict[str, str], f: FieldSpec) -> str:
        values[f.attr] = f"v{len(values)}"
        return values[f.attr]

    def _tagged(
        self, plan: StructPlan, values: dict[str, str], layouts: dict[str, Any]
    ) -> list[str]:
        layouts[""] = (("tagged fields", "unsigned varint count", 1),)
        lines = ["f = ''", "unk = None"]
        for f in plan.tagged:
            var = self._var(values, f)
            how, value = default_source(f, self.classes)
            default = self.const(value, "D") if how != "fresh" else f"{self.const(value, 'F')}()"
            lines.append(f"{var} = {default}")
        # The common case, no tagged field present, costs one byte test.
        lines += [
            "if buf[pos] == 0:",
            "    pos += 1",
            "else:",
            *[f"    {line}" for line in self._tag_loop(plan, values, layouts)],
        ]
        return lines

    def _tag_loop(
        self, plan: StructPlan, values: dict[str, str], layouts: dict[str, Any]
    ) -> list[str]:
        lines = [
            "nt, pos = uvarint(buf, pos)",
            "if nt > len(buf) - pos:",
            "    raise Fail(f'{nt} tagged fields exceed the {len(buf) - pos} bytes left')",
            "for _ in range(nt):",
            "    tag, pos = uvarint(buf, pos)",
            "    size, pos = uvarint(buf, pos)",
            "    if size > len(buf) - pos:",
            "        raise Fail(f'tagged field {tag}: size {size} exceeds the {len(buf) - pos}"
            " bytes left')",
            "    end = pos + size",
        ]
        keyword = "if"
        for f in plan.tagged:
            lines.append(f"    {keyword} tag == {f.tag}:")
            lines.append(f"        f = {f.attr!r}")
            if f.kind in FIXED_SIZES:
                layouts[f.attr] = ((f.attr, f.kind, FIXED_SIZES[f.kind]),)
            lines += [f"        {line}" for line in self._read(f, values[f.attr], plan)]
            keyword = "elif"
        unknown = [
            "if unk is None:",
            "    unk = []",
            "unk.append((tag, bytes(buf[pos:end])))",
            "pos = end",
        ]
        if plan.tagged:
            lines.append("    else:")
            lines += [f"        {line}" for line in unknown]
        else:
            lines += [f"    {line}" for line in unknown]
        lines += [
            "    if pos != end:",
            "        raise Fail(f'tagged field {tag}: declared {size} bytes, value took"
            " {pos - end + size}')",
            "    f = ''",
        ]
        return lines

    # -- one field --------------------------------------------------------------------------

    def _read(self, f: FieldSpec, var: str, plan: StructPlan) -> list[str]:
        v, flexible = plan.version, plan.flexible
        short = compact(f, v, flexible)
        null = f.nullable(v)
        kind = f.kind
        if kind in FIXED_SIZES:
            unpack = self.const(struct.Struct(">" + FIXED_FORMATS[kind]).unpack_from, "U")
            lines = [f"{var}, = {unpack}(buf, pos)", f"pos += {FIXED_SIZES[kind]}"]
            if kind == "uuid":
                lines.append(f"{var} = ZERO_UUID if {var} == Z16 else UUID({var})")
            return lines
        if kind == "string":
            # Inline the common case (a short, present string); the reader handles the rest and
            # says what is wrong. Invalid UTF-8 is re-read by it in the struct's handler.
            self.slow_strings[f.attr] = _reader("string", null, short)
            reader = self.const(self.slow_strings[f.attr])
            if short:
                low = 0 if null else 1
                return [
                    "n = buf[pos]",
                    "if 1 <= n < 128 and n <= len(buf) - pos:",
                    f"    {var} = str(buf[pos + 1 : pos + n], 'utf-8')",
                    "    pos += n",
                    *(["elif n == 0:", f"    {var} = None", "    pos += 1"] if low == 0 else []),
                    "else:",
                    f"    {var}, pos = {reader}(buf, pos)",
                ]
            return [
                "n, = H(buf, pos)",
                "if 0 <= n <= len(buf) - pos - 2:",
                f"    {var} = str(buf[pos + 2 : pos + 2 + n], 'utf-8')",
                "    pos += 2 + n",
                "else:",
                f"    {var}, pos = {reader}(buf, pos)",
            ]
        if kind in ("bytes", "records"):
            reader = self.const(_reader("bytes", null, short))
            return [f"{var}, pos = {reader}(buf, pos)"]
        assert f.struct is not None or kind == "array"
        if kind == "struct":
            assert f.struct is not None
            fn = self.struct_fn(f.struct, v, flexible)
            if null:
                return [
                    "m = buf[pos]",
                    "pos += 1",
                    "if m >= 128:",
                    f"    {var} = None",
                    "else:",
                    f"    {var}, pos = {fn}(buf, pos)",
                ]
            return [f"{var}, pos = {fn}(buf, pos)"]
        return self._read_array(f, var, plan, short, null)

    def _read_array(
        self, f: FieldSpec, var: str, plan: StructPlan, short: bool, null: bool
    ) -> list[str]:
        length = self.const(_array_reader(null, short))
        least = element_min_size(f, plan.version, plan.flexible)
        lines = [f"n, pos = {length}(buf, pos, {least})"]
        element = f.element
        if element in FIXED_SIZES and element != "uuid":
            char = FIXED_FORMATS[str(element)]
            fill = [
                f"{var} = list(unpack_from('>%d{char}' % n, buf, pos))",
                f"pos += n * {FIXED_SIZES[str(element)]}",
            ]
        else:
            if element == "struct":
                assert f.struct is not None
                call = f"{self.struct_fn(f.struct, plan.version, plan.flexible)}(buf, pos)"
            elif element == "uuid":
                call = "UUID(bytes(buf[pos:pos + 16])), pos + 16"
            else:
                kind = "string" if element == "string" else "bytes"
                call = f"{self.const(_reader(kind, False, short))}(buf, pos)"
            fill = [
                f"{var} = []",
                f"ap = {var}.append",
                "for ix in range(n):",
                f"    x, pos = {call}",
                "    ap(x)",
                "ix = -1",
            ]
        if null:
            return [*lines, "if n < 0:", f"    {var} = None", "else:", *[f"    {x}" for x in fill]]
        return lines + fill


def _length_kind(kind: str, short: bool) -> str:
    """What a non-fixed field starts with, for the message when the frame ends there."""
    if kind == "struct":
        return "int8 null marker"
    if short:
        return "unsigned varint length"
    return "int16 string length" if kind == "string" else "int32 length"


def _reader(kind: str, nullable: bool, short: bool) -> Callable[..., Any]:
    name = "read_" + ("nullable_" if nullable else "") + ("compact_" if short else "") + kind
    reader: Callable[..., Any] = getattr(wire, name)
    return reader


def _array_reader(nullable: bool, short: bool) -> Callable[..., Any]:
    name = "read_" + ("nullable_" if nullable else "") + ("compact_" if short else "") + "array_len"
    reader: Callable[..., Any] = getattr(wire, name)
    return reader


def compile_decoder(
    spec: MessageSpec, version: int, classes: dict[str, type[Struct]]
) -> tuple[Decoder, str]:
    """The decoder of ``spec`` at ``version`` (``(buf, pos) -> (message, pos)``) and its source."""
    function, source = _Emitter(classes).compile(spec, version)
    return function, source
