"""Scenarios of the share-group coordinator (KIP-932): ShareGroupHeartbeat v1 and
ShareGroupDescribe v1 — joins, the ``simple`` assignor's split, leaving, the errors — and the
other group apis on a share group (ListGroups, DescribeGroups, ConsumerGroupDescribe,
ConsumerGroupHeartbeat, JoinGroup, OffsetFetch, DeleteGroups). Marker ``share``: they run in
py311-share, not in the default run.

Kafka 4.4 assigns a share partition only once the share coordinator has initialized its state
(asynchronously, after the heartbeat that subscribed to it), so a member's first answers there
carry an empty assignment and a later one the partitions, one group epoch further; coordkit
assigns at once. The scenarios therefore record the settled group (members heartbeat until an
answer changes nothing and every partition is assigned) and its epochs, and the table of
docs/serve.md lists the epoch and first-answer differences. Both clusters compute a target in
the heartbeat that changes the group (Kafka with ``group.share.assignment.interval.ms=0`` and no
offloading, ``clusters.KAFKA_ONLY_CONFIGS``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from coordkit.protocol import messages
from differential import requests as rq
from differential.harness import WAIT_SECONDS, Connection, Side, scenario
from differential.scenarios.admin import DELETE_GROUPS
from differential.scenarios.consumer_groups import (
    TopicNames,
    client_member_id,
    create_topics,
)

SHARE_GROUP_HEARTBEAT = 1
SHARE_GROUP_DESCRIBE = 1
SHARE = {"ShareGroupHeartbeat": SHARE_GROUP_HEARTBEAT, "ShareGroupDescribe": SHARE_GROUP_DESCRIBE}
OTHER_APIS = {
    **SHARE,
    "ListGroups": rq.LIST_GROUPS,
    "DescribeGroups": rq.DESCRIBE_GROUPS,
    "ConsumerGroupDescribe": rq.CONSUMER_GROUP_DESCRIBE,
    "ConsumerGroupHeartbeat": rq.CONSUMER_GROUP_HEARTBEAT,
    "JoinGroup": rq.JOIN_GROUP,
    "DeleteGroups": DELETE_GROUPS,
}
LEAVE_EPOCH = -1
#: Seconds between the heartbeats of a settling round (Kafka initializes share state meanwhile).
ROUND_PAUSE = 0.3


def heartbeat(group: str, member_id: str, epoch: int, topics: Sequence[str] | None) -> Any:
    return messages.ShareGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        rack_id=None,
        subscribed_topic_names=None if topics is None else list(topics),
    )


def seen(answer: Any, names: TopicNames) -> dict[str, Any]:
    return {
        "error_code": answer.error_code,
        "error_message": answer.error_message,
        "member_id": answer.member_id,
        "member_epoch": answer.member_epoch,
        "heartbeat_interval_ms": answer.heartbeat_interval_ms,
        "assignment": names.assignment(
            None if answer.assignment is None else answer.assignment.topic_partitions
        ),
    }


class ShareMember:
    """One share consumer on its own connection to the group's coordinator."""

    def __init__(self, side: Side, group: str, topics: Sequence[str], name: str = "a") -> None:
        self.side = side
        self.group = group
        self.topics = list(topics)
        self.names = TopicNames(side)
        self.connection: Connection = side.connect(side.coordinator(group))
        self.member_id = client_member_id(side, group, name)
        self.epoch = 0
        self.assignment: dict[str, list[int]] = {}

    def send(self, *, epoch: int | None = None, topics: Sequence[str] | None = None,
             member_id: str | None = None) -> dict[str, Any]:  # fmt: skip
        answer = self.connection.call(
            heartbeat(self.group, self.member_id if member_id is None else member_id,
                      self.epoch if epoch is None else epoch, topics),
            SHARE_GROUP_HEARTBEAT,
        )  # fmt: skip
        found = seen(answer, self.names)
        if answer.error_code == 0 and answer.member_epoch >= 0 and member_id is None:
            self.epoch = answer.member_epoch
            if found["assignment"] is not None:
                self.assignment = found["assignment"]
        return found

    def join(self) -> dict[str, Any]:
        """The first heartbeat, retried while the coordinator is still loading."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            found = self.send(epoch=0, topics=self.topics)
            if found["error_code"] not in (14, 15, 16) or time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    def leave(self) -> dict[str, Any]:
        return self.send(epoch=LEAVE_EPOCH)


def describe(side: Side, group: str, names: TopicNames) -> dict[str, Any]:
    (found,) = side.call(
        side.coordinator(group),
        messages.ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
        SHARE_GROUP_DESCRIBE,
    ).groups
    return {
        "error_code": found.error_code,
        "error_message": found.error_message,
        "group_state": found.group_state,
        "group_epoch": found.group_epoch,
        "assignment_epoch": found.assignment_epoch,
        "assignor_name": found.assignor_name,
        "members": sorted(
            (
                {
                    "member_id": m.member_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "rack_id": m.rack_id,
                    "subscribed_topic_names": sorted(m.subscribed_topic_names),
                    "assignment": names.assignment(m.assignment.topic_partitions),
                }
                for m in found.members
            ),
            key=lambda m: str(m["member_id"]),
        ),
    }


def shape(found: dict[str, Any]) -> dict[str, Any]:
    """A settled group with its split as shapes: per topic, the counts of partitions the members
    hold, and how many members hold each partition. Which member gets which partitions follows
    the hash orders of topic ids (random, different on the two clusters) and of Kafka's
    coordinator's member table; the assignor itself is compared with Kafka's on equal inputs in
    tests/share/test_share_groups_simple_vs_kafka.py."""
    if "members" not in found:
        return found
    holders: dict[tuple[str, int], int] = {}
    split: dict[str, list[int]] = {}
    for m in found["members"]:
        for topic, ps in (m["assignment"] or {}).items():
            split.setdefault(topic, []).append(len(ps))
            for p in ps:
                holders[(topic, p)] = holders.get((topic, p), 0) + 1
    members = [{k: v for k, v in m.items() if k != "assignment"} for m in found["members"]]
    return {**found, "members": members, "holders": sorted(holders.values()),
            "split": {t: sorted(counts) for t, counts in sorted(split.items())}}  # fmt: skip


def settle(members: Sequence[ShareMember], partitions: int) -> dict[str, Any]:
    """Heartbeat the members until the group is settled (every member at the assignment epoch,
    the group epoch too, every partition assigned); the group as then described."""
    side = members[0].side
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        for member in members:
            member.send()
        found = describe(side, members[0].group, members[0].names)
        assigned = {
            (topic, p)
            for m in found["members"]
            for topic, ps in (m["assignment"] or {}).items()
            for p in ps
        }  # fmt: skip
        done = (
            found["group_epoch"] == found["assignment_epoch"]
            and all(m["member_epoch"] == found["assignment_epoch"] for m in found["members"])
            and len(assigned) == partitions
            and all(m.epoch == found["assignment_epoch"] for m in members)
        )
        if done or time.monotonic() > deadline:
            return shape(found) if done else {"not settled": found}
        time.sleep(ROUND_PAUSE)


@scenario("share_groups.join_and_leave", versions=SHARE)
def join_and_leave(side: Side) -> list[Any]:
    """A share consumer joins a topic of four partitions and settles with all four; a second
    joins and ``simple`` splits them two and two; a third subscribing to it and a topic of two
    partitions joins (three members: each topic split); the second leaves (epoch -1), and
    leaving again is UNKNOWN_MEMBER_ID. The settled groups are recorded with their epochs and
    their splits' shapes."""
    four, two = side.topic("four"), side.topic("two")
    create_topics(side, side.group(), {four: 4, two: 2})
    group = side.group()
    a = ShareMember(side, group, [four], "a")
    trace: list[Any] = [a.join()["error_code"], settle([a], 4)]
    b = ShareMember(side, group, [four], "b")
    trace += [b.join()["error_code"], settle([a, b], 4)]
    c = ShareMember(side, group, [four, two], "c")
    trace += [c.join()["error_code"], settle([a, b, c], 6)]
    trace += [b.leave(), b.leave(), settle([a, c], 6)]
    return trace


@scenario("share_groups.invalid_requests", versions=SHARE, compare_messages=True)
def invalid_requests(side: Side) -> list[Any]:
    """Heartbeats Kafka refuses (messages compared): an empty member id; an empty group id; a
    first heartbeat without topics; epoch -2; epoch 1 for a group that does not exist, and a
    leave there; then, in a group that exists, epoch 1 from a member it does not have."""
    name = side.topic()
    create_topics(side, side.group(), {name: 1})
    group = side.group()
    member = ShareMember(side, group, [name])
    asks = [
        dict(epoch=0, topics=[name], member_id=""),
        dict(epoch=-2, topics=[name]),
        dict(epoch=0, topics=None),
        dict(epoch=1, topics=None),
        dict(epoch=LEAVE_EPOCH, topics=None),
    ]
    trace = [member.send(**ask) for ask in asks]  # type: ignore[arg-type]
    empty_group = side.call(side.coordinator(group), heartbeat("", member.member_id, 0, [name]),
                            SHARE_GROUP_HEARTBEAT)  # fmt: skip
    trace.append(seen(empty_group, member.names))
    trace.append(member.join()["error_code"])
    stranger = client_member_id(side, group, "stranger")
    trace.append(member.send(epoch=1, member_id=stranger))
    return trace


@scenario("share_groups.epochs", versions=SHARE)
def epochs(side: Side) -> list[Any]:
    """A settled member whose epoch two others' joins moved on twice heartbeats with an epoch
    above its own (FENCED_MEMBER_EPOCH), with its previous epoch (accepted: its answer may have
    been lost) and with the one before (FENCED_MEMBER_EPOCH); it rejoins with epoch 0 and gets
    its target again."""
    name = side.topic()
    create_topics(side, side.group(), {name: 3})
    group = side.group()
    a = ShareMember(side, group, [name], "a")
    a.join()
    settle([a], 3)
    b = ShareMember(side, group, [name], "b")
    b.join()
    settle([a, b], 3)
    older = a.epoch
    c = ShareMember(side, group, [name], "c")
    c.join()
    settled = settle([a, b, c], 3)
    previous = older if a.epoch == older else None
    held = dict(a.assignment)
    return [
        a.send(epoch=a.epoch + 1)["error_code"],
        a.send(epoch=a.epoch - 1)["error_code"],
        a.send(epoch=older - 1)["error_code"] if older > 1 else "no older epoch",
        previous is None,
        a.send(epoch=0, topics=[name])["assignment"] == held,
        settled.get("holders", settled),
    ]


@scenario("share_groups.other_apis", versions=OTHER_APIS, compare_messages=True)
def other_apis(side: Side) -> list[Any]:
    """The group apis of other protocols on a share group: ListGroups (all, and filtered by
    type), DescribeGroups (v6: not a classic group), ConsumerGroupDescribe and a consumer
    protocol heartbeat (not a consumer group), JoinGroup (INCONSISTENT_GROUP_PROTOCOL);
    ShareGroupDescribe of a missing group; DeleteGroups while a member is in (NON_EMPTY_GROUP),
    after it left (NONE), then ShareGroupDescribe again (not found)."""
    name = side.topic()
    create_topics(side, side.group(), {name: 1})
    group = side.group()
    member = ShareMember(side, group, [name])
    member.join()
    coordinator = side.coordinator(group)

    def call(request: Any, version: int) -> Any:
        return side.call(coordinator, request, version)

    def listed(types: list[str]) -> list[Any]:
        answer = call(messages.ListGroupsRequest(states_filter=[], types_filter=types),
                      rq.LIST_GROUPS)  # fmt: skip
        return sorted((g.group_id, g.protocol_type, g.group_state, g.group_type)
                      for g in answer.groups if g.group_id.startswith(side.prefix))  # fmt: skip

    def deleted() -> Any:
        (result,) = call(messages.DeleteGroupsRequest(groups_names=[group]), DELETE_GROUPS).results
        return result.error_code

    (classic,) = call(messages.DescribeGroupsRequest(groups=[group],
                                                     include_authorized_operations=False),
                      rq.DESCRIBE_GROUPS).groups  # fmt: skip
    (modern,) = call(rq.consumer_group_describe(group), rq.CONSUMER_GROUP_DESCRIBE).groups
    consumer = call(
        rq.consumer_group_heartbeat(group, client_member_id(side, group, "consumer"), 0,
                                    rebalance_ms=rq.REBALANCE_MS, topics=[name], owned={}),
        rq.CONSUMER_GROUP_HEARTBEAT,
    )  # fmt: skip
    join = messages.JoinGroupRequest
    joined = call(
        join(group_id=group, session_timeout_ms=rq.SESSION_MS,
             rebalance_timeout_ms=rq.REBALANCE_MS, member_id="", group_instance_id=None,
             protocol_type="consumer",
             protocols=[join.JoinGroupRequestProtocol(name="range", metadata=b"")], reason=None),
        rq.JOIN_GROUP,
    )  # fmt: skip
    return [
        listed([]),
        listed(["share"]),
        listed(["consumer"]),
        (classic.error_code, classic.error_message, classic.group_state),
        (modern.error_code, modern.error_message),
        (consumer.error_code, consumer.error_message),
        (joined.error_code, joined.member_id),
        describe(side, side.group("missing"), member.names),
        deleted(),
        member.leave()["error_code"],
        describe(side, group, member.names)["group_state"],
        deleted(),
        describe(side, group, member.names),
    ]
