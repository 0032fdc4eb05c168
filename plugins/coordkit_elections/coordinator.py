"""Group-coordinator strategies: which partition of ``__consumer_offsets`` (for a group) or of
``__transaction_state`` (for a transactional id) holds an id, so which broker coordinates it.

* ``kafka`` — Kafka's formula (``GroupMetadataManager.partitionFor``, and
  ``TransactionStateManager.partitionFor`` alike): ``abs(javaHashCode(id)) % partitions``.
* ``murmur2`` — the hash Kafka's producer partitioner gives record keys,
  ``toPositive(murmur2(utf8(id))) % partitions``: the same modulo, a hash that mixes every byte
  (Java's ``hashCode`` of ids differing in their last character differs by 1, 2, 3...).
* ``rendezvous`` — highest-random-weight hashing over the partitions: every partition draws a
  score from (id, partition) and the highest wins. Changing the partition count from n to m > n
  moves only the ids a new partition outscores, about (m - n) / m of them, where both modulo
  rules move almost all (about n / m stay put only by chance).

Kafka's brokers always use ``kafka``: another strategy is for clusters of coordkit brokers only.
"""

from __future__ import annotations

import functools
import hashlib
from typing import ClassVar

import attrs

from coordkit.kafka.coordinators import coordinator_partition
from coordkit.strategies.elections import ElectionKind
from coordkit.strategies.partitioning import murmur2, to_positive

_MASK64 = (1 << 64) - 1
#: The 64-bit golden ratio (Weyl sequence step of splitmix64).
_GOLDEN = 0x9E3779B97F4A7C15


def _require_partitions(num_partitions: int) -> None:
    if num_partitions < 1:
        raise ValueError(f"the internal topic needs at least 1 partition, got {num_partitions}")


@attrs.frozen
class KafkaGroupCoordinatorSelection:
    """``abs(javaHashCode(groupId)) % offsets.topic.num.partitions`` (``GroupMetadataManager
    .partitionFor``); the broker leading that partition coordinates the group."""

    name: ClassVar[str] = "kafka"
    description: ClassVar[str] = (
        "abs(Java String.hashCode(group)) % offsets.topic.num.partitions; the partition's leader"
    )
    kind: ClassVar[ElectionKind] = ElectionKind.GROUP_COORDINATOR

    def partition_for(self, group_id: str, num_partitions: int) -> int:
        return coordinator_partition(group_id, num_partitions)


@attrs.frozen
class Murmur2GroupCoordinatorSelection:
    """``toPositive(murmur2(utf8(id))) % partitions``: Kafka's key hash (``Utils.murmur2``)
    in place of Java's ``String.hashCode``."""

    name: ClassVar[str] = "murmur2"
    description: ClassVar[str] = (
        "toPositive(murmur2(UTF-8 id)) % partitions (the hash Kafka's producer gives keys); the "
        "partition's leader; coordkit brokers only"
    )
    kind: ClassVar[ElectionKind] = ElectionKind.GROUP_COORDINATOR

    def partition_for(self, group_id: str, num_partitions: int) -> int:
        _require_partitions(num_partitions)
        return to_positive(murmur2(group_id.encode("utf-8"))) % num_partitions


def _mix64(value: int) -> int:
    """splitmix64's finalizer: every input bit flips about half the output bits."""
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


@attrs.frozen
class RendezvousGroupCoordinatorSelection:
    """The partition with the highest score ``mix64(blake2b(utf8(id)) + (p + 1) * golden)``.

    An id's scores do not depend on the partition count, so growing the topic moves an id only
    to a new partition that outscores its old one; shrinking it moves only the ids of the
    partitions removed. One hash of the id and a multiply-xorshift per partition: about 0.1 ms
    for 50 partitions in CPython (Kafka's formula: 6 µs); the last 65,536 answers are kept.
    """

    name: ClassVar[str] = "rendezvous"
    description: ClassVar[str] = (
        "rendezvous (highest-random-weight) hashing of the id over the partitions; a new "
        "partition count moves only ~|m-n|/max(m,n) of the ids; coordkit brokers only"
    )
    kind: ClassVar[ElectionKind] = ElectionKind.GROUP_COORDINATOR

    def partition_for(self, group_id: str, num_partitions: int) -> int:
        _require_partitions(num_partitions)
        return _rendezvous_partition(group_id, num_partitions)


# Listing groups and loading a partition's transactional ids ask for every id the store holds:
# the answers of recent ids are kept (a pure function of its arguments; bounded).
@functools.lru_cache(maxsize=1 << 16)
def _rendezvous_partition(group_id: str, num_partitions: int) -> int:
    digest = hashlib.blake2b(group_id.encode("utf-8"), digest_size=8).digest()
    base = int.from_bytes(digest, "big")
    best, best_score = 0, -1
    for partition in range(num_partitions):
        score = _mix64((base + (partition + 1) * _GOLDEN) & _MASK64)
        if score > best_score:  # ties (2^-64) keep the lower partition
            best, best_score = partition, score
    return best


#: The group-coordinator strategies this plugin registers.
GROUP_COORDINATOR_STRATEGIES = (
    KafkaGroupCoordinatorSelection(),
    Murmur2GroupCoordinatorSelection(),
    RendezvousGroupCoordinatorSelection(),
)
