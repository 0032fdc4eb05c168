"""``coordkit group run --legacy``: Kafka 0.8's ZooKeeper consumer, registered under
``/consumers/G/ids`` and claiming ``/consumers/G/owners/T/P`` ephemerals, with no coordinator.

Every consumer watches the group's members and rebalances on each change (the herd effect): a
step's rebalance row sums the consumers' rebalances, attempts, owner-node conflicts and store
operations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from coordkit.cli.group.runs import (
    GroupSettings,
    NumberedConsumers,
    Observation,
    high_watermark,
    labels,
)
from coordkit.cli.group.view import GroupSnapshot, MemberRow, RebalanceRow
from coordkit.engine import Cluster, OpCounts
from coordkit.engine.errors import EngineError
from coordkit.engine.legacy import ConsumerState as LegacyState
from coordkit.engine.legacy import (
    LegacyConsumer,
    LegacyConsumerConfig,
    LegacyConsumerError,
    OwnershipChange,
    OwnershipEvent,
    OwnershipHistory,
    read_group,
)
from coordkit.kafka.model import TopicPartition

#: Rebalance retries for the demo: Kafka's 2 s backoff and 4 attempts make a conflict between two
#: consumers rebalancing at once cost seconds and fail easily; these do neither.
LEGACY_REBALANCE_BACKOFF_MS = 100
LEGACY_REBALANCE_MAX_RETRIES = 50


def unowned_between(
    events: Sequence[OwnershipEvent],
    universe: frozenset[TopicPartition],
    start: float,
    end: float,
) -> tuple[int, float]:
    """``(distinct partitions of universe without an owner node, partition-seconds)`` within
    ``[start, end]``, replayed from the owner nodes' claims and releases."""
    owners: Counter[TopicPartition] = Counter()

    def unowned() -> set[TopicPartition]:
        return {tp for tp in universe if owners[tp] == 0}

    ever: set[TopicPartition] | None = None  # set once the replay is inside the window
    seconds = 0.0
    cursor = start
    for event in sorted(events, key=lambda e: e.sequence):
        if event.at > end:
            break
        if event.at > start:
            now_unowned = unowned()
            ever = now_unowned if ever is None else ever | now_unowned
            seconds += (event.at - cursor) * len(now_unowned)
            cursor = event.at
        if event.change is OwnershipChange.CLAIMED:
            owners[event.tp] += 1
        elif owners[event.tp] > 0:
            owners[event.tp] -= 1
        if ever is not None:
            ever |= unowned()
    final = unowned()
    seconds += max(0.0, end - cursor) * len(final)
    return len(final if ever is None else ever | final), seconds


class LegacyGroupRun(NumberedConsumers[LegacyConsumer]):
    """Legacy ZooKeeper consumers (``/consumers/G/ids``, owner ephemerals), each on its own
    session of the cluster's store, sharing one ownership history."""

    def __init__(self, cluster: Cluster, settings: GroupSettings):
        self.cluster = cluster
        self.settings = settings
        self.history = OwnershipHistory()
        self.consumers: dict[int, LegacyConsumer] = {}
        self.retired: list[LegacyConsumer] = []  # stopped ones: their rebalances still count
        self.universe = settings.partitions()

    def _start(self, number: int) -> None:
        s = self.settings
        config = LegacyConsumerConfig(
            rebalance_backoff_ms=LEGACY_REBALANCE_BACKOFF_MS,
            rebalance_max_retries=LEGACY_REBALANCE_MAX_RETRIES,
            consumer_id=f"i{number}" if s.static else None,
        )
        consumer = LegacyConsumer(
            self.cluster.open_session(),
            s.group_id,
            dict.fromkeys(s.topics, 1),
            assignor=s.assignors[0],
            config=config,
            clock=self.cluster.clock,
            history=self.history,
        )
        try:
            consumer.start(wait=False)
        except BaseException:
            consumer.crash()
            raise
        old = self.consumers.get(number)
        if old is not None:
            self.retired.append(old)
        self.consumers[number] = consumer

    def _is_running(self, consumer: LegacyConsumer) -> bool:
        return consumer.state is LegacyState.RUNNING

    def kill_coordinator(self) -> int:
        raise EngineError("legacy consumers have no group coordinator")

    def poll(self) -> int:
        consumed = 0
        for consumer in self._running().values():
            for tp, position in consumer.positions().items():
                behind = high_watermark(self.cluster, tp) - position
                if behind <= 0:
                    continue
                try:
                    consumer.consume(tp, behind)
                except LegacyConsumerError:
                    continue  # released by a rebalance meanwhile: its next owner consumes it
                consumed += behind
        return consumed

    def commit(self) -> int:
        return sum(c.commit_offsets() for c in self._running().values())

    def failures(self) -> list[str]:
        return []  # a failed rebalance is retried on the next change; observe() names it

    def violations(self) -> list[str]:
        return self.history.violations()

    def close(self) -> None:
        for consumer in self.consumers.values():
            consumer.crash()

    # -- observing -------------------------------------------------------------------------------

    def _lag(self, consumer: LegacyConsumer) -> int:
        return sum(
            max(0, high_watermark(self.cluster, tp) - position)
            for tp, position in consumer.positions().items()
        )

    def observe(self, label: str, since: float) -> Observation:
        running = self._running()
        rows = [
            MemberRow(
                consumer=number,
                member_id=consumer.consumer_id,
                instance_id=consumer.config.consumer_id,
                status=consumer.state.value if consumer.idle else "rebalancing",
                partitions=consumer.owned(),
                lag=self._lag(consumer),
            )
            for number, consumer in sorted(running.items())
        ]
        waiting_for = self._problem(running)
        snapshot = GroupSnapshot(
            label=label,
            group_id=self.settings.group_id,
            state="Stable" if waiting_for is None else "Rebalancing",
            generation=None,
            protocol=self.settings.assignors[0],
            leader=None,
            coordinator=None,
            members=rows,
            rebalances=self._rebalances(since),
            legacy=True,
        )
        return Observation(snapshot, waiting_for)

    def _problem(self, running: dict[int, LegacyConsumer]) -> str | None:
        for number, consumer in sorted(running.items()):
            if not consumer.idle:
                return f"consumer c{number} to finish rebalancing"
        view = read_group(self.cluster.admin_store, self.settings.group_id)
        number_of = {c.consumer_id: n for n, c in self.consumers.items()}
        registered = set(view.registrations)
        expected = {c.consumer_id for c in running.values()}
        if registered != expected:

            def label_of(consumer_id: str) -> str:
                number = number_of.get(consumer_id)
                return consumer_id if number is None else f"c{number}"

            return (
                f"registrations of {labels(map(label_of, expected))} under /consumers/"
                f"{self.settings.group_id}/ids (found {labels(map(label_of, registered))})"
            )
        believed: dict[TopicPartition, str] = {}
        for consumer in running.values():
            believed.update(consumer.owned())
        if dict(view.owners) != believed:
            return "the owner nodes to match what the consumers fetch"
        unowned = self.universe - set(believed)
        if unowned:
            errors = [f"c{n}: {c.last_error}" for n, c in sorted(running.items()) if c.last_error]
            why = f" (last errors: {'; '.join(errors)})" if errors else ""
            return f"an owner for {len(unowned)} partition(s), e.g. {sorted(unowned)[0]}{why}"
        return None

    def _rebalances(self, since: float) -> list[RebalanceRow]:
        consumers = [*self.retired, *self.consumers.values()]
        records = [r for c in consumers for r in c.rebalances.records if r.finished_at >= since]
        if not records:
            return []
        started = min(r.started_at for r in records)
        finished = max(r.finished_at for r in records)
        ops = OpCounts()
        for record in records:
            ops = ops + record.ops
        unowned, partition_seconds = unowned_between(
            self.history.events, self.universe, min(since, started), finished
        )
        reasons = dict.fromkeys(reason for r in records for reason in r.reasons)
        return [
            RebalanceRow(
                generation=None,
                reason=", ".join(reasons),
                rounds=len(records),
                duration=finished - started,
                unowned=unowned,
                partition_seconds=partition_seconds,
                attempts=sum(r.attempts for r in records),
                conflicts=sum(r.conflicts for r in records),
                store_ops=ops,
            )
        ]
