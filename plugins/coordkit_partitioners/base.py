"""What every built-in partitioner shares: Kafka's explicit-partition and keyed rules, no-op
callbacks, seeded randomness, and the factory registered with the plugin manager."""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs

from coordkit.strategies.partitioning import (
    ClusterMetadata,
    InvalidPartitionError,
    PartitionerOptions,
    PartitionLoad,
    ProducerRecord,
    partition_for_key,
    to_positive,
)

_INT32_SPAN = 1 << 32


class PartitionerBase:
    """Explicit partitions win and keyed records follow murmur2; subclasses decide the rest
    (:meth:`choose`)."""

    name = "base"

    def __init__(self, options: PartitionerOptions | None = None) -> None:
        self.options = options or PartitionerOptions()
        self.rng = random.Random(self.options.seed)

    def partition(self, record: ProducerRecord, cluster: ClusterMetadata) -> int:
        count = cluster.partition_count(record.topic)
        if record.partition is not None:
            if record.partition >= count:
                raise InvalidPartitionError(
                    f"partitioner {self.name!r}: record for topic {record.topic!r} names partition "
                    f"{record.partition}, but the topic has {count} partitions "
                    f"(0..{count - 1})"
                )
            return record.partition
        if record.key is not None and not self.options.ignore_keys and self.keys_hash:
            return partition_for_key(record.key, count)
        return self.choose(record, cluster, count)

    #: Keyed records take the murmur2 rule (Kafka's round-robin partitioner ignores keys).
    keys_hash = True

    def choose(self, record: ProducerRecord, cluster: ClusterMetadata, count: int) -> int:
        raise NotImplementedError

    def random_int(self) -> int:
        """``Utils.toPositive(ThreadLocalRandom.nextInt())``, from the seeded generator."""
        return to_positive(self.rng.randrange(_INT32_SPAN))

    # Kafka's callbacks; most partitioners ignore them.
    def on_new_batch(self, topic: str, cluster: ClusterMetadata, previous_partition: int) -> None:
        return None

    def on_append(
        self, record: ProducerRecord, partition: int, cluster: ClusterMetadata, batch_full: bool
    ) -> None:
        return None

    def update_load(self, topic: str, load: PartitionLoad | None) -> None:
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} seed={self.options.seed}>"


@attrs.frozen
class Factory:
    """A registered partitioner: ``factory(options)`` builds a fresh instance."""

    name: str
    description: str
    build: Callable[[PartitionerOptions], PartitionerBase] = attrs.field(repr=False)

    def __call__(self, options: PartitionerOptions | None = None) -> PartitionerBase:
        return self.build(options or PartitionerOptions())
