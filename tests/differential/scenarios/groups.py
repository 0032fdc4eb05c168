"""Scenarios of classic consumer groups: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups and ListGroups.

Versions: FindCoordinator v5, JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5,
OffsetCommit v10, OffsetFetch v10, DescribeGroups v6, ListGroups v5 — the highest both Kafka 4.4
and coordkit serve answer. OffsetCommit and OffsetFetch v10 name topics by id: a scenario names
its topics, each sent with the side's id of it (:func:`commit`, :func:`fetch_offsets`), and the
topics answered by id are recorded by the name the side's metadata has for the id
(:func:`named`); scenarios of ids and of v9 against v10 are in ``groups_by_id.py``.

Both clusters run with ``group.initial.rebalance.delay.ms=0`` and
``group.min.session.timeout.ms=1000``; members ask for 30 s sessions, so none expires while a
scenario runs, and every rebalance is driven by requests, never by a timeout.

Each member has a connection of its own to the group's coordinator: a JoinGroup or SyncGroup
waiting for the rest of the group holds its connection (brokers answer a connection's requests in
order), while the other members act on theirs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coordkit.testing.waiting import wait_for
from differential import requests as rq
from differential.harness import WAIT_SECONDS, Connection, Side, scenario

GROUPS = {
    "JoinGroup": rq.JOIN_GROUP,
    "SyncGroup": rq.SYNC_GROUP,
    "Heartbeat": rq.HEARTBEAT,
    "LeaveGroup": rq.LEAVE_GROUP,
    "OffsetCommit": rq.OFFSET_COMMIT,
    "OffsetFetch": rq.OFFSET_FETCH,
    "DescribeGroups": rq.DESCRIBE_GROUPS,
    "ListGroups": rq.LIST_GROUPS,
    "FindCoordinator": rq.FIND_COORDINATOR,
}
#: OffsetCommit and OffsetFetch v9: the last versions to name topics by name (a topic that does
#: not exist can only be named so).
BY_NAME = 9
#: Error codes (Kafka's ``Errors``) the scenarios branch on.
MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27


class Member:
    """One member of a classic group, on its own connection to the group's coordinator."""

    def __init__(self, side: Side, group: str, *, instance_id: str | None = None,
                 protocols: Sequence[tuple[str, bytes]] = (("range", rq.SUBSCRIPTION),),
                 protocol_type: str = rq.CONSUMER) -> None:  # fmt: skip
        self.side = side
        self.group = group
        self.instance_id = instance_id
        self.protocols = protocols
        self.protocol_type = protocol_type
        self.connection: Connection = side.connect(side.coordinator(group))
        self.member_id = ""
        self.generation = -1

    def send_join(self) -> None:
        request = rq.join_group(self.group, self.member_id, instance_id=self.instance_id,
                                protocol_type=self.protocol_type, protocols=self.protocols)  # fmt: skip
        self.connection.send(request, rq.JOIN_GROUP)

    def receive_join(self) -> Any:
        answer = self.connection.receive()
        if answer.member_id:
            self.member_id = answer.member_id
        if answer.error_code == 0:
            self.generation = answer.generation_id
        return answer

    def join(self) -> Any:
        self.send_join()
        return self.receive_join()

    def join_with_id(self) -> list[Any]:
        """JoinGroup v9 as a client does it: without a member id first (a dynamic member gets
        MEMBER_ID_REQUIRED and its id), then with it. Both answers."""
        first = self.join()
        if first.error_code != MEMBER_ID_REQUIRED:
            return [first]
        return [first, self.join()]

    def send_sync(self, assignments: Mapping[str, bytes] | None = None) -> None:
        request = rq.sync_group(self.group, self.generation, self.member_id, assignments,
                                instance_id=self.instance_id,
                                protocol_type=self.protocol_type)  # fmt: skip
        self.connection.send(request, rq.SYNC_GROUP)

    def sync(self, assignments: Mapping[str, bytes] | None = None) -> Any:
        self.send_sync(assignments)
        return self.connection.receive()

    def heartbeat(self, generation: int | None = None, member_id: str | None = None) -> Any:
        request = rq.heartbeat(
            self.group,
            self.generation if generation is None else generation,
            self.member_id if member_id is None else member_id,
            self.instance_id,
        )
        return self.connection.call(request, rq.HEARTBEAT)

    def call(self, request: Any, version: int) -> Any:
        return self.connection.call(request, version)


def stable_member(side: Side, group: str, **options: Any) -> Member:
    """A group of one member, joined and synced (generation 1, Stable)."""
    member = Member(side, group, **options)
    member.join_with_id()
    member.sync({member.member_id: rq.ASSIGNMENT})
    return member


def second_member_joins(side: Side, leader: Member, **options: Any) -> tuple[Member, list[Any]]:
    """A second member joins the leader's stable group: it gets its member id, and its JoinGroup
    waits (sent, unanswered) for the leader to rejoin. Returns once the group is seen
    rebalancing (the JoinGroup travels on a connection of its own: nothing else orders it
    before the leader's next request). The member and its first answer."""
    other = Member(side, leader.group, **options)
    first = other.join()
    other.send_join()
    described_in_state(side, leader.group, "PreparingRebalance")
    return other, [first]


def stable_group(side: Side, group: str, size: int) -> list[Member]:
    """A stable group of ``size`` members, the first leading: the first joins alone, the
    others join (and wait), the first rejoins, all sync."""
    leader = stable_member(side, group)
    others = [second_member_joins(side, leader)[0] for _ in range(size - 1)]
    leader.join()
    for other in others:
        other.receive_join()
        other.send_sync()
    assignments = {m.member_id: rq.ASSIGNMENT for m in [leader, *others]}
    leader.sync(assignments)
    for other in others:
        other.connection.receive()
    return [leader, *others]


def two_member_group(side: Side, group: str) -> tuple[Member, Member]:
    """A stable group of two: the first member leads; generation 2."""
    leader, other = stable_group(side, group, 2)
    return leader, other


def coordinator_call(side: Side, group: str, request: Any, version: int) -> Any:
    return side.call(side.coordinator(group), request, version)


def describe(side: Side, *groups: str) -> Any:
    return coordinator_call(side, groups[0], rq.describe_groups(*groups), rq.DESCRIBE_GROUPS).groups


def described_in_state(side: Side, group: str, state: str) -> Any:
    """DescribeGroups of ``group`` once it says ``state``. Kafka 4's coordinator describes a
    group as of its last committed write, so a change a member's answer has just confirmed may
    not show yet; a side where the state never shows records the wait's failure."""
    return wait_for(
        lambda: (found := describe(side, group)) and found[0].group_state == state and found,
        WAIT_SECONDS,
        f"{side.name}: group {group} {state}",
    )


# -- FindCoordinator -----------------------------------------------------------------------------


@scenario("groups.find_coordinator", versions=GROUPS)
def find_coordinator(side: Side) -> list[Any]:
    """FindCoordinator v5 of two groups from every broker: NONE, and every broker names the
    same coordinator, a live broker (which one depends on where ``__consumer_offsets``'
    partitions were placed)."""
    keys = [side.group("a"), side.group("b")]
    answers = [side.call(i, rq.find_coordinator(*keys), rq.FIND_COORDINATOR) for i in range(3)]
    return [
        [[(c.key, c.error_code, c.node_id in side.broker_ids) for c in a.coordinators]
         for a in answers],
        [len({a.coordinators[k].node_id for a in answers}) for k in range(2)],
    ]  # fmt: skip


@scenario("groups.find_transaction_coordinator", versions=GROUPS)
def find_transaction_coordinator(side: Side) -> list[Any]:
    """FindCoordinator for a transactional id (key type 1), asked until the answer is not
    COORDINATOR_NOT_AVAILABLE (Kafka creates ``__transaction_state`` on the first lookup)."""
    request = rq.find_coordinator(side.group("txn"), key_type=1)

    def settled() -> Any:
        answer = side.call(0, request, rq.FIND_COORDINATOR).coordinators[0]
        return None if answer.error_code == 15 else answer  # COORDINATOR_NOT_AVAILABLE

    answer = wait_for(settled, 60, f"{side.name}: a transaction coordinator")
    return [answer.error_code, answer.node_id in side.broker_ids]


@scenario("groups.not_coordinator", versions=GROUPS)
def not_coordinator(side: Side) -> list[Any]:
    """JoinGroup, Heartbeat, OffsetCommit and OffsetFetch sent to a broker that does not
    coordinate the group: NOT_COORDINATOR."""
    group, name = side.group(), side.topic()
    side.create_topic(name)
    other = (side.coordinator(group) + 1) % side.size
    return [
        side.call(other, rq.join_group(group), rq.JOIN_GROUP),
        side.call(other, rq.heartbeat(group, 1, "m"), rq.HEARTBEAT),
        named(side, side.call(other, rq.offset_commit(group, {(name, 0): 1}, ids=side.topic_id),
                              rq.OFFSET_COMMIT).topics),
        named_groups(side, side.call(other, rq.offset_fetch({group: {name: [0]}}, ids=side.topic_id),
                                     rq.OFFSET_FETCH).groups),
    ]  # fmt: skip


# -- JoinGroup ---------------------------------------------------------------------------------


@scenario("groups.join_member_id_required", versions=GROUPS)
def join_member_id_required(side: Side) -> list[Any]:
    """JoinGroup v4+ without a member id (a dynamic member): MEMBER_ID_REQUIRED with the id the
    member is to rejoin with, generation -1."""
    return [Member(side, side.group()).join()]


@scenario("groups.join_single_member", versions=GROUPS)
def join_single_member(side: Side) -> list[Any]:
    """A lone member's full join: MEMBER_ID_REQUIRED, then generation 1 with itself as leader
    and its metadata in the member list; its SyncGroup gets the assignment it sent."""
    member = Member(side, side.group())
    joined = member.join_with_id()
    return [*joined, member.sync({member.member_id: rq.ASSIGNMENT})]


@scenario("groups.join_unknown_member_id", versions=GROUPS)
def join_unknown_member_id(side: Side) -> list[Any]:
    """JoinGroup with a member id the group never gave out (the group exists):
    UNKNOWN_MEMBER_ID."""
    member = stable_member(side, side.group())
    stranger = Member(side, member.group)
    stranger.member_id = "stranger-member"
    return [stranger.join()]


@scenario("groups.join_unknown_member_id_new_group", versions=GROUPS)
def join_unknown_member_id_new_group(side: Side) -> list[Any]:
    """JoinGroup with a made-up member id for a group that does not exist:
    UNKNOWN_MEMBER_ID."""
    stranger = Member(side, side.group())
    stranger.member_id = "stranger-member"
    return [stranger.join()]


@scenario("groups.join_inconsistent_protocol_type", versions=GROUPS)
def join_inconsistent_protocol_type(side: Side) -> list[Any]:
    """A second member with another protocol type (``connect``) than the group's
    (``consumer``): INCONSISTENT_GROUP_PROTOCOL."""
    member = stable_member(side, side.group())
    other = Member(side, member.group, protocol_type="connect")
    return other.join_with_id()


@scenario("groups.join_inconsistent_protocols", versions=GROUPS)
def join_inconsistent_protocols(side: Side) -> list[Any]:
    """A second member offering only ``roundrobin`` to a group whose members all run
    ``range``: INCONSISTENT_GROUP_PROTOCOL."""
    member = stable_member(side, side.group())
    other = Member(side, member.group, protocols=(("roundrobin", rq.SUBSCRIPTION),))
    return other.join_with_id()


@scenario("groups.join_no_protocols", versions=GROUPS)
def join_no_protocols(side: Side) -> list[Any]:
    """A JoinGroup offering no protocol: INCONSISTENT_GROUP_PROTOCOL."""
    return [Member(side, side.group(), protocols=()).join()]


@scenario("groups.join_empty_protocol_type", versions=GROUPS)
def join_empty_protocol_type(side: Side) -> list[Any]:
    """A JoinGroup with an empty protocol type: INCONSISTENT_GROUP_PROTOCOL."""
    return [Member(side, side.group(), protocol_type="").join()]


@scenario("groups.join_session_timeout_too_low", versions=GROUPS)
def join_session_timeout_too_low(side: Side) -> list[Any]:
    """A session timeout below ``group.min.session.timeout.ms`` (999 ms against 1,000):
    INVALID_SESSION_TIMEOUT."""
    group = side.group()
    request = rq.join_group(group, session_ms=999)
    return [coordinator_call(side, group, request, rq.JOIN_GROUP)]


@scenario("groups.join_session_timeout_too_high", versions=GROUPS)
def join_session_timeout_too_high(side: Side) -> list[Any]:
    """A session timeout above ``group.max.session.timeout.ms`` (1,800,000 by default):
    INVALID_SESSION_TIMEOUT."""
    group = side.group()
    request = rq.join_group(group, session_ms=1_800_001)
    return [coordinator_call(side, group, request, rq.JOIN_GROUP)]


@scenario("groups.join_empty_group_id", versions=GROUPS)
def join_empty_group_id(side: Side) -> list[Any]:
    """A JoinGroup for the empty group id (sent to broker 0): INVALID_GROUP_ID."""
    return [side.call(0, rq.join_group(""), rq.JOIN_GROUP)]


@scenario("groups.rebalance_in_progress", versions=GROUPS)
def rebalance_in_progress(side: Side) -> list[Any]:
    """A second member joins a stable group: the first member's heartbeat gets
    REBALANCE_IN_PROGRESS; it rejoins, and both get generation 2, the first still leading, the
    leader with both members' metadata."""
    leader = stable_member(side, side.group())
    other, answers = second_member_joins(side, leader)
    beat = leader.heartbeat()
    rejoined = leader.join()
    return [*answers, beat, rejoined, other.receive_join()]


@scenario("groups.sync_during_rebalance", versions=GROUPS)
def sync_during_rebalance(side: Side) -> list[Any]:
    """The first member's SyncGroup of generation 1 while the group rebalances for a second
    member: REBALANCE_IN_PROGRESS."""
    leader = stable_member(side, side.group())
    other, _ = second_member_joins(side, leader)
    synced = leader.sync({leader.member_id: rq.ASSIGNMENT})
    leader.join()
    other.receive_join()
    return [synced]


@scenario("groups.follower_sync_waits_for_leader", versions=GROUPS)
def follower_sync_waits_for_leader(side: Side) -> list[Any]:
    """In a group of two the follower's SyncGroup is answered once the leader's arrives, each
    with the assignment the leader gave it."""
    leader = stable_member(side, side.group())
    other, _ = second_member_joins(side, leader)
    leader.join()
    other.receive_join()
    other.send_sync()
    led = leader.sync({leader.member_id: b"leader's", other.member_id: b"follower's"})
    return [led, other.connection.receive()]


@scenario("groups.leader_rejoin_unchanged", versions=GROUPS)
def leader_rejoin_unchanged(side: Side) -> list[Any]:
    """The leader of a stable group of one rejoins with the same metadata: a new generation,
    still leader."""
    leader = stable_member(side, side.group())
    return [leader.join(), leader.sync({leader.member_id: rq.ASSIGNMENT})]


@scenario("groups.group_max_size", versions=GROUPS)
def group_max_size(side: Side) -> list[Any]:
    """The Kafka cluster runs with ``group.max.size=3``: a fourth member joining a stable group
    of three is refused at once with GROUP_MAX_SIZE_REACHED (only its first answer is
    recorded: a member let in would start a rebalance)."""
    stable_group(side, side.group(), 3)
    return [Member(side, side.group()).join()]


# -- static membership -------------------------------------------------------------------------


@scenario("groups.static_member_join", versions=GROUPS)
def static_member_join(side: Side) -> list[Any]:
    """A member with a group instance id joins without MEMBER_ID_REQUIRED: generation 1, its
    instance id in the member list."""
    member = Member(side, side.group(), instance_id="instance-a")
    return member.join_with_id()


@scenario("groups.static_member_fenced", versions=GROUPS)
def static_member_fenced(side: Side) -> list[Any]:
    """A static member replaced by a new one with the same instance id (a restarted consumer
    joins without its old member id): the new member gets a new id and the group's current
    generation, and the old member's heartbeat is FENCED_INSTANCE_ID."""
    old = stable_member(side, side.group(), instance_id="instance-a")
    new = Member(side, old.group, instance_id="instance-a")
    replaced = new.join()
    return [replaced, old.heartbeat(), new.heartbeat()]


@scenario("groups.static_member_wrong_member_id", versions=GROUPS)
def static_member_wrong_member_id(side: Side) -> list[Any]:
    """A JoinGroup with a known instance id but a member id that is not the instance's:
    FENCED_INSTANCE_ID."""
    member = stable_member(side, side.group(), instance_id="instance-a")
    impostor = Member(side, member.group, instance_id="instance-a")
    impostor.member_id = "not-the-instance-member"
    return [impostor.join()]


# -- SyncGroup and Heartbeat --------------------------------------------------------------------


@scenario("groups.sync_unknown_member", versions=GROUPS)
def sync_unknown_member(side: Side) -> list[Any]:
    """SyncGroup of a member id the group does not have: UNKNOWN_MEMBER_ID."""
    member = stable_member(side, side.group())
    request = rq.sync_group(member.group, member.generation, "stranger-member")
    return [member.call(request, rq.SYNC_GROUP)]


@scenario("groups.sync_illegal_generation", versions=GROUPS)
def sync_illegal_generation(side: Side) -> list[Any]:
    """SyncGroup of the next generation (2 against 1): ILLEGAL_GENERATION."""
    member = stable_member(side, side.group())
    request = rq.sync_group(member.group, member.generation + 1, member.member_id)
    return [member.call(request, rq.SYNC_GROUP)]


@scenario("groups.sync_inconsistent_protocol", versions=GROUPS)
def sync_inconsistent_protocol(side: Side) -> list[Any]:
    """SyncGroup v5 naming another protocol than the group's (``roundrobin`` against
    ``range``): INCONSISTENT_GROUP_PROTOCOL."""
    member = Member(side, side.group())
    member.join_with_id()
    request = rq.sync_group(member.group, member.generation, member.member_id,
                            {member.member_id: rq.ASSIGNMENT}, protocol_name="roundrobin")  # fmt: skip
    return [member.call(request, rq.SYNC_GROUP)]


@scenario("groups.heartbeat_stable", versions=GROUPS)
def heartbeat_stable(side: Side) -> list[Any]:
    """A heartbeat of a member of a stable group: NONE."""
    return [stable_member(side, side.group()).heartbeat()]


@scenario("groups.heartbeat_before_sync", versions=GROUPS)
def heartbeat_before_sync(side: Side) -> list[Any]:
    """A heartbeat after JoinGroup and before SyncGroup (the group is completing its
    rebalance)."""
    member = Member(side, side.group())
    member.join_with_id()
    return [member.heartbeat()]


@scenario("groups.heartbeat_unknown_member", versions=GROUPS)
def heartbeat_unknown_member(side: Side) -> list[Any]:
    """A heartbeat of a member id the group does not have: UNKNOWN_MEMBER_ID."""
    member = stable_member(side, side.group())
    return [member.heartbeat(member_id="stranger-member")]


@scenario("groups.heartbeat_illegal_generation", versions=GROUPS)
def heartbeat_illegal_generation(side: Side) -> list[Any]:
    """A heartbeat of another generation (0 and 2 against 1): ILLEGAL_GENERATION."""
    member = stable_member(side, side.group())
    return [member.heartbeat(generation=0), member.heartbeat(generation=2)]


@scenario("groups.heartbeat_unknown_group", versions=GROUPS)
def heartbeat_unknown_group(side: Side) -> list[Any]:
    """A heartbeat for a group that does not exist: UNKNOWN_MEMBER_ID."""
    group = side.group()
    return [coordinator_call(side, group, rq.heartbeat(group, 1, "stranger-member"),
                             rq.HEARTBEAT)]  # fmt: skip


# -- LeaveGroup ------------------------------------------------------------------------------------


@scenario("groups.leave_batch", versions=GROUPS)
def leave_batch(side: Side) -> list[Any]:
    """LeaveGroup v5 of both members of a group in one request: NONE for each, and the group
    is Empty afterwards."""
    leader, other = two_member_group(side, side.group())
    request = rq.leave_group(leader.group, (leader.member_id, None), (other.member_id, None))
    left = coordinator_call(side, leader.group, request, rq.LEAVE_GROUP)
    return [left, described_in_state(side, leader.group, "Empty")]


@scenario("groups.leave_unknown_member", versions=GROUPS)
def leave_unknown_member(side: Side) -> list[Any]:
    """LeaveGroup of a member and a stranger: NONE for the member, UNKNOWN_MEMBER_ID for the
    stranger."""
    member = stable_member(side, side.group())
    request = rq.leave_group(member.group, (member.member_id, None), ("stranger-member", None))
    return [coordinator_call(side, member.group, request, rq.LEAVE_GROUP)]


@scenario("groups.leave_unknown_group", versions=GROUPS)
def leave_unknown_group(side: Side) -> list[Any]:
    """LeaveGroup for a group that does not exist: NONE for the request, UNKNOWN_MEMBER_ID
    for the member."""
    group = side.group()
    request = rq.leave_group(group, ("stranger-member", None))
    return [coordinator_call(side, group, request, rq.LEAVE_GROUP)]


@scenario("groups.leave_static_by_instance_id", versions=GROUPS)
def leave_static_by_instance_id(side: Side) -> list[Any]:
    """A static member leaving by instance id alone (member id empty, as an admin client
    removes it): NONE, and the group is Empty."""
    member = stable_member(side, side.group(), instance_id="instance-a")
    request = rq.leave_group(member.group, ("", "instance-a"))
    left = coordinator_call(side, member.group, request, rq.LEAVE_GROUP)
    return [left, described_in_state(side, member.group, "Empty")]


@scenario("groups.leave_static_wrong_member_id", versions=GROUPS)
def leave_static_wrong_member_id(side: Side) -> list[Any]:
    """A static member's instance id with a member id that is not its own:
    FENCED_INSTANCE_ID."""
    member = stable_member(side, side.group(), instance_id="instance-a")
    request = rq.leave_group(member.group, ("not-the-instance-member", "instance-a"))
    return [coordinator_call(side, member.group, request, rq.LEAVE_GROUP)]


@scenario("groups.leave_then_rejoin", versions=GROUPS)
def leave_then_rejoin(side: Side) -> list[Any]:
    """The only member leaves, and joins again as a new member: the generation goes on from
    where the group was."""
    member = stable_member(side, side.group())
    request = rq.leave_group(member.group, (member.member_id, None))
    left = coordinator_call(side, member.group, request, rq.LEAVE_GROUP)
    again = Member(side, member.group)
    return [left, *again.join_with_id()]


# -- offsets ----------------------------------------------------------------------------------------


def named(side: Side, topics: Sequence[Any]) -> list[Any]:
    """The topics of an OffsetCommit or OffsetFetch answer, those answered by id (v10) named as
    the side's metadata names the id ("" for an id it does not have), sorted by name: the two
    sides' answers compare by name, and their ids are numbered in the same order."""
    if any(t.topic_id.int for t in topics):
        names = {t.topic_id: t.name for t in side.metadata(0, None).topics}
        for topic in topics:
            if topic.topic_id.int:
                topic.name = names.get(topic.topic_id, "")
    return sorted(topics, key=lambda t: t.name)


def named_groups(side: Side, groups: Sequence[Any]) -> Sequence[Any]:
    """The groups of an OffsetFetch v8+ answer, their topics :func:`named`."""
    for group in groups:
        group.topics = named(side, group.topics)
    return groups


def commit(side: Side, group: str, offsets: Mapping[tuple[rq.Topic, int], int], *,
           version: int = rq.OFFSET_COMMIT, **options: Any) -> Any:  # fmt: skip
    """OffsetCommit of ``offsets``, a topic named by name going with the side's id of it."""
    request = rq.offset_commit(group, offsets, ids=side.topic_id, **options)
    return named(side, coordinator_call(side, group, request, version).topics)


def fetch_offsets(side: Side, groups: Mapping[str, Mapping[rq.Topic, Sequence[int]] | None], *,
                  version: int = rq.OFFSET_FETCH, **options: Any) -> Any:  # fmt: skip
    """OffsetFetch of ``groups`` (sent to the first one's coordinator), as :func:`commit`."""
    request = rq.offset_fetch(groups, ids=side.topic_id, **options)
    return named_groups(side, coordinator_call(side, next(iter(groups)), request, version).groups)


@scenario("groups.offset_commit_simple", versions=GROUPS)
def offset_commit_simple(side: Side) -> list[Any]:
    """OffsetCommit with generation -1 and no member (a standalone consumer, an admin tool)
    for a group that does not exist yet: NONE; OffsetFetch reads the offsets and metadata
    back."""
    group, name = side.group(), side.topic()
    side.create_topic(name, partitions=2)
    committed = commit(side, group, {(name, 0): 5, (name, 1): 7}, metadata="meta")
    return [committed, fetch_offsets(side, {group: {name: [0, 1]}})]


@scenario("groups.offset_commit_member", versions=GROUPS)
def offset_commit_member(side: Side) -> list[Any]:
    """A stable member commits with its generation and member id: NONE."""
    name = side.topic()
    side.create_topic(name)
    member = stable_member(side, side.group())
    committed = commit(side, member.group, {(name, 0): 3}, generation=member.generation,
                       member_id=member.member_id)  # fmt: skip
    return [committed, fetch_offsets(side, {member.group: {name: [0]}})]


@scenario("groups.offset_commit_stale_generation", versions=GROUPS)
def offset_commit_stale_generation(side: Side) -> list[Any]:
    """A member of generation 2 commits with generation 1 (stale) and 3 (ahead):
    ILLEGAL_GENERATION both times."""
    name = side.topic()
    side.create_topic(name)
    member = stable_member(side, side.group())
    member.join()
    member.sync({member.member_id: rq.ASSIGNMENT})
    return [
        commit(side, member.group, {(name, 0): 1}, generation=g, member_id=member.member_id)
        for g in (member.generation - 1, member.generation + 1)
    ]


@scenario("groups.offset_commit_unknown_member", versions=GROUPS)
def offset_commit_unknown_member(side: Side) -> list[Any]:
    """A commit with the group's generation and a member id it does not have:
    UNKNOWN_MEMBER_ID."""
    name = side.topic()
    side.create_topic(name)
    member = stable_member(side, side.group())
    return [commit(side, member.group, {(name, 0): 1}, generation=member.generation,
                   member_id="stranger-member")]  # fmt: skip


@scenario("groups.offset_commit_during_rebalance", versions=GROUPS)
def offset_commit_during_rebalance(side: Side) -> list[Any]:
    """The first member commits with its generation while the group prepares a rebalance for
    a second member: NONE (a member's generation stays valid until the join phase ends; only a
    CompletingRebalance group refuses commits)."""
    name = side.topic()
    side.create_topic(name)
    leader = stable_member(side, side.group())
    other, _ = second_member_joins(side, leader)
    committed = commit(side, leader.group, {(name, 0): 1}, generation=leader.generation,
                       member_id=leader.member_id)  # fmt: skip
    leader.join()
    other.receive_join()
    return [committed]


@scenario("groups.offset_commit_to_empty_group_with_generation", versions=GROUPS)
def offset_commit_to_empty_group_with_generation(side: Side) -> list[Any]:
    """A commit naming a member and generation 1 for a group that does not exist: Kafka 4
    answers GROUP_ID_NOT_FOUND."""
    name = side.topic()
    side.create_topic(name)
    return [commit(side, side.group(), {(name, 0): 1}, generation=1, member_id="stranger")]


@scenario("groups.offset_commit_unknown_topic", versions={**GROUPS, "OffsetCommit": BY_NAME},
          older_versions="OffsetCommit v9: a topic that does not exist named by name")  # fmt: skip
def offset_commit_unknown_topic(side: Side) -> list[Any]:
    """A commit (v9) for a topic name that does not exist: UNKNOWN_TOPIC_OR_PARTITION (the
    broker checks its metadata before the coordinator sees the commit). By id (v10):
    ``groups_by_id.offset_commit_unknown_id``."""
    group = side.group()
    return [commit(side, group, {(side.topic("missing"), 0): 1}, version=BY_NAME)]


@scenario("groups.offset_commit_unknown_partition", versions=GROUPS)
def offset_commit_unknown_partition(side: Side) -> list[Any]:
    """A commit for partition 0, which exists, and 5, which does not, of a one-partition
    topic: NONE and UNKNOWN_TOPIC_OR_PARTITION."""
    group, name = side.group(), side.topic()
    side.create_topic(name)
    return [commit(side, group, {(name, 0): 1, (name, 5): 1})]


@scenario("groups.offset_commit_metadata_too_large", versions=GROUPS)
def offset_commit_metadata_too_large(side: Side) -> list[Any]:
    """Commit metadata over ``offset.metadata.max.bytes`` (4,096): OFFSET_METADATA_TOO_LARGE,
    and nothing committed."""
    group, name = side.group(), side.topic()
    side.create_topic(name)
    committed = commit(side, group, {(name, 0): 1}, metadata="m" * 4097)
    return [committed, fetch_offsets(side, {group: {name: [0]}})]


@scenario("groups.offset_fetch_unknown_group", versions=GROUPS)
def offset_fetch_unknown_group(side: Side) -> list[Any]:
    """OffsetFetch of named partitions for a group that does not exist: offset -1 for each,
    no error."""
    name = side.topic()
    side.create_topic(name, partitions=2)
    return [fetch_offsets(side, {side.group(): {name: [0, 1]}})]


@scenario("groups.offset_fetch_all_partitions", versions=GROUPS)
def offset_fetch_all_partitions(side: Side) -> list[Any]:
    """OffsetFetch with a null topic list: every committed offset of the group."""
    group, first, second = side.group(), side.topic("a"), side.topic("b")
    side.create_topic(first, partitions=2)
    side.create_topic(second)
    commit(side, group, {(first, 0): 1, (first, 1): 2, (second, 0): 3})
    return [fetch_offsets(side, {group: None})]


@scenario("groups.offset_fetch_all_unknown_group", versions=GROUPS)
def offset_fetch_all_unknown_group(side: Side) -> list[Any]:
    """OffsetFetch of every partition for a group that does not exist: no topics."""
    return [fetch_offsets(side, {side.group(): None})]


@scenario("groups.offset_fetch_uncommitted_partition", versions={**GROUPS, "OffsetFetch": BY_NAME},
          older_versions="OffsetFetch v9: a topic that does not exist named by name")  # fmt: skip
def offset_fetch_uncommitted_partition(side: Side) -> list[Any]:
    """OffsetFetch (v9) of a committed partition, one never committed and one of a topic name
    that does not exist: offset -1 and no error for the last two. By id (v10):
    ``groups_by_id.offset_fetch_known_and_unknown_ids``."""
    group, name = side.group(), side.topic()
    side.create_topic(name, partitions=2)
    commit(side, group, {(name, 0): 4})
    missing = side.topic("missing")
    return [fetch_offsets(side, {group: {name: [0, 1], missing: [0]}}, version=BY_NAME)]


@scenario("groups.offset_fetch_two_groups", versions=GROUPS)
def offset_fetch_two_groups(side: Side) -> list[Any]:
    """OffsetFetch v8+ of two groups in one request (both coordinated by the broker asked:
    the names are chosen so on both clusters)."""
    name = side.topic()
    side.create_topic(name)
    first = side.group("a")
    second = next(side.group(f"b{i}") for i in range(100)
                  if side.coordinator(side.group(f"b{i}")) == side.coordinator(first))  # fmt: skip
    commit(side, first, {(name, 0): 1})
    commit(side, second, {(name, 0): 2})
    answer = fetch_offsets(side, {first: {name: [0]}, second: None})
    return [answer[0], ("the second group", answer[1].topics)]


@scenario("groups.offset_fetch_require_stable", versions=GROUPS)
def offset_fetch_require_stable(side: Side) -> list[Any]:
    """OffsetFetch with require_stable (no transaction pending): the committed offsets."""
    group, name = side.group(), side.topic()
    side.create_topic(name)
    commit(side, group, {(name, 0): 9})
    return [fetch_offsets(side, {group: {name: [0]}}, require_stable=True)]


# -- DescribeGroups and ListGroups -------------------------------------------------------------------


@scenario("groups.describe_unknown", versions=GROUPS, compare_messages=True)
def describe_unknown(side: Side) -> list[Any]:
    """DescribeGroups v6 of a group that does not exist: GROUP_ID_NOT_FOUND, "Group ... not
    found." (KIP-1043; v5 answered Dead with no error), state Dead, no members."""
    return [describe(side, side.group())]


@scenario("groups.describe_empty", versions=GROUPS)
def describe_empty(side: Side) -> list[Any]:
    """A group with committed offsets and no member: Empty."""
    group, name = side.group(), side.topic()
    side.create_topic(name)
    commit(side, group, {(name, 0): 1})
    return [described_in_state(side, group, "Empty")]


@scenario("groups.describe_preparing_rebalance", versions=GROUPS)
def describe_preparing_rebalance(side: Side) -> list[Any]:
    """A group waiting for its first member to rejoin: PreparingRebalance."""
    leader = stable_member(side, side.group())
    other, _ = second_member_joins(side, leader)
    described = described_in_state(side, leader.group, "PreparingRebalance")
    leader.join()
    other.receive_join()
    return [described]


@scenario("groups.describe_completing_rebalance", versions=GROUPS)
def describe_completing_rebalance(side: Side) -> list[Any]:
    """A group joined and not synced: CompletingRebalance, with the protocol chosen."""
    member = Member(side, side.group())
    member.join_with_id()
    return [described_in_state(side, member.group, "CompletingRebalance")]


@scenario("groups.describe_stable", versions=GROUPS)
def describe_stable(side: Side) -> list[Any]:
    """A stable group of two: Stable, the protocol, each member's client id, host, metadata
    and assignment."""
    leader, _ = two_member_group(side, side.group())
    return [described_in_state(side, leader.group, "Stable")]


@scenario("groups.describe_static_member", versions=GROUPS)
def describe_static_member(side: Side) -> list[Any]:
    """A stable group of one static member: its instance id in the description."""
    member = stable_member(side, side.group(), instance_id="instance-a")
    return [described_in_state(side, member.group, "Stable")]


@scenario("groups.describe_two_groups", versions=GROUPS)
def describe_two_groups(side: Side) -> list[Any]:
    """DescribeGroups of a stable group and an unknown one in one request, sent to the first
    group's coordinator (the second's is the same: the names are chosen so): the first
    described, the second GROUP_ID_NOT_FOUND (v6)."""
    member = stable_member(side, side.group("a"))
    unknown = next(side.group(f"b{i}") for i in range(100)
                   if side.coordinator(side.group(f"b{i}")) == side.coordinator(member.group))  # fmt: skip
    described_in_state(side, member.group, "Stable")
    answer = describe(side, member.group, unknown)
    answer[1].group_id = "the unknown group"  # its name depends on where coordinators are
    return [answer]


def listed(side: Side, **filters: Any) -> list[Any]:
    """ListGroups of every broker (each lists the groups it coordinates, and which broker that
    is differs between the clusters): the error codes, and the scenario's own groups of all
    three answers by name."""
    codes, groups = [], []
    for index in range(side.size):
        answer = side.call(index, rq.list_groups(**filters), rq.LIST_GROUPS)
        codes.append(answer.error_code)
        groups += [g for g in answer.groups if g.group_id.startswith(side.prefix)]
    return [codes, sorted(groups, key=lambda g: g.group_id)]


@scenario("groups.list_groups", versions=GROUPS)
def list_groups(side: Side) -> list[Any]:
    """ListGroups v5 with no filter: each broker lists the groups it coordinates, with
    protocol type, state and type."""
    stable_member(side, side.group("stable"))
    name = side.topic()
    side.create_topic(name)
    commit(side, side.group("empty"), {(name, 0): 1})
    return listed(side)


@scenario("groups.list_groups_by_state", versions=GROUPS)
def list_groups_by_state(side: Side) -> list[Any]:
    """ListGroups filtered by state: Stable, then Empty, then both (lower case, as Kafka
    matches states case-insensitively)."""
    stable_member(side, side.group("stable"))
    name = side.topic()
    side.create_topic(name)
    commit(side, side.group("empty"), {(name, 0): 1})
    return [
        listed(side, states=["Stable"]),
        listed(side, states=["Empty"]),
        listed(side, states=["stable", "empty"]),
    ]


@scenario("groups.list_groups_by_type", versions=GROUPS)
def list_groups_by_type(side: Side) -> list[Any]:
    """ListGroups filtered by type: ``classic`` lists the group, ``consumer`` does not."""
    stable_member(side, side.group())
    return [listed(side, types=["classic"]), listed(side, types=["consumer"])]


@scenario("groups.list_groups_unknown_state", versions=GROUPS)
def list_groups_unknown_state(side: Side) -> list[Any]:
    """ListGroups filtered by a state that does not exist: no group, no error."""
    stable_member(side, side.group())
    return [listed(side, states=["NoSuchState"])]
