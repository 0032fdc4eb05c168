"""Assignment over consumer threads: Kafka's ``AssignmentContext`` and the registered assignors.

The legacy consumer shares partitions out over *consumer threads*, not consumers: every thread
``C-i`` is one member of a :class:`~coordkit.strategies.assignment.GroupSubscription`, subscribed to the topics
for which consumer ``C`` runs more than ``i`` streams. Any registered assignor then applies:

* ``range`` is Kafka's legacy ``RangeAssignor``: per topic, the topic's threads in ``C-i`` text
  order take contiguous ranges, the first ``P % T`` one partition more (the member order of
  :meth:`GroupSubscription.member_order` is Java ``String`` order, as ``ConsumerThreadId`` sorts);
* ``range-ceil`` is seed 003's ceiling split;
* ``roundrobin`` is the new client's round robin over the sorted threads (Kafka's legacy round
  robin additionally shuffled partitions by hash code and required identical subscriptions).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from coordkit.engine.legacy.registration import ConsumerThreadId, thread_ids_per_topic
from coordkit.errors import NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import ConsumerRegistration, TopicPartition
from coordkit.store import MetadataStore
from coordkit.strategies.assignment import (
    Assignor,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)


def _sorted_threads(
    value: Mapping[str, tuple[ConsumerThreadId, ...]],
) -> dict[str, tuple[ConsumerThreadId, ...]]:
    return {
        topic: tuple(sorted(threads, key=ConsumerThreadId.sort_key))
        for topic, threads in sorted(value.items())
    }


@attrs.frozen
class AssignmentContext:
    """What one rebalance assigns from (Kafka's ``AssignmentContext``).

    :param consumer_id: the consumer computing the assignment.
    :param consumers_for_topic: every thread of the group per subscribed topic, in Kafka's order.
    :param partitions_for_topic: partition count of every subscribed topic that exists.
    :param consumers: the group's consumer ids, sorted.
    """

    consumer_id: str
    consumers_for_topic: Mapping[str, tuple[ConsumerThreadId, ...]] = attrs.field(
        converter=_sorted_threads
    )
    partitions_for_topic: Mapping[str, int]
    consumers: tuple[str, ...]

    @classmethod
    def from_registrations(
        cls,
        consumer_id: str,
        registrations: Mapping[str, ConsumerRegistration],
        partitions_for_topic: Mapping[str, int],
    ) -> AssignmentContext:
        per_topic: dict[str, list[ConsumerThreadId]] = {}
        for consumer, registration in registrations.items():
            for topic, threads in thread_ids_per_topic(consumer, registration.subscription).items():
                per_topic.setdefault(topic, []).extend(threads)
        return cls(
            consumer_id,
            {topic: tuple(threads) for topic, threads in per_topic.items()},
            dict(partitions_for_topic),
            tuple(sorted(registrations)),
        )

    def subscription(self) -> GroupSubscription:
        """The group as an assignor sees it: one member per thread id."""
        topics_of: dict[str, list[str]] = {}
        for topic, threads in self.consumers_for_topic.items():
            for thread in threads:
                topics_of.setdefault(str(thread), []).append(topic)
        return GroupSubscription(
            topics={t: TopicMetadata(n) for t, n in self.partitions_for_topic.items()},
            members={member: MemberSubscription(topics) for member, topics in topics_of.items()},
        )

    def threads(self) -> dict[str, ConsumerThreadId]:
        return {str(t): t for threads in self.consumers_for_topic.values() for t in threads}


def assign_threads(
    context: AssignmentContext, assignor: Assignor
) -> dict[TopicPartition, ConsumerThreadId]:
    """The whole group's assignment: partition → owning thread."""
    threads = context.threads()
    if not threads:
        return {}
    result = assignor.assign(context.subscription())
    return {tp: threads[member] for tp, member in result.owners().items()}


def assign_share(
    context: AssignmentContext, assignor: Assignor
) -> dict[TopicPartition, ConsumerThreadId]:
    """This consumer's part of the group's assignment (``context.consumer_id``'s threads only:
    every consumer computes the whole assignment, but decoding it whole would cost each of them
    one object per partition of the group)."""
    threads = context.threads()
    mine = [t for t in threads.values() if t.consumer == context.consumer_id]
    if not mine:
        return {}
    result = assignor.assign(context.subscription())
    return {
        tp: thread
        for thread in mine
        if str(thread) in result
        for tp in result.partitions(str(thread))
    }


#: topic → (the ``/brokers/topics/T`` data last decoded, its partition count).
PartitionCountCache = dict[str, tuple[bytes, int]]


def read_partition_counts(
    store: MetadataStore, topics: list[str], cache: PartitionCountCache | None = None
) -> tuple[dict[str, int], dict[str, bytes | None]]:
    """Partition counts of the topics that exist, and the raw ``/brokers/topics/T`` data read
    (``None`` for a missing topic) so watch deliveries can be compared with it.

    :param cache: decoded counts by data, so an unchanged topic is not parsed again (a topic of
        thousands of partitions costs milliseconds to decode, and every rebalance reads them all).
    """
    cache = {} if cache is None else cache
    node_paths = [layout.topic_path(t) for t in topics]
    counts: dict[str, int] = {}
    raw: dict[str, bytes | None] = {}
    for topic, path, result in zip(topics, node_paths, store.get_many(node_paths), strict=True):
        if isinstance(result, NoNodeError):
            raw[topic] = None
            continue
        if isinstance(result, StoreError):
            raise result
        data = raw[topic] = result[0]
        cached = cache.get(topic)
        if cached is None or cached[0] != data:
            cached = cache[topic] = (data, layout.TOPIC.decode(data, path).partition_count)
        counts[topic] = cached[1]
    return counts, raw
