"""Zigzag varints (protobuf style), the lengths and deltas inside Kafka's records."""

from __future__ import annotations

from coordkit.protocol.wire import Buffer


class VarintError(ValueError):
    """A varint that is truncated or longer than its type allows."""


def _read(buf: Buffer, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    value = shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise VarintError(f"{what} truncated")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
    raise VarintError(f"{what} longer than {max_bytes} bytes")


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A signed 32-bit zigzag varint; one and two bytes (values within ±8191) inline."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        c = buf[pos + 1]
        if c < 0x80:
            z = (b & 0x7F) | c << 7
            return (z >> 1) ^ -(z & 1), pos + 2
    except IndexError:
        raise VarintError("varint truncated") from None
    value, pos = _read(buf, pos, 5, "varint")
    if not -(2**31) <= value < 2**31:
        raise VarintError(f"varint {value} exceeds 32 bits")
    return value, pos


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """A signed 64-bit zigzag varint."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    value, pos = _read(buf, pos, 10, "varlong")
    if not -(2**63) <= value < 2**63:
        raise VarintError(f"varlong {value} exceeds 64 bits")
    return value, pos


def _write(out: bytearray, value: int, bits: int) -> None:
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise VarintError(f"{value} does not fit a {bits}-bit varint")
    z = (value << 1) ^ (value >> (bits - 1))
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def write_varint(out: bytearray, value: int) -> None:
    if -64 <= value < 64:  # one byte after zigzag: the common lengths and deltas
        out.append((value << 1) ^ (value >> 31))
        return
    _write(out, value, 32)


def write_varlong(out: bytearray, value: int) -> None:
    if -64 <= value < 64:
        out.append((value << 1) ^ (value >> 63))
        return
    _write(out, value, 64)


def _encoded(value: int) -> bytes:
    out = bytearray()
    _write(out, value, 64)
    return bytes(out)


#: The encodings of 0..4095 (lengths, deltas and counts, mostly), made once.
_SMALL = tuple(_encoded(v) for v in range(4096))


def varint_bytes(value: int) -> bytes:
    """The zigzag varint of a 32-bit ``value`` as bytes."""
    if 0 <= value < 4096:
        return _SMALL[value]
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def varlong_bytes(value: int) -> bytes:
    """The zigzag varint of a 64-bit ``value`` as bytes."""
    if 0 <= value < 4096:
        return _SMALL[value]
    out = bytearray()
    write_varlong(out, value)
    return bytes(out)
