"""Partition reassignment and preferred-replica election requests, ZooKeeper era (issue 14):
``/admin/reassign_partitions`` and ``/admin/preferred_replica_election`` with Kafka's JSON, on
every backend given with ``--backend``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from coordkit.engine import Cluster, EngineConfig, states
from coordkit.engine.errors import InvalidReplicaAssignmentError, UnknownTopicError
from coordkit.errors import NoNodeError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicAssignment
from coordkit.store import Create, SetData
from harness.waiting import wait_for

FAST = EngineConfig(
    replica_fetch_wait_max=0.02,
    replica_lag_time_max=0.6,
    auto_leader_rebalance=False,
)


def _done(cluster: Cluster) -> bool:
    result = cluster.converged()
    return (
        cluster.admin_store.exists(layout.REASSIGN_PARTITIONS) is None
        and bool(result)
        and not result.under_replicated
        and bool(cluster.settled())
    )


def _controller(cluster: Cluster) -> int:
    found: list[int] = []
    wait_for(
        lambda: (c := cluster.view().controller) is not None and not found.append(c),
        what="a controller",
    )
    return found[-1]


def test_kafkas_example_moves_replicas_1_2_3_to_4_5_6(make_cluster: Callable[..., Any]) -> None:
    """ORS {1,2,3} -> TRS {4,5,6}: RS {4,5,6,1,2,3}, ISR grows to six, leader 4, ISR {4,5,6},
    RS {4,5,6} (kafka-semantics.md's worked example)."""
    cluster: Cluster = make_cluster([1, 2, 3, 4, 5, 6], config=FAST)
    cluster.create_topic("t", 1, 3, assignment={0: [1, 2, 3]})
    wait_for(lambda: _done(cluster), what="the topic replicated")
    wait_for(lambda: not cluster.replication.offline(), what="the model to know the leader")
    assert cluster.produce(20, [("t", 0)]) == 20
    wait_for(lambda: cluster.replication.totals().acked == 20, what="records acknowledged")
    before = cluster.view().partition("t", 0)
    topic_id = cluster.view().topic_ids["t"]

    cluster.admin.reassign_partitions({("t", 0): [4, 5, 6]})
    wait_for(lambda: _done(cluster), what="the reassignment to complete")

    after = cluster.view().partition("t", 0)
    assert after.replicas == (4, 5, 6)
    assert after.leader == 4
    assert set(after.isr) == {4, 5, 6}
    assert after.leader_epoch > before.leader_epoch
    node = layout.TOPIC.decode(cluster.admin_store.get("/brokers/topics/t")[0], "/brokers/topics/t")
    assert node.version == 3
    assert node.topic_id == topic_id  # kept through both of the controller's writes
    assert node.adding == {}
    assert node.removing == {}
    # What the store accepted, in order: RS written with the maps, the ISR grown to all six,
    # the leader moved to 4, the ISR shrunk to TRS.
    assert cluster.history is not None
    writes = [w for w in cluster.history.writes if w.tp == ("t", 0)]
    isrs = [set(w.isr) for w in writes]
    assert {1, 2, 3, 4, 5, 6} in isrs
    assert writes[-1].leader == 4
    assert set(writes[-1].isr) == {4, 5, 6}
    assert cluster.history.violations() == []
    totals = cluster.replication.totals()
    assert totals.acked_lost == 0
    assert totals.unclean_elections == 0


def test_a_reassignment_resumes_after_the_controller_fails_over(
    make_cluster: Callable[..., Any],
) -> None:
    config = EngineConfig(
        replica_fetch_wait_max=0.02,
        replica_lag_time_max=0.6,
        auto_leader_rebalance=False,
        reassignment_max_moving=4,  # the throttle: the plan runs in several steps
    )
    cluster: Cluster = make_cluster(4, config=config)
    cluster.create_topic("t", 24, 2, assignment={p: [p % 2, 2 + p % 2] for p in range(24)})
    wait_for(lambda: _done(cluster), what="the topic replicated")
    plan = {("t", p): [2 + (p + 1) % 2, (p + 1) % 2] for p in range(24)}
    cluster.admin.reassign_partitions(plan)

    def left() -> int:
        try:
            data, _ = cluster.admin_store.get(layout.REASSIGN_PARTITIONS)
        except NoNodeError:
            return 0
        return len(layout.decode_reassignment(data))

    wait_for(lambda: left() < 24, what="the first partitions to move")
    victim = _controller(cluster)
    cluster.kill(victim)
    cluster.restart(victim)
    wait_for(lambda: _done(cluster), timeout=60, what="the rest of the plan after the failover")
    status = cluster.admin.reassignment_status(plan)
    assert set(status.values()) == {"completed"}
    view = cluster.view()
    assert {p.tp: list(p.replicas) for p in view.partitions} == plan
    assert cluster.history is not None
    assert cluster.history.violations() == []
    assert len(cluster.history.epochs()) >= 2


def test_a_reassignment_left_between_its_topic_write_and_epoch_bump_completes(
    make_cluster: Callable[..., Any],
) -> None:
    """A controller that dies after writing phase A's topic node (RS and the maps) but before
    bumping the leader epoch leaves brokers unaware of the adding replicas. The next controller
    bumps the epoch of every partition it finds in phase A (Kafka's ``onPartitionReassignment``
    on failover), so the replicas start and the plan completes. Here the half-done phase A is
    written by hand, as the dead controller would have left it."""
    cluster: Cluster = make_cluster(4, config=FAST)
    cluster.create_topic("t", 2, 2, assignment={0: [0, 1], 1: [1, 0]})
    wait_for(lambda: _done(cluster), what="the topic replicated")
    path = "/brokers/topics/t"
    _, stat = cluster.admin_store.get(path)
    before = cluster.view().partition("t", 0)
    half_done = TopicAssignment(
        partitions={0: (2, 3, 0, 1), 1: (1, 0)}, version=3, adding={0: (2, 3)}, removing={0: (0, 1)}
    )
    cluster.admin_store.commit(
        [
            SetData(path, layout.TOPIC.encode(half_done), stat.version),
            Create(layout.REASSIGN_PARTITIONS, layout.encode_reassignment({("t", 0): [2, 3]})),
        ]
    )
    wait_for(lambda: _done(cluster), timeout=30, what="the reassignment left in phase A")
    after = cluster.view().partition("t", 0)
    assert list(after.replicas) == [2, 3]
    assert set(after.isr) == {2, 3}
    assert after.leader_epoch > before.leader_epoch
    assert cluster.history is not None
    assert cluster.history.violations() == []


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({("t", 0): [0, 9]}, r"brokers \[9\] are not registered"),
        ({("t", 0): [1, 1]}, r"repeat a broker"),
        ({("t", 5): [0, 1]}, r"has partitions 0\.\.1"),
        ({("t", 1): []}, r"replica list is empty"),
        ({("nope", 0): [0, 1]}, r"does not exist"),
    ],
)
def test_invalid_plans_are_refused_and_change_nothing(
    make_cluster: Callable[..., Any], plan: dict[tuple[str, int], list[int]], message: str
) -> None:
    cluster: Cluster = make_cluster(3, config=FAST)
    cluster.create_topic("t", 2, 2)
    wait_for(lambda: _done(cluster), what="the topic replicated")
    topic_before = cluster.admin_store.get("/brokers/topics/t")
    with pytest.raises((InvalidReplicaAssignmentError, UnknownTopicError), match=message):
        cluster.admin.reassign_partitions(plan)
    assert cluster.admin_store.exists(layout.REASSIGN_PARTITIONS) is None
    assert cluster.admin_store.get("/brokers/topics/t") == topic_before


def test_a_second_plan_waits_for_the_first(make_cluster: Callable[..., Any]) -> None:
    config = EngineConfig(replica_fetch_wait_max=5.0, auto_leader_rebalance=False)
    cluster: Cluster = make_cluster(3, config=config)
    cluster.create_topic("t", 2, 1, assignment={0: [0], 1: [1]})
    wait_for(lambda: bool(cluster.settled()), what="settled")
    cluster.admin.reassign_partitions({("t", 0): [2]})
    with pytest.raises(InvalidReplicaAssignmentError, match="already running"):
        cluster.admin.reassign_partitions({("t", 1): [2]})


def test_entries_a_hand_written_request_gets_wrong_are_dropped_the_rest_runs(
    make_cluster: Callable[..., Any],
) -> None:
    cluster: Cluster = make_cluster(3, config=FAST)
    cluster.create_topic("t", 2, 2, assignment={0: [0, 1], 1: [1, 2]})
    wait_for(lambda: _done(cluster), what="the topic replicated")
    request = (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,1]},'
        b'{"topic":"t","partition":7,"replicas":[0,1]},'
        b'{"topic":"gone","partition":0,"replicas":[0]}]}'
    )
    cluster.admin_store.create(layout.REASSIGN_PARTITIONS, request)
    wait_for(lambda: _done(cluster), what="the valid entry to complete, the others dropped")
    assert cluster.view().partition("t", 0).replicas == (2, 1)
    assert cluster.view().partition("t", 1).replicas == (1, 2)


def test_a_preferred_replica_election_request_moves_leaders_home(
    make_cluster: Callable[..., Any],
) -> None:
    cluster: Cluster = make_cluster(3, config=FAST)
    cluster.create_topic("t", 3, 2, assignment={0: [0, 1], 1: [1, 2], 2: [2, 0]})
    wait_for(lambda: _done(cluster), what="the topic replicated")
    cluster.stop(0)  # controlled: leadership of t-0 moves to 1
    cluster.restart(0)
    wait_for(
        lambda: _done(cluster) and cluster.view().partition("t", 0).leader == 1,
        what="broker 0 back in the ISR, not leading",
    )
    cluster.admin.elect_preferred_leaders([("t", 0)])
    wait_for(
        lambda: (
            cluster.admin_store.exists(layout.PREFERRED_REPLICA_ELECTION) is None
            and cluster.view().partition("t", 0).leader == 0
        ),
        what="the preferred replica to lead again and the request to be consumed",
    )
    assert cluster.converged()
    assert states.state_path(("t", 0))  # the path helper stays the same


def test_a_reassignment_that_only_removes_a_replica_completes(
    make_cluster: Callable[..., Any],
) -> None:
    """ORS {1,0,2} -> TRS {1,2}: nothing to add, the target already in the ISR; Kafka completes
    it at once (no ISR change would come to start a later pass of the controller)."""
    cluster: Cluster = make_cluster([0, 1, 2], config=FAST)
    cluster.create_topic("t", 1, 3, assignment={0: [1, 0, 2]})
    wait_for(lambda: _done(cluster), what="the topic replicated")
    cluster.admin.reassign_partitions({("t", 0): [1, 2]})
    wait_for(lambda: _done(cluster), what="the reassignment to complete")
    after = cluster.view().partition("t", 0)
    assert after.replicas == (1, 2)
    assert set(after.isr) == {1, 2}
    node = layout.TOPIC.decode(cluster.admin_store.get("/brokers/topics/t")[0], "/brokers/topics/t")
    assert (node.adding, node.removing) == ({}, {})


def test_a_running_reassignment_given_its_original_replicas_back_is_cancelled(
    make_cluster: Callable[..., Any],
) -> None:
    """What AlterPartitionReassignments' cancellation writes: the request's target set back to
    the original replicas (RS without the adding ones) while the new replica cannot catch up
    (its broker is down); the controller drops it, and the partition is where it was."""
    cluster: Cluster = make_cluster([1, 2, 3], config=FAST)
    cluster.create_topic("t", 1, 2, assignment={0: [1, 2]})
    wait_for(lambda: _done(cluster), what="the topic replicated")
    cluster.kill(3)
    wait_for(lambda: 3 not in cluster.view().brokers, what="broker 3 gone")
    cluster.admin_store.create(
        layout.REASSIGN_PARTITIONS, layout.encode_reassignment({("t", 0): [1, 3]})
    )

    def topic() -> TopicAssignment:
        return layout.TOPIC.decode(cluster.admin_store.get("/brokers/topics/t")[0], "/t")

    wait_for(lambda: topic().adding == {0: (3,)}, what="phase A: broker 3 being added")
    original = topic().original_replicas(0)
    assert original == (1, 2)
    _, stat = cluster.admin_store.get(layout.REASSIGN_PARTITIONS)
    cluster.admin_store.set(
        layout.REASSIGN_PARTITIONS, layout.encode_reassignment({("t", 0): original}), stat.version
    )
    wait_for(lambda: cluster.admin_store.exists(layout.REASSIGN_PARTITIONS) is None,
             what="the cancelled request done")  # fmt: skip
    node = topic()
    assert (node.partitions[0], node.adding, node.removing) == ((1, 2), {}, {})
    after = cluster.view().partition("t", 0)
    assert after.replicas == (1, 2)
    assert 3 not in after.isr
