"""Kafka 4's ``UniformHeterogeneousAssignmentBuilder``, line for line (members differ in what they
subscribe to).

Members keep their current target of every topic they still subscribe to. The partitions nobody
holds go, topic by topic in descending partitions-per-subscriber order (ties: fewer subscribers,
then topic id as Kafka's ``Uuid.compareTo``), each to the least loaded subscriber (ties: member
order). Then up to 16 passes over the topics of two or more subscribers move a topic's partitions
from its most loaded subscribers (the last partition of the member's run, runs ordered by member
then partition) to its least loaded ones, until their counts differ by at most one.
"""

from __future__ import annotations

import uuid

from coordkit.strategies.target_assignment import (
    GroupSpec,
    PartitionAssignorError,
    TargetAssignment,
    TopicDescriber,
    current_owners,
    java_uuid_key,
)

#: Kafka's cap on the balancing passes over the topics.
MAX_ITERATION_COUNT = 16


class _Balancer:
    """Kafka's ``MemberAssignmentBalancer``: the least loaded range grows rightwards over members
    sorted by load, the most loaded range leftwards."""

    def __init__(self, sizes: list[int]):
        self.sizes = sizes
        self.members: list[int] = []
        self.least_end = 0
        self.least_count = -1
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_count = 1
        self.next_most = -1

    def initialize(self, members: list[int]) -> int:
        sizes = self.sizes
        self.members = sorted(members, key=lambda m: (sizes[m], m))
        first, last = self.members[0], self.members[-1]
        self.least_end = 0
        self.least_count = sizes[first] - 1
        self.next_least = 0
        self.most_start = self.most_end = len(self.members)
        self.most_count = sizes[last] + 1
        self.next_most = len(self.members) - 1
        return sizes[last] - sizes[first]

    def next_least_loaded(self) -> int:
        if self.next_least >= self.least_end:
            self.least_count += 1
            members, sizes = self.members, self.sizes
            while (
                self.least_end < len(members) and sizes[members[self.least_end]] == self.least_count
            ):
                self.least_end += 1
            self.next_least = 0
        member = self.members[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        members, sizes = self.members, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_count = sizes[members[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and sizes[members[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = members[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        members = self.members
        member = members[self.next_most + 1]
        members[self.next_most + 1] = members[self.most_end - 1]
        members[self.most_end - 1] = member
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class _Builder:
    def __init__(self, group: GroupSpec, topics: TopicDescriber):
        self.group = group
        self.topics = topics
        self.member_ids = group.member_ids()
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        for index, member in enumerate(self.member_ids):
            for topic_id in group.members[member].subscribed_topic_ids:
                if topics.num_partitions(topic_id) == -1:
                    raise PartitionAssignorError(
                        f"Members are subscribed to topic {topic_id} which doesn't exist in the "
                        "topic metadata."
                    )
                self.subscribers.setdefault(topic_id, []).append(index)
        self.sizes = [0] * len(self.member_ids)
        self.owners = {t: [-1] * topics.num_partitions(t) for t in self.subscribers}
        self.target: list[dict[uuid.UUID, set[int]]] = [{} for _ in self.member_ids]

    def _topic_key(self, topic_id: uuid.UUID) -> tuple[float, int, tuple[int, int]]:
        subscribers = len(self.subscribers[topic_id])
        ratio = self.topics.num_partitions(topic_id) / subscribers
        return -ratio, subscribers, java_uuid_key(topic_id)

    def build(self) -> TargetAssignment:
        if self.subscribers:
            self._keep_current_target()
            unassigned = {
                t: [p for p, owner in enumerate(owners) if owner == -1]
                for t, owners in self.owners.items()
            }
            self._assign({t: ps for t, ps in unassigned.items() if ps})
            balanceable = [t for t, members in self.subscribers.items() if len(members) >= 2]
            if balanceable:
                self._balance(balanceable)
        return TargetAssignment(
            {
                member: {t: tuple(sorted(ps)) for t, ps in self.target[i].items()}
                for i, member in enumerate(self.member_ids)
            }
        )

    def _keep_current_target(self) -> None:
        for index, member in enumerate(self.member_ids):
            spec = self.group.members[member]
            subscribed = set(spec.subscribed_topic_ids)
            for topic_id, partitions in spec.assignment.items():
                if topic_id not in subscribed:
                    continue
                self.sizes[index] += len(partitions)
                owners = self.owners[topic_id]
                for p in partitions:
                    owners[p] = index
                self.target[index][topic_id] = set(partitions)

    def _assign(self, unassigned: dict[uuid.UUID, list[int]]) -> None:
        balancer = _Balancer(self.sizes)
        for topic_id in sorted(unassigned, key=self._topic_key):
            balancer.initialize(self.subscribers[topic_id])
            for partition in unassigned[topic_id]:
                self._move(topic_id, partition, balancer.next_least_loaded())

    def _move(self, topic_id: uuid.UUID, partition: int, member: int) -> None:
        owners = self.owners[topic_id]
        old = owners[partition]
        if old != -1:
            held = self.target[old].get(topic_id)
            if held is not None:
                held.discard(partition)
                if not held:
                    del self.target[old][topic_id]
            self.sizes[old] -= 1
        self.target[member].setdefault(topic_id, set()).add(partition)
        owners[partition] = member
        self.sizes[member] += 1

    def _balance(self, topic_ids: list[uuid.UUID]) -> None:
        ordered = sorted(topic_ids, key=self._topic_key)
        last_rebalanced = -1
        balancer = _Balancer(self.sizes)
        for _ in range(MAX_ITERATION_COUNT):
            for position, topic_id in enumerate(ordered):
                if position == last_rebalanced:
                    return
                moved = self._balance_topic(topic_id, balancer)
                if moved > 0 or last_rebalanced == -1:
                    last_rebalanced = position

    def _balance_topic(self, topic_id: uuid.UUID, balancer: _Balancer) -> int:
        moved = 0
        if balancer.initialize(self.subscribers[topic_id]) <= 1:
            return moved
        owners = self.owners[topic_id]
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(partitions):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1
        while not balancer.is_balanced():
            giver = -1
            while True:
                giver = balancer.next_most_loaded()
                if giver == -1:
                    break
                if giver not in end or end[giver] - start[giver] <= 0:
                    balancer.exclude_most_loaded()
                    continue
                break
            if giver == -1:
                break
            partition = partitions[end[giver] - 1]
            end[giver] -= 1
            receiver = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self._move(topic_id, partition, receiver)
            moved += 1
        return moved


def heterogeneous_assignment(group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
    """Kafka's heterogeneous builder, whatever the subscriptions (Kafka's tests force it so)."""
    current_owners(group, topics)  # a malformed current target fails here, in one line
    return _Builder(group, topics).build()
