"""``sticky``: Kafka's ``DefaultPartitioner`` from 2.4 with the sticky partition cache (KIP-480).

Keyed records follow murmur2. Null-key records stick to one partition per topic until a record
would open a new batch on it (``onNewBatch`` with the sticky partition as the previous one); then
the topic switches to a random available partition *different* from the old one (any partition
when none is available, the only one when one is). ``onNewBatch`` for a partition that is not the
sticky one (a keyed record opening a batch elsewhere) changes nothing.
"""

from __future__ import annotations

from coordkit.strategies.partitioning import ClusterMetadata, PartitionerOptions, ProducerRecord
from coordkit_partitioners.base import PartitionerBase


class StickyPartitioner(PartitionerBase):
    name = "sticky"

    def __init__(self, options: PartitionerOptions | None = None) -> None:
        super().__init__(options)
        self._sticky: dict[str, int] = {}

    def choose(self, record: ProducerRecord, cluster: ClusterMetadata, count: int) -> int:
        current = self._sticky.get(record.topic)
        if current is None or current >= count:
            current = self._next(record.topic, cluster, None)
        return current

    def sticky_partition(self, topic: str) -> int | None:
        """The topic's current sticky partition (``None`` before its first null-key record)."""
        return self._sticky.get(topic)

    def on_new_batch(self, topic: str, cluster: ClusterMetadata, previous_partition: int) -> None:
        current = self._sticky.get(topic)
        if current is None or current == previous_partition:
            self._next(topic, cluster, current)

    def _next(self, topic: str, cluster: ClusterMetadata, old: int | None) -> int:
        available = cluster.available_partitions(topic)
        if not available:
            new = self.random_int() % cluster.partition_count(topic)
        elif len(available) == 1:
            new = available[0]
        else:
            new = available[self.random_int() % len(available)]
            while new == old:  # a different partition, as Kafka's loop insists
                new = available[self.random_int() % len(available)]
        self._sticky[topic] = new
        return new
