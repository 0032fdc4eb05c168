"""``round-robin``: Kafka's ``RoundRobinPartitioner``.

Every record without an explicit partition, keyed or not, takes the topic's next counter value
(counters start at 0, one per topic) over the available partitions, or over all partitions when
none is available.

When a record would open a new batch the producer asks again (KIP-480's ``onNewBatch``); the
partitioner answers the second call with the partition it gave the first, so the counter moves
once per record. Without that (Kafka 2.4 until the KAFKA-9965 fix) every record opening a batch
advanced the counter twice and, with batches sent as fast as they open, only every other
partition received records.
"""

from __future__ import annotations

from coordkit.strategies.partitioning import (
    ClusterMetadata,
    PartitionerOptions,
    ProducerRecord,
    to_positive,
)
from coordkit_partitioners.base import PartitionerBase


class RoundRobinPartitioner(PartitionerBase):
    name = "round-robin"
    keys_hash = False

    def __init__(self, options: PartitionerOptions | None = None) -> None:
        super().__init__(options)
        self._counters: dict[str, int] = {}
        self._repeat: tuple[str, int] | None = None

    def choose(self, record: ProducerRecord, cluster: ClusterMetadata, count: int) -> int:
        repeat, self._repeat = self._repeat, None
        if repeat is not None and repeat[0] == record.topic and repeat[1] < count:
            return repeat[1]
        value = self._counters.get(record.topic, 0)
        # Java's AtomicInteger wraps; toPositive keeps the index non-negative as it did.
        self._counters[record.topic] = (value + 1) & 0xFFFFFFFF
        available = cluster.available_partitions(record.topic)
        if available:
            return available[to_positive(value) % len(available)]
        return to_positive(value) % count

    def on_new_batch(self, topic: str, cluster: ClusterMetadata, previous_partition: int) -> None:
        self._repeat = (topic, previous_partition)
