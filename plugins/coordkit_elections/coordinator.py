"""Group-coordinator strategy ``kafka``: the group's offsets-topic partition by Kafka's formula."""

from __future__ import annotations

from typing import ClassVar

import attrs

from coordkit.kafka.coordinators import coordinator_partition
from coordkit.strategies.elections import ElectionKind


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
