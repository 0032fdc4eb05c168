"""Java's ``HashMap`` / ``HashSet`` iteration order, for keys whose Java ``hashCode`` is known.

Kafka's ``SimpleAssignor`` walks hash maps and sets of member indices (``Integer``), partitions
(``Integer``) and ``TopicIdPartition`` records while it revokes and hands out partitions, so which
member keeps or gets a partition depends on those orders. :class:`JavaHashSet` keeps a set's keys
and replays Java's order: bucket by bucket (the hash's high half folded into the low half, masked
by the table size), then by place in the bucket (``put`` appends to the bucket,
``computeIfAbsent`` prepends); the table starts at the size the Java
constructor picks and doubles when the set grows past three quarters of it (it never shrinks).
Buckets that Java turns into trees (eight keys or more in one bucket) are not modelled: the keys
here are small integers and ``31 * uuid hash + partition``, which spread.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)

_MASK32 = 0xFFFF_FFFF
_DEFAULT_CAPACITY = 16
_LOAD_FACTOR = 0.75


def _int32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x8000_0000 else value


def integer_hash(value: int) -> int:
    """``Integer.hashCode()``."""
    return _int32(value)


def uuid_hash(topic_id: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode()``: the two halves xor-ed, then folded to 32 bits."""
    value = topic_id.int
    h = (value >> 64) ^ (value & 0xFFFF_FFFF_FFFF_FFFF)
    return _int32((h >> 32) ^ h)


def topic_partition_hash(key: tuple[uuid.UUID, int]) -> int:
    """``TopicIdPartition(topicId, partition).hashCode()``: a record's, ``31 * h(id) + p``."""
    return _int32(31 * uuid_hash(key[0]) + key[1])


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the power of two at or above ``capacity`` (1 at least)."""
    return 1 if capacity <= 1 else 1 << (capacity - 1).bit_length()


def sized_for(expected: int) -> int:
    """The initial capacity Kafka's ``AssignorHelpers.newHashMap/newHashSet(n)`` hand to Java:
    ``(int) ((n + 1) / 0.75f + 1.0f)``, in float arithmetic as Java does it."""
    return int(np.float32(expected + 1) / np.float32(_LOAD_FACTOR) + np.float32(1.0))


class JavaHashSet(Generic[K]):
    """A set iterating as a Java ``HashSet`` (or a ``HashMap``'s keys) built the same way.

    :param hash_of: the keys' Java ``hashCode``.
    :param capacity: the capacity handed to Java's constructor (``None``: the no-argument one).
    """

    def __init__(self, hash_of: Callable[[K], int], capacity: int | None = None) -> None:
        self._hash_of = hash_of
        self._table = _DEFAULT_CAPACITY if capacity is None else table_size_for(capacity)
        self._keys: dict[K, tuple[int, int]] = {}  # key -> (spread hash, insertion number)
        self._inserted = 0

    @classmethod
    def of(
        cls, hash_of: Callable[[K], int], keys: Iterable[K], capacity: int | None = None
    ) -> JavaHashSet[K]:
        made = cls(hash_of, capacity)
        for key in keys:
            made.add(key)
        return made

    def add(self, key: K) -> bool:
        """``HashSet.add`` / ``HashMap.put``: a new key goes to the tail of its bucket, and the
        table doubles at once when the map is then past three quarters full."""
        if key in self._keys:
            return False
        self._insert(key, self._inserted)
        if len(self._keys) > self._threshold():
            self._table *= 2
        return True

    def compute_if_absent(self, key: K) -> bool:
        """``HashMap.computeIfAbsent``: the table doubles *before* the lookup when the map is
        past three quarters full (so only at the next call), and a new key goes to the **head**
        of its bucket — ahead of keys ``put`` there before it."""
        if len(self._keys) > self._threshold():
            self._table *= 2
        if key in self._keys:
            return False
        self._insert(key, -self._inserted)
        return True

    def _threshold(self) -> int:
        return int(self._table * _LOAD_FACTOR)

    def _insert(self, key: K, rank: int) -> None:
        h = self._hash_of(key) & _MASK32
        self._keys[key] = (h ^ (h >> 16), rank)
        self._inserted += 1

    def remove(self, key: K) -> bool:
        return self._keys.pop(key, None) is not None

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def order(self) -> list[K]:
        """The keys in Java's iteration order."""
        mask = self._table - 1
        keys = self._keys
        return sorted(keys, key=lambda k: (keys[k][0] & mask, keys[k][1]))

    def __iter__(self) -> Iterator[K]:
        return iter(self.order())


class JavaIterator(Generic[K]):
    """A Java iterator over a :class:`JavaHashSet` that only it changes (``remove`` drops the key
    it returned last), as the assignor's loops use theirs."""

    def __init__(self, items: JavaHashSet[K]) -> None:
        self._items = items
        self._order = items.order()
        self._next = 0

    def has_next(self) -> bool:
        return self._next < len(self._order)

    def next(self) -> K:
        if not self.has_next():
            raise StopIteration("NoSuchElementException")
        self._next += 1
        return self._order[self._next - 1]

    def remove(self) -> None:
        self._items.remove(self._order[self._next - 1])
