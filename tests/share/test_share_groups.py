"""The share-group coordinator on ``coordkit serve`` (in this process, on the ``--backend``
store): confluent-kafka's ``ShareConsumer`` (librdkafka 2.16) joining, sharing and leaving, and raw
ShareGroupHeartbeat, ShareGroupDescribe, ListGroups, DescribeGroups and DeleteGroups requests:
epochs, fencing, session expiry, the target assignment of the configured share assignor, and
what the share-partition side is told (members gone, groups deleted)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.admin import ResourceType as ConfigResourceType

from coordkit.engine.acls import AclAdmin
from coordkit.engine.config import EngineConfig
from coordkit.kafka.acls import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from coordkit.protocol import messages
from coordkit.serve import errors
from coordkit.serve.broker_config import parse_broker_configs
from coordkit.serve.classes import nested
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401

GROUP = "workers"
Heartbeat = messages.ShareGroupHeartbeatRequest
Describe = messages.ShareGroupDescribeRequest
ListGroups = messages.ListGroupsRequest
DescribeGroups = messages.DescribeGroupsRequest
DeleteGroups = messages.DeleteGroupsRequest
ConsumerHeartbeat = messages.ConsumerGroupHeartbeatRequest
FindCoordinator = messages.FindCoordinatorRequest
_ = nested  # the requests above have no nested structs to build
DEADLINE = 30.0


def make_topics(server: InProcessServer, partitions: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in partitions.items()])
    for future in futures.values():
        future.result(timeout=30)


@pytest.fixture
def server(in_process: InProcessFactory) -> InProcessServer:
    config = EngineConfig(share_group_heartbeat_interval=0.2, share_group_session_timeout=2.0)
    served = in_process(brokers=1, config=config)
    make_topics(served, {"jobs": 6, "pair": 2})
    return served


class Consumers:
    """confluent-kafka share consumers polled round-robin from this thread."""

    def __init__(self, server: InProcessServer) -> None:
        self.server = server
        self.consumers: list[ShareConsumer] = []

    def add(self, topics: list[str], group: str = GROUP) -> ShareConsumer:
        consumer = ShareConsumer({"bootstrap.servers": self.server.bootstrap, "group.id": group,
                                  "log_level": 3})  # fmt: skip
        consumer.subscribe(topics)
        self.consumers.append(consumer)
        return consumer

    def poll(self) -> None:
        for consumer in self.consumers:
            consumer.poll(0.05)

    def close(self, consumer: ShareConsumer) -> None:
        self.consumers.remove(consumer)
        consumer.close()


@pytest.fixture
def consumers(server: InProcessServer) -> Iterator[Consumers]:
    made = Consumers(server)
    yield made
    for consumer in list(made.consumers):
        made.close(consumer)


def describe(server: InProcessServer, group: str = GROUP) -> Any:
    client = RawClient(server.address(0))
    try:
        (described,) = client.call(
            Describe(group_ids=[group], include_authorized_operations=False), 1
        ).groups
        return described
    finally:
        client.close()


def settled(described: Any, members: int) -> bool:
    return (
        described.error_code == errors.NONE
        and len(described.members) == members
        and described.group_epoch == described.assignment_epoch
        and all(m.member_epoch == described.assignment_epoch for m in described.members)
    )


def wait_for(
    server: InProcessServer, consumers: Consumers, members: int, group: str = GROUP
) -> Any:
    deadline = time.monotonic() + DEADLINE
    described = None
    while time.monotonic() < deadline:
        consumers.poll()
        described = describe(server, group)
        if settled(described, members):
            return described
    raise AssertionError(f"share group {group!r} did not settle at {members} members: {described}")


def held(described: Any) -> dict[str, list[tuple[str, int]]]:
    return {
        m.member_id: sorted((t.topic_name, p) for t in m.assignment.topic_partitions
                            for p in t.partitions)
        for m in described.members
    }  # fmt: skip


def test_three_share_consumers_split_the_partitions_and_rebalance_when_one_leaves(
    server: InProcessServer, consumers: Consumers
) -> None:
    for _ in range(3):
        consumers.add(["jobs"])
    described = wait_for(server, consumers, 3)
    assert described.group_state == "Stable"
    assert described.assignor_name == "simple"
    by_member = held(described)
    assert sorted(len(p) for p in by_member.values()) == [2, 2, 2]
    assert sorted(p for ps in by_member.values() for p in ps) == [("jobs", p) for p in range(6)]
    for member in described.members:
        assert member.subscribed_topic_names == ["jobs"]
        assert member.client_host.startswith("/")

    epoch = described.group_epoch
    consumers.close(consumers.consumers[0])
    described = wait_for(server, consumers, 2)
    assert described.group_epoch > epoch
    by_member = held(described)
    assert sorted(len(p) for p in by_member.values()) == [3, 3]
    assert sorted(p for ps in by_member.values() for p in ps) == [("jobs", p) for p in range(6)]


def test_more_members_than_partitions_share_them(
    server: InProcessServer, consumers: Consumers
) -> None:
    for _ in range(4):
        consumers.add(["pair"])
    described = wait_for(server, consumers, 4)
    owners: dict[tuple[str, int], int] = {}
    for partitions in held(described).values():
        assert len(partitions) == 1
        for p in partitions:
            owners[p] = owners.get(p, 0) + 1
    assert owners == {("pair", 0): 2, ("pair", 1): 2}


class Raw:
    """Raw ShareGroupHeartbeats of one member."""

    def __init__(self, server: InProcessServer, member_id: str | None = None) -> None:
        self.client = RawClient(server.address(0))
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = 0

    def beat(self, topics: list[str] | None = None, *, epoch: int | None = None,
             group: str = GROUP, member_id: str | None = None) -> Any:  # fmt: skip
        response = self.client.call(
            Heartbeat(group_id=group, member_id=self.member_id if member_id is None else member_id,
                      member_epoch=self.epoch if epoch is None else epoch, rack_id=None,
                      subscribed_topic_names=topics),
            1,
        )  # fmt: skip
        if response.error_code == errors.NONE and epoch is None:
            self.epoch = response.member_epoch
        return response

    def close(self) -> None:
        self.client.close()


def find_coordinator(server: InProcessServer) -> None:
    """What a client asks first: it makes the offsets topic, whose partitions host the groups."""
    client = RawClient(server.address(0))
    try:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            found = client.call(FindCoordinator(key_type=0, coordinator_keys=[GROUP]), 4)
            if found.coordinators[0].error_code == errors.NONE:
                return
            time.sleep(0.1)
        raise AssertionError(f"no coordinator for {GROUP!r}: {found}")
    finally:
        client.close()


@pytest.fixture
def raw(server: InProcessServer) -> Iterator[Callable[..., Raw]]:
    find_coordinator(server)
    made: list[Raw] = []

    def make(member_id: str | None = None) -> Raw:
        made.append(Raw(server, member_id))
        return made[-1]

    yield make
    for member in made:
        member.close()


def test_heartbeat_refusals_name_what_is_wrong_and_change_nothing(
    server: InProcessServer, raw: Callable[..., Raw]
) -> None:
    member = raw()
    bad = member.beat(["jobs"], member_id="")
    assert (bad.error_code, bad.error_message) == (errors.INVALID_REQUEST, None)
    bad = member.beat(["jobs"], group="")
    assert (bad.error_code, bad.error_message) == (errors.INVALID_REQUEST,
                                                   "GroupId can't be empty.")  # fmt: skip
    bad = member.beat(None)
    assert (bad.error_code, bad.error_message) == (
        errors.INVALID_REQUEST,
        "SubscribedTopicNames must be set in first request.",
    )
    assert member.beat(["jobs"], epoch=-2).error_code == errors.INVALID_REQUEST
    # Nothing was created by the refused requests.
    assert describe(server).error_code == errors.GROUP_ID_NOT_FOUND
    unknown = member.beat(None, epoch=3)
    assert (unknown.error_code, unknown.error_message) == (
        errors.GROUP_ID_NOT_FOUND,
        f"Share group {GROUP} not found.",
    )

    joined = member.beat(["jobs"])
    assert joined.error_code == errors.NONE
    assert joined.member_id == member.member_id
    assert joined.member_epoch == 1
    assert joined.heartbeat_interval_ms == 200
    assert sorted(p for t in joined.assignment.topic_partitions for p in t.partitions) == list(
        range(6)
    )
    again = member.beat(None)
    assert again.error_code == errors.NONE
    assert again.assignment is None
    assert member.beat(None, epoch=7).error_code == 110  # FENCED_MEMBER_EPOCH
    stranger = member.beat(None, epoch=1, member_id="someone-else")
    assert stranger.error_code == errors.UNKNOWN_MEMBER_ID


def test_epochs_move_with_members_and_a_leave_ends_the_membership(
    server: InProcessServer, raw: Callable[..., Raw]
) -> None:
    first, second = raw(), raw()
    assert first.beat(["jobs"]).member_epoch == 1
    assert second.beat(["jobs"]).member_epoch == 2
    # The first member learns of the new target at its next heartbeat, with the new epoch.
    moved = first.beat(None)
    assert moved.member_epoch == 2
    mine = sorted(p for t in moved.assignment.topic_partitions for p in t.partitions)
    theirs = held(describe(server))[second.member_id]
    assert len(mine) == 3
    assert not set(mine) & {p for _, p in theirs}
    # The previous epoch is still accepted (its answer may have been lost).
    assert first.beat(None, epoch=1).error_code == errors.NONE
    left = second.beat(None, epoch=-1)
    assert (left.error_code, left.member_epoch) == (errors.NONE, -1)
    assert second.beat(None, epoch=-1).error_code == errors.UNKNOWN_MEMBER_ID
    # The leave computed the new target at once: the group is settled at epoch 3.
    settled_now = describe(server)
    assert (settled_now.group_epoch, settled_now.assignment_epoch) == (3, 3)
    back = first.beat(None)
    assert back.member_epoch == 3
    assert sorted(p for t in back.assignment.topic_partitions for p in t.partitions) == list(
        range(6)
    )
    # A known member rejoining with epoch 0 is taken back with its target (Kafka 4.4).
    rejoined = first.beat(["jobs"], epoch=0)
    assert (rejoined.error_code, rejoined.member_epoch) == (errors.NONE, 3)
    assert rejoined.assignment is not None


def test_a_silent_member_is_fenced_after_its_session(
    server: InProcessServer, raw: Callable[..., Raw]
) -> None:
    silent, alive = raw(), raw()
    silent.beat(["jobs"])
    alive.beat(["jobs"])
    deadline = time.monotonic() + DEADLINE
    while len(describe(server).members) == 2 and time.monotonic() < deadline:
        alive.beat(None)
        time.sleep(0.2)
    assert [m.member_id for m in describe(server).members] == [alive.member_id]
    assert silent.beat(None).error_code == errors.UNKNOWN_MEMBER_ID


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str | None]] = []

    def on_member_left(self, group_id: str, member_id: str) -> None:
        self.events.append(("left", group_id, member_id))

    def on_group_deleted(self, group_id: str) -> None:
        self.events.append(("deleted", group_id, None))


def test_listing_describing_and_deleting_a_share_group(
    server: InProcessServer, raw: Callable[..., Raw]
) -> None:
    recorder = Recorder()
    server.context(0).broker.group_coordinator.share_group_listeners.add(recorder)
    member = raw()
    member.beat(["jobs"])
    client = RawClient(server.address(0))
    try:
        listed = client.call(ListGroups(states_filter=[], types_filter=["share"]), 5).groups
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == [
            (GROUP, "share", "Stable", "share")
        ]
        assert client.call(ListGroups(states_filter=[], types_filter=["consumer"]), 5).groups == []
        # DescribeGroups describes classic groups only: Dead before v6, then GROUP_ID_NOT_FOUND.
        ask = DescribeGroups(groups=[GROUP], include_authorized_operations=False)
        (old,) = client.call(ask, 5).groups
        assert (old.error_code, old.group_state, old.members) == (errors.NONE, "Dead", [])
        (classic,) = client.call(ask, 6).groups
        assert (classic.error_code, classic.error_message) == (
            errors.GROUP_ID_NOT_FOUND,
            f"Group {GROUP} is not a classic group.",
        )
        # The consumer protocol does not take over a share group's id.
        refused = client.call(
            ConsumerHeartbeat(group_id=GROUP, member_id=str(uuid.uuid4()), member_epoch=0,
                              rebalance_timeout_ms=30_000, subscribed_topic_names=["jobs"],
                              topic_partitions=[]), 0,
        )  # fmt: skip
        assert refused.error_code == errors.GROUP_ID_NOT_FOUND

        (busy,) = client.call(DeleteGroups(groups_names=[GROUP]), 2).results
        assert busy.error_code == errors.NON_EMPTY_GROUP
        assert member.beat(None, epoch=-1).error_code == errors.NONE
        assert recorder.events == [("left", GROUP, member.member_id)]
        assert describe(server).group_state == "Empty"
        (done,) = client.call(DeleteGroups(groups_names=[GROUP]), 2).results
        assert done.error_code == errors.NONE
        assert recorder.events[-1] == ("deleted", GROUP, None)
        assert describe(server).error_code == errors.GROUP_ID_NOT_FOUND
        assert client.call(ListGroups(states_filter=[], types_filter=[]), 5).groups == []
    finally:
        client.close()


def test_the_share_assignor_is_the_one_group_share_assignors_names(
    in_process: InProcessFactory,
) -> None:
    served = in_process(brokers=1, config=EngineConfig(share_group_assignors=("rack-aware",)))
    make_topics(served, {"jobs": 6})
    find_coordinator(served)
    first, second = Raw(served), Raw(served)
    try:
        first.beat(["jobs"])
        second.beat(["jobs"])
        first.beat(None)
        described = describe(served)
        assert described.assignor_name == "rack-aware"
        assert sorted(len(p) for p in held(described).values()) == [3, 3]
    finally:
        first.close()
        second.close()


def test_a_groups_own_share_configs_override_the_brokers(
    server: InProcessServer, raw: Callable[..., Raw]
) -> None:
    """Kafka 4's GROUP config resource: share.heartbeat.interval.ms and share.session.timeout.ms
    set on one group (IncrementalAlterConfigs, confluent-kafka's AdminClient) apply to it."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    group = ConfigResource(
        ConfigResourceType.GROUP, GROUP,
        incremental_configs=[
            ConfigEntry("share.heartbeat.interval.ms", "7000",
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("share.session.timeout.ms", "60000",
                        incremental_operation=AlterConfigOpType.SET),
        ],
    )  # fmt: skip
    for future in admin.incremental_alter_configs([group]).values():
        future.result(timeout=30)
    member, other = raw(), raw()
    deadline = time.monotonic() + DEADLINE
    joined = member.beat(["jobs"])
    while joined.heartbeat_interval_ms != 7000 and time.monotonic() < deadline:
        time.sleep(0.2)  # the coordinator's watch on the group's config node
        joined = member.beat(None)
    assert joined.heartbeat_interval_ms == 7000
    # The broker's 2 s session no longer ends the member's: 60 s does.
    other.beat(["jobs"])
    time.sleep(3)
    assert member.beat(None).error_code == errors.NONE
    assert {m.member_id for m in describe(server).members} == {member.member_id, other.member_id}


def coordinator_of(server: InProcessServer, via: int, not_on: int | None = None) -> int:
    client = RawClient(server.address(via))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            (found,) = client.call(
                FindCoordinator(key_type=0, coordinator_keys=[GROUP]), 4
            ).coordinators
            if found.error_code == errors.NONE and found.node_id != not_on:
                return int(found.node_id)
            time.sleep(0.2)
        raise AssertionError(f"no coordinator of {GROUP!r} other than {not_on}")
    finally:
        client.close()


def test_a_new_coordinator_resumes_the_share_group(in_process: InProcessFactory) -> None:
    """The coordinator's broker stops: the broker that takes its offsets partition over loads
    the share group as stored, and its members go on at their epochs, keeping their targets."""
    config = EngineConfig(share_group_heartbeat_interval=0.2, share_group_session_timeout=20.0)
    served = in_process(brokers=3, config=config)
    make_topics(served, {"jobs": 6})
    old = coordinator_of(served, 0)
    first, second = Raw(served), Raw(served)
    for member in (first, second):
        member.client.close()
        member.client = RawClient(served.address(old))
    try:
        first.beat(["jobs"])
        second.beat(["jobs"])
        first.beat(None)
        before = describe_at(served, old)
        assert settled(before, 2)

        served.server.stop_broker(old)
        survivor = next(b for b in range(3) if b != old)
        new = coordinator_of(served, survivor, not_on=old)
        for member in (first, second):
            member.client = RawClient(served.address(new))
            again = member.beat(None)
            assert (again.error_code, again.member_epoch) == (errors.NONE, before.group_epoch)
        after = describe_at(served, new)
        assert (after.group_epoch, after.assignment_epoch) == (
            before.group_epoch,
            before.assignment_epoch,
        )
        assert held(after) == held(before)
    finally:
        first.close()
        second.close()


def describe_at(server: InProcessServer, broker: int) -> Any:
    client = RawClient(server.address(broker))
    try:
        (described,) = client.call(
            Describe(group_ids=[GROUP], include_authorized_operations=False), 1
        ).groups
        return described
    finally:
        client.close()


def test_under_the_authorizer_share_group_apis_need_the_groups_and_topics_acls(
    in_process: InProcessFactory,
) -> None:
    """Kafka 4.4's KafkaApis: ShareGroupHeartbeat needs Read on the group (30) and Describe on
    every subscribed topic (29), nothing created without them; ShareGroupDescribe needs
    Describe on the group (Read implies it)."""
    settings = parse_broker_configs(
        ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer"]
    ).serve_settings()
    served = in_process(1, settings=settings)
    store = served.server.cluster.admin_store

    def grant(kind: ResourceType, name: str, operation: AclOperation) -> None:
        entry = AccessControlEntry("User:ANONYMOUS", "*", operation, AclPermissionType.ALLOW)
        AclAdmin(store).add([AclBinding(ResourcePattern(kind, name, PatternType.LITERAL), entry)])

    grant(ResourceType.CLUSTER, "kafka-cluster", AclOperation.CREATE)
    grant(ResourceType.TOPIC, "jobs", AclOperation.DESCRIBE)
    wait_for_call(lambda: make_topics(served, {"jobs": 2}) is None)
    member = Raw(served)
    try:
        assert member.beat(["jobs"]).error_code == 30
        assert store.exists("/brokers/topics/__consumer_offsets") is None
        grant(ResourceType.GROUP, GROUP, AclOperation.READ)
        find_coordinator(served)
        assert member.beat(["jobs", "secret"]).error_code == 29
        assert member.beat(["jobs"]).error_code == errors.NONE
        client = RawClient(served.address(0))
        try:
            asked = Describe(group_ids=[GROUP, "other"], include_authorized_operations=False)
            groups = client.call(asked, 1).groups
            # The refused first, as Kafka's KafkaApis answers them.
            assert [(g.group_id, g.error_code) for g in groups] == [("other", 30), (GROUP, 0)]
        finally:
            client.close()
    finally:
        member.close()


def wait_for_call(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            if check():
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)
