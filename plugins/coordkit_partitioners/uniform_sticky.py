"""``uniform-sticky``: Kafka's built-in partitioner since 3.3 (KIP-794).

Keyed records follow murmur2 (unless ``ignore_keys``). Null-key records stick to one partition per
topic and switch after ``batch_size`` bytes were produced to it, at a batch boundary: the switch
waits while the partition's last batch is incomplete, up to twice ``batch_size`` (Kafka's cap).
The next partition is drawn at random:

* without load information, uniformly over the available partitions (all when none is available);
* with adaptive partitioning and load information (:class:`~coordkit.strategies.partitioning.PartitionLoad`),
  from a cumulative frequency table whose weights are ``max queue size + 1 - queue size``, so a
  partition with a long queue is chosen less often, and partitions left out of the load (their
  leader did not drain within the availability timeout) are not chosen at all. Equal queues over
  every partition carry no information and fall back to the uniform draw.
"""

from __future__ import annotations

import bisect

from coordkit.strategies.partitioning import (
    ClusterMetadata,
    PartitionerOptions,
    PartitionLoad,
    ProducerRecord,
)
from coordkit_partitioners.base import PartitionerBase


class _LoadStats:
    """Kafka's ``PartitionLoadStats``: partition ids and their cumulative weights."""

    __slots__ = ("cumulative", "partitions")

    def __init__(self, partitions: tuple[int, ...], cumulative: list[int]):
        self.partitions = partitions
        self.cumulative = cumulative


def load_stats(load: PartitionLoad) -> _LoadStats | None:
    """The weighted table for ``load``, or ``None`` when it says nothing (fewer than two
    partitions in the topic, or every partition present with the same queue size)."""
    sizes = load.queue_sizes
    if load.partition_count < 2 or not sizes:
        return None
    if len(set(sizes)) == 1 and len(sizes) == load.partition_count:
        return None
    ceiling = max(sizes) + 1  # invert: the longest queue still weighs 1
    cumulative: list[int] = []
    total = 0
    for size in sizes:
        total += ceiling - size
        cumulative.append(total)
    return _LoadStats(load.partitions, cumulative)


class UniformStickyPartitioner(PartitionerBase):
    name = "uniform-sticky"

    def __init__(self, options: PartitionerOptions | None = None) -> None:
        super().__init__(options)
        self._sticky: dict[str, int] = {}
        self._produced: dict[str, int] = {}
        self._stats: dict[str, _LoadStats] = {}

    def choose(self, record: ProducerRecord, cluster: ClusterMetadata, count: int) -> int:
        current = self._sticky.get(record.topic)
        if current is None or current >= count:
            current = self._switch(record.topic, cluster)
        return current

    def sticky_partition(self, topic: str) -> int | None:
        return self._sticky.get(topic)

    def on_append(
        self, record: ProducerRecord, partition: int, cluster: ClusterMetadata, batch_full: bool
    ) -> None:
        if record.partition is not None or (
            record.key is not None and not self.options.ignore_keys
        ):
            return  # only records this partitioner placed count towards the switch
        topic = record.topic
        if self._sticky.get(topic) != partition:
            return
        produced = self._produced.get(topic, 0) + record.size
        self._produced[topic] = produced
        limit = self.options.batch_size
        if (produced >= limit and batch_full) or produced >= 2 * limit:
            self._switch(topic, cluster)

    def update_load(self, topic: str, load: PartitionLoad | None) -> None:
        stats = load_stats(load) if load is not None and self.options.adaptive else None
        if stats is None:
            self._stats.pop(topic, None)
        else:
            self._stats[topic] = stats

    def _switch(self, topic: str, cluster: ClusterMetadata) -> int:
        random = self.random_int()
        stats = self._stats.get(topic)
        count = cluster.partition_count(topic)
        if stats is not None and all(p < count for p in stats.partitions):
            weighted = random % stats.cumulative[-1]
            # The first entry greater than the draw (Arrays.binarySearch's insertion point).
            new = stats.partitions[bisect.bisect_right(stats.cumulative, weighted)]
        else:
            available = cluster.available_partitions(topic)
            new = available[random % len(available)] if available else random % count
        self._sticky[topic] = new
        self._produced[topic] = 0
        return new
