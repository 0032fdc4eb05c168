"""Java collection orders that Kafka's sticky assignor depends on.

Kafka iterates ``HashMap``/``HashSet`` instances in several places where the order decides the
result: which members keep ``maxQuota`` owned partitions in the constrained assignment (members in
``HashMap<String, ...>`` order), which earlier owner a partition remembers when two stale
generations tie, and which partition returns to its previous consumer when several moved between the
same pair (``HashSet<TopicPartition>`` order). To give Kafka's answers we compute those orders:
``String.hashCode``, ``TopicPartition.hashCode``, ``HashMap``'s hash spreading, table sizing and
resizing, and insertion order within a bucket.

Member ids are hashed all at once with numpy (:func:`java_string_hashes`); a ``HashMap``'s final table
size follows from its key count alone past 48 keys, and below that :class:`JavaHashOrder` replays
the insertions (a small table doubles early when one bucket gets crowded).

Not emulated: tree bins (a bucket holding 8 or more keys in a table of 64 or more buckets orders them
as a red-black tree); member ids or moved partitions that collide that much do not occur in practice.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from coordkit.kafka.java import java_string_hashcode
from coordkit.strategies.assignment import java_string_key

_INITIAL_CAPACITY = 16
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64
_MASK32 = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit value (``s[0]*31^(n-1) + ... + s[n-1]``)."""
    return java_string_hashcode(text) & _MASK32


def topic_partition_hash(topic_hash: int, partition: int) -> int:
    """``TopicPartition.hashCode()``: ``31 * (31 + partition) + topic.hashCode()``, 32-bit."""
    return (31 * (31 + partition) + topic_hash) & _MASK32


def spread(h: int) -> int:
    """``HashMap.hash``: the high half folded into the low half."""
    return h ^ (h >> 16)


class JavaHashOrder:
    """Insertion into a default-constructed ``java.util.HashMap``/``HashSet``, tracking its table size.

    Keys are arbitrary hashables standing for the Java keys; the caller supplies each key's Java
    ``hashCode``. ``first()`` and ``order()`` give Java's iteration order: bucket index, then
    insertion order within the bucket. Removal keeps the table size (Java never shrinks a table).
    """

    __slots__ = ("_capacity", "_entries", "_seq")

    def __init__(self) -> None:
        self._capacity = 0  # Java allocates the table on the first insertion
        self._entries: dict[Hashable, tuple[int, int]] = {}  # key -> (spread hash, insertion seq)
        self._seq = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def capacity(self) -> int:
        """The table size (0 before the first insertion)."""
        return self._capacity

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def add(self, key: Hashable, java_hash: int) -> None:
        entries = self._entries
        if key in entries:
            return
        if self._capacity == 0:
            self._capacity = _INITIAL_CAPACITY
        h = spread(java_hash)
        # putVal: a ninth key in one bucket asks for a tree bin, and tables under 64 buckets resize
        # instead. Only a table that small holding 8+ keys can hit this, so count only then.
        if len(entries) >= _TREEIFY_THRESHOLD and self._capacity < _MIN_TREEIFY_CAPACITY:
            mask = self._capacity - 1
            if sum(1 for hh, _ in entries.values() if hh & mask == h & mask) >= _TREEIFY_THRESHOLD:
                self._capacity *= 2
        entries[key] = (h, self._seq)
        self._seq += 1
        if len(entries) > self._capacity * 3 // 4:
            self._capacity *= 2

    def remove(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def _sort_key(self, item: tuple[Hashable, tuple[int, int]]) -> tuple[int, int]:
        h, seq = item[1]
        return (h & (self._capacity - 1), seq)

    def first(self) -> Hashable:
        """The first key in Java iteration order (the set must not be empty)."""
        if len(self._entries) == 1:
            return next(iter(self._entries))
        return min(self._entries.items(), key=self._sort_key)[0]

    def order(self) -> list[Hashable]:
        return [key for key, _ in sorted(self._entries.items(), key=self._sort_key)]


def java_sorted(texts: Iterable[str]) -> list[str]:
    """``texts`` in Java ``String`` order (UTF-16 code units).

    Python orders strings by code point, which is the same order unless a character beyond the
    Basic Multilingual Plane meets one from U+E000 to U+FFFF; ASCII texts skip the conversion.
    """
    items = list(texts)
    if all(map(str.isascii, items)):
        items.sort()
    else:
        items.sort(key=java_string_key)
    return items


def java_string_hashes(texts: Sequence[str]) -> npt.NDArray[np.int64]:
    """``String.hashCode()`` of every text as unsigned 32-bit values, computed all at once.

    A hash is the sum of each UTF-16 unit times 31 to the power of its distance from the last
    unit, modulo 2^32; the products (under 2^48) are summed in uint64, whose wrap-around modulo 2^64
    keeps the sum right modulo 2^32.
    """
    encoded = [text.encode("utf-16-be", "surrogatepass") for text in texts]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)) // 2
    hashes = np.zeros(len(encoded), dtype=np.uint64)
    total = int(lengths.sum())
    if total:
        units = np.frombuffer(b"".join(encoded), dtype=">u2").astype(np.uint64)
        ends = np.cumsum(lengths)
        distance = np.repeat(ends - 1, lengths) - np.arange(total, dtype=np.int64)
        powers = [1]
        for _ in range(int(lengths.max()) - 1):
            powers.append(powers[-1] * 31 & _MASK32)
        terms = units * np.array(powers, dtype=np.uint64)[distance]
        nonempty = lengths > 0  # an empty string hashes to 0 and has no units to sum
        hashes[nonempty] = np.add.reduceat(terms, (ends - lengths)[nonempty])
    return (hashes & np.uint64(_MASK32)).astype(np.int64)


def hashmap_capacity(java_hashes: Sequence[int] | npt.NDArray[np.int64]) -> int:
    """The table size of a default ``HashMap`` after putting keys with these hashes, in order."""
    count = len(java_hashes)
    if count <= _MIN_TREEIFY_CAPACITY * 3 // 4:
        # A small table may double early for a crowded bucket (see JavaHashOrder.add): replay it.
        table = JavaHashOrder()
        for position, h in enumerate(java_hashes):
            table.add(position, int(h))
        return table.capacity
    # Early doublings stop at 64 buckets; past 48 keys the load factor alone asks for more.
    capacity = _INITIAL_CAPACITY
    while count > capacity * 3 // 4:
        capacity *= 2
    return capacity


def hashmap_iteration_order(keys: Sequence[str]) -> list[int]:
    """Positions of ``keys`` in the iteration order of a ``HashMap`` they were put into in order."""
    hashes = java_string_hashes(keys)
    mask = max(hashmap_capacity(hashes), 1) - 1
    buckets = (hashes ^ (hashes >> 16)) & mask
    order: list[int] = np.argsort(buckets, kind="stable").tolist()  # ties: insertion order
    return order
