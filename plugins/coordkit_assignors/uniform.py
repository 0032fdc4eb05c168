"""The server-side ``uniform`` assignor of KIP-848 (Kafka's group coordinator).

Balance first (member counts differ by at most one where subscriptions allow), then stickiness.
Here "owned" is the member's current assignment; a partition claimed by several members stays with
the highest generation, and with nobody on a tie.

Homogeneous subscriptions (every member subscribes to every topic that has partitions):
``N`` partitions over ``M`` members give ``N // M`` each and ``N % M`` members one more. Members keep
what they own, lowest partition index first, up to their quota; the rest is dealt in partition order
to members below quota, in member order. Kafka hands the ``N % M`` larger quotas to the first
members it iterates; here they go first to members that own more than ``N // M`` (then in member
order), which never moves more partitions than Kafka's choice and usually fewer.

Heterogeneous subscriptions (Kafka's ``UniformHeterogeneousAssignmentBuilder``): members keep every
owned partition of a topic they still subscribe to; the unassigned partitions, topic by topic in
descending partitions-per-subscriber order (ties: fewer subscribers, then topic name), go to the
least loaded subscriber (ties: member order); then up to 16 balancing passes move a topic's
partitions from its most loaded subscribers to its least loaded ones until their counts differ by at
most one. From a member giving up a partition the last one is taken, in an order where the
partitions the member owned before come first, so partitions it only received this round move
before ones it already had (Kafka takes the highest partition number).
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from coordkit.strategies.assignment import (
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
    java_string_key,
)
from coordkit_assignors.ordering import GroupLayout, IntArray

#: Kafka's cap on the balancing passes over the topics (each roughly halves the imbalance).
MAX_BALANCING_PASSES = 16


class UniformAssignor:
    name: ClassVar[str] = "uniform"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)
    #: Balance first, then stickiness: when a member leaves, only its partitions move.
    sticky: ClassVar[bool] = True

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        layout = GroupLayout(group)
        if layout.is_homogeneous():
            return _homogeneous(layout)
        return _HeterogeneousBuilder(layout).build()


def homogeneous_assignment(group: GroupSubscription) -> GroupAssignment:
    """The homogeneous builder alone (every member must subscribe to every topic with partitions)."""
    layout = GroupLayout(group)
    if not layout.is_homogeneous():
        raise ValueError("the homogeneous builder needs identical subscriptions")
    return _homogeneous(layout)


def heterogeneous_assignment(group: GroupSubscription) -> GroupAssignment:
    """The heterogeneous builder, whatever the subscriptions (Kafka's tests force it this way)."""
    return _HeterogeneousBuilder(GroupLayout(group)).build()


def _homogeneous(layout: GroupLayout) -> GroupAssignment:
    if not layout.subscribers:
        return layout.result_from_owners(np.empty(0, np.int64), np.empty(0, np.int64))
    size = layout.size
    subscribed = layout.subscribed_mask()
    total = int(subscribed.sum())
    min_quota, extra = divmod(total, size)
    previous = layout.previous_owners()

    owned = np.flatnonzero(previous >= 0)  # ascending partition index
    owned_by = previous[owned]
    owned_counts = np.bincount(owned_by, minlength=size)
    quota = np.full(size, min_quota, dtype=np.int64)
    if extra:
        members = np.arange(size)
        rich = owned_counts > min_quota
        quota[np.concatenate((members[rich], members[~rich]))[:extra]] += 1

    # Rank each owned partition within its owner's list; keep the first `quota` of each owner.
    # (A stable sort on 16-bit keys is a radix sort: members rarely number 65,536.)
    keys = owned_by.astype(np.uint16) if size <= 1 << 16 else owned_by
    order = np.argsort(keys, kind="stable")
    owned, owned_by = owned[order], owned_by[order]
    run_starts = np.concatenate(([0], np.cumsum(owned_counts)[:-1]))
    rank = np.arange(owned.size) - run_starts[owned_by]
    keep = rank < quota[owned_by]
    kept, kept_by = owned[keep], owned_by[keep]

    free_mask = subscribed.copy()
    free_mask[kept] = False
    free = np.flatnonzero(free_mask)
    room = quota - np.bincount(kept_by, minlength=size)
    fill_by = np.repeat(np.arange(size, dtype=np.int64), room)  # members below quota, member order
    # Every partition once, in index order (no sort: each is either kept or free).
    owner_of = np.full(layout.space.total, -1, dtype=np.int64)
    owner_of[kept] = kept_by
    owner_of[free] = fill_by
    indices = np.flatnonzero(owner_of >= 0)
    return layout.result_from_owners(indices, owner_of[indices])


class _Balancer:
    """Kafka's ``MemberAssignmentBalancer``: the least and most loaded ranges of one topic's subscribers.

    Members sorted by count; the least loaded range grows rightwards and the most loaded range
    leftwards as partitions are handed out or taken away, so picking the next member is O(1).
    """

    def __init__(self, sizes: npt.NDArray[np.int64]):
        self.sizes = sizes  # shared with the builder, which updates it as partitions move
        self.sorted: list[int] = []
        self.least_end = 0
        self.least_count = 0
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_count = 0
        self.next_most = 0

    def initialize(self, members: IntArray, needed: int | None = None) -> int:
        """Start over with ``members`` (ascending positions); returns their count spread.

        :param needed: when only ``needed`` least loaded picks will follow (no most loaded ones),
            only the ``needed + 1`` least loaded members are ordered: the range of equally loaded
            members cannot wrap around within that many picks, so the rest is never looked at.
        """
        counts = self.sizes[members]
        if needed is not None and needed + 1 < len(members):
            # Unique keys in (count, position) order; partial selection, then order the few.
            keys = counts * len(members) + np.arange(len(members))
            chosen = np.argpartition(keys, needed)[: needed + 1]
            order = chosen[np.argsort(keys[chosen])]
        else:
            order = np.argsort(counts, kind="stable")  # ties keep ascending positions
        self.sorted = ordered = members[order].tolist()
        n = len(ordered)
        self.least_end = 0
        self.least_count = int(counts[order[0]]) - 1
        self.next_least = 0
        self.most_start = n
        self.most_end = n
        self.most_count = int(counts[order[-1]]) + 1
        self.next_most = n - 1
        return int(counts.max() - counts.min())

    def next_least_loaded(self) -> int:
        ordered, sizes = self.sorted, self.sizes
        if self.next_least >= self.least_end:
            # Everyone in the range got one: raise its level and take in members at that level.
            self.least_count += 1
            while (
                self.least_end < len(ordered) and sizes[ordered[self.least_end]] == self.least_count
            ):
                self.least_end += 1
            self.next_least = 0
        member = ordered[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        ordered, sizes = self.sorted, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # The range emptied through exclusions: restart from the next member's count.
                self.most_count = sizes[ordered[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and sizes[ordered[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = ordered[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drop the member last returned by :meth:`next_most_loaded` (it has nothing to give)."""
        ordered = self.sorted
        i = self.next_most + 1
        ordered[i], ordered[self.most_end - 1] = ordered[self.most_end - 1], ordered[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class _HeterogeneousBuilder:
    def __init__(self, layout: GroupLayout):
        self.layout = layout
        self.space = layout.space
        previous = layout.previous_owners()
        self.previous: list[int] = previous.tolist()
        self.owner: list[int] = list(self.previous)
        self.sizes = np.bincount(previous[previous >= 0], minlength=layout.size).astype(np.int64)
        self._arrays: dict[int, IntArray] = {}  # subscriber lists as arrays, by list identity

    def _subscribers(self, topic: str) -> IntArray:
        subscribers = self.layout.subscribers[topic]
        array = self._arrays.get(id(subscribers))
        if array is None:
            array = self._arrays[id(subscribers)] = np.asarray(subscribers, dtype=np.int64)
        return array

    def _topic_order(self, topics: list[str]) -> list[str]:
        def key(topic: str) -> tuple[Fraction, int, bytes]:
            subscribers = len(self.layout.subscribers[topic])
            return (
                -Fraction(self.space.count(topic), subscribers),
                subscribers,
                java_string_key(topic),
            )

        return sorted(topics, key=key)

    def _move(self, index: int, member: int) -> None:
        old = self.owner[index]
        if old != -1:
            self.sizes[old] -= 1
        self.owner[index] = member
        self.sizes[member] += 1

    def build(self) -> GroupAssignment:
        layout, space = self.layout, self.space
        balancer = _Balancer(self.sizes)
        unassigned: dict[str, list[int]] = {}
        for topic in layout.subscribers:
            base = space.base(topic)
            free = [i for i in range(base, base + space.count(topic)) if self.owner[i] == -1]
            if free:
                unassigned[topic] = free
        for topic in self._topic_order(list(unassigned)):
            balancer.initialize(self._subscribers(topic), needed=len(unassigned[topic]))
            for index in unassigned[topic]:
                self._move(index, balancer.next_least_loaded())

        movable = [t for t, subs in layout.subscribers.items() if len(subs) >= 2]
        if movable:
            self._balance(self._topic_order(movable), balancer)

        mask = layout.subscribed_mask()
        indices = np.flatnonzero(mask)
        owners = np.asarray(self.owner, dtype=np.int64)[mask]
        return layout.result_from_owners(indices, owners)

    def _balance(self, topics: list[str], balancer: _Balancer) -> None:
        last_changed = -1
        for _ in range(MAX_BALANCING_PASSES):
            for position, topic in enumerate(topics):
                if position == last_changed:
                    return  # a whole round over the topics without a move
                if self._balance_topic(topic, balancer) > 0 or last_changed == -1:
                    last_changed = position

    def _balance_topic(self, topic: str, balancer: _Balancer) -> int:
        if balancer.initialize(self._subscribers(topic)) <= 1:
            return 0  # already balanced
        base, count = self.space.base(topic), self.space.count(topic)
        owner, previous = self.owner, self.previous
        # Group the topic's partitions by owner; within an owner, partitions it owned before the
        # rebalance first, so the one taken from the end is preferably a newly received one.
        partitions = sorted(
            range(base, base + count), key=lambda i: (owner[i], owner[i] != previous[i], i)
        )
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for position, index in enumerate(partitions):
            start.setdefault(owner[index], position)
            end[owner[index]] = position + 1

        moved = 0
        while not balancer.is_balanced():
            donor = -1
            while True:
                donor = balancer.next_most_loaded()
                if donor == -1:
                    break
                if end.get(donor, 0) - start.get(donor, 0) <= 0:
                    balancer.exclude_most_loaded()
                    continue
                break
            if donor == -1:
                break
            end[donor] -= 1
            index = partitions[end[donor]]
            receiver = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self._move(index, receiver)
            moved += 1
        return moved
