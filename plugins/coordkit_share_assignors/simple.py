"""Kafka 4.4's ``simple`` share-partition assignor (``SimpleAssignor``), reproduced exactly.

Balance first, then stickiness. With identical subscriptions (``SimpleHomogeneousAssignmentBuilder``)
every subscribed partition is wanted by ``ceil(members / partitions)`` members (its *sharing*) and
member ``i`` (in the coordinator's order) takes ``ceil(q * (i + 1)) - ceil(q * i)`` partitions,
``q = sharing * partitions / members``; with differing subscriptions
(``SimpleHeterogeneousAssignmentBuilder``) the same is done topic by topic among the members
subscribing to it. Each step starts from the current target: partitions of topics no longer
subscribed are dropped, members over their count give partitions back, partitions shared more
than wanted lose members, and the partitions still short of members go round the members short of
partitions.

Which partition a member gives back, and which member a short partition goes to, follows the
iteration order of Kafka's hash maps and sets (:mod:`.java_hash`): this module replays them, so
that the same group gives the same target as Kafka's (tests/unit/test_share_assign_simple.py
compares them with Kafka 4.4's own class). Two quirks are Kafka's and kept: with differing
subscriptions, a member keeps the partitions of a topic that no member subscribes to any more;
a member may be counted twice for one partition when the round of short members starts again
within one partition (its set holds it once).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from typing import ClassVar

from coordkit.strategies.share_assignment import (
    GroupSpec,
    PartitionAssignorError,
    SubscriptionType,
    TargetAssignment,
    TopicDescriber,
)
from coordkit_share_assignors.java_hash import (
    JavaHashSet,
    JavaIterator,
    integer_hash,
    sized_for,
    topic_partition_hash,
    uuid_hash,
)

TopicPartition = tuple[uuid.UUID, int]
#: Every member's target as the builders change it: member index -> topic id -> partitions.
Assignment = list[dict[uuid.UUID, set[int]]]
#: Every member's current target as the coordinator lists it (the order Kafka reads it in).
Held = Sequence[Mapping[uuid.UUID, Sequence[int]]]


def _kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, unpadded."""
    import base64

    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def _unknown_topic(topic_id: uuid.UUID) -> PartitionAssignorError:
    return PartitionAssignorError(
        f"Members are subscribed to topic {_kafka_uuid(topic_id)} which doesn't exist in the "
        "topic metadata."
    )


def _desired_counts(sharing: int, partitions: int, members: int) -> list[int]:
    """Partitions per member: ``ceil(q * (k + 1)) - ceil(q * k)`` in doubles, as Kafka's."""
    if members == 0:
        return []
    precise = sharing * partitions / members
    return [math.ceil(precise * (k + 1)) - math.ceil(precise * k) for k in range(members)]


def _sharing(members: int, partitions: int) -> int:
    return 0 if partitions == 0 else (members + partitions - 1) // partitions


def _member_sets(capacity: int | None = None) -> JavaHashSet[int]:
    return JavaHashSet(integer_hash, capacity)


class SimpleShareAssignor:
    """``simple``: Kafka's default share-partition assignor."""

    name: ClassVar[str] = "simple"
    balanced: ClassVar[bool] = True
    sticky: ClassVar[bool] = True

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        member_ids = group.member_ids()
        if not member_ids:
            return TargetAssignment({})
        # The current targets in the coordinator's order (the builders read them so), and copies
        # the builders change.
        held = [group.members[m].assignment for m in member_ids]
        current: Assignment = [{t: set(ps) for t, ps in h.items()} for h in held]
        if group.subscription_type is SubscriptionType.HOMOGENEOUS:
            result = _Homogeneous(group, topics, member_ids).build(held, current)
        else:
            result = _Heterogeneous(group, topics, member_ids).build(held, current)
        return TargetAssignment({m: result[i] for i, m in enumerate(member_ids)})


class _Homogeneous:
    """``SimpleHomogeneousAssignmentBuilder``: every member subscribes to the same topics."""

    def __init__(self, group: GroupSpec, topics: TopicDescriber, member_ids: Sequence[str]):
        self.subscribed = group.members[member_ids[0]].subscribed_topic_ids
        self.members = len(member_ids)
        self.targets: list[TopicPartition] = []
        for topic_id in self.subscribed:
            count = topics.num_partitions(topic_id)
            if count == -1:
                raise _unknown_topic(topic_id)
            self.targets.extend((topic_id, p) for p in range(count))
        self.sharing = _sharing(self.members, len(self.targets))
        self.desired = _desired_counts(self.sharing, len(self.targets), self.members)
        self.by_partition: dict[TopicPartition, JavaHashSet[int]] = {}
        self.partition_order: JavaHashSet[TopicPartition] = JavaHashSet(
            topic_partition_hash, sized_for(len(self.targets))
        )
        self.by_member: dict[int, JavaHashSet[TopicPartition]] = {}
        self.unfilled = _member_sets(sized_for(self.members))
        self.overfilled = _member_sets(sized_for(self.members))

    def _holders(self, tp: TopicPartition) -> JavaHashSet[int]:
        holders = self.by_partition.get(tp)
        if holders is None:
            holders = self.by_partition[tp] = _member_sets()
        self.partition_order.compute_if_absent(tp)
        return holders

    def _held(self, member: int) -> JavaHashSet[TopicPartition]:
        held = self.by_member.get(member)
        if held is None:
            held = self.by_member[member] = JavaHashSet(topic_partition_hash)
        return held

    def build(self, held: Held, current: Assignment) -> Assignment:
        if not self.subscribed:
            return [{} for _ in range(self.members)]
        subscribed = set(self.subscribed)
        # Partitions of topics no longer subscribed are dropped; count what each member keeps.
        for member, listed in enumerate(held):
            kept = 0
            for topic_id, partitions in listed.items():
                if topic_id not in subscribed:
                    del current[member][topic_id]
                    continue
                for partition in partitions:
                    kept += 1
                    self._holders((topic_id, partition)).add(member)
                    self._held(member).add((topic_id, partition))
            if kept < self.desired[member]:
                self.unfilled.add(member)
            elif kept > self.desired[member]:
                self.overfilled.add(member)
        self._revoke_overfilled(current)
        self._revoke_overshared(current)
        for tp in self.targets:
            self._holders(tp)
        self._assign_remaining(current)
        return current

    def _revoke_overfilled(self, current: Assignment) -> None:
        for member in self.overfilled.order():
            held = self.by_member[member]
            want = self.desired[member]
            if len(held) <= want:
                continue
            for tp in held.order():
                current[member][tp[0]].discard(tp[1])
                self.by_partition[tp].remove(member)
                held.remove(tp)
                if len(held) == want:
                    break

    def _revoke_overshared(self, current: Assignment) -> None:
        for tp in self.partition_order.order():
            holders = self.by_partition[tp]
            count = len(holders)
            if count <= self.sharing:
                continue
            for member in holders.order():
                partitions = current[member].get(tp[0])
                if partitions is not None and tp[1] in partitions:
                    partitions.remove(tp[1])
                    count -= 1
                    holders.remove(member)
                    self.by_member[member].remove(tp)
                    self.unfilled.add(member)
                if count <= self.sharing:
                    break

    def _assign_remaining(self, current: Assignment) -> None:
        if not len(self.unfilled):
            return
        members = JavaIterator(self.unfilled)
        assigned_this_round = False
        for tp in self.partition_order.order():
            holders = self.by_partition[tp]
            to_make = self.sharing - len(holders)
            while to_make > 0:
                if not members.has_next():
                    if not assigned_this_round:
                        break
                    members = JavaIterator(self.unfilled)
                    assigned_this_round = False
                member = _next_member(members)
                if member in holders:
                    continue
                current[member].setdefault(tp[0], set()).add(tp[1])
                held = self._held(member)
                held.add(tp)
                to_make -= 1
                assigned_this_round = True
                if len(held) >= self.desired[member]:
                    members.remove()
            if not len(self.unfilled):
                break


class _Heterogeneous:
    """``SimpleHeterogeneousAssignmentBuilder``: topic by topic, among its subscribers."""

    def __init__(self, group: GroupSpec, topics: TopicDescriber, member_ids: Sequence[str]):
        self.members = len(member_ids)
        subscribed: JavaHashSet[uuid.UUID] = JavaHashSet(uuid_hash)
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        for index, member in enumerate(member_ids):
            for topic_id in group.members[member].subscribed_topic_ids:
                subscribed.add(topic_id)
                self.subscribers.setdefault(topic_id, []).append(index)
        self.topics = subscribed.order()
        self.partitions: dict[uuid.UUID, int] = {}
        for topic_id in self.topics:
            count = topics.num_partitions(topic_id)
            if count == -1:
                raise _unknown_topic(topic_id)
            self.partitions[topic_id] = count

    def build(self, held: Held, current: Assignment) -> Assignment:
        for topic_id in self.topics:
            _TopicBuilder(
                topic_id, self.partitions[topic_id], self.subscribers[topic_id], self.members
            ).build(held, current)
        return current


class _TopicBuilder:
    """``TopicAssignmentPartialBuilder``: one topic's partitions among its subscribers."""

    def __init__(self, topic_id: uuid.UUID, partitions: int, subscribers: list[int], members: int):
        self.topic_id = topic_id
        self.targets = range(partitions)
        self.subscribers = subscribers
        self.members = members
        self.sharing = _sharing(len(subscribers), partitions)
        self.desired = [0] * members
        counts = _desired_counts(self.sharing, partitions, len(subscribers))
        for k, member in enumerate(subscribers):
            self.desired[member] = counts[k]
        self.by_partition: dict[int, JavaHashSet[int]] = {}
        self.partition_order = _member_sets(sized_for(partitions))
        self.by_member: dict[int, JavaHashSet[int]] = {}
        self.member_order = _member_sets(sized_for(len(subscribers)))

    def _holders(self, partition: int, capacity: int | None = None) -> JavaHashSet[int]:
        holders = self.by_partition.get(partition)
        if holders is None:
            holders = self.by_partition[partition] = _member_sets(capacity)
        self.partition_order.compute_if_absent(partition)
        return holders

    def _held(self, member: int) -> JavaHashSet[int]:
        held = self.by_member.get(member)
        if held is None:
            held = self.by_member[member] = _member_sets()
        self.member_order.compute_if_absent(member)
        return held

    def build(self, held: Held, current: Assignment) -> None:
        topic_id = self.topic_id
        for member, listed in enumerate(held):
            for partition in listed.get(topic_id, ()):
                self._holders(partition).add(member)
                self._held(member).add(partition)
        self._revoke_overfilled(current)
        self._revoke_overshared(current)
        for partition in self.targets:
            self._holders(partition, sized_for(len(self.subscribers)))
        self._assign_remaining(current)

    def _revoke_overfilled(self, current: Assignment) -> None:
        for member in self.member_order.order():
            held = self.by_member[member]
            want = self.desired[member]
            for partition in held.order():
                if len(held) <= want:
                    break
                self.by_partition[partition].remove(member)
                held.remove(partition)
                current[member][self.topic_id].discard(partition)

    def _revoke_overshared(self, current: Assignment) -> None:
        for partition in self.partition_order.order():
            holders = self.by_partition[partition]
            count = len(holders)
            if count <= self.sharing:
                continue
            for member in holders.order():
                partitions = current[member].get(self.topic_id)
                if partitions is not None and partition in partitions:
                    partitions.remove(partition)
                    count -= 1
                    holders.remove(member)
                    self.by_member[member].remove(partition)
                if count <= self.sharing:
                    break

    def _assign_remaining(self, current: Assignment) -> None:
        unfilled = _member_sets(sized_for(self.members))
        for member in self.subscribers:
            held = self.by_member.get(member)
            if (0 if held is None else len(held)) < self.desired[member]:
                unfilled.add(member)
        members = JavaIterator(unfilled)
        assigned_this_round = False
        for partition in self.partition_order.order():
            holders = self.by_partition[partition]
            to_make = self.sharing - len(holders)
            while to_make > 0:
                if not members.has_next():
                    if not assigned_this_round:
                        break
                    members = JavaIterator(unfilled)
                    assigned_this_round = False
                member = _next_member(members)
                if member in holders:
                    continue
                current[member].setdefault(self.topic_id, set()).add(partition)
                held = self._held(member)
                held.add(partition)
                to_make -= 1
                assigned_this_round = True
                if len(held) >= self.desired[member]:
                    members.remove()
            if not len(unfilled):
                break


def _next_member(members: JavaIterator[int]) -> int:
    try:
        return members.next()
    except StopIteration:
        # Kafka's loop would throw NoSuchElementException here (every member filled while a
        # partition still wants one): refused rather than guessed.
        raise PartitionAssignorError(
            "simple assignor: no member left to take a partition that wants more members"
        ) from None
