"""Group-coordinator selection: Kafka's vectors through the plugin, the offsets topic created on
first need, and the coordinator following the leadership of the group's offsets partition."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from coordkit.engine import Cluster
from coordkit.engine.groups import offsets_partition_for
from coordkit.kafka.coordinators import OFFSETS_TOPIC, GroupCoordinatorSelection
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.elections import ElectionKind
from harness.vectors import kafka_vectors
from harness.waiting import wait_for

from .conftest import GROUP_CONFIG, partitions_of, start, wait_stable

VECTORS = kafka_vectors()["java_string_hashcode_and_coordinator_partition_50"]


@pytest.mark.parametrize(("group", "expected"), sorted(VECTORS.items()))
def test_kafka_strategy_matches_kafkas_vectors(group: str, expected: list[int]) -> None:
    strategy = get_plugin_manager().election(ElectionKind.GROUP_COORDINATOR.value, "kafka")
    assert isinstance(strategy, GroupCoordinatorSelection)
    assert strategy.partition_for(group, 50) == expected[1]


def test_coordinator_is_the_leader_of_the_groups_offsets_partition(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster(brokers=2)
    assert OFFSETS_TOPIC not in cluster.admin.topics()
    consumer = start(cluster, "g", ["orders"])
    wait_stable(cluster, "g", [consumer], partitions_of("orders", 6))

    assignment = cluster.admin.assignment(OFFSETS_TOPIC)  # created on first need
    assert assignment.partition_count == GROUP_CONFIG.offsets_topic_num_partitions
    assert assignment.replication_factor == 2  # min(3, live brokers)
    # Kafka's group coordinator's topic configs (offsetsTopicConfigs), as Kafka 3.9 writes them.
    assert cluster.admin.config(OFFSETS_TOPIC) == {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": "104857600",
    }
    partition = offsets_partition_for(
        "g", cluster.strategies.group_coordinator, GROUP_CONFIG.offsets_topic_num_partitions
    )
    leader = cluster.view().partition(OFFSETS_TOPIC, partition).leader
    assert cluster.group_coordinator("g") == leader
    assert cluster.describe_group("g").coordinator == leader
    assert consumer.coordinator == leader


def test_coordinator_moves_with_partition_leadership(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    consumer = start(cluster, "g", ["orders"])
    before = wait_stable(cluster, "g", [consumer], partitions_of("orders", 6))
    old = before.coordinator
    assert old is not None
    cluster.stop(old)  # controlled shutdown moves the leadership first
    wait_for(
        lambda: cluster.group_coordinator("g") not in (None, old), what="the coordinator to move"
    )
    after = wait_stable(cluster, "g", [consumer], partitions_of("orders", 6))
    assert after.coordinator not in (None, old)
    wait_for(lambda: consumer.coordinator == after.coordinator, what="the consumer to follow")
    assert after.generation == before.generation  # resumed from the persisted metadata
    assert after.members[0].member_id == consumer.member_id
