"""``murmur2``: Kafka's ``DefaultPartitioner`` up to 2.3.

Keyed records: ``toPositive(murmur2(key)) % numPartitions`` over all partitions. Null keys: a
per-topic counter over the available partitions (all partitions when none is available), the
counter starting at a random value as the Java client's did.
"""

from __future__ import annotations

from coordkit.strategies.partitioning import ClusterMetadata, PartitionerOptions, ProducerRecord
from coordkit_partitioners.base import PartitionerBase


class Murmur2Partitioner(PartitionerBase):
    name = "murmur2"

    def __init__(self, options: PartitionerOptions | None = None) -> None:
        super().__init__(options)
        self._counters: dict[str, int] = {}

    def choose(self, record: ProducerRecord, cluster: ClusterMetadata, count: int) -> int:
        counter = self._counters.get(record.topic)
        if counter is None:
            counter = self.rng.randrange(1 << 31)
        self._counters[record.topic] = counter + 1
        available = cluster.available_partitions(record.topic)
        if available:
            return available[counter % len(available)]
        return counter % count
