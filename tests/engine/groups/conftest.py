"""Consumer-group fixtures: a settled cluster with a topic, small timeouts, and a wait for a
stable group that checks the protocol's invariants every time it is reached."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.groups import Consumer, ConsumerState, GroupDescription, GroupState
from coordkit.kafka.model import TopicPartition
from harness.waiting import wait_for

#: Short timeouts keep every file well under a minute per backend.
SESSION = 1.0
HEARTBEAT = 0.1
GROUP_CONFIG = EngineConfig(
    group_initial_rebalance_delay=0.05,
    # Consumer groups (KIP-848) compute a new target in the heartbeat that needs it.
    consumer_group_assignment_interval=0.0,
    offsets_topic_num_partitions=5,
    auto_leader_rebalance=False,
)


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def start(cluster: Cluster, group: str, topics: Sequence[str], **options: Any) -> Consumer:
    options.setdefault("session_timeout", SESSION)
    options.setdefault("heartbeat_interval", HEARTBEAT)
    options.setdefault("rebalance_timeout", 5.0)
    return cluster.start_consumer(group, topics, **options)


def wait_stable(
    cluster: Cluster,
    group: str,
    consumers: Iterable[Consumer],
    partitions: Iterable[TopicPartition],
) -> GroupDescription:
    """Wait until the coordinator holds ``group`` Stable with exactly ``consumers`` as members,
    each of them holding its assignment of that generation and together every partition once;
    then check the recorded history."""
    members = list(consumers)
    expected = sorted(partitions)

    def stable() -> GroupDescription | None:
        description = cluster.describe_group(group)
        if description.state is not GroupState.STABLE:
            return None
        if {m.member_id for m in description.members} != {c.member_id for c in members}:
            return None
        for consumer in members:
            if consumer.state is not ConsumerState.STABLE:
                return None
            if consumer.generation != description.generation:
                return None
        if sorted(tp for c in members for tp in c.assignment()) != expected:
            return None
        return description

    description: GroupDescription = wait_for(stable, what=f"group {group!r} to be stable")
    history = cluster.group_history
    assert history is not None
    history.check()
    history.check_owned(group, expected)
    return description


@pytest.fixture
def group_cluster(make_cluster: Callable[..., Cluster]) -> Callable[..., Cluster]:
    """``group_cluster(topic=..., partitions=..., brokers=3, **config)``: a settled cluster with
    one topic (replication factor 2)."""

    def factory(
        topic: str = "orders", partitions: int = 6, brokers: int = 3, **config: Any
    ) -> Cluster:
        cluster = make_cluster(brokers, config=GROUP_CONFIG if not config else _config(config))
        wait_for(cluster.settled, what="the cluster to settle")
        cluster.create_topic(topic, partitions, min(2, brokers))
        wait_for(
            lambda: cluster.settled() and not cluster.view().uninitialised,
            what=f"topic {topic} to be ready",
        )
        return cluster

    return factory


def _config(overrides: dict[str, Any]) -> EngineConfig:
    import attrs

    return attrs.evolve(GROUP_CONFIG, **overrides)
