"""Scenarios of Kafka 4's consumer group protocol beyond joining and leaving: the errors of
ConsumerGroupHeartbeat, static members, subscriptions by regex and the cluster's topics changing
under a group (created, partitions added, deleted), ConsumerGroupDescribe of groups that are not
consumer groups, DescribeGroups and ListGroups of a consumer group, and offsets committed and
fetched with member epochs (OffsetCommit and OffsetFetch v10, topics by id: sent and recorded as
``groups.commit`` and ``groups.fetch_offsets`` do).

The members, their heartbeats and the clusters' configs are those of ``consumer_groups.py``.
"""

from __future__ import annotations

from typing import Any

from differential import requests as rq
from differential.harness import Side, scenario
from differential.scenarios import groups as classic
from differential.scenarios.consumer_groups import (
    CONSUMER_GROUPS,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Member,
    TopicNames,
    client_member_id,
    coordinator_heartbeat,
    create_topics,
    describe,
    describe_when,
    first_join,
    heartbeat_seen,
    heartbeat_until,
    settle,
)

OFFSETS = {**CONSUMER_GROUPS, "OffsetCommit": rq.OFFSET_COMMIT, "OffsetFetch": rq.OFFSET_FETCH}
CLASSIC = {**CONSUMER_GROUPS, **classic.GROUPS}


# -- errors ----------------------------------------------------------------------------------------


@scenario("consumer_group_apis.invalid_requests", versions=CONSUMER_GROUPS)
def invalid_requests(side: Side) -> list[Any]:
    """First heartbeats Kafka refuses with INVALID_REQUEST (nothing created): an empty group
    id; no subscription; no rebalance timeout; owned partitions not empty, or null; an empty
    member id (v1); an empty instance id; an empty rack id; epoch -3; then epoch 1 with an
    empty member id, and epoch -2 (a static leave) without an instance id."""
    name = side.topic()
    create_topics(side, side.group(), {name: 1})
    group, names = side.group(), TopicNames(side)
    join = first_join(group, [name])
    asks = [
        {**join, "topics": None},
        {**join, "rebalance_ms": -1},
        {**join, "owned": {names.id(name): [0]}},
        {**join, "owned": None},
        {**join, "member_id": ""},
        {**join, "instance_id": ""},
        {**join, "rack_id": ""},
        {**join, "member_epoch": -3},
        {"member_epoch": 1, "member_id": ""},
        {"member_epoch": STATIC_LEAVE_EPOCH},
    ]
    empty_group = rq.consumer_group_heartbeat("", client_member_id(side, "", "a"), 0,
                                              rebalance_ms=rq.REBALANCE_MS, topics=[name],
                                              owned={})  # fmt: skip
    return [
        heartbeat_seen(side.call(0, empty_group, rq.CONSUMER_GROUP_HEARTBEAT), names),
        *(coordinator_heartbeat(side, group, **ask) for ask in asks),
        describe(side, group, names),
    ]


@scenario("consumer_group_apis.leave_unknown", versions=CONSUMER_GROUPS)
def leave_unknown(side: Side) -> list[Any]:
    """Leaving (epoch -1) with a member id the group does not have, and for a group that does
    not exist."""
    name = side.topic()
    create_topics(side, side.group(), {name: 1})
    member = Member(side, side.group(), [name])
    member.join()
    stranger = client_member_id(side, member.group, "stranger")
    return [
        coordinator_heartbeat(side, member.group, member_id=stranger, member_epoch=LEAVE_EPOCH),
        coordinator_heartbeat(side, side.group("missing"), member_epoch=LEAVE_EPOCH),
    ]


@scenario("consumer_group_apis.unsupported_assignor", versions=CONSUMER_GROUPS)
def unsupported_assignor(side: Side) -> list[Any]:
    """A first heartbeat naming an assignor the brokers do not configure (``sticky``; the
    brokers run ``uniform`` and ``range``), and a member of a group switching to one:
    UNSUPPORTED_ASSIGNOR; the member keeps its epoch and assignment."""
    name = side.topic()
    create_topics(side, side.group(), {name: 2})
    member = Member(side, side.group(), [name])
    stranger = Member(side, member.group, [name], name="b", assignor="sticky")
    return [stranger.join(), member.join(), member.send(assignor="sticky"), member.send()]


@scenario("consumer_group_apis.unknown_member_and_group", versions=CONSUMER_GROUPS)
def unknown_member_and_group(side: Side) -> list[Any]:
    """A heartbeat with epoch 1 and a member id the group does not have: UNKNOWN_MEMBER_ID;
    epoch 1 for a group that does not exist: GROUP_ID_NOT_FOUND; a static leave (epoch -2)
    there too."""
    name = side.topic()
    create_topics(side, side.group(), {name: 1})
    member = Member(side, side.group(), [name])
    member.join()
    missing = side.group("missing")
    return [
        coordinator_heartbeat(side, member.group, member_epoch=1, owned={}),
        coordinator_heartbeat(side, missing, member_epoch=1, owned={}),
        coordinator_heartbeat(
            side, missing, member_epoch=STATIC_LEAVE_EPOCH, instance_id="instance-a"
        ),
    ]


@scenario("consumer_group_apis.fenced_epoch_ahead", versions=CONSUMER_GROUPS)
def fenced_epoch_ahead(side: Side) -> list[Any]:
    """A member heartbeats with an epoch above its own: FENCED_MEMBER_EPOCH; it rejoins (epoch
    0, same member id, as a fenced consumer does) and gets its assignment again."""
    name = side.topic()
    create_topics(side, side.group(), {name: 3})
    member = Member(side, side.group(), [name])
    joined = member.join()
    return [joined, member.send(member_epoch=member.epoch + 1), member.join(), member.send()]


@scenario("consumer_group_apis.previous_epoch", versions=CONSUMER_GROUPS)
def previous_epoch(side: Side) -> list[Any]:
    """A member's epoch moves on (it subscribes to a second topic); heartbeats with its
    previous epoch: owning a subset of its assignment, accepted (its answer may have been
    lost: Kafka's throwIfMemberEpochIsInvalid); owning a partition it is not assigned, or not
    saying what it owns (null), FENCED_MEMBER_EPOCH; owning a subset with a partition of the
    new topic, accepted; an epoch older still, FENCED_MEMBER_EPOCH."""
    one, two = side.topic("one"), side.topic("two")
    create_topics(side, side.group(), {one: 3, two: 2})
    member = Member(side, side.group(), [one])
    trace = [member.join()]
    previous, first_owned = member.epoch, dict(member.owned)
    trace.append(member.send(topics=[one, two]))
    other = {member.names.id(two): [0], **first_owned}
    stranger = {member.names.id(one): [0, 1, 2, 7]}
    trace += [
        member.send(member_epoch=previous, owned=first_owned),
        member.send(member_epoch=previous, owned=stranger),
        member.send(member_epoch=previous, owned=None),
        member.send(member_epoch=previous, owned=other),
        member.send(member_epoch=previous - 1, owned={}),
        member.send(),
    ]
    return trace


@scenario("consumer_group_apis.group_max_size", versions=CONSUMER_GROUPS)
def group_max_size(side: Side) -> list[Any]:
    """Both clusters run with ``group.consumer.max.size=3``: a fourth member is refused with
    GROUP_MAX_SIZE_REACHED; the members in it heartbeat on; once one leaves the fourth gets
    in."""
    name = side.topic()
    create_topics(side, side.group(), {name: 4})
    names = TopicNames(side)
    members = [Member(side, side.group(), [name], name=f"m{i}", names=names) for i in range(4)]
    trace = [m.join() for m in members[:3]]
    trace += [members[3].join(), members[0].send(), members[2].leave(), members[3].join()]
    return trace


# -- static members --------------------------------------------------------------------------------


@scenario("consumer_group_apis.static_member", versions=CONSUMER_GROUPS)
def static_member(side: Side) -> list[Any]:
    """A member with an instance id (and a rack id) joins, and is described with both; another
    member id with the same instance id while the first is in the group:
    UNRELEASED_INSTANCE_ID."""
    name = side.topic()
    create_topics(side, side.group(), {name: 2})
    member = Member(side, side.group(), [name], instance_id="instance-a", rack_id="rack-a")
    other = Member(side, member.group, [name], name="b", instance_id="instance-a")
    joined = member.join()
    return [joined, other.join(), member.send(), describe_when(side, member.group, "Stable")]


@scenario("consumer_group_apis.static_member_replaced", versions=CONSUMER_GROUPS)
def static_member_replaced(side: Side) -> list[Any]:
    """A static member of a group of two leaves for a moment (epoch -2: its answer has epoch
    -2, the group epoch stays, the member is described with epoch -2 and its assignment, the
    group Reconciling); a new member id with its instance id joins and takes its place
    at once — its epoch and assignment, no rebalance; the old member id is then
    FENCED_INSTANCE_ID, both heartbeating and leaving."""
    name = side.topic()
    create_topics(side, side.group(), {name: 4})
    names = TopicNames(side)
    static = Member(side, side.group(), [name], name="a", instance_id="instance-a", names=names)
    dynamic = Member(side, static.group, [name], name="b", names=names)
    trace = [static.join(), dynamic.join(), *settle([static, dynamic])]
    epoch, owned = static.epoch, dict(static.owned)
    trace.append(static.leave(STATIC_LEAVE_EPOCH))
    # Kept in the group at epoch -2, unreconciled: the group is Reconciling until it is back.
    trace.append(describe_when(side, static.group, "Reconciling", names=names))
    restarted = Member(side, static.group, [name], name="a2", instance_id="instance-a",
                       names=names)  # fmt: skip
    trace += [restarted.join(), restarted.send(), dynamic.send()]
    trace += [static.send(member_epoch=epoch, owned=owned), static.leave(STATIC_LEAVE_EPOCH)]
    return [*trace, describe_when(side, static.group, "Stable", names=names)]


@scenario("consumer_group_apis.static_member_leaves", versions=CONSUMER_GROUPS)
def static_member_leaves(side: Side) -> list[Any]:
    """A static member leaving for good (epoch -1): the group epoch goes up and the other
    member gets its partitions; its instance id is free again (a new member id takes it with
    epoch 0 as a new member); a static leave of an instance id the group does not have:
    UNKNOWN_MEMBER_ID."""
    name = side.topic()
    create_topics(side, side.group(), {name: 2})
    names = TopicNames(side)
    static = Member(side, side.group(), [name], name="a", instance_id="instance-a", names=names)
    dynamic = Member(side, static.group, [name], name="b", names=names)
    trace = [static.join(), dynamic.join(), *settle([static, dynamic])]
    trace += [static.leave(), dynamic.send(), dynamic.send()]
    again = Member(side, static.group, [name], name="a2", instance_id="instance-a", names=names)
    trace += [again.join(), *settle([dynamic, again])]
    ghost = client_member_id(side, static.group, "ghost")
    trace.append(coordinator_heartbeat(side, static.group, member_id=ghost,
                                       member_epoch=STATIC_LEAVE_EPOCH, instance_id="ghost"))  # fmt: skip
    return trace


# -- the cluster's metadata changes ----------------------------------------------------------------


def assigned(answer: dict[str, Any]) -> bool:
    return answer["error_code"] == 0 and bool(answer["assignment"])


@scenario("consumer_group_apis.regex_subscription", versions=CONSUMER_GROUPS)
def regex_subscription(side: Side) -> list[Any]:
    """A member subscribes by regular expression (v1 SubscribedTopicRegex) matching two of the
    scenario's three topics: Kafka resolves a regex off the heartbeat path, so the member
    heartbeats until an assignment comes (bounded): the matching topics' partitions with the
    next group epoch (Kafka 4.4: the join answers epoch 1 and nothing, the resolution bumps the
    group to 2), and the regex in the description (no topic names)."""
    topics = {side.topic("r-one"): 2, side.topic("r-two"): 3, side.topic("other"): 2}
    create_topics(side, side.group(), topics)
    member = Member(side, side.group(), regex=side.topic("r-") + ".*")
    joined = member.join()
    got = joined if assigned(joined) else heartbeat_until(member, assigned, "regex resolved")
    # The first answer (Kafka: epoch 1, nothing assigned) depends on when the regex is resolved.
    first = {k: joined[k] for k in ("error_code", "member_id", "heartbeat_interval_ms")}
    return [first, got, member.send(), describe_when(side, member.group, "Stable")]


@scenario("consumer_group_apis.regex_invalid", versions=CONSUMER_GROUPS)
def regex_invalid(side: Side) -> list[Any]:
    """A regex that does not compile (``[``): INVALID_REGULAR_EXPRESSION, nothing created."""
    group = side.group()
    return [
        coordinator_heartbeat(
            side, group, member_epoch=0, rebalance_ms=rq.REBALANCE_MS, regex="[", owned={}
        ),
        describe(side, group),
    ]


@scenario("consumer_group_apis.missing_topic_created", versions=CONSUMER_GROUPS)
def missing_topic_created(side: Side) -> list[Any]:
    """A member subscribes to a topic that does not exist: it joins with an empty assignment
    (the heartbeat creates no topic, though the brokers auto-create on Metadata); once the
    topic is created its heartbeats bring a new group epoch and the partitions."""
    name = side.topic()
    member = Member(side, side.group(), [name])
    trace = [member.join(), member.send()]
    side.create_topic(name, partitions=3)
    trace.append(heartbeat_until(member, assigned, "the new topic's partitions"))
    return [*trace, member.send(), describe_when(side, member.group, "Stable")]


@scenario("consumer_group_apis.partitions_added", versions={**CONSUMER_GROUPS,
          "CreatePartitions": rq.CREATE_PARTITIONS})  # fmt: skip
def partitions_added(side: Side) -> list[Any]:
    """Partitions added to a topic two members subscribe to (two to five, ``range``): the
    group epoch goes up and the new partitions are assigned."""
    name = side.topic()
    create_topics(side, side.group(), {name: 2})
    names = TopicNames(side)
    members = [Member(side, side.group(), [name], name=n, assignor="range", names=names)
               for n in ("a", "b")]  # fmt: skip
    trace = [members[0].join(), members[1].join(), *settle(members)]
    epoch = members[0].epoch
    added = side.call(0, rq.create_partitions(name, 5), rq.CREATE_PARTITIONS)
    side.wait_topic_ready(name, 5)
    trace += [[r.error_code for r in added.results], heartbeat_until(members[0], lambda a: a["member_epoch"] > epoch,
                                     "an epoch for the new partitions")]  # fmt: skip
    trace += settle(members)
    return [*trace, describe_when(side, members[0].group, "Stable", names=names)]


@scenario("consumer_group_apis.topic_deleted", versions={**CONSUMER_GROUPS,
          "DeleteTopics": rq.DELETE_TOPICS})  # fmt: skip
def topic_deleted(side: Side) -> list[Any]:
    """One of a member's two subscribed topics is deleted: a new group epoch, and its
    partitions leave the assignment (the subscription stays as it was)."""
    one, two = side.topic("one"), side.topic("two")
    create_topics(side, side.group(), {one: 2, two: 2})
    member = Member(side, side.group(), [one, two])
    trace = [member.join()]
    epoch = member.epoch
    names = member.names
    names.refresh()  # the deleted topic's id keeps its name in the record
    deleted = side.call(0, rq.delete_topics(two), rq.DELETE_TOPICS)
    trace.append([r.error_code for r in deleted.responses])
    side.wait_topic_gone(two)
    trace.append(heartbeat_until(member, lambda a: a["member_epoch"] > epoch, "a new epoch"))
    return [*trace, member.send(), describe_when(side, member.group, "Stable", names=names)]


# -- other apis on consumer groups -----------------------------------------------------------------


@scenario("consumer_group_apis.describe_not_consumer_groups", versions=CLASSIC)
def describe_not_consumer_groups(side: Side) -> list[Any]:
    """ConsumerGroupDescribe of a group that does not exist, and of a classic group
    (JoinGroup and SyncGroup): GROUP_ID_NOT_FOUND both."""
    member = classic.stable_member(side, side.group("classic"))
    classic.described_in_state(side, member.group, "Stable")
    return [describe(side, side.group("missing")), describe(side, member.group)]


@scenario(
    "consumer_group_apis.describe_groups_of_consumer_group", versions=CLASSIC, compare_messages=True
)
def describe_groups_of_consumer_group(side: Side) -> list[Any]:
    """DescribeGroups (the highest version both serve) of a stable consumer group of two:
    Kafka 4.4 describes only classic groups through it: Dead with no members, and no error at
    v5 (as for a group that does not exist), GROUP_ID_NOT_FOUND at v6 with the message "Group
    ... is not a classic group." (compared)."""
    name = side.topic()
    create_topics(side, side.group(), {name: 2})
    names = TopicNames(side)
    members = [Member(side, side.group(), [name], name=n, names=names) for n in ("a", "b")]
    for member in members:
        member.join()
    settle(members)
    describe_when(side, members[0].group, "Stable", names=names)
    return [classic.describe(side, members[0].group)]


@scenario("consumer_group_apis.classic_member_joins_consumer_group", versions=CLASSIC)
def classic_member_joins_consumer_group(side: Side) -> list[Any]:
    """A classic member (JoinGroup v9, no member id) asks to join a consumer group that has a
    member: Kafka 4.4 lets classic members into consumer groups (its default migration policy),
    starting with MEMBER_ID_REQUIRED as for a classic group. Only that first answer is recorded
    (Kafka's later ones wait on the consumer-protocol members' reconciliation)."""
    name = side.topic()
    create_topics(side, side.group(), {name: 2})
    member = Member(side, side.group(), [name])
    member.join()
    settle([member])
    answer = classic.Member(side, member.group).join()
    return [answer.error_code]


@scenario("consumer_group_apis.list_groups_with_types", versions=CLASSIC)
def list_groups_with_types(side: Side) -> list[Any]:
    """ListGroups v5 with a consumer group and a classic group: no filter lists both with
    their types; type ``consumer`` only the first, ``classic`` only the second; state
    ``Stable`` both."""
    name = side.topic()
    create_topics(side, side.group("consumer"), {name: 2})
    member = Member(side, side.group("consumer"), [name])
    member.join()
    describe_when(side, member.group, "Stable")
    classic.stable_member(side, side.group("classic"))
    return [
        classic.listed(side),
        classic.listed(side, types=["consumer"]),
        classic.listed(side, types=["classic"]),
        classic.listed(side, states=["Stable"], types=["consumer"]),
    ]


def commit(side: Side, group: str, topic: str, offset: int, epoch: int, member_id: str) -> Any:
    return classic.commit(side, group, {(topic, 0): offset}, generation=epoch, member_id=member_id)


def fetch(side: Side, group: str, topic: str | None, epoch: int, member_id: str | None) -> Any:
    """OffsetFetch of partition 0 of ``topic`` (``None``: all the group's offsets)."""
    request = rq.offset_fetch_member(group, None if topic is None else {topic: [0]}, member_id,
                                     epoch, ids=side.topic_id)  # fmt: skip
    answer = classic.coordinator_call(side, group, request, rq.OFFSET_FETCH)
    return classic.named_groups(side, answer.groups)


@scenario("consumer_group_apis.offset_commit_member_epoch", versions=OFFSETS)
def offset_commit_member_epoch(side: Side) -> list[Any]:
    """OffsetCommit v10 into a consumer group of one member: with its id and epoch, NONE; with
    its previous or a later epoch, STALE_MEMBER_EPOCH; a member id the group does not have,
    UNKNOWN_MEMBER_ID; no member (epoch -1, an admin's commit) while the group has members,
    UNKNOWN_MEMBER_ID; what is committed is what OffsetFetch reads."""
    name = side.topic()
    create_topics(side, side.group(), {name: 1})
    member = Member(side, side.group(), [name])
    member.join()
    epoch, group = member.epoch, member.group
    stranger = client_member_id(side, group, "stranger")
    return [
        commit(side, group, name, 5, epoch, member.member_id),
        commit(side, group, name, 6, epoch - 1, member.member_id),
        commit(side, group, name, 7, epoch + 1, member.member_id),
        commit(side, group, name, 8, epoch, stranger),
        commit(side, group, name, 9, -1, ""),
        fetch(side, group, name, -1, None),
    ]


@scenario("consumer_group_apis.offset_fetch_member_epoch", versions=OFFSETS)
def offset_fetch_member_epoch(side: Side) -> list[Any]:
    """OffsetFetch v10 with a member id and epoch (as a consumer of the new protocol fetches):
    its own epoch, the offsets; another epoch, STALE_MEMBER_EPOCH; a member id the group does
    not have, UNKNOWN_MEMBER_ID; neither (an admin), the offsets."""
    name = side.topic()
    create_topics(side, side.group(), {name: 1})
    member = Member(side, side.group(), [name])
    member.join()
    epoch, group = member.epoch, member.group
    commit(side, group, name, 4, epoch, member.member_id)
    return [
        fetch(side, group, name, epoch, member.member_id),
        fetch(side, group, name, epoch - 1, member.member_id),
        fetch(side, group, name, epoch, client_member_id(side, group, "stranger")),
        fetch(side, group, name, -1, None),
    ]


@scenario("consumer_group_apis.offset_commit_after_leaving", versions=OFFSETS)
def offset_commit_after_leaving(side: Side) -> list[Any]:
    """The only member leaves (the group is Empty): its commit with its last epoch is
    UNKNOWN_MEMBER_ID; an admin's commit (epoch -1, no member) is accepted."""
    name = side.topic()
    create_topics(side, side.group(), {name: 1})
    member = Member(side, side.group(), [name])
    member.join()
    epoch, group, member_id = member.epoch, member.group, member.member_id
    member.leave()
    describe_when(side, group, "Empty")
    return [
        commit(side, group, name, 3, epoch, member_id),
        commit(side, group, name, 4, -1, ""),
        fetch(side, group, name, -1, None),
    ]


@scenario("consumer_group_apis.offsets_of_all_topics_by_id", versions=OFFSETS)
def offsets_of_all_topics_by_id(side: Side) -> list[Any]:
    """A member subscribed to two topics commits to both (OffsetCommit v10, by id, with its
    epoch) and fetches all the group's offsets (OffsetFetch v10, null topics, with its epoch):
    both topics, by id."""
    one, two = side.topic("one"), side.topic("two")
    create_topics(side, side.group(), {one: 2, two: 1})
    member = Member(side, side.group(), [one, two])
    member.join()
    offsets = {(one, 0): 3, (one, 1): 4, (two, 0): 5}
    committed = classic.commit(side, member.group, offsets, generation=member.epoch,
                               member_id=member.member_id)  # fmt: skip
    return [committed, fetch(side, member.group, None, member.epoch, member.member_id)]
