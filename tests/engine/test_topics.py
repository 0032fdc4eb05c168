"""Topic creation, partition increase, deletion and config, through the store as Kafka did."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from coordkit.engine import EngineConfig, TopicExistsError, UnknownTopicError
from coordkit.engine.errors import InvalidPartitionsError, InvalidReplicationFactorError
from coordkit.errors import LayoutError
from coordkit.kafka import layout
from coordkit_placements.kafka import assign_replicas, brokers_from
from harness.waiting import wait_for


def test_create_topic_places_replicas_and_elects_first_leaders(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    cluster = make_cluster(4)
    assignment = cluster.create_topic("orders", 8, 3)
    # Kafka's rack-unaware placement; the cluster's seed (7) fixes its random start.
    placed = {p: list(r) for p, r in assignment.partitions.items()}
    assert placed == assign_replicas(brokers_from(range(4)), 8, 3, rng=random.Random(7))
    firsts = [placed[p][0] for p in range(8)]
    assert all(firsts[p] == (firsts[0] + p) % 4 for p in range(8))  # round-robin leaders
    view = until(cluster, lambda v: len(v.partitions) == 8, "orders to get leaders")
    for p in view.partitions:
        assert p.replicas == tuple(placed[p.partition])
        assert (p.leader, p.isr, p.leader_epoch) == (p.replicas[0], p.replicas, 0)
        assert p.controller_epoch == view.epoch
    counts = view.leaders_per_broker()
    assert sorted(counts.values()) == [2, 2, 2, 2]


def test_rack_aware_topic(make_cluster: Callable[..., Any], until: Callable[..., Any]) -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    cluster = make_cluster(4, racks=racks)
    assignment = cluster.create_topic("r", 8, 2)
    for replicas in assignment.partitions.values():
        assert {racks[b] for b in replicas} == {"a", "b"}
    view = until(cluster, lambda v: len(v.partitions) == 8, "r to get leaders")
    assert all(p.leader == p.replicas[0] for p in view.partitions)


def test_topic_errors(make_cluster: Callable[..., Any], until: Callable[..., Any]) -> None:
    cluster = make_cluster(2)
    cluster.create_topic("t", 2, 2)
    with pytest.raises(TopicExistsError, match="'t' already exists"):
        cluster.create_topic("t", 1, 1)
    with pytest.raises(InvalidReplicationFactorError, match="3 larger than available brokers: 2"):
        cluster.create_topic("u", 1, 3)
    with pytest.raises(LayoutError, match="topic"):
        cluster.create_topic("bad/name", 1, 1)
    with pytest.raises(UnknownTopicError, match="'nope' does not exist"):
        cluster.delete_topic("nope")
    with pytest.raises(UnknownTopicError):
        cluster.add_partitions("nope", 3)
    until(cluster, lambda v: len(v.partitions) == 2, "t to get leaders")
    with pytest.raises(InvalidPartitionsError, match="can only be increased"):
        cluster.add_partitions("t", 2)
    # Nothing of the failed calls reached the store.
    assert cluster.admin.topics() == ["t"]
    assert cluster.admin_store.children(layout.CONFIG_TOPICS) == ["t"]


def test_partition_increase(make_cluster: Callable[..., Any], until: Callable[..., Any]) -> None:
    cluster = make_cluster(3)
    first = cluster.create_topic("t", 3, 2)
    until(cluster, lambda v: len(v.partitions) == 3, "t to get leaders")
    grown = cluster.add_partitions("t", 7)
    assert dict(grown.partitions) | dict(first.partitions) == dict(grown.partitions)
    # Kafka's addPartitions: start at the first broker >= partition 0's first replica.
    start = next(i for i, b in enumerate(range(3)) if b >= first.partitions[0][0])
    expected = assign_replicas(
        brokers_from(range(3)), 4, 2, fixed_start_index=start, start_partition_id=3
    )
    assert {p: list(grown.partitions[p]) for p in range(3, 7)} == expected
    view = until(cluster, lambda v: len(v.partitions) == 7, "new partitions to get leaders")
    for p in view.partitions:
        assert (p.leader, p.isr) == (p.replicas[0], p.replicas)


def test_topic_deletion(make_cluster: Callable[..., Any], until: Callable[..., Any]) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("gone", 4, 2, config={"cleanup.policy": "compact"})
    cluster.create_topic("kept", 2, 2)
    until(cluster, lambda v: len(v.partitions) == 6, "topics to get leaders")
    cluster.delete_topic("gone")
    store = cluster.admin_store
    view = until(
        cluster,
        lambda v: (
            {p.topic for p in v.partitions} == {"kept"} and not store.children(layout.DELETE_TOPICS)
        ),
        "gone to be deleted",
    )
    for path in (
        "/brokers/topics/gone",
        "/config/topics/gone",
        "/admin/delete_topics/gone",
    ):
        assert store.exists(path) is None, path
    assert store.children(layout.BROKER_TOPICS) == ["kept"]
    assert len(view.partitions) == 2
    # The name can be used again; its partitions start over at leader epoch 0.
    cluster.create_topic("gone", 1, 1)
    again = until(
        cluster, lambda v: any(p.topic == "gone" for p in v.partitions), "gone to come back"
    )
    assert again.partition("gone", 0).leader_epoch == 0
    assert cluster.history is not None
    assert cluster.history.violations() == []


def test_deletion_request_for_unknown_topic_is_dropped(
    make_cluster: Callable[..., Any], settled: Callable[..., Any]
) -> None:
    cluster = make_cluster(1)
    settled(cluster)
    cluster.admin_store.create("/admin/delete_topics/phantom", b"")
    wait_for(
        lambda: cluster.admin_store.exists("/admin/delete_topics/phantom") is None,
        what="the request to be dropped",
    )


def test_deletion_disabled_keeps_the_topic(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    cluster = make_cluster(1, config=EngineConfig(delete_topic_enable=False))
    cluster.create_topic("t", 1, 1)
    until(cluster, lambda v: len(v.partitions) == 1, "t to get a leader")
    cluster.delete_topic("t")
    wait_for(
        lambda: not cluster.admin_store.children(layout.DELETE_TOPICS),
        what="the request to be dropped",
    )
    assert cluster.admin.topics() == ["t"]


def test_new_partitions_wait_for_a_live_replica(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    cluster = make_cluster([0, 1])
    cluster.create_topic("t", 2, 1, assignment={0: [0], 1: [5]})  # broker 5 is not up
    view = until(cluster, lambda v: len(v.partitions) == 1, "t-0 to get a leader")
    assert view.uninitialised == (("t", 1),)
    cluster.start_broker(5)
    view = until(cluster, lambda v: len(v.partitions) == 2, "t-1 to get a leader")
    assert view.partition("t", 1).leader == 5


def test_topic_config(make_cluster: Callable[..., Any], settled: Callable[..., Any]) -> None:
    cluster = make_cluster(1)
    cluster.create_topic("t", 1, 1, config={"retention.ms": "1000"})
    assert cluster.admin.config("t") == {"retention.ms": "1000"}
    cluster.admin.set_config("t", {"retention.ms": "2000", "cleanup.policy": "delete"})
    data, _ = cluster.admin_store.get("/config/topics/t")
    assert data == b'{"version":1,"config":{"cleanup.policy":"delete","retention.ms":"2000"}}'
    # Announced as Kafka's AdminZkClient announces it, for Kafka's brokers on the same tree.
    (change,) = cluster.admin_store.children("/config/changes")
    assert change == "config_change_0000000000"
    data, _ = cluster.admin_store.get(f"/config/changes/{change}")
    assert data == b'{"version":2,"entity_path":"topics/t"}'
    with pytest.raises(UnknownTopicError):
        cluster.admin.set_config("nope", {})


def test_deletion_waits_for_offline_replicas(
    make_cluster: Callable[..., Any], until: Callable[..., Any], settled: Callable[..., Any]
) -> None:
    """Kafka's TopicDeletionManager: a topic with a replica on a dead broker stays queued
    (ineligible); deletion completes once the broker is back."""
    cluster = make_cluster(3)
    cluster.create_topic("gone", 3, 3)
    until(cluster, lambda v: len(v.partitions) == 3, "gone to get leaders")
    victim = next(b for b in cluster.live_brokers() if b != cluster.view().controller)
    cluster.kill(victim)
    settled(cluster)
    cluster.delete_topic("gone")
    store = cluster.admin_store
    settled(cluster)
    # Still queued, every node in place.
    assert store.children(layout.DELETE_TOPICS) == ["gone"]
    assert store.exists("/brokers/topics/gone") is not None
    assert store.exists("/config/topics/gone") is not None
    cluster.restart(victim)
    until(
        cluster,
        lambda v: not v.partitions and not store.children(layout.DELETE_TOPICS),
        "gone to be deleted once every replica's broker is back",
    )
    assert store.exists("/config/topics/gone") is None
