"""The Python classes of Kafka's messages: one slotted class per struct, built from its spec.

A class holds every field of every version (as Kafka's generated ``*Data`` classes do); a field the
version on the wire lacks keeps its default. Attribute names are Kafka's in snake_case
(``ThrottleTimeMs`` → ``throttle_time_ms``). Classes are mutable so that a broker can build a
response as it goes; the codec checks every value when it encodes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.schema import FieldSpec, StructSpec

ZERO_UUID = uuid.UUID(int=0)


class Struct:
    """Base of every generated message and struct class.

    ``unknown_tags`` keeps tagged fields this codec does not know, as ``(tag, bytes)`` pairs, so
    that a message decoded and encoded again loses nothing.
    """

    __slots__ = ("unknown_tags",)
    #: Field attribute names in Kafka's order.
    FIELDS: ClassVar[tuple[str, ...]] = ()
    #: Kafka's struct name (``MetadataResponseTopic``).
    KAFKA_NAME: ClassVar[str] = ""

    #: Factories of struct-valued defaults, made on first read (decoding a message whose version
    #: lacks, or whose sender left out, a struct field then costs nothing).
    LAZY: ClassVar[dict[str, Callable[[], Struct]]] = {}

    if TYPE_CHECKING:
        unknown_tags: list[tuple[int, bytes]] | None

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    # Fields are generated from Kafka's definitions, so typed code reads them as Any.
    def __getattr__(self, name: str) -> Any:
        factory = type(self).LAZY.get(name)
        if factory is None:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")
        value = factory()
        setattr(self, name, value)
        return value

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.FIELDS) and (
            self.unknown_tags or None
        ) == (other.unknown_tags or None)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.FIELDS)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain data (nested structs as dicts), e.g. for JSON output."""
        return {n: _plain(getattr(self, n)) for n in self.FIELDS}


def _plain(value: object) -> object:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def default_value(spec: FieldSpec, classes: dict[str, type[Struct]]) -> object:
    """A fresh default for ``spec`` (Kafka's rules: ``default`` text, else zero/empty)."""
    text = spec.default
    if text == "null":
        if not spec.may_be_null:
            raise ProtocolError(f"field {spec.name} defaults to null but is never nullable")
        return None
    kind = spec.kind
    if kind in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(text, 0) if text else 0
    if kind == "float64":
        return float(text) if text else 0.0
    if kind == "bool":
        # Kafka's generator reads a bool default ignoring case (DescribeCluster's "False").
        if text.lower() not in ("", "true", "false"):
            raise ProtocolError(f"field {spec.name}: bad bool default {text!r}")
        return text.lower() == "true"
    if kind == "string":
        return text
    if kind == "uuid":
        return ZERO_UUID if not text else uuid.UUID(text)
    if text:
        raise ProtocolError(f"field {spec.name}: a {kind} can only default to empty or null")
    if kind == "bytes":
        return b""
    if kind == "records":
        return None if spec.may_be_null else b""
    if kind == "array":
        return []
    assert spec.struct is not None
    return classes[spec.struct.name]()


def default_source(spec: FieldSpec, classes: dict[str, type[Struct]]) -> tuple[str, object]:
    """How generated code makes the default: ``("const", value)``, ``("fresh", factory)``, or
    ``("lazy", FRESH)`` for a struct the class makes on first read."""
    value = default_value(spec, classes)
    if isinstance(value, Struct):
        return ("lazy", FRESH)
    if isinstance(value, list):
        return ("fresh", list)
    if isinstance(value, Struct):
        return ("fresh", type(value))
    return ("const", value)


def make_classes(structs: dict[str, StructSpec], prefix: str = "") -> dict[str, type[Struct]]:
    """One class per struct, nested structs first so defaults can be built."""
    classes: dict[str, type[Struct]] = {}

    def build(spec: StructSpec) -> type[Struct]:
        if spec.name in classes:
            return classes[spec.name]
        for f in spec.fields:
            if f.struct is not None:
                build(f.struct)
        classes[spec.name] = _make_class(spec, classes)
        return classes[spec.name]

    for spec in structs.values():
        build(spec)
    return classes


def _make_class(spec: StructSpec, classes: dict[str, type[Struct]]) -> type[Struct]:
    names = tuple(f.attr for f in spec.fields)
    namespace: dict[str, object] = {"_FRESH": _FRESH}
    params, body = [], []
    lazy: dict[str, type[Struct]] = {}
    for i, f in enumerate(spec.fields):
        how, value = default_source(f, classes)
        namespace[f"_d{i}"] = value
        if how == "const":
            params.append(f"{f.attr}=_d{i}")
            body.append(f"    self.{f.attr} = {f.attr}")
        else:
            params.append(f"{f.attr}=_FRESH")
            if how == "lazy":
                assert f.struct is not None
                lazy[f.attr] = classes[f.struct.name]
                body.append(f"    if {f.attr} is not _FRESH:\n        self.{f.attr} = {f.attr}")
            else:
                body.append(f"    self.{f.attr} = _d{i}() if {f.attr} is _FRESH else {f.attr}")
    params.append("unknown_tags=None")
    body.append("    self.unknown_tags = unknown_tags")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(compile(source, f"<coordkit.protocol {spec.name}>", "exec"), namespace)
    init: Callable[..., None] = namespace["__init__"]  # type: ignore[assignment]
    attrs: dict[str, object] = {
        "__slots__": names,
        "__init__": init,
        "FIELDS": names,
        "KAFKA_NAME": spec.name,
        "LAZY": lazy,
        "__module__": "coordkit.protocol.messages",
    }
    cls = type(spec.name, (Struct,), attrs)
    for f in spec.fields:
        if f.struct is not None:
            setattr(cls, f.struct.name, classes[f.struct.name])
    return cls


class _Fresh:
    """Marks a default that needs a new object (list, struct) per instance."""

    def __repr__(self) -> str:
        return "<default>"


_FRESH = FRESH = _Fresh()
