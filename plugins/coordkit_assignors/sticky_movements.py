"""Kafka's ``PartitionMovements``: the partitions moved during one general sticky rebalance.

When a partition should move from one member to another and a partition of the same topic moved the
other way earlier in this rebalance, Kafka moves that earlier partition back instead, so a topic's
partitions do not cross between two members in both directions. Which earlier partition comes back
is the first of a ``HashSet<TopicPartition>`` in Java iteration order; :class:`JavaHashOrder`
reproduces it.
"""

from __future__ import annotations

from collections.abc import Sequence

from coordkit_assignors.sticky_java import JavaHashOrder, topic_partition_hash

Pair = tuple[int, int]  # (source member, destination member)


class PartitionMovements:
    """Movement records keyed by global partition index; members and topics are numbers.

    :param topic_hashes: ``String.hashCode`` of each topic name, by topic number (for the Java
        hash of a ``TopicPartition``).
    """

    __slots__ = ("_by_topic", "_moved", "_topic_hashes")

    def __init__(self, topic_hashes: Sequence[int]):
        self._topic_hashes = topic_hashes
        self._moved: dict[int, Pair] = {}
        self._by_topic: dict[int, dict[Pair, JavaHashOrder]] = {}

    def partition_to_move(self, partition: int, old: int, new: int, topic: int) -> int:
        """Kafka's ``getTheActualPartitionToBeMoved``: ``partition`` or one that moved ``new -> old``."""
        per_topic = self._by_topic.get(topic)
        if per_topic is None:
            return partition
        moved = self._moved.get(partition)
        if moved is not None:
            old = moved[0]  # where the partition was at the start of this rebalance
        reverse = per_topic.get((new, old))
        if reverse is None:
            return partition
        first = reverse.first()
        assert isinstance(first, int)
        return first

    def move(self, partition: int, old: int, new: int, topic: int, number: int) -> None:
        """Kafka's ``movePartition``: record ``partition`` going from ``old`` to ``new``."""
        moved = self._moved.get(partition)
        if moved is None:
            self._add(partition, (old, new), topic, number)
            return
        self._remove(partition, moved, topic)
        if moved[0] != new:  # not back to where it started
            self._add(partition, (moved[0], new), topic, number)

    def _add(self, partition: int, pair: Pair, topic: int, number: int) -> None:
        self._moved[partition] = pair
        per_topic = self._by_topic.setdefault(topic, {})
        members = per_topic.get(pair)
        if members is None:
            members = per_topic[pair] = JavaHashOrder()
        members.add(partition, topic_partition_hash(self._topic_hashes[topic], number))

    def _remove(self, partition: int, pair: Pair, topic: int) -> None:
        del self._moved[partition]
        per_topic = self._by_topic[topic]
        members = per_topic[pair]
        members.remove(partition)
        if not len(members):
            del per_topic[pair]
            if not per_topic:
                del self._by_topic[topic]

    @property
    def moved(self) -> dict[int, Pair]:
        """Partitions away from their owner at the start of the rebalance: ``{partition: (src, dst)}``."""
        return self._moved
