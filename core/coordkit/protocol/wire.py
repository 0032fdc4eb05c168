"""Primitive readers and writers the compiled codecs call, and the error they raise on the way.

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; every length read from the wire is
checked against the bytes left *before* anything is sliced or allocated. Writers append to a
``bytearray``. Failures raise :class:`Fail`, which each compiled struct function extends with its
field name on the way out; the codec turns it into a :class:`ProtocolError`.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Sequence
from typing import Any

Buffer = bytes | bytearray | memoryview

#: Kafka refuses longer strings (``Short.MAX_VALUE``) in every encoding.
MAX_STRING = 0x7FFF
_pack_h = struct.Struct(">h").pack
_pack_i = struct.Struct(">i").pack
_unpack_h = struct.Struct(">h").unpack_from
_unpack_i = struct.Struct(">i").unpack_from


class Fail(Exception):
    """A decode or encode failure on its way out of the nested struct functions."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.parts: list[str] = []

    def add(self, name: str, index: int) -> Fail:
        if name:
            self.parts.append(f"{name}[{index}]" if index >= 0 else name)
        return self

    @property
    def path(self) -> str:
        return ".".join(reversed(self.parts)).replace(".[", "[")


def left(buf: Buffer, pos: int) -> int:
    return len(buf) - pos


def _too_long(what: str, n: int, buf: Buffer, pos: int) -> Fail:
    return Fail(f"{what} length {n} exceeds the {len(buf) - pos} bytes left")


# -- varints ----------------------------------------------------------------------------------


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's ``readUnsignedVarint``), unrolled."""
    try:
        b = buf[pos]
        if b < 0x80:  # lengths and counts under 128: the common case
            return b, pos + 1
        value = b & 0x7F
        b = buf[pos + 1]
        if b < 0x80:
            return value | b << 7, pos + 2
        value |= (b & 0x7F) << 7
        b = buf[pos + 2]
        if b < 0x80:
            return value | b << 14, pos + 3
        value |= (b & 0x7F) << 14
        b = buf[pos + 3]
        if b < 0x80:
            return value | b << 21, pos + 4
        value |= (b & 0x7F) << 21
        b = buf[pos + 4]
    except IndexError:
        raise Fail("unsigned varint truncated") from None
    if b >= 0x80:
        raise Fail("unsigned varint longer than 5 bytes")
    if b > 0x0F:
        raise Fail("unsigned varint exceeds 32 bits")
    return value | b << 28, pos + 5


def write_uvarint(w: bytearray, value: int) -> None:
    if not 0 <= value <= 0xFFFFFFFF:
        raise Fail(f"{value} does not fit an unsigned varint")
    while value >= 0x80:
        w.append((value & 0x7F) | 0x80)
        value >>= 7
    w.append(value)


# -- lengths ----------------------------------------------------------------------------------


def read_array_len(buf: Buffer, pos: int, min_size: int) -> tuple[int, int]:
    """An int32 array count (-1 is null, refused here), checked against the bytes left."""
    (n,) = _unpack_i(buf, pos)
    pos += 4
    if n < 0:
        raise Fail(f"array length {n} is negative")
    if n * min_size > len(buf) - pos:
        raise Fail(
            f"array of {n} entries needs at least {n * min_size} bytes, {len(buf) - pos} left"
        )
    return n, pos


def read_nullable_array_len(buf: Buffer, pos: int, min_size: int) -> tuple[int, int]:
    (n,) = _unpack_i(buf, pos)
    if n == -1:
        return -1, pos + 4
    return read_array_len(buf, pos, min_size)


def read_compact_array_len(buf: Buffer, pos: int, min_size: int) -> tuple[int, int]:
    if pos < len(buf) and 0 < buf[pos] < 0x80 and (buf[pos] - 1) * min_size < len(buf) - pos:
        return buf[pos] - 1, pos + 1
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise Fail("array is null, which this version does not allow")
    n -= 1
    if n * min_size > len(buf) - pos:
        raise Fail(
            f"array of {n} entries needs at least {n * min_size} bytes, {len(buf) - pos} left"
        )
    return n, pos


def read_nullable_compact_array_len(buf: Buffer, pos: int, min_size: int) -> tuple[int, int]:
    if pos < len(buf) and buf[pos] == 0:
        return -1, pos + 1
    return read_compact_array_len(buf, pos, min_size)


# -- strings and bytes ------------------------------------------------------------------------


def _text(buf: Buffer, pos: int, n: int) -> str:
    if n > len(buf) - pos:
        raise _too_long("string", n, buf, pos)
    if n > MAX_STRING:
        raise Fail(f"string length {n} exceeds Kafka's limit of {MAX_STRING}")
    try:
        return str(buf[pos : pos + n], "utf-8")
    except UnicodeDecodeError as e:
        raise Fail(f"invalid UTF-8 at byte {e.start} of the string") from None


def read_string(buf: Buffer, pos: int) -> tuple[str, int]:
    (n,) = _unpack_h(buf, pos)
    if n < 0:
        raise Fail(f"string length {n} is negative" if n != -1 else "string is null, not allowed")
    return _text(buf, pos + 2, n), pos + 2 + n


def read_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    (n,) = _unpack_h(buf, pos)
    if n == -1:
        return None, pos + 2
    if n < 0:
        raise Fail(f"string length {n} is negative")
    return _text(buf, pos + 2, n), pos + 2 + n


def read_compact_string(buf: Buffer, pos: int) -> tuple[str, int]:
    if pos < len(buf) and 0 < buf[pos] < 0x80 and buf[pos] <= len(buf) - pos:
        end = pos + buf[pos]
        try:
            return str(buf[pos + 1 : end], "utf-8"), end
        except UnicodeDecodeError:
            pass  # the slow path below says where
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise Fail("string is null, which this version does not allow")
    return _text(buf, pos, n - 1), pos + n - 1


def read_nullable_compact_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    if pos < len(buf) and buf[pos] < 0x80 and buf[pos] <= len(buf) - pos:
        n = buf[pos]
        if n == 0:
            return None, pos + 1
        try:
            return str(buf[pos + 1 : pos + n], "utf-8"), pos + n
        except UnicodeDecodeError:
            pass  # the slow path below says where
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return _text(buf, pos, n - 1), pos + n - 1


def _blob(buf: Buffer, pos: int, n: int) -> bytes:
    if n > len(buf) - pos:
        raise _too_long("bytes", n, buf, pos)
    if type(buf) is memoryview:
        # Decoding from a memoryview gives views: a produce request's records are not copied
        # (they keep the frame alive as long as they are referenced).
        view: bytes = buf[pos : pos + n]  # type: ignore[assignment]
        return view
    return bytes(buf[pos : pos + n])


def read_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    (n,) = _unpack_i(buf, pos)
    if n < 0:
        raise Fail(f"bytes length {n} is negative" if n != -1 else "bytes are null, not allowed")
    return _blob(buf, pos + 4, n), pos + 4 + n


def read_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    (n,) = _unpack_i(buf, pos)
    if n == -1:
        return None, pos + 4
    if n < 0:
        raise Fail(f"bytes length {n} is negative")
    return _blob(buf, pos + 4, n), pos + 4 + n


def read_compact_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise Fail("bytes are null, which this version does not allow")
    return _blob(buf, pos, n - 1), pos + n - 1


def read_nullable_compact_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return _blob(buf, pos, n - 1), pos + n - 1


def read_uuid(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw)


# -- writers ----------------------------------------------------------------------------------


def _utf8(value: object) -> bytes:
    if not isinstance(value, str):
        raise Fail(f"expected a string, got {type(value).__name__}")
    data = value.encode("utf-8", "strict")
    if len(data) > MAX_STRING:
        raise Fail(f"string of {len(data)} bytes exceeds Kafka's limit of {MAX_STRING}")
    return data


def write_string(w: bytearray, value: object) -> None:
    if value is None:
        raise Fail("null string, which this version does not allow")
    data = _utf8(value)
    w += _pack_h(len(data))
    w += data


def write_nullable_string(w: bytearray, value: object) -> None:
    if value is None:
        w += b"\xff\xff"
    else:
        write_string(w, value)


def write_compact_string(w: bytearray, value: object) -> None:
    if value is None:
        raise Fail("null string, which this version does not allow")
    data = _utf8(value)
    n = len(data) + 1
    if n < 0x80:
        w.append(n)
    else:
        write_uvarint(w, n)
    w += data


def write_nullable_compact_string(w: bytearray, value: object) -> None:
    if value is None:
        w.append(0)
    else:
        write_compact_string(w, value)


def _octets(value: object) -> bytes | bytearray | memoryview:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise Fail(f"expected bytes, got {type(value).__name__}")
    return value


def write_bytes(w: bytearray, value: object) -> None:
    if value is None:
        raise Fail("null bytes, which this version does not allow")
    data = _octets(value)
    w += _pack_i(len(data))
    w += data


def write_nullable_bytes(w: bytearray, value: object) -> None:
    if value is None:
        w += b"\xff\xff\xff\xff"
    else:
        write_bytes(w, value)


def write_compact_bytes(w: bytearray, value: object) -> None:
    if value is None:
        raise Fail("null bytes, which this version does not allow")
    data = _octets(value)
    write_uvarint(w, len(data) + 1)
    w += data


def write_nullable_compact_bytes(w: bytearray, value: object) -> None:
    if value is None:
        w.append(0)
    else:
        write_compact_bytes(w, value)


def array_items(value: object) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise Fail(f"expected a list, got {type(value).__name__}")
    return value


def write_array_len(w: bytearray, value: object, nullable: bool, compact: bool) -> Sequence[Any]:
    """Write an array's count; returns the items (empty for null)."""
    if value is None:
        if not nullable:
            raise Fail("null array, which this version does not allow")
        if compact:
            w.append(0)
        else:
            w += b"\xff\xff\xff\xff"
        return ()
    items = array_items(value)
    if compact:
        write_uvarint(w, len(items) + 1)
    else:
        w += _pack_i(len(items))
    return items


def write_uuid(value: object) -> bytes:
    if not isinstance(value, uuid.UUID):
        raise Fail(f"expected a uuid.UUID, got {type(value).__name__}")
    return value.bytes


def write_tags(w: bytearray, tagged: list[tuple[int, bytes | bytearray]]) -> None:
    """The tagged-field section: count, then (tag, size, data) in ascending tag order."""
    tagged.sort(key=lambda t: t[0])
    tags = [t for t, _ in tagged]
    if len(set(tags)) != len(tags):
        raise Fail(f"tagged fields repeat a tag: {tags}")
    write_uvarint(w, len(tagged))
    for tag, data in tagged:
        write_uvarint(w, tag)
        write_uvarint(w, len(data))
        w += data


def truncated(layout: Sequence[tuple[str, str, int]], buf: Buffer, pos: int) -> Fail:
    """The failure for fixed-size fields read at ``pos``: which field ran past the end."""
    remaining = len(buf) - pos
    offset = 0
    for name, kind, size in layout:
        if offset + size > remaining:
            return Fail(f"{kind} needs {size} bytes, {max(remaining - offset, 0)} left").add(
                name, -1
            )
        offset += size
    return Fail(f"frame ends at byte {len(buf)}, inside fixed-size fields")


def bad_fixed_value(
    layout: Sequence[tuple[str, str, int]], fmt: str, values: Sequence[object]
) -> Fail:
    """The failure for fixed-size fields that would not pack: which value, and why."""
    formats = _split_format(fmt)
    for (name, kind, _), f, v in zip(layout, formats, values, strict=True):
        try:
            struct.pack(">" + f, v)
        except struct.error as e:
            return Fail(f"{v!r} is not a valid {kind}: {e}").add(name, -1)
    return Fail(f"values {list(values)!r} do not pack as {fmt}")


def _split_format(fmt: str) -> list[str]:
    return re.findall(r"\d*[a-zA-Z?]", fmt.lstrip(">"))
