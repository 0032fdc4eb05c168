"""Legacy-consumer test world: a store with brokers and topics written directly in Kafka's layout
(the legacy consumer reads only ``/brokers/ids`` and ``/brokers/topics/T``), consumers on their own
sessions sharing one ownership history, and independent models of the expected assignments."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from coordkit.engine.legacy import (
    LegacyConsumer,
    LegacyConsumerConfig,
    LegacyGroupView,
    OwnershipHistory,
    read_group,
)
from coordkit.kafka import layout
from coordkit.kafka.model import BrokerInfo, TopicAssignment, TopicPartition
from coordkit.store import MetadataStore, SessionState
from harness.waiting import wait_for

Owners = dict[TopicPartition, str]

#: Small timings: rebalances retry quickly, nothing waits for Kafka's 2 s backoff.
FAST = LegacyConsumerConfig(rebalance_backoff_ms=50, rebalance_max_retries=100, host="testhost")


class LegacyWorld:
    """Brokers, topics and legacy consumers of one group on the test's store."""

    def __init__(self, open_session: Callable[[], MetadataStore], group: str = "billing"):
        self.open_session = open_session
        self.group = group
        self.admin = open_session()
        self.history = OwnershipHistory()
        self.consumers: list[LegacyConsumer] = []
        self.partitions: dict[str, int] = {}
        self._broker_sessions: dict[int, MetadataStore] = {}
        self._ids = itertools.count(1)

    # -- the cluster side
    def add_broker(self, broker_id: int = 1) -> None:
        session = self.open_session()
        info = BrokerInfo(host="localhost", port=9092 + broker_id, timestamp="1700000000000")
        session.create(
            layout.broker_path(broker_id),
            layout.BROKER.encode(info),
            ephemeral=True,
            make_parents=True,
        )
        self._broker_sessions[broker_id] = session

    def remove_broker(self, broker_id: int) -> None:
        self._broker_sessions.pop(broker_id).close()

    def create_topic(self, topic: str, partitions: int) -> None:
        assignment = TopicAssignment(partitions={p: (1,) for p in range(partitions)})
        path = layout.topic_path(topic)
        if self.admin.exists(path) is None:
            self.admin.create(path, layout.TOPIC.encode(assignment), make_parents=True)
        else:
            self.admin.set(path, layout.TOPIC.encode(assignment))
        self.partitions[topic] = partitions

    # -- consumers
    def consumer(
        self,
        topic_count: Mapping[str, int],
        *,
        start: bool = True,
        config: LegacyConsumerConfig = FAST,
        **options: Any,
    ) -> LegacyConsumer:
        consumer = LegacyConsumer(
            self.open_session(),
            self.group,
            topic_count,
            config=config,
            history=self.history,
            **options,
        )
        self.consumers.append(consumer)
        if start:
            consumer.start()
        return consumer

    def live(self) -> list[LegacyConsumer]:
        return [c for c in self.consumers if c.store.state is not SessionState.CLOSED]

    def view(self) -> LegacyGroupView:
        return read_group(self.admin, self.group)

    def subscriptions(self) -> dict[str, dict[str, int]]:
        return {c.consumer_id: dict(c.topic_count) for c in self.live()}

    def wait_stable(self, expected: Owners, what: str = "the group to settle") -> LegacyGroupView:
        """Wait until every live consumer is idle and both the store's owner nodes and the
        consumers' own beliefs equal ``expected``."""

        seen: list[str] = ["nothing yet"]

        def check() -> LegacyGroupView | None:
            live = self.live()
            busy = [c.consumer_id for c in live if not c.idle]
            if busy:
                seen[0] = f"consumers still rebalancing: {busy}"
                return None
            believed: Owners = {}
            for c in live:
                believed.update(c.owned())
            if believed != expected:
                seen[0] = f"the consumers believe they own {believed}"
                return None
            view = self.view()
            if dict(view.owners) != expected:
                seen[0] = f"the store's owner nodes say {dict(view.owners)}"
                return None
            return view

        try:
            result: LegacyGroupView = wait_for(check, what=what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: expected {expected}; last seen: {seen[0]}") from None
        return result

    def close(self) -> None:
        for consumer in self.consumers:
            consumer.close()
        for session in self._broker_sessions.values():
            session.close()


# -- independent models of the legacy split ---------------------------------------------------------


def threads_of(subscriptions: Mapping[str, Mapping[str, int]], topic: str) -> list[str]:
    """Kafka sorts ``ConsumerThreadId`` by its text (ASCII ids: Python's order is Java's)."""
    return sorted(
        f"{consumer}-{i}"
        for consumer, sub in subscriptions.items()
        for i in range(sub.get(topic, 0))
    )


def kafka_range(
    subscriptions: Mapping[str, Mapping[str, int]], partitions: Mapping[str, int]
) -> Owners:
    """Kafka 0.8's ``RangeAssignor.assign``, transcribed from seed 004."""
    out: Owners = {}
    for topic, count in partitions.items():
        threads = threads_of(subscriptions, topic)
        if not threads:
            continue
        per_thread, with_extra = divmod(count, len(threads))
        for position, thread in enumerate(threads):
            start = per_thread * position + min(position, with_extra)
            n = per_thread + (0 if position + 1 > with_extra else 1)
            for p in range(start, start + n):
                out[TopicPartition(topic, p)] = thread
    return out


def ceil_range(
    subscriptions: Mapping[str, Mapping[str, int]], partitions: Mapping[str, int]
) -> Owners:
    """Seed 003: ``M = ceil(P / C)``, thread ``i`` takes ``P[i*M .. (i+1)*M - 1]``."""
    out: Owners = {}
    for topic, count in partitions.items():
        threads = threads_of(subscriptions, topic)
        if not threads:
            continue
        size = -(-count // len(threads))
        for position, thread in enumerate(threads):
            for p in range(position * size, min((position + 1) * size, count)):
                out[TopicPartition(topic, p)] = thread
    return out
