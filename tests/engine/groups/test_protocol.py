"""The classic protocol's rules, driven with raw requests against the coordinator: protocol vote,
INCONSISTENT_GROUP_PROTOCOL, static members, generation fencing of heartbeats and commits."""

from __future__ import annotations

from collections.abc import Callable

from coordkit.engine import Cluster
from coordkit.engine.groups import ErrorCode, GroupCoordinator, GroupState, Subscription
from coordkit.engine.groups.protocol import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from coordkit.kafka.model import TopicPartition
from coordkit.strategies.offsets import OffsetAndMetadata
from harness.waiting import wait_for

from .conftest import partitions_of, start, wait_stable

ALL = partitions_of("orders", 6)


def coordinator_of(cluster: Cluster, group: str) -> GroupCoordinator:
    def found() -> GroupCoordinator | None:
        broker_id = None
        for broker in cluster.brokers.values():
            if broker.alive:
                response = broker.group_coordinator.find_coordinator(group)
                broker_id = response.coordinator
                break
        if broker_id is None:
            return None
        broker = cluster.brokers.get(broker_id)
        return broker.group_coordinator if broker is not None and broker.alive else None

    coordinator: GroupCoordinator = wait_for(found, what=f"a coordinator for {group!r}")
    return coordinator


def join(
    coordinator: GroupCoordinator,
    group: str,
    protocols: tuple[str, ...],
    member_id: str = "",
    instance: str | None = None,
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        session_timeout=5.0,
        rebalance_timeout=5.0,
        protocols=protocols,
        subscription=Subscription(["orders"]),
    )


def test_protocol_is_chosen_by_votes_among_common_ones(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    coordinator = coordinator_of(cluster, "votes")
    # Candidates (supported by all): range, roundrobin. First choices: range, roundrobin, roundrobin.
    preferences = [
        ("range", "roundrobin", "sticky"),
        ("sticky", "roundrobin", "range"),
        ("roundrobin", "range"),
    ]
    futures = [coordinator.join_group(join(coordinator, "votes", p)) for p in preferences]
    responses: list[JoinGroupResponse] = [f.result(timeout=20) for f in futures]
    assert {r.error for r in responses} == {ErrorCode.NONE}
    assert {r.protocol for r in responses} == {"roundrobin"}
    assert len({r.generation for r in responses}) == 1

    refused = coordinator.join_group(join(coordinator, "votes", ("cooperative-sticky",)))
    assert refused.result(timeout=20).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_consumer_with_no_common_protocol_fails_clearly(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    member = start(cluster, "g", ["orders"], assignors=("range",))
    wait_stable(cluster, "g", [member], ALL)
    outsider = start(cluster, "g", ["orders"], assignors=("roundrobin",))
    wait_for(lambda: outsider.error is not None, what="the outsider to fail")
    assert "INCONSISTENT_GROUP_PROTOCOL" in str(outsider.error)
    assert outsider.assignment() == frozenset()
    wait_stable(cluster, "g", [member], ALL)


def test_static_member_restart_keeps_its_slot_without_rebalance(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    first = start(cluster, "g", ["orders"], group_instance_id="a", session_timeout=5.0)
    second = start(cluster, "g", ["orders"], group_instance_id="b", session_timeout=5.0)
    before = wait_stable(cluster, "g", [first, second], ALL)
    old_member, old_assignment = first.member_id, first.assignment()

    first.close()  # a static member does not leave: its slot waits for the restart
    restarted = start(cluster, "g", ["orders"], group_instance_id="a", session_timeout=5.0)
    after = wait_stable(cluster, "g", [restarted, second], ALL)
    assert after.generation == before.generation  # no rebalance
    assert restarted.member_id != old_member
    assert restarted.assignment() == old_assignment
    assert after.leader == (restarted.member_id if before.leader == old_member else before.leader)

    coordinator = coordinator_of(cluster, "g")
    stale = HeartbeatRequest("g", after.generation, old_member, "a")
    assert coordinator.heartbeat(stale).error is ErrorCode.FENCED_INSTANCE_ID
    commit = OffsetCommitRequest(
        "g", after.generation, old_member, {ALL[0]: OffsetAndMetadata(1)}, "a"
    )
    assert coordinator.offset_commit(commit).error is ErrorCode.FENCED_INSTANCE_ID


def test_commits_and_heartbeats_are_fenced_by_generation_and_member(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    member = start(cluster, "g", ["orders"])
    described = wait_stable(cluster, "g", [member], ALL)
    coordinator = coordinator_of(cluster, "g")
    offsets = {TopicPartition("orders", 0): OffsetAndMetadata(5)}

    def commit(generation: int, member_id: str) -> ErrorCode:
        request = OffsetCommitRequest("g", generation, member_id, offsets)
        return coordinator.offset_commit(request).error

    assert commit(described.generation - 1, member.member_id) is ErrorCode.ILLEGAL_GENERATION
    assert commit(described.generation, "nobody") is ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(-1, "") is ErrorCode.UNKNOWN_MEMBER_ID  # the group has members
    assert commit(described.generation, member.member_id) is ErrorCode.NONE
    stale = HeartbeatRequest("g", described.generation - 1, member.member_id)
    assert coordinator.heartbeat(stale).error is ErrorCode.ILLEGAL_GENERATION
    sync = SyncGroupRequest("g", described.generation + 1, member.member_id)
    assert coordinator.sync_group(sync).result(timeout=5).error is ErrorCode.ILLEGAL_GENERATION


def test_a_broker_that_does_not_lead_the_partition_is_not_coordinator(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    coordinator = coordinator_of(cluster, "g")
    other = next(
        b.group_coordinator
        for b in cluster.brokers.values()
        if b.alive and b.broker_id != coordinator.broker_id
    )
    response = other.join_group(join(other, "g", ("range",))).result(timeout=5)
    assert response.error is ErrorCode.NOT_COORDINATOR


def test_an_assignment_the_coordinator_could_not_store_starts_a_new_round(
    group_cluster: Callable[..., Cluster],
) -> None:
    """Kafka's rule: when the group's assignment cannot be stored during the leader's SyncGroup,
    the members get the error and the group prepares a rebalance, so that the rejoining members
    form a new generation instead of syncing the unstored one again."""
    cluster = group_cluster()
    coordinator = coordinator_of(cluster, "g")
    joined = coordinator.join_group(join(coordinator, "g", ("range",))).result(timeout=5)
    assert joined.error is ErrorCode.NONE
    assert joined.leader == joined.member_id
    persistence = coordinator.rebalancer.persistence
    stored = persistence.persist
    persistence.persist = lambda group: ErrorCode.COORDINATOR_NOT_AVAILABLE  # type: ignore[method-assign]
    try:
        sync = SyncGroupRequest("g", joined.generation, joined.member_id, assignments={})
        answer = coordinator.sync_group(sync).result(timeout=5)
    finally:
        persistence.persist = stored  # type: ignore[method-assign]
    assert answer.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert coordinator.describe_group("g").state is GroupState.PREPARING_REBALANCE
    retried = SyncGroupRequest("g", joined.generation, joined.member_id, assignments={})
    assert coordinator.sync_group(retried).result(timeout=5).error is (
        ErrorCode.REBALANCE_IN_PROGRESS
    )
    rejoined = coordinator.join_group(
        join(coordinator, "g", ("range",), member_id=joined.member_id)
    ).result(timeout=10)
    assert rejoined.error is ErrorCode.NONE
    assert rejoined.generation == joined.generation + 1
