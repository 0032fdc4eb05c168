"""Kafka's replica placement (``AdminUtils.assignReplicasToBrokers``), as the ``kafka`` and
``kafka-rack-aware`` placement strategies.

Source: Apache Kafka ``core/src/main/scala/kafka/admin/AdminUtils.scala`` (3.x) and its
``AdminRackAwareTest``; unchanged from the engine's earlier hard-wired copy.

Rack-unaware: the first replica of each partition goes round-robin over the brokers (sorted by id)
from a start index; the other replicas follow at a shift from the first that grows by one each time
the partition number wraps around the broker list, so a broker's followers spread over the others.

Rack-aware: the same round-robin over a *rack-alternated* broker list (racks sorted, brokers sorted
within a rack, one broker from each rack in turn); each further replica skips brokers on racks that
already hold a replica of the partition while some rack holds none, and brokers already holding one
while some broker holds none.

Both start from a random index unless ``fixed_start_index`` is given (Kafka's tests fix it). A
partition increase starts at the first broker whose id is at least partition 0's first replica
(Kafka's ``addPartitions``). Kafka has no rebalancing placement: ``kafka-reassign-partitions
--generate`` runs the same placement again over the given brokers, topic by topic, which is what
:meth:`KafkaPlacement.rebalance` does (so it moves most replicas: the baseline the others beat).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import attrs

from coordkit.engine.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)
from coordkit.strategies.placement import TP, BrokerMetadata, ClusterLayout, brokers_from

__all__ = ["KafkaPlacement", "assign_replicas", "brokers_from", "rack_alternated_brokers"]


@attrs.frozen
class KafkaPlacement:
    """``kafka`` (racks ignored) or ``kafka-rack-aware`` (racks used when every broker has one;
    with racks on only some brokers, an error, as Kafka's enforced mode)."""

    name: str
    rack_aware: bool
    description: str

    def place(
        self,
        brokers: Sequence[BrokerMetadata],
        partitions: int,
        replication_factor: int,
        *,
        existing: Mapping[int, Sequence[int]] | None = None,
        rng: random.Random | None = None,
        topic: str = "",
    ) -> dict[int, list[int]]:
        ordered = sorted(brokers, key=lambda b: b.id)
        if not existing:
            return assign_replicas(
                ordered, partitions, replication_factor, rack_aware=self.rack_aware, rng=rng
            )
        first = existing[min(existing)][0]
        start = next((i for i, b in enumerate(ordered) if b.id >= first), 0)
        return assign_replicas(
            ordered,
            partitions,
            replication_factor,
            fixed_start_index=start,
            start_partition_id=len(existing),
            rack_aware=self.rack_aware,
            rng=rng,
        )

    def rebalance(self, layout: ClusterLayout) -> dict[TP, tuple[int, ...]]:
        rng = random.Random(0)  # a plan is printed and reviewed before it runs: make it repeat
        plan: dict[TP, tuple[int, ...]] = {}
        for topic in sorted(layout.assignment):
            current = layout.assignment[topic]
            if not current:
                continue
            factor = len(next(iter(current.values())))
            placed = self.place(layout.brokers, len(current), factor, rng=rng, topic=topic)
            for partition, replicas in placed.items():
                if tuple(replicas) != tuple(current.get(partition, ())):
                    plan[(topic, partition)] = tuple(replicas)
        return plan


KAFKA = KafkaPlacement(
    "kafka",
    False,
    "Kafka's AdminUtils placement without racks: round-robin leaders from a random broker, "
    "followers at a growing shift",
)
KAFKA_RACK_AWARE = KafkaPlacement(
    "kafka-rack-aware",
    True,
    "Kafka's AdminUtils rack-aware placement: round-robin over a rack-alternated broker list, "
    "replicas on distinct racks while racks allow (racks ignored when no broker has one)",
)


def assign_replicas(
    brokers: Sequence[BrokerMetadata],
    partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rack_aware: bool = True,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for ``partitions`` partitions numbered from ``max(0, start_partition_id)``.

    :param brokers: the brokers to place on (Kafka passes them sorted by id).
    :param rack_aware: use rack information when every broker has some; ``False`` ignores racks.
    :raises InvalidPartitionsError: ``partitions`` < 1.
    :raises InvalidReplicationFactorError: factor < 1 or larger than the number of brokers.
    :raises InvalidReplicaAssignmentError: racks known for some brokers but not all.
    """
    if partitions <= 0:
        raise InvalidPartitionsError(
            f"number of partitions must be larger than 0, got {partitions}"
        )
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"replication factor must be larger than 0, got {replication_factor}"
        )
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"replication factor: {replication_factor} larger than available brokers: {len(brokers)}"
        )
    rng = rng or random.Random()
    with_rack = [b for b in brokers if b.rack is not None]
    if not rack_aware or not with_rack:
        return _rack_unaware(
            [b.id for b in brokers],
            partitions,
            replication_factor,
            fixed_start_index,
            start_partition_id,
            rng,
        )
    if len(with_rack) != len(brokers):
        missing = sorted(b.id for b in brokers if b.rack is None)
        raise InvalidReplicaAssignmentError(
            f"not all brokers have rack information for replica rack aware assignment "
            f"(no rack: brokers {missing})"
        )
    return _rack_aware(
        {b.id: b.rack for b in with_rack if b.rack is not None},
        partitions,
        replication_factor,
        fixed_start_index,
        start_partition_id,
        rng,
    )


def _replica_index(first: int, shift: int, replica: int, n_brokers: int) -> int:
    return (first + 1 + (shift + replica) % (n_brokers - 1)) % n_brokers


def _rack_unaware(
    broker_ids: list[int],
    partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    n = len(broker_ids)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    current = max(0, start_partition_id)
    out: dict[int, list[int]] = {}
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        replicas = [broker_ids[first]]
        replicas.extend(
            broker_ids[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
        )
        out[current] = replicas
        current += 1
    return out


def rack_alternated_brokers(rack_of: Mapping[int, str]) -> list[int]:
    """One broker per rack in turn: racks sorted by name, brokers sorted by id within a rack."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in rack_of.items():
        by_rack.setdefault(rack, []).append(broker)
    iterators = {rack: iter(sorted(ids)) for rack, ids in by_rack.items()}
    racks = sorted(iterators)
    out: list[int] = []
    index = 0
    while len(out) < len(rack_of):
        following = next(iterators[racks[index]], None)
        if following is not None:
            out.append(following)
        index = (index + 1) % len(racks)
    return out


def _rack_aware(
    rack_of: Mapping[int, str],
    partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    arranged = rack_alternated_brokers(rack_of)
    n = len(arranged)
    n_racks = len(set(rack_of.values()))
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    current = max(0, start_partition_id)
    out: dict[int, list[int]] = {}
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {rack_of[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                # Skip a rack that already has a replica while some rack has none, and a broker
                # that already has one while some broker has none.
                if (rack not in racks_used or len(racks_used) == n_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        out[current] = replicas
        current += 1
    return out
