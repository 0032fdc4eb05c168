"""Scenarios of Kafka 4's consumer group protocol (KIP-848): ConsumerGroupHeartbeat sequences —
joins, epochs, revocation before reassignment, the ``uniform`` and ``range`` server-side
assignors, subscriptions changed, leaving. Errors, static members, regexes and the cluster's
topics changing, and the other apis on consumer groups: ``consumer_group_apis.py``.

Versions: ConsumerGroupHeartbeat v1 (the member id is the client's own, as KIP-1082 has it) and
v0 where it differs (the coordinator picks the member id), ConsumerGroupDescribe v1. Both
clusters run with ``clusters.CONSUMER_GROUP_CONFIGS``: ``group.consumer.assignors=uniform,range``
(``uniform`` the default), a 5 s heartbeat interval, 45 s sessions, at most three members; and
both compute a target assignment in the heartbeat that changes the group (no batching:
``group.consumer.assignment.interval.ms=0``; Kafka no offloading either, in
``clusters.KAFKA_ONLY_CONFIGS``), so that every epoch and assignment follows from the requests
alone, never from a timer.

A member here is an instant client: it heartbeats with the partitions of the last assignment it
was given as the ones it owns (it revokes and takes up partitions at once, as a consumer whose
rebalance callbacks return straight away). Assignments are recorded by topic name (each side's
topic ids looked up in its own metadata); member ids are normalised by the harness.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coordkit.testing.waiting import wait_for
from differential import requests as rq
from differential.harness import WAIT_SECONDS, Connection, Side, scenario

HEARTBEAT = {"ConsumerGroupHeartbeat": rq.CONSUMER_GROUP_HEARTBEAT}
CONSUMER_GROUPS = {**HEARTBEAT, "ConsumerGroupDescribe": rq.CONSUMER_GROUP_DESCRIBE}
#: Why the v0 scenarios send an older version than both sides serve.
V0 = "ConsumerGroupHeartbeat v0: the coordinator picks the member id (v1 requires the client's)"
#: Epochs of the protocol: leave, leave for a static member that comes back.
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
#: Heartbeats a reconciliation may take before a scenario calls it stuck.
MAX_ROUNDS = 8
#: ``offsets.topic.num.partitions`` of both clusters (``clusters.SHARED_CONFIGS``).
OFFSETS_PARTITIONS = 5


def client_member_id(side: Side, group: str, name: str) -> str:
    """The member id a v1 client generates (Kafka's Java consumer: a random UUID in Kafka's
    base64 form), derived from the group and the member's name so both sides get the same."""
    digest = hashlib.sha256(f"{group}/{name}".encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class TopicNames:
    """One side's topic ids and names (from its Metadata), looked up again on a miss."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.by_id: dict[uuid.UUID, str] = {}

    def refresh(self) -> None:
        for topic in self.side.metadata(0, None).topics:
            self.by_id[topic.topic_id] = topic.name

    def name(self, topic_id: uuid.UUID) -> str:
        if topic_id not in self.by_id:
            self.refresh()
        return self.by_id.get(topic_id, "<a topic id the metadata does not have>")

    def id(self, name: str) -> uuid.UUID:
        if name not in self.by_id.values():
            self.refresh()
        return next(i for i, n in self.by_id.items() if n == name)

    def assignment(self, topic_partitions: Sequence[Any] | None) -> dict[str, list[int]] | None:
        """``[TopicPartitions]`` as ``{topic name: sorted partitions}``; ``None`` as it is."""
        if topic_partitions is None:
            return None
        found: dict[str, list[int]] = {}
        for tp in topic_partitions:
            found.setdefault(self.name(tp.topic_id), []).extend(tp.partitions)
        return {name: sorted(found[name]) for name in sorted(found)}


def heartbeat_seen(answer: Any, names: TopicNames) -> dict[str, Any]:
    """What a ConsumerGroupHeartbeat answer says, its assignment by topic name."""
    return {
        "error_code": answer.error_code,
        "member_id": answer.member_id,
        "member_epoch": answer.member_epoch,
        "heartbeat_interval_ms": answer.heartbeat_interval_ms,
        "assignment": names.assignment(
            None if answer.assignment is None else answer.assignment.topic_partitions
        ),
    }


class Member:
    """One consumer of the consumer protocol, on its own connection to the group's
    coordinator."""

    def __init__(
        self,
        side: Side,
        group: str,
        topics: Sequence[str] | None = None,
        *,
        name: str = "a",
        regex: str | None = None,
        assignor: str | None = None,
        instance_id: str | None = None,
        rack_id: str | None = None,
        version: int = rq.CONSUMER_GROUP_HEARTBEAT,
        names: TopicNames | None = None,
    ) -> None:
        self.side = side
        self.group = group
        self.topics = None if topics is None else list(topics)
        self.regex = regex
        self.assignor = assignor
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.version = version
        self.names = names or TopicNames(side)
        self.connection: Connection = side.connect(side.coordinator(group))
        self.member_id = client_member_id(side, group, name) if version >= 1 else ""
        self.epoch = 0
        #: The partitions it owns: topic id → partitions (the last assignment it was given).
        self.owned: dict[uuid.UUID, list[int]] = {}

    def send(self, **fields: Any) -> dict[str, Any]:
        """A heartbeat with this member's id, epoch, instance id and owned partitions, unless
        ``fields`` say otherwise; what it answered. A successful answer moves the member on:
        its epoch, its id (v0), and the assignment it now owns."""
        request = rq.consumer_group_heartbeat(
            self.group,
            fields.pop("member_id", self.member_id),
            fields.pop("member_epoch", self.epoch),
            instance_id=fields.pop("instance_id", self.instance_id),
            owned=fields.pop("owned", self.owned),
            **fields,
        )
        answer = self.connection.call(request, self.version)
        if answer.error_code == 0 and answer.member_epoch >= 0:
            self.member_id = answer.member_id or self.member_id
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.owned = {
                    tp.topic_id: list(tp.partitions) for tp in answer.assignment.topic_partitions
                }
        return heartbeat_seen(answer, self.names)

    def join(self, **fields: Any) -> dict[str, Any]:
        """The first heartbeat (epoch 0): the full subscription, the rebalance timeout, no
        owned partitions."""
        self.epoch, self.owned = 0, {}
        full = {"topics": self.topics, "regex": self.regex, "assignor": self.assignor,
                "rack_id": self.rack_id, "rebalance_ms": rq.REBALANCE_MS}  # fmt: skip
        return self.send(**{**full, **fields})

    def leave(self, epoch: int = LEAVE_EPOCH) -> dict[str, Any]:
        answer = self.send(member_epoch=epoch, owned=None)
        self.owned = {}
        return answer


def settle(members: Sequence[Member], rounds: int = MAX_ROUNDS) -> list[Any]:
    """Heartbeat the members in turn until a whole round changes nothing (every answer NONE,
    the same epoch, no new assignment): every answer on the way, one list per round."""
    trace = []
    for _ in range(rounds):
        seen = [(m.epoch, m.send()) for m in members]
        trace.append([answer for _, answer in seen])
        if all(a["error_code"] == 0 and a["assignment"] is None and a["member_epoch"] == epoch
               for epoch, a in seen):  # fmt: skip
            return trace
    trace.append(f"not settled after {rounds} rounds")
    return trace


# -- ConsumerGroupDescribe ------------------------------------------------------------------------


def described(group: Any, names: TopicNames) -> dict[str, Any]:
    """A described group, assignments by topic name (each with its id checked against the
    side's metadata)."""

    def assignment(a: Any) -> dict[str, list[int]]:
        found = {}
        for tp in a.topic_partitions:
            key = tp.topic_name
            if names.name(tp.topic_id) != tp.topic_name:
                key += " (with another topic's id)"
            found[key] = sorted(tp.partitions)
        return {k: found[k] for k in sorted(found)}

    members = [
        {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": sorted(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": assignment(m.assignment),
            "target_assignment": assignment(m.target_assignment),
            "member_type": m.member_type,
        }
        for m in group.members
    ]
    return {
        "error_code": group.error_code,
        "group_id": group.group_id,
        "group_state": group.group_state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.assignor_name,
        "members": members,
        "authorized_operations": group.authorized_operations,
    }


def describe(side: Side, group: str, names: TopicNames | None = None) -> dict[str, Any]:
    request = rq.consumer_group_describe(group)
    answer = side.call(side.coordinator(group), request, rq.CONSUMER_GROUP_DESCRIBE)
    return described(answer.groups[0], names or TopicNames(side))


def describe_when(
    side: Side, group: str, state: str, epoch: int | None = None, names: TopicNames | None = None
) -> dict[str, Any]:
    """ConsumerGroupDescribe once the group says ``state`` (and group epoch ``epoch``): Kafka 4
    describes a group as of its last committed write, which may lag an answer just given. An
    Empty group is described once its target has caught up with its epoch: both coordinators
    compute an empty group's target apart from any heartbeat, a moment after it empties."""
    return wait_for(
        lambda: (
            (found := describe(side, group, names))["group_state"] == state
            and epoch in (None, found["group_epoch"])
            and (state != "Empty" or found["assignment_epoch"] == found["group_epoch"])
            and found
        ),
        WAIT_SECONDS,
        f"{side.name}: consumer group {group} {state}",
    )


def heartbeat_until(
    member: Member, done: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    """Heartbeat until an answer is ``done`` (a change the coordinator learns of from the
    cluster's metadata: a new topic, new partitions, a regex resolved), or an error: that
    answer (the ones before depend on when the coordinator learns of the change)."""
    return wait_for(
        lambda: (answer := member.send()) and (done(answer) or answer["error_code"]) and answer,
        WAIT_SECONDS,
        f"{member.side.name}: {what}",
    )


def coordinator_heartbeat(side: Side, group: str, version: int = rq.CONSUMER_GROUP_HEARTBEAT,
                          **fields: Any) -> dict[str, Any]:  # fmt: skip
    """One heartbeat from no member in particular, to the group's coordinator."""
    member_id = fields.pop("member_id", client_member_id(side, group, "stranger"))
    epoch = fields.pop("member_epoch", 0)
    request = rq.consumer_group_heartbeat(group, member_id, epoch, **fields)
    answer = side.call(side.coordinator(group), request, version)
    return heartbeat_seen(answer, TopicNames(side))


def offsets_partition(group: str, partitions: int = OFFSETS_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition of ``group``, as Kafka computes it (the absolute
    value of Java's ``String.hashCode``, modulo the partition count)."""
    data, code = group.encode("utf-16-be"), 0
    for i in range(0, len(data), 2):
        code = (31 * code + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return (code & 0x7FFFFFFF) % partitions


def create_topics(side: Side, group: str, topics: Mapping[str, int]) -> None:
    """Create ``topics`` (name → partitions) and wait until the coordinator of ``group`` assigns
    all their partitions: a broker answers Metadata for a new topic a moment before its group
    coordinator has it (Kafka's first heartbeat would get nothing, or some of the topics). A
    probe group of the same ``__consumer_offsets`` partition joins until its join's answer has
    them all, and leaves."""
    for name, partitions in topics.items():
        side.create_topic(name, partitions=partitions)
    probe_group = next(
        probe
        for i in range(1000)
        if offsets_partition(probe := f"{group}-probe{i}") == offsets_partition(group)
    )
    probe = Member(side, probe_group, list(topics), name="probe")
    # At the helpers' version, whatever the scenario declares (as the harness's helpers do).
    probe.connection = Connection(probe.connection.address, lambda _api, _version: None)

    def has_all() -> bool:
        # A join's own answer, as the scenario's first member will get it (a rejoin: epoch 0).
        answer = probe.join()
        owned = sum(len(p) for p in (answer["assignment"] or {}).values())
        return answer["error_code"] == 0 and owned == sum(topics.values())

    try:
        wait_for(has_all, WAIT_SECONDS, f"{side.name}: the coordinator of {group} has them")
        probe.leave()
    finally:
        probe.connection.close()


def first_join(group: str, topics: Sequence[str], **fields: Any) -> dict[str, Any]:
    """The fields of a valid first heartbeat (epoch 0) subscribing to ``topics``."""
    return {"member_epoch": 0, "rebalance_ms": rq.REBALANCE_MS, "topics": list(topics),
            "owned": {}, **fields}  # fmt: skip


# -- joining ----------------------------------------------------------------------------------------


@scenario("consumer_groups.join_single_member", versions=CONSUMER_GROUPS)
def join_single_member(side: Side) -> list[Any]:
    """A member joins a new group (epoch 0, no assignor named: ``uniform``, the first
    configured) subscribed to a topic of four partitions: all four partitions and the 5 s
    heartbeat interval, with member epoch 2 (Kafka 4.4's first epoch of a new group is 2, the
    epoch it logs as "bumped"); its next heartbeat (owning them)
    keeps the epoch with no assignment (unchanged); the group is Stable, group and assignment
    epoch 2."""
    name = side.topic()
    create_topics(side, side.group(), {name: 4})
    member = Member(side, side.group(), [name])
    return [member.join(), member.send(), describe_when(side, member.group, "Stable")]


@scenario("consumer_groups.join_v0_coordinator_member_id", versions={**CONSUMER_GROUPS,
          "ConsumerGroupHeartbeat": 0}, older_versions=V0)  # fmt: skip
def join_v0_coordinator_member_id(side: Side) -> list[Any]:
    """ConsumerGroupHeartbeat v0 with an empty member id: the coordinator gives the member an
    id with epoch 1 and the assignment; the member heartbeats on with it; v0 with an empty
    member id and epoch 1 is INVALID_REQUEST."""
    name = side.topic()
    create_topics(side, side.group(), {name: 2})
    member = Member(side, side.group(), [name], version=0)
    joined = member.join()
    return [joined, member.send(), member.send(member_id="", member_epoch=1)]


@scenario("consumer_groups.second_member_uniform", versions=CONSUMER_GROUPS)
def second_member_uniform(side: Side) -> list[Any]:
    """A second member joins a stable group of one (``uniform``, six partitions): the group
    epoch goes up (Kafka 4.4: a new group's first member gets epoch 2, the second 3); the
    newcomer gets the new epoch and nothing yet (its partitions are still the first member's:
    unreleased); the group is Reconciling; the first member's next heartbeat keeps its epoch
    with a smaller assignment (revoking the rest); once it owns only that it gets the new
    epoch, and the newcomer's next heartbeat gets the released partitions; Stable."""
    name = side.topic()
    create_topics(side, side.group(), {name: 6})
    first = Member(side, side.group(), [name], name="a", assignor="uniform")
    second = Member(side, first.group, [name], name="b", assignor="uniform")
    trace = [first.join(), first.send(), second.join()]
    trace.append(describe_when(side, first.group, "Reconciling", second.epoch))
    trace += [first.send(), second.send(), first.send(), second.send()]
    trace.append(describe_when(side, first.group, "Stable", second.epoch))
    return trace


@scenario("consumer_groups.second_member_range_two_topics", versions=CONSUMER_GROUPS)
def second_member_range_two_topics(side: Side) -> list[Any]:
    """As ``second_member_uniform`` with ``range`` and two topics (three and five partitions):
    the newcomer's share of each topic is withheld until the first member revokes it."""
    one, two = side.topic("one"), side.topic("two")
    create_topics(side, side.group(), {one: 3, two: 5})
    first = Member(side, side.group(), [one, two], name="a", assignor="range")
    second = Member(side, first.group, [one, two], name="b", assignor="range")
    trace = [first.join(), second.join(), *settle([first, second])]
    return [*trace, describe_when(side, first.group, "Stable")]


def three_members(side: Side, assignor: str, topics: Mapping[str, int],
                  subscriptions: Sequence[Sequence[str]]) -> list[Any]:  # fmt: skip
    """Members joining one by one (each subscribed to its ``subscriptions`` entry), the group
    settled after each join: every answer, and the group described at the end."""
    group, names = side.group(), TopicNames(side)
    create_topics(side, group, {side.topic(s): n for s, n in topics.items()})
    members: list[Member] = []
    trace: list[Any] = []
    for index, subscribed in enumerate(subscriptions):
        member = Member(side, group, [side.topic(s) for s in subscribed], name=f"m{index}",
                        assignor=assignor, names=names)  # fmt: skip
        members.append(member)
        trace += [member.join(), *settle(members)]
    return [*trace, describe_when(side, group, "Stable", names=names)]


@scenario("consumer_groups.revocation_withheld", versions=CONSUMER_GROUPS)
def revocation_withheld(side: Side) -> list[Any]:
    """The first member of a group of two keeps saying it owns all six partitions after it was
    asked to revoke three: it stays at its epoch with no new assignment, and the newcomer gets
    nothing (a partition is never given while another member owns it); the group is
    Reconciling, the first member described with all six and its target of three; once it
    revokes, the newcomer gets them."""
    name = side.topic()
    create_topics(side, side.group(), {name: 6})
    first = Member(side, side.group(), [name], name="a", assignor="uniform")
    second = Member(side, first.group, [name], name="b", assignor="uniform")
    trace = [first.join(), second.join()]
    everything = dict(first.owned)
    trace += [first.send(), first.send(owned=everything), second.send()]
    trace += [first.send(owned=everything), second.send()]
    trace.append(describe_when(side, first.group, "Reconciling", second.epoch))
    return [*trace, first.send(), second.send(), first.send(), second.send()]


@scenario("consumer_groups.full_heartbeat", versions=CONSUMER_GROUPS)
def full_heartbeat(side: Side) -> list[Any]:
    """A stable member's heartbeat with every field set (subscription, rebalance timeout and
    owned partitions, as a consumer sends after an error): its assignment again, though
    unchanged; then a heartbeat with the subscription alone (unchanged): none."""
    name = side.topic()
    create_topics(side, side.group(), {name: 3})
    member = Member(side, side.group(), [name])
    joined = member.join()
    full = member.send(topics=[name], rebalance_ms=rq.REBALANCE_MS)
    return [joined, full, member.send(topics=[name]), member.send()]


@scenario("consumer_groups.three_members_uniform", versions=CONSUMER_GROUPS)
def three_members_uniform(side: Side) -> list[Any]:
    """Three members join one by one, subscribed to one topic of ten partitions, ``uniform``:
    a group epoch each, and after each join the same moves of partitions (revoked first, then
    given). One topic: Kafka's uniform takes the topics of a homogeneous group in the order of a
    Java HashSet of their ids, which are random, so two clusters split two topics differently
    (``heterogeneous_uniform`` has two, whose order its sort decides)."""
    return three_members(side, "uniform", {"a": 10}, [["a"]] * 3)


@scenario("consumer_groups.three_members_range", versions=CONSUMER_GROUPS)
def three_members_range(side: Side) -> list[Any]:
    """Three members join one by one, subscribed to two topics (four and seven partitions),
    ``range``: each topic split over the members sorted by member id."""
    return three_members(side, "range", {"a": 4, "b": 7}, [["a", "b"]] * 3)


@scenario("consumer_groups.heterogeneous_uniform", versions=CONSUMER_GROUPS)
def heterogeneous_uniform(side: Side) -> list[Any]:
    """Three members with different subscriptions (``a``; ``a`` and ``b``; ``b``), ``uniform``
    (its heterogeneous path)."""
    return three_members(side, "uniform", {"a": 5, "b": 3}, [["a"], ["a", "b"], ["b"]])


@scenario("consumer_groups.heterogeneous_range", versions=CONSUMER_GROUPS)
def heterogeneous_range(side: Side) -> list[Any]:
    """As ``heterogeneous_uniform`` with ``range``."""
    return three_members(side, "range", {"a": 5, "b": 3}, [["a"], ["a", "b"], ["b"]])


@scenario("consumer_groups.subscription_change", versions=CONSUMER_GROUPS)
def subscription_change(side: Side) -> list[Any]:
    """A stable member of one topic subscribes to a second (a heartbeat with the new topic
    list): group epoch 2, and it gets both topics' partitions at once (nothing to revoke); then
    it drops the first topic: epoch 3, only the second's."""
    one, two = side.topic("one"), side.topic("two")
    create_topics(side, side.group(), {one: 2, two: 3})
    member = Member(side, side.group(), [one])
    return [member.join(), member.send(topics=[one, two]), member.send(topics=[two]),
            member.send()]  # fmt: skip


@scenario("consumer_groups.assignor_switch", versions=CONSUMER_GROUPS)
def assignor_switch(side: Side) -> list[Any]:
    """Two stable members on ``uniform`` (one topic of five partitions: the first keeps what
    it can) both switch to ``range`` (each member's range by member id): a new group epoch with
    the members' assignor, partitions revoked and moved accordingly; described with
    ``range``."""
    name = side.topic()
    create_topics(side, side.group(), {name: 5})
    names = TopicNames(side)
    members = [Member(side, side.group(), [name], name=n, assignor="uniform", names=names)
               for n in ("a", "b")]  # fmt: skip
    trace = [members[0].join(), members[1].join(), *settle(members)]
    trace += [m.send(assignor="range") for m in members]
    trace += settle(members)
    return [*trace, describe_when(side, members[0].group, "Stable", names=names)]


# -- leaving ---------------------------------------------------------------------------------------


@scenario("consumer_groups.member_leaves", versions=CONSUMER_GROUPS)
def member_leaves(side: Side) -> list[Any]:
    """Of a stable group of two (four partitions) one member leaves (epoch -1): its answer has
    epoch -1; the group epoch goes up and the other member's next heartbeat gets all four
    partitions at once (nothing to wait for)."""
    name = side.topic()
    create_topics(side, side.group(), {name: 4})
    first = Member(side, side.group(), [name], name="a")
    second = Member(side, first.group, [name], name="b")
    trace = [first.join(), second.join(), *settle([first, second])]
    trace += [second.leave(), first.send(), first.send()]
    return [*trace, describe_when(side, first.group, "Stable")]


@scenario("consumer_groups.last_member_leaves_and_rejoins", versions=CONSUMER_GROUPS)
def last_member_leaves_and_rejoins(side: Side) -> list[Any]:
    """The only member leaves: the group is Empty (its epochs kept); a member joining again
    gets the next group epoch."""
    name = side.topic()
    create_topics(side, side.group(), {name: 2})
    member = Member(side, side.group(), [name])
    trace = [member.join(), member.leave(), describe_when(side, member.group, "Empty")]
    return [*trace, member.join(), describe_when(side, member.group, "Stable")]
