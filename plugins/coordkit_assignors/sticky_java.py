"""Java collection orders that Kafka's sticky assignor depends on.

Kafka iterates ``HashMap``/``HashSet`` instances in several places where the order decides the
result: which members keep ``maxQuota`` owned partitions in the constrained assignment (members in
``HashMap<String, ...>`` order), which earlier owner a partition remembers when two stale
generations tie, and which partition returns to its previous consumer when several moved between the
same pair (``HashSet<TopicPartition>`` order). To give Kafka's answers we compute those orders:
``String.hashCode``, ``TopicPartition.hashCode``, ``HashMap``'s hash spreading, table sizing and
resizing, and insertion order within a bucket.

Not emulated: tree bins (a bucket holding 8 or more keys in a table of 64 or more buckets orders them
as a red-black tree); member ids or moved partitions that collide that much do not occur in practice.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from coordkit.coordinators import java_string_hashcode

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


def hashmap_iteration_order(keys: Sequence[str]) -> list[int]:
    """Positions of ``keys`` in the iteration order of a ``HashMap`` they were put into in order."""
    hashes = [java_string_hash(key) for key in keys]
    table = JavaHashOrder()
    for position, h in enumerate(hashes):
        table.add(position, h)
    mask = max(table.capacity, 1) - 1
    buckets = [spread(h) & mask for h in hashes]
    return sorted(range(len(keys)), key=lambda position: (buckets[position], position))
