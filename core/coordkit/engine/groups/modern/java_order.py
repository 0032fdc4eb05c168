"""The order in which Java's ``HashMap`` and ``HashSet`` iterate string keys.

Kafka's coordinator hands its assignors maps keyed by member id, and its answers list sets of
names; where a result depends on that order, coordkit iterates the same way so it gives the same
answer. A ``HashMap`` built by inserting the keys one by one iterates by bucket (the spread hash
masked by the table size, which doubles from 16 whenever the map is more than three quarters full)
and, within a bucket, by insertion.
"""

from __future__ import annotations

from collections.abc import Iterable

#: ``HashMap``'s initial table size and load factor.
_INITIAL_CAPACITY = 16
_LOAD_FACTOR = 0.75


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    for unit in _utf16_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(text: str) -> Iterable[int]:
    for ch in text:
        code = ord(ch)
        if code < 0x10000:
            yield code
        else:
            code -= 0x10000
            yield 0xD800 + (code >> 10)
            yield 0xDC00 + (code & 0x3FF)


def _spread(h: int) -> int:
    """``HashMap.hash``: the high half folded into the low half."""
    u = h & 0xFFFFFFFF
    return u ^ (u >> 16)


def table_size(entries: int) -> int:
    """The table size of a default ``HashMap`` after ``entries`` insertions."""
    size = _INITIAL_CAPACITY
    while entries > size * _LOAD_FACTOR:
        size *= 2
    return size


def java_hash_set_order(keys: Iterable[str]) -> list[str]:
    """``keys`` in the order ``new HashSet<>(collection)`` iterates them: a table sized up front
    for the collection (``max(n / 0.75 + 1, 16)`` rounded up to a power of two)."""
    listed = list(dict.fromkeys(keys))
    wanted = max(int(len(listed) / _LOAD_FACTOR) + 1, _INITIAL_CAPACITY)
    size = 1
    while size < wanted:
        size *= 2
    return _ordered(listed, size)


def java_hash_map_order(keys: Iterable[str]) -> list[str]:
    """``keys`` (distinct, in insertion order) in the order a default ``HashMap`` iterates them.

    Buckets of more than eight keys are turned into trees in Java when the table has 64 slots or
    more; with string keys from UUIDs that does not happen in practice and is not reproduced.
    """
    listed = list(dict.fromkeys(keys))
    return _ordered(listed, table_size(len(listed)))


def _ordered(listed: list[str], size: int) -> list[str]:
    mask = size - 1
    buckets = [_spread(java_string_hash(k)) & mask for k in listed]
    return [listed[i] for i in sorted(range(len(listed)), key=lambda i: (buckets[i], i))]
