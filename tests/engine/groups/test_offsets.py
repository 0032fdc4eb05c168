"""Committed offsets survive a consumer restart, a coordinator move and a full cluster restart on
the same store; new members start from the committed offset, else 0."""

from __future__ import annotations

from collections.abc import Callable

from coordkit.engine import Cluster, states
from coordkit.engine.groups import ErrorCode, offsets_partition_for
from coordkit.engine.groups.protocol import OffsetCommitRequest
from coordkit.kafka.coordinators import OFFSETS_TOPIC
from coordkit.strategies.offsets import OffsetAndMetadata
from harness.waiting import wait_for

from .conftest import partitions_of, start, wait_stable

ALL = partitions_of("orders", 6)


def test_offsets_survive_restarts_and_coordinator_moves(
    group_cluster: Callable[..., Cluster], make_cluster: Callable[..., Cluster]
) -> None:
    cluster = group_cluster()
    consumer = start(cluster, "g", ["orders"])
    wait_stable(cluster, "g", [consumer], ALL)
    assert consumer.positions() == dict.fromkeys(ALL, 0)  # nothing committed yet

    cluster.produce(7)
    cluster.replicate()
    assert consumer.lag() == dict.fromkeys(ALL, 7)
    assert consumer.poll() == 7 * len(ALL)
    assert consumer.lag() == dict.fromkeys(ALL, 0)
    consumer.close()  # commits on close

    restarted = start(cluster, "g", ["orders"])
    wait_stable(cluster, "g", [restarted], ALL)
    assert restarted.positions() == dict.fromkeys(ALL, 7)

    cluster.produce(3)
    cluster.replicate()
    restarted.poll()
    restarted.commit()
    coordinator = cluster.group_coordinator("g")
    assert coordinator is not None
    cluster.kill(coordinator)
    wait_for(
        lambda: cluster.group_coordinator("g") not in (None, coordinator),
        what="the coordinator to move",
    )
    wait_stable(cluster, "g", [restarted], ALL)
    restarted.crash()  # no commit: the last commit (10) stands
    again = start(cluster, "g", ["orders"])
    wait_stable(cluster, "g", [again], ALL)
    assert again.positions() == dict.fromkeys(ALL, 10)
    again.close()
    cluster.close()

    # A whole new cluster on the same store resumes the group and its offsets.
    reborn = make_cluster(3, config=cluster.config)
    wait_for(reborn.settled, what="the restarted cluster to settle")
    last = start(reborn, "g", ["orders"])
    described = wait_stable(reborn, "g", [last], ALL)
    assert last.positions() == dict.fromkeys(ALL, 10)
    assert described.generation > 1  # the generation carried on from the persisted metadata


def test_a_coordinator_that_lost_its_partition_cannot_store_offsets(
    group_cluster: Callable[..., Cluster],
) -> None:
    """Commits are fenced by the offsets partition's state version: once the partition's leader
    changed in the store, the old coordinator answers NOT_COORDINATOR and writes nothing, even
    before any event told it (a deposed leader cannot append in Kafka either)."""
    cluster = group_cluster()
    consumer = start(cluster, "g", ["orders"])
    wait_stable(cluster, "g", [consumer], ALL)
    consumer.commit()
    old = cluster.group_coordinator("g")
    assert old is not None
    successor = next(b for b in cluster.live_brokers() if b != old)
    path = states.state_path(
        (
            OFFSETS_TOPIC,
            offsets_partition_for(
                "g",
                cluster.strategies.group_coordinator,
                cluster.config.offsets_topic_num_partitions,
            ),
        )
    )
    data, stat = cluster.admin_store.get(path)
    moved = states.decode_state(path, data, stat.version)
    cluster.admin_store.set(
        path,
        states.encode_state(
            successor, moved.leader_epoch + 1, (successor,), moved.controller_epoch
        ),
        stat.version,
    )
    coordinator = cluster.broker(old).group_coordinator
    response = coordinator.offset_commit(
        OffsetCommitRequest(
            "g", consumer.generation, consumer.member_id, {ALL[0]: OffsetAndMetadata(99)}
        )
    )
    assert response.error is ErrorCode.NOT_COORDINATOR
    assert coordinator.offset_storage.fetch("g", [ALL[0]]).get(ALL[0]) != OffsetAndMetadata(99)
    partition = offsets_partition_for(
        "g", cluster.strategies.group_coordinator, cluster.config.offsets_topic_num_partitions
    )
    wait_for(
        lambda: partition not in coordinator.hosted_partitions(),
        what="the old coordinator to unload the partition",
    )
