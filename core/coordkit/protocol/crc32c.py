"""CRC-32C (Castagnoli), the checksum of Kafka's record batches.

Uses the ``crc32c`` wheel (hardware accelerated) when it is installed; otherwise a table-driven
implementation in Python that reads eight bytes per step ("slicing-by-8"), slower by two orders
of magnitude but identical (``tests/unit/test_protocol_records.py`` checks both).
"""

from __future__ import annotations

from collections.abc import Callable

from coordkit.protocol.wire import Buffer

_POLY = 0x82F63B78  # CRC-32C, reflected


def _tables() -> list[list[int]]:
    first = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        first.append(c)
    tables = [first]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(prev[n] >> 8) ^ first[prev[n] & 0xFF] for n in range(256)])
    return tables


_T = _tables()


def crc32c_python(data: Buffer, crc: int = 0) -> int:
    """CRC-32C of ``data`` (continuing from ``crc``), in Python."""
    t0, t1, t2, t3, t4, t5, t6, t7 = _T
    view = bytes(data)
    crc ^= 0xFFFFFFFF
    n = len(view)
    whole = n - n % 8
    for i in range(0, whole, 8):
        low = crc ^ int.from_bytes(view[i : i + 4], "little")
        high = int.from_bytes(view[i + 4 : i + 8], "little")
        crc = (
            t7[low & 0xFF]
            ^ t6[(low >> 8) & 0xFF]
            ^ t5[(low >> 16) & 0xFF]
            ^ t4[low >> 24]
            ^ t3[high & 0xFF]
            ^ t2[(high >> 8) & 0xFF]
            ^ t1[(high >> 16) & 0xFF]
            ^ t0[high >> 24]
        )
    for b in view[whole:]:
        crc = (crc >> 8) ^ t0[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


def _native() -> Callable[[Buffer, int], int] | None:
    try:
        import crc32c as wheel  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    native: Callable[[Buffer, int], int] = wheel.crc32c
    return native


_NATIVE = _native()
#: Which implementation :func:`crc32c` uses: ``wheel`` or ``python``.
IMPLEMENTATION = "python" if _NATIVE is None else "wheel"


def crc32c(data: Buffer, crc: int = 0) -> int:
    """CRC-32C of ``data`` (continuing from ``crc``)."""
    if _NATIVE is not None:
        return _NATIVE(data, crc)
    return crc32c_python(data, crc)
