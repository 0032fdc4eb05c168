"""``explicit``: the application names every record's partition; nothing is chosen for it."""

from __future__ import annotations

from coordkit.strategies.partitioning import ClusterMetadata, PartitioningError, ProducerRecord
from coordkit_partitioners.base import PartitionerBase


class ExplicitPartitioner(PartitionerBase):
    name = "explicit"
    keys_hash = False  # a key alone does not place a record here: the partition must be given
    chooses_partitions = False

    def choose(self, record: ProducerRecord, cluster: ClusterMetadata, count: int) -> int:
        raise PartitioningError(
            f"partitioner 'explicit': a record for topic {record.topic!r} has no partition; "
            f"give record.partition in 0..{count - 1} or use another partitioner"
        )
