"""Consumer-group requests on the wire, through coordkit's own codec: the errors Kafka's clients
follow (NOT_COORDINATOR, MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, FENCED_INSTANCE_ID), opaque metadata and assignments handed back as sent,
offsets committed and fetched back, DescribeGroups and ListGroups."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from coordkit.kafka.model import TopicPartition
from coordkit.protocol import messages
from coordkit.testing.waiting import wait_for
from harness.consumer_bytes import assignment_bytes, subscription_bytes
from serve.conftest import RawClient, ServeFactory, ServeProcess

pytestmark = pytest.mark.timeout(180)

Connect = Callable[[str], RawClient]
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
OFFSET_METADATA_TOO_LARGE = 12
UNKNOWN_TOPIC_ID = 100
INCONSISTENT_GROUP_PROTOCOL = 23

FindCoordinator = messages.FindCoordinatorRequest
JoinGroup = messages.JoinGroupRequest
SyncGroup = messages.SyncGroupRequest
Heartbeat = messages.HeartbeatRequest
LeaveGroup = messages.LeaveGroupRequest
OffsetCommit = messages.OffsetCommitRequest
OffsetFetch = messages.OffsetFetchRequest
DescribeGroups = messages.DescribeGroupsRequest
ListGroups = messages.ListGroupsRequest

SESSION_MS = 2_000
REBALANCE_MS = 4_000


def _coordinator(client: RawClient, group: str, server: ServeProcess) -> tuple[int, str]:
    """The coordinator's id and address (retried while the offsets topic gets its leaders)."""

    def ask() -> tuple[int, str] | None:
        answer = client.call(FindCoordinator(key=group, key_type=0), 3)
        if answer.error_code == COORDINATOR_NOT_AVAILABLE:
            return None
        assert answer.error_code == 0
        assert server.addresses[answer.node_id] == f"{answer.host}:{answer.port}"
        return answer.node_id, f"{answer.host}:{answer.port}"

    return wait_for(ask, 60, f"the coordinator of {group}")


def _join(
    group: str,
    member_id: str = "",
    *,
    topics: tuple[str, ...] = ("orders",),
    instance: str | None = None,
    protocols: tuple[str, ...] = ("range",),
) -> Any:
    metadata = subscription_bytes(list(topics))
    return JoinGroup(
        group_id=group,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[
            JoinGroup.JoinGroupRequestProtocol(name=p, metadata=metadata) for p in protocols
        ],
    )


def _join_new(client: RawClient, group: str, version: int = 5, **kwargs: Any) -> Any:
    """JoinGroup v4+ as a new dynamic member: MEMBER_ID_REQUIRED, then the join with that id."""
    first = client.call(_join(group, **kwargs), version)
    assert first.error_code == MEMBER_ID_REQUIRED
    assert first.member_id
    assert first.generation_id == -1
    return client.call(_join(group, first.member_id, **kwargs), version)


def _sync(
    client: RawClient,
    group: str,
    joined: Any,
    assignments: dict[str, bytes] | None = None,
    instance: str | None = None,
) -> Any:
    return client.call(
        SyncGroup(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=instance,
            assignments=[
                SyncGroup.SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in (assignments or {}).items()
            ],
        ),
        3,
    )


def _heartbeat(client: RawClient, group: str, generation: int, member: str, **kw: Any) -> int:
    answer = client.call(
        Heartbeat(group_id=group, generation_id=generation, member_id=member, **kw), 3
    )
    return int(answer.error_code)


def _create_topic(client: RawClient, name: str, partitions: int) -> None:
    """A topic to commit offsets for (a commit for a topic that does not exist is
    UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers)."""
    CreateTopics = messages.CreateTopicsRequest
    topic = CreateTopics.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    answer = client.call(CreateTopics(topics=[topic], timeout_ms=30_000), 7)
    assert answer.topics[0].error_code == 0


def _tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


#: api key → the versions served: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
#: OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, ConsumerGroupHeartbeat,
#: ConsumerGroupDescribe.
GROUP_RANGES = {
    10: (0, 5),
    11: (0, 9),
    14: (0, 5),
    12: (0, 4),
    13: (0, 5),
    8: (2, 10),
    9: (1, 10),
    15: (0, 6),
    16: (0, 5),
    68: (0, 1),
    69: (0, 1),
}


def test_api_versions_advertises_the_group_apis(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve(brokers=1)
    request = messages.ApiVersionsRequest(
        client_software_name="coordkit-tests", client_software_version="1.0"
    )  # v3+ needs both (Kafka refuses the request without them)
    response = raw_client(server.addresses[0]).call(request, 3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: ranges.get(key) for key in GROUP_RANGES} == GROUP_RANGES


def test_a_broker_that_does_not_coordinate_the_group_says_so(
    serve: ServeFactory, raw_client: Connect
) -> None:
    server = serve(brokers=3)
    lookup = raw_client(server.addresses[0])
    coordinator, _ = _coordinator(lookup, "g", server)
    # Batched lookup (v4) agrees, key by key.
    batched = lookup.call(FindCoordinator(key_type=0, coordinator_keys=["g", "g"]), 4)
    assert [(c.key, c.error_code, c.node_id) for c in batched.coordinators] == [
        ("g", 0, coordinator),
        ("g", 0, coordinator),
    ]
    other = next(b for b in server.addresses if b != coordinator)
    client = raw_client(server.addresses[other])
    _create_topic(client, "orders", 1)
    assert client.call(_join("g"), 5).error_code == NOT_COORDINATOR
    assert _heartbeat(client, "g", 1, "m") == NOT_COORDINATOR
    commit = client.call(
        OffsetCommit(
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                OffsetCommit.OffsetCommitRequestTopic(
                    name="orders",
                    partitions=[
                        OffsetCommit.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=1
                        )
                    ],
                )
            ],
        ),
        8,
    )
    assert commit.topics[0].partitions[0].error_code == NOT_COORDINATOR
    fetched = client.call(OffsetFetch(group_id="g", topics=None), 7)
    assert fetched.error_code == NOT_COORDINATOR
    described = client.call(DescribeGroups(groups=["g"]), 5)
    assert described.groups[0].error_code == NOT_COORDINATOR
    # A transactional id's first lookup creates __transaction_state and, as Kafka's, answers
    # COORDINATOR_NOT_AVAILABLE until its partitions have leaders (tests/transactions).
    txn = lookup.call(FindCoordinator(key="tx", key_type=1), 3)
    assert txn.error_code == 15
    assert txn.node_id == -1


def test_members_join_sync_heartbeat_and_leave(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve(brokers=3)
    group = "members"
    coordinator, address = _coordinator(raw_client(server.addresses[0]), group, server)
    a, b = raw_client(address), raw_client(address)

    first = _join_new(a, group)
    assert first.error_code == 0
    assert first.leader == first.member_id
    assert first.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in first.members] == [
        (first.member_id, subscription_bytes(["orders"]))
    ]
    mine = assignment_bytes({_tp("orders", 0), _tp("orders", 1)})
    synced = _sync(a, group, first, {first.member_id: mine})
    assert (synced.error_code, synced.assignment) == (0, mine)
    assert _heartbeat(a, group, first.generation_id, first.member_id) == 0
    assert _heartbeat(a, group, first.generation_id, "nobody") == UNKNOWN_MEMBER_ID
    assert _heartbeat(a, group, first.generation_id + 7, first.member_id) == ILLEGAL_GENERATION

    # A second member: its join opens a rebalance the first learns of by heartbeat.
    needed = b.call(_join(group, topics=("orders", "audit")), 5)
    assert needed.error_code == MEMBER_ID_REQUIRED
    b.send(_join(group, needed.member_id, topics=("orders", "audit")), 5)
    assert wait_for(
        lambda: _heartbeat(a, group, first.generation_id, first.member_id) == REBALANCE_IN_PROGRESS,
        10,
        "REBALANCE_IN_PROGRESS",
    )
    a.send(_join(group, first.member_id), 5)
    _, rejoined_a = a.receive("JoinGroup", 5)
    _, joined_b = b.receive("JoinGroup", 5)
    assert rejoined_a.error_code == joined_b.error_code == 0
    assert rejoined_a.generation_id == joined_b.generation_id == first.generation_id + 1
    assert rejoined_a.leader == joined_b.leader == first.member_id
    # The leader gets every member's metadata bytes as sent; the follower none.
    assert {m.member_id: m.metadata for m in rejoined_a.members} == {
        first.member_id: subscription_bytes(["orders"]),
        needed.member_id: subscription_bytes(["orders", "audit"]),
    }
    assert joined_b.members == []

    theirs = assignment_bytes({_tp("orders", 2), _tp("audit", 0)})
    b.send(
        SyncGroup(
            group_id=group,
            generation_id=joined_b.generation_id,
            member_id=joined_b.member_id,
            assignments=[],
        ),
        3,
    )
    leader_sync = _sync(a, group, rejoined_a, {first.member_id: mine, needed.member_id: theirs})
    _, follower_sync = b.receive("SyncGroup", 3)
    assert (leader_sync.error_code, leader_sync.assignment) == (0, mine)
    assert (follower_sync.error_code, follower_sync.assignment) == (0, theirs)
    # An old generation is refused.
    stale = _sync(a, group, first)
    assert stale.error_code == ILLEGAL_GENERATION

    # Batch leave (v3+): per-member answers, an unknown member named as such.
    left = a.call(
        LeaveGroup(
            group_id=group,
            members=[
                LeaveGroup.MemberIdentity(member_id=first.member_id),
                LeaveGroup.MemberIdentity(member_id=needed.member_id),
                LeaveGroup.MemberIdentity(member_id="nobody"),
            ],
        ),
        3,
    )
    assert left.error_code == 0
    assert [(m.member_id, m.error_code) for m in left.members] == [
        (first.member_id, 0),
        (needed.member_id, 0),
        ("nobody", UNKNOWN_MEMBER_ID),
    ]
    described = a.call(DescribeGroups(groups=[group]), 5).groups[0]
    assert (described.error_code, described.group_state, described.members) == (0, "Empty", [])
    assert coordinator in server.addresses


def test_a_replaced_static_member_is_fenced(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve(brokers=2)
    group = "static"
    _, address = _coordinator(raw_client(server.addresses[0]), group, server)
    old, new = raw_client(address), raw_client(address)
    # A static member gets its id at once (no MEMBER_ID_REQUIRED).
    joined = old.call(_join(group, instance="host-1"), 9)
    assert joined.error_code == 0
    assert joined.leader == joined.member_id
    assert joined.protocol_type == "consumer"
    mine = assignment_bytes({_tp("orders", 0)})
    assert _sync(old, group, joined, {joined.member_id: mine}, "host-1").error_code == 0

    # The same instance restarts: a new member id takes its place without a rebalance, keeps
    # its assignment, and (as the leader) is told to skip computing one (KIP-814).
    again = new.call(_join(group, instance="host-1"), 9)
    assert again.error_code == 0
    assert again.member_id != joined.member_id
    assert again.generation_id == joined.generation_id
    assert again.leader == again.member_id
    assert again.skip_assignment
    resync = new.call(
        SyncGroup(
            group_id=group,
            generation_id=again.generation_id,
            member_id=again.member_id,
            group_instance_id="host-1",
            assignments=[],
        ),
        3,
    )
    assert (resync.error_code, resync.assignment) == (0, mine)
    fenced = _heartbeat(
        old, group, joined.generation_id, joined.member_id, group_instance_id="host-1"
    )
    assert fenced == FENCED_INSTANCE_ID
    assert (
        _heartbeat(new, group, again.generation_id, again.member_id, group_instance_id="host-1")
        == 0
    )
    # An admin removes the static member by its instance id alone (LeaveGroup v3+).
    left = new.call(
        LeaveGroup(group_id=group, members=[LeaveGroup.MemberIdentity(group_instance_id="host-1")]),
        4,
    )
    assert [(m.group_instance_id, m.error_code) for m in left.members] == [("host-1", 0)]


def _commit_request(group: str, offsets: dict[tuple[str, int], tuple[int, str, int]]) -> Any:
    topics: dict[str, list[Any]] = {}
    for (topic, partition), (offset, metadata, epoch) in offsets.items():
        topics.setdefault(topic, []).append(
            OffsetCommit.OffsetCommitRequestPartition(
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=epoch,
                committed_metadata=metadata,
            )
        )
    return OffsetCommit(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            OffsetCommit.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()
        ],
    )


def test_offsets_committed_are_fetched_back(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve(brokers=2)
    group = "offsets"
    _, address = _coordinator(raw_client(server.addresses[0]), group, server)
    client = raw_client(address)
    _create_topic(client, "orders", 3)
    committed = client.call(
        _commit_request(
            group,
            {
                ("orders", 0): (42, "checkpoint", 3),
                ("orders", 1): (7, "", -1),
                ("orders", 2): (9, "x" * 5000, 1),  # over offset.metadata.max.bytes
            },
        ),
        8,
    )
    assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == [
        (0, 0),
        (1, 0),
        (2, OFFSET_METADATA_TOO_LARGE),
    ]
    asked = [OffsetFetch.OffsetFetchRequestTopic(name="orders", partition_indexes=[0, 1, 2])]
    fetched = client.call(OffsetFetch(group_id=group, topics=asked), 7)
    assert fetched.error_code == 0
    assert [
        (p.partition_index, p.committed_offset, p.metadata, p.committed_leader_epoch, p.error_code)
        for p in fetched.topics[0].partitions
    ] == [(0, 42, "checkpoint", 3, 0), (1, 7, "", -1, 0), (2, -1, "", -1, 0)]
    # Null topics: every committed partition.
    everything = client.call(OffsetFetch(group_id=group, topics=None), 7)
    assert sorted(
        (p.partition_index, p.committed_offset) for p in everything.topics[0].partitions
    ) == [
        (0, 42),
        (1, 7),
    ]
    # v1: no leader epoch, no top-level error.
    old = client.call(OffsetFetch(group_id=group, topics=asked), 1)
    assert [(p.committed_offset, p.metadata) for p in old.topics[0].partitions] == [
        (42, "checkpoint"),
        (7, ""),
        (-1, ""),
    ]
    # v8: several groups at once; a group with nothing committed answers -1.
    groups = client.call(
        OffsetFetch(
            groups=[
                OffsetFetch.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=[
                        OffsetFetch.OffsetFetchRequestTopics(name="orders", partition_indexes=[0])
                    ],
                ),
                OffsetFetch.OffsetFetchRequestGroup(
                    group_id=group + "-none",
                    topics=[
                        OffsetFetch.OffsetFetchRequestTopics(name="orders", partition_indexes=[0])
                    ],
                ),
            ]
        ),
        8,
    )
    answers = {
        g.group_id: (
            g.error_code,
            [(p.committed_offset, p.metadata) for t in g.topics for p in t.partitions],
        )
        for g in groups.groups
    }
    # The second group may live on another coordinator.
    assert answers[group] == (0, [(42, "checkpoint")])
    assert answers[group + "-none"] in ((0, [(-1, "")]), (NOT_COORDINATOR, []))
    # A commit from outside the group is refused once the group has members.
    joined = _join_new(client, group)
    assert joined.error_code == 0
    refused = client.call(_commit_request(group, {("orders", 0): (50, "", -1)}), 8)
    assert refused.topics[0].partitions[0].error_code == UNKNOWN_MEMBER_ID


def test_offsets_by_topic_id_from_v10(serve: ServeFactory, raw_client: Connect) -> None:
    """OffsetCommit and OffsetFetch v10 name topics by id (KIP-848): the offsets are the ones
    committed by name, an id no topic has is UNKNOWN_TOPIC_ID, and all of a group's offsets come
    back under their topics' ids."""
    server = serve(brokers=1)
    group = "by-id"
    _, address = _coordinator(raw_client(server.addresses[0]), group, server)
    client = raw_client(address)
    _create_topic(client, "orders", 2)
    metadata = client.call(
        messages.MetadataRequest(topics=[messages.MetadataRequest.MetadataRequestTopic(
            name="orders")], allow_auto_topic_creation=False), 12,
    )  # fmt: skip
    topic_id = metadata.topics[0].topic_id
    nobody = uuid.uuid4()
    commit = OffsetCommit(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            OffsetCommit.OffsetCommitRequestTopic(topic_id=topic_id, partitions=[
                OffsetCommit.OffsetCommitRequestPartition(partition_index=1, committed_offset=5,
                                                          committed_metadata="m")]),
            OffsetCommit.OffsetCommitRequestTopic(topic_id=nobody, partitions=[
                OffsetCommit.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                          committed_metadata="")]),
        ],
    )  # fmt: skip
    committed = client.call(commit, 10)
    assert [
        (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in committed.topics
    ] == [(topic_id, [(1, 0)]), (nobody, [(0, UNKNOWN_TOPIC_ID)])]
    # Committed by id, read by name (v9) and by id (v10).
    by_name = client.call(OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(
        group_id=group, topics=[OffsetFetch.OffsetFetchRequestTopics(
            name="orders", partition_indexes=[1])])]), 9)  # fmt: skip
    assert [p.committed_offset for p in by_name.groups[0].topics[0].partitions] == [5]
    asked = [
        OffsetFetch.OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=[0, 1]),
        OffsetFetch.OffsetFetchRequestTopics(topic_id=nobody, partition_indexes=[0]),
    ]
    by_id = client.call(OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(
        group_id=group, topics=asked)]), 10)  # fmt: skip
    assert [
        (t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
        for t in by_id.groups[0].topics
    ] == [(topic_id, [(0, -1, 0), (1, 5, 0)]), (nobody, [(0, -1, UNKNOWN_TOPIC_ID)])]
    everything = client.call(OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(
        group_id=group, topics=None)]), 10)  # fmt: skip
    assert [(t.topic_id, [p.committed_offset for p in t.partitions])
            for t in everything.groups[0].topics] == [(topic_id, [5])]  # fmt: skip


def test_describe_and_list_groups(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve(brokers=3)
    group = "described"
    coordinator, address = _coordinator(raw_client(server.addresses[0]), group, server)
    client = raw_client(address)
    joined = _join_new(client, group, topics=("orders",), protocols=("roundrobin", "range"))
    assert joined.protocol_name == "roundrobin"
    # SyncGroup v5 names the protocol type and protocol it expects: a mismatch is refused.
    for protocol_type, protocol in (("consumer", "range"), ("connect", "roundrobin")):
        mismatch = client.call(
            SyncGroup(
                group_id=group,
                generation_id=joined.generation_id,
                member_id=joined.member_id,
                protocol_type=protocol_type,
                protocol_name=protocol,
                assignments=[],
            ),
            5,
        )
        assert mismatch.error_code == INCONSISTENT_GROUP_PROTOCOL
    mine = assignment_bytes({_tp("orders", 0), _tp("orders", 1)})
    synced = client.call(
        SyncGroup(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            protocol_type="consumer",
            protocol_name="roundrobin",
            assignments=[
                SyncGroup.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=mine)
            ],
        ),
        5,
    )
    assert (synced.error_code, synced.protocol_type, synced.protocol_name) == (
        0,
        "consumer",
        "roundrobin",
    )
    assert synced.assignment == mine

    described = client.call(DescribeGroups(groups=[group, "never-seen"]), 5).groups
    stable, missing = described
    assert (stable.error_code, stable.group_state, stable.protocol_type, stable.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "roundrobin",
    )
    [member] = stable.members
    assert member.member_id == joined.member_id
    assert member.member_metadata == subscription_bytes(["orders"])
    assert member.member_assignment == mine
    assert stable.authorized_operations == -(2**31)  # not asked for
    [asked] = client.call(
        DescribeGroups(groups=[group], include_authorized_operations=True), 5
    ).groups
    # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (Kafka 4's, the client recordings)
    assert asked.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
    # Kafka's answer for a group it does not know: Dead, no error (when it would coordinate
    # it), NOT_COORDINATOR otherwise.
    assert missing.group_state == "Dead"
    assert missing.members == []
    assert missing.error_code in (0, NOT_COORDINATOR)

    listed: dict[str, tuple[str, str]] = {}
    for broker, where in server.addresses.items():
        answer = raw_client(where).call(ListGroups(states_filter=[]), 4)
        assert answer.error_code == 0
        for g in answer.groups:
            assert broker == coordinator or g.group_id != group
            listed[g.group_id] = (g.protocol_type, g.group_state)
    assert listed[group] == ("consumer", "Stable")
    only_empty = client.call(ListGroups(states_filter=["Empty"]), 4)
    assert group not in [g.group_id for g in only_empty.groups]


def test_a_client_gone_during_a_join_is_removed(serve: ServeFactory, raw_client: Connect) -> None:
    """A member whose connection closes while its JoinGroup waits is not kept: the round
    completes, it never syncs nor heartbeats, and its session timeout removes it."""
    server = serve(brokers=1)
    group = "gone"
    lookup = raw_client(server.addresses[0])
    _, address = _coordinator(lookup, group, server)
    stays, leaves = raw_client(address), raw_client(address)
    first = _join_new(stays, group)
    assert _sync(stays, group, first, {first.member_id: b""}).error_code == 0

    needed = leaves.call(_join(group), 5)
    leaves.send(_join(group, needed.member_id), 5)
    leaves.close()  # gone while its join waits
    assert wait_for(
        lambda: (
            _heartbeat(stays, group, first.generation_id, first.member_id) == REBALANCE_IN_PROGRESS
        ),
        10,
        "the rebalance",
    )
    deadline = time.monotonic() + 30
    while True:  # rejoin until the group is this member alone
        joined = stays.call(_join(group, first.member_id), 5)
        assert joined.error_code == 0
        if [m.member_id for m in joined.members] == [first.member_id]:
            break
        assert time.monotonic() < deadline, "the departed member was never removed"
        synced = _sync(stays, group, joined, {first.member_id: b""})
        assert synced.error_code in (0, REBALANCE_IN_PROGRESS)
        generation = joined.generation_id
        wait_for(
            lambda: _heartbeat(stays, group, generation, first.member_id) != 0,  # noqa: B023
            10,
            "the next rebalance",
        )
    synced = _sync(stays, group, joined, {first.member_id: b"x"})
    assert (synced.error_code, synced.assignment) == (0, b"x")
    stays.close()
    lookup.close()
    status, _out, err = server.stop()
    assert status == 0
    assert "Traceback" not in err


def test_a_member_id_handed_out_and_never_used_expires(
    serve: ServeFactory, raw_client: Connect
) -> None:
    """An id handed out with MEMBER_ID_REQUIRED holds a join round back only until its session
    timeout; joining with it later is joining as an unknown member."""
    server = serve(brokers=1)
    group = "pending"
    _, address = _coordinator(raw_client(server.addresses[0]), group, server)
    forgetful, steady = raw_client(address), raw_client(address)
    unused = forgetful.call(_join(group), 5)
    assert unused.error_code == MEMBER_ID_REQUIRED
    joined = _join_new(steady, group)
    assert joined.error_code == 0
    assert [m.member_id for m in joined.members] == [joined.member_id]
    late = forgetful.call(_join(group, unused.member_id), 5)
    assert late.error_code == UNKNOWN_MEMBER_ID


INVALID_SESSION_TIMEOUT = 26


def _join_with_session(client: RawClient, group: str, session_ms: int) -> int:
    """The error of a v5 JoinGroup (a new dynamic member) asking for ``session_ms``."""
    request = _join(group)
    request.session_timeout_ms = session_ms
    request.rebalance_timeout_ms = max(session_ms, REBALANCE_MS)
    return int(client.call(request, 5).error_code)


def test_session_timeouts_outside_kafkas_default_bounds_are_refused(
    serve: ServeFactory, raw_client: Connect
) -> None:
    """Kafka's group.min.session.timeout.ms (6 s) and group.max.session.timeout.ms (30 min)."""
    server = serve(brokers=1, short_sessions=False)
    group = "bounded"
    _, address = _coordinator(raw_client(server.addresses[0]), group, server)
    client = raw_client(address)
    assert _join_with_session(client, group, 100) == INVALID_SESSION_TIMEOUT
    assert _join_with_session(client, group, 5_999) == INVALID_SESSION_TIMEOUT
    assert _join_with_session(client, group, 1_800_001) == INVALID_SESSION_TIMEOUT
    assert _join_with_session(client, group, 6_000) == MEMBER_ID_REQUIRED
    assert _join_with_session(client, group, 1_800_000) == MEMBER_ID_REQUIRED


def test_session_bounds_are_broker_configs(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve(
        "--config", "group.min.session.timeout.ms=500",
        "--config", "group.max.session.timeout.ms=10000",
        brokers=1, short_sessions=False,
    )  # fmt: skip
    group = "configured"
    _, address = _coordinator(raw_client(server.addresses[0]), group, server)
    client = raw_client(address)
    assert _join_with_session(client, group, 499) == INVALID_SESSION_TIMEOUT
    assert _join_with_session(client, group, 10_001) == INVALID_SESSION_TIMEOUT
    assert _join_with_session(client, group, 500) == MEMBER_ID_REQUIRED


def test_kafka_pythons_100_ms_session_gets_the_error_kafka_gives(serve: ServeFactory) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import InvalidSessionTimeoutError

    server = serve(brokers=1, short_sessions=False)
    consumer = KafkaConsumer(
        "orders", bootstrap_servers=server.bootstrap, group_id="hasty",
        session_timeout_ms=100, heartbeat_interval_ms=30, request_timeout_ms=30_000,
    )  # fmt: skip
    try:
        with pytest.raises(InvalidSessionTimeoutError):
            _poll_for(consumer, seconds=60)
    finally:
        consumer.close()


def _poll_for(consumer: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(timeout_ms=500)
