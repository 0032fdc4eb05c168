"""KIP-848's consumer group protocol on the engine's group coordinator, on every backend.

Members here are driven heartbeat by heartbeat as a client drives them: each keeps what its last
answer assigned, gives back what an answer takes away, and reports what it owns. The property
held at every step: no partition is owned by two members at once (as the members see it), and
after the last change the group reaches Stable with every partition owned once.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Callable

import pytest

from coordkit.engine import Cluster
from coordkit.engine.groups import ErrorCode, GroupState
from coordkit.engine.groups.coordinator import GroupCoordinator
from coordkit.engine.groups.modern import records
from coordkit.engine.groups.modern.protocol import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from coordkit.engine.groups.protocol import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
)
from coordkit.errors import LayoutError
from coordkit.kafka.model import TopicPartition
from coordkit.strategies.offsets import OffsetAndMetadata
from harness.waiting import wait_for

from .conftest import partitions_of, start, wait_stable

GROUP = "g848"
TOPIC = "orders"
PARTITIONS = 6


class Member:
    """A client of the consumer protocol: what it owns, from the answers it got."""

    def __init__(self, member_id: str, *, instance_id: str | None = None,
                 assignor: str | None = None) -> None:  # fmt: skip
        self.member_id = member_id
        self.instance_id = instance_id
        self.assignor = assignor
        self.epoch = 0
        self.owned: dict[uuid.UUID, tuple[int, ...]] = {}
        #: After a lost answer a client sends every field again (a full heartbeat).
        self.full = False

    def request(self, **changes: object) -> ConsumerGroupHeartbeatRequest:
        fields: dict[str, object] = {
            "group_id": GROUP,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": self.instance_id,
            "owned": self.owned,
        }
        if self.full:
            fields.update(rebalance_timeout_ms=30_000, subscribed_topic_names=(TOPIC,))
        if self.epoch == 0:
            fields.update(
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=(TOPIC,),
                server_assignor=self.assignor,
                owned={},
            )
        fields.update(changes)
        return ConsumerGroupHeartbeatRequest(**fields)  # type: ignore[arg-type]

    def heartbeat(
        self, coordinator: GroupCoordinator, **changes: object
    ) -> ConsumerGroupHeartbeatResponse:
        answer = coordinator.consumer_group_heartbeat(self.request(**changes))
        if answer.error is ErrorCode.NONE:
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.owned = {t: tuple(sorted(ps)) for t, ps in answer.assignment.items()}
        return answer

    def partitions(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def coordinator_of(cluster: Cluster) -> GroupCoordinator:
    def found() -> GroupCoordinator | None:
        broker = cluster.group_coordinator(GROUP)
        if broker is None:
            cluster.broker(cluster.broker_ids[0]).group_coordinator.find_coordinator(GROUP)
            return None
        coordinator = cluster.broker(broker).group_coordinator
        return coordinator if coordinator.hosting.hosts(coordinator.partition_for(GROUP)) else None

    return wait_for(found, what=f"a coordinator for {GROUP}")


def assert_disjoint(members: list[Member]) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for member in members:
        for tp in member.partitions():
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {member.member_id}"
            seen[tp] = member.member_id


def settle(coordinator: GroupCoordinator, members: list[Member], rounds: int = 20) -> None:
    """Heartbeat every member until the group is Stable and every partition is owned once."""
    for _ in range(rounds):
        for member in members:
            answer = member.heartbeat(coordinator)
            assert answer.error is ErrorCode.NONE, answer
            assert_disjoint(members)
        (description,) = coordinator.consumer_group_describe([GROUP])
        owned = sorted(tp for m in members for tp in m.partitions())
        if description.state == "Stable" and len(owned) == PARTITIONS:
            assert {m.member_epoch for m in description.members} == {description.group_epoch}
            return
    raise AssertionError(f"not stable after {rounds} rounds: {description}")


@pytest.fixture
def coordinator(group_cluster: Callable[..., Cluster]) -> GroupCoordinator:
    cluster = group_cluster(topic=TOPIC, partitions=PARTITIONS)
    return coordinator_of(cluster)


def test_members_join_and_partitions_move_only_once_revoked(coordinator: GroupCoordinator) -> None:
    first = Member("m1")
    answer = first.heartbeat(coordinator)
    # Kafka 4.4's groups start at epoch 1: the first member's join makes it 2.
    assert (answer.error, answer.member_epoch, len(first.partitions())) == (ErrorCode.NONE, 2, 6)
    second = Member("m2")
    answer = second.heartbeat(coordinator)
    # The second member's target is held by the first: it gets nothing until it is released.
    assert (answer.member_epoch, second.partitions()) == (3, set())
    answer = first.heartbeat(coordinator)  # told to give three back, at its epoch
    assert (answer.member_epoch, len(first.partitions())) == (2, 3)
    assert_disjoint([first, second])
    settle(coordinator, [first, second])
    assert (len(first.partitions()), len(second.partitions())) == (3, 3)


def test_a_member_leaving_bumps_the_epoch_and_frees_its_partitions(
    coordinator: GroupCoordinator,
) -> None:
    members = [Member(f"m{i}") for i in range(3)]
    settle(coordinator, members)
    leaving = members.pop()
    answer = coordinator.consumer_group_heartbeat(leaving.request(member_epoch=-1))
    assert (answer.error, answer.member_epoch) == (ErrorCode.NONE, -1)
    settle(coordinator, members)
    (description,) = coordinator.consumer_group_describe([GROUP])
    assert description.group_epoch == 5  # from 1: three joins, one leave
    assert sorted(len(m.partitions()) for m in members) == [3, 3]


def test_epoch_errors_are_kafkas(coordinator: GroupCoordinator) -> None:
    member = Member("m1")
    settle(coordinator, [member])
    ahead = coordinator.consumer_group_heartbeat(member.request(member_epoch=member.epoch + 1))
    assert ahead.error is ErrorCode.FENCED_MEMBER_EPOCH
    unknown = coordinator.consumer_group_heartbeat(Member("nobody").request(member_epoch=3))
    assert unknown.error is ErrorCode.UNKNOWN_MEMBER_ID
    absent = next(  # a group this coordinator would coordinate, that does not exist
        name
        for name in (f"absent-{i}" for i in range(1000))
        if coordinator.hosting.hosts(coordinator.partition_for(name))
    )
    missing = coordinator.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(absent, "x", 1))
    assert (missing.error, missing.message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        f"Group {absent} not found.",
    )
    bad = coordinator.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(GROUP, "x", -3))
    assert (bad.error, bad.message) == (ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
    first = coordinator.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(GROUP, "y", 0, subscribed_topic_names=(TOPIC,), owned={})
    )
    assert (first.error, first.message) == (
        ErrorCode.INVALID_REQUEST,
        "RebalanceTimeoutMs must be provided in first request.",
    )
    assignor = coordinator.consumer_group_heartbeat(Member("z", assignor="nope").request())
    assert assignor.error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert assignor.message == (
        "ServerAssignor nope is not supported. Supported assignors: uniform, range."
    )


def test_a_static_member_away_keeps_its_partitions_and_its_successor_takes_them(
    coordinator: GroupCoordinator,
) -> None:
    static = Member("s1", instance_id="instance-1")
    other = Member("d1")
    settle(coordinator, [static, other])
    held = static.partitions()
    away = coordinator.consumer_group_heartbeat(static.request(member_epoch=-2))
    assert (away.error, away.member_epoch) == (ErrorCode.NONE, -2)
    successor = Member("s1-again", instance_id="instance-1")
    answer = successor.heartbeat(coordinator)
    assert answer.error is ErrorCode.NONE
    assert successor.partitions() == held  # what the instance had, without a rebalance
    (description,) = coordinator.consumer_group_describe([GROUP])
    assert "s1" not in {m.member_id for m in description.members}


def test_an_instance_id_in_use_is_refused_to_a_second_member(
    coordinator: GroupCoordinator,
) -> None:
    # Separate from the test above: a join and a leave each change the target, and when the
    # ticker computes it in between decides which partitions the away instance is kept.
    holder = Member("s2", instance_id="instance-2")
    assert holder.heartbeat(coordinator).error is ErrorCode.NONE
    clash = Member("s3", instance_id="instance-2")
    assert clash.heartbeat(coordinator).error is ErrorCode.UNRELEASED_INSTANCE_ID
    coordinator.consumer_group_heartbeat(holder.request(member_epoch=-1))
    released = Member("s4", instance_id="instance-2")
    assert released.heartbeat(coordinator).error is ErrorCode.NONE


#: Seeds of the random schedules (``COORDKIT_GROUP_SEEDS=1,2`` replays others).
SEEDS = [int(s) for s in os.environ.get("COORDKIT_GROUP_SEEDS", "1,2,3,4,5").split(",")]


@pytest.mark.parametrize("seed", SEEDS, ids=lambda seed: f"seed{seed}")
def test_random_joins_leaves_and_lost_answers_never_share_a_partition(
    coordinator: GroupCoordinator, seed: int
) -> None:
    """Members join, leave, and lose answers; a fenced member gives everything up and joins
    again, as clients do. Replay one schedule with ``COORDKIT_GROUP_SEEDS=<seed>``."""
    rng = random.Random(seed)
    members: list[Member] = []
    try:
        for step in range(150):
            roll = rng.random()
            if roll < 0.15 or not members:
                members.append(Member(f"r{step}", assignor=rng.choice([None, "range"])))
            elif roll < 0.25 and len(members) > 1:
                gone = members.pop(rng.randrange(len(members)))
                coordinator.consumer_group_heartbeat(gone.request(member_epoch=-1))
            member = rng.choice(members)
            answer = coordinator.consumer_group_heartbeat(member.request())
            member.full = False
            if rng.random() < 0.1:
                member.full = True  # the answer is lost: it keeps its epoch and what it owns
                continue
            if answer.error is ErrorCode.FENCED_MEMBER_EPOCH:
                member.epoch, member.owned = 0, {}  # give everything up, join again
                continue
            assert answer.error is ErrorCode.NONE, answer
            member.epoch = answer.member_epoch
            if answer.assignment is not None:
                member.owned = {t: tuple(sorted(ps)) for t, ps in answer.assignment.items()}
            assert_disjoint(members)
        settle(coordinator, members)
    except AssertionError as exc:
        raise AssertionError(
            f"seed {seed} (COORDKIT_GROUP_SEEDS={seed} replays it): {exc}"
        ) from exc


def test_the_group_resumes_its_epochs_on_a_new_coordinator(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster(topic=TOPIC, partitions=PARTITIONS)
    coordinator = coordinator_of(cluster)
    members = [Member("m1"), Member("m2")]
    settle(coordinator, members)
    epochs = [m.epoch for m in members]
    cluster.kill(coordinator.broker_id)
    successor = wait_for(
        lambda: (c := coordinator_of(cluster)).broker_id != coordinator.broker_id and c,
        what="another coordinator",
    )
    (description,) = successor.consumer_group_describe([GROUP])
    assert (description.state, description.group_epoch) == ("Stable", 3)
    assert sorted(m.member_epoch for m in description.members) == sorted(epochs)
    settle(successor, members)
    assert [m.epoch for m in members] == epochs  # nothing moved: the same epochs go on


def test_an_empty_classic_group_becomes_a_consumer_group_and_back(
    group_cluster: Callable[..., Cluster],
) -> None:
    """Kafka's default migration policy, for empty groups: the first member of the other protocol
    takes the group over; a group with members of the other protocol refuses it."""
    cluster = group_cluster(topic=TOPIC, partitions=PARTITIONS)
    classic = start(cluster, GROUP, [TOPIC])
    wait_stable(cluster, GROUP, [classic], partitions_of(TOPIC, PARTITIONS))
    coordinator = coordinator_of(cluster)
    refused = Member("m1").heartbeat(coordinator)
    assert (refused.error, refused.message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        f"Group {GROUP} is not a consumer group.",
    )
    classic.close()
    wait_for(
        lambda: cluster.describe_group(GROUP).state is GroupState.EMPTY,
        what="the classic group to be empty",
    )
    member = Member("m1")
    settle(coordinator, [member])
    (description,) = coordinator.consumer_group_describe([GROUP])
    assert (description.state, description.group_epoch) == ("Stable", 2)
    listed = {g.group_id: g for g in coordinator.list_groups()}
    assert (listed[GROUP].group_type, listed[GROUP].state_name) == ("consumer", "Stable")
    # A classic member cannot join while the consumer group has members ...
    assert cluster.describe_group(GROUP).error is ErrorCode.GROUP_ID_NOT_FOUND
    coordinator.consumer_group_heartbeat(member.request(member_epoch=-1))
    # ... and takes the group back once it is empty: a new classic group, from generation 1
    # as Kafka's (the recorder's generation check spans one group's life, so it is not used).
    again = start(cluster, GROUP, [TOPIC])
    wait_for(
        lambda: (
            cluster.describe_group(GROUP).state is GroupState.STABLE
            and len(again.assignment()) == PARTITIONS
        ),
        what="the classic group back, stable",
    )
    assert cluster.describe_group(GROUP).generation == 1
    again.close()


def test_a_burst_of_joins_is_assigned_once_per_assignment_interval(
    group_cluster: Callable[..., Cluster],
) -> None:
    """``group.consumer.assignment.interval.ms``: members joining within the interval of the last
    target computation wait (the group stays Assigning); the coordinator's sweep computes the
    target once the interval has passed, without a heartbeat."""
    cluster = group_cluster(
        topic=TOPIC, partitions=PARTITIONS, consumer_group_assignment_interval=2.0
    )
    coordinator = coordinator_of(cluster)
    first = Member("m1")
    assert first.heartbeat(coordinator).member_epoch == 2  # the first target: computed at once
    joiners = [Member(f"m{i}") for i in range(2, 5)]
    for member in joiners:
        answer = member.heartbeat(coordinator)
        # Reconciled to the target there is (epoch 2, nothing for it) while the group waits.
        assert (answer.error, answer.member_epoch, answer.assignment) == (ErrorCode.NONE, 2, {})
    (description,) = coordinator.consumer_group_describe([GROUP])
    assert (description.state, description.group_epoch, description.assignment_epoch) == (
        "Assigning",
        5,
        2,
    )
    described = wait_for(
        lambda: (d := coordinator.consumer_group_describe([GROUP])[0]).assignment_epoch == 5 and d,
        what="the sweep to compute the held-back target",
        timeout=10,
    )
    assert described.state == "Reconciling"
    settle(coordinator, [first, *joiners])


def test_a_regex_subscription_is_resolved_apart_and_follows_new_topics(
    group_cluster: Callable[..., Cluster],
) -> None:
    """As Kafka 4.4 resolves regexes in the background: the join answers at once (epoch 1, nothing
    yet); the coordinator's sweep resolves the regex and bumps the group epoch; a topic created
    later that matches joins the subscription at the next resolution."""
    cluster = group_cluster(topic=TOPIC, partitions=PARTITIONS)
    coordinator = coordinator_of(cluster)
    member = Member("re1")
    answer = member.heartbeat(
        coordinator, subscribed_topic_names=(), subscribed_topic_regex="ord.*"
    )
    assert (answer.error, answer.member_epoch, member.partitions()) == (ErrorCode.NONE, 1, set())
    wait_for(
        lambda: (
            member.heartbeat(coordinator).error is ErrorCode.NONE
            and len(member.partitions()) == PARTITIONS
        ),
        what="the regex's partitions",
    )
    assert member.epoch == 2
    cluster.create_topic("orders-eu", 2, 1)
    wait_for(
        lambda: (
            member.heartbeat(coordinator).error is ErrorCode.NONE
            and len(member.partitions()) == PARTITIONS + 2
        ),
        what="the new topic's partitions",
    )
    (description,) = coordinator.consumer_group_describe([GROUP])
    assert description.members[0].subscribed_topic_regex == "ord.*"


def test_a_commit_at_an_older_epoch_is_taken_for_the_partitions_held_since(
    coordinator: GroupCoordinator,
) -> None:
    """Kafka 4.4's OffsetCommit check for consumer groups: at the member's epoch, the whole
    commit; at an older one (sent before its answer moved it on), the partitions it has held
    since that epoch, the rest STALE_MEMBER_EPOCH; at a newer one, nothing."""
    first = Member("m1")
    settle(coordinator, [first])
    old_epoch = first.epoch
    second = Member("m2")
    second.heartbeat(coordinator)
    first.heartbeat(coordinator)  # revokes three, at its epoch
    first.heartbeat(coordinator)  # acknowledged: the next epoch, three kept
    assert first.epoch == old_epoch + 1
    kept = {p for _, p in first.partitions()}
    gone = set(range(PARTITIONS)) - kept
    offsets = {TopicPartition(TOPIC, p): OffsetAndMetadata(10) for p in range(PARTITIONS)}

    def commit(epoch: int) -> OffsetCommitResponse:
        return coordinator.offset_commit(OffsetCommitRequest(GROUP, epoch, "m1", offsets=offsets))

    older = commit(old_epoch)
    assert older.error is ErrorCode.NONE
    assert set(older.partition_errors) == {TopicPartition(TOPIC, p) for p in gone}
    assert set(older.partition_errors.values()) == {ErrorCode.STALE_MEMBER_EPOCH}
    committed = coordinator.offset_fetch(OffsetFetchRequest(GROUP)).offsets
    assert {tp.partition for tp in committed} == kept
    assert commit(first.epoch) == OffsetCommitResponse(ErrorCode.NONE)
    assert commit(first.epoch + 1).error is ErrorCode.STALE_MEMBER_EPOCH


def test_stored_consumer_groups_nested_too_deep_are_refused_in_one_line() -> None:
    """A group or member node is read with bounded JSON: nesting thousands deep is a layout error
    (logged, the node left out), never a RecursionError."""
    deep = b"[" * 5000 + b"]" * 5000
    assert records.is_consumer_group(deep) is False
    with pytest.raises(LayoutError, match="not JSON"):
        records.decode_member(deep, "/coordkit/groups/g/members/x")
