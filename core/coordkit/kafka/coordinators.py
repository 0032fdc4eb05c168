"""Group coordinator selection: which offsets-topic partition (and so which broker) serves a group.

Kafka's rule (``GroupMetadataManager.partitionFor``)::

    partition = abs(groupId.hashCode()) % offsets.topic.num.partitions

with Java's ``String.hashCode`` (31-polynomial over UTF-16 code units, 32-bit wrap-around) and
Kafka's ``Utils.abs`` mapping ``Integer.MIN_VALUE`` to 0. The coordinator is the broker leading that
partition of ``__consumer_offsets``; it moves whenever that leadership moves.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from coordkit.kafka.java import java_string_hashcode

if TYPE_CHECKING:
    from coordkit.store import MetadataStore

log = logging.getLogger("coordkit.kafka.coordinators")

#: Kafka's internal offsets topic.
OFFSETS_TOPIC = "__consumer_offsets"
#: ``offsets.topic.num.partitions`` default.
DEFAULT_OFFSETS_PARTITIONS = 50
#: ``offsets.topic.replication.factor`` default (capped by the number of live brokers here).
DEFAULT_OFFSETS_REPLICATION_FACTOR = 3

_INT_MIN = -(2**31)


def kafka_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: ``abs`` that maps ``Integer.MIN_VALUE`` to 0 instead of overflowing."""
    return 0 if value == _INT_MIN else abs(value)


def coordinator_partition(group_id: str, num_partitions: int = DEFAULT_OFFSETS_PARTITIONS) -> int:
    """The offsets-topic partition of ``group_id`` (Kafka's ``partitionFor``)."""
    if num_partitions < 1:
        raise ValueError(f"offsets.topic.num.partitions must be at least 1, got {num_partitions}")
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions


_reported_sizes: set[tuple[str, int, int]] = set()


def offsets_topic_partitions(store: MetadataStore, configured: int) -> tuple[int, bool]:
    """How many partitions groups are spread over: the partition count ``__consumer_offsets``
    has in the store, or ``configured`` (``offsets.topic.num.partitions``) before it exists —
    Kafka's ``getTopicPartitionCount(__consumer_offsets).getOrElse(offsetsTopicNumPartitions)``.

    :returns: ``(count, exists)``; an unreadable topic node counts as not existing yet.
    """
    from coordkit.errors import LayoutError, NoNodeError
    from coordkit.kafka import layout

    path = layout.topic_path(OFFSETS_TOPIC)
    try:
        data, _ = store.get(path)
    except NoNodeError:
        return configured, False
    try:
        count = layout.TOPIC.decode(data, path).partition_count
    except LayoutError:
        return configured, False
    key = (store.url.redacted(), count, configured)
    if count != configured and key not in _reported_sizes:
        _reported_sizes.add(key)
        log.warning(
            "%s has %d partitions, not offsets.topic.num.partitions=%d: groups are placed over "
            "the %d it has, as Kafka does",
            OFFSETS_TOPIC,
            count,
            configured,
            count,
        )
    return count, True


@runtime_checkable
class GroupCoordinatorSelection(Protocol):
    """A group-coordinator election strategy (kind ``group-coordinator``).

    ``partition_for`` maps a group to a partition of the offsets topic; the broker leading that
    partition coordinates the group, so coordinator moves follow partition leadership.
    """

    name: str
    kind: object

    def partition_for(self, group_id: str, num_partitions: int) -> int: ...
